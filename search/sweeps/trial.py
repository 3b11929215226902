"""One trial of a sweep: a design point in, its metrics out (:func:`evaluate_trial`).

Search proposes, evaluation never searches (docs/architecture.md section 3): the driver
(:mod:`search.sweeps.driver`) asks Optuna for a :class:`SweepPoint` and runs
:func:`evaluate_trial` on it in a Ray task; the :class:`TrialOutcome` becomes one
record row.

Performance model
-----------------
:func:`evaluate_trial` times every workload of the mix with the training-iteration
model :func:`evaluators.iteration.evaluate` (records' ``time_model``
``"iteration-model"``).

Co-design per trial
-------------------
With a search budget (``strategy_search``, the default) every workload of the mix
gets the best memory-feasible strategy found on the trial's fabric
(:func:`search.per_fabric.best_strategies`: MCMC from the feasible start); the record
keeps the start's time too (``start_iteration_time_s``: the fixed-strategy answer) and
the evaluations spent.  ``collective_method: best`` (the default) picks the fastest
valid synthesizer per collective (:mod:`evaluators.iteration.comm`); the record names
the winners (``collective_algorithms_json``) and their gain over ring.

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
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from codesign.errors import CodesignError, InfeasibleError, InvalidSpecError, invalid
from codesign.specs import check_choice, check_int, check_number
from search.per_fabric import DEFAULT_SHAPES
from search.sweeps.spec import PROCUREMENT_KEYS, WorkloadItem

__all__ = ["SweepPoint", "TrialOutcome", "evaluate_trial", "time_model_name",
           "ITERATION_MODEL", "plan_workloads", "strategy_rows", "cached_topology"]

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
        Topology family (:data:`search.design_point.DESIGN_FAMILIES` or ``topoopt``).
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
        Collective algorithm for the iteration model: ``best`` (the fastest valid
        synthesizer per collective), ``auto`` (``multiring`` on direct-connect fabrics,
        ``ring`` on switched ones) or a registered name.
    workloads : tuple of WorkloadItem
        The weighted workload mix.
    search_evaluations : int
        Strategy-search budget per workload (0: no search, fixed strategies).
    search_restarts : int
        Independent MCMC chains per workload.
    search_shapes : int
        Model-parallel shapes timed before the chains, at most
        (:attr:`search.per_fabric.SearchBudget.shapes`; 0: none).
    seed : int
        Seed of randomized families and of the strategy search.
    oversub : float
        Oversubscription of the ``leafspine`` family.
    budget_usd : float or None
        Designs whose network costs more are pruned.
    hardware_file : str or None
        Hardware catalog YAML the ``gpu`` name is looked up in (``None``: the built-in
        catalog); e.g. a profile written by ``codesign calibrate``.
    catalog : str or None
        Network parts catalog the fabric is priced with: a name of
        :data:`topologies.cost.CATALOG_NAMES` (``parts-2026``: 2025-2026 switch boxes,
        optics by reach and power) or a catalog YAML; ``None``: TopoOpt's Table 2 (the
        paper's reproductions).
    procurement : tuple of (key, value)
        Training goal and TCO assumptions (the sweep spec's ``procurement``): the
        outcome then carries ``tco_usd`` and, with a goal, ``days_to_train`` and
        ``usd_per_run`` (:func:`search.time_to_train.procurement`).
    comm_overlap : str
        How candidate strategies' communication overlaps their compute: ``framework``
        (default) or ``none`` (:func:`evaluators.iteration.comm_overlap_options`).
    """

    family: str
    servers: int
    degree: int
    link_bandwidth_Bps: float
    gpu: str = "A100-80"
    collective_method: str = "best"
    workloads: tuple[WorkloadItem, ...] = (WorkloadItem("resnet50"),)
    search_evaluations: int = 16
    search_restarts: int = 1
    search_shapes: int = DEFAULT_SHAPES
    seed: int = 0
    oversub: float = 2.0
    budget_usd: float | None = None
    gpus_per_server: int | None = None
    hardware_file: str | None = None
    catalog: str | None = None
    procurement: tuple[tuple[str, Any], ...] = ()
    comm_overlap: str = "framework"

    def __post_init__(self) -> None:
        # Every field checked here, so that a library caller's bad value is one line
        # naming it (a nan budget disabled the budget check, search_evaluations 1e9 ran
        # for hours, a string seed went through).
        from evaluators.iteration.comm import collective_methods
        from evaluators.iteration.inputs import COMM_OVERLAPS
        from search.per_fabric import MAX_SEARCH_EVALUATIONS, MAX_SEARCH_SHAPES

        if not isinstance(self.family, str) or not self.family:
            raise invalid("sweep point family", self.family, "a topology family name")
        check_int("sweep point servers", self.servers, 1)
        check_int("sweep point degree", self.degree, 1)
        check_number("sweep point link_bandwidth_Bps", self.link_bandwidth_Bps)
        if not isinstance(self.gpu, str) or not self.gpu:
            raise invalid("sweep point gpu", self.gpu, "a GPU name of the hardware catalog")
        check_choice("sweep point collective_method", self.collective_method,
                     collective_methods())
        if not isinstance(self.workloads, tuple) or not self.workloads or not all(
                isinstance(w, WorkloadItem) for w in self.workloads):
            raise invalid("sweep point workloads", self.workloads,
                          "a non-empty tuple of WorkloadItem")
        check_int("sweep point search_evaluations", self.search_evaluations, 0,
                  MAX_SEARCH_EVALUATIONS)
        check_int("sweep point search_restarts", self.search_restarts, 1)
        check_int("sweep point search_shapes", self.search_shapes, 0, MAX_SEARCH_SHAPES)
        check_int("sweep point seed", self.seed, 0)
        check_number("sweep point oversub", self.oversub)
        if self.budget_usd is not None:
            check_number("sweep point budget_usd", self.budget_usd)
        if self.gpus_per_server is not None:
            check_int("sweep point gpus_per_server", self.gpus_per_server, 1)
        for name in ("hardware_file", "catalog"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not v):
                raise invalid(f"sweep point {name}", v, "a file path or catalog name, or None")
        if not isinstance(self.procurement, tuple) or not all(
                isinstance(kv, tuple) and len(kv) == 2 for kv in self.procurement):
            raise invalid("sweep point procurement", self.procurement,
                          "a tuple of (key, value) pairs")
        for key, _ in self.procurement:
            check_choice("sweep point procurement key", key, PROCUREMENT_KEYS)
        check_choice("sweep point comm_overlap", self.comm_overlap, COMM_OVERLAPS)

    def hardware(self):
        """The :class:`~codesign.workloads.hardware.Hardware` of ``gpu`` (and
        ``gpus_per_server``)."""
        from codesign.workloads import get_hardware
        from codesign.workloads.hardware import load_hardware_catalog

        catalog = load_hardware_catalog(self.hardware_file) if self.hardware_file else None
        hw = get_hardware(self.gpu, catalog)
        if self.gpus_per_server is not None and self.gpus_per_server != hw.gpus_per_server:
            hw = replace(hw, gpus_per_server=self.gpus_per_server)
        return hw

    @property
    def search(self):
        """The :class:`~search.per_fabric.SearchBudget`, or ``None`` (no search)."""
        from search.per_fabric import SearchBudget

        if self.search_evaluations <= 0:
            return None
        return SearchBudget(self.search_evaluations, min(self.search_restarts,
                                                          self.search_evaluations),
                            shapes=self.search_shapes)

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


def plan_workloads(point: SweepPoint, hardware, fixed=None) -> list:
    """The mix as :class:`~search.per_fabric.WorkloadPlan` (workload and search start).

    A workload's ``strategy`` is its start when it fits (and, without a search budget,
    the strategy timed, fitting or not); otherwise the start is
    :func:`search.strategy.feasible.feasible_start`.  ``fixed`` (one
    :class:`~search.strategy.space.Candidate` per workload, with its placement order)
    overrides both: each is timed as it is, without a search (the what-if times the
    strategies found on one fabric on others, :mod:`search.whatif`).

    Raises
    ------
    InfeasibleError
        A given strategy uses another number of GPUs, or no strategy of a workload fits
        in memory (the message names the closest attempt's shortfall).
    """
    from codesign.workloads import parse_strategy
    from search.strategy.feasible import feasible_start
    from search.per_fabric import WorkloadPlan
    from search.strategy.space import Candidate

    gpus = point.servers * hardware.gpus_per_server
    if fixed is not None and len(fixed) != len(point.workloads):
        raise invalid("fixed strategies", len(fixed),
                      f"one per workload of the mix ({len(point.workloads)})")
    plans = []
    for i, item in enumerate(point.workloads):
        workload = item.load()
        text = str(fixed[i].strategy) if fixed is not None else item.strategy
        given = fixed[i].strategy if fixed is not None else \
            parse_strategy(item.strategy) if item.strategy is not None else None
        if given is not None and given.gpus != gpus:
            raise InfeasibleError(f"strategy {text} uses {given.gpus} GPUs, the design "
                                  f"has {gpus} ({point.servers} servers of "
                                  f"{hardware.gpus_per_server})")
        if fixed is not None:
            start, as_given = fixed[i], True
        elif given is not None and point.search is None:
            start, as_given = Candidate(given), True
        else:
            start = feasible_start(workload, gpus, hardware, preferred=given)
            as_given = False
        plans.append(WorkloadPlan(item.label, item.weight, item.config, workload, start,
                                  as_given))
    return plans


@lru_cache(maxsize=32)
def cached_topology(spec: str):
    """:func:`topologies.registry.from_spec`, one object per spec and process: the
    iteration model keeps its caches (collective schedules, ``best`` decisions, flow
    phases) with the topology object, so trials and what-if candidates on the same
    fabric share them."""
    from topologies.registry import from_spec

    return from_spec(spec)


def _server_bandwidth(topo) -> float:
    """Mean bandwidth out of one server (sum of its links' rates), bytes/s."""
    import numpy as np

    out = np.bincount(topo.src, weights=topo.bandwidth, minlength=topo.n_nodes)[:topo.npus]
    return float(out.mean())


def _collective_summary(choices) -> dict[str, Any]:
    """Record fields of the ``best`` decisions the chosen strategies' collectives use
    (each :class:`~search.per_fabric.WorkloadChoice`'s ``metrics["collectives"]``; the
    same decision shared by two workloads counted once); empty without them.

    Only the chosen strategies' decisions, not every decision the search made on the
    fabric: those depend on what else ran in the process, the record must not."""
    from codesign.records import to_json

    used: dict[tuple, dict[str, Any]] = {}
    for choice in choices:
        for d in choice.metrics.get("collectives") or ():
            used.setdefault((d["kind"], d["nodes"], d["size_class"], d["algorithm"],
                             d["time_s"]), d)
    decisions = list(used.values())
    if not decisions:
        return {}
    wins: dict[str, int] = {}
    for d in decisions:
        wins[d["algorithm"]] = wins.get(d["algorithm"], 0) + 1
    rings = [d for d in decisions if d["ring_time_s"] == d["ring_time_s"]]
    gain = (sum(d["ring_time_s"] for d in rings) / sum(d["time_s"] for d in rings)
            if rings and sum(d["time_s"] for d in rings) > 0 else None)
    return {"collective_algorithms_json": to_json({"wins": wins, "choices": decisions}),
            "collective_gain_over_ring": gain}


def _infeasible_kind(exc: InfeasibleError) -> str:
    return "memory" if exc.reason == "memory" else "strategy"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


@lru_cache(maxsize=8)
def _catalog(name: str):
    from topologies.cost import load_catalog

    return load_catalog(name)


def network_cost(point: SweepPoint, topology=None, hardware=None):
    """The :class:`~topologies.cost.CostBreakdown` of a trial's fabric in its catalog.

    ``topology`` is the built fabric (``None`` for ``topoopt``, whose graph depends on
    the strategies: its price does not -- ``degree`` interfaces per server through the
    look-ahead patch panels, TopoOpt Appendix C/G -- so a parts catalog prices the
    ``perms`` fabric with the same interfaces).  ``hardware`` is the point's
    (:meth:`SweepPoint.hardware`, looked up when not given; a hardware file is read
    each time).

    Raises
    ------
    InvalidSpecError
        An unknown catalog name or a bad catalog file.
    """
    from search.design_point import DesignPoint, topology_spec_for
    from topologies.cost import Catalog, topology_cost, topoopt_cost

    cat = _catalog(point.catalog) if point.catalog is not None else None
    if point.family == "topoopt":
        if cat is None or isinstance(cat, Catalog):
            return topoopt_cost(point.servers, point.degree, point.link_bandwidth_Bps,
                                catalog=cat)
        topology = cached_topology(topology_spec_for(DesignPoint(
            "perms", point.servers, point.degree, point.link_bandwidth_Bps, seed=point.seed)))
    # The server price (the TCO's) includes the server's own scale-up domain.
    hw = point.hardware() if hardware is None else hardware
    return topology_cost(topology, catalog=cat, server_gpus=hw.gpus_per_server)


def evaluate_trial(point: SweepPoint, fixed=None) -> TrialOutcome:
    """Build, price and time one design over its workload mix (pure but for timings).

    Parameters
    ----------
    point : SweepPoint
        The design.
    fixed : sequence of Candidate, optional
        One strategy (with its placement) per workload, timed as it is instead of the
        point's starts and search (:func:`plan_workloads`).

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
        method does not apply to this workload or topology).  A complete outcome also
        carries the co-design fields: ``strategies`` (typed, one per workload),
        ``start_iteration_time_s`` (the feasible starts: the fixed-strategy answer),
        ``search_evaluations``, ``mfu``, ``server_bandwidth_Bps`` and, with
        ``collective_method="best"``, ``collective_algorithms_json`` and
        ``collective_gain_over_ring``.

    Notes
    -----
    Unexpected exceptions propagate: the driver records the trial as failed.
    """
    from codesign.records import to_json
    from search.design_point import DesignPoint, spec_rate, topology_spec_for
    from search.per_fabric import alternate_topoopt, best_strategies

    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()

    def done(status: str, reason: str = "", **metrics: Any) -> TrialOutcome:
        return TrialOutcome(status, reason, metrics, started, time.perf_counter() - t0)

    hardware = point.hardware()
    gpus = point.servers * hardware.gpus_per_server
    try:
        plans = plan_workloads(point, hardware, fixed)
    except InfeasibleError as exc:
        return done("pruned", f"{_infeasible_kind(exc)}: {_one_line(exc)}")
    except InvalidSpecError as exc:
        return done("pruned", f"inapplicable: {_one_line(exc)}")
    spec = ""
    try:
        if point.family == "topoopt":
            spec = (f"topoopt:{point.servers},degree={point.degree},"
                    f"bw={spec_rate(point.link_bandwidth_Bps)},seed={point.seed}")
            topo = None
        else:
            spec = topology_spec_for(DesignPoint(point.family, point.servers, point.degree,
                                                 point.link_bandwidth_Bps,
                                                 seed=point.seed, oversub=point.oversub),
                                     hardware)
            topo = cached_topology(spec)
            topo.diameter  # all-pairs hops: refused here (pruned) above the memory limit
        cost = network_cost(point, topo, hardware)
    except CodesignError as exc:
        return done("pruned", f"unbuildable: {type(exc).__name__}: {_one_line(exc)}",
                    topology_spec=spec or None)
    cost_usd = float(cost.total_usd)
    summary = dict(topology_spec=spec, cost_usd=cost_usd,
                   cost_breakdown=to_json({str(k): float(v) for k, v in cost.items.items()}))
    if point.budget_usd is not None and cost_usd > point.budget_usd:
        return done("pruned", f"budget exceeded: the network costs ${cost_usd:,.0f} > "
                              f"budget ${point.budget_usd:,.0f}", **summary)
    try:
        if point.family == "topoopt":
            topo, choices = alternate_topoopt(
                point.servers, point.degree, point.link_bandwidth_Bps, plans, hardware,
                collective_method=point.collective_method, budget=point.search, seed=point.seed,
                comm_overlap=point.comm_overlap)
        else:
            choices = best_strategies(topo, plans, hardware,
                                      collective_method=point.collective_method,
                                      budget=point.search, seed=point.seed,
                                      comm_overlap=point.comm_overlap)
    except InfeasibleError as exc:
        return done("pruned", f"{_infeasible_kind(exc)}: {_one_line(exc)}", **summary)
    except InvalidSpecError as exc:
        # The strategy does not apply to this workload on this design or the collective
        # method does not apply to this topology: a point outside the valid space.
        return done("pruned", f"inapplicable: {_one_line(exc)}", **summary)
    summary.update(npus=int(topo.npus), switches=int(topo.switches), links=int(topo.n_links),
                   diameter=int(topo.diameter), server_bandwidth_Bps=_server_bandwidth(topo),
                   **_collective_summary(choices))
    total_w = sum(c.weight for c in choices)

    def mean(values: list[float]) -> float | None:
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            return None
        return sum(c.weight * v for c, v in zip(choices, values)) / total_w

    t_iter = mean([c.time_s for c in choices])
    metrics = {k: mean([float(c.metrics.get(k, float("nan"))) for c in choices]) for k in (
        "compute_time_s", "exposed_communication_s", "communication_time_s", "bandwidth_tax",
        "mean_path_length")}
    per = []
    for c in choices:
        # MFU, like every other per-workload metric, is the chosen strategy's
        # IterationResult's (model FLOPs over the peak of its number format).
        per.append({"workload": c.name, "config": c.config, "weight": c.weight,
                    "strategy": str(c.candidate.strategy), "order": "-".join(c.candidate.order),
                    "start_strategy": str(c.start.strategy), "start_time_s": c.start_time_s,
                    "search_evaluations": c.evaluations,
                    **{k: _nan_to_none(v) if isinstance(v, float) else v
                       for k, v in c.metrics.items() if k.endswith("_s") or k in (
                           "bandwidth_tax", "mean_path_length", "bubble_fraction",
                           "max_link_utilisation", "mfu")},
                    "iteration_time_s": c.time_s})
    if point.procurement:
        metrics.update(_procurement_metrics(point, hardware, plans, t_iter, spec))
    return done("complete", iteration_time_s=t_iter, gpus=gpus,
                throughput_per_usd=1.0 / (t_iter * cost_usd) if t_iter > 0 and cost_usd > 0
                else None,
                cost_per_throughput_usd=cost_usd * t_iter,
                strategy=str(choices[0].candidate.strategy) if len(choices) == 1 else to_json(
                    {c.name: str(c.candidate.strategy) for c in choices}),
                strategies=strategy_rows(choices),
                start_iteration_time_s=mean([c.start_time_s for c in choices]),
                search_evaluations=sum(c.evaluations for c in choices),
                mfu=mean([p["mfu"] for p in per]),
                per_workload_json=to_json(per), **metrics, **summary)


def _procurement_metrics(point: SweepPoint, hardware, plans, t_iter: float,
                         spec: str) -> dict[str, Any]:
    """``tco_usd`` (and ``days_to_train``, ``usd_per_run`` with a goal) of a trial."""
    from codesign.tco import TcoParams, load_prices
    from search.time_to_train import fabric_parts_cost, parse_goal, procurement

    opts = dict(point.procurement)
    goal = parse_goal(tokens=opts.get("tokens"), samples=opts.get("samples"),
                      epochs=opts.get("epochs"), dataset_samples=opts.get("dataset_samples"))
    defaults = load_prices(opts.get("prices"))[1]
    params = TcoParams(**{k: opts.get(k, getattr(defaults, k)) for k in (
        "usd_per_kwh", "pue", "utilisation", "years")}, gpu_hour_usd=opts.get("gpu_hour_usd"))
    net_usd, net_w = fabric_parts_cost(spec, family=point.family, servers=point.servers,
                                       degree=point.degree,
                                       link_bandwidth_Bps=point.link_bandwidth_Bps,
                                       server_gpus=hardware.gpus_per_server)
    p = procurement(goal, plans[0].workload, iteration_time_s=t_iter, servers=point.servers,
                    hardware=hardware, network_usd=net_usd, network_power_w=net_w,
                    params=params, prices=opts.get("prices"))
    return {k: p[k] for k in ("tco_usd", "days_to_train", "usd_per_run") if k in p}


def outcome_candidates(outcome: TrialOutcome) -> tuple:
    """The strategy of every workload of a complete outcome with its placement order
    (its ``strategies`` rows, :func:`strategy_rows`), as
    :class:`~search.strategy.space.Candidate` s.  An embedding-table placement that a
    search chose is not recorded: tables go round robin."""
    from codesign.workloads import parse_strategy
    from search.strategy.space import Candidate

    return tuple(Candidate(parse_strategy(r["text"]), tuple(r["order"].split("-")))
                 for r in outcome.metrics["strategies"])


def strategy_rows(choices) -> list[dict[str, Any]]:
    """The typed ``strategies`` record column: one struct per workload, the chosen
    strategy's :meth:`Strategy.to_dict` fields (so new strategy keys become new struct
    fields) plus the workload, its weight, the start and the times."""
    rows = []
    for c in choices:
        d = {k: v for k, v in c.candidate.strategy.to_dict().items() if k != "text"}
        d.update(workload=c.name, weight=float(c.weight), text=str(c.candidate.strategy),
                 order="-".join(c.candidate.order),
                 start_text=str(c.start.strategy), iteration_time_s=float(c.time_s),
                 start_iteration_time_s=float(c.start_time_s),
                 search_evaluations=int(c.evaluations))
        rows.append(d)
    return rows
