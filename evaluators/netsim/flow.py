"""The ``flow`` network model: max-min fair sharing of link capacity.

docs/architecture.md section 5: for large concurrent transfers, every message is a fluid
*flow* over its whole path at once; the active flows share each link's
bandwidth max-min fairly (progressive filling, also called water-filling),
and the rates are recomputed whenever a flow starts or ends.

Timing, precisely:

* a flow becomes *active* at its ready time ``max(ready_s, finish of deps)``
  (``start_s``);
* while active it drains its bytes at its max-min fair rate, which is the
  same on every link of its path (a fluid that occupies the whole path at
  once: no store-and-forward);
* its *finish* is the time its last byte is drained plus the sum of the
  latencies of its path links (propagation of the last byte, paid once; the
  flow no longer uses bandwidth during that time);
* a message with no hops (``src == dst``) finishes at its ready time; a
  zero-byte message at ready time + path latency, without being activated.

``link_busy_s`` is the bytes carried divided by the link bandwidth (time at
full rate), so ``link_utilization`` is the mean fraction of capacity used.

Max-min fairness (Bertsekas & Gallager, Data Networks, section 6.5.2): a rate
allocation is max-min fair iff it is feasible and every flow has a
*bottleneck* link: one that is saturated and on which no flow has a larger
rate.  Progressive filling reaches it: raise all unfrozen flows' rates
together until some link saturates, freeze the flows crossing it, repeat.

Complexity: one rate recomputation per distinct event time (flow starts and
ends at the same instant are batched); each costs O(A log A + H_A) numpy work
per filling level for the A active flows with H_A hops (at most one level per
distinct bottleneck).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from codesign.errors import invalid
from evaluators.netsim.core import Messages, SimResult, unfinished_error

__all__ = ["max_min_rates", "coarse_max_min_rates", "fair_rates", "run"]

NAME = "flow"

#: Relative tolerance for "link saturated" and "flow drained" decisions.
RTOL = 1e-9


def max_min_rates(capacity: np.ndarray, hop_flow: np.ndarray, hop_link: np.ndarray,
                  n_flows: int) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    Parameters
    ----------
    capacity : ndarray of float, shape (n_links,)
        Capacity of every link, bytes/s.
    hop_flow, hop_link : ndarray of int, shape (H,)
        Incidence list: hop ``h`` means flow ``hop_flow[h]`` crosses link
        ``hop_link[h]`` (a flow crossing a link twice uses it twice).
    n_flows : int
        Number of flows; every flow must have at least one hop.

    Returns
    -------
    ndarray of float, shape (n_flows,)
        Rate of each flow, bytes/s.

    Notes
    -----
    Each filling level is one vectorised pass over the hops; there are at most
    as many levels as distinct bottleneck links.

    Examples
    --------
    Two links of capacity 1 and 2; flow 0 uses both, flow 1 link 0, flow 2
    link 1: link 0 is the bottleneck of flows 0 and 1 (1/2 each), flow 2 gets
    the rest of link 1.

    >>> max_min_rates(np.array([1.0, 2.0]), np.array([0, 0, 1, 2]),
    ...               np.array([0, 1, 0, 1]), 3).tolist()
    [0.5, 0.5, 1.5]
    """
    rates = np.zeros(n_flows, dtype=np.float64)
    if n_flows == 0 or hop_flow.size == 0:
        return rates
    used, local = np.unique(hop_link, return_inverse=True)
    cap0 = np.asarray(capacity, dtype=np.float64)[used]
    cap = cap0.copy()
    frozen = np.zeros(n_flows, dtype=bool)
    level = 0.0
    while True:
        live = ~frozen[hop_flow]
        if not live.any():
            break
        cnt = np.bincount(local[live], minlength=used.size)
        crossed = cnt > 0
        share = np.full(used.size, np.inf)
        share[crossed] = cap[crossed] / cnt[crossed]
        delta = float(share.min())
        level += delta
        rates[~frozen] = level
        cap[crossed] -= delta * cnt[crossed]
        # The link(s) that set delta are saturated; so is any link left with a
        # rounding-level residue.
        sat = crossed & ((share <= delta * (1 + 1e-12)) | (cap <= RTOL * cap0))
        cap[sat] = 0.0
        frozen |= np.bincount(hop_flow[live & sat[local]], minlength=n_flows) > 0
    return rates


def coarse_max_min_rates(capacity: np.ndarray, hop_flow: np.ndarray, hop_link: np.ndarray,
                    n_flows: int, rtol: float) -> np.ndarray:
    """Progressive filling with coarse levels: feasible rates within ``rtol`` of max-min.

    As :func:`max_min_rates`, except that at each filling level
    every link whose fair share is within ``1 + rtol`` of the smallest one saturates
    together (its remaining capacity is left unused).  Rates are feasible and each is
    close to the exact ones (conservative: capacity is only ever left unused); the
    number of levels drops from the number of distinct bottlenecks to about
    ``log(max rate / min rate) / rtol``.
    """
    rates = np.zeros(n_flows, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64).copy()
    n_links = cap.size
    frozen = np.zeros(n_flows, dtype=bool)
    hf, hl = hop_flow, hop_link          # hops of unfrozen flows (compacted every level)
    level = 0.0
    while hf.size:
        cnt = np.bincount(hl, minlength=n_links)
        crossed = cnt > 0
        share = np.full(n_links, np.inf)
        share[crossed] = cap[crossed] / cnt[crossed]
        delta = float(share.min())
        level += delta
        cap[crossed] -= delta * cnt[crossed]
        sat = crossed & (share <= delta + rtol * level)
        newly = np.unique(hf[sat[hl]])
        rates[newly] = level
        frozen[newly] = True
        keep = ~frozen[hf]
        hf, hl = hf[keep], hl[keep]
    return rates


def fair_rates(capacity: np.ndarray, hop_flow: np.ndarray, hop_link: np.ndarray,
               n_flows: int, rtol: float = 0.0) -> np.ndarray:
    """Max-min fair rates, exact (``rtol = 0``, :func:`max_min_rates`) or with coarse
    filling levels (:func:`coarse_max_min_rates`): the one rate rule of every fluid loop
    (:func:`run`, :func:`evaluators.iteration.phase.flow_phase`, the reconfigurable
    fabric)."""
    if rtol == 0:
        return max_min_rates(capacity, hop_flow, hop_link, n_flows)
    return coarse_max_min_rates(capacity, hop_flow, hop_link, n_flows, rtol)


RateObserver = Callable[[float, np.ndarray, np.ndarray], None]


def run(topology, batch: Messages, *, on_rates: RateObserver | None = None) -> SimResult:
    """Simulate ``batch`` on ``topology`` with max-min fair flows.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    batch : Messages
        Validated messages.
    on_rates : callable, optional
        Called as ``on_rates(time_s, flow_ids, rates_Bps)`` after every rate
        recomputation (for tests and tracing).

    Returns
    -------
    SimResult
        ``hop_start`` is None; ``start_s`` is the activation (ready) time.

    Raises
    ------
    InvalidSpecError
        If the dependencies contain a cycle.

    Examples
    --------
    Two 1 MB flows on the same 1 GB/s link share it: both drain at 0.5 GB/s.

    >>> from topologies.registry import from_spec
    >>> t = from_spec("ring:4,bw=1GB/s,lat=0")
    >>> r = run(t, Messages.from_list(t, [(0, 1, 1e6), (0, 1, 1e6)]))
    >>> [round(x * 1e3, 6) for x in r.finish_s.tolist()]
    [2.0, 2.0]
    """
    if on_rates is not None and not callable(on_rates):
        # reachable from the CLI's --option, where a value can never be a callback
        raise invalid("flow option on_rates", on_rates, "a callable (library use only) or None")
    n = len(batch)
    links = batch.path_links
    hop_msg = batch.hop_msg
    lat_sum = np.bincount(hop_msg, weights=topology.latency[links], minlength=n)
    n_hops = np.diff(batch.path_ptr)
    size = batch.size
    rem = size.astype(np.float64).copy()
    rate = np.zeros(n, dtype=np.float64)
    ready = batch.ready.tolist()
    finish = np.zeros(n, dtype=np.float64)
    done = np.zeros(n, dtype=bool)
    waiting = np.diff(batch.dep_ptr).tolist()
    rptr, ridx = (a.tolist() for a in batch.dependents())
    pending = [(ready[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(pending)

    def complete(i: int, t_finish: float) -> None:
        finish[i] = t_finish
        done[i] = True
        for d in ridx[rptr[i]:rptr[i + 1]]:
            if t_finish > ready[d]:
                ready[d] = t_finish
            waiting[d] -= 1
            if waiting[d] == 0:
                heapq.heappush(pending, (ready[d], d))

    t = 0.0
    act_ids = np.zeros(0, dtype=np.int64)
    while pending or act_ids.size:
        t_arrive = pending[0][0] if pending else np.inf
        if act_ids.size:
            left = rem[act_ids] / rate[act_ids]
            t_next = min(t_arrive, t + float(left.min()))
            step = t_next - t
            rem[act_ids] -= rate[act_ids] * step
            drained = act_ids[(left <= step * (1 + RTOL)) | (rem[act_ids] <= RTOL * size[act_ids])]
        else:
            t_next, drained = t_arrive, act_ids
        t = t_next
        started: list[int] = []
        for i in drained.tolist():
            rem[i] = 0.0
            rate[i] = 0.0
            complete(i, t + lat_sum[i])
        while pending and pending[0][0] <= t:
            _, i = heapq.heappop(pending)
            if n_hops[i] == 0:
                complete(i, ready[i])
            elif size[i] == 0:
                complete(i, ready[i] + lat_sum[i])
            else:
                started.append(i)
        if drained.size or started:
            # Per event only the active flows are touched: O(A log A + their hops).
            if drained.size:
                act_ids = act_ids[~np.isin(act_ids, drained, assume_unique=True)]
            if started:
                act_ids = np.sort(np.concatenate([act_ids, np.array(started, dtype=np.int64)]))
            if act_ids.size:
                counts = n_hops[act_ids]
                offsets = np.cumsum(counts) - counts
                hops = np.repeat(batch.path_ptr[act_ids] - offsets, counts) \
                    + np.arange(int(counts.sum()))
                local = np.repeat(np.arange(act_ids.size), counts)
                rate[act_ids] = max_min_rates(topology.bandwidth, local, links[hops],
                                              act_ids.size)
                if on_rates is not None:
                    on_rates(t, act_ids.copy(), rate[act_ids].copy())
    if not done.all():
        raise unfinished_error(done)
    busy = np.bincount(links, weights=size[hop_msg] / topology.bandwidth[links],
                       minlength=topology.n_links)
    return SimResult.build(NAME, batch, ready, ready, finish, None, busy, topology.n_links)
