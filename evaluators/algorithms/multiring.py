"""Multi-ring all-reduce over TotientPerms rings (``--algorithm multiring``).

TopoOpt (NSDI'23) Sec. 4.3: a *regular ring* with generator ``p`` visits the
participants ``S_0, S_p, S_2p, ...`` (indices mod ``n``); it is a single cycle
through all ``n`` participants exactly when ``gcd(p, n) = 1``
(TotientPerms, Algorithm 2).  TopoOpt load-balances the all-reduce over
several such rings; here ring ``i`` carries ``1/k`` of the data: the schedule's
collective is ``collective.with_chunks(k * c)`` and pieces
``i*c .. (i+1)*c - 1`` of every shard run the ring algorithm of
:mod:`evaluators.algorithms.ring` on ring ``i`` (allreduce, allgather or
reducescatter).

Which rings (options, at most one of them):

* ``generators=[p1, p2, ...]``: exactly these (each ``1 <= p < n``, coprime
  with ``n``, distinct);
* ``rings=k``: ``k`` generators chosen by SelectPermutations (TopoOpt
  Algorithm 3): start from the smallest candidate ``q = 1`` and repeatedly
  take the unused candidate closest (L1) to ``q * n^(1/k)``, so the chosen
  generators are close to a geometric sequence;
* default: the generators whose rings the topology provides directly (a link
  ``S_i -> S_(i+p)`` for every ``i``, as on a TopoOpt ``perms`` topology, a
  ring - both directions - or a fully-connected network), at most 8 of them
  (SelectPermutations among them if more); if the topology provides none
  completely (a fabric with failed links or servers), those it provides for at
  least 90 % of the hops; if none, ``rings=2`` (or 1 when ``n = 2``).
"""

from __future__ import annotations

import math
from math import gcd

import numpy as np

from codesign.errors import invalid
from evaluators.algorithms.closed_form import MULTIRING
from evaluators.algorithms.plan import Plan, concurrent
from evaluators.algorithms.ring import ring_steps
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule
from topologies.topoopt.perms import select_permutations, totient_perms

__all__ = ["multiring", "totient_generators", "select_generators", "direct_generators",
           "chosen_generators", "ring_orders", "MAX_DEFAULT_RINGS"]

#: Fraction of a ring's hops a degraded fabric must still provide for the default to keep
#: that ring (only when no ring is provided completely).
MOSTLY_PROVIDED = 0.9
#: Most rings the default picks among the ones the topology provides.
MAX_DEFAULT_RINGS = 8


def totient_generators(n: int) -> list[int]:
    """TotientPerms (TopoOpt Algorithm 2): every ``1 <= p < n`` with ``gcd(p, n) = 1``.

    Shared with TopologyFinder: :func:`topologies.topoopt.perms.totient_perms`.

    Examples
    --------
    >>> totient_generators(12)
    [1, 5, 7, 11]
    """
    return totient_perms(n)


def select_generators(candidates: list[int], k: int, n: int) -> list[int]:
    """SelectPermutations (TopoOpt Algorithm 3): ``k`` candidates close to a
    geometric sequence of ratio ``n^(1/k)`` starting at the smallest one.

    Ties between two candidates equally close to the target go to the smaller.
    Shared with TopologyFinder: :func:`topologies.topoopt.perms.select_permutations`.

    Examples
    --------
    >>> select_generators(totient_generators(16), 2, 16)   # 1, then closest to 4
    [1, 3]
    """
    cands = sorted(set(candidates))
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(cands):
        raise invalid("multiring rings", k, f"an integer from 1 to {len(cands)} "
                      f"(the number of candidate generators for n={n})")
    return select_permutations(n, cands, int(k))


def direct_generators(topology, npus: tuple[int, ...], *, min_fraction: float = 1.0
                      ) -> list[int]:
    """Totient generators ``p`` whose ring the topology provides link by link (at least
    ``min_fraction`` of the ring's ``n`` hops have a direct link; 1: every hop)."""
    n = len(npus)
    allowed = n - math.ceil(min_fraction * n - 1e-9)   # missing hops allowed
    out = []
    for p in totient_generators(n):
        missing = 0
        for i in range(n):
            if not topology.links_between(npus[i], npus[(i + p) % n]).size:
                missing += 1
                if missing > allowed:
                    break
        if missing <= allowed:
            out.append(p)
    return out


def chosen_generators(topology, collective: Collective, generators=None, rings=None
                      ) -> list[int]:
    """The generators the schedule uses for these options (module docstring)."""
    n = collective.n
    if generators is not None and rings is not None:
        raise invalid("multiring options", "generators and rings", "at most one of them")
    if generators is not None:
        if isinstance(generators, (int, np.integer)):
            generators = [generators]
        try:
            gens = [int(p) for p in generators]
        except (TypeError, ValueError):
            raise invalid("multiring generators", generators, "a list of integers") from None
        if not gens or len(set(gens)) != len(gens) or any(
                not 1 <= p < n or gcd(p, n) != 1 for p in gens):
            raise invalid("multiring generators", generators,
                          f"distinct integers p with 1 <= p < {n} and gcd(p, {n}) = 1, "
                          f"from {totient_generators(n)}")
        return gens
    if rings is not None:
        if isinstance(rings, bool) or not isinstance(rings, (int, np.integer)):
            raise invalid("multiring rings", rings, "an integer >= 1")
        return select_generators(totient_generators(n), int(rings), n)
    direct = direct_generators(topology, collective.npus)
    if not direct:
        # A fabric that lost links or servers (topologies.failures) keeps the rings it
        # still provides almost link by link: NCCL on a TopoOpt fabric keeps its rings and
        # forwards around a failed hop rather than switching to rings the fabric never
        # had.  Intact fabrics never get here.
        direct = direct_generators(topology, collective.npus, min_fraction=MOSTLY_PROVIDED)
    if direct:
        if len(direct) <= MAX_DEFAULT_RINGS:
            return direct
        return select_generators(direct, MAX_DEFAULT_RINGS, n)
    cands = totient_generators(n)
    return select_generators(cands, min(2, len(cands)), n)


@register_algorithm("multiring", kinds=("allreduce", "allgather", "reducescatter"),
                    options=("generators", "rings"),
                    summary="TotientPerms rings sharing the load (TopoOpt; generators=, rings=)",
                    closed_form=MULTIRING)
def multiring(topology, collective: Collective, *, generators=None, rings=None) -> Schedule:
    """Multi-ring schedule over regular rings ``S_i -> S_(i+p)``.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected network (ring hops that are not links are routed).
    collective : Collective
        allreduce, allgather or reducescatter.
    generators : sequence of int, optional
        The ring generators ``p`` (coprime with ``n``).
    rings : int, optional
        Number of rings chosen by SelectPermutations.

    Returns
    -------
    Schedule
        For ``collective.with_chunks(k * c)`` with ``k`` rings, timed by the
        ``congestion`` model; ``metadata["generators"]`` lists the rings.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = multiring(from_spec("fc:5,bw=1GB/s,lat=0"), Collective.on("allgather", 5, 5e9))
    >>> s.metadata["generators"], round(s.time_s, 9)    # 4 rings, 0.25 GB per ring hop
    ([1, 2, 3, 4], 1.0)
    """
    gens = chosen_generators(topology, collective, generators, rings)
    c = collective.chunks_per_npu
    split = collective.with_chunks(len(gens) * c)
    plan = Plan(topology, split)
    plan.add_steps(concurrent(*(
        ring_steps(split, order, np.arange(r * c, (r + 1) * c))
        for r, order in enumerate(ring_orders(collective.npus, gens)))))
    return plan.finish("multiring", generators=gens)


def ring_orders(npus: tuple[int, ...], generators: list[int]) -> list[list[int]]:
    """Each regular ring's members in ring order: ``S_0, S_p, S_2p, ...``."""
    n = len(npus)
    return [[npus[(i * p) % n] for i in range(n)] for p in generators]
