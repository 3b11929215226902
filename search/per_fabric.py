"""Co-design on one fabric: the best memory-feasible strategy per workload of a mix.

The sweeps (:mod:`search.sweeps.trial`) and the what-if (:mod:`search.whatif`) rank
fabrics.  Ranking them under one fixed strategy is not co-design: the best strategy
differs per fabric (TopoOpt NSDI'23, Sec. 2 and 4.1), and for large models pure data
parallelism does not even fit.  So every candidate fabric gets, per workload, the
strategy search that ``codesign optimize`` runs:

* start from :func:`search.strategy.feasible.feasible_start` (the least model parallelism that
  fits in memory, tensor parallelism inside the server first) -- or from the workload's
  own strategy when the specification gives one and it fits;
* time one strategy per model-parallel shape (:func:`search.strategy.feasible.
  shape_candidates`: each ``(tp, pp)`` that fits, pipelines with one sample per
  micro-batch and their stages on neighbouring GPUs, starved pipelines also fed by
  context parallelism; at most :attr:`SearchBudget.shapes`)
  and walk on from the fastest of them and the start.  Local moves reach another shape
  only through slower intermediate steps, so without this screen a search of a few
  dozen evaluations stayed near its start: Llama 3 70B on 128 servers of 8 H100, guided
  MCMC of 12 evaluations from the feasible start averaged 22.0 s (2:1 leaf-spine,
  400 Gb/s), 35.5 s (the same at 100 Gb/s) and 26.1 s (8 x 16 torus, 100 Gb/s) where a
  256-evaluation search finds 19.8, 23.0 and 18.2 s; with the shapes first (about 30
  evaluations) the same 12 find 18.2, 21.6 and 19.9 s (five seeds,
  ``experiments/benchmarks/bench_strategy_search.py``);
* FlexFlow-style MCMC over the strategy space (:func:`search.strategy.mcmc.
  mcmc_search` with :mod:`search.strategy.space`'s moves), each candidate timed by the
  iteration model on *this* fabric, *guided* (:class:`search.strategy.chains.ChainJob`
  ``guided``): every proposal is first given the memory it needs
  (:func:`search.strategy.feasible.fit_to_memory`: more micro-batches or recomputation,
  cheapest first, the proposed change kept) and half the proposals act on the current
  strategy's largest cost (:func:`search.strategy.space.guided_moves`: ZeRO stage and
  micro-batches when gradient traffic dominates, the schedule when the bubble does, ...).
  With the sweeps' budgets (12-16 evaluations) plain MCMC rarely leaves the start on a
  slow network: the move that pays there (ZeRO-2 -> 1, gradients reduced once an
  iteration instead of every micro-batch) does not fit without recomputation, a second
  move taken only by chance.  Llama 3 70B on 64 and 128 H100 servers at 100 Gb/s
  (torus and 2:1 leaf-spine, three seeds each, 12 evaluations): plain MCMC 92.7 / 51.6 /
  160.8 / 87.7 s on average, guided 60.5 / 35.7 / 66.9 / 39.7 s, a 64-evaluation plain
  search 45.3 / 23.7 / 47.0 / 26.2 s (``experiments/benchmarks/bench_strategy_search.py``;
  at 400 Gb/s, where the start is compute-bound, both find about the start).
  ``codesign optimize`` keeps FlexFlow's plain MCMC (the TopoOpt reproductions);
* keep the fastest; report its time, the start's time and the evaluations spent.

The collective algorithm is the third axis, chosen jointly with the strategy: every
candidate strategy is timed with the requested ``collective_method`` (``best``: the
fastest valid synthesizer per participant group and size class,
:mod:`evaluators.iteration.comm`), so the search compares strategies each with its own
best collectives.  The tournaments are cached per fabric and group and a synthesizer
that cannot beat the time already found is dropped before its replay
(:func:`evaluators.algorithms.plan.prune_above`), which keeps the joint search within
about 1.2x of ranking with the cheap ``auto`` collectives and re-timing only the winner
(the README what-if: 75 vs 62 CPU-seconds).

For the ``topoopt`` family the fabric itself depends on the strategy, so
:func:`alternate_topoopt` runs TopoOpt's alternating loop (Sec. 4.1) for the whole mix:
TopologyFinder on the mix's demand, strategy search per workload on that topology,
TopologyFinder again on the new strategies' demand, kept only when the weighted
iteration time improves, for at most ``rounds`` rounds.

Everything here is deterministic for a given seed (the MCMC's proposals and acceptance
draws depend only on the seed and the times), so a sweep gives the same records for any
number of Ray workers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.errors import InfeasibleError, invalid
from search.strategy.space import Candidate

__all__ = ["SearchBudget", "DEFAULT_SHAPES", "MAX_SEARCH_EVALUATIONS", "MAX_SEARCH_SHAPES",
           "WorkloadPlan", "WorkloadChoice",
           "best_strategies", "weighted_time", "topoopt_fabric", "alternate_topoopt"]


#: Model-parallel shapes a search screens by default (:attr:`SearchBudget.shapes`).
DEFAULT_SHAPES = 32


#: Most strategies timed per workload and finalist fabric: an evaluation takes 0.05-2 s,
#: so 10,000 is hours already (the bound of optimize's --budget); beyond it, a typo.
MAX_SEARCH_EVALUATIONS = 10_000
#: Most model-parallel shapes a search may screen (``--search-shapes``): a 1M-GPU job's
#: divisor pairs are a few hundred.
MAX_SEARCH_SHAPES = 1_000

@dataclass(frozen=True)
class SearchBudget:
    """The per-workload strategy-search budget (sweep key ``strategy_search``).

    Attributes
    ----------
    evaluations : int
        Strategies timed per workload and fabric beyond the start (>= 1), split over
        the chains (each chain also times the start).
    restarts : int
        Independent MCMC chains (>= 1), each with its own seed and candidate cache
        (:mod:`search.strategy.chains`: they may run side by side).
    batch : int
        Proposals per Metropolis step (part of the algorithm: same result for any
        number of workers).
    shapes : int
        Model-parallel shapes timed before the chains, at most
        (:func:`search.strategy.feasible.shape_candidates`; 0: none, the chains start
        from the start).  Evaluations on top of ``evaluations``: 32 covers every shape of
        a 70B model on 1,024 GPUs of 8 per server.
    """

    evaluations: int = 16
    restarts: int = 1
    batch: int = 4
    shapes: int = DEFAULT_SHAPES

    def __post_init__(self) -> None:
        for name, low in (("evaluations", 1), ("restarts", 1), ("batch", 1), ("shapes", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise invalid(f"strategy_search {name}", v, f"an integer >= {low}")
        if self.restarts > self.evaluations:
            raise invalid("strategy_search restarts", self.restarts,
                          f"at most evaluations ({self.evaluations})")


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload of a mix, ready to search: the loaded workload and its start."""

    name: str
    weight: float
    config: str | None
    workload: Any
    start: Candidate
    fixed: bool = False


@dataclass(frozen=True)
class WorkloadChoice:
    """The strategy chosen for one workload on one fabric.

    Attributes
    ----------
    name, config : str
        The workload.
    weight : float
    candidate : Candidate
        The fastest strategy found (with its placement order).
    time_s : float
        Its iteration time, seconds.
    start : Candidate
        The search's start (:func:`search.strategy.feasible.feasible_start`).
    start_time_s : float
        The start's iteration time on this fabric, seconds (what a fixed-strategy
        sweep would report).
    evaluations : int
        Distinct strategies timed.
    metrics : dict
        The chosen strategy's :class:`~evaluators.iteration.IterationResult` fields.
    """

    name: str
    config: str | None
    weight: float
    candidate: Candidate
    time_s: float
    start: Candidate
    start_time_s: float
    evaluations: int
    metrics: dict[str, Any] = field(default_factory=dict, repr=False)


def _metrics(result) -> dict[str, Any]:
    d = result.to_dict()
    d.pop("by_purpose_s", None)
    return d


def best_strategies(topology, plans: Sequence[WorkloadPlan], hardware, *,
                    collective_method: str = "best", budget: SearchBudget | None = None,
                    seed: int = 0, comm_overlap: str = "framework") -> list[WorkloadChoice]:
    """Search the strategy of every workload of the mix on ``topology`` (module docstring).

    The searches of all workloads are independent chains
    (:func:`search.strategy.chains.run_chains`: one after another here, side by side as
    Ray tasks inside a sweep's trial), merged in a fixed order: the same choices for any
    number of workers.

    Parameters
    ----------
    topology : topologies.Topology
        The fabric; its NPUs are the servers.
    plans : sequence of WorkloadPlan
        The mix with each workload's start.
    hardware : Hardware
        GPU type (``gpus_per_server`` is the placement's).
    collective_method : str
        Collective algorithm of the iteration model (``best``, ``auto`` or a name).
    budget : SearchBudget or None
        ``None``: no search, each workload keeps its start (a fixed-strategy sweep).
    seed : int
        Seed of the chains (chain ``c`` of workload ``i`` uses ``(seed, i, c)``).
    comm_overlap : str
        ``framework`` (default) or ``none``: how every candidate's communication
        overlaps its compute (:func:`evaluators.iteration.comm_overlap_options`).

    Returns
    -------
    list of WorkloadChoice
        In the order of ``plans``.

    Raises
    ------
    InfeasibleError
        A workload has no strategy that runs on this fabric (its start does not fit or
        cannot be timed, and the search found nothing either).
    """
    from search.strategy.chains import Timing, chain_jobs, merge, run_chains
    from search.strategy.feasible import shape_candidates

    timing = Timing(hardware, collective_method, comm_overlap=comm_overlap)
    # The shapes are ranked with the cheap collectives (ring on switched fabrics,
    # multiring on direct-connect ones): the ranking only picks where the chains start,
    # so it need not pay a ``best`` tournament for every new group of every shape.
    # Every time compared below is the requested method's.
    cheap = Timing(hardware, "auto", comm_overlap=comm_overlap)
    jobs: list[list] = []
    screens: list[tuple[list[Candidate], dict, Candidate]] = []
    for i, plan in enumerate(plans):
        if budget is None or plan.fixed:
            jobs.append([])
            screens.append(([], {}, plan.start))
            continue
        # The shapes (module docstring), timed here; the chains walk on from the fastest
        # of them and the start (the start first on ties).
        screened: list[Candidate] = [plan.start]
        ran: dict = {}
        if budget.shapes:
            screened += [c for c in shape_candidates(
                plan.workload, plan.start.strategy.gpus, hardware,
                gpus_per_server=timing.per_server, limit=budget.shapes) if c != plan.start]
            # (a shape whose compute alone cannot beat the fastest so far is not timed)
            times = cheap.times(topology, plan.workload, screened, prune=True)
            chain_start = screened[min(range(len(times)), key=lambda k: (times[k], k))]
            if chain_start != plan.start:   # the start at the requested method too
                timing.times(topology, plan.workload, [plan.start], ran)
        else:
            chain_start = plan.start
        screens.append((screened, ran, chain_start))
        jobs.append(chain_jobs(topology, plan.workload, chain_start, timing,
                               budget=budget.evaluations, restarts=budget.restarts,
                               batch=budget.batch, seed=(seed, i), guided=True))
    done = iter(run_chains([job for per in jobs for job in per]))
    out = []
    for plan, per, (screened, ran, chain_start) in zip(plans, jobs, screens):
        start_r = best_r = None
        best, evals = plan.start, 1
        if per:
            found = merge([next(done) for _ in per])
            start_r = found.start_result if chain_start == plan.start else ran.get(plan.start)
            if budget.shapes:
                evals = len({c.key() for c in screened} | set(found.search.times))
            else:
                evals = found.search.evaluations
            # The faster of the start and the chains' best (which is at least their
            # start, the fastest shape); the start on ties.
            options = [(plan.start, start_r), (found.search.best, found.best_result)]
            best, best_r = min(((c, r) for c, r in options if r is not None),
                               key=lambda cr: cr[1].iteration_time_s, default=(plan.start, None))
        else:
            ran = {}
            timing.times(topology, plan.workload, [plan.start], ran)
            start_r = best_r = ran.get(plan.start)
        if best_r is None or not math.isfinite(best_r.iteration_time_s):
            # Re-raise the evaluator's own reason for the start (memory, inapplicable...).
            timing.evaluate(topology, plan.workload, plan.start)
            raise InfeasibleError(f"no strategy of {plan.name} runs on {topology.name}")
        t0 = float(start_r.iteration_time_s) if start_r is not None else math.inf
        out.append(WorkloadChoice(plan.name, plan.config, plan.weight, best,
                                  float(best_r.iteration_time_s), plan.start, t0, evals,
                                  _metrics(best_r)))
    return out


def weighted_time(choices: Sequence[WorkloadChoice]) -> float:
    """Weight-averaged iteration time of a mix, seconds."""
    total = sum(c.weight for c in choices)
    return sum(c.weight * c.time_s for c in choices) / total


def _mix_demand(plans: Sequence[WorkloadPlan], cands: Sequence[Candidate], hardware):
    """TopologyFinder's inputs for a mix: weighted sums of every workload's AllReduce
    groups (same server ring: bytes added) and MP server matrices."""
    from codesign.workloads import demand_for

    groups: dict[tuple[int, ...], float] = {}
    mp = None
    for plan, cand in zip(plans, cands):
        g, m = demand_for(plan.workload, cand.strategy, hardware,
                          cand.placement(hardware.gpus_per_server), check=False).split()
        for servers, b in g:
            groups[servers] = groups.get(servers, 0.0) + plan.weight * b
        mp = plan.weight * np.asarray(m, dtype=float) + (0.0 if mp is None else mp)
    return list(groups.items()), mp


def topoopt_fabric(servers: int, degree: int, bandwidth_Bps: float, plans, cands, hardware,
                   seed: int):
    """TopologyFinder (TopoOpt Algorithm 1) for the mix's demand under ``cands``."""
    from topologies.topoopt import topology_finder

    groups, mp = _mix_demand(plans, cands, hardware)
    return topology_finder(servers, degree, groups, mp, link_bandwidth=bandwidth_Bps,
                           seed=seed).topology


def alternate_topoopt(servers: int, degree: int, bandwidth_Bps: float,
                      plans: Sequence[WorkloadPlan], hardware, *,
                      collective_method: str = "best", budget: SearchBudget | None = None,
                      rounds: int = 2, tolerance: float = 0.01, seed: int = 0,
                      comm_overlap: str = "framework") -> tuple[Any, list[WorkloadChoice]]:
    """TopoOpt's alternating loop (Sec. 4.1) for a mix on ``servers`` of degree ``degree``.

    Round 0: the strategy search of every workload on the current TopologyFinder
    fabric (:func:`best_strategies`); round ``r``: TopologyFinder on the found
    strategies' mix demand; the new fabric is kept when the mix's weighted time on it
    (same strategies) is lower, and the strategies are searched again on it.  Stops when
    a round gains less than ``tolerance``
    (relative) or after ``rounds`` rounds.  With ``budget=None`` it is one TopologyFinder
    call on the starts' demand (a fixed-strategy trial).  ``comm_overlap`` as in
    :func:`best_strategies`.

    Returns
    -------
    (topology, choices)
        The final fabric and the choices on it; each choice's ``start_time_s`` is its
        start on the first fabric (TopologyFinder for the starts: the fixed-strategy
        trial), ``evaluations`` counts every round.
    """
    cands = [p.start for p in plans]
    topo = topoopt_fabric(servers, degree, bandwidth_Bps, plans, cands, hardware, seed)
    choices = best_strategies(topo, plans, hardware, collective_method=collective_method,
                              budget=budget, seed=seed, comm_overlap=comm_overlap)
    first = choices
    evaluations = [c.evaluations for c in choices]
    for r in range(1, rounds if budget is not None else 1):
        cands = [c.candidate for c in choices]
        new_topo = topoopt_fabric(servers, degree, bandwidth_Bps, plans, cands, hardware, seed)
        fixed = [WorkloadPlan(p.name, p.weight, p.config, p.workload, c, True)
                 for p, c in zip(plans, cands)]
        try:
            on_new = best_strategies(new_topo, fixed, hardware,
                                     collective_method=collective_method, budget=None,
                                     comm_overlap=comm_overlap)
        except InfeasibleError:
            break
        if weighted_time(on_new) >= weighted_time(choices) * (1 - tolerance):
            break   # TopologyFinder's fabric for the new strategies is no faster
        topo = new_topo
        again = [WorkloadPlan(p.name, p.weight, p.config, p.workload, c, p.fixed)
                 for p, c in zip(plans, cands)]
        choices = best_strategies(topo, again, hardware, collective_method=collective_method,
                                  budget=budget, seed=seed + r, comm_overlap=comm_overlap)
        evaluations = [e + c.evaluations + 1 for e, c in zip(evaluations, choices)]
    # The baseline stays the start on the starts' fabric (what a fixed-strategy trial has).
    choices = [WorkloadChoice(c.name, c.config, c.weight, c.candidate, c.time_s, f.start,
                              f.start_time_s, e, c.metrics)
               for c, f, e in zip(choices, first, evaluations)]
    return topo, choices
