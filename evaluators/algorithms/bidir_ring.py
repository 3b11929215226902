"""Bidirectional ring algorithm (``--algorithm bidir-ring``).

Half of the data goes around the ring clockwise (the participants in rank
order, or the ``order`` option) and half counter-clockwise (the same ring
reversed), so both directions of every cable of a bidirectional ring carry
load.  The two halves are the chunk pieces: the returned schedule's
collective is ``collective.with_chunks(2 * c)``; pieces ``k < c`` of every
shard use the clockwise ring, pieces ``c <= k < 2c`` the counter-clockwise one.
Each half runs the unidirectional ring algorithm of
:mod:`evaluators.algorithms.ring` (allgather, reducescatter, allreduce, and
the pipelined chains for broadcast and reduce).
"""

from __future__ import annotations

import numpy as np

from evaluators.algorithms.closed_form import BIDIR_RING
from evaluators.algorithms.plan import Plan, concurrent, ordered_members
from evaluators.algorithms.ring import ring_steps
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["bidir_ring"]


@register_algorithm("bidir-ring", kinds=("allgather", "reducescatter", "allreduce", "broadcast",
                                         "reduce"), options=("order",),
                    summary="two rings in opposite directions, half of the chunks each",
                    closed_form=BIDIR_RING)
def bidir_ring(topology, collective: Collective, *, order=None) -> Schedule:
    """Bidirectional ring schedule.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected network (ring neighbours joined by minimum-hop routes).
    collective : Collective
        allgather, reducescatter, allreduce, broadcast or reduce.
    order : sequence of int, optional
        The clockwise ring, a permutation of the participants (default: rank order).

    Returns
    -------
    Schedule
        For ``collective.with_chunks(2 * c)`` (twice the chunks, half the
        size each); timed by the ``congestion`` model.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = bidir_ring(from_spec("ring:4,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> s.collective.chunks_per_npu, round(s.time_s, 9)   # 3 steps of 0.5 GB each way
    (2, 1.5)
    """
    members = ordered_members(collective, order, "bidir-ring order")
    c = collective.chunks_per_npu
    split = collective.with_chunks(2 * c)
    plan = Plan(topology, split)
    plan.add_steps(concurrent(ring_steps(split, members, np.arange(c)),
                              ring_steps(split, members[::-1], np.arange(c, 2 * c))))
    return plan.finish("bidir-ring", order=members)
