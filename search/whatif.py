"""Procurement what-if: the best co-designed fabric per budget for a cluster and a mix.

``codesign whatif --budget 1e5,5e5 --servers 128 --mix resnet50:2,dlrm:1`` calls
:func:`run_whatif`.  For a fixed number of servers (of one GPU type) and a weighted
workload mix it considers every fabric of a grid -- topology family x server degree x
link rate (default: the quickstart families and ``topoopt``, TopologyFinder on the
mix's demand; degree 1-8, or for servers of more than 8 GPUs up to one link per GPU
(:func:`default_degrees`); 25/100/200/400 Gbps) -- and answers, per budget, with the
fabric, the strategy of every workload, the iteration time, MFU, the network cost and
the cost per unit of training throughput ``cost_usd x iteration_time_s`` (USD per
iteration/s; lower is better).  Every fabric is timed as a sweep trial
(:func:`search.sweeps.trial.evaluate_trial`): the strategy of every workload is searched
on that fabric (co-design, :mod:`search.per_fabric`) and collectives use the fastest
valid synthesizer (``collective_method="best"``).

How it stays fast (stated because the answer depends on it)
-----------------------------------------------------------
1. **Feasibility first.**  Memory does not depend on the fabric: each workload's
   feasible start (:func:`search.strategy.feasible.feasible_start`) is found once; if a workload
   has none, the answer is "infeasible" with the closest attempt's shortfall.
2. **Price before timing.**  Every fabric of the grid is built and priced (cheap); one
   costing more than every budget is never timed.
3. **Dominance.**  Within one family and degree a faster link costs more and is never
   slower (same graph, more bandwidth), so per budget only the fastest affordable rate
   of each (family, degree) is timed; the others are dominated by it.
4. **Screen, then search.**  The remaining fabrics are timed with the feasible starts
   (no search) and the cheap ``auto`` collectives (multiring on direct-connect fabrics,
   ring on switched ones); per budget the ``finalists`` fastest affordable ones then get
   the strategy search and the requested collective method (``best``: every applicable
   synthesizer), and so does every other affordable fabric that the largest co-design
   gain seen so far would bring below the budget's best searched time, round after
   round until none would (:func:`_finalists`).  The answer for a budget is the fastest
   result among all timed fabrics it affords, so a larger budget is never slower.
5. **Strategies found on one fabric, timed on the others.**  Much of a search's gain
   does not depend on the fabric: on the README's mix the searches found BERT in an
   8-stage pipeline on every fabric, 1.15-1.5x faster than the feasible starts.
   Measured against the feasible starts, that gain made many fabrics look as if their
   own search could still make them the answer (21 of 65 fabrics searched).  So after
   each round of searches the strategies found (one per workload, with their placement)
   are timed, with ``auto`` collectives, on every fabric that the plain rule would still
   search and on the searched ones; a fabric's screen is then the fastest of its start
   and the strategies found on *other* fabrics, and the gain is a searched fabric's
   time over that screen -- what its own search found beyond the others' strategies.
   The strategies move per workload (:func:`_best_mix`): a mix's time is the weighted
   mean of its workloads' times, each timed on its own, so each workload takes the
   fastest strategy found for it on any fabric (TopologyFinder's fabrics, whose
   topology follows the whole mix's demand, take whole assignments only).
   A faster time from other fabrics' strategies is that fabric's result (timed once
   more where the per-workload choice beats every whole assignment; its "fixed
   start" stays its own feasible start).  The rule still assumes that no unsearched
   fabric gains more from its own search than the most any searched one did; a fabric
   whose gain would be larger can be missed -- raise ``finalists`` to search more
   (``experiments/benchmarks/bench_whatif.py --exhaustive`` compares with searching
   every affordable fabric).
6. **Shared timings.**  Fabrics are built once per process and the iteration model's
   caches (collective schedules, ``best`` decisions, flow phases) live with the
   topology object, so the search reuses the screen's collective timings.

A budget below every fabric's price gets no fabric but names the cheapest fabric that
would do and its cost.  Where the GPU has a calibrated compute profile, each answer
lists the other affordable fabrics whose predicted time is within the model's validated
error of a comparison of two designs on that GPU (``comparison_error``,
``within_model_error``, and a note; ``model_error`` is the larger error of one predicted
time): the model does not rank those against the answer
(:func:`evaluators.iteration.uncertainty.compare`).  When one of them costs less than
the answer, the cheapest is named with its price and time (``cheapest_within_error``):
the model cannot tell it from the answer, a buyer can tell the price.  The list holds
the fabrics timed; a lower link rate of a (family, degree) whose faster rate the budget
affords is not timed (dominance, below), so a cheaper design within the error can lie
outside it.  Progress
(fabrics done / total) is reported through ``progress(done, total)``; the CLI shows it
with an ETA on stderr.

Procurement answers (issue 20)
------------------------------
Every answer also carries the cluster's TCO (capex, opex per year; servers, network and
power, or a cloud price per GPU-hour: :mod:`codesign.tco`), and with a training goal
(``goal``: tokens, samples or epochs) the days to train and USD per run
(:mod:`search.time_to_train`).  ``objective`` picks the answer per budget among the
affordable timed fabrics (default the fastest; ``usd_per_run`` can prefer a pricier,
faster fabric).  ``failures`` adds a failure what-if of each answer's fabric
(:mod:`search.failure_whatif`: slowdown mean/p50/p99, fraction that cannot continue).

Shared cluster (TopoOpt Section 5.6, :func:`shared_cluster`)
-----------------------------------------------------------
The time model lives in :mod:`evaluators.shared_cluster`; :func:`shared_cluster` runs it
on the design families' fabrics (:func:`search.design_point.topology_spec_for`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codesign.errors import CodesignError, InfeasibleError, invalid
from codesign.resources import check_local_workers
from codesign.specs import check_choice, check_int, check_number
from evaluators.shared_cluster import SharedClusterRow, format_shared_cluster
from search.budget import best_per_budget
from search.per_fabric import MAX_SEARCH_EVALUATIONS, MAX_SEARCH_SHAPES, SearchBudget
from search.sweeps.spec import (MAX_SERVER_DEGREE, SWEEP_FAMILIES, WorkloadItem, model_file_item,
                                parse_usd)
from search.sweeps.trial import (SweepPoint, TrialOutcome, cached_topology, evaluate_trial,
                                 network_cost, outcome_candidates, plan_workloads,
                                 time_model_name)

__all__ = ["WhatIfChoice", "WhatIfResult", "parse_budgets", "parse_mix", "run_whatif",
           "format_whatif", "SharedClusterRow", "shared_cluster", "format_shared_cluster",
           "DEFAULT_SEARCH", "WHATIF_OBJECTIVES", "default_degrees"]

DEFAULT_FAMILIES = ("fattree", "leafspine", "ideal", "expander", "torus", "perms", "topoopt")
DEFAULT_DEGREES = tuple(range(1, 9))
DEFAULT_LINK_RATES_BPS = (25e9 / 8, 100e9 / 8, 200e9 / 8, 400e9 / 8)
#: Strategy-search budget per workload and finalist fabric (``--search-evaluations``).
DEFAULT_SEARCH = SearchBudget(evaluations=12, restarts=1)
#: What picks the answer per budget (``whatif --objective``); all minimised.
WHATIF_OBJECTIVES = ("iteration_time_s", "cost_usd", "days_to_train", "usd_per_run",
                     "tco_usd")


def default_degrees(gpus_per_server: int) -> tuple[int, ...]:
    """Server degrees (links per server) the what-if prices when none are given.

    A DGX/HGX server has one scale-out NIC per GPU, 8 in all (NVIDIA DGX H100 / B200
    datasheets: 8 single-port ConnectX-7 at 400 Gb/s), so degrees 1-8
    (:data:`DEFAULT_DEGREES`) reach the vendor's design.  A server of more GPUs -- a
    GB200 NVL72 rack, 72 GPUs and one ConnectX-7 per GPU (NVIDIA GB200 NVL72 datasheet)
    -- would never be priced at its own design on that grid, so its degrees are the
    divisors ``d`` of the GPU count with ``d`` or ``gpus / d`` a power of two: up to 8
    links, then one link per 8, 4, 2 and 1 GPUs (72: 1, 2, 4, 8, 9, 18, 36, 72), every
    link serving the same number of GPUs; ``2 (k + 1)`` degrees where ``2^k`` is the
    largest power of two dividing the GPU count (8 for 72, as the 8-GPU grid; ``k + 1``
    when the count is ``2^k``).

    Examples
    --------
    >>> default_degrees(8)
    (1, 2, 3, 4, 5, 6, 7, 8)
    >>> default_degrees(72)
    (1, 2, 4, 8, 9, 18, 36, 72)
    """
    g = gpus_per_server
    if g <= len(DEFAULT_DEGREES):
        return DEFAULT_DEGREES

    def power_of_two(n: int) -> bool:
        return n & (n - 1) == 0

    return tuple(d for d in range(1, g + 1)
                 if g % d == 0 and (power_of_two(d) or power_of_two(g // d)))


def parse_budgets(text: str | float | list) -> tuple[float, ...]:
    """Parse ``"1e6,2.5M,$500k"`` into ascending distinct budgets in USD (> 0)
    (each with :func:`search.sweeps.spec.parse_usd`, the parser of sweep files too).

    Examples
    --------
    >>> parse_budgets("500k,1e6,$2M")
    (500000.0, 1000000.0, 2000000.0)
    """
    items = list(text) if isinstance(text, (list, tuple)) else \
        [text] if not isinstance(text, str) else text.split(",")
    out = [parse_usd(item.strip() if isinstance(item, str) else item, "budget")
           for item in items]
    if not out:
        raise invalid("budget", text, "one or more amounts in USD")
    return tuple(sorted(set(out)))


def parse_mix(text: str) -> tuple[WorkloadItem, ...]:
    """Parse ``"resnet50:2,dlrm:1"`` (weights default to 1) into a workload mix; a name
    ending in ``.yaml`` / ``.yml`` or naming a file is a user model file
    (``my-model.yaml:2``, :func:`codesign.workloads.is_model_file`).

    Raises
    ------
    InvalidSpecError
        Unknown workload, a bad model file, a weight that is not a number > 0, or a
        repeated name.
    """
    from codesign.workloads import is_model_file, workload_names

    names = workload_names()
    if not isinstance(text, str) or not text.strip():
        raise invalid("workload mix", text, "NAME[:WEIGHT][,NAME[:WEIGHT]...]")
    items = []
    for part in text.split(","):
        name, _, weight = part.strip().partition(":")
        if not is_model_file(name):
            check_choice("workload", name, names)
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise invalid(f"workload {name} weight", weight, "a number > 0") from None
        if not math.isfinite(w) or w <= 0:
            raise invalid(f"workload {name} weight", weight, "a number > 0")
        items.append(model_file_item(name, "workload", w) if is_model_file(name)
                     else WorkloadItem(name, w))
    if len({(i.name, i.file) for i in items}) != len(items):
        raise invalid("workload mix", text, "each workload at most once")
    return tuple(items)


@dataclass(frozen=True)
class WhatIfChoice:
    """The answer for one budget (fabric fields ``None`` when the budget buys nothing;
    ``note`` then names the cheapest fabric that would do)."""

    budget_usd: float
    family: str | None = None
    degree: int | None = None
    link_bandwidth_Bps: float | None = None
    topology_spec: str | None = None
    cost_usd: float | None = None
    iteration_time_s: float | None = None
    iterations_per_s: float | None = None
    cost_per_throughput_usd: float | None = None
    mfu: float | None = None
    strategy: str | None = None
    strategies: dict[str, str] | None = None
    start_iteration_time_s: float | None = None
    searched: bool = False
    per_workload: tuple[dict[str, Any], ...] = ()
    note: str = ""
    model_error: float | None = None
    within_model_error: tuple[str, ...] = ()
    days_to_train: float | None = None
    usd_per_run: float | None = None
    tco_usd: float | None = None
    procurement: dict[str, Any] | None = None
    failures: dict[str, Any] | None = None
    #: The validated error of comparing two fabrics' times on this GPU and mix
    #: (:func:`evaluators.iteration.uncertainty.comparison_error`): the fabrics in
    #: ``within_model_error`` are closer than this to the chosen one.  ``model_error``
    #: is the error of one predicted time.
    comparison_error: float | None = None
    #: The cheapest of the answer and the fabrics in ``within_model_error`` when it is
    #: not the answer: ``topology_spec``, ``label`` (family, degree, link rate),
    #: ``cost_usd`` and ``iteration_time_s`` -- the model cannot tell it from the answer,
    #: and it costs less.
    cheapest_within_error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class WhatIfResult:
    """What :func:`run_whatif` returns: one :class:`WhatIfChoice` per budget, ascending.

    ``evaluated`` counts the grid's fabrics, ``timed`` those timed (after pricing and
    dominance), ``searched`` those that got the strategy search; ``pruned_reasons``
    counts why the others were not timed or not complete.
    """

    servers: int
    gpu: str
    workloads: tuple[WorkloadItem, ...]
    choices: tuple[WhatIfChoice, ...]
    evaluated: int
    complete: int
    pruned_reasons: dict[str, int] = field(default_factory=dict)
    time_model: str = ""
    timed: int = 0
    searched: int = 0
    collective_method: str = "best"
    search_evaluations: int = 0
    seconds: float = 0.0
    catalog: str = "table2"
    objective: str = "iteration_time_s"
    goal: dict[str, Any] | None = None
    comm_overlap: str = "framework"

    def to_dict(self) -> dict[str, Any]:
        choices = [c.to_dict() for c in self.choices]
        return {"servers": self.servers, "gpu": self.gpu, "objective": self.objective,
                "goal": self.goal,
                "workloads": [w.__dict__ for w in self.workloads],
                "budgets": choices, "choices": choices, "evaluated": self.evaluated,
                "timed": self.timed, "searched": self.searched, "complete": self.complete,
                "pruned_reasons": dict(self.pruned_reasons), "time_model": self.time_model,
                "collective_method": self.collective_method,
                "comm_overlap": self.comm_overlap,
                "search_evaluations": self.search_evaluations, "seconds": self.seconds,
                "catalog": self.catalog}


def _price(point: SweepPoint) -> tuple[str, float]:
    """``(spec, cost_usd)`` of a grid fabric without timing it (raises if unbuildable)."""
    from search.design_point import DesignPoint, topology_spec_for

    hardware = point.hardware()
    if point.family == "topoopt":
        return "", float(network_cost(point, hardware=hardware).total_usd)
    spec = topology_spec_for(DesignPoint(point.family, point.servers, point.degree,
                                         point.link_bandwidth_Bps, seed=point.seed,
                                         oversub=point.oversub), hardware)
    return spec, float(network_cost(point, cached_topology(spec), hardware).total_usd)


def run_whatif(budgets: tuple[float, ...] | list[float], *, servers: int,
               workloads: tuple[WorkloadItem, ...] | str = "resnet50", gpu: str = "A100-80",
               families: tuple[str, ...] = DEFAULT_FAMILIES,
               degrees: tuple[int, ...] | None = None,
               link_rates_Bps: tuple[float, ...] = DEFAULT_LINK_RATES_BPS,
               collective_method: str = "best", leafspine_oversub: float = 2.0,
               search: SearchBudget | None = DEFAULT_SEARCH, finalists: int = 3,
               seed: int = 0, progress: Callable[[int, int], Any] | None = None,
               workers: int = 1, hardware_file: str | None = None,
               catalog: str | None = None, goal=None, objective: str = "iteration_time_s",
               tco_params=None, prices: str | None = None, failures=None,
               comm_overlap: str = "framework") -> WhatIfResult:
    """Best co-designed fabric per budget (see the module docstring).

    Parameters
    ----------
    budgets : sequence of float
        Network budgets, USD (:func:`parse_budgets` parses strings).
    servers : int
        Servers of the cluster (each with the GPU type's ``gpus_per_server`` GPUs).
    workloads : tuple of WorkloadItem or str
        The weighted mix, or a mix string for :func:`parse_mix`.
    gpu : str
        GPU type (hardware catalog name).
    hardware_file : str, optional
        Hardware catalog YAML to look ``gpu`` up in (e.g. from ``codesign calibrate``).
    catalog : str, optional
        Network parts catalog the budgets are spent in: ``parts-2026`` (2025-2026 switch
        boxes and optics by reach, :mod:`topologies.parts`), another name of
        :data:`topologies.cost.CATALOG_NAMES` or a catalog YAML; default TopoOpt's
        Table 2 (2023 prices).
    families, degrees, link_rates_Bps : tuples
        The fabric grid (link rates in bytes/s); ``degrees`` default
        :func:`default_degrees` of the GPU's server.
    collective_method : str
        ``best`` (default), ``auto`` or an algorithm name.
    comm_overlap : str
        ``framework`` (default: the overlap today's training stacks switch on) or
        ``none`` (:func:`evaluators.iteration.comm_overlap_options`).
    leafspine_oversub, seed
        As in :class:`search.sweeps.driver.SweepPoint`.
    search : SearchBudget or None
        Strategy search per workload on each finalist fabric (``None``: the feasible
        starts only).
    finalists : int
        Fabrics per budget that get the search (>= 1).
    progress : callable, optional
        ``progress(done, total)`` after every timed fabric.
    goal : search.time_to_train.TrainingGoal, optional
        Training goal (one workload): each answer adds ``days_to_train`` and
        ``usd_per_run``; every answer carries ``tco_usd`` and its ``procurement`` parts
        (:func:`search.time_to_train.procurement`).
    objective : str
        What picks the answer among the affordable fabrics (:data:`WHATIF_OBJECTIVES`):
        ``iteration_time_s`` (default), ``cost_usd``, ``days_to_train``,
        ``usd_per_run`` (a pricier but faster fabric can cost less per run) or
        ``tco_usd``.
    tco_params : codesign.tco.TcoParams, optional
        Power price, PUE, utilisation, amortisation, or a cloud price per GPU-hour.
    prices : str, optional
        Price catalog YAML (default ``codesign/data/cluster-2026.yaml``).
    failures : search.failure_whatif.FailureStudy, optional
        Failure what-if of every answer's fabric (``failures`` of each answer:
        slowdown mean/p50/p99, fraction partitioned).
    workers : int, optional
        Processes timing fabrics in parallel (forked; 1: in this process).  The answer
        is the same for any value.

    Returns
    -------
    WhatIfResult

    Raises
    ------
    InvalidSpecError
        Bad servers, GPU, budgets, mix or finalists.
    InfeasibleError
        No strategy of a workload fits in GPU memory (the closest attempt's shortfall),
        or no fabric of the grid can run the mix.
    """
    import time

    from codesign.workloads import get_hardware

    t0 = time.perf_counter()
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 2:
        raise invalid("whatif servers", servers,
                      "an integer >= 2 (a what-if buys the network between servers; one "
                      "server's GPUs use its own scale-up fabric, which codesign evaluate "
                      "times)")
    if isinstance(finalists, bool) or not isinstance(finalists, int) or finalists < 1:
        raise invalid("whatif finalists", finalists, "an integer >= 1")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise invalid("whatif workers", workers, "an integer >= 1")
    check_local_workers("whatif workers", workers)   # forked processes on this machine
    if search is not None and search.evaluations > MAX_SEARCH_EVALUATIONS:
        raise invalid("whatif search evaluations", search.evaluations,
                      f"an integer from 0 to {MAX_SEARCH_EVALUATIONS:,} (strategies timed per "
                      "workload on each finalist fabric)")
    if search is not None and search.shapes > MAX_SEARCH_SHAPES:
        raise invalid("whatif search shapes", search.shapes,
                      f"an integer from 0 to {MAX_SEARCH_SHAPES} (0: no shape screen)")
    if hardware_file is not None:
        from codesign.workloads.hardware import load_hardware_catalog

        hardware = get_hardware(gpu, load_hardware_catalog(hardware_file))
    else:
        hardware = get_hardware(gpu)
    if degrees is None:
        degrees = default_degrees(hardware.gpus_per_server)
    if catalog is not None:   # a bad name or file is the caller's error, not "unbuildable"
        from topologies.cost import check_catalog

        check_catalog(catalog, "whatif catalog")
    budgets = parse_budgets(budgets)   # (a string is split at commas, not characters)
    mix = parse_mix(workloads) if isinstance(workloads, str) else workloads
    if not isinstance(mix, (tuple, list)) or not mix or not all(
            isinstance(w, WorkloadItem) for w in mix):
        raise invalid("whatif workloads", workloads, "a mix string such as resnet50:2,bert:1 "
                      "or a non-empty sequence of WorkloadItem")
    mix = tuple(mix)
    from evaluators.iteration.comm import collective_methods

    check_choice("whatif collective_method", collective_method, collective_methods())
    for name, grid in (("families", families), ("degrees", degrees),
                       ("link_rates_Bps", link_rates_Bps)):
        if not isinstance(grid, (tuple, list)) or not grid:
            raise invalid(f"whatif {name}", grid, "a non-empty sequence")
    for f in families:
        check_choice("whatif families", f, SWEEP_FAMILIES)
    for d in degrees:
        check_int("whatif degrees", d, 1, MAX_SERVER_DEGREE)
    if len(set(degrees)) < len(degrees):
        raise invalid("whatif degrees", degrees, "distinct integers")
    for r in link_rates_Bps:
        check_number("whatif link_rates_Bps", r)   # bytes/s
    from codesign.workloads.compute import resolve_precision

    for item in mix:   # a format the GPU lacks is the caller's error, not "inapplicable"
        resolve_precision(item.load(), hardware)
    check_choice("whatif objective", objective, WHATIF_OBJECTIVES)
    from evaluators.iteration.inputs import COMM_OVERLAPS

    check_choice("whatif comm_overlap", comm_overlap, COMM_OVERLAPS)
    if goal is not None and len(mix) != 1:
        raise invalid("training goal with a workload mix", len(mix),
                      "one workload (days to train are per model)")
    if objective in ("days_to_train", "usd_per_run") and goal is None:
        raise invalid("whatif objective", objective, "a training goal (--tokens, --samples "
                                                     "or --epochs)")
    evals = search.evaluations if search is not None else 0
    restarts = search.restarts if search is not None else 1
    shapes = search.shapes if search is not None else 0

    def point(family: str, degree: int, rate: float, searched: bool) -> SweepPoint:
        # The screen uses the cheap ``auto`` collectives; finalists the requested method.
        return SweepPoint(family, servers, degree, float(rate), gpu=gpu,
                          collective_method=collective_method if searched else "auto",
                          workloads=mix,
                          search_evaluations=evals if searched else 0,
                          search_restarts=restarts, search_shapes=shapes, seed=seed,
                          oversub=leafspine_oversub,
                          hardware_file=hardware_file, catalog=catalog,
                          comm_overlap=comm_overlap)

    # 1. Feasibility (memory does not depend on the fabric).
    plan_workloads(point(families[0], 1, 1.0, True), hardware)
    # 2. Price every fabric of the grid.
    reasons: dict[str, int] = {}
    priced: list[tuple[float, str, int, float, str]] = []   # cost, family, degree, rate, spec
    for family in families:
        for degree in degrees:
            for rate in link_rates_Bps:
                try:
                    spec, cost = _price(point(family, degree, rate, False))
                except Exception as exc:  # noqa: BLE001 - CodesignError from the family
                    if not isinstance(exc, CodesignError):
                        raise
                    reasons["unbuildable"] = reasons.get("unbuildable", 0) + 1
                    continue
                priced.append((cost, family, degree, float(rate), spec))
    evaluated = len(families) * len(degrees) * len(link_rates_Bps)
    if not priced:
        raise InfeasibleError(f"no fabric of the grid can be built for {servers} servers "
                              f"(pruned: {reasons})")
    # 3. Dominance: per budget and (family, degree) the fastest affordable rate.
    keep: set[tuple[str, int, float]] = set()
    for budget in budgets:
        best_rate: dict[tuple[str, int], float] = {}
        for cost, family, degree, rate, _ in priced:
            if cost <= budget and rate > best_rate.get((family, degree), 0.0):
                best_rate[(family, degree)] = rate
        keep |= {(f, d, r) for (f, d), r in best_rate.items()}
    over = sum(1 for c, *_ in priced if c > budgets[-1])
    if over:
        reasons["over every budget"] = over
    dominated = len(priced) - over - len(keep)
    if dominated:
        reasons["dominated"] = dominated
    by_key = {(f, d, r): (c, spec) for c, f, d, r, spec in priced}
    # The cheapest fabrics, for budgets that buy nothing (timed only if needed).
    cheapest = sorted(priced, key=lambda x: (x[0], x[1], x[2], x[3]))
    if not any(c <= budgets[0] for c, *_ in priced):
        keep.add(cheapest[0][1:4])
    order = sorted(keep, key=lambda k: (by_key[k][0], k))
    total = len(order) + finalists * len(budgets)
    done = 0
    results: dict[tuple[str, int, float], tuple[SweepPoint, TrialOutcome]] = {}

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    def run_all(keys, searched: bool, fixed=None) -> list:
        """Time ``keys`` (in this process, or ``workers`` forked processes) with their
        search, or each with the strategies ``fixed[i]`` as they are; returns the
        outcomes in the order of ``keys`` (so they do not depend on the worker count)
        and keeps each fabric's fastest complete one in ``results``."""
        points = [point(*key, searched) for key in keys]
        fixed = fixed or [None] * len(keys)
        if workers > 1 and len(points) > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            ctx = multiprocessing.get_context("fork")   # children inherit the imports
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                outs = list(pool.map(evaluate_trial, points, fixed))
        else:
            outs = [evaluate_trial(p, f) for p, f in zip(points, fixed)]
        for key, p, out, f in zip(keys, points, outs, fixed):
            record(key, p, out, f is None)
        return outs

    def record(key, p: SweepPoint, out: TrialOutcome, own: bool) -> None:
        """Keep the fabric's fastest complete outcome; count why its own start or
        search did not complete (a strategy of another fabric that does not run here
        is no reason to drop this one)."""
        if out.status == "complete":
            held = results.get(key)
            if held is None or (out.metrics["iteration_time_s"]
                                < held[1].metrics["iteration_time_s"]):
                results[key] = (p, out)
        elif own:
            kind = out.reason.split(":", 1)[0]
            reasons[kind] = reasons.get(kind, 0) + 1
        tick()

    # 4. Screen with the feasible starts, then search the finalists of every budget.
    run_all(order, False)
    searched: set = set()
    if search is not None or collective_method != "auto":
        screen = {k: results[k][1].metrics["iteration_time_s"] for k in results}
        own = {k: results[k][1] for k in results}   # the fabric's start, then its search
        starts = {k: (_parts(out), outcome_candidates(out)) for k, out in own.items()}
        cost_of = {k: by_key[k][0] for k in screen}
        weights = tuple(item.weight for item in mix)
        # TopologyFinder builds one topology for the whole mix's demand: its workloads'
        # times are not independent, so strategies move to it as whole assignments.
        whole = {k for k in screen if k[0] == "topoopt"}
        # Strategies found by the searches (one Candidate per workload) -> the fabrics
        # they were found on; and each fabric's per-workload times with each (step 5).
        found: dict[tuple, set] = {}
        moved: dict[tuple, dict[tuple, tuple | None]] = {}

        def transferred() -> dict:
            return {k: _best_mix([starts[k]] + _elsewhere(k, moved, found), weights,
                                 k in whole)[0] for k in screen}

        def times_of(keys) -> dict:
            return {k: results[k][1].metrics["iteration_time_s"] for k in keys if k in results}

        while True:
            keys = sorted(_finalists(transferred(), times_of(searched),
                                     cost_of, budgets, finalists) - searched,
                          key=lambda k: (by_key[k][0], k))
            if not keys:
                break
            total = done + len(keys)
            # A search that fails leaves the fabric's screened result in ``results``
            # (record() keeps complete outcomes only): the start still runs there.
            for k, out in zip(keys, run_all(keys, True)):
                if out.status == "complete":
                    own[k] = out
                    found.setdefault(outcome_candidates(out), set()).add(k)
            searched.update(keys)
            # 5. Time the strategies found so far on every fabric that the searched
            # fabrics' plain gain could still make an answer (and on the searched ones,
            # whose gain over them is what the rule extrapolates).
            near = _finalists(screen, times_of(searched), cost_of, budgets, finalists) | searched
            jobs = [(k, s) for k in sorted(near, key=lambda k: (by_key[k][0], k))
                    for s in sorted(found, key=repr)
                    if s not in moved.get(k, {}) and found[s] - {k}]
            if jobs:
                total = done + len(jobs)
                outs = run_all([k for k, _ in jobs], False, [s for _, s in jobs])
                for (k, s), out in zip(jobs, outs):
                    moved.setdefault(k, {})[s] = (_parts(out) if out.status == "complete"
                                                  else None)
        # Per workload the fastest strategy any search found (or the start), where the
        # workloads' times are independent: one more timing where that mix beats every
        # whole assignment (its time is the mean computed here; timed so the result is a
        # real outcome with its collectives and metrics).
        if len(mix) > 1:
            mixes = []
            for k in sorted(set(results) - whole, key=lambda k: (by_key[k][0], k)):
                options = [starts[k], (_parts(own[k]), outcome_candidates(own[k]))]
                t, cands = _best_mix(options + _elsewhere(k, moved, found), weights)
                if t < results[k][1].metrics["iteration_time_s"] * (1 - 1e-9):
                    mixes.append((k, cands))
            total = done + len(mixes)
            for with_search in (False, True):   # searched fabrics: the requested method
                part = [(k, c) for k, c in mixes if (k in searched) == with_search]
                if part:
                    run_all([k for k, _ in part], with_search, [c for _, c in part])
        for k, (p, out) in list(results.items()):
            if out is not own[k]:   # a strategy found elsewhere: the start is this fabric's
                results[k] = (p, _with_start(out, own[k]))
    if not results:
        raise InfeasibleError(f"no fabric of the grid can run the mix on {servers} servers of "
                              f"{gpu} (pruned: {reasons})")
    # The model's validated error for this GPU (issue 17): affordable fabrics within the
    # error of a comparison (two designs on this GPU and mix) of the chosen one are
    # listed, not ranked (search.budget.best_per_budget).
    from evaluators.iteration.uncertainty import (comparison_error, validated_error,
                                                  validation_gap)

    # Kinds of model the validation does not cover (uncertainty.validation_gap).
    models = [w.load() for w in mix]
    gaps = sorted({g for g in map(validation_gap, models) if g})
    model_error = validated_error(hardware, models)
    compare_error = comparison_error(hardware, models)
    procured: dict = {}

    def procure(k) -> dict[str, Any]:
        """Days, USD per run and TCO of fabric ``k`` (:mod:`search.time_to_train`)."""
        if k not in procured:
            from codesign.tco import load_prices
            from search.time_to_train import fabric_parts_cost, procurement

            if hardware.name not in load_prices(prices)[0] and goal is None \
                    and objective in ("iteration_time_s", "cost_usd"):
                procured[k] = {}   # a GPU without prices (a user's catalog): no TCO asked
                return procured[k]

            m = results[k][1].metrics
            net_usd, net_w = fabric_parts_cost(m["topology_spec"], family=k[0],
                                               servers=servers, degree=k[1],
                                               link_bandwidth_Bps=k[2],
                                               server_gpus=hardware.gpus_per_server)
            procured[k] = procurement(goal, models[0],
                                      iteration_time_s=m["iteration_time_s"],
                                      servers=servers, hardware=hardware,
                                      network_usd=net_usd, network_power_w=net_w,
                                      params=tco_params, prices=prices)
            procured[k]["network_catalog"] = "parts-2026"
        return procured[k]

    def score(k) -> float:
        if objective == "iteration_time_s":
            return results[k][1].metrics["iteration_time_s"]
        if objective == "cost_usd":
            return by_key[k][0]
        return procure(k)[objective]

    # The model's error bounds a time, so it lists close designs for the time-like
    # objectives (days and dollars per run scale with the iteration time) only.
    timed_objective = objective in ("iteration_time_s", "days_to_train", "usd_per_run")
    picks = best_per_budget([(k, by_key[k][0], score(k)) for k in results], budgets,
                            compare_error if timed_objective else None)
    choices = []
    for budget, pick in zip(budgets, picks):
        key = pick.best
        if key is None:
            c = min(results, key=lambda k: (by_key[k][0], k))
            m = results[c][1].metrics
            choices.append(WhatIfChoice(
                budget, note=f"no fabric of the grid costs at most ${budget:,.0f}; the "
                             f"cheapest that runs the mix is {m['topology_spec']} at "
                             f"${m['cost_usd']:,.0f} ({m['iteration_time_s']:.4g} s per "
                             f"iteration)"))
            continue
        p, o = results[key]
        m = o.metrics
        per = tuple(json.loads(m["per_workload_json"]))
        strategies = {w["workload"]: w["strategy"] for w in per}
        close = [results[k][1].metrics["topology_spec"] for k in pick.close or ()]
        note = (f"{' and '.join(gaps)}: the model's error is not validated for these "
                "workloads (experiments/validation/validation.md), fabrics are ranked "
                "on the predicted times alone") if gaps else ""
        cheapest = _cheapest_within_error(key, pick.close or (), results, by_key)
        if close:
            # Two designs may share a spec (e.g. 36 x 400G and 72 x 200G host links
            # aggregate to one leaf-spine spec at different prices): name them apart.
            shown = [_design_label(results[k][0], results[k][1].metrics["topology_spec"],
                                   close.count(results[k][1].metrics["topology_spec"]) > 1)
                     for k in (pick.close or ())[:3]]
            note = (f"{len(close)} other affordable fabric(s) within the model's validated "
                    f"error of a comparison, {compare_error:.1%} (not ranked against it): "
                    f"{', '.join(shown)}{' ...' if len(close) > 3 else ''}")
            if cheapest is not None:
                saving = by_key[key][0] - cheapest["cost_usd"]
                note += (f"; the cheapest of them, {cheapest['label']}, costs "
                         f"${cheapest['cost_usd']:,.0f} (${saving:,.0f} less) at "
                         f"{cheapest['iteration_time_s']:.4g} s per iteration")
        choices.append(WhatIfChoice(
            budget, p.family, p.degree, p.link_bandwidth_Bps, m["topology_spec"], m["cost_usd"],
            m["iteration_time_s"], 1.0 / m["iteration_time_s"],
            m["cost_usd"] * m["iteration_time_s"], m.get("mfu"),
            per[0]["strategy"] if len(per) == 1 else None, strategies,
            m.get("start_iteration_time_s"), key in searched, per, note, model_error,
            tuple(close), *_procurement_fields(procure(key)),
            comparison_error=compare_error, cheapest_within_error=cheapest))
    if failures is not None:
        choices = _with_failures(choices, failures, results, hardware, collective_method)
    return WhatIfResult(servers, gpu, mix, tuple(choices), evaluated, len(results), reasons,
                        time_model_name(), len(order), len(searched), collective_method, evals,
                        time.perf_counter() - t0, catalog or "table2", objective,
                        goal.to_dict() if goal is not None else None, comm_overlap)


def _finalists(screen: dict, searched: dict, cost: dict, budgets, least: int) -> set:
    """The fabrics that get the strategy search (module docstring, steps 4 and 5).

    Per budget, the ``least`` fastest affordable fabrics of the screen, then every
    affordable fabric whose screen time, divided by the largest co-design gain seen so
    far (screen time / searched time over the fabrics already searched, >= 1), would
    still beat the budget's best searched time.  ``screen`` is the feasible starts'
    time, or with the strategies found on other fabrics (:func:`_best_mix`).  Called
    again after each round of searches until it names no new fabric: a fabric stays
    unsearched only when even that gain would not make it the answer.

    Parameters
    ----------
    screen : dict
        Fabric key -> screened iteration time (feasible starts, ``auto``), seconds.
    searched : dict
        Fabric key -> iteration time after its search, seconds.
    cost : dict
        Fabric key -> network cost, USD.
    budgets : sequence of float
    least : int
        Fabrics searched per budget at least.

    >>> screen = {"a": 1.0, "b": 1.1, "c": 1.05, "d": 1.5}
    >>> cost = {"a": 1, "b": 1, "c": 1, "d": 1}
    >>> sorted(_finalists(screen, {}, cost, [1], 1))
    ['a']
    >>> # b gained 1.375 from its search (1.1 -> 0.8): c could too and win, d could not.
    >>> sorted(_finalists(screen, {"a": 0.95, "b": 0.8}, cost, [1], 1))
    ['a', 'c']
    """
    gain = max([1.0] + [screen[k] / t for k, t in searched.items() if t > 0])
    out: set = set()
    for budget in budgets:
        affordable = sorted((k for k in screen if cost[k] <= budget),
                            key=lambda k: (screen[k], cost[k], k))
        out |= set(affordable[:least])
        best = min((searched[k] for k in affordable if k in searched), default=None)
        if best is not None:
            out |= {k for k in affordable if screen[k] / gain < best}
    return out


def _parts(outcome: TrialOutcome) -> tuple:
    """Per-workload iteration times of a complete outcome, seconds (mix order)."""
    return tuple(w["iteration_time_s"] for w in json.loads(outcome.metrics["per_workload_json"]))


def _elsewhere(k, moved: dict, found: dict) -> list:
    """``(per-workload times, strategies)`` of fabric ``k`` with every strategy set that a
    search of *another* fabric found and that runs on ``k`` (step 5)."""
    return [(parts, s) for s, parts in moved.get(k, {}).items()
            if parts is not None and found[s] - {k}]


def _best_mix(options: list, weights: tuple, whole: bool = False) -> tuple:
    """The fastest assignment of a fabric from timed strategy sets (step 5).

    With independent workloads (every family but TopologyFinder's, whose topology
    follows the whole mix's demand) each workload takes its fastest strategy among
    the options: the mix's time is the weighted mean of the workloads' times, so that
    choice is exact.  With ``whole``, one option as it is.

    Parameters
    ----------
    options : list of (tuple of float, tuple)
        Per-workload iteration times (seconds) and the strategies (one Candidate per
        workload) that gave them; the first is the fabric's start.
    weights : tuple of float
        The workloads' weights.
    whole : bool
        Only whole options.

    Returns
    -------
    (float, tuple)
        Weighted mean iteration time, seconds, and the strategy per workload.

    >>> opts = [((4.0, 4.0), ("a0", "a1")), ((1.0, 5.0), ("b0", "b1")),
    ...         ((5.0, 2.0), ("c0", "c1"))]
    >>> _best_mix(opts, (1.0, 1.0))
    (1.5, ('b0', 'c1'))
    >>> _best_mix(opts, (1.0, 1.0), whole=True)
    (3.0, ('b0', 'b1'))
    """
    def mean(times) -> float:
        return sum(w * t for w, t in zip(weights, times)) / sum(weights)

    if whole:
        return min(((mean(parts), cands) for parts, cands in options), key=lambda x: x[0])
    picks = [min(((parts[i], cands[i]) for parts, cands in options), key=lambda x: x[0])
             for i in range(len(weights))]
    return mean([t for t, _ in picks]), tuple(c for _, c in picks)


def _with_start(outcome: TrialOutcome, own: TrialOutcome) -> TrialOutcome:
    """``outcome`` (strategies found on another fabric) with the start fields of the
    fabric's own outcome ``own``, so that "fixed start" stays the fabric's feasible start
    (the fixed-strategy answer) and a search's evaluations stay counted."""
    import dataclasses

    from codesign.records import to_json

    mine = json.loads(own.metrics["per_workload_json"])
    per = [dict(w, start_strategy=o["start_strategy"], start_time_s=o["start_time_s"],
                search_evaluations=o["search_evaluations"])
           for w, o in zip(json.loads(outcome.metrics["per_workload_json"]), mine)]
    rows = [dict(r, start_text=o["start_text"],
                 start_iteration_time_s=o["start_iteration_time_s"],
                 search_evaluations=o["search_evaluations"])
            for r, o in zip(outcome.metrics["strategies"], own.metrics["strategies"])]
    metrics = dict(outcome.metrics, per_workload_json=to_json(per), strategies=rows,
                   start_iteration_time_s=own.metrics["start_iteration_time_s"],
                   search_evaluations=own.metrics["search_evaluations"])
    return dataclasses.replace(outcome, metrics=metrics)


def _procurement_fields(p: dict[str, Any]) -> tuple:
    """``days_to_train, usd_per_run, tco_usd, procurement`` of a :class:`WhatIfChoice`."""
    return p.get("days_to_train"), p.get("usd_per_run"), p.get("tco_usd"), p or None


def _with_failures(choices: list[WhatIfChoice], study, results, hardware,
                   collective_method: str) -> list[WhatIfChoice]:
    """Each answer with the failure what-if of its fabric (one run per distinct fabric).

    A study refused as too large for an answer's fabric (:func:`search.failure_whatif.
    check_failure_work`) is recorded on that answer as ``refused`` with its one-line
    reason: the answers found stay (the refusal only comes once the fabric is known)."""
    import dataclasses

    from codesign.resources import ResourceLimitError
    from search.failure_whatif import failure_whatif

    done: dict[str, dict[str, Any]] = {}
    out = []
    for c in choices:
        if c.family is None:
            out.append(c)
            continue
        if c.topology_spec not in done:
            key = (c.family, c.degree, c.link_bandwidth_Bps)
            point, outcome = results[key]
            try:
                done[c.topology_spec] = failure_whatif(
                    point, outcome, study, hardware=hardware,
                    collective_method=collective_method).to_dict()
            except ResourceLimitError as exc:
                done[c.topology_spec] = {"fabric": c.topology_spec,
                                         "failures": study.spec.text or "?",
                                         "samples": study.samples,
                                         "refused": " ".join(str(exc).split())}
        out.append(dataclasses.replace(c, failures=done[c.topology_spec]))
    return out


def _fabric_label(design) -> str:
    """A design (a sweep point or an answer) as the what-if table names it: family,
    server degree, link rate."""
    from codesign.units import format_bandwidth

    return (f"{design.family} d={design.degree} "
            f"{format_bandwidth(design.link_bandwidth_Bps, bits=True)}")


def _design_label(point, spec: str, with_spec: bool = False) -> str:
    """A design's topology spec, with its table label when asked (two designs of one
    spec)."""
    return f"{spec} ({_fabric_label(point)})" if with_spec else spec


def _cheapest_within_error(key, close, results, by_key) -> dict[str, Any] | None:
    """The cheapest of the answer ``key`` and the designs ``close`` to it, when that is
    not the answer (:attr:`WhatIfChoice.cheapest_within_error`); ties keep the answer."""
    if not close:
        return None
    cheapest = min((key, *close), key=lambda k: by_key[k][0])
    if by_key[cheapest][0] >= by_key[key][0]:
        return None
    point, outcome = results[cheapest]
    m = outcome.metrics
    return {"topology_spec": m["topology_spec"], "label": _fabric_label(point),
            "cost_usd": float(by_key[cheapest][0]),
            "iteration_time_s": float(m["iteration_time_s"])}


def format_whatif(result: WhatIfResult) -> str:
    """A plain-text table of the result (what ``codesign whatif`` prints)."""
    from codesign.units import format_time

    mix = ", ".join(f"{w.label} x{w.weight:g}" for w in result.workloads)
    lines = [f"{result.servers} servers of {result.gpu}; mix: {mix}; {result.timed} of "
             f"{result.evaluated} fabrics timed ({result.searched} with the strategy search, "
             f"{result.search_evaluations} evaluations per workload; collectives: "
             f"{result.collective_method}; communication overlap: {result.comm_overlap}; "
             f"network prices: {result.catalog} catalog) in "
             f"{result.seconds:.1f} s",
             f"{'budget':>14}  {'fabric':<28} {'cost':>12} {'iteration':>10} {'MFU':>6} "
             f"{'USD per it/s':>13}  strategy"]
    for c in result.choices:
        if c.family is None:
            lines.append(f"{c.budget_usd:>14,.0f}  {c.note}")
            continue
        fabric = _fabric_label(c)
        strategy = c.strategy or "; ".join(f"{k}: {v}" for k, v in (c.strategies or {}).items())
        mfu = f"{c.mfu:.1%}" if isinstance(c.mfu, float) else "-"
        lines.append(f"{c.budget_usd:>14,.0f}  {fabric:<28} {c.cost_usd:>12,.0f} "
                     f"{format_time(c.iteration_time_s):>10} {mfu:>6} "
                     f"{c.cost_per_throughput_usd:>13,.0f}  {strategy}")
        if c.note:
            lines.append(f"{'':>14}  {c.note}")
        lines += _procurement_lines(c)
    return "\n".join(lines)


def _procurement_lines(c: WhatIfChoice) -> list[str]:
    """Days to train, USD per run, TCO and failure slowdown of one answer (indented)."""
    from search.failure_whatif import format_failure_summary

    p, pad, out = c.procurement or {}, f"{'':>14}  ", []
    if c.days_to_train is not None:
        per = (f"{p['tokens_per_iteration']:,} tokens" if "tokens_per_iteration" in p
               else f"{p.get('samples_per_iteration', 0):,} samples")
        days = f"{c.days_to_train:.3g}" if c.days_to_train < 1 else f"{c.days_to_train:,.2f}"
        out.append(f"{pad}days to train {days} ({p['iterations']:,} iterations "
                   f"of {per}; MFU {c.mfu:.1%}); USD per run {c.usd_per_run:,.0f}"
                   if isinstance(c.mfu, float) else
                   f"{pad}days to train {days}; USD per run {c.usd_per_run:,.0f}")
    if c.tco_usd is not None:
        t = p.get("tco", {})
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in t.get("breakdown_usd", {}).items())
        out.append(f"{pad}TCO {c.tco_usd:,.0f} over {t.get('years', 0):g} years ({parts}); "
                   f"capex {p.get('capex_usd', 0):,.0f}, opex "
                   f"{p.get('opex_usd_per_year', 0):,.0f}/year, {t.get('power_w', 0) / 1e3:,.0f}"
                   f" kW at the wall ({t.get('model', '')}; network: parts-2026 catalog)")
    if c.failures:
        out.append(pad + format_failure_summary(c.failures))
    return out


# ------------------------------------------------------------- shared cluster
def shared_cluster(**kwargs: Any) -> list[SharedClusterRow]:
    """TopoOpt Section 5.6's shared cluster on the design families' fabrics.

    :func:`evaluators.shared_cluster.shared_cluster` (its docstring states the model and
    the keyword arguments) with :func:`search.design_point.topology_spec_for` building the
    fabrics.
    """
    from evaluators.shared_cluster import shared_cluster as run
    from search.design_point import DesignPoint, topology_spec_for

    def spec(family: str, servers: int, degree: int, rate_Bps: float, seed: int) -> str:
        return topology_spec_for(DesignPoint(family, servers, degree, rate_Bps, seed=seed))

    return run(spec, **kwargs)
