"""A reconfigurable circuit fabric (TopoOpt's OCS-reconfig baseline) as a flow simulator.

TopoOpt (NSDI'23) Sec. 5.1 and Appendix E.4: servers with ``d`` interfaces are joined by
optical circuit switches; "we collect the unsatisfied traffic demand every 50 ms and run
Algorithm 5 to decide the new network topology.  After the new topology is computed, we
pause all the flows for 10 ms representing the reconfiguration delay of the OCS, apply the
new topology, and then resume the flows with one or more corresponding physical links
across the flow source and destination", with host-based forwarding enabled (or not:
OCS-reconfig-noFW of Sec. 5.7).

:class:`ReconfigurableFabric` keeps that state across calls -- the clock, the current
circuits, the next epoch boundary and the end of a pause -- so an iteration model can
send its communication phase by phase (:meth:`ReconfigurableFabric.transfer` returns the
finish times and advances the clock).  Between events the flows share the circuits
max-min fairly (:func:`evaluators.netsim.flow.max_min_rates`), parallel circuits of a
pair adding up; with forwarding a flow takes a minimum-hop path over the circuits (the
hosts relay: TopoOpt's bandwidth tax), without it only a direct circuit, and it waits
for one.  Events: epoch boundaries (every ``epoch_s``), the end of a pause, flow
releases and flow completions.

Reconfiguration rule: at every epoch boundary with unsatisfied demand the policy
computes circuits from the *remaining bytes of the released flows* (the instantaneous
demand; flows released later are not foreseen -- the estimation error the paper blames
for OCS-reconfig's results); when the circuits change, all flows pause for ``delay_s``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_number
from evaluators.netsim.flow import RTOL, fair_rates
from topologies.routing import predecessor_walk

__all__ = ["ReconfigurableFabric", "Policy"]

#: ``policy(demand, degree) -> circuits``: demand an ``n x n`` array of bytes, circuits an
#: ``n x n`` integer array of directed circuits (row: transmitter, column: receiver) with
#: row and column sums at most ``degree``.
Policy = Callable[[np.ndarray, int], np.ndarray]


@dataclass
class _Flows:
    src: np.ndarray
    dst: np.ndarray
    rem: np.ndarray
    size: np.ndarray
    release: np.ndarray
    finish: np.ndarray
    hops: np.ndarray


class ReconfigurableFabric:
    """``n`` servers of degree ``d`` on reconfigurable circuits (module docstring).

    Parameters
    ----------
    n : int
        Servers.
    degree : int
        Transmit and receive interfaces per server.
    bandwidth_Bps : float
        Rate of one circuit, bytes/s.
    policy : callable
        Circuit computation (:data:`Policy`), e.g. TopoOpt's Algorithm 5.
    epoch_s : float, optional
        Demand collection period (TopoOpt: 50 ms).
    delay_s : float, optional
        Reconfiguration delay during which no flow moves (TopoOpt: 10 ms).
    latency_s : float, optional
        Per-hop latency added to a flow's finish, seconds.
    forwarding : bool, optional
        Host-based forwarding over multi-hop circuit paths.
    rtol : float, optional
        Event batching and coarse rates: flows finishing within ``(1 + rtol)`` of the next
        completion finish together, and rates are max-min fair to within ``rtol``
        (:func:`~evaluators.netsim.flow.coarse_max_min_rates`); 0 = exact max-min.
    """

    def __init__(self, n: int, degree: int, bandwidth_Bps: float, *, policy: Policy,
                 epoch_s: float = 0.05, delay_s: float = 0.01, latency_s: float = 0.0,
                 forwarding: bool = True, rtol: float = 0.05) -> None:
        for field, v in (("servers", n), ("degree", degree)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise invalid(field, v, "an integer >= 1")
        if not callable(policy):
            raise invalid("policy", policy, "a callable (demand, degree) -> circuits")
        self.n, self.degree = n, degree
        self.bandwidth = check_number("bandwidth_Bps", bandwidth_Bps)
        self.epoch = check_number("epoch_s", epoch_s)
        self.delay = check_number("delay_s", delay_s, inclusive=True)
        self.latency = check_number("latency_s", latency_s, inclusive=True)
        self.forwarding = bool(forwarding)
        if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 <= rtol < 1:
            raise invalid("rtol", rtol, "a number in [0, 1) (0 = exact max-min events)")
        self.rtol = float(rtol)
        self.policy = policy
        self.t = 0.0
        self.next_epoch = 0.0
        self.pause_until = 0.0
        self.circuits = np.zeros((n, n), dtype=np.int64)
        self.reconfigurations = 0
        self.paused_s = 0.0
        self.bytes_sent = 0.0
        self.bytes_carried = 0.0
        self._pred: np.ndarray | None = None
        self._changed = True  # did the last epoch boundary change the circuits?
        self._moved = False   # has any byte moved since the last epoch boundary?

    # ------------------------------------------------------------------ circuits
    def _reconfigure(self, flows: _Flows, live: np.ndarray) -> None:
        demand = np.zeros((self.n, self.n))
        np.add.at(demand, (flows.src[live], flows.dst[live]), flows.rem[live])
        if not demand.any():
            return
        new = np.asarray(self.policy(demand, self.degree), dtype=np.int64)
        if new.shape != (self.n, self.n) or (new < 0).any() \
                or (new.sum(axis=1) > self.degree).any() or (new.sum(axis=0) > self.degree).any():
            raise InfeasibleError(f"circuit policy returned circuits that break the degree "
                                  f"limit {self.degree} or the shape ({self.n}, {self.n})")
        np.fill_diagonal(new, 0)
        self._changed = not np.array_equal(new, self.circuits)
        if self._changed:
            self.circuits = new
            self._pred = None
            self.reconfigurations += 1
            self.pause_until = self.t + self.delay
            self.paused_s += self.delay

    def _predecessors(self) -> np.ndarray:
        if self._pred is None:
            graph = csr_matrix((self.circuits > 0).astype(np.float64))
            _, self._pred = shortest_path(graph, unweighted=True, return_predecessors=True)
        return self._pred

    def _paths(self, src: np.ndarray, dst: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Circuit paths of flows ``src -> dst``: ``(ok, local, pair)`` -- which flows have
        a path now, and the incidence list (flow position among the ``ok`` ones, pair id
        ``u * n + v`` of each hop).  With forwarding: minimum-hop paths over the circuit
        graph (:func:`topologies.routing.predecessor_walk`)."""
        n = self.n
        if not self.forwarding:
            ok = self.circuits[src, dst] > 0
            return ok, np.arange(int(ok.sum())), src[ok] * n + dst[ok]
        pred = self._predecessors()
        ok = pred[src, dst] >= 0
        s, d = src[ok], dst[ok]
        ptr, prev, nxt = predecessor_walk(s, d, lambda a, cur: pred[s[a], cur])
        return ok, np.repeat(np.arange(s.size), np.diff(ptr)), prev * n + nxt

    # ------------------------------------------------------------------ simulation
    def transfer(self, src, dst, size_bytes, release_s=None) -> np.ndarray:
        """Send flows and advance the clock until all of them have arrived.

        Parameters
        ----------
        src, dst : array_like of int
            Server of each flow (``src != dst``; equal ones finish at release).
        size_bytes : array_like of float
            Bytes of each flow.
        release_s : array_like of float, optional
            Absolute time each flow may start (default: the fabric's current time).

        Returns
        -------
        numpy.ndarray
            Finish time of each flow, seconds (absolute).  The fabric's clock ends at the
            last finish.
        """
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        size = np.asarray(size_bytes, dtype=np.float64).ravel()
        m = src.size
        release = np.full(m, self.t) if release_s is None else np.maximum(
            np.asarray(release_s, dtype=np.float64).ravel(), self.t)
        if dst.size != m or size.size != m or release.size != m:
            raise invalid("flows", f"{m} sources, {dst.size} destinations, {size.size} sizes",
                          "arrays of one length")
        if m and ((src < 0) | (src >= self.n) | (dst < 0) | (dst >= self.n)).any():
            raise invalid("flow endpoint", int(np.concatenate([src, dst]).max()),
                          f"a server in 0..{self.n - 1}")
        if m and (~np.isfinite(size) | (size < 0)).any():
            raise invalid("flow size", float(size.min()), "finite bytes >= 0")
        flows = _Flows(src, dst, size.copy(), size, release, np.full(m, np.nan),
                       np.zeros(m, dtype=np.int64))
        trivial = (src == dst) | (size == 0)
        flows.finish[trivial] = release[trivial]
        flows.rem[trivial] = 0.0
        self.bytes_sent += float(size.sum())
        while np.isnan(flows.finish).any():
            self._step(flows)
        if m:
            self.t = max(self.t, float(np.max(flows.finish)))
        return flows.finish

    def _step(self, flows: _Flows) -> None:
        open_ = np.isnan(flows.finish)
        live = open_ & (flows.release <= self.t * (1 + 1e-15) + 1e-15)
        if self.t >= self.next_epoch - 1e-15:
            if live.any():
                self._reconfigure(flows, live)
                self._moved = False
            self.next_epoch = (math.floor(self.t / self.epoch + 1e-9) + 1) * self.epoch
        upcoming = flows.release[open_ & ~live]
        t_release = float(upcoming.min()) if upcoming.size else math.inf
        horizon = min(self.next_epoch, t_release)
        if self.t < self.pause_until:
            self.t = min(self.pause_until, horizon)
            return
        ids = np.flatnonzero(live)
        ok, local, pair = self._paths(flows.src[ids], flows.dst[ids])
        if not ok.any():
            # Nothing moves and nothing new arrives: the next boundary sees the same
            # demand, so a policy that just kept its circuits will keep them forever.
            if t_release == math.inf and not self._changed and not self._moved \
                    or horizon == math.inf:
                raise InfeasibleError("flows cannot be delivered: no circuit path and no "
                                      "future reconfiguration (the policy left them "
                                      "unconnected)", reason="connectivity")
            self.t = horizon
            return
        flow_ids = ids[ok]
        counts = np.bincount(local, minlength=flow_ids.size)
        capacity = self.circuits.ravel().astype(np.float64) * self.bandwidth
        rate = fair_rates(capacity, local, pair, flow_ids.size, self.rtol)
        rem = flows.rem[flow_ids]
        left = rem / rate
        dt_done = float(left.min())
        # Flows due within (1 + rtol) of the first completion finish together at the last
        # of them; the others move at their current rates meanwhile (max-min rates are not
        # monotone, so a flow may gain or lose a little; tested within rtol of exact).
        dt = min(float(left[left <= dt_done * (1 + self.rtol)].max()), horizon - self.t)
        moved = np.minimum(rate * dt, rem)
        self._moved = True
        flows.rem[flow_ids] = rem - moved
        self.bytes_carried += float((moved * counts).sum())
        self.t += dt
        done = flows.rem[flow_ids] <= RTOL * flows.size[flow_ids] + 1e-9
        drained = flow_ids[done]
        flows.rem[drained] = 0.0
        flows.hops[drained] = counts[done]
        flows.finish[drained] = self.t + counts[done] * self.latency

    @property
    def bandwidth_tax(self) -> float:
        """Bytes carried on circuits (relayed bytes counted per hop) / bytes sent."""
        return self.bytes_carried / self.bytes_sent if self.bytes_sent else 1.0
