"""The feasible start of a strategy search: the least model parallelism that fits in memory.

:func:`feasible_start` answers "which strategy should a search on ``gpus`` GPUs start
from?" without timing anything: the first strategy, in order of increasing model
parallelism, whose most loaded GPU fits in HBM (:func:`codesign.workloads.memory.
memory_per_gpu`).  Pure data parallelism of a 70B model does not fit on an 80 GB GPU,
so a search that starts there (and a sweep that times only it) answers "infeasible";
this module finds a start the MCMC (:mod:`search.strategy.mcmc`) can improve.

Order of the enumeration (stated because it is ours; Megatron-LM's practice, Narayanan
et al. SC'21 Sec. 3.3 "Takeaway #1": tensor parallelism up to the GPUs of one server,
pipeline parallelism across servers):

1. **Model-parallel degree** ``tp x pp`` ascending over the divisors of ``gpus``;
2. for one degree, **tensor parallelism inside the scale-up domain first**: the largest
   ``tp`` that is at most the GPUs per server, then smaller ones, then ``tp`` beyond the
   server (pipeline stages fill the rest);
3. for one ``(tp, pp)``, the **memory knobs** of :data:`KNOBS` (each an ordered list of
   alternatives from the cheapest in time to the most memory-saving: sequence
   parallelism -- on wherever it applies with ``tp > 1``, being neither slower nor
   larger --, micro-batches, ZeRO stage, expert parallelism, embedding placement,
   recomputation), combined in order of the sum of their positions (cheapest
   combinations first).  Micro-batch counts divide a replica's batch and fill the
   pipeline (at least ``pp``); a replica's batch smaller than ``pp`` (a small global
   batch on many GPUs) runs one sample per micro-batch, with the longer bubble that
   costs.

The whole enumeration runs twice: first without the costly end of the knobs (full
recomputation, ZeRO-3), so that tensor or pipeline parallelism is preferred to them, then
with every knob.

Memory only falls along every knob's list (sequence parallelism: split norm/dropout
activations; more micro-batches: smaller in-flight activations; higher ZeRO stage: less
model state; more expert ranks: fewer experts per GPU; tables on servers: no replicated
tables; recomputation: fewer saved activations, full recomputation the fewest --
selective and partial recomputation are ordered by their time, not their memory, which
the first fit of the enumeration does not need), so a ``(tp, pp)`` whose most
memory-saving combination does not fit is skipped after one check; the enumeration costs
O(divisor pairs + knob combinations of the first pair that fits) memory checks.

With a per-tensor FP8 precision (``fp8``, ``fp8-cs``) every strategy keeps its weights
in FP8 (``fp8_params``), as NVIDIA's FP8 recipes do: never slower, never more memory.

Extending it: append a :class:`Knob` to :data:`KNOBS` whose ``options`` lists the
alternatives cheapest-first and most memory-saving last; :func:`feasible_start` needs no
other change.  ``codesign optimize`` (:mod:`search.topoopt.alternating`), sweep trials and
what-ifs all start from it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from codesign.errors import InfeasibleError, InvalidSpecError, invalid
from codesign.specs import check_int
from codesign.workloads.hardware import Hardware, get_hardware
from codesign.workloads.memory import MemoryBreakdown, memory_per_gpu
from codesign.workloads.model import Workload
from codesign.workloads.placement import Placement
from codesign.workloads.strategy import (
    Strategy, check_applicable, chunk_blocks, is_table, keeps_fp8_weights, layer_strategies,
    partial_recompute_counts, recompute_ladder, sequence_parallel_applies, stage_bounds,
    with_expert_parallelism)
from search.strategy.space import Candidate, divisors, replica_batch

__all__ = ["Knob", "KNOBS", "feasible_start", "model_parallel_shapes", "fit_to_memory",
           "shape_candidates", "PIPELINE_ORDER"]

_GIB = float(2 ** 30)


@dataclass(frozen=True)
class Knob:
    """One memory-saving dimension of a strategy.

    Attributes
    ----------
    name : str
        For messages.
    options : callable
        ``options(strategy, workload) -> list[Strategy]``: variants of ``strategy``
        (which has ``dp``, ``tp``, ``pp`` fixed) along this knob, cheapest in time first,
        least memory last; the first is normally ``strategy`` itself.
    costly : callable or None
        ``costly(option) -> bool``: options that cost so much time (full or partial
        recomputation: up to a third more compute; ZeRO-3: parameters gathered every
        micro-batch) that more model parallelism is tried first (module docstring).
    """

    name: str
    options: Callable[[Strategy, Workload], list[Strategy]]
    costly: Callable[[Strategy], bool] | None = None

    def choices(self, s: Strategy, w: Workload, *, cheap: bool) -> list[Strategy]:
        """The options; with ``cheap``, without the costly ones (unless all are)."""
        out = self.options(s, w)
        if cheap and self.costly:
            out = [o for o in out if not self.costly(o)] or out
        return out


#: Micro-batch counts tried per (tp, pp) (the smallest divisors of the replica's batch).
_MAX_MICROBATCH_OPTIONS = 24


def _counts_above(s: Strategy, w: Workload, low: int) -> list[int]:
    """Micro-batch counts above ``low`` that divide the replica's batch, ascending (the
    first :data:`_MAX_MICROBATCH_OPTIONS`)."""
    per_replica = replica_batch(w.batch_size, s.dp)
    if per_replica < 1:
        return []
    # (divisors in O(sqrt): a loop over every count is seconds at a 2^24-sample batch)
    return [m for m in divisors(per_replica) if m > low][:_MAX_MICROBATCH_OPTIONS]


def _microbatches(s: Strategy, w: Workload) -> list[Strategy]:
    # Fewer, larger micro-batches first (better kernel efficiency, a shorter 1F1B
    # bubble is not bought with memory), down to one sample per micro-batch.  Without
    # pipelining this is gradient accumulation (one micro-batch in flight).
    # Divisors of the replica's batch, at least pp (a full 1F1B pipeline) and above the
    # default (pp micro-batches; 1 without pipelining), ascending.
    out = [replace(s, microbatches=None)] + [replace(s, microbatches=m)
                                            for m in _counts_above(s, w, s.pp)]
    per_replica = replica_batch(w.batch_size, s.dp)
    if 0 < per_replica < s.pp:
        # A replica's batch smaller than the pipeline (many replicas of a small global
        # batch: 2,048 samples over 256 replicas of 16 stages): no count fills the
        # pipeline, so one sample per micro-batch.  With m <= pp stage k holds
        # min(m, pp - k) micro-batches of batch/m samples, at least as many samples for
        # any smaller m, and the bubble (pp - 1) / (m + pp - 1) is the shortest: the
        # largest count is the fastest and the most memory-saving of them.
        out.append(replace(s, microbatches=per_replica))
    return out


def _zero(s: Strategy, w: Workload) -> list[Strategy]:
    # ZeRO shards over the dp x cp ranks holding the same weights; with pipelining stages
    # 2 and 3 communicate every micro-batch (costlier), which their later positions say.
    return [replace(s, zero=z) for z in range(4)] if s.data_ranks > 1 else [s]


def _sequence_parallel(s: Strategy, w: Workload) -> list[Strategy]:
    # Sequence parallelism moves the same bytes as TP's all-reduce, splits the norm /
    # dropout activations by tp (Korthikanti et al. 2022 Sec. 4.2.2) and is what lets the
    # TP collectives run under the GEMMs (the framework overlap policy; NVIDIA's recipes
    # set both with TP): neither the slower nor the larger choice, so it is the only
    # option wherever it applies.  (Offered after "off" it was never taken where "off"
    # fit: a 144-GPU GB200 what-if for Llama 3 70B started from tp=2 without it, 4.04 s
    # per iteration, where it runs 3.77 s.)
    if s.tp > 1 and sequence_parallel_applies(w, s.tp, s.cp):
        return [replace(s, sp=True)]
    return [s]


def _recompute(s: Strategy, w: Workload) -> list[Strategy]:
    # Selective recomputation reruns only the attention core (cheap, and only useful
    # where the s x s tensors are stored); full recomputation reruns the forward pass
    # (a third more compute) and keeps only layer inputs (Korthikanti et al. Sec. 5);
    # between them partial recomputation of a quarter, half or three quarters of each
    # model chunk's blocks fits a model that nearly fits for a fraction of the cost.
    return list(recompute_ladder(w, s))


def _experts(s: Strategy, w: Workload) -> list[Strategy]:
    # More expert-parallel ranks: fewer experts per GPU.  Carved out of dp first; with
    # tensor parallelism the experts can also fold tp x dp (etp=1), which reaches
    # expert-parallel degrees above dp.
    experts = sorted({layer.experts for layer in w.layers if layer.experts})
    if not experts:
        return [s]
    placed = (with_expert_parallelism(s, e) for e in range(1, s.tp * s.dp + 1)
              if all(x % e == 0 for x in experts))
    return [x for x in placed if x is not None]


def _embedding(s: Strategy, w: Workload) -> list[Strategy]:
    if s.tp == 1 and s.pp == 1 and any(is_table(layer) for layer in w.layers):
        return [s, replace(s, embedding="model")]
    return [s]


#: The memory knobs, tried in the order of :func:`feasible_start` (module docstring).
KNOBS: tuple[Knob, ...] = (
    Knob("sp", _sequence_parallel),
    Knob("microbatches", _microbatches),
    Knob("zero", _zero, costly=lambda o: o.zero == 3),
    Knob("ep", _experts),
    Knob("embedding", _embedding),
    Knob("recompute", _recompute, costly=lambda o: o.recompute == "full"),
)


def model_parallel_shapes(gpus: int, gpus_per_server: int) -> list[tuple[int, int]]:
    """``(tp, pp)`` pairs with ``tp x pp`` dividing ``gpus``, in the module's order.

    Examples
    --------
    >>> model_parallel_shapes(16, 4)[:6]
    [(1, 1), (2, 1), (1, 2), (4, 1), (2, 2), (1, 4)]
    """
    divs = divisors(gpus)
    out = []
    for mp in divs:
        tps = [t for t in divs if mp % t == 0]
        inside = sorted((t for t in tps if t <= gpus_per_server), reverse=True)
        outside = sorted(t for t in tps if t > gpus_per_server)
        out += [(t, mp // t) for t in inside + outside]
    return out


def _variants(base: Strategy, w: Workload, knobs: tuple[Knob, ...], cheap: bool
              ) -> list[Strategy]:
    """Every knob combination of ``base``, cheapest (smallest position sum) first."""
    axes: list[list[Strategy]] = []
    for knob in knobs:
        axes.append(knob.choices(base, w, cheap=cheap) or [base])
    combos = sorted(itertools.product(*(range(len(a)) for a in axes)),
                    key=lambda idx: (sum(idx), idx))
    out = []
    for idx in combos:
        s = base
        for knob_i, pos in enumerate(idx):
            alt = axes[knob_i][pos]
            # Apply this knob's change (the fields where alt differs from base).
            changes = {k: getattr(alt, k) for k in alt.__dataclass_fields__
                       if getattr(alt, k) != getattr(base, k)}
            try:
                s = replace(s, **changes)
            except InvalidSpecError:
                s = None
                break
        if s is not None:
            out.append(s)
    return out


def _most_saving(base: Strategy, w: Workload, knobs: tuple[Knob, ...], cheap: bool
                 ) -> Strategy | None:
    s = base
    for knob in knobs:
        choices = knob.choices(s, w, cheap=cheap)
        opts = [o for o in choices if _applicable(w, o)]
        if not opts and not _applicable(w, s):
            # Not applicable yet because of a later knob (the default pp micro-batches
            # of a replica batch smaller than pp): this knob's most saving option as it
            # is (skipping it would leave sequence parallelism off).
            opts = choices
        if opts:
            s = opts[-1]
    return s if _applicable(w, s) else None


def _first_fit(base: Strategy, w: Workload, knobs: tuple[Knob, ...], cheap: bool,
               fits: Callable[[Strategy], bool]) -> Strategy | None:
    """The cheapest knob combination of ``base``'s shape that fits (``None``: none does,
    known after one check of the most memory-saving combination)."""
    saving = _most_saving(base, w, knobs, cheap)
    if saving is None or not fits(saving):
        return None
    for s in _variants(base, w, knobs, cheap):
        if _applicable(w, s) and fits(s):
            return s
    return saving  # pragma: no cover - the most saving one is a variant


def _shape(w: Workload, gpus: int, tp: int, pp: int) -> Strategy:
    """The bare strategy of one ``(tp, pp)`` on ``gpus`` GPUs, before the knobs; with the
    weights kept in FP8 where the workload's precision allows it, as NVIDIA's FP8 recipes
    always keep them (strategy ``fp8_params``): less memory and half the parameter
    gathers, never slower."""
    return Strategy(dp=gpus // (tp * pp), tp=tp, pp=pp, fp8_params=keeps_fp8_weights(w))


def _applicable(w: Workload, s: Strategy) -> bool:
    try:
        check_applicable(w, s)
    except InvalidSpecError:
        return False
    return True


def feasible_start(workload: Workload, gpus: int, hardware: Hardware | str, *,
                   gpus_per_server: int | None = None, knobs: tuple[Knob, ...] = KNOBS,
                   preferred: Strategy | None = None,
                   passes: tuple[bool, ...] = (True, False)) -> Candidate:
    """The first strategy on ``gpus`` GPUs that fits in memory (module docstring order).

    Parameters
    ----------
    workload : Workload
    gpus : int
        GPUs of the job (``dp x tp x pp x cp``).
    hardware : Hardware or str
        GPU type (HBM capacity; ``gpus_per_server`` unless given).
    gpus_per_server : int, optional
        Size of the scale-up domain (default: the hardware's).
    knobs : tuple of Knob, optional
        The memory knobs (default :data:`KNOBS`).
    preferred : Strategy, optional
        Returned as it is when it uses ``gpus`` GPUs, applies and fits (a user's strategy).
    passes : tuple of bool, optional
        The enumeration passes, ``True`` = without the costly knob options (default: that
        pass, then every option).  ``(False,)`` gives the least model parallelism with any
        knob (e.g. ZeRO-3 pure data parallelism), which ``codesign optimize`` times
        against the default start.

    Returns
    -------
    Candidate
        The start, in the default placement order.

    Raises
    ------
    InfeasibleError
        Nothing fits; the message is the closest attempt's memory breakdown and its
        shortfall in GiB.  When nothing even applies (a global batch too small for the
        GPUs, or that no data-parallel degree divides), the message says why in samples
        per replica, heads and blocks, and names a batch size (and a GPU count) that
        applies.
    InvalidSpecError
        ``gpus`` is not a positive integer.

    Examples
    --------
    >>> from codesign.workloads import get_workload
    >>> str(feasible_start(get_workload("llama3-70b"), 1024, "H100").strategy)
    'dp=256,tp=4,pp=1,microbatches=8,zero=2,sp=true'
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise invalid("gpus", gpus, "a positive integer")
    hw = get_hardware(hardware)
    per_server = gpus_per_server or hw.gpus_per_server
    if preferred is not None and preferred.gpus == gpus and _applicable(workload, preferred) \
            and memory_per_gpu(workload, preferred, hw,
                               Placement.for_strategy(preferred, per_server)).fits:
        return Candidate(preferred)
    closest: MemoryBreakdown | None = None

    def fits(s: Strategy) -> bool:
        nonlocal closest
        # Placement matters for tables placed on servers (which GPU holds which table).
        m = memory_per_gpu(workload, s, hw, Placement.for_strategy(s, per_server))
        if closest is None or m.total_bytes - m.capacity_bytes < \
                closest.total_bytes - closest.capacity_bytes:
            closest = m
        return m.fits

    # Two passes: the cheap knobs over every shape (more model parallelism before full
    # recomputation or ZeRO-3, Megatron-LM's practice), then every knob.
    for cheap in passes:
        for tp, pp in model_parallel_shapes(gpus, per_server):
            s = _first_fit(_shape(workload, gpus, tp, pp), workload, knobs, cheap, fits)
            if s is not None:
                return Candidate(s)
    if closest is None:
        raise InfeasibleError(_why_nothing_applies(workload, gpus, per_server))
    short = (closest.total_bytes - closest.capacity_bytes) / _GIB
    raise InfeasibleError(f"no strategy of {workload.name} fits in {hw.name} memory on {gpus} "
                          f"GPUs; closest: {closest.message()} (short by {short:.1f} GiB)",
                          reason="memory")



#: The placement order that keeps a data-parallel replica's pipeline stages on
#: neighbouring GPUs (TP fastest, then the stages, then the replicas): the order of the
#: pipelined candidates of :func:`shape_candidates`.
PIPELINE_ORDER = ("tp", "pp", "dp")


def shape_candidates(workload: Workload, gpus: int, hardware: Hardware | str, *,
                     gpus_per_server: int | None = None, limit: int | None = None
                     ) -> list[Candidate]:
    """One strategy per model-parallel shape that fits: what a search screens first.

    A search that walks from the feasible start by local moves reaches a deeper pipeline
    or a wider tensor-parallel group only through several moves whose intermediate steps
    are slower (a pipeline with too few micro-batches has a long bubble; a new shape
    needs other memory knobs), so at the dozens of evaluations a sweep affords per fabric
    it stays near its start: 16-54 % slower than the best strategy a 256-evaluation search
    finds for Llama 3 70B on 1,024 H100 over 100-400 Gb/s fabrics
    (``experiments/benchmarks/bench_strategy_search.py``).  The shapes themselves are few
    (divisor pairs), so the search times each once, from these candidates, and walks on
    from the fastest (:func:`search.per_fabric.best_strategies`).

    For every ``(tp, pp)`` of :func:`model_parallel_shapes` with ``tp`` inside the
    scale-up domain (``tp`` beyond it stays reachable by the search's moves), in that
    order: the cheapest knob combination that fits (:func:`feasible_start`'s per-shape
    rule); with a pipeline, one sample per micro-batch -- the shortest 1F1B bubble and the
    fewest in-flight activations, the micro-batch size of Megatron-LM's large runs
    (Narayanan et al. SC'21, Table 1: 1 or 2) -- made to fit by :func:`fit_to_memory`,
    with a replica's stages on neighbouring GPUs (:data:`PIPELINE_ORDER`: TP inside the
    server, the stages next, the data-parallel replicas strided; the placement of nearly
    every pipelined strategy the long searches above found best; the search's ``order``
    move reaches the others).  Shapes where nothing fits are skipped after one memory
    check; nothing is timed here.

    A pipeline whose replicas get fewer samples than it has stages is starved (at least
    half bubble, and it cannot be interleaved).  That happens when the GPUs outgrow the
    global batch: Llama 3 405B's 2,048 sequences on 32,768 GPUs leave every
    tensor-parallel-8 pipeline ``pp / 2`` samples per replica.  Context parallelism
    feeds it, as Llama 3 (Sec. 3.3.2) and Megatron-LM split long sequences: each
    sequence over ``cp`` GPUs, so ``dp / cp`` replicas take ``cp`` times the samples.
    For each such shape with the widest ``tp`` the workload allows in the scale-up domain
    (a DGX's 8 GPUs; 8 of an NVL72 rack's 72 for Llama 3), the fewest ``cp`` ways
    that feed it are screened too (after every shape, within ``limit``), interleaved
    when its micro-batches are a multiple of its stages.  That what-if (``codesign whatif
    --gpus 32768 --gpu H100 --workload llama3-405b --budget 3e8``) found 5.72 s per
    iteration without them (MFU 23.7 %, GPipe with ``cp=2`` reached by the chain) and
    3.52 s with them (38.6 %, ``dp=32,tp=8,pp=32,cp=4``, interleaved).

    Long sequences fill the memory with activations instead: a shape with the widest
    ``tp`` whose first fit recomputes (or offloads) is screened a second time with its
    sequences split over the fewest ``cp`` GPUs that fit without either
    (:func:`_context_split`), right after it.  Llama 3 70B with 128k-token sequences (128
    of them) on 1,024 H100 (``codesign whatif --gpus 1024 --gpu H100 --workload
    llama3-70b --option seq_len=131072 --option batch_size=128 --budget 2e7``) found
    41.9 s per iteration without them (``dp=128,tp=8``, full recomputation) and 35.9 s
    with them (``dp=2,tp=8,pp=8,cp=8``, interleaved, from the screened ``cp=8`` shapes;
    ``dp=16,tp=8,cp=8,microbatches=8`` is 33.0 s on an ideal fabric).

    Parameters
    ----------
    workload : Workload
    gpus : int
        GPUs of the job.
    hardware : Hardware or str
    gpus_per_server : int, optional
        Size of the scale-up domain (default: the hardware's).
    limit : int, optional
        At most this many candidates (the first in the order above).

    Returns
    -------
    list of Candidate
        Distinct candidates, possibly empty.

    Examples
    --------
    Llama 3 70B on 1,024 H100: ZeRO-3 data parallelism first, then ever more model
    parallelism, pipelines with one sample per micro-batch (2,048 samples)

    >>> from codesign.workloads import get_workload
    >>> cands = shape_candidates(get_workload("llama3-70b"), 1024, "H100")
    >>> len(cands), str(cands[10].strategy)
    (32, 'dp=64,tp=8,pp=2,microbatches=32,zero=1,sp=true')
    >>> str(cands[11].strategy)
    'dp=64,tp=4,pp=4,microbatches=32,zero=1,sp=true'
    """
    check_int("gpus", gpus, 1)
    if limit is not None:
        check_int("limit", limit, 0)
    hw = get_hardware(hardware)
    per_server = gpus_per_server or hw.gpus_per_server

    def fits(s: Strategy) -> bool:
        return memory_per_gpu(workload, s, hw, Placement.for_strategy(s, per_server)).fits

    out: dict[Candidate, None] = {}
    starved: list[Strategy] = []   # pipelines fed by context parallelism, screened last
    shapes = model_parallel_shapes(gpus, per_server)
    # The widest tensor parallelism the workload allows inside the domain: all of a
    # DGX's 8 GPUs, but 8 of an NVL72 rack's 72 for a model of 8 KV heads.
    widest = max((t for t in {t for t, _ in shapes if t <= per_server}
                  if _structurally_applicable(workload, t, 1)), default=0)
    for tp, pp in shapes:
        if limit is not None and len(out) >= limit:
            break
        if tp > per_server or not _structurally_applicable(workload, tp, pp):
            continue
        base = _shape(workload, gpus, tp, pp)
        s = next((x for cheap in (True, False)
                  if (x := _first_fit(base, workload, KNOBS, cheap, fits)) is not None), None)
        if s is None:
            continue
        fits_of_shape = [s]
        if tp == widest and (s.recompute != "none" or s.offload_layers):
            split = _context_split(base, workload, fits)
            if split is not None:
                fits_of_shape.append(split)
        for s in fits_of_shape:
            if s.pp == 1:
                out[Candidate(s)] = None
                continue
            per_replica = replica_batch(workload.batch_size, s.dp)
            if per_replica > s.m:
                one = replace(s, microbatches=per_replica)
                s = one if _applicable(workload, one) else s
            out[fit_to_memory(Candidate(s, PIPELINE_ORDER), workload, hw,
                              gpus_per_server=per_server)] = None
            if tp == widest and s.cp == 1 and 0 < per_replica < pp:
                fed = _fed_pipeline(s, per_replica, workload)
                if fed is not None:
                    starved.append(fed)
    for s in starved:
        if limit is not None and len(out) >= limit:
            break
        out[fit_to_memory(Candidate(s, PIPELINE_ORDER), workload, hw,
                          gpus_per_server=per_server)] = None
    return list(out)


#: Context-parallel degrees :func:`_context_split` tries (Llama 3 trained 128k-token
#: sequences with cp = 16, Grattafiori et al. 2024 Table 4).
_CONTEXT_SPLITS = (2, 4, 8, 16, 32)


def _context_split(base: Strategy, w: Workload, fits: Callable[[Strategy], bool]
                   ) -> Strategy | None:
    """A shape whose first fit needs recomputation (or offloading) with its sequences
    split over ``cp`` GPUs instead: the fewest ways (of :data:`_CONTEXT_SPLITS`, dividing
    ``dp``) whose cheapest knob combination fits without either -- each GPU keeps the
    activations of ``s / cp`` tokens, so long sequences fit without rerunning the
    forward, the ring exchange of keys and values running under the attention (Llama 3,
    Sec. 3.3.2; Megatron-LM's context parallelism).  ``None`` when no split does (or the
    workload has no attention, or a sequence that does not split into ``2 cp`` chunks)."""
    for cp in _CONTEXT_SPLITS:
        if base.dp % cp:
            continue
        split = replace(base, dp=base.dp // cp, cp=cp)
        s = _first_fit(split, w, KNOBS, True, fits)
        if s is not None and s.recompute == "none" and not s.offload_layers:
            return s
    return None


def _fed_pipeline(s: Strategy, per_replica: int, workload: Workload) -> Strategy | None:
    """A starved pipeline (fewer samples per replica than stages) fed by context
    parallelism: the fewest ``cp`` ways (dividing ``dp``) that give every replica at least
    ``pp`` samples -- each sequence split over ``cp`` GPUs, so ``dp / cp`` replicas take
    ``cp`` times the samples -- one sample per micro-batch, interleaved (two model chunks
    per stage) when the micro-batches are a multiple of the stages; ``None`` if no such
    ``cp`` applies."""
    for cp in range(2, s.dp + 1):
        if s.dp % cp or per_replica * cp < s.pp:
            continue
        fed = replace(s, dp=s.dp // cp, cp=cp, microbatches=per_replica * cp)
        if fed.m % fed.pp == 0:
            fed = replace(fed, schedule="interleaved", vpp=2)
        return fed if _applicable(workload, fed) else None
    return None


def _structurally_applicable(w: Workload, tp: int, pp: int) -> bool:
    """Whether ``tp x pp`` passes the applicability rules other than the batch's (tp
    divides the heads, pp at most the layers): checked with one micro-batch of one
    sample per replica."""
    return _applicable(w.with_batch(1), Strategy(tp=tp, pp=pp, microbatches=1))


def _why_nothing_applies(w: Workload, gpus: int, per_server: int) -> str:
    """The message of :func:`feasible_start` when no strategy applies, in the user's
    terms: a data-parallel replica takes whole samples of the global batch, so ``dp =
    gpus / (tp x pp)`` must divide it; what limits ``tp`` and ``pp``; and the nearest
    batch size (and GPU count) with which a strategy applies."""
    batch = w.batch_size
    head = f"no strategy of {w.name} applies on {gpus} GPUs: "
    shapes = [(tp, pp) for tp, pp in model_parallel_shapes(gpus, per_server)
              if _structurally_applicable(w, tp, pp)]
    dps = sorted({gpus // (tp * pp) for tp, pp in shapes})
    if not dps or any(batch % d == 0 for d in dps):   # pragma: no cover - custom knobs
        return head + (f"no micro-batch count of the knobs divides the global batch of "
                       f"{batch} samples over the data-parallel replicas")
    tp, pp = max(shapes, key=lambda s: (s[0] * s[1], s[0]))
    limits = []
    heads = _head_counts(w)
    if heads:
        limits.append("tp divides the " + " and ".join(f"{n} {what}" for n, what in heads))
    # pp is at most the layer count (one layer a stage, split=balanced), which for a
    # transformer is not its block count: say what the layers are.
    dotted = [layer.name for layer in w.layers if "." in layer.name]
    blocks = len({name.split(".", 1)[0] for name in dotted})
    parts = ""
    if blocks and len(dotted) % blocks == 0:
        other = len(w.layers) - len(dotted)
        parts = (f": {blocks} blocks of {len(dotted) // blocks} layers"
                 + (f" and {other} more" if other else ""))
    limits.append(f"pp at most {len(w.layers)}, one layer a stage{parts}")
    why = f" ({'; '.join(limits)})"
    if dps[0] > batch:
        reason = (f"every data-parallel replica takes whole samples of the global batch "
                  f"({batch}), but even the most model parallelism that applies, tp={tp} x "
                  f"pp={pp}{why}, leaves dp = {gpus} / {tp * pp} = {dps[0]} replicas")
    else:
        shown = ", ".join(map(str, dps[:8])) + (", ..." if len(dps) > 8 else "")
        reason = (f"every data-parallel replica takes whole samples of the global batch "
                  f"({batch}), but no data-parallel degree dp = GPUs / (tp x pp) that applies"
                  f"{why} divides it (dp = {shown})")
    # The smallest global batch at least this one that one of these dp divides.
    d = min(dps, key=lambda d: (-(-batch // d) * d, d))
    new_batch = -(-batch // d) * d
    fix = f"; one applies with a global batch of {new_batch} (--option batch_size={new_batch})"
    fewer = _fewer_gpus(w, gpus, per_server)
    if fewer:
        fix += f" or on {fewer} GPUs (the most below {gpus} on which one applies)"
    return head + reason + fix


def _head_counts(w: Workload) -> list[tuple[int, str]]:
    """The attention head counts that bound tensor parallelism, with their names."""
    hp = w.hyperparameters
    return [(hp[k], what) for k, what in (("heads", "attention heads"),
                                          ("kv_heads", "key/value heads"))
            if isinstance(hp.get(k), int)]


def _fewer_gpus(w: Workload, gpus: int, per_server: int) -> int | None:
    """The largest GPU count below ``gpus`` (a multiple of ``per_server``) on which some
    ``tp x pp`` leaves a dp dividing the batch, or None (tp is bounded by the heads)."""
    heads = [n for n, _ in _head_counts(w)]
    if not heads:
        return None
    tps = [t for t in range(1, min(heads) + 1) if _structurally_applicable(w, t, 1)]
    pps = [p for p in range(1, len(w.layers) + 1) if _structurally_applicable(w, 1, p)]
    batch = w.batch_size
    small = [d for d in range(1, int(batch ** 0.5) + 1) if batch % d == 0]
    dps = small + [batch // d for d in small]
    best = 0
    for t in tps:
        for p in pps:
            for d in dps:
                g = t * p * d
                if best < g < gpus and g % per_server == 0:
                    best = g
    return best or None


def _repair_options(s: Strategy, w: Workload, hw: Hardware | None = None
                    ) -> tuple[list[Strategy], list[Strategy]]:
    """The variants :func:`fit_to_memory` may use: more micro-batches (divisors of the
    replica's batch above ``s``'s count, fewest first) and recomputation at or above
    ``s``'s level of the ladder (cheapest first) -- never less of either, so a proposal
    that asked for fewer micro-batches or less recomputation is not undone.  On hardware
    with a host link, activation offloading (:func:`_offload_levels`) joins the
    recomputation levels in order of their estimated time (:func:`_merge_by_cost`)."""
    micro = [s] + [replace(s, microbatches=m) for m in _counts_above(s, w, s.m)]
    ladder = list(recompute_ladder(w, s))
    here = [i for i, x in enumerate(ladder) if (x.recompute, x.recompute_layers)
            == (s.recompute, s.recompute_layers)]
    levels = ladder[here[0] + 1:] if here else ladder
    if hw is not None and s.recompute == "none":
        levels = _merge_by_cost(levels, _offload_levels(s, w, hw), s, w, hw)
    return micro, [s] + levels


def _offload_levels(s: Strategy, w: Workload, hw: Hardware) -> list[Strategy]:
    """Activation offloading of a quarter, half and three quarters of each model chunk's
    blocks and of all but one (Megatron-core's bound; NVIDIA's GB200 recipe for Llama 3
    70B offloads 40 of 80), more than ``s`` offloads; none on hardware without a host
    link and memory in its catalog entry, or with recomputation."""
    if not (hw.host_link_Bps and hw.host_memory_bytes) or s.recompute != "none":
        return []
    names = [layer.name for layer in w.layers]
    try:
        blocks = min(map(len, chunk_blocks(names, s, stage_bounds(w, s))))
    except InvalidSpecError:
        return []
    counts = set(partial_recompute_counts(w, s)) | ({blocks - 1} if blocks > 1 else set())
    return [replace(s, offload_layers=n) for n in sorted(counts)
            if 0 < n < blocks and n > (s.offload_layers or 0)]


def _merge_by_cost(levels: list[Strategy], offload: list[Strategy], s: Strategy,
                   w: Workload, hw: Hardware) -> list[Strategy]:
    """Recomputation and offloading levels in order of their estimated time per model
    chunk and micro-batch, from one transformer block of ``s``'s first stage: a
    recomputed block reruns its forward; an offloaded block exposes what its copies
    (saved bytes over the host link) outlast the neighbouring block's forward and
    backward passes (the iteration model's rule, :mod:`codesign.workloads.demand`).
    Selective recomputation (the attention core only) keeps its place ahead; ties keep
    recomputation first, the ladder's own order among its levels."""
    if not offload:
        return levels
    from codesign.workloads.compute import layer_time, resolve_precision
    from codesign.workloads.demand import offload_exposed_s
    from codesign.workloads.sharding import shard_layer

    names = [layer.name for layer in w.layers]
    stages = stage_bounds(w, s)
    chunks = chunk_blocks(names, s, stages)
    if not chunks[0]:
        return levels
    b = w.batch_size / (s.dp * s.m)
    dtype = resolve_precision(w, hw, s.precision)
    # sharded at the precision it runs in, as the memory and iteration models shard it
    layer_s = layer_strategies(names, s, stages, precision=dtype)
    fwd = copy_cost = 0.0
    for i in chunks[0][0]:                        # the first stage's first block
        shard = shard_layer(w.layers[i], layer_s[i])
        t = layer_time(shard.local, hw, b, dtype=dtype)
        fwd += t.fwd_s
        copy_cost += sum(offload_exposed_s(shard, b, hw, t.fwd_s, t.bwd_s))
    chunk = min(map(len, chunks))

    def cost(x: Strategy) -> tuple[float, int]:
        if x.offload_layers:
            return x.offload_layers * copy_cost, 1
        if x.recompute == "full":
            return min(x.recompute_layers or chunk, chunk) * fwd, 0
        return 0.0, 0

    return sorted(levels + offload, key=cost)


def fit_to_memory(candidate: Candidate, workload: Workload, hardware: Hardware | str, *,
                  gpus_per_server: int | None = None) -> Candidate:
    """A search proposal made to fit in memory with the cheapest change that does it.

    A local move of the strategy search (:func:`search.strategy.space.propose`) often
    leaves HBM: a lower ZeRO stage keeps every gradient, fewer micro-batches keep more
    activations.  Timed as it is, such a proposal is infeasible (an infinite time, never
    accepted), and the memory it needs -- full recomputation, more micro-batches -- is a
    second move the search takes only by chance: the move that helps on a slow network
    (ZeRO-2 -> 1: gradients reduced once an iteration instead of every micro-batch) is
    two moves away and its first half does not fit.  This applies the memory knobs of the
    feasible start (:data:`KNOBS`: more micro-batches, more recomputation; never the
    proposed change itself, never less of either) in the same cheapest-first order
    (smallest sum of positions) and returns the first variant that fits; ``candidate``
    itself when it fits or when nothing does (the evaluator then refuses it).

    Parameters
    ----------
    candidate : Candidate
    workload : Workload
    hardware : Hardware or str
    gpus_per_server : int, optional
        Size of the scale-up domain (default: the hardware's).

    Returns
    -------
    Candidate
        The same placement with the repaired strategy.

    Examples
    --------
    ZeRO-1 keeps every gradient of Llama 3 70B on 1,024 H100: that fits only with the
    activations of three quarters of the blocks out of HBM (more micro-batches do not make
    it fit first) -- offloaded, since a block's copies over PCIe Gen5 cost less than
    rerunning its forward; a GPU without a host link recomputes them:

    >>> from dataclasses import replace as _r
    >>> from codesign.workloads import get_workload
    >>> w = get_workload("llama3-70b")
    >>> c = Candidate(Strategy(dp=256, tp=4, microbatches=8, zero=1, sp=True))
    >>> str(fit_to_memory(c, w, "H100").strategy)
    'dp=256,tp=4,pp=1,microbatches=8,zero=1,sp=true,offload_layers=60'
    >>> no_link = _r(get_hardware("H100"), host_link_Bps=None)
    >>> str(fit_to_memory(c, w, no_link).strategy)
    'dp=256,tp=4,pp=1,microbatches=8,zero=1,sp=true,recompute=full,recompute_layers=60'
    """
    hw = get_hardware(hardware)
    per = gpus_per_server or hw.gpus_per_server

    def fits(s: Strategy) -> bool:
        if not _applicable(workload, s):
            return False
        return memory_per_gpu(workload, s, hw,
                              replace(candidate, strategy=s).placement(per)).fits

    base = candidate.strategy
    if fits(base):
        return candidate
    micro, levels = _repair_options(base, workload, hw)

    def combine(mb: Strategy, level: Strategy) -> Strategy:
        return replace(mb, recompute=level.recompute, recompute_layers=level.recompute_layers,
                       recompute_modules=level.recompute_modules,
                       offload_layers=level.offload_layers)

    # The most memory-saving variant first: if even it does not fit, nothing will.
    if not fits(combine(micro[-1], levels[-1])):
        return candidate
    for i, j in sorted(itertools.product(range(len(micro)), range(len(levels))),
                       key=lambda ij: (sum(ij), ij)):
        s = combine(micro[i], levels[j])
        if fits(s):
            return replace(candidate, strategy=s)
    return candidate  # pragma: no cover - the most saving variant fits
