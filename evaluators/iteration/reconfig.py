"""Iteration time on a reconfigurable circuit fabric (TopoOpt's OCS-reconfig baseline).

TopoOpt (NSDI'23) Sec. 5.1: OCS-reconfig measures the traffic demand every 50 ms and
re-runs Algorithm 5 on it, pausing all flows 10 ms per reconfiguration, with host-based
forwarding (App. E.4).  The circuits therefore depend on *when* traffic happens, so this
model walks the iteration on an absolute clock instead of composing durations as
:func:`evaluators.iteration.evaluate` does:

* the demand's ops are taken in order, one micro-batch after another (forward then
  backward); a compute op advances the clock by its time (the layer runs on all its
  ranks at once); the communication between two compute ops (a *block*: its transfers,
  all-to-alls and ring collectives) is sent on the fabric as one set of flows and the
  clock moves to its last finish;
* ring collectives become flows from every member's server to its successor's of the
  ring volume (``2(n-1)/n`` of the buffer for all-reduce, ``(n-1)/n`` for reduce-scatter
  and all-gather): the bandwidth term of a ring, which is what the circuits change;
  all-to-alls send ``size/n`` to every other member;
* gradient buckets are released when the backward of their ``ready_after`` layer is done
  (overlapped with the rest of the backward pass), the optimizer's gathers after them;
* traffic between GPUs of one server stays on the server's fabric, timed by the ring
  closed form at ``Hardware.fabric_bandwidth`` (it does not touch the circuits).

Pipelines (``pp > 1``) are walked stage after stage without the 1F1B overlap, which
over-states their time; TopoOpt's OCS-reconfig comparisons use the strategies FlexFlow
finds for a static network, which are pipeline-free in our search space by default.
The fabric keeps its circuits and clock from one iteration to the next: the result is
the second of two consecutive iterations (warm circuits), the first is reported too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.errors import invalid
from codesign.collective_kinds import RING_KINDS, ring_bytes_per_member
from codesign.workloads.demand import Compute, Transfer
from evaluators.iteration.comm import intra_ring_time
from evaluators.netsim.reconfigurable import ReconfigurableFabric

__all__ = ["ReconfigIterationResult", "evaluate_reconfigurable"]


@dataclass(frozen=True)
class ReconfigIterationResult:
    """Times of :func:`evaluate_reconfigurable`, seconds."""

    iteration_time_s: float
    first_iteration_time_s: float
    compute_time_s: float
    reconfigurations: int
    paused_s: float
    bandwidth_tax: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Block:
    """Server-level flows of one block (aggregated per server pair), intra-server time."""

    def __init__(self, servers: int) -> None:
        self.bytes = np.zeros((servers, servers))
        self.intra_s = 0.0

    def add(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray) -> None:
        np.add.at(self.bytes, (src, dst), size)

    def empty(self) -> bool:
        return not self.bytes.any() and self.intra_s == 0.0

    def flows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        np.fill_diagonal(self.bytes, 0.0)
        s, d = np.nonzero(self.bytes)
        return s, d, self.bytes[s, d]


def _add_op(block: _Block, op, g: int, fabric_Bps: float) -> None:
    if isinstance(op, Transfer):
        block.add(np.array([op.src // g]), np.array([op.dst // g]), np.array([op.bytes]))
        return
    members = np.asarray(op.members, dtype=np.int64)
    n = members.size
    if n < 2 or op.bytes <= 0:
        return
    servers = members // g
    if op.kind in RING_KINDS:
        per = ring_bytes_per_member(op.kind, op.bytes, n)
        block.add(servers, np.roll(servers, -1), np.full(n, per))
        if np.unique(servers).size == 1:
            block.intra_s = max(block.intra_s, intra_ring_time(op.kind, n, op.bytes, fabric_Bps))
    else:  # alltoall
        s, d = np.meshgrid(servers, servers, indexing="ij")
        off = ~np.eye(n, dtype=bool)
        block.add(s[off], d[off], np.full(int(off.sum()), op.bytes / n))


def _send(fabric: ReconfigurableFabric, block: _Block, release: float | np.ndarray) -> float:
    s, d, b = block.flows()
    fabric.t = max(fabric.t, float(np.max(release)) if np.ndim(release) else float(release))
    end = fabric.t
    if s.size:
        rel = release if np.ndim(release) else None
        end = float(np.max(fabric.transfer(s, d, b, rel)))
    return end + block.intra_s


def _walk(demand, fabric: ReconfigurableFabric, g: int, fabric_Bps: float, t0: float
          ) -> tuple[float, float]:
    """One iteration from ``t0``: returns (end time, compute seconds)."""
    servers = fabric.n
    m = demand.microbatches
    passes = [op for op in demand.ops if op.phase in ("forward", "backward")]
    # Per-GPU clocks: a layer runs on its ranks in parallel with other ranks' layers
    # (e.g. tables on their owners); a communication block synchronises everyone.
    clock = np.full(demand.placement.gpus, t0)
    busy = np.zeros(demand.placement.gpus)
    marks: dict[str, float] = {}
    for mb in range(m):
        block = _Block(servers)
        for op in passes:
            if op.repeat != m and mb > 0:
                continue  # once-per-iteration op: only with the first micro-batch
            if isinstance(op, Compute):
                if not block.empty():
                    clock[:] = _send(fabric, block, float(clock.max()))
                    block = _Block(servers)
                ranks = list(op.ranks)
                clock[ranks] = clock[ranks].max() + op.seconds
                busy[ranks] += op.seconds
                if op.phase == "backward":
                    marks[op.name] = float(clock[ranks].max())
            else:
                _add_op(block, op, g, fabric_Bps)
        if not block.empty():
            clock[:] = _send(fabric, block, float(clock.max()))
    t = float(clock.max())
    compute = float(busy.max())
    end = t
    grads = [op for op in demand.ops if op.phase == "gradient"]
    if grads:
        # Each bucket released at its ready time (last micro-batch's backward marks), but
        # not before the fabric's clock (the end of the last block it carried).
        src, dst, size, rel, intra = [], [], [], [], 0.0
        for op in grads:
            b = _Block(servers)
            _add_op(b, op, g, fabric_Bps)
            s, d, v = b.flows()
            ready = marks.get(op.ready_after, t)
            for _ in range(op.repeat):
                src.append(s), dst.append(d), size.append(v), rel.append(np.full(s.size, ready))
            intra = max(intra, b.intra_s)
        if any(x.size for x in src):
            fin = fabric.transfer(np.concatenate(src), np.concatenate(dst), np.concatenate(size),
                                  np.concatenate(rel))
            end = max(end, float(fin.max()))
        end = max(end, t + intra)
        fabric.t = max(fabric.t, end)
    opt = [op for op in demand.ops if op.phase == "optimizer" and not isinstance(op, Compute)]
    if opt:
        block = _Block(servers)
        for op in opt:
            _add_op(block, op, g, fabric_Bps)
        end = _send(fabric, block, end)
    # The optimizer step (memory bound, per stage in parallel) after ZeRO's gather.
    step = max((op.seconds * op.repeat for op in demand.ops
                if op.phase == "optimizer" and isinstance(op, Compute)), default=0.0)
    end += step
    fabric.t = max(fabric.t, end)
    return end, compute + step


def evaluate_reconfigurable(demand, *, degree: int, bandwidth_Bps: float, fabric_Bps: float,
                            policy, epoch_s: float = 0.05, delay_s: float = 0.01,
                            forwarding: bool = True, latency_s: float = 0.0,
                            rtol: float = 0.05) -> ReconfigIterationResult:
    """Iteration time of ``demand`` on a reconfigurable fabric (module docstring).

    Parameters
    ----------
    demand : codesign.workloads.demand.Demand
        The iteration (its placement gives servers and GPUs per server).
    degree : int
        Circuits per server (``d``).
    bandwidth_Bps : float
        Rate of one circuit, bytes/s.
    fabric_Bps : float
        Intra-server fabric bandwidth per GPU, bytes/s.
    policy : callable
        ``policy(demand_matrix, degree) -> circuits`` (TopoOpt Algorithm 5:
        ``topologies.topoopt.ocs_reconfig``).
    epoch_s, delay_s : float, optional
        Demand collection period and reconfiguration delay (TopoOpt: 50 ms, 10 ms).
    forwarding : bool, optional
        Host-based forwarding (OCS-reconfig-FW) or direct circuits only (-noFW).
    latency_s : float, optional
        Per-circuit-hop latency, seconds.
    rtol : float, optional
        Event-batching tolerance of the fabric's flow simulation
        (:class:`~evaluators.netsim.reconfigurable.ReconfigurableFabric`); 0 = exact.

    Returns
    -------
    ReconfigIterationResult
    """
    placement = demand.placement
    if placement.servers < 2:
        raise invalid("servers", placement.servers, "at least 2 for a circuit fabric")
    fabric = ReconfigurableFabric(placement.servers, degree, bandwidth_Bps, policy=policy,
                                  epoch_s=epoch_s, delay_s=delay_s, latency_s=latency_s,
                                  forwarding=forwarding, rtol=rtol)
    g = placement.gpus_per_server
    first, compute = _walk(demand, fabric, g, fabric_Bps, 0.0)
    second, _ = _walk(demand, fabric, g, fabric_Bps, first)
    return ReconfigIterationResult(iteration_time_s=second - first,
                                   first_iteration_time_s=first, compute_time_s=compute,
                                   reconfigurations=fabric.reconfigurations,
                                   paused_s=fabric.paused_s, bandwidth_tax=fabric.bandwidth_tax)
