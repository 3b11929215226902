"""Routing on Clos fabrics as deployed: up/down D-mod-k, hashed ECMP, plane spraying, rings.

A Clos fabric (``params["switch_levels"]``: leaves, spines, cores ... as id ranges,
recorded by every Clos builder of :mod:`topologies.families`) is routed *up/down*: a
packet climbs from its source to the lowest level where its destination is below,
then descends.  What differs between deployments is which uplink each hop takes:

* ``"dmodk"`` -- deterministic destination-mod-k routing (Zahavi, "D-Mod-K Routing
  Providing Non-Blocking Traffic for Shift Permutations on Real Life Fat Trees",
  Technion CCIT report 776, 2010; Gomez et al., "Deterministic versus adaptive
  routing in fat-trees", IPDPS'07), what InfiniBand subnet managers (OpenSM
  ``ftree``) and static ECMP-free Ethernet fabrics install: at level ``l`` the uplink
  is ``floor(d / P_l) mod k_l``, where ``d`` is the destination's position in the
  tree (``node_attrs["clos_rank"]``, default its id), ``k_l`` the node's number of
  uplinks and ``P_l = k_0 k_1 ... k_{l-1}``.  Destinations are spread evenly over
  uplinks, every destination has a single root switch, and a *shift permutation*
  (``i -> i + c``) is routed without two flows on one link on a full XGFT.
* ``"ecmp"`` -- hashed equal-cost multipath, what Ethernet switches do by default:
  every flow (pair) takes a uniformly hashed uplink at each level (seeded, so a
  ``seed`` is a different hash function).  Flows collide: ``n`` flows on ``n``
  uplinks leave about ``n / e`` uplinks idle (balls into bins), which is why
  hashed ECMP loses bandwidth on permutation traffic.
* ``"spray"`` -- every pair splits evenly over the endpoint's planes/ports (the
  first hop), each part routed D-mod-k above: multi-plane fabrics with packet
  spraying or NCCL's multi-port channels (:func:`spray_paths`).

The down path is the mirror image of the destination's own climb with the same
choices, so the two climbs meet exactly at the lowest common ancestor.  Traffic
between two GPUs of one scale-up domain (``params["scaleup_switches"]``) stays on
the domain's NVLink crossbar.

Ring orders (:func:`ring_order`): NCCL builds a ring domain by domain and, on
rail-optimised fabrics, so that every inter-server hop joins two NICs of the same
rail (each server entered and left on the same rail: "snake" order inside the
domains); same-rank GPUs (one rail) are ordered as the leaves hold them, so
consecutive members share a leaf.

Complexity: building the structure O(L log L) for L links; routing ``k`` pairs
O(k x tiers) vectorised, no all-pairs tables (works for 100,000-server fabrics).

Examples
--------
>>> from topologies.registry import from_spec
>>> import numpy as np
>>> t = from_spec("fattree:k=8")
>>> src = np.arange(128); dst = (src + 16) % 128          # a shift permutation
>>> ptr, links = clos_paths(t, src, dst)
>>> int(np.bincount(links).max())                          # no link carries two flows
1
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from codesign.errors import InfeasibleError, invalid

__all__ = ["ROUTING_METHODS", "ClosStructure", "clos_structure", "is_clos", "clos_paths",
           "spray_paths", "ring_order", "max_link_flows"]

#: Uplink choice rules of :func:`clos_paths`.
ROUTING_METHODS = ("dmodk", "ecmp")

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ClosStructure:
    """What up/down routing needs to know about a Clos topology.

    Attributes
    ----------
    level : ndarray of int
        Per node: 0 for NPUs, 1.. for Clos switches (leaves = 1), -1 for scale-up
        crossbars.
    up_ptr, up_links : ndarray of int
        CSR of each node's uplinks (links to the next level), sorted by (neighbour
        id, link id).
    partner : ndarray of int
        The opposite link of every link (same cable).
    stride : ndarray of int
        ``P_l`` per level (D-mod-k divisor).
    rank : ndarray of int
        Each NPU's position in the tree (``node_attrs["clos_rank"]``).
    domain : ndarray of int or None
        Scale-up domain of each NPU (``None`` without scale-up).
    su_up, su_down : ndarray of int or None
        Per NPU, its link to / from its crossbar.
    """

    level: np.ndarray
    up_ptr: np.ndarray
    up_links: np.ndarray
    partner: np.ndarray
    stride: np.ndarray
    rank: np.ndarray
    domain: np.ndarray | None
    su_up: np.ndarray | None
    su_down: np.ndarray | None

    @property
    def tiers(self) -> int:
        return int(self.level.max())


def is_clos(topology) -> bool:
    """Whether ``topology`` carries a Clos description (``params["switch_levels"]``)."""
    return "switch_levels" in getattr(topology, "params", {})


def _partner(topology) -> np.ndarray:
    """Opposite link of every directed link (k-th parallel u->v pairs with k-th v->u)."""
    n = topology.n_nodes
    src, dst = topology.src.astype(np.int64), topology.dst.astype(np.int64)
    key = src * n + dst
    order = np.lexsort((np.arange(src.size), key))
    sk = key[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    rank = np.empty(src.size, dtype=np.int64)
    rank[order] = np.arange(src.size) - np.repeat(starts, np.diff(np.r_[starts, sk.size]))
    width = int(rank.max()) + 1 if rank.size else 1
    combo = key * width + rank
    rev = (dst * n + src) * width + rank
    corder = np.argsort(combo)
    pos = np.searchsorted(combo[corder], rev)
    pos = np.minimum(pos, combo.size - 1)
    found = combo[corder][pos] == rev
    if not np.all(found):
        i = int(np.flatnonzero(~found)[0])
        raise invalid(f"{topology.name} link {i}", f"{src[i]}->{dst[i]}",
                      "a cable (a link back the other way) for up/down routing")
    return corder[pos]


def clos_structure(topology) -> ClosStructure:
    """The (cached) :class:`ClosStructure` of a Clos topology.

    Raises
    ------
    InvalidSpecError
        If the topology has no ``switch_levels`` (not a Clos family), or a node's
        uplinks are not uniform enough to route (an NPU without a leaf).
    """
    hit = _CACHE.get(topology)
    if hit is not None:
        return hit
    if not is_clos(topology):
        raise invalid("up/down routing topology", topology.name,
                      "a Clos family with params['switch_levels'] (fattree, leafspine, railopt, "
                      "multiplane); use shortest-path routing on other networks")
    n_nodes, npus = topology.n_nodes, topology.npus
    level = np.full(n_nodes, -1, dtype=np.int64)
    level[:npus] = 0
    for i, (first, count) in enumerate(topology.params["switch_levels"]):
        level[first:first + count] = i + 1
    src, dst = topology.src.astype(np.int64), topology.dst.astype(np.int64)
    up = (level[src] >= 0) & (level[dst] == level[src] + 1)
    ids = np.flatnonzero(up)
    ids = ids[np.lexsort((ids, dst[ids], src[ids]))]
    counts = np.bincount(src[ids], minlength=n_nodes)
    up_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if np.any(counts[:npus] == 0):
        bad = int(np.flatnonzero(counts[:npus] == 0)[0])
        raise invalid(f"{topology.name} NPU {bad}", "no uplink", "every NPU cabled to a leaf")
    tiers = int(level.max())
    deg = [int(counts[level == l].max()) if np.any(level == l) else 1 for l in range(tiers)]
    stride = np.cumprod([1] + deg).astype(np.int64)
    rank = np.asarray(topology.node_attrs.get("clos_rank", np.arange(npus)), dtype=np.int64)
    domain = su_up = su_down = None
    partner = _partner(topology)
    if "scaleup_switches" in topology.params:
        first, count = topology.params["scaleup_switches"]
        to_x = (src < npus) & (dst >= first) & (dst < first + count)
        su_up = np.full(npus, -1, dtype=np.int64)
        su_up[src[to_x]] = np.flatnonzero(to_x)
        su_down = partner[su_up]
        domain = dst[su_up] - first
    out = ClosStructure(level, up_ptr, ids, partner, stride, rank, domain, su_up, su_down)
    _CACHE[topology] = out
    return out


def _hash(src: np.ndarray, dst: np.ndarray, level: int, seed: int) -> np.ndarray:
    """A 64-bit mix of (src, dst, level, seed): per-flow ECMP hash (splitmix64 finaliser)."""
    h = (src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
         ^ dst.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
         ^ np.uint64(((level * 0x94D049BB + seed) * 0xD6E8FEB86659FD93) & 0xFFFFFFFFFFFFFFFF))
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


def _walk(topology, cs: ClosStructure, src: np.ndarray, dst: np.ndarray, method: str,
          seed: int, first_choice: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Up/down paths of pairs that are not inside one scale-up domain (CSR)."""
    k = src.size
    x, y = src.copy(), dst.copy()
    key = cs.rank[dst]
    ups: list[np.ndarray] = []      # per step: (pair index, link) of the source climb
    downs: list[np.ndarray] = []    # per step: mirrored links of the destination climb
    owners: list[np.ndarray] = []
    active = np.flatnonzero(x != y)
    lvl = 0
    while active.size:
        if lvl >= cs.stride.size:
            i = int(active[0])
            raise InfeasibleError(f"{topology.name}: up/down climbs from {src[i]} and {dst[i]} "
                                  "do not meet at the top of the Clos")
        xa, ya = x[active], y[active]
        nx = cs.up_ptr[xa + 1] - cs.up_ptr[xa]
        ny = cs.up_ptr[ya + 1] - cs.up_ptr[ya]
        if np.any(nx == 0) or np.any(ny == 0):
            i = int(active[np.flatnonzero((nx == 0) | (ny == 0))[0]])
            raise InfeasibleError(f"{topology.name}: no uplink above node {x[i]} or {y[i]} on "
                                  f"the way from {src[i]} to {dst[i]}")
        if lvl == 0 and first_choice is not None:
            pick = first_choice[active]
        elif method == "dmodk":
            # Sprayed flows fix the plane themselves: inside a plane D-mod-k counts
            # destinations without the plane digit.
            div = cs.stride[lvl] // (cs.stride[1] if first_choice is not None else 1)
            pick = key[active] // div
        else:
            pick = _hash(src[active], dst[active], lvl, seed).astype(np.int64, copy=False) \
                & np.int64(0x7FFFFFFFFFFF)
        lx = cs.up_links[cs.up_ptr[xa] + pick % nx]
        ly = cs.up_links[cs.up_ptr[ya] + pick % ny]
        ups.append(lx)
        downs.append(cs.partner[ly])
        owners.append(active)
        x[active] = topology.dst[lx]
        y[active] = topology.dst[ly]
        active = active[x[active] != y[active]]
        lvl += 1
    if not owners:
        return np.zeros(k + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    n_steps = len(owners)
    owner = np.concatenate(owners + owners)
    links = np.concatenate(ups + downs)
    # Order: up steps ascending, then down steps descending (mirror).
    pos = np.concatenate([np.full(o.size, j) for j, o in enumerate(owners)]
                         + [np.full(o.size, 2 * n_steps - 1 - j) for j, o in enumerate(owners)])
    order = np.lexsort((pos, owner))
    counts = np.bincount(owner, minlength=k)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), links[order]


def _check_pairs(topology, src, dst) -> tuple[np.ndarray, np.ndarray]:
    src = np.atleast_1d(np.asarray(src, dtype=np.int64))
    dst = np.atleast_1d(np.asarray(dst, dtype=np.int64))
    if src.shape != dst.shape:
        raise invalid("route pairs", f"{src.size} sources and {dst.size} destinations",
                      "as many sources as destinations")
    bad = (src < 0) | (src >= topology.npus) | (dst < 0) | (dst >= topology.npus)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise invalid("route endpoint", f"{src[i]}->{dst[i]}",
                      f"NPU ids in 0..{topology.npus - 1}")
    return src, dst


def _merge(k: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
           ) -> tuple[np.ndarray, np.ndarray]:
    """Merge CSR path sets over disjoint pair subsets ``(pair ids, ptr, links)``."""
    counts = np.zeros(k, dtype=np.int64)
    for ids, ptr, _ in parts:
        counts[ids] = np.diff(ptr)
    out_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    links = np.empty(int(out_ptr[-1]), dtype=np.int64)
    for ids, ptr, lk in parts:
        lens = np.diff(ptr)
        if lk.size:
            dest = np.repeat(out_ptr[ids], lens) + (np.arange(lk.size) - np.repeat(ptr[:-1], lens))
            links[dest] = lk
    return out_ptr, links


def clos_paths(topology, src, dst, *, method: str = "dmodk", seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """One up/down path per pair (module docstring), as CSR ``(ptr, links)``.

    Parameters
    ----------
    topology : Topology
        A Clos family (``params["switch_levels"]``).
    src, dst : array_like of int
        NPU ids; ``src == dst`` gives an empty path.
    method : {"dmodk", "ecmp"}
        Uplink choice: deterministic destination-mod-k or seeded per-flow hash.
    seed : int
        ECMP hash seed.

    Returns
    -------
    ptr, links : ndarray
        Path of pair ``i`` is ``links[ptr[i]:ptr[i+1]]`` (link ids, source to
        destination), the format of :class:`evaluators.netsim.Messages`.

    Raises
    ------
    InvalidSpecError
        Unknown method, bad ids, or not a Clos topology.
    """
    if method not in ROUTING_METHODS:
        raise invalid("routing method", method, f"one of {', '.join(ROUTING_METHODS)}")
    src, dst = _check_pairs(topology, src, dst)
    cs = clos_structure(topology)
    k = src.size
    if cs.domain is None:
        return _walk(topology, cs, src, dst, method, int(seed))
    local = (cs.domain[src] == cs.domain[dst]) & (src != dst)
    li, fi = np.flatnonzero(local), np.flatnonzero(~local)
    lptr = np.arange(0, 2 * li.size + 1, 2, dtype=np.int64)
    llinks = np.stack([cs.su_up[src[li]], cs.su_down[dst[li]]], axis=1).ravel()
    fptr, flinks = _walk(topology, cs, src[fi], dst[fi], method, int(seed))
    return _merge(k, [(li, lptr, llinks), (fi, fptr, flinks)])


def spray_paths(topology, src, dst) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every pair split evenly over its source's uplinks (planes), D-mod-k above.

    Returns
    -------
    ptr, links : ndarray
        CSR paths of the sub-flows.
    owner : ndarray of int
        Pair index of every sub-flow.
    share : ndarray of float
        Fraction of the pair's bytes on every sub-flow (sums to 1 per pair).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("multiplane:8,planes=2,radix=4")
    >>> ptr, links, owner, share = spray_paths(t, [0], [5])
    >>> owner.tolist(), share.tolist()
    ([0, 0], [0.5, 0.5])
    """
    src, dst = _check_pairs(topology, src, dst)
    cs = clos_structure(topology)
    local = np.zeros(src.size, dtype=bool) if cs.domain is None else \
        (cs.domain[src] == cs.domain[dst])
    local |= src == dst
    ways = np.where(local, 1, cs.up_ptr[src + 1] - cs.up_ptr[src])
    owner = np.repeat(np.arange(src.size), ways)
    choice = np.arange(owner.size) - np.repeat(np.cumsum(ways) - ways, ways)
    s, d = src[owner], dst[owner]
    fi = np.flatnonzero(~local[owner])
    li = np.flatnonzero(local[owner] & (s != d))
    parts = []
    if fi.size:
        fptr, flinks = _walk(topology, cs, s[fi], d[fi], "dmodk", 0,
                             first_choice=choice[fi])
        parts.append((fi, fptr, flinks))
    if li.size:
        lptr = np.arange(0, 2 * li.size + 1, 2, dtype=np.int64)
        parts.append((li, lptr, np.stack([cs.su_up[s[li]], cs.su_down[d[li]]], axis=1).ravel()))
    ptr, links = _merge(owner.size, parts)
    return ptr, links, owner, 1.0 / ways[owner]


def ring_order(topology, members) -> list[int]:
    """NCCL-like ring order of ``members`` (NPU ids) on a Clos fabric (module docstring).

    Members are grouped by scale-up domain (NVLink first), domains in tree order;
    inside a domain GPUs go by rail, alternately up and down ("snake"), so that
    every hop between domains joins two GPUs of the same rail.  Without scale-up
    domains members follow the tree (``clos_rank``), so ring neighbours share a
    leaf wherever the leaf holds both.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("railopt:4,gpus=2,radix=4")
    >>> ring_order(t, range(8))
    [0, 1, 3, 2, 4, 5, 7, 6]
    """
    m = np.unique(np.asarray(list(members), dtype=np.int64))
    if m.size and (m[0] < 0 or m[-1] >= topology.npus):
        raise invalid("ring members", m.tolist(), f"NPU ids in 0..{topology.npus - 1}")
    cs = clos_structure(topology)
    rank = cs.rank[m]
    if cs.domain is None:
        return m[np.argsort(rank, kind="stable")].tolist()
    dom = cs.domain[m]
    # Domains in the order of their lowest tree position; inside, by tree position.
    first = {}
    for d, r in zip(dom.tolist(), rank.tolist()):
        first[d] = min(first.get(d, r), r)
    dom_order = sorted(first, key=first.get)
    out: list[int] = []
    for j, d in enumerate(dom_order):
        sel = m[dom == d]
        sel = sel[np.argsort(cs.rank[sel], kind="stable")].tolist()
        out.extend(sel if j % 2 == 0 else sel[::-1])
    return out


def max_link_flows(topology, ptr: np.ndarray, links: np.ndarray) -> int:
    """Most paths sharing one directed link (1 = no two flows collide)."""
    if links.size == 0:
        return 0
    return int(np.bincount(links, minlength=topology.n_links).max())
