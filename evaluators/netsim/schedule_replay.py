"""Re-timing a :class:`~evaluators.schedule.Schedule` under a network model.

A schedule's transfers are replayed as messages of ``schedule.chunk_bytes``
bytes along their own paths.  Data dependencies come from the transfer order:
transfer ``i`` waits for every *earlier* transfer ``j < i`` that delivers the
same chunk to the node ``i`` sends from (``dst[j] == src[i]`` and
``chunk[j] == chunk[i]``): it forwards (or, for a reduce, adds to) what
arrived there.  Synthesizers list transfers so that index order is a valid
causal order, so transfers without such predecessors send data the node held
from the start and are ready at time 0.  Each transfer then starts as early as
the model lets it; the original start/end times are ignored, except that with
``model="congestion", order="schedule"`` every link serves its hops in the
order of the schedule's start times on that link (``hop_start``, or the
transfer's ``start`` without it; ties by end time, then transfer index), see
:func:`schedule_hop_order`.  A schedule synthesized under the TACOS link model
(one chunk per link at a time, store-and-forward, as TACOS-GREEDY's single-hop
links) then replays to its own time whenever the synthesizer started every
transfer as soon as its data and its link allowed.  Multi-hop transfers pay
every hop (store-and-forward), so a TACOS route through an unwound switch,
which TACOS times as one logical link, replays slower.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.errors import invalid
from evaluators.netsim.core import Messages, check_topology
from evaluators.netsim.simulator import get_model
from evaluators.schedule import Schedule

__all__ = ["transfer_dependencies", "dependency_levels", "schedule_messages",
           "schedule_hop_order", "replay", "replay_time"]


def transfer_dependencies(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Data dependencies of a schedule's transfers, in CSR form.

    Returns
    -------
    dep_ptr, dep_idx : ndarray of int64
        Transfer ``i`` depends on ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``
        (ascending): all ``j < i`` with ``dst[j] == src[i]`` and
        ``chunk[j] == chunk[i]``.

    Notes
    -----
    O(n log n) with numpy sorting and searching; the output size is the number
    of dependency pairs (one per transfer for store-and-forward pipelines).
    """
    n = len(schedule)
    if n == 0:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    arrive, leave = _node_chunk_keys(schedule)
    keyed = arrive * n + idx
    order = np.argsort(keyed, kind="stable")
    keyed = keyed[order]
    lo = np.searchsorted(keyed, leave * n, side="left")
    hi = np.searchsorted(keyed, leave * n + idx, side="left")     # only j < i
    counts = hi - lo
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    pos = np.arange(int(ptr[-1]), dtype=np.int64) - np.repeat(ptr[:-1] - lo, counts)
    return ptr, order[pos].astype(np.int64)


def _node_chunk_keys(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Every transfer's ``(dst, chunk)`` and ``(src, chunk)`` as ranks < 2n (int64): a
    transfer depends on the earlier ones whose first key is its second."""
    n = len(schedule)
    width = int(schedule.chunk.max()) + 1
    # Compressed to ranks so that rank * n + index fits in int64.
    _, inv = np.unique(np.concatenate([schedule.dst * width + schedule.chunk,
                                       schedule.src * width + schedule.chunk]),
                       return_inverse=True)
    return inv[:n].astype(np.int64), inv[n:].astype(np.int64)


def dependency_levels(schedule: Schedule) -> np.ndarray:
    """Dependency depth of every transfer: 0 for one without dependencies, else one more
    than its deepest dependency (those of :func:`transfer_dependencies`), int64.

    A transfer's dependencies are *all* earlier arrivals of its chunk at its source, so
    its depth is one more than the deepest arrival at that (node, chunk) so far: one
    pass in index order with a running maximum per key, without listing the pairs
    (a pipelined collective has about one pair per transfer, a reduction many).
    """
    n = len(schedule)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    arrive, leave = _node_chunk_keys(schedule)
    deepest = [-1] * (2 * n)
    level = [0] * n
    for i, (a, b) in enumerate(zip(arrive.tolist(), leave.tolist())):
        v = level[i] = deepest[b] + 1
        if v > deepest[a]:
            deepest[a] = v
    return np.asarray(level, dtype=np.int64)


def schedule_messages(schedule: Schedule, topology) -> Messages:
    """The schedule's transfers as a validated :class:`Messages` batch with dependencies.

    Raises
    ------
    InvalidSpecError
        If a transfer's path is empty or does not lead from its ``src`` to its
        ``dst`` over links of ``topology``.
    """
    empty = np.flatnonzero(np.diff(schedule.path_ptr) == 0)
    if empty.size:
        i = int(empty[0])
        raise invalid(f"schedule transfer {i} path", (),
                      f"the link ids from NPU {schedule.src[i]} to NPU {schedule.dst[i]}")
    dep_ptr, dep_idx = transfer_dependencies(schedule)
    return Messages.from_arrays(topology, schedule.src, schedule.dst, schedule.chunk_bytes,
                                ready=0.0, path_ptr=schedule.path_ptr,
                                path_links=schedule.path_links, dep_ptr=dep_ptr, dep_idx=dep_idx)


def schedule_hop_order(schedule: Schedule) -> np.ndarray:
    """Per-hop keys that make every link serve a schedule's hops in its own order.

    Returns
    -------
    ndarray of float64
        One key per hop (aligned with ``schedule.path_links``): the hop's rank
        when all hops are sorted by start time on their link (``hop_start``, or
        the transfer's ``start`` when the schedule has no per-hop times), then
        by the transfer's ``end``, then by transfer index (then hop position).
        Passed as ``order=`` to the ``congestion`` model.

    Examples
    --------
    >>> from evaluators.collectives import Collective
    >>> c = Collective.on("allgather", 2, 2e6)
    >>> s = Schedule.from_transfers(c, [(0, 0, 1, (0,), 5.0, 6.0), (1, 1, 0, (1,), 1.0, 2.0)])
    >>> schedule_hop_order(s).tolist()
    [1.0, 0.0]
    """
    n_hops = schedule.path_links.size
    per = np.diff(schedule.path_ptr)
    t = schedule.hop_start if schedule.hop_start is not None else np.repeat(schedule.start, per)
    end = np.repeat(schedule.end, per)
    rank = np.empty(n_hops, dtype=np.float64)
    # np.arange(n_hops) breaks the remaining ties by transfer index, then hop position.
    rank[np.lexsort((np.arange(n_hops), end, t))] = np.arange(n_hops, dtype=np.float64)
    return rank


def _run(schedule: Schedule, topology, model: str, options: dict[str, Any]):
    m = get_model(model, options)
    if not isinstance(schedule, Schedule):
        raise invalid("schedule", schedule, "an evaluators.schedule.Schedule (from "
                      "evaluators.registry.synthesize or evaluators.schedule_io)")
    check_topology(topology)
    if isinstance(options.get("order"), str) and options["order"] == "schedule":
        options = {**options, "order": schedule_hop_order(schedule)}
    return m, m.run(topology, schedule_messages(schedule, topology), **options)


def replay(schedule: Schedule, topology, *, model: str = "congestion", **options: Any) -> Schedule:
    """Re-time ``schedule`` under a network model.

    Parameters
    ----------
    schedule : Schedule
        Transfers in a causal index order (module docstring).
    topology : topologies.Topology
        The network the paths refer to.
    model : str
        ``"analytical"``, ``"congestion"`` (default) or ``"flow"``.
    **options
        Model options (see :func:`evaluators.netsim.simulate`);
        ``order="schedule"`` (``congestion``) keeps the schedule's per-link
        order (:func:`schedule_hop_order`) instead of FIFO by readiness.

    Returns
    -------
    Schedule
        The same transfers in the same order with new ``start``/``end`` (s),
        ``hop_start`` for ``congestion`` (None otherwise), and metadata
        ``link_model`` (``"exclusive"`` for congestion, ``"shared"`` for flow,
        ``"none"`` for analytical) and ``network_model``.

    Raises
    ------
    InvalidSpecError
        Unknown model or option, ``schedule`` not a Schedule, ``topology`` not a
        Topology, or a transfer whose path is not a walk over its links.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> from evaluators.collectives import Collective
    >>> t = from_spec("ring:3,bw=1GB/s,lat=0")
    >>> c = Collective.on("allgather", 3, 3e6)            # 1 MB chunks
    >>> l01, l12 = t.route(0, 1)[0], t.route(1, 2)[0]
    >>> s = Schedule.from_transfers(c, [(0, 0, 1, (l01,), 0, 0), (0, 1, 2, (l12,), 0, 0)])
    >>> [round(x * 1e3, 6) for x in replay(s, t).end.tolist()]   # 1 -> 2 waits for 0 -> 1
    [1.0, 2.0]
    """
    m, result = _run(schedule, topology, model, options)
    return schedule.retimed(result.start_s, result.finish_s, result.hop_start,
                            link_model=m.link_model, network_model=model)


def replay_time(schedule: Schedule, topology, model: str = "congestion", **options: Any) -> float:
    """Completion time of ``schedule`` replayed under ``model``, seconds (options as
    :func:`replay`)."""
    return _run(schedule, topology, model, options)[1].makespan_s
