"""One trial of a sweep: a design point in, its metrics out (:func:`evaluate_trial`).

Search proposes, evaluation never searches (DESIGN.md section 3): the driver
(:mod:`search.sweep`) asks Optuna for a :class:`SweepPoint` and runs
:func:`evaluate_trial` on it in a Ray task; the :class:`TrialOutcome` becomes one
record row.

Performance model
-----------------
:func:`evaluate_trial` times every workload of the mix with the training-iteration
model :func:`evaluators.iteration.evaluate` (records' ``time_model``
``"iteration-model"``).

Families
--------
Those of :data:`search.design_point.DESIGN_FAMILIES` (spec strings), plus
``topoopt``: TopoOpt's TopologyFinder (NSDI'23 Algorithm 1) run on the trial's
own demand -- the weighted sum over the mix of each workload's AllReduce groups
and MP server matrix (:meth:`codesign.workloads.Demand.split`) -- with ``d``
links of ``B`` per server (priced by :func:`topologies.cost.topology_cost`).
The strategy is not co-optimised here (that is the alternating loop).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from codesign.errors import CodesignError, InfeasibleError, InvalidSpecError
from search.sweep_spec import WorkloadItem

__all__ = ["SweepPoint", "TrialOutcome", "evaluate_trial", "time_model_name",
           "ITERATION_MODEL"]

#: ``time_model`` of records made with :func:`evaluators.iteration.evaluate`.
ITERATION_MODEL = "iteration-model"


def time_model_name() -> str:
    """The performance model :func:`evaluate_trial` uses (recorded as ``time_model``)."""
    return ITERATION_MODEL


# ----------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class SweepPoint:
    """One design of a sweep (the input of :func:`evaluate_trial`).

    Attributes
    ----------
    family : str
        Topology family (:data:`search.design_point.DESIGN_FAMILIES`).
    servers : int
        Servers; the topology's NPUs are servers.
    degree : int
        Links (NICs) per server.
    link_bandwidth_Bps : float
        Rate of one link, bytes/s.
    gpu : str
        GPU type (hardware catalog name).
    gpus_per_server : int or None
        GPUs per server; ``None``: the GPU's reference server (catalog).
    collective_method : str
        Collective algorithm for the iteration model (``auto``: ``multiring`` on
        direct-connect fabrics, ``ring`` on switched ones; routes ECMP on switched ones).
    workloads : tuple of WorkloadItem
        The weighted workload mix.
    tp, pp : int
        Searched tensor/pipeline degrees (0: not searched; the workloads' own or
        pure data-parallel strategies are used).
    seed : int
        Seed of randomized families.
    oversub : float
        Oversubscription of the ``leafspine`` family.
    budget_usd : float or None
        Designs whose network costs more are pruned.
    """

    family: str
    servers: int
    degree: int
    link_bandwidth_Bps: float
    gpu: str = "A100-80"
    collective_method: str = "auto"
    workloads: tuple[WorkloadItem, ...] = (WorkloadItem("resnet50"),)
    tp: int = 0
    pp: int = 0
    seed: int = 0
    oversub: float = 2.0
    budget_usd: float | None = None
    gpus_per_server: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters (stored as ``params_json``)."""
        return asdict(self)


@dataclass(frozen=True)
class TrialOutcome:
    """What :func:`evaluate_trial` returns.

    Attributes
    ----------
    status : str
        ``"complete"`` or ``"pruned"``.
    reason : str
        Why it was pruned: ``"unbuildable: ..."``, ``"budget exceeded: ..."``,
        ``"memory: ..."``, ``"strategy: ..."`` or ``"inapplicable: ..."``; ``""``
        when complete.
    metrics : dict
        Record columns (metrics, topology summary, cost breakdown as JSON...).
    started_at : datetime
        Start of the evaluation, UTC.
    duration_s : float
        Wall time of the evaluation, seconds.
    """

    status: str
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    started_at: datetime | None = None
    duration_s: float | None = None


@lru_cache(maxsize=64)
def _workload(name: str, config: str | None):
    from codesign.workloads import get_workload

    return get_workload(name, config)


def _strategy_for(item: WorkloadItem, point: SweepPoint, gpus: int) -> str:
    """The strategy string of one workload on a design of ``gpus`` GPUs."""
    if item.strategy is not None:
        from codesign.workloads import parse_strategy

        s = parse_strategy(item.strategy)
        if s.gpus != gpus:
            raise InfeasibleError(f"strategy {item.strategy} uses {s.gpus} GPUs, the design has "
                                  f"{gpus} ({point.servers} servers of {gpus // point.servers})")
        return item.strategy
    tp, pp = max(point.tp, 1), max(point.pp, 1)
    if gpus % (tp * pp):
        raise InfeasibleError(f"tp={tp} x pp={pp} does not divide the {gpus} GPUs of the design")
    text = f"dp={gpus // (tp * pp)}"
    if tp > 1:
        text += f",tp={tp}"
    if pp > 1:
        text += f",pp={pp}"
    return text


def _iteration(topo, workload, strategy: str, hardware, method: str) -> dict[str, float]:
    from evaluators import iteration  # the real model (issue 7)

    res = iteration.evaluate(topo, workload, strategy, hardware=hardware,
                             collective_method=method, routing="auto")
    out = {}
    for key in ("iteration_time_s", "compute_time_s", "exposed_communication_s",
                "communication_time_s", "bandwidth_tax", "mean_path_length"):
        v = getattr(res, key, None)
        out[key] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
            else float("nan")
    return out


def _mix_demand(plan, hardware) -> tuple[list[tuple[tuple[int, ...], float]], Any]:
    """TopologyFinder's inputs for a workload mix: weighted sums of every workload's
    AllReduce groups (same server ring: bytes added) and MP server matrices."""
    import numpy as np

    from codesign.workloads import demand_for

    groups: dict[tuple[int, ...], float] = {}
    mp = None
    for item, strategy, workload in plan:
        g, m = demand_for(workload, strategy, hardware).split()
        for servers, b in g:
            groups[servers] = groups.get(servers, 0.0) + item.weight * b
        mp = item.weight * np.asarray(m, dtype=float) + (0.0 if mp is None else mp)
    return list(groups.items()), mp


def _topoopt_fabric(point: "SweepPoint", groups, mp) -> tuple[str, Any]:
    """TopoOpt's TopologyFinder (Algorithm 1, :func:`topologies.topoopt.topology_finder`)
    for the mix's demand: the ``topoopt`` family of sweeps.  The record's
    ``topology_spec`` names it (``topoopt:N,degree=d,bw=B,seed=S``); rebuild it with
    ``topology_finder`` on the same demand."""
    from search.design_point import _rate
    from topologies.topoopt import topology_finder

    res = topology_finder(point.servers, point.degree, groups, mp,
                          link_bandwidth=point.link_bandwidth_Bps, seed=point.seed)
    spec = (f"topoopt:{point.servers},degree={point.degree},"
            f"bw={_rate(point.link_bandwidth_Bps)},seed={point.seed}")
    return spec, res.topology


def _infeasible_kind(exc: InfeasibleError) -> str:
    # The memory check's message is "strategy ... needs X GiB per GPU ..., hardware H has Y".
    return "memory" if "GiB per GPU" in str(exc) else "strategy"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def evaluate_trial(point: SweepPoint) -> TrialOutcome:
    """Build, price and time one design over its workload mix (pure but for timings).

    Parameters
    ----------
    point : SweepPoint
        The design.

    Returns
    -------
    TrialOutcome
        ``complete`` with the weighted metrics (``iteration_time_s`` = weighted mean
        of the workloads' iteration times, seconds; ``cost_usd`` = network cost,
        TopoOpt Table 2 prices; ``throughput_per_usd`` = 1 / (iteration time x
        cost), iterations/s per USD; ``cost_per_throughput_usd`` = cost x iteration
        time, USD per iteration/s), or ``pruned`` with a reason: ``unbuildable``
        (no such topology), ``budget exceeded`` (checked before any timing) or
        ``memory``/``strategy`` (the strategy does not fit in GPU memory or uses
        another number of GPUs) or ``inapplicable`` (the strategy or collective
        method does not apply to this workload or topology).

    Notes
    -----
    Unexpected exceptions propagate: the driver records the trial as failed.
    """
    from codesign.records import to_json
    from codesign.workloads import get_hardware
    from search.design_point import DesignPoint, topology_spec_for
    from topologies.cost import topology_cost
    from topologies.registry import from_spec

    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()

    def done(status: str, reason: str = "", **metrics: Any) -> TrialOutcome:
        return TrialOutcome(status, reason, metrics, started, time.perf_counter() - t0)

    hardware = get_hardware(point.gpu)
    if point.gpus_per_server is not None and point.gpus_per_server != hardware.gpus_per_server:
        from dataclasses import replace

        hardware = replace(hardware, gpus_per_server=point.gpus_per_server)
    gpus = point.servers * hardware.gpus_per_server
    demand = None
    try:
        plan = [(item, _strategy_for(item, point, gpus), _workload(item.name, item.config))
                for item in point.workloads]
        if point.family == "topoopt":
            demand = _mix_demand(plan, hardware)
    except InfeasibleError as exc:
        return done("pruned", f"{_infeasible_kind(exc)}: {_one_line(exc)}")
    except InvalidSpecError as exc:
        return done("pruned", f"inapplicable: {_one_line(exc)}")
    spec = ""
    try:
        if point.family == "topoopt":
            spec, topo = _topoopt_fabric(point, *demand)
        else:
            spec = topology_spec_for(DesignPoint(point.family, point.servers, point.degree,
                                                 point.link_bandwidth_Bps,
                                                 seed=point.seed, oversub=point.oversub))
            topo = from_spec(spec)
        cost = topology_cost(topo)
        diameter = int(topo.diameter)  # all-pairs hops: refused above the memory limit
    except CodesignError as exc:
        return done("pruned", f"unbuildable: {type(exc).__name__}: {_one_line(exc)}",
                    topology_spec=spec or None)
    cost_usd = float(cost.total_usd)
    summary = dict(topology_spec=spec, cost_usd=cost_usd, npus=int(topo.npus),
                   switches=int(topo.switches), links=int(topo.n_links),
                   diameter=diameter,
                   cost_breakdown=to_json({str(k): float(v) for k, v in cost.items.items()}))
    if point.budget_usd is not None and cost_usd > point.budget_usd:
        return done("pruned", f"budget exceeded: the network costs ${cost_usd:,.0f} > "
                              f"budget ${point.budget_usd:,.0f}", **summary)
    per: list[dict[str, Any]] = []
    try:
        for item, strategy, workload in plan:
            m = _iteration(topo, workload, strategy, hardware, point.collective_method)
            per.append({"workload": item.name, "config": item.config, "weight": item.weight,
                        "strategy": strategy, **m})
    except InfeasibleError as exc:
        return done("pruned", f"{_infeasible_kind(exc)}: {_one_line(exc)}", **summary)
    except InvalidSpecError as exc:
        # The strategy does not apply to this workload on this design (more tensor-parallel
        # ranks than heads, a batch that does not split evenly) or the collective method
        # does not apply to this topology: a point outside the valid space, not a bug.
        return done("pruned", f"inapplicable: {_one_line(exc)}", **summary)
    weights = [p["weight"] for p in per]
    total_w = sum(weights)

    def mean(key: str) -> float:
        vals = [p[key] for p in per]
        if not all(math.isfinite(v) for v in vals):
            return float("nan")
        return sum(w * v for w, v in zip(weights, vals)) / total_w

    t_iter = mean("iteration_time_s")
    metrics = {k: _nan_to_none(mean(k)) for k in (
        "compute_time_s", "exposed_communication_s", "communication_time_s", "bandwidth_tax",
        "mean_path_length")}
    return done("complete", iteration_time_s=t_iter, gpus=gpus,
                throughput_per_usd=1.0 / (t_iter * cost_usd) if t_iter > 0 and cost_usd > 0
                else None,
                cost_per_throughput_usd=cost_usd * t_iter,
                strategy=per[0]["strategy"] if len(per) == 1 else to_json(
                    {p["workload"]: p["strategy"] for p in per}),
                per_workload_json=to_json([{k: _nan_to_none(v) for k, v in p.items()}
                                           for p in per]),
                **metrics, **summary)
