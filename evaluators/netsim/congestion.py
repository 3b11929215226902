"""The ``congestion`` network model: FIFO store-and-forward per hop.

docs/architecture.md section 5, which is the TACOS link model (TACOS paper, section
II-C: a link costs ``alpha + beta * n`` for an ``n``-byte message; section IV:
on the time-expanded network a link carries one chunk per time span and a
chunk is forwarded only after it has fully arrived):

* every directed link is a FIFO queue serving one message at a time;
* a hop of message ``m`` on link ``l`` occupies ``l`` for
  ``latency[l] + size[m] / bandwidth[l]`` seconds;
* store-and-forward: ``m`` joins the queue of its next link when it has
  fully arrived at that link's source node (the end of its previous hop), or,
  for the first hop, at its ready time ``max(ready_s, finish of deps)``;
* queues serve in order of arrival time, ties broken by message index;
* a switch is just a node with links (no extra delay).

So a lone message over ``h`` identical links takes ``h * (latency + size /
bandwidth)``.  ``link_busy_s`` is the total occupancy of each link, so
``link_utilization <= 1``.

Implementation: one event per hop, kept in a binary heap keyed by ``(time,
message index)``.  Because every new event is at or after the event that
created it, events leave the heap in non-decreasing time order, so when a hop
arrival is popped every earlier arrival at the same link has been served
already and the hop starts at ``max(arrival, link free time)``: exactly FIFO
order without per-link queues.  O((H + E) log M) for H hops, E dependencies
and M messages; per event a heap operation and a few list accesses.

One corner case: a hop of zero duration (zero bytes on a zero-latency link)
creates its successor event at the same instant, which may then be served
after an equal-time arrival with a larger index.  Only such zero-length ties
can deviate from strict (arrival time, index) order.

Option ``order`` (how each link's queue is ordered):

* ``"fifo"`` (default) - order of arrival, as above;
* ``"schedule"`` - a fixed order given in advance: every link serves its hops
  in increasing order of a per-hop key, ties by hop index (message order).
  Without explicit keys the key is the message's ``ready_s`` (the order in
  which the caller scheduled the messages);
  :func:`evaluators.netsim.replay` passes a schedule's own per-link order
  (its start times on each link), so that a synthesized schedule keeps the
  link order its synthesizer chose - TACOS (Section VI) decides which chunk a
  link carries next, which FIFO-by-readiness does not reproduce;
* an array of one key per hop (aligned with ``batch.path_links``) - that
  order.

With a fixed order, hop ``p`` on link ``l`` starts at ``max(data ready, end
of the hop before p in l's order)``: data ready is the end of the message's
previous hop or, for its first hop, the message's ready time.  The start
times are longest paths in a DAG (data edges and link-order edges), computed
in one topological sweep, O(H log H + E) (the log from sorting the keys).
If the order contradicts the data dependencies (a hop queued behind a hop
that waits for it) the sweep cannot finish and an InvalidSpecError says so.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from codesign.errors import invalid
from evaluators.netsim.core import Messages, SimResult, release_dependents, unfinished_error

__all__ = ["run", "ORDERS"]

NAME = "congestion"

#: Named values of the ``order`` option (an array of per-hop keys is also accepted).
ORDERS = ("fifo", "schedule")


def run(topology, batch: Messages, *, order: Any = "fifo") -> SimResult:
    """Simulate ``batch`` on ``topology`` with store-and-forward links.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    batch : Messages
        Validated messages (paths and dependencies).
    order : {"fifo", "schedule"} or array_like of float, optional
        How each link orders its queue (module docstring): ``"fifo"``
        (default) by arrival; ``"schedule"`` by the messages' ``ready_s``
        then index, fixed in advance; or one key per hop (aligned with
        ``batch.path_links``, ascending keys served first, ties by hop index).

    Returns
    -------
    SimResult
        With ``hop_start`` (start of every hop on its link); ``start_s`` is the
        start of the first hop.

    Raises
    ------
    InvalidSpecError
        If the dependencies contain a cycle, ``order`` is not one of the
        allowed values, or a fixed order contradicts the dependencies.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("ring:8,bw=1GB/s,lat=1us")
    >>> r = run(t, Messages.from_list(t, [(0, 3, 1e6)]))
    >>> round(float(r.finish_s[0]) * 1e6, 3)    # 3 * (1us + 1MB / 1GB/s)
    3003.0
    """
    if isinstance(order, str):
        if order == "fifo":
            return _run_fifo(topology, batch)
        if order == "schedule":
            return _run_ordered(topology, batch, batch.ready[batch.hop_msg])
    else:
        keys = _hop_keys(order, batch.n_hops)
        if keys is not None:
            return _run_ordered(topology, batch, keys)
    raise invalid("congestion order", order if isinstance(order, str) else type(order).__name__,
                  f"'fifo', 'schedule' or {batch.n_hops} finite per-hop keys")


def _hop_keys(order: Any, n_hops: int) -> np.ndarray | None:
    """``order`` as a float array of ``n_hops`` finite keys, or None if it is not one."""
    try:
        keys = np.asarray(order, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if keys.ndim != 1 or keys.size != n_hops or not np.all(np.isfinite(keys)):
        return None
    return keys


def _service(topology, batch: Messages) -> np.ndarray:
    """Seconds each hop occupies its link: ``latency + size / bandwidth``."""
    links = batch.path_links
    return topology.latency[links] + batch.size[batch.hop_msg] / topology.bandwidth[links]


def _result(topology, batch: Messages, ready, finish, hop_start, svc_a) -> SimResult:
    hop_start_a = np.array(hop_start, dtype=np.float64)
    start = np.array(ready, dtype=np.float64)
    has = np.diff(batch.path_ptr) > 0
    start[has] = hop_start_a[batch.path_ptr[:-1][has]]
    busy = np.bincount(batch.path_links, weights=svc_a, minlength=topology.n_links)
    return SimResult.build(NAME, batch, ready, start, finish, hop_start_a, busy, topology.n_links)


def _run_fifo(topology, batch: Messages) -> SimResult:
    """FIFO links: the event loop of the module docstring."""
    n = len(batch)
    links_a = batch.path_links
    svc_a = _service(topology, batch)      # per-hop service time, computed once with numpy
    links = links_a.tolist()
    svc = svc_a.tolist()
    ptr = batch.path_ptr.tolist()
    pos = ptr[:-1]                      # next hop (absolute index) of each message
    end = ptr[1:]
    ready = batch.ready.tolist()
    finish = [0.0] * n
    hop_start = [0.0] * len(links)
    free = [0.0] * topology.n_links     # time each link finishes its last assigned hop
    waiting = np.diff(batch.dep_ptr).tolist()
    rptr, ridx = (a.tolist() for a in batch.dependents())
    has_deps = batch.dep_idx.size > 0
    n_done = 0

    # Messages without hops (src == dst) finish when ready; they may release others.
    instant = [i for i in range(n) if waiting[i] == 0 and pos[i] == end[i]]
    heap: list[tuple[float, int]] = [(ready[i], i) for i in range(n)
                                     if waiting[i] == 0 and pos[i] != end[i]]
    heapq.heapify(heap)

    def release(i: int, t: float) -> list[int]:
        """Finish message i at t; return dependents that became ready."""
        out: list[int] = []
        release_dependents(ridx[rptr[i]:rptr[i + 1]], t, ready, waiting, out)
        return out

    def settle(stack: list[int]) -> None:
        # Complete zero-hop messages (cascading); queue the others on the heap.
        nonlocal n_done
        while stack:
            i = stack.pop()
            if pos[i] == end[i]:
                finish[i] = ready[i]
                n_done += 1
                stack.extend(release(i, ready[i]))
            else:
                heapq.heappush(heap, (ready[i], i))

    for i in instant:
        finish[i] = ready[i]
        n_done += 1
        settle(release(i, ready[i]))

    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    while heap:
        t, i = heap[0]
        p = pos[i]
        l = links[p]
        s = free[l]
        if t > s:
            s = t
        e = s + svc[p]
        free[l] = e
        hop_start[p] = s
        p += 1
        if p < end[i]:
            pos[i] = p
            heapreplace(heap, (e, i))
            continue
        finish[i] = e
        n_done += 1
        if has_deps and rptr[i] != rptr[i + 1]:
            new = release(i, e)
            if len(new) == 1 and pos[new[0]] != end[new[0]]:
                # The common chain case: reuse the heap slot (one sift instead of two).
                d = new[0]
                heapreplace(heap, (ready[d], d))
                continue
            heappop(heap)
            settle(new)
        else:
            heappop(heap)

    if n_done != n:
        done = np.zeros(n, dtype=bool)
        done[[i for i in range(n) if waiting[i] == 0]] = True
        raise unfinished_error(done)
    return _result(topology, batch, ready, finish, hop_start, svc_a)


def _run_ordered(topology, batch: Messages, keys: np.ndarray) -> SimResult:
    """Links serving their hops in the fixed order of ``keys`` (ties by hop index).

    Longest paths over the DAG whose edges are "previous hop of the same
    message" (or "dependency finished" for a first hop) and "previous hop in
    the link's order", swept in topological order (Kahn) with a stack.
    """
    n, n_hops = len(batch), batch.n_hops
    links_a = batch.path_links
    svc_a = _service(topology, batch)
    # Link order: sort hops by (link, key, hop index); a hop's predecessor in its
    # link's queue is the previous entry when it is on the same link.
    perm = np.lexsort((np.arange(n_hops), keys, links_a))
    succ_a = np.full(n_hops, -1, dtype=np.int64)
    same = links_a[perm[1:]] == links_a[perm[:-1]]
    succ_a[perm[:-1][same]] = perm[1:][same]
    # Tokens a hop waits for: its data (1) and its link predecessor (0 or 1).
    need_a = np.ones(n_hops, dtype=np.int64)
    need_a[perm[1:][same]] += 1
    svc, succ, need = svc_a.tolist(), succ_a.tolist(), need_a.tolist()
    ptr = batch.path_ptr.tolist()
    ready = batch.ready.tolist()
    hop_msg = batch.hop_msg.tolist()
    finish = [0.0] * n
    hop_start = [0.0] * n_hops
    data_t = [0.0] * n_hops      # when the hop's data is at its link's source
    link_t = [0.0] * n_hops      # when the hop's link predecessor ends
    waiting = np.diff(batch.dep_ptr).tolist()
    rptr, ridx = (a.tolist() for a in batch.dependents())
    n_done = hops_done = 0
    stack: list[int] = []         # hops whose tokens have all arrived
    msgs = [i for i in range(n) if waiting[i] == 0]   # messages that became ready

    while msgs or stack:
        while msgs:
            i = msgs.pop()
            p = ptr[i]
            if p == ptr[i + 1]:          # no hops: done when ready
                finish[i] = ready[i]
                n_done += 1
                release_dependents(ridx[rptr[i]:rptr[i + 1]], ready[i], ready, waiting, msgs)
                continue
            data_t[p] = ready[i]
            need[p] -= 1
            if need[p] == 0:
                stack.append(p)
        if not stack:
            break
        p = stack.pop()
        s = data_t[p] if data_t[p] > link_t[p] else link_t[p]
        e = s + svc[p]
        hop_start[p] = s
        hops_done += 1
        q = succ[p]
        if q >= 0:
            link_t[q] = e
            need[q] -= 1
            if need[q] == 0:
                stack.append(q)
        i = hop_msg[p]
        if p + 1 < ptr[i + 1]:
            data_t[p + 1] = e
            need[p + 1] -= 1
            if need[p + 1] == 0:
                stack.append(p + 1)
            continue
        finish[i] = e
        n_done += 1
        release_dependents(ridx[rptr[i]:rptr[i + 1]], e, ready, waiting, msgs)

    if n_done != n:
        _run_fifo(topology, batch)       # raises if the dependencies alone have a cycle
        raise invalid("congestion order", f"a link order that queues {n_hops - hops_done} "
                      "hops behind hops waiting for them", "an order in which every hop comes "
                      "after the hops it depends on (e.g. the schedule's own start times)")
    return _result(topology, batch, ready, finish, hop_start, svc_a)
