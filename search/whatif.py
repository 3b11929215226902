"""Procurement what-if: the best co-designed fabric per budget for a cluster and a mix.

``codesign whatif --budget 1e5,5e5 --servers 128 --mix resnet50:2,dlrm:1`` calls
:func:`run_whatif`.  For a fixed number of servers (of one GPU type) and a weighted
workload mix it considers every fabric of a grid -- topology family x server degree x
link rate (default: the quickstart families and ``topoopt``, TopologyFinder on the
mix's demand; degree 1-8, 25/100/200/400 Gbps) -- and answers, per budget, with the
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
   synthesizer).  The answer for a budget is the fastest result among all timed
   fabrics it affords, so a larger budget is never slower.  (A fabric that screened
   outside the finalists could in principle search to a better time; that is the
   heuristic, ``finalists`` trades it for time.)
5. **Shared timings.**  Fabrics are built once per process and the iteration model's
   caches (collective schedules, ``best`` decisions, flow phases) live with the
   topology object, so the search reuses the screen's collective timings.

A budget below every fabric's price gets no fabric but names the cheapest fabric that
would do and its cost.  Where the GPU has a calibrated compute profile, each answer
lists the other affordable fabrics whose predicted time is within the model's validated
error (``model_error``, ``within_model_error``, and a note): the model does not rank
those against the answer (:func:`evaluators.iteration.uncertainty.compare`).  Progress (fabrics done / total) is reported through
``progress(done, total)``; the CLI shows it with an ETA on stderr.

Shared cluster (TopoOpt Section 5.6, :func:`shared_cluster`)
-----------------------------------------------------------
A cluster of ``servers`` (432) runs ``jobs`` jobs of ``job_servers`` (16) servers of
4 GPUs each (64 GPUs, as in the paper), drawn from the mix 40 % DLRM, 30 % BERT,
20 % CANDLE, 10 % VGG16 at their Sec. 5.6 configurations; 5, 10, 15, 20 and 27
jobs are 20-100 % load.  The fabrics (d = 8, B = 100 Gbps): a full-bisection
Fat-tree with ``d x B`` server links, the 2:1 oversubscribed Fat-tree, the Ideal
Switch, and TopoOpt, *sharded*: every job gets its own partition, a degree-``d``
ring-permutation fabric on its servers (Appendix C: partitions are disjoint, so
a job never shares a link) whose all-reduce is split evenly over its ``d``
permutation rings (TotientPerms, Sec. 4.2) while model-parallel traffic is
forwarded over minimum-hop paths through other servers (host-based forwarding).
``fattree-samecost`` is the paper's "similar-cost Fat-tree": the fastest server
link rate ``d x B'`` (``B'`` in 10/25/40/50/100 Gbps) whose Fat-tree costs at most
the TopoOpt fabric.  On the switched fabrics jobs share links; their
servers are chosen at random (seeded; a scheduler with no topology awareness).

The model, stated because it is ours (the paper uses packet simulation):
every job's per-iteration server-to-server bytes (its :class:`Demand`'s server
matrix) are spread evenly over all minimum-hop paths (ideal ECMP, a fluid
split), every link's load is the sum over the jobs using it, and a job's
communication time is its most loaded link's total load / capacity (all jobs
communicate during the same period: the steady state of long-running jobs).
Iteration time = compute time (the iteration model's ``compute_time_s`` on the
job's own fabric) + that
communication time (no overlap: conservative, the same for every fabric).
Reported per fabric and load: mean and 99th-percentile iteration time over the
jobs (linear interpolation; with 27 jobs the p99 is close to the slowest job).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codesign.errors import InfeasibleError, invalid
from search.per_fabric import SearchBudget
from search.sweeps.spec import WorkloadItem, parse_usd
from search.sweeps.trial import SweepPoint, TrialOutcome, cached_topology, evaluate_trial

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

__all__ = ["WhatIfChoice", "WhatIfResult", "parse_budgets", "parse_mix", "run_whatif",
           "format_whatif", "SharedClusterRow", "shared_cluster", "ecmp_link_loads",
           "format_shared_cluster", "DEFAULT_SEARCH"]

DEFAULT_FAMILIES = ("fattree", "leafspine", "ideal", "expander", "torus", "perms", "topoopt")
DEFAULT_DEGREES = tuple(range(1, 9))
DEFAULT_LINK_RATES_BPS = (25e9 / 8, 100e9 / 8, 200e9 / 8, 400e9 / 8)
#: Strategy-search budget per workload and finalist fabric (``--search-evaluations``).
DEFAULT_SEARCH = SearchBudget(evaluations=12, restarts=1)


def parse_budgets(text: str | float | list) -> tuple[float, ...]:
    """Parse ``"1e6,2.5M,$500k"`` into ascending distinct budgets in USD (> 0)
    (each with :func:`search.sweeps.spec.parse_usd`, the parser of sweep files too).

    Examples
    --------
    >>> parse_budgets("500k,1e6,$2M")
    (500000.0, 1000000.0, 2000000.0)
    """
    items = text if isinstance(text, list) else [text] if not isinstance(text, str) \
        else text.split(",")
    out = [parse_usd(item.strip() if isinstance(item, str) else item, "budget")
           for item in items]
    if not out:
        raise invalid("budget", text, "one or more amounts in USD")
    return tuple(sorted(set(out)))


def parse_mix(text: str) -> tuple[WorkloadItem, ...]:
    """Parse ``"resnet50:2,dlrm:1"`` (weights default to 1) into a workload mix.

    Raises
    ------
    InvalidSpecError
        Unknown workload, a weight that is not a number > 0, or a repeated name.
    """
    from codesign.workloads import workload_names

    names = workload_names()
    if not isinstance(text, str) or not text.strip():
        raise invalid("workload mix", text, "NAME[:WEIGHT][,NAME[:WEIGHT]...]")
    items = []
    for part in text.split(","):
        name, _, weight = part.strip().partition(":")
        if name not in names:
            raise invalid("workload", name, f"one of {', '.join(names)}")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise invalid(f"workload {name} weight", weight, "a number > 0") from None
        if not math.isfinite(w) or w <= 0:
            raise invalid(f"workload {name} weight", weight, "a number > 0")
        items.append(WorkloadItem(name, w))
    if len({i.name for i in items}) != len(items):
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

    def to_dict(self) -> dict[str, Any]:
        choices = [c.to_dict() for c in self.choices]
        return {"servers": self.servers, "gpu": self.gpu,
                "workloads": [w.__dict__ for w in self.workloads],
                "budgets": choices, "choices": choices, "evaluated": self.evaluated,
                "timed": self.timed, "searched": self.searched, "complete": self.complete,
                "pruned_reasons": dict(self.pruned_reasons), "time_model": self.time_model,
                "collective_method": self.collective_method,
                "search_evaluations": self.search_evaluations, "seconds": self.seconds}


def _price(point: SweepPoint) -> tuple[str, float]:
    """``(spec, cost_usd)`` of a grid fabric without timing it (raises if unbuildable)."""
    from search.design_point import DesignPoint, topology_spec_for
    from topologies.cost import topology_cost, topoopt_cost

    if point.family == "topoopt":
        return "", float(topoopt_cost(point.servers, point.degree,
                                      point.link_bandwidth_Bps).total_usd)
    spec = topology_spec_for(DesignPoint(point.family, point.servers, point.degree,
                                         point.link_bandwidth_Bps, seed=point.seed,
                                         oversub=point.oversub))
    return spec, float(topology_cost(cached_topology(spec)).total_usd)


def run_whatif(budgets: tuple[float, ...] | list[float], *, servers: int,
               workloads: tuple[WorkloadItem, ...] | str = "resnet50", gpu: str = "A100-80",
               families: tuple[str, ...] = DEFAULT_FAMILIES,
               degrees: tuple[int, ...] = DEFAULT_DEGREES,
               link_rates_Bps: tuple[float, ...] = DEFAULT_LINK_RATES_BPS,
               collective_method: str = "best", leafspine_oversub: float = 2.0,
               search: SearchBudget | None = DEFAULT_SEARCH, finalists: int = 3,
               seed: int = 0, progress: Callable[[int, int], Any] | None = None,
               workers: int = 1, hardware_file: str | None = None) -> WhatIfResult:
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
    families, degrees, link_rates_Bps : tuples
        The fabric grid (link rates in bytes/s).
    collective_method : str
        ``best`` (default), ``auto`` or an algorithm name.
    leafspine_oversub, seed
        As in :class:`search.sweeps.driver.SweepPoint`.
    search : SearchBudget or None
        Strategy search per workload on each finalist fabric (``None``: the feasible
        starts only).
    finalists : int
        Fabrics per budget that get the search (>= 1).
    progress : callable, optional
        ``progress(done, total)`` after every timed fabric.
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
    from search.sweeps.trial import plan_workloads, time_model_name

    t0 = time.perf_counter()
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 2:
        raise invalid("whatif servers", servers, "an integer >= 2")
    if isinstance(finalists, bool) or not isinstance(finalists, int) or finalists < 1:
        raise invalid("whatif finalists", finalists, "an integer >= 1")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise invalid("whatif workers", workers, "an integer >= 1")
    if hardware_file is not None:
        from codesign.workloads.hardware import load_hardware_catalog

        hardware = get_hardware(gpu, load_hardware_catalog(hardware_file))
    else:
        hardware = get_hardware(gpu)
    budgets = parse_budgets(list(budgets))
    mix = parse_mix(workloads) if isinstance(workloads, str) else tuple(workloads)
    evals = search.evaluations if search is not None else 0
    restarts = search.restarts if search is not None else 1

    def point(family: str, degree: int, rate: float, searched: bool) -> SweepPoint:
        # The screen uses the cheap ``auto`` collectives; finalists the requested method.
        return SweepPoint(family, servers, degree, float(rate), gpu=gpu,
                          collective_method=collective_method if searched else "auto",
                          workloads=mix,
                          search_evaluations=evals if searched else 0,
                          search_restarts=restarts, seed=seed, oversub=leafspine_oversub,
                          hardware_file=hardware_file)

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
                    from codesign.errors import CodesignError

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

    def run_all(keys, searched: bool) -> None:
        """Time ``keys`` (in this process, or ``workers`` forked processes); the results
        are gathered by key, so they do not depend on the worker count."""
        points = [point(*key, searched) for key in keys]
        if workers > 1 and len(points) > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            ctx = multiprocessing.get_context("fork")   # children inherit the imports
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                outs = pool.map(evaluate_trial, points)
                for key, p, out in zip(keys, points, outs):
                    record(key, p, out)
        else:
            for key, p in zip(keys, points):
                record(key, p, evaluate_trial(p))

    def record(key, p: SweepPoint, out: TrialOutcome) -> None:
        if out.status == "complete":
            results[key] = (p, out)
        else:
            kind = out.reason.split(":", 1)[0]
            reasons[kind] = reasons.get(kind, 0) + 1
        tick()

    # 4. Screen with the feasible starts, then search the finalists of every budget.
    run_all(order, False)
    searched: set = set()
    if search is not None or collective_method != "auto":
        pool: set = set()
        for budget in budgets:
            affordable = sorted((k for k in results if by_key[k][0] <= budget),
                                key=lambda k: (results[k][1].metrics["iteration_time_s"],
                                               by_key[k][0], k))
            pool |= set(affordable[:finalists])
        total = len(order) + len(pool)
        keys = sorted(pool, key=lambda k: (by_key[k][0], k))
        screened = {k: results[k] for k in keys}
        run_all(keys, True)
        for key in keys:
            searched.add(key)
            if key not in results:   # the search failed where the start ran: keep the start
                results[key] = screened[key]
    if not results:
        raise InfeasibleError(f"no fabric of the grid can run the mix on {servers} servers of "
                              f"{gpu} (pruned: {reasons})")
    ranked = sorted(results, key=lambda k: (results[k][1].metrics["iteration_time_s"],
                                            by_key[k][0], k))
    # The model's validated error for this GPU (issue 17): affordable fabrics within it of
    # the chosen one are listed, not ranked (evaluators.iteration.uncertainty.compare).
    from evaluators.iteration.uncertainty import compare, validated_error

    model_error = validated_error(hardware)
    choices = []
    for budget in budgets:
        key = next((k for k in ranked if by_key[k][0] <= budget), None)
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
        close: list[str] = []
        note = ""
        if model_error is not None:
            for k in ranked:
                if k == key or by_key[k][0] > budget:
                    continue
                other = results[k][1].metrics
                c = compare(m["iteration_time_s"], other["iteration_time_s"], model_error)
                if c.significant:
                    break    # ranked by time: every later fabric is slower still
                close.append(other["topology_spec"])
            if close:
                note = (f"{len(close)} other affordable fabric(s) within the validated model "
                        f"error of {model_error:.0%} (not ranked against it): "
                        f"{', '.join(close[:3])}{' ...' if len(close) > 3 else ''}")
        choices.append(WhatIfChoice(
            budget, p.family, p.degree, p.link_bandwidth_Bps, m["topology_spec"], m["cost_usd"],
            m["iteration_time_s"], 1.0 / m["iteration_time_s"],
            m["cost_usd"] * m["iteration_time_s"], m.get("mfu"),
            per[0]["strategy"] if len(per) == 1 else None, strategies,
            m.get("start_iteration_time_s"), key in searched, per, note, model_error,
            tuple(close)))
    return WhatIfResult(servers, gpu, mix, tuple(choices), evaluated, len(results), reasons,
                        time_model_name(), len(order), len(searched), collective_method, evals,
                        time.perf_counter() - t0)


def format_whatif(result: WhatIfResult) -> str:
    """A plain-text table of the result (what ``codesign whatif`` prints)."""
    from codesign.units import format_bandwidth, format_time

    mix = ", ".join(f"{w.name} x{w.weight:g}" for w in result.workloads)
    lines = [f"{result.servers} servers of {result.gpu}; mix: {mix}; {result.timed} of "
             f"{result.evaluated} fabrics timed ({result.searched} with the strategy search, "
             f"{result.search_evaluations} evaluations per workload; collectives: "
             f"{result.collective_method}) in {result.seconds:.1f} s",
             f"{'budget':>14}  {'fabric':<28} {'cost':>12} {'iteration':>10} {'MFU':>6} "
             f"{'USD per it/s':>13}  strategy"]
    for c in result.choices:
        if c.family is None:
            lines.append(f"{c.budget_usd:>14,.0f}  {c.note}")
            continue
        fabric = f"{c.family} d={c.degree} {format_bandwidth(c.link_bandwidth_Bps, bits=True)}"
        strategy = c.strategy or "; ".join(f"{k}: {v}" for k, v in (c.strategies or {}).items())
        mfu = f"{c.mfu:.1%}" if isinstance(c.mfu, float) else "-"
        lines.append(f"{c.budget_usd:>14,.0f}  {fabric:<28} {c.cost_usd:>12,.0f} "
                     f"{format_time(c.iteration_time_s):>10} {mfu:>6} "
                     f"{c.cost_per_throughput_usd:>13,.0f}  {strategy}")
        if c.note:
            lines.append(f"{'':>14}  {c.note}")
    return "\n".join(lines)


# ------------------------------------------------------------- shared cluster
#: TopoOpt Sec. 5.6's job mix: (workload, share, strategy on 16 servers x 4 GPUs).
SHARED_MIX = (("dlrm", 0.4, "dp=64,embedding=model"), ("bert", 0.3, "dp=64"),
              ("candle", 0.2, "dp=64"), ("vgg16", 0.1, "dp=64"))
SHARED_FABRICS = ("fattree", "fattree-samecost", "leafspine", "ideal", "topoopt")


@dataclass(frozen=True)
class SharedClusterRow:
    """One (fabric, load) point of :func:`shared_cluster`."""

    fabric: str
    jobs: int
    load: float
    mean_iteration_s: float
    p99_iteration_s: float
    max_iteration_s: float
    cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _path_counts(topo) -> tuple["np.ndarray", "np.ndarray"]:
    """All-pairs hop matrix and number of minimum-hop paths (parallel links count once)."""
    import numpy as np

    n = topo.n_nodes
    hops = np.asarray(topo.hop_matrix, dtype=np.int64)
    adj = np.zeros((n, n))
    adj[topo.src, topo.dst] = 1.0
    sigma = np.eye(n)
    for d in range(1, int(hops[np.isfinite(hops)].max()) + 1 if hops.size else 1):
        nxt = (sigma * (hops == d - 1)) @ adj
        sigma += nxt * (hops == d)
    return hops, sigma


def ecmp_link_loads(topo, pairs: list[tuple[int, int, float]], counts=None) -> "np.ndarray":
    """Bytes per link when every pair's bytes are split evenly over its minimum-hop paths.

    Parameters
    ----------
    topo : topologies.Topology
        The network.
    pairs : list of (src node, dst node, bytes)
        Traffic.
    counts : tuple, optional
        Cached :func:`_path_counts` of ``topo``.

    Returns
    -------
    numpy.ndarray, shape (n_links,)
        Load of every directed link, bytes.  Link ``(u, v)`` carries the fraction
        ``sigma(s, u) sigma(v, t) / sigma(s, t)`` of pair ``(s, t)`` when it lies on a
        minimum-hop path (``h(s, u) + 1 + h(v, t) = h(s, t)``); parallel links share
        their hop's fraction in proportion to their bandwidth.
    """
    import numpy as np

    hops, sigma = counts if counts is not None else _path_counts(topo)
    src, dst, bw = topo.src, topo.dst, np.asarray(topo.bandwidth, dtype=float)
    # Parallel links between the same (u, v) split their hop's share by bandwidth.
    key = src.astype(np.int64) * topo.n_nodes + dst
    _, inverse = np.unique(key, return_inverse=True)
    share = bw / np.bincount(inverse, weights=bw)[inverse]
    load = np.zeros(len(src))
    for s, t, b in pairs:
        if s == t or b <= 0:
            continue
        on = hops[s, src] + 1 + hops[dst, t] == hops[s, t]
        frac = np.where(on, sigma[s, src] * sigma[dst, t], 0.0) / sigma[s, t]
        load += b * frac * share
    return load


def _largest_remainder(total: int, shares: list[float]) -> list[int]:
    raw = [total * w / sum(shares) for w in shares]
    counts = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (counts[i] - raw[i], i))[:total - sum(counts)]:
        counts[i] += 1
    return counts


def shared_cluster(*, servers: int = 432, degree: int = 8, link_rate_Bps: float = 100e9 / 8,
                   job_servers: int = 16, gpus_per_server: int = 4, gpu: str = "A100-80",
                   jobs: tuple[int, ...] = (5, 10, 15, 20, 27),
                   fabrics: tuple[str, ...] = SHARED_FABRICS, config: str = "5.6",
                   mix: tuple[tuple[str, float, str], ...] = SHARED_MIX,
                   seed: int = 0) -> list[SharedClusterRow]:
    """TopoOpt Section 5.6's shared cluster (module docstring): iteration time against load.

    Parameters
    ----------
    servers : int
        Servers of the cluster (432 in the paper: a k = 12 Fat-tree).
    degree, link_rate_Bps : int, float
        Server degree ``d`` and link rate ``B`` (bytes/s).
    job_servers, gpus_per_server : int
        Servers per job and GPUs per server (16 x 4 in the paper).
    gpu : str
        GPU type.
    jobs : tuple of int
        Numbers of concurrent jobs (load = jobs x job_servers / servers).
    fabrics : tuple of str
        Among ``fattree``, ``fattree-samecost``, ``leafspine``, ``ideal``, ``topoopt``.
    config : str
        Zoo configuration of the workloads.
    mix : tuple of (name, share, strategy)
        Job types; the counts of each load follow the shares (largest remainder),
        shuffled with ``seed``.
    seed : int
        Job order and server placement on the switched fabrics.

    Returns
    -------
    list of SharedClusterRow
        One row per (fabric, jobs), fabrics in the given order.

    Raises
    ------
    InvalidSpecError
        Unknown fabric, or more jobs than fit (``jobs x job_servers > servers``).
    """
    import dataclasses

    import numpy as np

    from codesign.workloads import demand_for, get_hardware, get_workload
    from search.design_point import DesignPoint, topology_spec_for
    from evaluators import iteration
    from topologies.cost import topology_cost, topoopt_cost
    from topologies.registry import from_spec

    for fab in fabrics:
        if fab not in SHARED_FABRICS:
            raise invalid("shared cluster fabric", fab, f"one of {', '.join(SHARED_FABRICS)}")
    for k in jobs:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k * job_servers <= servers:
            raise invalid("shared cluster jobs", k,
                          f"an integer in [1, {servers // job_servers}] ({servers} servers / "
                          f"{job_servers} per job)")
    hw = dataclasses.replace(get_hardware(gpu), gpus_per_server=gpus_per_server)
    part_spec = topology_spec_for(DesignPoint("perms", job_servers, degree, link_rate_Bps,
                                              seed=seed))
    partition = from_spec(part_spec)
    part_counts = _path_counts(partition)
    gens_all = tuple(int(g) for g in part_spec.split(",p=")[1].split(",")[0].split(":"))
    types = {}
    for name, _, strategy in mix:  # per job type: compute time and server matrix
        w = get_workload(name, config)
        d = demand_for(w, strategy, hw)
        compute = float(iteration.evaluate(partition, w, strategy, hardware=hw).compute_time_s)
        groups, mp = d.split()
        ring = [(a, b, v) for members, v in groups
                for a, b in zip(members, members[1:] + members[:1])]
        # TopoOpt's TotientPerms all-reduce (Sec. 4.2): a ring collective over the whole
        # partition is split evenly over the d permutation rings i -> i + g of the fabric.
        perm_ring = []
        for members, v in groups:
            gens = gens_all if len(members) == job_servers else (1,)
            for g in gens:
                perm_ring += [(members[i], members[(i + g) % len(members)], v / len(gens))
                              for i in range(len(members))]
        nz = np.nonzero(mp)
        mp_pairs = [(int(a), int(b), float(mp[a, b])) for a, b in zip(*nz)]
        types[name] = (compute, ring + mp_pairs, perm_ring + mp_pairs)
    # TopoOpt: a dedicated partition per job, so its time does not depend on the load.
    dedicated = {}
    for name, (compute, _, pairs) in types.items():
        load = ecmp_link_loads(partition, pairs, part_counts)
        dedicated[name] = compute + float(np.max(load / partition.bandwidth))
    rng = np.random.default_rng(seed)
    rows = []
    for fab in fabrics:
        if fab == "topoopt":
            topo, counts = None, None
            cost = float(topoopt_cost(servers, degree, link_rate_Bps).total_usd)
        else:
            rate = link_rate_Bps
            if fab == "fattree-samecost":
                budget = float(topoopt_cost(servers, degree, link_rate_Bps).total_usd)
                rates = [r for r in (10e9 / 8, 25e9 / 8, 40e9 / 8, 50e9 / 8, 100e9 / 8)
                         if r <= link_rate_Bps and topology_cost(from_spec(topology_spec_for(
                             DesignPoint("fattree", servers, degree, r)))).total_usd
                         <= budget]
                if not rates:
                    raise InfeasibleError(f"no Fat-tree of {servers} servers costs at most the "
                                          f"TopoOpt fabric (${budget:,.0f})")
                rate = max(rates)
            spec = topology_spec_for(DesignPoint(fab.split("-")[0], servers, degree, rate,
                                                 seed=seed))
            topo = from_spec(spec)
            counts = _path_counts(topo)
            cost = float(topology_cost(topo).total_usd)
        for k in jobs:
            kinds = [n for (n, _, _), c in zip(mix, _largest_remainder(
                k, [sh for _, sh, _ in mix])) for _ in range(c)]
            kinds = [kinds[i] for i in rng.permutation(len(kinds))]
            if topo is None:
                times = [dedicated[n] for n in kinds]
            else:
                place = rng.permutation(servers)[:k * job_servers].reshape(k, job_servers)
                loads, per_job = np.zeros(topo.n_links), []
                for n, hosts in zip(kinds, place):
                    pairs = [(int(hosts[a]), int(hosts[b]), v) for a, b, v in types[n][1]]
                    job_load = ecmp_link_loads(topo, pairs, counts)
                    loads += job_load
                    per_job.append(job_load > 0)
                util = loads / topo.bandwidth
                times = [types[n][0] + (float(util[used].max()) if used.any() else 0.0)
                         for n, used in zip(kinds, per_job)]
            arr = np.asarray(times)
            rows.append(SharedClusterRow(fab, k, k * job_servers / servers, float(arr.mean()),
                                         float(np.percentile(arr, 99)), float(arr.max()), cost))
    return rows


def format_shared_cluster(rows: list[SharedClusterRow]) -> str:
    """A plain-text table of :func:`shared_cluster`'s rows."""
    lines = [f"{'fabric':<17} {'jobs':>4} {'load':>5} {'mean it. s':>11} {'p99 it. s':>10} "
             f"{'cost USD':>12}"]
    for r in rows:
        lines.append(f"{r.fabric:<17} {r.jobs:>4} {r.load:>5.0%} {r.mean_iteration_s:>11.3f} "
                     f"{r.p99_iteration_s:>10.3f} {r.cost_usd:>12,.0f}")
    return "\n".join(lines)
