"""Strategy-search chains as independent jobs: run here, or in parallel on Ray.

A strategy search (:func:`search.strategy.mcmc.mcmc_search`) of ``restarts`` chains is
``restarts`` independent jobs, each one MCMC chain with its share of the budget and its
own seed; the searches of a mix's workloads are independent too.  A :class:`ChainJob`
carries everything a chain needs (fabric, workload, start, seed, budget and how
candidates are timed), :func:`run_chain` runs one in the calling process, and
:func:`run_chains` runs a list of them with the current runner: one after another in
this process, or -- inside :func:`on_ray` (the sweep driver's trial tasks) -- as Ray tasks
on the cluster's idle CPUs, side by side with the ones run here.

Same result for any number of workers
-------------------------------------
A chain's proposals and acceptance draws depend only on its seed and on the times it
gets back (:mod:`search.strategy.mcmc`), each chain has its own candidate cache, and the
iteration model's caches never change a time: the ``best`` collective decisions are made
at a size class's representative size (:func:`evaluators.iteration.comm.best_size_class`),
not at whichever size asked first.  Results come back in job order and the best chain
wins, first on ties (:func:`merge`).  So a search gives the same answer in one process
or spread over any number of Ray workers, warm caches or cold.

Warm caches
-----------
Ray runs tasks in long-lived worker processes; the iteration model keeps its caches
(routes, collective schedules, ``best`` decisions) with the topology *object*, so a
worker maps every topology it receives to the first object it saw with the same network
(:func:`local_topology`, a small LRU per process): the chains of one fabric -- the
restarts, the workloads of a mix, TopoOpt's rounds -- reuse what the earlier ones
timed on that worker.

Tasks, not actors: a sweep's trials and an ``optimize`` job (:mod:`search.topoopt.alternating`)
are Ray tasks of one CPU each, and their chains are tasks too.  Actors would hold CPUs
for their whole life that the trials in flight need; tasks take a CPU only while they run
and Ray reuses their worker processes, so the caches stay warm all the same.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from codesign.errors import CodesignError
from search.strategy.feasible import fit_to_memory
from search.strategy.mcmc import SearchResult, mcmc_search
from search.strategy.space import Candidate, guided_moves, workload_moves

__all__ = ["Timing", "ChainJob", "ChainResult", "run_chain", "run_chains", "merge",
           "chain_jobs", "on_ray", "local_topology", "seed_of"]


@dataclass(frozen=True)
class Timing:
    """How a candidate strategy is timed: :func:`evaluators.iteration.evaluate`'s options.

    Attributes
    ----------
    hardware : Hardware
        GPU type (``gpus_per_server`` places the candidate's ranks).
    collective_method : str
        ``best``, ``auto`` or a synthesizer name.
    network_model : str
        ``flow`` (default), ``analytical`` or ``packet``.
    routing : str
        ``auto`` or one of :data:`evaluators.iteration.comm.ROUTINGS`.
    gpus_per_server : int or None
        GPUs per server of the placement (``None``: the hardware's).
    comm_overlap : str
        ``framework`` (default: the overlap today's training stacks switch on for each
        candidate's features) or ``none``
        (:func:`evaluators.iteration.comm_overlap_options`).
    """

    hardware: Any
    collective_method: str = "best"
    network_model: str = "flow"
    routing: str = "auto"
    gpus_per_server: int | None = None
    comm_overlap: str = "framework"

    @property
    def per_server(self) -> int:
        """GPUs per server of the placement."""
        return self.gpus_per_server or self.hardware.gpus_per_server

    def evaluate(self, topology, workload, candidate: Candidate, *,
                 time_bound: float | None = None):
        """The candidate's :class:`~evaluators.iteration.IterationResult` on ``topology``
        (``time_bound``: :func:`evaluators.iteration.evaluate`'s)."""
        from evaluators.iteration import comm_overlap_options, evaluate

        return evaluate(topology, workload, candidate.strategy, hardware=self.hardware,
                        placement=candidate.placement(self.per_server),
                        collective_method=self.collective_method,
                        network_model=self.network_model, routing=self.routing,
                        time_bound=time_bound,
                        **comm_overlap_options(self.comm_overlap, candidate.strategy))

    def times(self, topology, workload, candidates: Sequence[Candidate],
              results: dict | None = None, *, prune: bool = False) -> list[float]:
        """Iteration time (s) of each candidate on ``topology``; ``inf`` where the
        iteration model refuses it (it does not fit in memory, or a collective method
        does not apply): a search never accepts those.  ``results`` (optional) collects
        the :class:`~evaluators.iteration.IterationResult` of every candidate that runs.
        ``prune``: a candidate whose compute alone cannot beat the fastest so far is not
        timed (``inf``; :func:`evaluators.iteration.evaluate`'s ``time_bound``), so only
        the fastest time is exact -- for picking the fastest of a list."""
        out: list[float] = []
        for c in candidates:
            try:
                bound = min(out, default=math.inf) if prune else math.inf
                r = self.evaluate(topology, workload, c,
                                  time_bound=bound if math.isfinite(bound) else None)
            except CodesignError:
                out.append(math.inf)
                continue
            if results is not None:
                results[c] = r
            out.append(float(r.iteration_time_s))
        return out


@dataclass(frozen=True)
class ChainJob:
    """One MCMC chain: search ``workload``'s strategy on ``topology`` from ``start``.

    ``budget`` distinct candidates at most, ``batch`` proposals per Metropolis step,
    seeded with ``seed`` (an integer, :func:`seed_of`).  ``guided``: every proposal is
    first made to fit in memory (:func:`search.strategy.feasible.fit_to_memory`) and half
    of them act on the current strategy's largest cost
    (:func:`search.strategy.space.guided_moves`); otherwise FlexFlow's plain MCMC.
    """

    topology: Any
    workload: Any
    start: Candidate
    seed: int
    budget: int
    timing: Timing
    batch: int = 4
    guided: bool = False


@dataclass(frozen=True)
class ChainResult:
    """What a chain returns: the search and the iteration results of its start and of
    its best candidate (``None`` where the candidate cannot run)."""

    search: SearchResult
    start_result: Any = field(default=None, repr=False)
    best_result: Any = field(default=None, repr=False)


def seed_of(parts: Sequence[int]) -> int:
    """One integer seed from a tuple (stable across runs and processes)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


#: Topologies a process has timed on, by network content (most recent last).
_TOPOLOGIES: "OrderedDict[str, Any]" = OrderedDict()
#: How many fabrics' caches a worker process keeps warm.
_MAX_TOPOLOGIES = 8


def _fingerprint(topology) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((topology.name, topology.npus, topology.switches, topology.n_links)).encode())
    for name in ("src", "dst", "bandwidth", "latency"):
        h.update(np.ascontiguousarray(getattr(topology, name)).tobytes())
    return h.hexdigest()


def local_topology(topology):
    """This process's object for ``topology``'s network: the first one it saw with the
    same nodes, links, rates and latencies (whose caches are warm), else ``topology``."""
    key = _fingerprint(topology)
    kept = _TOPOLOGIES.get(key)
    if kept is None:
        kept = _TOPOLOGIES[key] = topology
        while len(_TOPOLOGIES) > _MAX_TOPOLOGIES:
            _TOPOLOGIES.popitem(last=False)
    _TOPOLOGIES.move_to_end(key)
    return kept


def run_chain(job: ChainJob) -> ChainResult:
    """Run one chain in this process (module docstring); candidates are timed by
    :meth:`Timing.times` (``inf`` where they cannot run)."""
    topology = local_topology(job.topology)
    results: dict[Candidate, Any] = {}

    def evaluate_many(cands: Sequence[Candidate]) -> list[float]:
        return job.timing.times(topology, job.workload, cands, results)

    repair = guide = None
    if job.guided:
        def repair(c: Candidate) -> Candidate:
            return fit_to_memory(c, job.workload, job.timing.hardware,
                                 gpus_per_server=job.timing.per_server)

        def guide(c: Candidate) -> tuple[str, ...] | None:
            r = results.get(c)
            hint = guided_moves(r.breakdown if r is not None else None)
            return workload_moves(job.workload, hint) if hint else None

    found = mcmc_search(job.workload, job.start, evaluate_many, budget=job.budget,
                        restarts=1, batch=job.batch,
                        gpus_per_server=job.timing.per_server, seed=job.seed,
                        repair=repair, guide=guide)
    return ChainResult(found, results.get(job.start), results.get(found.best))


def chain_jobs(topology, workload, start: Candidate, timing: Timing, *, budget: int,
               restarts: int, batch: int, seed: Sequence[int],
               guided: bool = False) -> list[ChainJob]:
    """``restarts`` chains sharing ``budget``; chain ``c`` is seeded ``(*seed, c)``."""
    return [ChainJob(topology, workload, start, seed_of((*seed, c)),
                     budget // restarts + (1 if c < budget % restarts else 0), timing, batch,
                     guided)
            for c in range(restarts)]


def merge(results: Sequence[ChainResult]) -> ChainResult:
    """The best chain (first on ties), with the work of all chains added up."""
    best = min(range(len(results)), key=lambda i: (results[i].search.best_time_s, i))
    times: dict[str, float] = {}
    for res in results:
        times.update(res.search.times)
    s = results[best].search
    return replace(results[best], search=replace(
        s, evaluations=sum(r.search.evaluations for r in results),
        accepted=sum(r.search.accepted for r in results),
        proposed=sum(r.search.proposed for r in results), times=times))


#: The runner of :func:`run_chains` in this context: ``None`` runs here.
_RUNNER: contextvars.ContextVar = contextvars.ContextVar("chain_runner", default=None)


def _run_list(jobs: Sequence[ChainJob]) -> list[ChainResult]:
    return [run_chain(job) for job in jobs]


@functools.lru_cache(maxsize=1)
def _chains_task():
    """:func:`_run_list` as a Ray task of one CPU (a lost worker is retried once; a
    chain is deterministic, so its own exceptions are not)."""
    import ray

    return ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(_run_list)


def _ray_runner(jobs: Sequence[ChainJob], tasks: int | None) -> list[ChainResult]:
    """Cut the jobs into contiguous, nearly equal groups, one per idle CPU of the
    cluster (at most ``tasks``) plus one; the first group runs here (this process's
    caches are warm), the others as Ray tasks meanwhile; gather in job order.

    Where a job runs never changes its result (module docstring), so the split may
    follow the cluster's load: on a busy cluster (every CPU running a trial) it all
    runs here, without the start-up and cold caches of extra worker processes."""
    import ray

    free = max(0, int(ray.available_resources().get("CPU", 0.0)))
    parts = min(len(jobs), 1 + (free if tasks is None else min(free, tasks)))
    bounds = [len(jobs) * i // parts for i in range(parts + 1)]
    groups = [jobs[bounds[i]:bounds[i + 1]] for i in range(parts)]
    refs = [_chains_task().remote(group) for group in groups[1:]]
    return _run_list(groups[0]) + [r for got in ray.get(refs) for r in got]


@contextlib.contextmanager
def on_ray(tasks: int | None = None) -> Iterator[None]:
    """Inside this block (in a Ray driver or task), :func:`run_chains` runs jobs as Ray
    tasks of one CPU while the cluster has idle CPUs (at most ``tasks`` at a time), the
    rest in this process (:func:`_ray_runner`).  A task waiting for its chains gives its
    CPU back to Ray meanwhile, so trials in flight and their chains share the cluster's
    CPUs without deadlock, and cancelling a trial's task cancels its chains."""
    token = _RUNNER.set(functools.partial(_ray_runner, tasks=tasks))
    try:
        yield
    finally:
        _RUNNER.reset(token)


def run_chains(jobs: Sequence[ChainJob]) -> list[ChainResult]:
    """Run independent chains with the current runner; results in job order.

    One job (or none) always runs here: shipping it would only add overhead."""
    runner = _RUNNER.get()
    if runner is None or len(jobs) < 2:
        return _run_list(jobs)
    return runner(list(jobs))
