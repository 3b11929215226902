"""The ``congestion`` network model: FIFO store-and-forward per hop.

DESIGN.md section 5, which is the TACOS link model (TACOS paper, section
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
"""

from __future__ import annotations

import heapq

import numpy as np

from evaluators.netsim.core import Messages, SimResult, unfinished_error

__all__ = ["run"]

NAME = "congestion"


def run(topology, batch: Messages) -> SimResult:
    """Simulate ``batch`` on ``topology`` with FIFO store-and-forward links.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    batch : Messages
        Validated messages (paths and dependencies).

    Returns
    -------
    SimResult
        With ``hop_start`` (start of every hop on its link); ``start_s`` is the
        start of the first hop.

    Raises
    ------
    InvalidSpecError
        If the dependencies contain a cycle.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("ring:8,bw=1GB/s,lat=1us")
    >>> r = run(t, Messages.from_list(t, [(0, 3, 1e6)]))
    >>> round(float(r.finish_s[0]) * 1e6, 3)    # 3 * (1us + 1MB / 1GB/s)
    3003.0
    """
    n = len(batch)
    links_a = batch.path_links
    # Per-hop service time, computed once with numpy.
    svc_a = topology.latency[links_a] + batch.size[batch.hop_msg] / topology.bandwidth[links_a]
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
        out = []
        for d in ridx[rptr[i]:rptr[i + 1]]:
            if t > ready[d]:
                ready[d] = t
            waiting[d] -= 1
            if waiting[d] == 0:
                out.append(d)
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
    hop_start_a = np.array(hop_start, dtype=np.float64)
    start = np.array(ready, dtype=np.float64)
    has = np.diff(batch.path_ptr) > 0
    start[has] = hop_start_a[batch.path_ptr[:-1][has]]
    busy = np.bincount(links_a, weights=svc_a, minlength=topology.n_links)
    return SimResult.build(NAME, batch, ready, start, finish, hop_start_a, busy, topology.n_links)
