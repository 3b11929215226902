"""TopoOpt's alternating optimisation of strategy and topology, on Ray.

TopoOpt (NSDI'23) Sec. 4.1: the *Comp. x Comm.* plane searches the parallelization strategy
on a fixed topology (FlexFlow's MCMC, :mod:`search.strategy.mcmc`), the *Comm.* plane
then builds the topology for that strategy's traffic (TopologyFinder, Algorithm 1,
:mod:`topologies.topoopt`), and the two alternate "until the iteration time stops
improving or k rounds".  :func:`optimize` runs that loop for one job and evaluates the
baselines of Sec. 5.1 with the same workload, iteration model and strategy search.

The loop, as implemented
------------------------
0. Start from ``initial_strategy`` (default pure data parallelism on ``servers x
   gpus_per_server`` GPUs) and the TopologyFinder topology of its demand; if it does not
   fit in memory, from the first strategy that does (:func:`search.strategy.feasible.feasible_start`:
   the least model parallelism, TP inside the server first, with the cheapest memory
   knobs -- sequence parallelism, micro-batches, ZeRO, tables on servers, recomputation).
   When nothing fits the run stops with :class:`~codesign.errors.InfeasibleError` naming
   the closest attempt.
1. Round ``r``: MCMC strategy search on the current topology (budget ``budget``, seed
   ``(seed, r)``), starting from the current strategy.
2. TopologyFinder on the best strategy's demand (:meth:`Demand.split`: AllReduce server
   groups and the MP server matrix); evaluate the strategy on it.
3. Keep the new topology if it is faster; stop when a round improves the iteration time
   by less than ``tolerance`` (relative) or after ``rounds`` rounds.

Ray layout (docs/architecture.md section 7)
-------------------------------------------
The loop runs as one Ray task per job.  A strategy search is ``restarts`` independent
MCMC chains (each with its share of the budget and its own seed,
:mod:`search.strategy.chains`); the chains -- and, after the loop, the chains of every
baseline -- run as Ray tasks on the idle CPUs and in the loop's own process, with warm
per-process caches (routes, collective schedules).  Results are gathered in job order
and the best chain wins (first on ties), so the result is the same for any number of
workers (``workers=0`` runs everything in the calling process, without Ray).

Baselines (Sec. 5.1)
--------------------
``fattree``: the cost-equivalent full-bisection Fat-tree (server links ``d x B'`` with
``B'`` the catalog rate whose cost is closest to TopoOpt's,
:func:`topologies.cost.cost_equivalent_fattree`); ``fattree-oversub``: 2:1 oversubscribed
leaf-spine with ``d x B`` links; ``ideal``: TopoOpt's Ideal Switch (one ``d x B`` link per
server); ``expander``: a random ``d``-regular graph of ``B`` links (seeded);
``ocs-reconfig``: TopoOpt's strategy on a reconfiguring circuit fabric
(:mod:`evaluators.iteration.reconfig`, Algorithm 5 every 50 ms, ``reconfig_delay_s``
pauses).  Each gets its own strategy search (the
paper runs FlexFlow per architecture) starting from TopoOpt's strategy; the baseline
searches are independent, so their chains run side by side.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from codesign.errors import CodesignError, invalid
from codesign.resources import check_local_workers
from codesign.specs import check_choice, check_int
from codesign.units import BARE_BANDWIDTH_BPS, parse_bandwidth
from codesign.workloads import get_workload
from codesign.workloads.demand import demand_for
from codesign.workloads.hardware import get_hardware, load_hardware_catalog
from codesign.workloads.model import MAX_BATCH_SIZE, Workload
from codesign.workloads.strategy import MAX_GPUS
from evaluators.iteration.comm import collective_methods
from evaluators.iteration.inputs import COMM_OVERLAPS
from search.per_fabric import MAX_SEARCH_EVALUATIONS
from search.strategy.chains import (ChainJob, Timing, chain_jobs, local_topology, merge,
                                    on_ray, run_chains)
from search.strategy.mcmc import SearchResult
from search.strategy.feasible import feasible_start
from search.strategy.space import Candidate, initial_candidate
from topologies.topoopt.finder import MAX_DEGREE

__all__ = ["OptimizeSpec", "RoundLog", "BaselineResult", "OptimizeResult", "optimize",
           "BASELINES", "evaluate_candidates"]

#: Baselines of TopoOpt Sec. 5.1 that :func:`optimize` can evaluate.
BASELINES = ("fattree", "fattree-oversub", "ideal", "expander", "ocs-reconfig")



@dataclass(frozen=True)
class OptimizeSpec:
    """One TopoOpt job (the input of :func:`optimize`).

    Attributes
    ----------
    workload : str
        Zoo name (``codesign workload show``); ``config`` picks one of its configurations.
    servers, degree : int
        ``n`` servers of degree ``d`` (interfaces per server).
    bandwidth_Bps : float
        ``B``, rate of one interface, bytes/s (or a string such as ``"100Gbps"``).
    gpus_per_server : int
        GPUs per server (TopoOpt Sec. 5.1: four A100s).
    hardware : str
        GPU of the hardware catalog.
    hardware_file : str or None
        Hardware catalog YAML to look ``hardware`` up in (e.g. from ``codesign
        calibrate``); ``None``: the built-in catalog.
    batch_size : int or None
        Global batch override.
    rounds : int
        At most ``k`` alternating rounds.
    budget, restarts, batch : int
        Strategy-search budget per round (distinct evaluations, shared by the chains),
        independent MCMC chains (run side by side, each with its own caches), proposals
        per step.
    tolerance : float
        Stop when a round improves the iteration time by less than this fraction.
    initial_strategy : str or None
        Starting strategy (default pure data parallelism).
    reconfig_delay_s : float
        OCS reconfiguration delay of the ``ocs-reconfig`` baseline (TopoOpt: 10 ms).
    collective_method : str
        Collective algorithm of the iteration model; ``"best"`` (default, as sweeps,
        ``whatif`` and ``evaluate``): the fastest valid synthesizer per collective, chosen
        jointly with the strategy (:mod:`search.per_fabric`); ``"auto"`` is
        :func:`evaluators.iteration.model.resolve_auto`: ``multiring`` on direct-connect
        fabrics (AllReduce load-balanced over the d rings of TotientPerms, as TopoOpt's
        NCCL integration does, Sec. 6) and ``ring`` on switched ones (the paper's
        reproductions in ``experiments/topoopt/`` use it).  Transfers and
        all-to-alls use ECMP on switched fabrics and host forwarding on direct-connect ones.
    network_model : str
        Network model of the iteration model.
    comm_overlap : str
        ``framework`` (default: the overlap today's training stacks switch on for each
        candidate) or ``none`` (:func:`evaluators.iteration.comm_overlap_options`).
    baselines : tuple of str
        Subset of :data:`BASELINES`.
    seed : int
    """

    workload: str
    servers: int
    degree: int
    bandwidth_Bps: float
    config: str | None = None
    gpus_per_server: int = 4
    hardware: str = "A100-80"
    batch_size: int | None = None
    rounds: int = 3
    budget: int = 24
    restarts: int = 2
    batch: int = 4
    tolerance: float = 0.01
    initial_strategy: str | None = None
    collective_method: str = "best"
    network_model: str = "flow"
    baselines: tuple[str, ...] = BASELINES
    reconfig_delay_s: float = 0.01
    seed: int = 0
    hardware_file: str | None = None
    comm_overlap: str = "framework"

    def __post_init__(self) -> None:
        for name, low in (("servers", 2), ("degree", 1), ("gpus_per_server", 1), ("rounds", 1),
                          ("budget", 1), ("restarts", 1), ("batch", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise invalid(name, v, f"an integer >= {low}")
        # Search sizes a run can finish: an evaluation takes 0.05-2 s, so 10,000 per round
        # is hours already; beyond, a typo (--budget means evaluations here, not dollars).
        most = MAX_SEARCH_EVALUATIONS
        for name, high in (("budget", most), ("rounds", 100), ("restarts", most),
                           ("batch", most)):
            v = getattr(self, name)
            if v > high:
                raise invalid(name, v, f"an integer between 1 and {high:,}"
                              + (" (strategy evaluations per round)" if name == "budget"
                                 else ""))
        check_int("degree", self.degree, 1, MAX_DEGREE)   # TopologyFinder's range
        if self.batch_size is not None:  # 0 is refused, never read as "not given"
            check_int("batch_size", self.batch_size, 1, MAX_BATCH_SIZE)
        bw = self.bandwidth_Bps
        if isinstance(bw, str):
            bw = parse_bandwidth(bw, field="bandwidth", bare=BARE_BANDWIDTH_BPS)
            object.__setattr__(self, "bandwidth_Bps", bw)
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not 0 < bw < math.inf:
            raise invalid("bandwidth", bw, "a positive bandwidth, e.g. 100Gbps")
        d = self.reconfig_delay_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 <= d < math.inf:
            raise invalid("reconfig_delay_s", d, "seconds >= 0")
        if not isinstance(self.tolerance, (int, float)) or not 0 <= self.tolerance < 1:
            raise invalid("tolerance", self.tolerance, "a fraction in [0, 1)")
        bad = [b for b in self.baselines if b not in BASELINES]
        if bad or isinstance(self.baselines, str):
            raise invalid("baselines", list(self.baselines) if not isinstance(
                self.baselines, str) else self.baselines, f"a subset of {', '.join(BASELINES)}")
        object.__setattr__(self, "baselines", tuple(self.baselines))
        check_choice("comm_overlap", self.comm_overlap, COMM_OVERLAPS)
        check_choice("collective_method", self.collective_method, collective_methods())
        self.hw  # raises with the catalog's names
        # The starting strategy is checked here, before Ray starts or a topology is
        # built: a bad --strategy is one line naming its value, not a remote traceback.
        if self.gpus > MAX_GPUS:
            raise invalid("servers", self.servers,
                          f"at most {MAX_GPUS // self.gpus_per_server:,} servers of "
                          f"{self.gpus_per_server} GPUs ({MAX_GPUS:,} GPUs)")
        initial_candidate(self.load_workload(), self.gpus, self.initial_strategy)

    @property
    def hw(self):
        """The :class:`~codesign.workloads.hardware.Hardware` of ``hardware``."""
        if self.hardware_file is None:
            return get_hardware(self.hardware)
        return get_hardware(self.hardware, load_hardware_catalog(self.hardware_file))

    @property
    def gpus(self) -> int:
        return self.servers * self.gpus_per_server

    def load_workload(self) -> Workload:
        w = get_workload(self.workload, self.config)
        return w.with_batch(self.batch_size) if self.batch_size is not None else w


@dataclass(frozen=True)
class RoundLog:
    """One alternating round: the search's best on the old topology, and after TopologyFinder."""

    round: int
    strategy: str
    searched_time_s: float
    topology_time_s: float
    evaluations: int
    accepted_topology: bool
    seconds: float


@dataclass(frozen=True)
class BaselineResult:
    name: str
    iteration_time_s: float
    cost_usd: float
    strategy: str
    topology: str
    notes: str = ""


@dataclass(frozen=True)
class OptimizeResult:
    """What :func:`optimize` returns (``to_dict`` is ``codesign optimize --json``)."""

    spec: OptimizeSpec
    candidate: Candidate
    iteration_time_s: float
    initial_time_s: float
    cost_usd: float
    cost_breakdown: dict[str, float]
    topology: Any = field(repr=False)
    routes: dict = field(repr=False, default_factory=dict)
    finder: Any = field(repr=False, default=None)
    rounds: tuple[RoundLog, ...] = ()
    baselines: dict[str, BaselineResult] = field(default_factory=dict)
    workers: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        topo = self.topology
        return {
            "workload": self.spec.workload, "servers": self.spec.servers,
            "degree": self.spec.degree, "bandwidth_Bps": self.spec.bandwidth_Bps,
            "strategy": str(self.candidate.strategy), "placement": self.candidate.to_dict(),
            "iteration_time_s": self.iteration_time_s, "initial_time_s": self.initial_time_s,
            "cost_usd": self.cost_usd, "cost_breakdown": self.cost_breakdown,
            "diameter": int(topo.diameter), "mean_path_length": float(topo.mean_path_length),
            "rounds": [asdict(r) for r in self.rounds],
            "baselines": {k: {"iteration_time_s": v.iteration_time_s, "cost_usd": v.cost_usd,
                              "strategy": v.strategy, "topology": v.topology, "notes": v.notes}
                          for k, v in self.baselines.items()},
            "workers": self.workers, "seconds": self.seconds, "seed": self.spec.seed,
        }


# ---------------------------------------------------------------------- evaluation
def _timing(spec: OptimizeSpec) -> Timing:
    return Timing(spec.hw, spec.collective_method, spec.network_model,
                  gpus_per_server=spec.gpus_per_server, comm_overlap=spec.comm_overlap)


def evaluate_candidates(spec: OptimizeSpec, workload: Workload, topology,
                        candidates: Sequence[Candidate]) -> list[float]:
    """Iteration time (s) of each candidate on ``topology``; ``inf`` when it cannot run.

    Memory-infeasible strategies (:class:`~codesign.errors.InfeasibleError`) and
    strategies the iteration model refuses (:class:`~codesign.errors.InvalidSpecError`)
    are infinite: the search never accepts them.
    """
    return _timing(spec).times(topology, workload, candidates)


def _time(spec: OptimizeSpec, workload: Workload, topology, c: Candidate) -> float:
    """Iteration time (s) of ``c`` on ``topology``, ``inf`` when it cannot run; timed on
    this process's object for that network, whose caches are warm
    (:func:`search.strategy.chains.local_topology`)."""
    return evaluate_candidates(spec, workload, local_topology(topology), [c])[0]


# ---------------------------------------------------------------------- topologies
def _demand(spec: OptimizeSpec, workload: Workload, c: Candidate, *, check: bool = False):
    return demand_for(workload, c.strategy, spec.hw, c.placement(spec.gpus_per_server),
                      check=check)


def topoopt_topology(spec: OptimizeSpec, workload: Workload, c: Candidate):
    """TopologyFinder (Algorithm 1) on candidate ``c``'s traffic: the finder's result."""
    from topologies.topoopt import topology_finder

    groups, mp = _demand(spec, workload, c).split()
    return topology_finder(spec.servers, spec.degree, groups, mp,
                           link_bandwidth=spec.bandwidth_Bps, seed=spec.seed)


def _chain_jobs(spec: OptimizeSpec, workload: Workload, topology, start: Candidate,
                seed: Sequence[int]) -> list[ChainJob]:
    """``restarts`` independent chains sharing ``budget`` (chain ``c`` seeded ``(*seed, c)``)."""
    return chain_jobs(topology, workload, start, _timing(spec),
                      budget=spec.budget, restarts=spec.restarts, batch=spec.batch, seed=seed)


def _search(spec, workload: Workload, topology, start: Candidate, seed: Sequence[int]
            ) -> SearchResult:
    """The strategy search on ``topology``: its chains side by side (module docstring)."""
    return merge(run_chains(_chain_jobs(spec, workload, topology, start, seed))).search


def _alternate(spec: OptimizeSpec, workload: Workload) -> dict[str, Any]:
    """The loop of the module docstring; returns the pieces of :class:`OptimizeResult`."""
    given = initial_candidate(workload, spec.gpus, spec.initial_strategy)
    # The given strategy if it fits, else the first that does (search.strategy.feasible: the least
    # model parallelism with the cheapest memory knobs); InfeasibleError when none does.
    cand = feasible_start(workload, spec.gpus, spec.hw,
                          gpus_per_server=spec.gpus_per_server, preferred=given.strategy)
    finder = topoopt_topology(spec, workload, cand)
    best_t = _time(spec, workload, finder.topology, cand)
    initial_t = best_t if cand == given else math.inf
    if cand != given:
        # The default start prefers model parallelism to full recomputation and ZeRO-3;
        # the least model parallelism with any knob (e.g. ZeRO-3 data parallelism, what
        # TopoOpt's data-parallel models use) is timed too, and the faster one starts.
        other = feasible_start(workload, spec.gpus, spec.hw,
                               gpus_per_server=spec.gpus_per_server, passes=(False,))
        if other != cand:
            other_finder = topoopt_topology(spec, workload, other)
            other_t = _time(spec, workload, other_finder.topology, other)
            if other_t < best_t:
                cand, finder, best_t = other, other_finder, other_t
    logs = []
    for r in range(spec.rounds):
        t0 = time.perf_counter()
        found = _search(spec, workload, finder.topology, cand, (spec.seed, r))
        new = topoopt_topology(spec, workload, found.best)
        t_new = _time(spec, workload, new.topology, found.best)
        take = t_new < found.best_time_s
        before = best_t
        cand = found.best
        best_t = min(t_new, found.best_time_s)
        if take:
            finder = new
        logs.append(RoundLog(r, str(cand.strategy), found.best_time_s, t_new,
                             found.evaluations, take, time.perf_counter() - t0))
        if math.isfinite(before) and not before - best_t > spec.tolerance * before:
            break
    return {"candidate": cand, "iteration_time_s": best_t, "initial_time_s": initial_t,
            "finder": finder, "rounds": tuple(logs)}


def baseline_topologies(spec: OptimizeSpec, topoopt_cost_usd: float) -> dict[str, tuple]:
    """``name -> (topology, cost breakdown, notes)`` for the requested static baselines."""
    from search.design_point import DesignPoint, topology_spec_for
    from topologies.cost import (cost_equivalent_fattree, expander_cost, fattree_cost,
                                 ideal_switch_cost)
    from topologies.registry import from_spec

    n, d, b = spec.servers, spec.degree, spec.bandwidth_Bps
    out: dict[str, tuple] = {}
    hw = spec.hw

    def point(family, rate, **kw):
        return from_spec(topology_spec_for(DesignPoint(family, n, d, rate,
                                                       seed=spec.seed, **kw), hw))

    for name in spec.baselines:
        try:
            if name == "fattree":
                rate, cost = cost_equivalent_fattree(n, topoopt_cost_usd, degree=d)
                topo = point("fattree", rate)   # partly populated when not k^3/4 servers
                out[name] = (topo, cost, f"cost-equivalent: server links {d} x "
                                         f"{rate * 8 / 1e9:g} Gbps")
            elif name == "fattree-oversub":
                out[name] = (point("leafspine", b, oversub=2.0),
                             fattree_cost(n, b, degree=d, oversub=2.0), "2:1 at the ToR uplinks")
            elif name == "ideal":
                out[name] = (point("ideal", b), ideal_switch_cost(n, d, b), "")
            elif name == "expander":
                out[name] = (point("expander", b), expander_cost(n, d, b), "")
        except CodesignError as exc:
            out[name] = (None, None, str(exc).splitlines()[0])
    return out


def ocs_reconfig_baseline(spec: OptimizeSpec, workload: Workload, c: Candidate) -> BaselineResult:
    """OCS-reconfig (Sec. 5.1, App. E.4) with TopoOpt's strategy: FlexFlow's search is
    not aware of reconfiguration within an iteration, so the strategy found for the
    static fabric is replayed on the reconfiguring one."""
    from evaluators.iteration.reconfig import evaluate_reconfigurable
    from topologies.cost import ocs_reconfig_cost
    from topologies.topoopt import ocs_reconfig

    cost = ocs_reconfig_cost(spec.servers, spec.degree, spec.bandwidth_Bps)
    try:
        demand = _demand(spec, workload, c, check=True)   # never time what does not fit
        hw = spec.hw
        r = evaluate_reconfigurable(
            demand, degree=spec.degree, bandwidth_Bps=spec.bandwidth_Bps,
            fabric_Bps=hw.fabric_bandwidth_Bps, delay_s=spec.reconfig_delay_s,
            policy=lambda matrix, d: ocs_reconfig(matrix, d, seed=spec.seed).circuits)
    except CodesignError as exc:
        return BaselineResult("ocs-reconfig", math.inf, cost.total_usd, str(c.strategy), "",
                              str(exc).splitlines()[0])
    return BaselineResult("ocs-reconfig", r.iteration_time_s, cost.total_usd, str(c.strategy),
                          f"ocs:{spec.servers},degree={spec.degree}",
                          f"{r.reconfigurations} reconfigurations in 2 iterations, "
                          f"{spec.reconfig_delay_s * 1e3:g} ms each; bandwidth tax "
                          f"{r.bandwidth_tax:.2f}")


def _run(spec: OptimizeSpec, workers: int) -> OptimizeResult:
    from topologies.cost import topoopt_cost

    t0 = time.perf_counter()
    workload = spec.load_workload()
    loop = _alternate(spec, workload)
    cost = topoopt_cost(spec.servers, spec.degree, spec.bandwidth_Bps)
    baselines: dict[str, BaselineResult] = {}
    fabrics = baseline_topologies(spec, cost.total_usd)
    # Every chain of every baseline is one independent job: they run side by side.
    names, jobs = [], []
    for i, (name, (topo, _, _)) in enumerate(fabrics.items()):
        if topo is not None:
            chains = _chain_jobs(spec, workload, topo, loop["candidate"], (spec.seed, 1000 + i))
            names.append((name, len(chains)))
            jobs += chains
    results, found = run_chains(jobs), {}
    for name, k in names:
        found[name], results = merge(results[:k]).search, results[k:]
    for name, (topo, bcost, notes) in fabrics.items():
        if topo is None:
            baselines[name] = BaselineResult(name, math.inf, math.nan, "", "", notes)
            continue
        f = found[name]
        if not math.isfinite(f.best_time_s):   # nothing the search tried fits there
            baselines[name] = BaselineResult(name, math.inf, bcost.total_usd, "", topo.name,
                                             f"{notes}; no strategy found that fits")
            continue
        baselines[name] = BaselineResult(name, f.best_time_s, bcost.total_usd,
                                         str(f.best.strategy), topo.name, notes)
    if "ocs-reconfig" in spec.baselines:
        baselines["ocs-reconfig"] = ocs_reconfig_baseline(spec, workload, loop["candidate"])
    finder = loop["finder"]
    return OptimizeResult(spec=spec, candidate=loop["candidate"],
                          iteration_time_s=loop["iteration_time_s"],
                          initial_time_s=loop["initial_time_s"], cost_usd=cost.total_usd,
                          cost_breakdown={k: float(v) for k, v in cost.items.items()},
                          topology=finder.topology, routes=getattr(finder, "routes", {}),
                          finder=finder, rounds=loop["rounds"], baselines=baselines,
                          workers=workers, seconds=time.perf_counter() - t0)


def _run_on_ray(spec: OptimizeSpec, workers: int) -> OptimizeResult:
    """The job as a Ray task: its chains run as up to ``workers - 1`` Ray tasks on the
    idle CPUs too."""
    with on_ray(workers - 1):
        return _run(spec, workers)


def optimize(spec: OptimizeSpec, *, workers: int = 1, ray_address: str | None = None
             ) -> OptimizeResult:
    """Run TopoOpt's alternating optimisation for one job (module docstring).

    Parameters
    ----------
    spec : OptimizeSpec
    workers : int, optional
        CPUs the job uses on Ray: its loop, and its chains on up to ``workers - 1``
        more (the size of a local Ray; on a cluster joined with ``ray_address``, while
        they are idle), or 0 to run in this process without Ray.  The result is the
        same for any value.
    ray_address : str, optional
        Join this Ray cluster instead of starting a local one.

    Returns
    -------
    OptimizeResult
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise invalid("workers", workers, "an integer >= 0 (0: no Ray)")
    if ray_address is None:  # a local Ray of that many CPUs: this machine's processes
        check_local_workers("workers", workers)
    if workers == 0:
        return _run(spec, 0)
    import ray

    from search.ray_session import ray_session, retry_lost_worker

    def job() -> OptimizeResult:
        ref = ray.remote(num_cpus=1, max_retries=0)(_run_on_ray).remote(spec, workers)
        try:
            return ray.get(ref)
        except BaseException:   # interrupted or failed: cancelling the job cancels its chains
            ray.cancel(ref, force=True, recursive=True)
            raise

    with ray_session(ray_address, num_cpus=workers):
        # The loop is deterministic, so a lost worker (OOM, crash) is retried once
        # from the start, as sweeps retry a lost trial (docs/architecture.md section 7).
        return retry_lost_worker(job, what="optimize")
