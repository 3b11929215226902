"""Direct algorithm (``--algorithm direct``): every piece of data goes straight
from the NPU that has it to the NPU that needs it, one transfer per (sender,
receiver, chunk) over a minimum-hop route.

* allgather: each NPU sends its shard to every other NPU;
* reducescatter: each NPU adds its contribution to shard ``j`` directly into
  NPU ``j`` (REDUCE);
* allreduce: that reduce-scatter, then each owner sends its reduced shard to
  every other NPU (the "Direct" algorithm of Themis Table 1 for fully
  connected dimensions);
* alltoall: each NPU sends block ``(i, j)`` to ``j``;
* broadcast / scatter: the root sends the buffer / shard ``j`` to every NPU;
* reduce / gather: every NPU sends its contribution / shard to the root.

Senders go through the receivers in offset order (step ``d``: NPU ``i`` sends
to NPU ``i + d``), the usual way to avoid incast; on a fully-connected network
every (sender, receiver) pair has its own link, so no two transfers share one.
"""

from __future__ import annotations

import numpy as np

from evaluators.algorithms.patterns import (
    direct_all_gather, direct_all_reduce, direct_reduce_scatter,
)
from evaluators.algorithms.closed_form import DIRECT
from evaluators.algorithms.plan import COPY, REDUCE, Plan, shard_chunks
from evaluators.collectives import KINDS, Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["direct"]


def direct_steps(collective: Collective) -> list:
    """Steps of the direct algorithm for ``collective`` (module docstring)."""
    npus = list(collective.npus)
    n, c, kind = collective.n, collective.chunks_per_npu, collective.kind
    if kind in ("allgather", "reducescatter", "allreduce"):
        blocks = [shard_chunks(collective, s) for s in range(n)]
        fn = {"allgather": direct_all_gather, "reducescatter": direct_reduce_scatter,
              "allreduce": direct_all_reduce}[kind]
        return fn(npus, blocks)
    if kind == "alltoall":
        return [[(((i * n + (i + d) % n) * c) + np.arange(c), npus[i], npus[(i + d) % n], COPY)
                 for i in range(n)] for d in range(1, n)]
    r = collective.position(collective.root)
    root = npus[r]
    others = [(r + d) % n for d in range(1, n)]
    if kind == "broadcast":
        return [[(shard_chunks(collective, 0), root, npus[j], COPY)] for j in others]
    if kind == "reduce":
        return [[(shard_chunks(collective, 0), npus[j], root, REDUCE) for j in others]]
    if kind == "scatter":
        return [[(shard_chunks(collective, j), root, npus[j], COPY)] for j in others]
    # gather
    return [[(shard_chunks(collective, j), npus[j], root, COPY) for j in others]]


@register_algorithm("direct", kinds=KINDS,
                    summary="one transfer per (sender, receiver, chunk) over shortest paths",
                    closed_form=DIRECT)
def direct(topology, collective: Collective) -> Schedule:
    """Direct schedule for any collective kind.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected network.
    collective : Collective
        Any kind.

    Returns
    -------
    Schedule
        Timed by the ``congestion`` model.

    Notes
    -----
    ``(n-1) * n * c`` transfers for allgather, reducescatter and alltoall,
    twice that for allreduce, ``(n-1) * c`` for the rooted kinds.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = direct(from_spec("fc:4,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> round(s.time_s, 9)      # every 1 GB shard crosses its own link at once
    1.0
    """
    plan = Plan(topology, collective)
    plan.add_steps(direct_steps(collective))
    return plan.finish("direct")
