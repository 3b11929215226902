"""TopoOpt's closed-form iteration time, Eq. (1) (NSDI'23, Sec. 5.4).

    T = R / (N B) + alpha A / (N B) + C

* ``R``: AllReduce bytes per iteration, the total over servers of what each sends in
  its ring collectives (:meth:`Demand.split` groups: bytes each member sends its
  successor x members), so ``R / (N B)`` is a ring all-reduce's ``2 (n-1)/n G / B``;
* ``A``: all-to-all / model-parallel bytes per iteration between servers (the MP matrix
  of :meth:`Demand.split`, summed);
* ``N``: servers (topology NPUs), ``B``: per-server bandwidth, the mean injection
  bandwidth of an NPU (TopoOpt: degree ``d`` x link rate);
* ``alpha``: the slow-down of all-to-all traffic from host-based forwarding.  Default:
  1 on fabrics with switches (no host forwarding, TopoOpt: "the bandwidth tax for a
  full bisection bandwidth Fat-tree topology is always one"), and on direct-connect
  fabrics (no switches) the topology's mean path length, which TopoOpt Sec. 5.5 gives
  as the value of alpha under optimal routing;
* ``C``: compute, ``(m + P - 1)`` x the slowest stage's per-micro-batch compute (as
  :func:`evaluators.iteration.evaluate`).

Assumptions (TopoOpt's footnote 2): no overlap of communication and computation, no
competing traffic, AllReduce on direct links, no latency, intra-server traffic free.
Where they hold (e.g. pure data parallelism with a ring all-reduce on an ideal switch
or a ring of servers with zero latency and ``overlap=False``) it equals
:func:`~evaluators.iteration.evaluate`; latency, congestion and pipeline bubbles of
communication make ``evaluate`` slower, overlap makes it faster.

:func:`eq1_time` is the formula alone (microseconds); :func:`closed_form_estimate`
also reads the inputs from a topology and a demand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_int, check_number

__all__ = ["ClosedFormEstimate", "eq1_time", "closed_form_estimate"]


@dataclass(frozen=True)
class ClosedFormEstimate:
    """Eq. (1) and its terms (seconds, bytes, bytes/s)."""

    iteration_time_s: float
    allreduce_s: float
    alltoall_s: float
    compute_time_s: float
    allreduce_bytes: float
    mp_bytes: float
    servers: int
    server_bandwidth_Bps: float
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def eq1_time(allreduce_bytes: float, mp_bytes: float, servers: int,
             server_bandwidth_Bps: float, compute_s: float, alpha: float = 1.0
             ) -> ClosedFormEstimate:
    """TopoOpt Eq. (1): ``R/(N B) + alpha A/(N B) + C``.

    Parameters
    ----------
    allreduce_bytes : float
        ``R``, bytes per iteration summed over servers.
    mp_bytes : float
        ``A``, all-to-all / MP bytes per iteration summed over server pairs.
    servers : int
        ``N``.
    server_bandwidth_Bps : float
        ``B``, bytes/s per server.
    compute_s : float
        ``C``, seconds.
    alpha : float, optional
        Forwarding slow-down of all-to-all traffic (>= 1 in practice).

    Examples
    --------
    >>> eq1_time(2e9, 0.0, 4, 1e9, 0.5).iteration_time_s
    1.0
    """
    R, A, C = (check_number(n, v, inclusive=True) for n, v in (
        ("allreduce_bytes", allreduce_bytes), ("mp_bytes", mp_bytes), ("compute_s", compute_s)))
    check_int("servers", servers, 1)
    Bw = check_number("server_bandwidth_Bps", server_bandwidth_Bps, inclusive=True)
    if Bw <= 0:
        raise invalid("server_bandwidth_Bps", server_bandwidth_Bps, "a bandwidth > 0 bytes/s")
    a = check_number("alpha", alpha, inclusive=True)
    nb = servers * Bw
    return ClosedFormEstimate(R / nb + a * A / nb + C, R / nb, a * A / nb, C, R, A,
                              int(servers), Bw, a)


def closed_form_estimate(system, demand, *, alpha: float | None = None) -> ClosedFormEstimate:
    """Eq. (1) for ``demand`` (a :class:`~codesign.workloads.demand.Demand`) on ``system``.

    ``system`` is a topology (or spec string) whose NPUs are the demand's servers or its
    GPUs (as :func:`~evaluators.iteration.evaluate`).  ``alpha`` defaults to 1 with
    switches, the mean path length without (module docstring).

    Examples
    --------
    >>> from codesign.workloads import get_workload, demand_for
    >>> d = demand_for(get_workload("resnet50").with_batch(2048), "dp=16", "A100-80")
    >>> e = closed_form_estimate("ideal:2,degree=1,bw=100Gbps", d)
    >>> e.servers, e.alpha
    (2, 1.0)
    """
    from topologies.registry import load_topology

    topo = load_topology(system) if isinstance(system, str) else system
    pl = demand.placement
    s = demand.strategy
    if topo.npus == pl.servers:
        R, A = demand.split_totals()   # == the totals of demand.split(), without matrices
    elif topo.npus == pl.gpus:
        R = float(demand.gpu_matrix(mutable=True).sum())
        A = float(demand.gpu_matrix(mutable=False).sum())
    else:
        raise invalid("topology NPUs", topo.npus,
                      f"the job's servers ({pl.servers}) or its GPUs ({pl.gpus})")
    per = np.zeros(pl.gpus)
    step = np.zeros(pl.gpus)   # the optimizer step runs once, after the pipeline
    for op in demand.compute():
        (step if op.kind == "optimizer" else per)[list(op.ranks)] += op.seconds * op.repeat
    slots = s.m + (s.pp - 1) / s.vpp
    C = float(per.max()) / s.m * slots + float(step.max()) if per.size else 0.0
    if alpha is None:
        alpha = 1.0 if topo.switches else float(topo.mean_path_length)
    B = float(topo.injection_bandwidth().mean())
    return eq1_time(R, A, topo.npus, B, C, alpha)
