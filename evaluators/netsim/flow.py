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
from dataclasses import dataclass

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_int
from evaluators.netsim.core import Messages, SimResult, release_dependents, unfinished_error

__all__ = ["max_min_rates", "coarse_max_min_rates", "fair_rates", "StaticPaths", "FluidResult",
           "fluid_loop", "run"]

NAME = "flow"

#: Relative tolerance for "link saturated" and "flow drained" decisions.
RTOL = 1e-9


def max_min_rates(capacity: np.ndarray, hop_flow: np.ndarray, hop_link: np.ndarray,
                  n_flows: int) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    Parameters
    ----------
    capacity : array_like of float, shape (n_links,)
        Capacity of every link, bytes/s (finite, >= 0).
    hop_flow, hop_link : array_like of int, shape (H,)
        Incidence list: hop ``h`` means flow ``hop_flow[h]`` crosses link
        ``hop_link[h]`` (a flow crossing a link twice uses it twice); ids in
        ``0..n_flows - 1`` and ``0..n_links - 1``.
    n_flows : int
        Number of flows (>= 0); every flow must have at least one hop.

    Returns
    -------
    ndarray of float, shape (n_flows,)
        Rate of each flow, bytes/s.

    Raises
    ------
    InvalidSpecError
        A capacity that is NaN, infinite or negative (NaN never saturates a link: the
        filling looped forever), ids that are not integers or out of range, arrays of
        another shape, or ``n_flows`` not an integer >= 0.  The checks are O(n_links + H)
        numpy passes; the fluid loops call the unchecked filling on their own arrays.

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
    capacity, hop_flow, hop_link, n_flows = _checked_incidence(capacity, hop_flow, hop_link,
                                                               n_flows)
    return _max_min_fill(capacity, hop_flow, hop_link, n_flows)


def _checked_incidence(capacity, hop_flow, hop_link, n_flows):
    """The arguments of :func:`max_min_rates` as arrays, or the one-line InvalidSpecError."""
    n_flows = check_int("n_flows", n_flows, 0)
    cap = _numeric_array(capacity)
    if cap is None or cap.ndim != 1 or not np.isfinite(cap).all() or (cap < 0).any():
        raise invalid("capacity", capacity, "a 1-D array of finite capacities >= 0 (bytes/s)")
    hops = []
    for name, ids, bound in (("hop_flow", hop_flow, n_flows), ("hop_link", hop_link, cap.size)):
        a = _numeric_array(ids)
        if a is not None and a.size == 0:
            a = a.astype(np.int64)   # np.asarray([]) is float64
        if a is None or a.ndim != 1 or a.dtype.kind not in "iu" \
                or (a.size and (a.min() < 0 or a.max() >= bound)):
            raise invalid(name, ids, f"a 1-D array of integer ids in 0..{bound - 1}")
        hops.append(a)
    if hops[0].size != hops[1].size:
        raise invalid("hop_link length", hops[1].size, f"{hops[0].size} (one per hop_flow)")
    return cap.astype(np.float64, copy=False), hops[0], hops[1], n_flows


def _numeric_array(values: object) -> np.ndarray | None:
    """``values`` as a numpy array of integers or floats, or None (a string, None, a
    bool array, a ragged list or objects)."""
    try:
        a = np.asarray(values)
    except (TypeError, ValueError):   # ragged nested lists
        return None
    return a if a.dtype.kind in "iuf" else None


def _max_min_fill(capacity: np.ndarray, hop_flow: np.ndarray, hop_link: np.ndarray,
                  n_flows: int) -> np.ndarray:
    """Progressive filling of :func:`max_min_rates` on arguments known to be valid."""
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
        # Unchecked: the fluid loops pass their own arrays (a topology's validated
        # capacities, the hops of the active flows) once per event.
        return _max_min_fill(capacity, hop_flow, hop_link, n_flows)
    return coarse_max_min_rates(capacity, hop_flow, hop_link, n_flows, rtol)


RateObserver = Callable[[float, np.ndarray, np.ndarray], None]


class StaticPaths:
    """A network whose flows keep fixed paths over fixed link capacities (a topology).

    The network argument of :func:`fluid_loop` for :func:`run` and
    :func:`evaluators.iteration.phase.flow_phase`; the reconfigurable fabric
    (:class:`evaluators.netsim.reconfigurable.ReconfigurableFabric`) is the other one.

    Parameters
    ----------
    capacity, latency : ndarray of float, shape (n_links,)
        Link bandwidth (bytes/s) and latency (s).
    ptr, links : ndarray of int
        Path of every flow in CSR form (flow ``i`` crosses ``links[ptr[i]:ptr[i + 1]]``).
    """

    def __init__(self, capacity: np.ndarray, latency: np.ndarray, ptr: np.ndarray,
                 links: np.ndarray) -> None:
        self.capacity = capacity
        self.ptr, self.links = ptr, links
        self.n_hops = np.diff(ptr)
        hop_flow = np.repeat(np.arange(self.n_hops.size), self.n_hops)
        self.path_latency = np.bincount(hop_flow, weights=latency[links],
                                        minlength=self.n_hops.size)

    def update(self, t: float, ids: np.ndarray, rem: np.ndarray) -> bool:
        """Nothing ever changes: False."""
        return False

    def next_change(self, idle: bool) -> float:
        """Never: ``inf``."""
        return np.inf

    def instant(self, ids: np.ndarray) -> np.ndarray:
        """Flows with no hops (``src == dst``) finish when they become ready."""
        return self.n_hops[ids] == 0

    def latency_of(self, ids: np.ndarray) -> np.ndarray:
        """Path latency of flows ``ids``, s."""
        return self.path_latency[ids]

    def routes(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every flow has its path: ``(ok, local, link)`` (:func:`fluid_loop`)."""
        counts = self.n_hops[ids]
        offsets = np.cumsum(counts) - counts
        hops = np.repeat(self.ptr[ids] - offsets, counts) + np.arange(int(counts.sum()))
        return (np.ones(ids.size, dtype=bool), np.repeat(np.arange(ids.size), counts),
                self.links[hops])

    def stall_error(self) -> Exception:
        return InfeasibleError("flows cannot progress: a path has no capacity",
                               reason="connectivity")


@dataclass(frozen=True)
class FluidResult:
    """Outcome of :func:`fluid_loop`.

    Attributes
    ----------
    start_s : ndarray
        When each flow became ready (its ready time, or the finish of its last
        dependency if later), s.
    finish_s : ndarray
        When each flow's last byte arrived (drain time + path latency), s; NaN for a
        flow never ready (a dependency cycle).
    hop_bytes : float
        Bytes moved times links crossed, summed over the flows (the bytes the links
        carried).
    """

    start_s: np.ndarray
    finish_s: np.ndarray
    hop_bytes: float


def fluid_loop(size, network, *, ready=None, deps=None, rtol: float = 0.0, t0: float = 0.0,
               on_rates: RateObserver | None = None) -> FluidResult:
    """The fluid event loop: flows share the network max-min fairly between events.

    The one loop of the ``flow`` model (:func:`run`), the iteration model's phases
    (:func:`evaluators.iteration.phase.flow_phase`) and the reconfigurable circuit fabric
    (:class:`evaluators.netsim.reconfigurable.ReconfigurableFabric`).  Events are flow
    arrivals (ready time, dependencies done), flow completions and changes of the
    network (the fabric's epoch boundaries and pauses); after each one the rates are
    recomputed (:func:`fair_rates`) if the set of active flows or the network changed.

    Event batching (``rtol``, the rule :func:`evaluators.iteration.phase.flow_phase` has
    always used): when the next flow drains at ``t1``, every flow that drains by
    ``t0 + (t1 - t0)(1 + rtol)`` at the current rates -- a window relative to the time
    elapsed since ``t0``, the start of the phase -- drains at its own time before the
    rates are recomputed, the others moving at their rates until the last of those; an
    arrival or network change inside the window cuts it.  Capacity freed inside the
    window is not redistributed, so a phase needs at most about ``log(T / t_first) /
    rtol`` rate computations.  A change of the network (the fabric's new circuits, the
    end of its pause) starts a new phase (``t0`` := now): measured from the first call
    instead, the window grew with the epochs and pauses waited through and moved single
    flows of the fabric by up to 34 % from exact max-min on the cases of
    ``tests/evaluators/fluid_cases.py`` (at most 1 % with the reset).  ``rtol = 0``
    batches only flows draining within 1e-12 (relative) of ``t1``: exact max-min timing.
    When the loop stops for an arrival or a network change, flows left with at most
    ``1e-9`` of their bytes (rounding residue, :data:`RTOL`) drain there.

    Parameters
    ----------
    size : array_like of float
        Bytes of every flow (>= 0).
    network : StaticPaths or ReconfigurableFabric
        Paths and capacities: ``capacity`` (per link, bytes/s), ``routes(ids) -> (ok,
        local, link)`` (which active flows have a path now, and the incidence list of those:
        position among the ``ok`` ones and link of every hop), ``latency_of(ids)`` (path
        latency, s), ``instant(ids)`` (flows that finish as soon as ready),
        ``update(t, ids, rem) -> changed`` (called at every event with the active flows and
        the remaining bytes), ``next_change(idle)`` (time of the next possible change;
        ``inf`` if none, or if ``idle`` -- nothing moves -- and the network cannot change
        that) and ``stall_error()`` (raised when nothing can move again).
    ready : array_like of float, optional
        Earliest start of each flow, s (default ``t0``).
    deps : (n_waiting, dependents_ptr, dependents_idx), optional
        Dependencies: how many flows each one waits for, and who waits for each one (CSR);
        a flow becomes ready at ``max(ready, finish of its dependencies)``.
    rtol : float, optional
        Event-batching and filling-level tolerance (above; also passed to
        :func:`fair_rates`).
    t0 : float, optional
        Start of the phase (the clock at the first event), s.
    on_rates : callable, optional
        ``on_rates(time_s, flow_ids, rates_Bps)`` after every rate computation.

    Returns
    -------
    FluidResult

    Raises
    ------
    InfeasibleError
        ``network.stall_error()``, when active flows can never move again.
    """
    size = np.asarray(size, dtype=np.float64)
    n = size.size
    start = np.full(n, float(t0)) if ready is None else np.array(ready, dtype=np.float64)
    finish = np.full(n, np.nan)
    rem = size.copy()
    rate = np.zeros(n)
    hopc = np.zeros(n)                   # links on each active flow's current path
    hop_bytes = 0.0
    if deps is None:
        order = np.argsort(start, kind="stable")
        sorted_ready = start[order]
        heap = None
        nxt = 0
    else:
        waiting, rptr, ridx = (np.asarray(a).tolist() for a in deps)
        ready_l = start.tolist()
        heap = [(ready_l[i], i) for i in range(n) if waiting[i] == 0]
        heapq.heapify(heap)

    def complete(ids: np.ndarray, times: np.ndarray) -> None:
        finish[ids] = times
        if heap is None:
            return
        freed: list[int] = []
        for i, f in zip(ids.tolist(), times.tolist()):
            release_dependents(ridx[rptr[i]:rptr[i + 1]], f, ready_l, waiting, freed)
        for d in freed:
            heapq.heappush(heap, (ready_l[d], d))

    def admit(now: float) -> np.ndarray:
        nonlocal nxt
        if heap is None:
            k = int(np.searchsorted(sorted_ready, now, side="right"))
            ids, nxt = order[nxt:k], k
            return ids
        out = []
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap)[1])
        ids = np.array(out, dtype=np.int64)
        start[ids] = [ready_l[i] for i in out]
        return ids

    def next_arrival() -> float:
        if heap is None:
            return float(sorted_ready[nxt]) if nxt < n else np.inf
        return heap[0][0] if heap else np.inf

    t = origin = float(t0)
    act = np.zeros(0, dtype=np.int64)
    changed = True
    while True:
        # Arrivals at t (an instant flow may make dependents ready at t: repeat).
        new = []
        while (ids := admit(t)).size:
            inst = (size[ids] == 0) | network.instant(ids)
            if inst.any():
                done = ids[inst]
                complete(done, start[done] + network.latency_of(done))
            new.append(ids[~inst])
        if new and sum(a.size for a in new):
            act = np.sort(np.concatenate([act, *new]))
            changed = True
        if network.update(t, act, rem):
            changed = True
            origin = t                   # a new network starts a new phase
        if changed and act.size:
            ok, local, link = network.routes(act)
            rate[act] = 0.0
            hopc[act] = 0.0
            moving = act[ok]
            rate[moving] = fair_rates(network.capacity, local, link, moving.size, rtol)
            hopc[moving] = np.bincount(local, minlength=moving.size)
            if on_rates is not None:
                on_rates(t, act.copy(), rate[act].copy())
        changed = False
        r = rate[act]
        left = np.full(act.size, np.inf)
        pos = r > 0
        left[pos] = rem[act[pos]] / r[pos]
        t_arrive = next_arrival()
        if not act.size and t_arrive == np.inf:
            break                        # all done (or the rest wait on a cycle)
        t1 = t + float(left.min()) if act.size else np.inf
        t_ext = min(t_arrive, network.next_change(not pos.any()))
        if t1 == np.inf and t_ext == np.inf:
            raise network.stall_error()
        if t_ext < t1:
            # An arrival or network change first: everyone moves until then.
            moved = np.minimum(r * (t_ext - t), rem[act])
            hop_bytes += float((moved * hopc[act]).sum())
            rem[act] -= moved
            t = t_ext
            residue = rem[act] <= RTOL * size[act]
            if residue.any():
                done = act[residue]
                hop_bytes += float((rem[done] * hopc[done]).sum())
                rem[done] = 0.0
                complete(done, t + network.latency_of(done))
                act = act[~residue]
                changed = True
            continue
        # flow_phase's batching rule (module docstring of evaluators.iteration.phase).
        horizon = min(max(origin + (t1 - origin) * (1 + rtol), t1), t_ext)
        drained = (t + left) - origin <= (horizon - origin) * (1 + 1e-12)
        done, keep = act[drained], act[~drained]
        t_done = t + left[drained]
        t_end = float(t_done.max())
        moved = np.minimum(r[~drained] * (t_end - t), rem[keep])
        hop_bytes += float((rem[done] * hopc[done]).sum() + (moved * hopc[keep]).sum())
        rem[done] = 0.0
        rem[keep] -= moved
        complete(done, t_done + network.latency_of(done))
        act, changed, t = keep, True, t_end
    return FluidResult(start, finish, hop_bytes)


def run(topology, batch: Messages, *, on_rates: RateObserver | None = None) -> SimResult:
    """Simulate ``batch`` on ``topology`` with max-min fair flows (exact: :func:`fluid_loop`
    at ``rtol = 0``).

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
    links, size = batch.path_links, batch.size
    net = StaticPaths(topology.bandwidth, topology.latency, batch.path_ptr, links)
    res = fluid_loop(size, net, ready=batch.ready,
                     deps=(np.diff(batch.dep_ptr), *batch.dependents()), on_rates=on_rates)
    done = ~np.isnan(res.finish_s)
    if not done.all():
        raise unfinished_error(done)
    busy = np.bincount(links, weights=size[batch.hop_msg] / topology.bandwidth[links],
                       minlength=topology.n_links)
    return SimResult.build(NAME, batch, res.start_s, res.start_s, res.finish_s, None, busy,
                           topology.n_links)
