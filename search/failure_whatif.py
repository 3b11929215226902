"""Failure what-ifs: how much slower training gets when parts of the fabric fail.

For a fabric and the strategies chosen on it (one per workload of a mix), each of
``samples`` random draws (:func:`topologies.failures.sample_failures`, seeded
``(seed, sample)``) removes links, switches, servers or racks, and the job is timed
again on what is left:

1. **Partitioned** -- no group of servers that still reach each other holds a strict
   majority of the surviving servers: training cannot continue; counted in
   ``partitioned``.  Servers cut off from a majority group (a server whose only link
   failed, a rack behind a failed leaf) are lost like failed servers (step 3).
2. **Same servers** (only links or switches failed) -- the old strategies and placements
   still fit; routes are rebuilt on what is left (the topology's own minimum-hop routes
   and per-flow ECMP; a Clos fabric's D-mod-k rule no longer applies) and every workload
   is re-timed with its old strategy.
3. **Fewer servers** -- the job no longer fits its old placement (its strategy uses more
   GPUs than are left): it is re-planned on the survivors (:func:`_replan`): the old
   strategy with its data parallelism resized, and the strategy search again
   (:func:`search.strategy.feasible.feasible_start`, then :func:`search.per_fabric.best_strategies`
   with the study's ``search`` budget), the faster kept, the global batch rounded down to
   a multiple of the surviving GPUs; a workload with no
   strategy that fits in memory any more makes the sample count as ``cannot_fit``.

The **slowdown** of a sample is the mix's weighted time per sample (iteration time /
global batch) after the failure over the same before it (both timed with the same
collective method on the same model, so a sample without failures has slowdown exactly
1): the ratio of the times to train.  The baseline is the given strategy or, if faster,
the best of the same search a re-planned job gets (from the feasible start on the intact
fabric), so re-planning is not credited with finding a better strategy than the intact
job could have run.  Reported: mean, p50 and p99 (linear interpolation)
over the samples in which training continues, and the fraction of samples in which it
cannot (partitioned or no longer fitting).

Work bound: every sample rebuilds all-pairs routes (``24 n^2`` bytes for ``n`` nodes,
checked against the memory limit before the first sample) and times ``workloads x
(1 + search evaluations)`` strategies; :func:`check_failure_work` refuses a study whose
planned ``samples x workloads x evaluations x n^2`` exceeds :data:`MAX_FAILURE_WORK`
(about two hours of this machine's work; a 128-server fabric allows about 900 samples).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.errors import CodesignError, InfeasibleError, invalid
from search.per_fabric import SearchBudget, WorkloadPlan, best_strategies, topoopt_fabric
from search.strategy.chains import Timing

__all__ = ["FailureStudy", "FailureResult", "fabric_failures", "failure_whatif",
           "format_failure_summary", "check_failure_work", "MAX_FAILURE_WORK",
           "DEFAULT_FAILURE_SEARCH"]

#: Strategy search per workload when the job must be re-planned on fewer servers: a few
#: steps from the intact fabric's strategy, no shape screen (it runs once per sample, and
#: the intact search screened the shapes already).
DEFAULT_FAILURE_SEARCH = SearchBudget(evaluations=4, restarts=1, shapes=0)
#: Largest planned ``samples x workloads x evaluations x nodes^2`` of one study: about two
#: hours at the 3e-5 s per unit measured for Llama 3 70B on 128-server fabrics
#: (``experiments/benchmarks/bench_failures.py``: 7-9 s per sample of 2.2e5 units).
MAX_FAILURE_WORK = 2e8


@dataclass(frozen=True)
class FailureStudy:
    """What to fail and how often.

    Attributes
    ----------
    spec : topologies.failures.FailureSpec
        The random failures (``--fail``).
    samples : int
        Draws (``--samples``), >= 1.
    search : SearchBudget or None
        Strategy search when servers are lost (``None``: the feasible start only).
    """

    spec: Any
    samples: int = 20
    search: SearchBudget | None = DEFAULT_FAILURE_SEARCH

    def __post_init__(self) -> None:
        from topologies.failures import FailureSpec

        if not isinstance(self.spec, FailureSpec):   # (an AttributeError when used)
            raise invalid("failure spec", self.spec, "a FailureSpec (parse_failure_spec)")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) \
                or not 1 <= self.samples <= 100_000:
            raise invalid("--samples", self.samples, "an integer in [1, 100000]")
        if self.search is not None and not isinstance(self.search, SearchBudget):
            raise invalid("failure search", self.search, "a SearchBudget or None")


@dataclass(frozen=True)
class FailureResult:
    """Slowdown distribution of one fabric under a :class:`FailureStudy`."""

    fabric: str
    failures: str
    samples: int
    baseline_time_per_sample_s: float
    slowdowns: tuple[float, ...]
    partitioned: int
    cannot_fit: int
    replanned: int
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    def _stat(self, q: float | None) -> float | None:
        if not self.slowdowns:
            return None
        arr = np.asarray(self.slowdowns)
        return float(arr.mean()) if q is None else float(np.percentile(arr, q))

    @property
    def mean(self) -> float | None:
        return self._stat(None)

    @property
    def p50(self) -> float | None:
        return self._stat(50)

    @property
    def p99(self) -> float | None:
        return self._stat(99)

    @property
    def stopped_fraction(self) -> float:
        """Fraction of samples in which training cannot continue."""
        return (self.partitioned + self.cannot_fit) / self.samples

    def to_dict(self) -> dict[str, Any]:
        return {"fabric": self.fabric, "failures": self.failures, "samples": self.samples,
                "baseline_time_per_sample_s": self.baseline_time_per_sample_s,
                "slowdown_mean": self.mean,
                "slowdown_p50": self.p50, "slowdown_p99": self.p99,
                "partitioned": self.partitioned, "cannot_fit": self.cannot_fit,
                "partitioned_fraction": self.partitioned / self.samples,
                "stopped_fraction": self.stopped_fraction, "replanned": self.replanned,
                "slowdowns": list(self.slowdowns), "seconds": self.seconds,
                "notes": list(self.notes)}


def format_failure_summary(d: dict[str, Any]) -> str:
    """One line of a :meth:`FailureResult.to_dict` (or of a study refused for a fabric:
    ``refused``, the reason)."""
    if d.get("refused"):
        return f"failures {d['failures']} ({d['samples']} samples): not run, {d['refused']}"
    if d.get("slowdown_mean") is None:
        dist = "no sample could continue"
    else:
        dist = (f"slowdown mean {d['slowdown_mean']:.3f}x, p50 {d['slowdown_p50']:.3f}x, "
                f"p99 {d['slowdown_p99']:.3f}x")
    return (f"failures {d['failures']} ({d['samples']} samples): {dist}; cannot continue in "
            f"{d['stopped_fraction']:.0%} (partitioned {d['partitioned']}, no strategy fits "
            f"{d['cannot_fit']}); re-planned on fewer servers {d['replanned']}")


def check_failure_work(topology, study: FailureStudy, workloads: int) -> None:
    """Refuse a study too large for its inputs (module docstring; ``ResourceLimitError``)."""
    from codesign.resources import check_count, check_memory

    n = topology.n_nodes
    check_memory("the failure what-if's routes", "nodes", n, 24.0 * n * n,
                 "use a smaller fabric")
    evals = 1 + (study.search.evaluations if study.search is not None else 0)
    check_count("the failure what-if", "--samples", study.samples,
                float(study.samples) * workloads * evals * n * n,
                "use fewer --samples or a smaller fabric", maximum=MAX_FAILURE_WORK)


def _time(topology, workload, cand, timing: Timing) -> float:
    """Iteration time (s) of ``cand`` on ``topology``, timed as the strategy search times
    its candidates (:class:`search.strategy.chains.Timing`); raises where it cannot run."""
    return float(timing.evaluate(topology, workload, cand).iteration_time_s)


def _search(topology, workload, weight: float, timing: Timing, study: FailureStudy,
            seed: int, per_npu: int):
    """The study's strategy search for ``workload`` on ``topology`` (``per_npu`` GPUs per
    NPU) from its feasible start (the baseline's and a re-planned job's, so neither is
    compared with a weaker one)."""
    from search.strategy.feasible import feasible_start

    hardware = timing.hardware
    gpus = topology.npus * per_npu
    plan = WorkloadPlan(workload.name, weight, None, workload,
                        feasible_start(workload, gpus, hardware))
    return best_strategies(topology, [plan], hardware,
                           collective_method=timing.collective_method,
                           budget=study.search, seed=seed,
                           comm_overlap=timing.comm_overlap)[0]


def _cut_off(topology) -> list[int] | None:
    """NPUs outside the largest group of NPUs that still reach each other, or ``None``
    when no group holds a strict majority of the NPUs (the fabric is partitioned)."""
    npu_labels = topology.component_labels()[:topology.npus]
    counts = np.bincount(npu_labels)
    main = int(counts.argmax())
    if 2 * counts[main] <= topology.npus:
        return None
    return np.flatnonzero(npu_labels != main).tolist()


def _same_shape(cand, gpus: int):
    """The intact strategy with data parallelism resized to ``gpus`` GPUs (same TP, PP,
    CP and knobs), or ``None`` when its model parallelism does not divide ``gpus``."""
    import dataclasses

    st = cand.strategy
    mp = st.gpus // st.dp
    if gpus % mp:
        return None
    return dataclasses.replace(cand, strategy=dataclasses.replace(st, dp=gpus // mp))


def _gpus_per_npu(topology, mix, hardware) -> int:
    """GPUs of one topology NPU: the server's (``gpus_per_server``) on server-level fabrics,
    1 on GPU-level ones (``railopt``, ``multiplane``: every NPU a GPU, grouped into servers
    by ``node_attrs["server"]``) -- whichever the strategies chosen on the intact fabric
    fill, server level first as the iteration model decides
    (:mod:`evaluators.iteration.model`)."""
    for per in dict.fromkeys((hardware.gpus_per_server, 1)):
        if all(c.strategy.gpus == topology.npus * per for _, _, c in mix):
            return per
    wl, _, c = next((x for x in mix if x[2].strategy.gpus != topology.npus
                     * hardware.gpus_per_server))
    raise invalid(f"failure what-if of {wl.name} strategy", str(c.strategy),
                  f"a strategy on every GPU of the fabric ({topology.npus} servers x "
                  f"{hardware.gpus_per_server} GPUs, or {topology.npus} GPUs of a GPU-level "
                  "fabric)")


def _whole_servers(topology, npus) -> list[int]:
    """``npus`` (intact ids) and every other NPU of their servers: on a GPU-level fabric a
    server with a failed or cut-off GPU leaves the job (its strategies take whole
    servers); on a server-level one the NPUs themselves."""
    npus = sorted({int(v) for v in npus})
    if "server" not in topology.node_attrs or not npus:
        return npus
    server = np.asarray(topology.node_attrs["server"])
    return np.flatnonzero(np.isin(server, server[npus])).tolist()


def _replan(left, mix, timing: Timing, study: FailureStudy, *, seed: int,
            per_npu: int) -> float:
    """Weighted time per sample of the mix re-planned on the surviving servers, seconds.

    A strategy's data parallelism must divide the global batch (Megatron-LM and
    PyTorch DDP split it evenly), so on ``g`` surviving GPUs the batch ``B`` is rounded
    down to ``floor(B / g) g`` samples (at most ``g - 1`` fewer; a batch of 65,536 on
    120 GPUs becomes 65,520).  Per workload the faster of (a) the intact strategy with
    its data parallelism resized to the survivors (same TP/PP/CP and knobs, when it
    divides and fits) and (b) the strategy search from the feasible start (the same
    search and seed as the baseline's) is kept; time per sample = iteration time /
    batch.
    """
    gpus = left.npus * per_npu
    total = 0.0
    for i, (wl, w, cand) in enumerate(mix):
        batch = (wl.batch_size // gpus) * gpus
        if batch >= 1:
            wl = wl.with_batch(batch)
        best = math.inf
        resized = _same_shape(cand, gpus)
        if resized is not None:
            try:
                best = _time(left, wl, resized, timing)
            except CodesignError:
                pass
        try:
            best = min(best, _search(left, wl, w, timing, study, seed + i, per_npu).time_s)
        except InfeasibleError:
            if not math.isfinite(best):
                raise
        total += w * best / wl.batch_size
    return total


def fabric_failures(topology, mix: Sequence[tuple[Any, float, Any]], hardware,
                    study: FailureStudy, *, collective_method: str = "auto",
                    seed_offset: int = 0, comm_overlap: str = "framework") -> FailureResult:
    """Slowdown distribution of ``topology`` under ``study`` (module docstring).

    Parameters
    ----------
    topology : topologies.Topology
        The intact fabric: NPUs are servers, or GPUs grouped into servers by
        ``node_attrs["server"]`` (``railopt``, ``multiplane``; a server with a failed or
        cut-off GPU leaves the job).
    mix : sequence of (Workload, weight, Candidate)
        Each workload with its weight and the strategy chosen on the intact fabric.
    hardware : Hardware
        GPU type.
    study : FailureStudy
    collective_method : str
        Collective method of every timing (``auto`` by default: the cheap one; the
        slowdown is a ratio of two timings with the same method).  ``best`` is timed as
        ``auto``: its tournament per sample would dominate the time.
    comm_overlap : str
        ``framework`` (default) or ``none``, as the strategy search that chose ``mix``
        (:func:`evaluators.iteration.comm_overlap_options`).
    seed_offset : int
        Added to the study seed (independent draws per fabric when wanted).

    Returns
    -------
    FailureResult
    """
    import time

    from topologies.failures import Failures, degrade, sample_failures

    t0 = time.perf_counter()
    timing = Timing(hardware, "auto" if collective_method == "best" else collective_method,
                    comm_overlap=comm_overlap)
    per_npu = _gpus_per_npu(topology, mix, hardware)
    check_failure_work(topology, study, len(mix))
    total_w = sum(w for _, w, _ in mix)
    # Seconds per sample (the global batch may shrink when servers are lost).  The
    # baseline gets the same search a re-planned job gets (from the feasible start), so a
    # re-planned job is not compared against a weaker strategy than that search finds.
    given = [_time(topology, wl, c, timing) for wl, _, c in mix]
    if study.search is not None:
        given = [min(t, _search(topology, wl, w, timing, study, study.spec.seed + i,
                                per_npu).time_s)
                 for i, ((wl, w, _), t) in enumerate(zip(mix, given))]
    base = sum(w * t / wl.batch_size for (wl, w, _), t in zip(mix, given)) / total_w
    slow, parted, unfit, replanned = [], 0, 0, 0
    for i in range(study.samples):
        rng = np.random.default_rng([study.spec.seed + seed_offset, i])
        failed = sample_failures(topology, study.spec, rng)
        failed = Failures(tuple(_whole_servers(topology, failed.npus)), failed.links,
                          failed.switches)
        if len(failed.npus) >= topology.npus:
            unfit += 1
            continue
        left = degrade(topology, failed)
        cut = _cut_off(left)
        if cut is None:
            parted += 1
            continue
        if cut:   # servers cut off from the majority are lost like failed servers
            lost = set(failed.npus) | {int(left.params["npu_ids"][v]) for v in cut}
            failed = Failures(tuple(_whole_servers(topology, lost)), failed.links,
                              failed.switches)
            left = degrade(topology, failed)
        try:
            if left.npus == topology.npus:
                t = sum(w * _time(left, wl, c, timing) / wl.batch_size
                        for wl, w, c in mix) / total_w
            else:
                replanned += 1
                t = _replan(left, mix, timing, study, seed=study.spec.seed,
                            per_npu=per_npu) / total_w
        except InfeasibleError:
            unfit += 1
            continue
        slow.append(t / base)
    return FailureResult(topology.name, study.spec.text or "?", study.samples, base,
                         tuple(slow), parted, unfit, replanned, time.perf_counter() - t0)


def failure_whatif(point, outcome, study: FailureStudy, *, hardware,
                   collective_method: str = "auto") -> FailureResult:
    """:func:`fabric_failures` of a what-if answer (a sweep point and its outcome): the
    fabric is rebuilt (for ``topoopt``: TopologyFinder once more on the final
    strategies' demand, same seed -- the alternating loop's last round does the same)
    and every workload keeps its chosen strategy and placement order, timed with the
    point's communication overlap."""
    from search.sweeps.trial import cached_topology, outcome_candidates, plan_workloads

    cands = outcome_candidates(outcome)
    if point.family == "topoopt":
        plans = plan_workloads(point, hardware)
        topo = topoopt_fabric(point.servers, point.degree, point.link_bandwidth_Bps, plans,
                              cands, hardware, point.seed)
    else:
        topo = cached_topology(outcome.metrics["topology_spec"])
    mix = [(w.load(), w.weight, c)
           for w, c in zip(point.workloads, cands)]
    return fabric_failures(topo, mix, hardware, study, collective_method=collective_method,
                           comm_overlap=point.comm_overlap)
