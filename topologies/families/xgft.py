"""Partially populated folded Clos networks as extended generalised fat trees (XGFT).

Every Clos family of this package that is sized "for any number of servers"
(``fattree:servers=N,radix=R``, ``railopt``, ``multiplane``) is an XGFT
``XGFT(h; m_1..m_h; w_1..w_h)`` (Ohring, Ibel, Das and Kumar, "On generalized
fat trees", IPPS'95): a node of level ``l-1`` has ``w_l`` parents, a node of
level ``l`` has ``m_l`` children; level 0 are the endpoints (NPUs).  The k-ary
fat-tree of Al-Fares et al. is ``XGFT(3; k/2, k/2, k; 1, k/2, k/2)``; a
leaf-spine of leaves with ``m`` host ports and ``u`` uplinks is
``XGFT(2; m, L; 1, u)``; ``P`` independent planes are ``w_1 = P``.

Labels.  An endpoint occupies a *slot* ``s`` in ``0 .. prod(m)-1``; its digits
``a_1 = s mod m_1, a_2 = (s // m_1) mod m_2, ...`` say which child it is at each
level.  A level-``l`` switch is labelled by the subtree it heads, ``A = s //
M_l`` with ``M_l = m_1 ... m_l``, and by its parent choices ``B = b_1 + w_1 (b_2 +
w_2 (...))`` in ``0 .. W_l - 1`` with ``W_l = w_1 ... w_l``.  Node ``(A, B)`` of
level ``l-1`` is cabled to nodes ``(A // m_l, B + W_{l-1} b_l)`` of level ``l`` for
every ``b_l``.

Partial population (what real Clos networks are): only the slots in use get
endpoints and only the switches with at least one endpoint below them are
built, so a fabric for 35, 1000 or 100,000 servers has exactly the leaves,
spines and cores it needs.  Above the leaves, where a subtree has only ``c <
m_l`` children, ``f`` logical switches are *merged* into one physical switch
joined to each child by ``f`` parallel cables (a 2-leaf fabric of 32-uplink
leaves needs one 64-port spine, not 32 spines using two ports each); ``f`` is the
largest divisor of ``w_l`` with ``c f <= m_l``.  The merged switch keeps one
logical switch's uplinks, which still match its down ports, so a non-blocking
fabric stays non-blocking.  This is the sizing of NVIDIA's DGX SuperPOD
reference architectures (B200 RA, "Compute fabric" table: 4 SUs = 32 leaves and
16 spines; 16 SUs = 128 leaves, 128 spines, 64 cores), which the tests check.

Numbering: endpoints first (their ids are given by the caller), then the
switches level by level, within a level by subtree then ``B``.  The builder
records ``params["switch_levels"]`` (first switch id and count per level,
leaves first), which :mod:`topologies.routing` uses for up/down routing, and
``node_attrs["clos_rank"]`` (each NPU's slot), the order D-mod-k spreads
destinations by.

Complexity: ``O(links)`` time and memory (a 100,000-server 3-tier fabric of
radix 64 builds in well under a second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codesign.errors import invalid
from topologies.builder import LinkBuilder

__all__ = ["Xgft", "xgft_links", "fattree_shape", "largest_merge"]


@dataclass(frozen=True)
class Xgft:
    """Shape of an extended generalised fat tree.

    Attributes
    ----------
    m : tuple of int
        Children per node at levels ``1 .. h`` (``m[0]`` endpoints per leaf).
    w : tuple of int
        Parents per node at levels ``0 .. h-1`` (``w[0]`` uplinks per endpoint:
        planes; ``w[1]`` uplinks per leaf ...).
    """

    m: tuple[int, ...]
    w: tuple[int, ...]

    @property
    def levels(self) -> int:
        return len(self.m)

    @property
    def capacity(self) -> int:
        """Endpoint slots, ``prod(m)``."""
        return math.prod(self.m)

    def M(self, level: int) -> int:
        """``m_1 ... m_level`` (endpoints under one level-``level`` subtree)."""
        return math.prod(self.m[:level])


def largest_merge(w_top: int, children: int, radix: int) -> int:
    """Largest divisor ``f`` of ``w_top`` with ``children * f <= radix`` (>= 1)."""
    best = 1
    for f in range(1, w_top + 1):
        if w_top % f == 0 and children * f <= radix:
            best = f
    return best


def xgft_links(b: LinkBuilder, shape: Xgft, slots: np.ndarray, npu_ids: np.ndarray,
               first_switch: int, *, bandwidth: tuple[float, ...], latency: tuple[float, ...],
               merge: bool = True) -> tuple[list[list[int]], int, list[int]]:
    """Add the cables of a partially populated XGFT to ``b``.

    Parameters
    ----------
    b : LinkBuilder
        Receives the cables.
    shape : Xgft
        ``m`` and ``w`` per level.
    slots : ndarray of int
        Distinct slots in use, ``0 <= slot < shape.capacity``.
    npu_ids : ndarray of int
        Node id of the endpoint in each slot.
    first_switch : int
        Node id of the first switch of this XGFT.
    bandwidth, latency : tuple of float
        Per level boundary ``1 .. h`` (endpoint-leaf first): bytes/s and seconds.
    merge : bool, optional
        Merge the switches of partly filled subtrees (module docstring): at level
        ``l >= 2``, with at most ``c`` children present in any subtree, ``f`` logical
        switches become one physical switch joined to each child by ``f`` parallel
        cables, ``f`` the largest divisor of ``w_l`` with ``c f <= m_l``.

    Returns
    -------
    levels : list of [first_id, count]
        Switch ids per level (leaves first).
    switches : int
        Switches added.
    merges : list of int
        Merge factor per level (1 for the leaves).
    """
    slots = np.asarray(slots, dtype=np.int64)
    order = np.argsort(slots)
    slots, npu_ids = slots[order], np.asarray(npu_ids, dtype=np.int64)[order]
    h = shape.levels
    # Present subtrees of every level: A_l = unique(slots // M_l).
    present = [slots] + [np.unique(slots // shape.M(l)) for l in range(1, h + 1)]
    merges = [1]
    for l in range(2, h + 1):
        c = int(np.bincount(present[l - 1] // shape.m[l - 1]).max())
        merges.append(largest_merge(shape.w[l - 1], c, shape.m[l - 1]) if merge else 1)
    w_eff = [shape.w[l] // merges[l] for l in range(h)]       # distinct parents per level
    W = np.cumprod([1] + w_eff).tolist()                       # W'_0 .. W'_h
    offsets, counts = [], []
    nxt = first_switch
    for l in range(1, h + 1):
        n_l = present[l].size * W[l]
        offsets.append(nxt)
        counts.append(n_l)
        nxt += n_l

    def ids(level: int, a: np.ndarray, bsum: np.ndarray) -> np.ndarray:
        if level == 0:
            return npu_ids[np.searchsorted(slots, a)]
        rank = np.searchsorted(present[level], a)
        return offsets[level - 1] + rank * W[level] + bsum

    for l in range(1, h + 1):
        a, bprev, bl = np.meshgrid(present[l - 1], np.arange(W[l - 1]), np.arange(w_eff[l - 1]),
                                   indexing="ij")
        a, bprev, bl = a.ravel(), bprev.ravel(), bl.ravel()
        child = ids(l - 1, a, bprev)
        parent = ids(l, a // shape.m[l - 1], bprev + W[l - 1] * bl)
        b.cable(child, parent, bandwidth[l - 1], latency[l - 1], count=merges[l - 1])
    return [[o, c] for o, c in zip(offsets, counts)], nxt - first_switch, merges


def fattree_shape(endpoints: int, radix: int, *, oversub_down: int, oversub_up: int,
                  tiers: int | None = None, planes: int = 1, field: str = "fattree"
                  ) -> Xgft:
    """The XGFT of a partially populated fat tree of radix-``radix`` switches.

    Leaves have ``d = radix * p / (p + q)`` endpoint ports and ``u = radix - d``
    uplinks (oversubscription ``p/q = d/u``); every switch above the leaves has
    ``radix/2`` down and ``radix/2`` up ports (full bisection above the leaves); a
    top switch has ``radix`` down ports.  ``tiers`` defaults to the fewest levels
    whose capacity ``d (radix/2)^(h-2) radix`` holds ``endpoints`` (1 tier: one
    switch of ``radix`` ports).

    Parameters
    ----------
    endpoints : int
        Endpoints to hold.
    radix : int
        Ports per switch (even, >= 4 for more than one tier).
    oversub_down, oversub_up : int
        Oversubscription ratio ``p/q`` of the leaves in lowest terms.
    tiers : int, optional
        Switch levels (1..5); default the fewest that hold ``endpoints``.
    planes : int, optional
        Independent planes (uplinks per endpoint, ``w_1``).
    field : str
        Family name for error messages.

    Raises
    ------
    InvalidSpecError
        Radix not splittable by the ratio, or too few tiers for the endpoints.

    Examples
    --------
    >>> fattree_shape(128, 8, oversub_down=1, oversub_up=1)     # the k = 8 fat tree
    Xgft(m=(4, 4, 8), w=(1, 4, 4))
    >>> fattree_shape(1000, 64, oversub_down=1, oversub_up=1).m
    (32, 64)
    """
    p, q = oversub_down, oversub_up
    if (radix * p) % (p + q):
        raise invalid(f"{field} radix", radix,
                      f"a multiple of {p + q} so that radix x oversub / (1 + oversub) leaf ports "
                      "face the endpoints")
    d = radix * p // (p + q)
    u = radix - d
    if tiers is None:
        if endpoints <= radix:
            tiers = 1
        else:
            tiers = 2
            while d * (radix // 2) ** (tiers - 2) * radix < endpoints:
                tiers += 1
                if tiers > 5:
                    raise invalid(f"{field} size", f"{endpoints} endpoints at radix {radix}",
                                  "at most 5 tiers; use a larger radix")
    if tiers == 1:
        if endpoints > radix:
            raise invalid(f"{field} tiers", 1, f"more tiers: one switch has only {radix} ports "
                          f"for {endpoints} endpoints")
        return Xgft((radix,), (planes,))
    if tiers > 2 and radix % 2:
        raise invalid(f"{field} radix", radix, "an even number of ports for 3 or more tiers")
    if u < 1 or d < 1:
        raise invalid(f"{field} oversub", f"{p}/{q}", f"a ratio leaving both endpoint ports "
                      f"and uplinks on a radix-{radix} leaf")
    m = (d,) + (radix // 2,) * (tiers - 2) + (radix,)
    w = (planes, u) + (radix // 2,) * (tiers - 2)
    cap = math.prod(m)
    if cap < endpoints:
        raise invalid(f"{field} tiers", tiers,
                      f"more tiers or a larger radix: {tiers} tiers of radix {radix} hold "
                      f"{cap} endpoints, not {endpoints}")
    return Xgft(m, w)
