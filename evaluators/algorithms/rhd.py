"""Recursive halving-doubling (``--algorithm rhd``).

* reducescatter: recursive halving - ``log2 n`` steps, at the step with
  distance ``d`` (``n/2`` first) each NPU exchanges half of the data it still
  handles with the NPU ``d`` ranks away and keeps reducing the other half;
* allgather: recursive doubling - distances ``1, 2, 4, ...``, each NPU sends
  everything it holds;
* allreduce: Rabenseifner's algorithm, halving reduce-scatter then doubling
  all-gather (Thakur, Rabenseifner & Gropp, "Optimization of collective
  communication operations in MPICH", IJHPCA 19(1), 2005, Sec. 4.4).

Non-powers of two use the fold of Thakur et al. (Sec. 4.4): with ``p`` the
largest power of two <= n and ``r = n - p``, rank ``2i`` (``i < r``) first adds
its whole buffer into rank ``2i+1`` (for allgather: copies its shard there),
the ``p`` remaining ranks run the power-of-two algorithm on *virtual blocks*
(rank ``2i+1`` handles the shards of ``2i`` and ``2i+1``), and rank ``2i+1``
finally copies what rank ``2i`` needs back to it (its reduced shard for
reducescatter, everything for allreduce and allgather).  This is correct for
every ``n``; it costs two extra steps, and the folded ranks' partners carry
their load.

Ranks are the participants in rank order (``rank ^ d`` partners): on a
hypercube with NPUs in id order every exchange is one hop on its own
dimension's link; on a switch every exchange crosses the switch.
"""

from __future__ import annotations

from evaluators.algorithms.patterns import hd_all_gather, hd_all_reduce, hd_reduce_scatter
from evaluators.algorithms.closed_form import RHD
from evaluators.algorithms.plan import Plan, shard_chunks
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["rhd"]

_PATTERNS = {"allgather": hd_all_gather, "reducescatter": hd_reduce_scatter,
             "allreduce": hd_all_reduce}


@register_algorithm("rhd", kinds=tuple(_PATTERNS),
                    summary="recursive halving-doubling (Rabenseifner; fold for non-powers of two)",
                    closed_form=RHD)
def rhd(topology, collective: Collective) -> Schedule:
    """Recursive halving-doubling schedule.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected network.
    collective : Collective
        allgather, reducescatter or allreduce; any number of participants.

    Returns
    -------
    Schedule
        Timed by the ``congestion`` model; ``metadata["folded"]`` is the
        number of ranks folded away (``n - 2^floor(log2 n)``).

    Notes
    -----
    ``(n-1) * n * c`` transfers for reducescatter and allgather on a power of
    two, twice that for allreduce.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = rhd(from_spec("hypercube:2,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> len(s), round(s.time_s, 9)
    (12, 2.0)
    """
    npus = list(collective.npus)
    blocks = [shard_chunks(collective, s) for s in range(collective.n)]
    plan = Plan(topology, collective)
    plan.add_steps(_PATTERNS[collective.kind](npus, blocks))
    n = collective.n
    return plan.finish("rhd", folded=n - (1 << (n.bit_length() - 1)))
