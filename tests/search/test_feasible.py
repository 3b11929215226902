"""The feasible start: least model parallelism that fits, checked against brute force."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from codesign.workloads import get_hardware, get_workload
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.strategy import Strategy, check_applicable
from search.strategy.feasible import feasible_start, model_parallel_shapes


def _fits(w, s, hw) -> bool:
    try:
        check_applicable(w, s)
    except Exception:  # noqa: BLE001 - inapplicable
        return False
    return memory_per_gpu(w, s, hw).fits


def test_shapes_are_ordered_by_model_parallelism_tp_inside_the_server_first():
    shapes = model_parallel_shapes(64, 8)
    mp = [t * p for t, p in shapes]
    assert mp == sorted(mp)
    assert shapes[:4] == [(1, 1), (2, 1), (1, 2), (4, 1)]
    # at mp=16 on 8-GPU servers: tp=8 (inside) before tp=16 (outside)
    sixteen = [s for s in shapes if s[0] * s[1] == 16]
    assert sixteen[0] == (8, 2) and sixteen[-1] == (16, 1)
    assert len(set(shapes)) == len(shapes)


@pytest.mark.parametrize("name, gpu, gpus", [
    ("llama3-70b", "H100", 1024), ("mixtral-8x7b", "H100", 1024), ("resnet50", "A100-80", 64),
    ("dlrm", "A100-80", 128), ("gpt3-175b", "A100-80", 256),
    # a replica's batch below pp: 2,048 samples over 32,768 GPUs (tp <= 8) leave every
    # replica fewer samples than pipeline stages (found nothing before: micro-batches >= pp)
    ("llama3-405b", "H100", 32768)])
def test_start_fits_and_no_smaller_model_parallelism_does(name, gpu, gpus):
    w, hw = get_workload(name), get_hardware(gpu)
    s = feasible_start(w, gpus, hw).strategy
    assert s.gpus == gpus and _fits(w, s, hw)
    # brute force: no (tp, pp) of smaller tp*pp fits with any micro-batch count / ZeRO / ep
    mp = s.tp * s.pp
    for tp, pp in model_parallel_shapes(gpus, hw.gpus_per_server):
        if tp * pp >= mp:
            break
        dp = gpus // (tp * pp)
        per = w.batch_size // dp if w.batch_size % dp == 0 else 0
        for m in [None] + [v for v in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
                           if per and v <= per]:
            for zero in range(4):
                for ep in [e for e in (1, 2, 4, 8) if dp % e == 0]:
                    try:
                        cand = Strategy(dp=dp, tp=tp, pp=pp, microbatches=m, zero=zero, ep=ep)
                    except Exception:  # noqa: BLE001
                        continue
                    assert not _fits(w, cand, hw), cand


def test_pure_data_parallelism_when_it_fits_and_a_preferred_strategy_is_kept():
    w, hw = get_workload("resnet50"), get_hardware("A100-80")
    assert str(feasible_start(w, 1024, hw).strategy) == "dp=1024,tp=1,pp=1"
    # 64 GPUs: 1024 samples per GPU do not fit; gradient accumulation (2 micro-batches)
    # does, before any model parallelism
    assert str(feasible_start(w, 64, hw).strategy) == "dp=64,tp=1,pp=1,microbatches=2"
    pref = Strategy(dp=512, tp=2)
    assert feasible_start(w, 1024, hw, preferred=pref).strategy == pref
    # a preferred strategy that does not fit is replaced
    big = get_workload("llama3-70b")
    assert feasible_start(big, 1024, "H100", preferred=Strategy(dp=1024)).strategy.tp > 1


def test_infeasible_names_the_closest_attempt_and_its_shortfall():
    with pytest.raises(InfeasibleError, match=r"closest: strategy .* needs .* GiB .*short by "
                                              r"[0-9.]+ GiB"):
        feasible_start(get_workload("llama3-405b"), 16, "H100")


def test_a_replica_batch_smaller_than_the_pipeline_runs_one_sample_per_micro_batch():
    # The whatif of Llama 3 405B on 32,768 H100 said "no strategy applies" although
    # dp=256,tp=8,pp=16,microbatches=8 runs: no count >= pp divides a replica's batch.
    w, hw = get_workload("llama3-405b"), get_hardware("H100")
    for gpus, batch in ((32768, 2048), (98304, 6144)):
        wb = w.with_batch(batch)
        s = feasible_start(wb, gpus, hw).strategy
        assert s.gpus == gpus and _fits(wb, s, hw), s
        assert s.m == batch // s.dp < s.pp and s.sp, s   # one sample each; sp kept on


def _brute_force(w, gpus, hw):
    """A strategy of the feasible start's space (cp=1, 1F1B; every tp x pp x dp = gpus,
    every micro-batch count, ZeRO stage, sequence parallelism and recomputation rung)
    that applies and fits, or None -- found without the start's order or shortcuts."""
    from codesign.workloads.strategy import recompute_ladder

    for tp in (t for t in range(1, gpus + 1) if gpus % t == 0):
        for pp in (p for p in range(1, gpus // tp + 1) if (gpus // tp) % p == 0):
            dp = gpus // (tp * pp)
            if w.batch_size % dp:
                continue
            per = w.batch_size // dp
            for m in (c for c in range(1, per + 1) if per % c == 0):
                for zero, sp in itertools.product(range(4), (False, True)):
                    try:
                        base = Strategy(dp=dp, tp=tp, pp=pp, microbatches=m, zero=zero, sp=sp)
                    except InvalidSpecError:
                        continue
                    for s in recompute_ladder(w, base):
                        if _fits(w, s, hw):
                            return s
    return None


@pytest.mark.parametrize("name, gpu, gpus, batch", [
    ("llama3-8b", "A100-40", 64, 2),      # replica batch 1 < pp: applies only with m < pp
    ("llama3-8b", "A100-40", 64, 16),
    ("llama3-8b", "A100-40", 24, 3),      # pp = 3 x 2^k
    ("llama3-8b", "A100-40", 8, 1),
    ("llama3-8b", "A100-40", 1024, 1),    # nothing applies: dp >= 2 > the batch
    ("llama3-8b", "A100-40", 1024, 5),    # nothing applies: no dp divides 5
    ("llama3-70b", "A100-40", 8, 2),      # applies, nothing fits in memory
    ("llama3-70b", "A100-40", 32, 4),
])
def test_a_start_exists_iff_brute_force_finds_a_strategy(name, gpu, gpus, batch):
    w, hw = get_workload(name).with_batch(batch), get_hardware(gpu)
    oracle = _brute_force(w, gpus, hw)
    try:
        start = feasible_start(w, gpus, hw).strategy
    except InfeasibleError as exc:
        assert oracle is None, (oracle, str(exc))
        return
    assert oracle is not None, start
    assert start.gpus == gpus and _fits(w, start, hw), start


def test_nothing_applies_says_why_in_blocks_and_replicas_and_what_to_change():
    w = get_workload("llama3-405b")
    # too many replicas: even tp=8 x pp=128 leaves 32 replicas for 16 samples
    with pytest.raises(InfeasibleError) as info:
        feasible_start(w.with_batch(16), 32768, "H100")
    msg = str(info.value)
    assert "global batch (16)" in msg and "tp=8 x pp=128" in msg and "32 replicas" in msg
    assert "8 key/value heads" in msg and "126 blocks of 2 layers and 2 more" in msg
    assert "--option batch_size=32" in msg and info.value.reason == "other"
    assert "(batch 16, 254 layers)" not in msg
    # divisibility: 2, 4, ... replicas, none divides 5 samples; 6 would do
    with pytest.raises(InfeasibleError, match=r"no data-parallel degree .* divides it "
                                              r"\(dp = 2, 4, .*batch_size=6\)"):
        feasible_start(get_workload("llama3-8b").with_batch(5), 1024, "H100")
    # the suggestions hold: the batch applies, and so do the fewer GPUs
    s = feasible_start(w.with_batch(32), 32768, "H100").strategy
    assert s.dp == 32
    fewer = int(msg.split(" or on ")[1].split(" GPUs")[0])
    assert fewer < 32768 and fewer % 8 == 0
    assert feasible_start(w.with_batch(16), fewer, "H100").strategy.gpus == fewer


# ---------------------------------------------------------------- fit_to_memory
def _ladder_index(w, s):
    from codesign.workloads.strategy import recompute_ladder

    return [(x.recompute, x.recompute_layers) for x in recompute_ladder(w, s)].index(
        (s.recompute, s.recompute_layers))


def test_fit_to_memory_adds_the_cheapest_memory_and_keeps_the_move():
    import itertools
    from dataclasses import replace

    from search.strategy.feasible import _repair_options, fit_to_memory
    from search.strategy.space import Candidate

    w, hw = get_workload("llama3-70b"), get_hardware("H100")
    fitting = Candidate(Strategy(dp=256, tp=4, microbatches=8, zero=2, sp=True))
    assert fit_to_memory(fitting, w, hw) is fitting          # fits: unchanged
    zero1 = Candidate(Strategy(dp=256, tp=4, microbatches=8, zero=1, sp=True))
    assert not memory_per_gpu(w, zero1.strategy, hw, zero1.placement(8)).fits
    fixed = fit_to_memory(zero1, w, hw).strategy
    assert memory_per_gpu(w, fixed, hw, zero1.placement(8)).fits
    # The proposed change stays; only micro-batches and recomputation grow.
    for k in ("dp", "tp", "pp", "cp", "zero", "sp", "schedule", "vpp"):
        assert getattr(fixed, k) == getattr(zero1.strategy, k), k
    assert fixed.m >= zero1.strategy.m
    # More memory saved: recomputation up the ladder, or (H100's PCIe link copies a
    # block's activations in less time than its forward, which recomputation reruns)
    # activation offloading.
    assert (_ladder_index(w, fixed) > _ladder_index(w, zero1.strategy)
            or fixed.offload_layers is not None)
    # Brute force over the same options: nothing with a smaller sum of positions fits.
    micro, levels = _repair_options(zero1.strategy, w, hw)

    def level(x):
        return x.recompute, x.recompute_layers, x.offload_layers

    pos = next((i + j) for i, j in itertools.product(range(len(micro)), range(len(levels)))
               if micro[i].m == fixed.m and level(levels[j]) == level(fixed))
    for i, j in itertools.product(range(len(micro)), range(len(levels))):
        if i + j < pos:
            s = replace(micro[i], recompute=levels[j].recompute,
                        recompute_layers=levels[j].recompute_layers,
                        offload_layers=levels[j].offload_layers)
            assert not memory_per_gpu(w, s, hw, zero1.placement(8)).fits, (i, j)


def test_fit_to_memory_never_undoes_a_move_and_gives_up_when_nothing_fits():
    import numpy as np

    from search.strategy.feasible import fit_to_memory
    from search.strategy.space import Candidate, propose

    w, hw = get_workload("llama3-70b"), get_hardware("H100")
    start = feasible_start(w, 1024, hw)
    rng = np.random.default_rng(3)
    for _ in range(40):
        p = propose(start, w, rng, gpus_per_server=8)
        r = fit_to_memory(p, w, hw)
        assert r.order == p.order and r.strategy.m >= p.strategy.m
        assert _ladder_index(w, r.strategy) >= _ladder_index(w, p.strategy)
        fits = memory_per_gpu(w, r.strategy, hw, r.placement(8)).fits
        assert fits or r == p     # repaired to fit, or returned as drawn
    # Pure data parallelism of a 70B model fits with no recomputation or micro-batching.
    dp = Candidate(Strategy(dp=1024))
    assert fit_to_memory(dp, w, hw) == dp


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=200_000))
def test_divisors_are_every_divisor_ascending(n):
    from search.strategy.space import divisors
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


def test_micro_batch_counts_of_a_huge_batch_are_found_without_a_loop_over_it():
    # 2^24 samples on one replica: the counts are divisors (powers of two) above pp.
    from search.strategy.feasible import _counts_above
    w = get_workload("llama3-8b").with_batch(2 ** 24)
    assert _counts_above(Strategy(dp=1, tp=8, pp=4), w, 4)[:3] == [8, 16, 32]


@pytest.mark.parametrize("precision, kept", [(None, False), ("bf16", False), ("fp8", True),
                                             ("fp8-cs", True), ("mxfp8", False)])
def test_the_search_keeps_fp8_weights_where_the_precision_allows(precision, kept):
    # NVIDIA's per-tensor FP8 recipes keep the weights in FP8 (fp8_param_gather): every
    # searched strategy does, and so needs no more model parallelism than without them.
    from search.strategy.feasible import shape_candidates

    opts = {} if precision is None else {"precision": precision}
    hw = "B200" if precision == "mxfp8" else "H100"
    w = get_workload("llama3-70b", **opts)
    start = feasible_start(w, 256, hw).strategy
    assert start.fp8_params is kept
    assert all(c.strategy.fp8_params is kept for c in shape_candidates(w, 256, hw, limit=6))
    if kept:
        off = Strategy(**{**start.__dict__, "fp8_params": False})
        assert memory_per_gpu(w, start, hw).weights_bytes < memory_per_gpu(w, off, hw).weights_bytes
