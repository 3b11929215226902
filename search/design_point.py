"""Design points of the sweeps: :class:`DesignPoint` and :func:`topology_spec_for`.

A design point names a topology family, the number of servers, the server degree ``d``
(links or NICs per server) and the rate ``B`` of one link; :func:`topology_spec_for`
turns it into a topology spec string (:func:`topologies.registry.from_spec` builds it).
Sweeps (:mod:`search.sweeps.trial`), the what-if search and the TopoOpt baselines
(:mod:`search.topoopt.alternating`) use it, so every part of the framework builds a family from
``(family, servers, d, B)`` the same way.

How ``(family, servers, d, B)`` becomes a fabric follows TopoOpt (NSDI'23,
Section 5.1), which compares architectures at equal ``d`` and ``B``:

* ``fattree``: full-bisection k-ary fat-tree with links of ``d x B`` ("each
  server has one NIC and the bandwidth of each link is d x B"), ``servers = k^3/4``
  for an even ``k`` (16, 54, 128, 250, 432, ...); any other number of servers gets
  the smallest such fat-tree that holds them, partially populated (``fattree:servers=
  N,radix=k``: only the switches with servers below them, full bisection above).
* ``leafspine``: the "Oversub. Fat-tree": a two-tier leaf-spine, links of
  ``d x B``, oversubscription ``oversub`` (default 2:1); each leaf holds the
  largest divisor of ``servers`` that is at most ``servers / 2`` and a whole
  multiple of the ratio's numerator, so there are at least two leaves and the
  oversubscription is felt.
* ``ideal``: TopoOpt's Ideal Switch, one switch, each server attached with
  ``d x B``.
* ``expander``: a random ``d``-regular graph of links ``B`` (seeded with the
  design's seed).
* ``torus``: a ``d/2``-dimensional torus of links ``B`` (``d`` even), the most
  balanced factorisation of ``servers`` into ``d/2`` sizes >= 3 (a size-2
  dimension would have one cable, not two, and so not give degree ``d``).
* ``perms``: a TopoOpt-style direct-connect fabric of ``d`` ring permutations
  ``i -> i+p mod n`` with ``gcd(p, n) = 1`` (TotientPerms, Algorithm 2),
  ``p = 1`` always included and the others chosen closest to the geometric
  sequence ``n^(i/d)`` (a simplified SelectPermutations, Algorithm 3 line 7;
  the full TopologyFinder is :mod:`topologies.topoopt`, the sweeps' ``topoopt``
  family).

* ``railopt``, ``multiplane`` (GPU-level fabrics of today's clusters,
  :mod:`topologies.families.gpu_clos`): ``d`` is the GPUs (= NICs, rails) per
  server, each GPU's NIC of rate ``B`` on its own rail of a rail-optimised Clos, or
  split into two planes of ``B / 2``; the server's GPUs form one NVLink domain.  The
  topology's NPUs are GPUs, so only ``d`` equal to the GPU type's GPUs per server
  applies (other degrees are pruned by the iteration model as inapplicable).  The
  NVLink domain runs at the GPU's own scale-up bandwidth (the hardware catalog's
  ``fabric_bandwidth``: B200 and GB200 900 GB/s, A100 300 GB/s) when
  :func:`topology_spec_for` is given the ``hardware``: ``scaleup_bw=`` is written into
  the spec when it differs from the families' default, NVLink 4's 450 GB/s (H100/H200
  specs stay as they were).

A design that cannot be built (e.g. a torus of odd degree, a leaf-spine of a prime
number of servers at 2:1) raises :class:`~codesign.errors.InfeasibleError` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_int, check_number
from codesign.units import spec_rate

__all__ = [
    "DESIGN_FAMILIES",
    "SCALEUP_FAMILIES",
    "DesignPoint",
    "spec_rate",
    "topology_spec_for",
]


@dataclass(frozen=True)
class DesignPoint:
    """One candidate cluster design (the input of :func:`topology_spec_for`).

    Attributes
    ----------
    family : str
        One of :data:`DESIGN_FAMILIES`.
    servers : int
        Number of servers (the topology's NPUs).
    degree : int
        Links (NICs) per server, ``d``.
    link_bandwidth_Bps : float
        Rate ``B`` of one link, bytes/s per direction.
    seed : int, optional
        Seed of randomized families (expander).
    oversub : float, optional
        Oversubscription ratio of the ``leafspine`` family.
    """

    family: str
    servers: int
    degree: int
    link_bandwidth_Bps: float
    seed: int = 0
    oversub: float = 2.0

    def to_dict(self) -> dict[str, object]:
        """The parameters as a JSON-ready dict (stored as ``params_json``)."""
        return asdict(self)


# ------------------------------------------------------------- design -> spec
def _fattree(p: DesignPoint) -> str:
    rate = spec_rate(p.degree * p.link_bandwidth_Bps)
    k = 2
    while k ** 3 // 4 < p.servers:   # the smallest even k whose fat-tree holds them
        k += 2
    if k ** 3 // 4 == p.servers:
        return f"fattree:k={k},bw={rate}"
    # Any other count: that k-ary fat-tree partially populated -- the switches with
    # servers below them, full bisection above (topologies.families.gpu_clos), as a
    # cluster of 256 or 2,048 servers is built.
    return f"fattree:servers={p.servers},radix={k},bw={rate}"


def _leafspine(p: DesignPoint) -> str:
    ratio = Fraction(p.oversub).limit_denominator(64)
    num = ratio.numerator
    per_leaf = [m for m in range(p.servers // 2, 0, -1) if p.servers % m == 0 and m % num == 0]
    if not per_leaf:
        raise InfeasibleError(f"leafspine of {p.servers} servers at oversub {p.oversub:g}: no "
                              f"leaf size <= {p.servers // 2} dividing {p.servers} is a multiple "
                              f"of {num}", reason="shape")
    return (f"leafspine:{p.servers},oversub={p.oversub:g},hosts_per_leaf={per_leaf[0]},"
            f"bw={spec_rate(p.degree * p.link_bandwidth_Bps)}")


def _ideal(p: DesignPoint) -> str:
    return f"ideal:{p.servers},degree={p.degree},bw={spec_rate(p.link_bandwidth_Bps)}"


def _expander(p: DesignPoint) -> str:
    return (f"expander:{p.servers},degree={p.degree},seed={p.seed},"
            f"bw={spec_rate(p.link_bandwidth_Bps)}")


def _factorisations(n: int, parts: int, minimum: int) -> list[tuple[int, ...]]:
    """All non-decreasing tuples of ``parts`` integers >= ``minimum`` whose product is ``n``."""
    if parts == 1:
        return [(n,)] if n >= minimum else []
    out = []
    for f in range(minimum, math.isqrt(n) + 1):
        if n % f == 0:
            out += [(f, *rest) for rest in _factorisations(n // f, parts - 1, f)]
    return out


def _torus(p: DesignPoint) -> str:
    if p.degree % 2:
        raise InfeasibleError(f"a torus has an even degree (2 per dimension), not {p.degree}",
                              reason="shape")
    shapes = _factorisations(p.servers, p.degree // 2, 3)
    if not shapes:
        raise InfeasibleError(f"no {p.degree // 2}-dimensional torus of {p.servers} servers with "
                              f"every size >= 3 (degree {p.degree})", reason="shape")
    # Most balanced shape: smallest largest/smallest ratio, then lexicographic.
    shape = min(shapes, key=lambda s: (s[-1] / s[0], s))
    return f"torus:{'x'.join(map(str, shape))},bw={spec_rate(p.link_bandwidth_Bps)}"


def _perms(p: DesignPoint) -> str:
    n = p.servers
    candidates = [g for g in range(1, n) if math.gcd(g, n) == 1]
    if p.degree > len(candidates):
        raise InfeasibleError(f"perms on {n} servers has only {len(candidates)} ring permutations "
                              f"(generators coprime with {n}), fewer than degree {p.degree}",
                              reason="shape")
    chosen: list[int] = []
    for i in range(p.degree):
        target = n ** (i / p.degree)
        free = [g for g in candidates if g not in chosen]
        chosen.append(min(free, key=lambda g: (abs(g - target), g)))
    gens = ":".join(str(g) for g in sorted(chosen))
    return f"perms:{n},p={gens},bw={spec_rate(p.link_bandwidth_Bps)}"


def _railopt(p: DesignPoint) -> str:
    # GPU-level: d GPUs per server, each with one NIC of B on its own rail (d rails), the
    # server's GPUs one NVLink domain (topologies.families.gpu_clos).
    return (f"railopt:{p.servers},gpus={p.degree},scaleup={p.degree},"
            f"bw={spec_rate(p.link_bandwidth_Bps)}")


def _multiplane(p: DesignPoint) -> str:
    # GPU-level: d GPUs per server, each NIC of B split into two planes of B/2.
    return (f"multiplane:{p.servers * p.degree},planes=2,scaleup={p.degree},"
            f"bw={spec_rate(p.link_bandwidth_Bps / 2)}")


#: Families a design may use, and how a point becomes a spec string.
DESIGN_FAMILIES: dict[str, Callable[[DesignPoint], str]] = {
    "fattree": _fattree,
    "leafspine": _leafspine,
    "ideal": _ideal,
    "expander": _expander,
    "torus": _torus,
    "perms": _perms,
    "railopt": _railopt,
    "multiplane": _multiplane,
}


#: Families whose NPUs are GPUs in NVLink domains (their spec takes ``scaleup_bw=``).
SCALEUP_FAMILIES = ("railopt", "multiplane")


def topology_spec_for(point: DesignPoint, hardware: Any = None) -> str:
    """The topology spec string of a design point (rules in the module docstring).

    ``hardware`` (a :class:`~codesign.workloads.hardware.Hardware` or a catalog name) is
    the GPU of the servers: the NVLink domains of ``railopt`` / ``multiplane`` get its
    ``fabric_bandwidth_Bps`` (``scaleup_bw=`` is added where it differs from the
    families' default, 450 GB/s).  Without it they keep that default.

    Raises
    ------
    InvalidSpecError
        Unknown family or out-of-range numbers.
    InfeasibleError
        The family has no member with these servers and degree.

    Examples
    --------
    >>> topology_spec_for(DesignPoint("torus", 16, 4, 12.5e9))
    'torus:4x4,bw=100Gbps'
    >>> topology_spec_for(DesignPoint("fattree", 16, 2, 12.5e9))
    'fattree:k=4,bw=200Gbps'
    >>> topology_spec_for(DesignPoint("railopt", 16, 8, 50e9), "B200")
    'railopt:16,gpus=8,scaleup=8,bw=400Gbps,scaleup_bw=900GB/s'
    """
    build = DESIGN_FAMILIES.get(point.family)
    if build is None:
        raise invalid("design family", point.family, f"one of {', '.join(DESIGN_FAMILIES)}")
    check_int("design servers", point.servers, 2)
    check_int("design degree", point.degree, 1)
    check_number("design link_bandwidth_Bps", point.link_bandwidth_Bps)
    spec = build(point)
    if hardware is not None and point.family in SCALEUP_FAMILIES and point.degree >= 2:
        from codesign.workloads.hardware import get_hardware
        from topologies.families.scaleup import NVLINK4_GPU_BW

        bw = float(get_hardware(hardware).fabric_bandwidth_Bps)
        if abs(bw - NVLINK4_GPU_BW) > 1e-9 * NVLINK4_GPU_BW:
            spec += f",scaleup_bw={spec_rate(bw, 'GB/s')}"
    return spec
