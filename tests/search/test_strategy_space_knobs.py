"""The strategy search over the execution knobs (issue 15 item 4) and the feasible start."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from codesign.app.cli import main
from codesign.errors import InfeasibleError, InvalidSpecError
from codesign.workloads import get_workload
from codesign.workloads.hardware import Hardware
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.strategy import Strategy, check_applicable, recompute_ladder
from search.strategy.mcmc import mcmc_search
from search.strategy.feasible import feasible_start
from search.strategy.space import Candidate, initial_candidate, propose


def gpt(batch: int = 32):
    return get_workload("gpt3-175b", layers=4, hidden=256, heads=8, ffn=1024, vocab=1000,
                        seq_len=128, positions=128, batch_size=batch)


def _hashed_time(c: Candidate) -> float:
    return 1.0 + (zlib.crc32(c.key().encode()) % 10_000) / 1000.0


@pytest.mark.parametrize("start, move, field", [
    ("dp=8,tp=2", "recompute", "recompute"),
    ("dp=8,tp=2", "sp", "sp"),
    ("dp=4,tp=2,pp=2", "schedule", "schedule"),
    ("dp=16", "microbatches", "microbatches"),     # gradient accumulation without PP
    ("dp=8,pp=2", "zero", "zero"),                 # ZeRO with pipelining
])
def test_knob_moves_change_what_they_name(start: str, move: str, field: str) -> None:
    w = gpt()
    c = initial_candidate(w, 16, start)
    new = propose(c, w, np.random.default_rng(0), gpus_per_server=4, moves=(move,))
    assert new is not None and getattr(new.strategy, field) != getattr(c.strategy, field)
    check_applicable(w, new.strategy)


def test_axes_move_reaches_context_parallelism_for_attention_models() -> None:
    w = gpt()
    c = initial_candidate(w, 16)
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(200):
        new = propose(c, w, rng, gpus_per_server=4, moves=("axes",))
        seen.add(new.strategy.cp)
        assert new.strategy.gpus == 16
    assert max(seen) > 1
    resnet = get_workload("resnet50")
    c = initial_candidate(resnet, 16)
    for _ in range(100):
        assert propose(c, resnet, rng, moves=("axes",)).strategy.cp == 1


def test_axes_move_deepens_a_pipeline_whose_replicas_hold_fewer_samples_than_stages():
    # 32 GPUs, a global batch of 8: dp=16, tp=1, pp=2 runs one sample per replica. Moving
    # a factor of dp to pp must propose dp=8, pp=4 with one sample per micro-batch (2
    # micro-batches), not pp=4 micro-batches (which do not divide the replica's 1 sample x
    # 2 = 2 samples and were refused, so no deeper pipeline was reachable). Oracle: every
    # dp -> pp move of the brute-force neighbourhood that applies.
    w = gpt(batch=16)
    c = Candidate(Strategy(dp=16, pp=2, microbatches=1))
    check_applicable(w, c.strategy)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(300):
        new = propose(c, w, rng, moves=("axes",))
        check_applicable(w, new.strategy)
        seen.add((new.strategy.dp, new.strategy.tp, new.strategy.pp, new.strategy.cp,
                  new.strategy.m))
    assert (8, 1, 4, 1, 2) in seen          # dp -> pp, one sample per micro-batch
    assert all(m <= w.batch_size // dp for dp, _, _, _, m in seen)


@pytest.mark.parametrize("seed", range(5))
def test_random_walks_over_every_move_stay_valid(seed: int) -> None:
    w = gpt()
    c = initial_candidate(w, 16, "dp=4,tp=2,pp=2")
    rng = np.random.default_rng(seed)
    for _ in range(300):
        new = propose(c, w, rng, gpus_per_server=4)
        if new is None:
            break
        check_applicable(w, new.strategy)
        assert new.strategy.gpus == 16
        c = new


def test_finds_the_brute_force_optimum_over_axes_and_knobs() -> None:
    w = gpt()
    space = []
    for dp, tp, pp in itertools.product((1, 2, 4, 8), repeat=3):
        for cp in (1, 2, 4, 8):
            if dp * tp * pp * cp != 8:
                continue
            for sp in (False, True):
                try:
                    base = Strategy(dp=dp, tp=tp, pp=pp, cp=cp, sp=sp)
                    check_applicable(w, base)
                except InvalidSpecError:
                    continue
                # every rung of the recomputation ladder, partial ones included
                space += [Candidate(s) for s in recompute_ladder(w, base)]
    best = min(space, key=_hashed_time)
    r = mcmc_search(w, initial_candidate(w, 8), lambda cs: [_hashed_time(c) for c in cs],
                    budget=len(space), patience=20 * len(space), beta=0.05,
                    moves=("axes", "recompute", "sp"), seed=5)
    assert r.best == best


def test_feasible_start_for_llama3_70b_on_1024_h100_uses_the_knobs() -> None:
    w = get_workload("llama3-70b")
    c = feasible_start(w, 1024, "H100")
    assert memory_per_gpu(w, c.strategy, "H100").fits
    # Pure data parallelism does not fit (the what-if refusal), even with ZeRO-2.
    assert not memory_per_gpu(w, "dp=1024", "H100").fits
    assert not memory_per_gpu(w, "dp=1024,zero=2", "H100").fits


def test_feasible_start_prefers_model_parallelism_to_full_recomputation() -> None:
    # Korthikanti et al. Table 3's 175B (TP 8, PP 8 on 64 A100): the first pass (no full
    # recomputation, no ZeRO-3) finds a strategy, so neither costly knob is used.
    w = get_workload("gpt3-175b", batch_size=64)
    s = feasible_start(w, 64, "A100-80").strategy
    assert s.recompute != "full" and s.zero < 3
    assert memory_per_gpu(w, s, "A100-80").fits


def test_nothing_fits_reports_the_closest_attempt() -> None:
    tiny = Hardware(name="tiny", peak=(("fp16", 1e14),), memory_bytes=2**20,
                    memory_bandwidth_Bps=1e12, gpus_per_server=8, fabric="",
                    fabric_bandwidth_Bps=1e11)
    with pytest.raises(InfeasibleError, match="no strategy of llama3-8b fits in tiny memory "
                                              "on 16 GPUs; closest: strategy"):
        feasible_start(get_workload("llama3-8b"), 16, tiny)


def test_optimize_exits_1_when_nothing_fits(capsys) -> None:
    code = main(["optimize", "--workload", "llama3-405b", "--servers", "2", "--degree", "1",
                 "--bandwidth", "100Gbps", "--hardware", "A100-40", "--workers", "0"])
    err = capsys.readouterr().err
    assert code == 1
    assert "no strategy of llama3-405b fits in A100-40 memory on 8 GPUs" in err   # 4/server
    assert "\n" not in err.strip()


def test_the_any_knob_pass_gives_the_least_model_parallelism() -> None:
    # CANDLE (TopoOpt List 1, 23.6 B fp32 parameters) on 512 GPUs, 4 per server: the
    # default start pipelines rather than use ZeRO-3; the any-knob pass keeps pure data
    # parallelism with ZeRO-3, which optimize times against it.
    w = get_workload("candle", "simulation")
    default = feasible_start(w, 512, "A100-80", gpus_per_server=4).strategy
    anyknob = feasible_start(w, 512, "A100-80", gpus_per_server=4, passes=(False,)).strategy
    assert default.tp * default.pp > 1 and default.zero < 3
    assert (anyknob.dp, anyknob.zero) == (512, 3)


def test_feasible_start_recomputes_only_the_blocks_it_must() -> None:
    # One GPU and one sample (no model parallelism or micro-batches to try), flash
    # attention (nothing for selective recomputation to drop): with memory between what
    # none and what a quarter of the blocks recomputed need, the start takes the first
    # rung of the recomputation ladder that fits -- partial, not full recomputation.
    w = get_workload("gpt3-175b", layers=8, hidden=1024, heads=16, ffn=4096, vocab=1000,
                     seq_len=2048, positions=2048, batch_size=1, flash_attention=True)
    ladder = recompute_ladder(w, Strategy())
    assert [(s.recompute, s.recompute_layers) for s in ladder] == [
        ("none", None), ("full", 2), ("full", 4), ("full", 6), ("full", None)]
    need = [memory_per_gpu(w, s, "H100").total_bytes for s in ladder]
    assert need[0] > need[1] > need[2] > need[3] >= need[4]
    gpu = Hardware(name="small", peak=(("fp16", 1e14),), memory_bytes=(need[0] + need[1]) / 2,
                   memory_bandwidth_Bps=1e12, gpus_per_server=1, fabric="",
                   fabric_bandwidth_Bps=1e11)
    start = feasible_start(w, 1, gpu).strategy
    assert (start.recompute, start.recompute_layers) == ("full", 2)


def test_expert_knob_and_move_fold_tp_x_dp() -> None:
    # 8 experts on tp=4 x dp=2: ep 1 and 2 carved out of dp, 4 and 8 folded (etp=1).
    from search.strategy.feasible import KNOBS
    w = get_workload("mixtral-8x7b", layers=2, hidden=256, heads=8, kv_heads=8, ffn=512,
                     vocab=1000, seq_len=64, batch_size=16)
    knob = next(k for k in KNOBS if k.name == "ep")
    options = knob.choices(Strategy(dp=2, tp=4), w, cheap=False)
    assert [(s.ep, s.etp, s.sp) for s in options] == [
        (1, None, False), (2, None, False), (4, 1, True), (8, 1, True)]
    rng = np.random.default_rng(3)
    c = initial_candidate(w, 8, "dp=2,tp=4")
    seen = set()
    for _ in range(300):
        new = propose(c, w, rng, gpus_per_server=8, moves=("axes", "ep"))
        if new is None:
            continue
        check_applicable(w, new.strategy)
        seen.add((new.strategy.ep, new.strategy.etp))
        c = new
    assert any(etp == 1 and ep > 1 for ep, etp in seen)
