"""Unidirectional ring algorithm (``--algorithm ring``).

The participants form one ring in rank order (or in the order given by the
``order`` option); neighbours that are not adjacent in the topology are
reached over a minimum-hop route.

* allgather: ``n-1`` steps, each NPU forwards the shard it received last
  (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 2009);
* reducescatter: the same ring with reductions, shard ``s`` ending at its owner;
* allreduce: reduce-scatter then all-gather;
* broadcast: a pipelined chain from the root along the ring, chunk by chunk;
* reduce: a pipelined chain that starts at the root's successor and ends at
  the root.

Closed forms on a ring whose links all have bandwidth ``B`` and latency ``a``
are in :mod:`evaluators.algorithms.closed_form`.
"""

from __future__ import annotations

from evaluators.algorithms.patterns import (
    chain_broadcast, chain_reduce, ring_all_gather, ring_all_reduce, ring_reduce_scatter,
)
from evaluators.algorithms.closed_form import RING
from evaluators.algorithms.plan import Plan, ordered_members, shard_chunks
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["ring"]


def ring_steps(collective: Collective, members: list[int], pieces=None) -> list:
    """Steps of the ring algorithm for ``collective`` over ``members`` (ring order).

    ``pieces`` restricts the chunks to those with piece index in ``pieces``
    (used by the bidirectional and multi-ring variants).
    """
    kind = collective.kind
    if kind in ("allgather", "reducescatter", "allreduce"):
        blocks = [shard_chunks(collective, collective.position(x), pieces) for x in members]
        fn = {"allgather": ring_all_gather, "reducescatter": ring_reduce_scatter,
              "allreduce": ring_all_reduce}[kind]
        return fn(members, blocks)
    chunks = shard_chunks(collective, 0, pieces)
    r = members.index(collective.root)
    rotated = members[r:] + members[:r]
    if kind == "broadcast":
        return chain_broadcast(rotated, chunks)
    # reduce: root's successor -> ... -> root, all along the ring's direction.
    return chain_reduce(rotated[1:] + rotated[:1], chunks)


@register_algorithm("ring", kinds=("allgather", "reducescatter", "allreduce", "broadcast",
                                   "reduce"), options=("order",),
                    summary="unidirectional ring over the participants (order=...)",
                    closed_form=RING)
def ring(topology, collective: Collective, *, order=None) -> Schedule:
    """Ring schedule for ``collective`` on ``topology``.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected network; ring neighbours are joined by minimum-hop routes.
    collective : Collective
        allgather, reducescatter, allreduce, broadcast or reduce.
    order : sequence of int, optional
        The ring: a permutation of the participating NPU ids (default: the
        participants in rank order).

    Returns
    -------
    Schedule
        Timed by the ``congestion`` model; ``metadata["order"]`` is the ring.

    Notes
    -----
    ``(n-1) * n * c`` transfers for allgather and reducescatter, twice that
    for allreduce, ``(n-1) * c`` for broadcast and reduce.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = ring(from_spec("ring:4,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> round(s.time_s, 9)   # 3 steps of 1 GB at 1 GB/s
    3.0
    """
    members = ordered_members(collective, order, "ring order")
    plan = Plan(topology, collective)
    plan.add_steps(ring_steps(collective, members))
    return plan.finish("ring", order=members)
