"""The feasible start: least model parallelism that fits, checked against brute force."""

from __future__ import annotations

import pytest

from codesign.errors import InfeasibleError
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
    ("dlrm", "A100-80", 128), ("gpt3-175b", "A100-80", 256)])
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
    assert _ladder_index(w, fixed) > _ladder_index(w, zero1.strategy)
    # Brute force over the same options: nothing with a smaller sum of positions fits.
    micro, levels = _repair_options(zero1.strategy, w)
    pos = next((i + j) for i, j in itertools.product(range(len(micro)), range(len(levels)))
               if micro[i].m == fixed.m and (levels[j].recompute, levels[j].recompute_layers)
               == (fixed.recompute, fixed.recompute_layers))
    for i, j in itertools.product(range(len(micro)), range(len(levels))):
        if i + j < pos:
            s = replace(micro[i], recompute=levels[j].recompute,
                        recompute_layers=levels[j].recompute_layers)
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
