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
finish times and advances the clock).  The flows of a transfer run in the one fluid loop
(:func:`evaluators.netsim.flow.fluid_loop`, the fabric being its network): between events
they share the circuits max-min fairly, parallel circuits of a pair adding up; with
forwarding a flow takes a minimum-hop path over the circuits (the hosts relay: TopoOpt's
bandwidth tax), without it only a direct circuit, and it waits for one.  Events: epoch
boundaries (every ``epoch_s``), the end of a pause, flow releases and flow completions.

Reconfiguration rule: at every epoch boundary with unsatisfied demand the policy
computes circuits from the *remaining bytes of the released flows* (the instantaneous
demand; flows released later are not foreseen -- the estimation error the paper blames
for OCS-reconfig's results); when the circuits change, all flows pause for ``delay_s``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_number
from evaluators.netsim.flow import fluid_loop
from topologies.routing import predecessor_walk

__all__ = ["ReconfigurableFabric", "Policy"]

#: ``policy(demand, degree) -> circuits``: demand an ``n x n`` array of bytes, circuits an
#: ``n x n`` integer array of directed circuits (row: transmitter, column: receiver) with
#: row and column sums at most ``degree``.
Policy = Callable[[np.ndarray, int], np.ndarray]


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
        Event batching and coarse rates of :func:`~evaluators.netsim.flow.fluid_loop`
        (the window measured from the start of the transfer or the last change of the
        circuits); 0 = exact max-min.
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
        self.capacity = np.zeros(n * n)
        self._pred: np.ndarray | None = None
        self._paused = False
        self._active = 0
        self._changed = True  # did the last epoch boundary change the circuits?
        self._moved = False   # has any byte moved since the last epoch boundary?
        self._seen = (0, 0.0)  # (active flows, remaining bytes) at the last boundary

    # ------------------------------------------------------------------ circuits
    def _reconfigure(self, src: np.ndarray, dst: np.ndarray, rem: np.ndarray) -> None:
        demand = np.zeros((self.n, self.n))
        np.add.at(demand, (src, dst), rem)
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
            self.capacity = new.ravel().astype(np.float64) * self.bandwidth
            self._pred = None
            self.reconfigurations += 1
            self.pause_until = self.t + self.delay
            self.paused_s += self.delay

    def _predecessors(self) -> np.ndarray:
        if self._pred is None:
            graph = csr_matrix((self.circuits > 0).astype(np.float64))
            _, self._pred = shortest_path(graph, unweighted=True, return_predecessors=True)
        return self._pred

    # ------------------------------------------------ the network of evaluators.netsim.flow
    # :func:`~evaluators.netsim.flow.fluid_loop` runs the flows of one :meth:`transfer`;
    # these methods are its view of the fabric (links: ordered server pairs ``u * n + v``,
    # capacity = circuits x circuit rate).
    def update(self, t: float, ids: np.ndarray, rem: np.ndarray) -> bool:
        """Advance the clock to ``t``; at an epoch boundary recompute the circuits from the
        remaining bytes of the active flows.  True if what the flows may use changed (new
        circuits, or the start or end of a pause)."""
        self.t = t
        before = (self.reconfigurations, self._paused)
        self._active = ids.size
        seen = (ids.size, float(rem[ids].sum()))
        if t >= self.next_epoch - 1e-15:
            if ids.size:
                self._reconfigure(self._src[ids], self._dst[ids], rem[ids])
                self._seen = seen
            self.next_epoch = (math.floor(t / self.epoch + 1e-9) + 1) * self.epoch
        self._moved = seen != self._seen
        self._paused = t < self.pause_until
        return (self.reconfigurations, self._paused) != before

    def next_change(self, idle: bool) -> float:
        """The end of the pause or the next epoch boundary; ``inf`` when nothing moves and
        the next boundary would see the same demand with the same circuits (the policy
        would keep them: the flows are stuck)."""
        if self._paused:
            return min(self.pause_until, self.next_epoch)
        if idle and self._active and not self._changed and not self._moved:
            return math.inf
        return self.next_epoch

    def instant(self, ids: np.ndarray) -> np.ndarray:
        """None (:meth:`transfer` finishes empty and local flows itself)."""
        return np.zeros(ids.size, dtype=bool)

    def latency_of(self, ids: np.ndarray) -> np.ndarray:
        """Circuit hops of each flow's last path x the per-hop latency, s."""
        return self._hops[ids] * self.latency

    def routes(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Circuit paths of flows ``ids``: ``(ok, local, pair)`` -- which flows have a path
        now (none during a pause), and the incidence list (flow position among the ``ok``
        ones, pair id ``u * n + v`` of each hop).  With forwarding: minimum-hop paths over
        the circuit graph (:func:`topologies.routing.predecessor_walk`); without, only a
        direct circuit."""
        n = self.n
        src, dst = self._src[ids], self._dst[ids]
        if self._paused:
            ok = np.zeros(ids.size, dtype=bool)
            local, pair = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        elif not self.forwarding:
            ok = self.circuits[src, dst] > 0
            local, pair = np.arange(int(ok.sum())), src[ok] * n + dst[ok]
        else:
            pred = self._predecessors()
            ok = pred[src, dst] >= 0
            s, d = src[ok], dst[ok]
            ptr, prev, nxt = predecessor_walk(s, d, lambda a, cur: pred[s[a], cur])
            local, pair = np.repeat(np.arange(s.size), np.diff(ptr)), prev * n + nxt
        self._hops[ids[ok]] = np.bincount(local, minlength=int(ok.sum()))
        return ok, local, pair

    def stall_error(self) -> InfeasibleError:
        return InfeasibleError("flows cannot be delivered: no circuit path and no future "
                               "reconfiguration (the policy left them unconnected)",
                               reason="connectivity")

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
        self.bytes_sent += float(size.sum())
        finish = release.copy()          # local and empty flows finish at release
        ids = np.flatnonzero((src != dst) & (size > 0))
        if ids.size:
            self._src, self._dst = src[ids], dst[ids]
            self._hops = np.zeros(ids.size)
            res = fluid_loop(size[ids], self, ready=release[ids], rtol=self.rtol, t0=self.t)
            finish[ids] = res.finish_s
            self.bytes_carried += res.hop_bytes
        if m:
            self.t = max(self.t, float(np.max(finish)))
        return finish

    @property
    def bandwidth_tax(self) -> float:
        """Bytes carried on circuits (relayed bytes counted per hop) / bytes sent."""
        return self.bytes_carried / self.bytes_sent if self.bytes_sent else 1.0
