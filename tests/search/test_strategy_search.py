"""MCMC strategy search: moves keep the job valid, brute-force optimum, determinism."""

from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import get_workload
from codesign.workloads.placement import AXES
from codesign.workloads.strategy import Strategy, check_applicable
from search.strategy.mcmc import accept_probability, mcmc_search
from search.strategy.space import Candidate, initial_candidate, prime_factors, propose

ZOO = ["dlrm", "candle", "bert", "ncf", "resnet50", "vgg16", "mixtral-8x7b"]


def _hashed_time(c: Candidate) -> float:
    """A deterministic, rugged synthetic cost (seconds) of a candidate."""
    return 1.0 + (zlib.crc32(c.key().encode()) % 10_000) / 1000.0


def test_prime_factors():
    assert prime_factors(1) == []
    assert prime_factors(12) == [2, 2, 3]
    assert prime_factors(97) == [97]
    for n in range(1, 200):
        assert math.prod(prime_factors(n)) == n


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ZOO), seed=st.integers(0, 2**32 - 1),
       gpus=st.sampled_from([8, 16, 64]))
def test_proposals_keep_the_gpu_count_and_are_applicable(name, seed, gpus):
    w = get_workload(name)
    c = initial_candidate(w, gpus)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        new = propose(c, w, rng, gpus_per_server=4)
        if new is None:
            break
        assert new != c
        assert new.strategy.gpus == gpus
        check_applicable(w, new.strategy)  # raises if not
        assert sorted(new.order) == sorted(AXES)
        if new.table_servers is not None:
            assert all(0 <= s < max(1, gpus // 4) for s in new.table_servers)
        c = new


@pytest.mark.parametrize("name, start, move", [
    ("resnet50", "dp=32", "axes"), ("resnet50", "dp=8,pp=4", "microbatches"),
    ("resnet50", "dp=32", "zero"), ("mixtral-8x7b", "dp=8", "ep"),
    ("dlrm", "dp=32", "embedding"), ("resnet50", "dp=32", "order"),
    ("dlrm", "dp=32,embedding=model", "table")])
def test_every_move_kind_changes_what_it_names(name, start, move):
    w = get_workload(name)
    c = initial_candidate(w, 32 if name != "mixtral-8x7b" else 8, start)
    new = propose(c, w, np.random.default_rng(0), gpus_per_server=4, moves=(move,))
    assert new is not None and new != c
    if move == "table":
        assert new.table_servers is not None and new.strategy == c.strategy
    elif move == "order":
        assert new.order != c.order and new.strategy == c.strategy
    else:
        field = {"axes": None, "microbatches": "microbatches", "zero": "zero", "ep": "ep",
                 "embedding": "embedding"}[move]
        if field:
            assert getattr(new.strategy, field) != getattr(c.strategy, field)
        else:
            assert (new.strategy.dp, new.strategy.tp, new.strategy.pp) != \
                (c.strategy.dp, c.strategy.tp, c.strategy.pp)


def _space(w, gpus):
    """Every (dp, tp, pp, zero) strategy on ``gpus`` GPUs that the workload accepts."""
    out = []
    for dp, tp in itertools.product(range(1, gpus + 1), repeat=2):
        if gpus % (dp * tp):
            continue
        pp = gpus // (dp * tp)
        for zero in range(4):
            try:
                s = Strategy(dp=dp, tp=tp, pp=pp, zero=zero)
                check_applicable(w, s)
            except InvalidSpecError:
                continue
            out.append(Candidate(s))
    return out


def test_finds_the_brute_force_optimum_of_a_small_space():
    w = get_workload("resnet50")
    space = _space(w, 8)
    best = min(space, key=_hashed_time)
    r = mcmc_search(w, initial_candidate(w, 8), lambda cs: [_hashed_time(c) for c in cs],
                    budget=len(space), patience=10 * len(space), beta=0.05,
                    moves=("axes", "zero"), seed=3)
    assert r.best == best
    assert r.best_time_s == pytest.approx(_hashed_time(best))
    assert r.evaluations <= len(space)
    # history is the best-so-far: never increases
    assert all(a >= b for a, b in zip(r.history, r.history[1:]))


def test_same_seed_same_result_whatever_order_the_batch_is_evaluated_in():
    w = get_workload("bert")
    init = initial_candidate(w, 32)

    def forward(cs):
        return [_hashed_time(c) for c in cs]

    def backward(cs):  # evaluates in reverse, as a pool finishing out of order would
        times = {c: _hashed_time(c) for c in reversed(list(cs))}
        return [times[c] for c in cs]

    a = mcmc_search(w, init, forward, budget=30, batch=4, seed=7)
    b = mcmc_search(w, init, backward, budget=30, batch=4, seed=7)
    assert a == b
    c = mcmc_search(w, init, forward, budget=30, batch=4, seed=8)
    assert c.times != a.times or c.best == a.best  # another seed explores differently


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(ZOO), seed=st.integers(0, 2**16), batch=st.integers(1, 6),
       budget=st.integers(2, 30), restarts=st.integers(1, 3))
def test_the_best_is_the_fastest_candidate_timed(name, seed, batch, budget, restarts):
    # A batch's proposals after the one the chain moves to are timed too; the best must
    # count them (it once stopped at the accepted proposal and missed faster ones).
    w = get_workload(name)
    r = mcmc_search(w, initial_candidate(w, 16), lambda cs: [_hashed_time(c) for c in cs],
                    budget=budget, restarts=min(restarts, budget - 1), batch=batch,
                    seed=seed)
    assert r.best_time_s == min(r.times.values())
    assert r.times[r.best.key()] == r.best_time_s


def test_infeasible_candidates_are_never_accepted_and_budget_is_respected():
    w = get_workload("vgg16")
    init = initial_candidate(w, 16)
    calls = []

    def evaluate(cs):
        calls.extend(cs)
        return [math.inf if c.strategy.pp > 1 else _hashed_time(c) for c in cs]

    r = mcmc_search(w, init, evaluate, budget=25, restarts=2, seed=1)
    assert len(calls) == len(set(calls)) == r.evaluations <= 26  # initial + budget
    assert math.isfinite(r.best_time_s) and r.best.strategy.pp == 1
    assert r.best_time_s == min(t for t in r.times.values())


def test_accept_probability():
    assert accept_probability(1.0, 2.0, 20) == 1.0
    assert accept_probability(math.inf, 2.0, 20) == 0.0
    assert accept_probability(1.05, 1.0, 20) == pytest.approx(math.exp(-1.0))
    assert accept_probability(2.0, math.inf, 20) == 1.0
    assert accept_probability(math.inf, math.inf, 20) == 1.0   # walk out of infeasibility


@pytest.mark.parametrize("kwargs, field", [
    ({"budget": 0}, "budget"), ({"restarts": 0}, "restarts"), ({"batch": 0}, "batch"),
    ({"beta": -1.0}, "beta"), ({"beta": math.nan}, "beta"), ({"seed": 1.5}, "seed"),
    ({"patience": 0}, "patience")])
def test_bad_search_options(kwargs, field):
    w = get_workload("resnet50")
    with pytest.raises(InvalidSpecError, match=field):
        mcmc_search(w, initial_candidate(w, 8), lambda cs: [1.0] * len(cs), **kwargs)


def test_initial_candidate_checks_the_gpu_count():
    w = get_workload("resnet50")
    with pytest.raises(InvalidSpecError, match="dp\\*tp\\*pp"):
        initial_candidate(w, 8, "dp=4")
    with pytest.raises(InvalidSpecError, match="gpus"):
        initial_candidate(w, 0)
    assert initial_candidate(w, 8).strategy == Strategy(dp=8)


def test_unknown_move():
    w = get_workload("resnet50")
    with pytest.raises(InvalidSpecError, match="moves"):
        propose(initial_candidate(w, 8), w, np.random.default_rng(0), moves=("swap",))


def test_a_guide_draws_half_the_proposals_from_its_moves_and_a_repair_is_timed():
    # BERT on 32 GPUs; the time falls with the number of micro-batches only, so a guide
    # pointing at "microbatches" finds the optimum where uniform proposals over every
    # move mostly change other things.
    w = get_workload("bert")
    init = initial_candidate(w, 32)

    def timed(cs):
        return [1.0 + 1.0 / c.strategy.m for c in cs]

    plain = [mcmc_search(w, init, timed, budget=6, seed=s).best_time_s for s in range(12)]
    guided = [mcmc_search(w, init, timed, budget=6, seed=s,
                          guide=lambda c: ("microbatches",)).best_time_s for s in range(12)]
    assert sum(guided) < sum(plain)
    # Every candidate timed went through the repair (here: more micro-batches).
    seen = []

    def more(c):
        from dataclasses import replace

        return replace(c, strategy=replace(c.strategy, microbatches=2)) \
            if c.strategy.m == 1 else c

    def record(cs):
        seen.extend(cs)
        return timed(cs)

    mcmc_search(w, init, record, budget=8, seed=1, repair=more)
    assert all(c.strategy.m >= 2 for c in seen[1:])   # the start is timed as given
    # A guide naming no allowed move changes nothing.
    a = mcmc_search(w, init, timed, budget=8, seed=2, moves=("axes", "zero"))
    b = mcmc_search(w, init, timed, budget=8, seed=2, moves=("axes", "zero"),
                    guide=lambda c: ("microbatches",))
    assert a == b


def test_a_default_start_that_does_not_apply_says_it_was_the_default():
    # Pure data parallelism on 16,384 GPUs does not divide Llama 3 70B's 2,048-sample
    # batch: the refusal names the default start and what to do, not a strategy the
    # user never gave; a given strategy keeps the rule's own message.
    w = get_workload("llama3-70b")
    with pytest.raises(InvalidSpecError, match=r"starting strategy 'dp=16384 \(the default"
                                               r".*divisor of the global batch.*--strategy"):
        initial_candidate(w, 16384)
    with pytest.raises(InvalidSpecError, match="^invalid strategy dp\\*microbatches"):
        initial_candidate(w, 16384, "dp=16384")


def test_starved_pipelines_are_fed_by_context_parallelism_in_the_screen():
    # Llama 3 405B's 2,048 sequences on 32,768 H100: a tensor-parallel-8 pipeline of pp
    # stages has dp = 4096 / pp replicas of 2048 / dp = pp / 2 samples (closed form), so
    # every one is starved; the screen adds cp = 2 (dp / 2 replicas of pp samples, one per
    # micro-batch, interleaved).  At 16,384 GPUs the replicas already get pp samples.
    from search.strategy.feasible import shape_candidates

    w = get_workload("llama3-405b")
    cands = [c.strategy for c in shape_candidates(w, 32768, "H100", limit=64)]
    fed = [s for s in cands if s.cp > 1]
    starved = [s for s in cands if s.tp == 8 and s.pp > 1 and s.cp == 1]
    assert starved and all(s.m == s.pp // 2 for s in starved)
    assert fed and {(s.dp, s.pp) for s in fed} <= {(s.dp // 2, s.pp) for s in starved}
    for s in fed:
        assert (s.cp, s.tp, s.m, s.schedule, s.vpp) == (2, 8, s.pp, "interleaved", 2)
        assert s.gpus == 32768
        check_applicable(w, s)
    # at 16,384 GPUs no pipeline is starved: context parallelism appears only as the
    # split of a shape whose fit recomputes (next test), which then needs none
    split = [c.strategy for c in shape_candidates(w, 16384, "H100") if c.strategy.cp > 1]
    assert all(s.recompute == "none" and not s.offload_layers for s in split)
    assert not any(s.schedule == "interleaved" for s in split)


def test_long_sequences_are_split_over_context_parallel_gpus_instead_of_recomputed():
    # Llama 3 70B, 128 sequences of 128k tokens on 1,024 H100: tensor parallelism 8
    # alone fits only with full recomputation; the screen adds, right after that shape,
    # the fewest cp ways whose cheapest knobs fit without it -- checked here by brute
    # force over the smaller splits (none fits without recomputation).
    from codesign.workloads import get_hardware
    from codesign.workloads.memory import memory_per_gpu
    from search.strategy.feasible import shape_candidates

    hw = get_hardware("H100")
    w = get_workload("llama3-70b", seq_len=131072, batch_size=128)
    cands = [c.strategy for c in shape_candidates(w, 1024, hw)]
    first = next(i for i, s in enumerate(cands) if (s.tp, s.pp, s.cp) == (8, 1, 1))
    assert cands[first].recompute == "full"
    split = cands[first + 1]
    assert (split.tp, split.pp, split.cp, split.dp, split.recompute) == (8, 1, 8, 16, "none")
    assert memory_per_gpu(w, split, hw).fits

    # brute force: cp = 2 or 4 with every micro-batch count and ZeRO stage of the cheap
    # knobs (ZeRO-3 is the costly end), sequence parallelism on or off, no recomputation
    for cp in (2, 4):
        for m, zero, sp in itertools.product((1, 2, 4)[:cp.bit_length()], range(3),
                                             (False, True)):
            s = Strategy(dp=128 // cp, tp=8, cp=cp, microbatches=m, zero=zero, sp=sp)
            assert not memory_per_gpu(w, s, hw).fits, s
    # a model that fits without recomputation gets no split
    assert not any(c.strategy.cp > 1 for c in shape_candidates(get_workload("llama3-70b"),
                                                               1024, hw))


def test_starved_pipelines_are_fed_when_the_scaleup_domain_is_wider_than_tp():
    # 256 GB200 NVL72 racks (18,432 GPUs): Llama 3 405B's tensor parallelism stops at 8
    # of a rack's 72 GPUs, so "tp fills the domain" never held and no starved pipeline
    # was fed.  A tp-8 pipeline of pp stages has dp = 2304 / pp replicas of 2048 / dp
    # samples, starved from pp = 18 (16 samples) up; fed with the fewest cp that gives
    # each replica pp samples.
    from search.strategy.feasible import shape_candidates

    w = get_workload("llama3-405b")
    cands = [c.strategy for c in shape_candidates(w, 18432, "GB200-NVL72", limit=64)]
    fed = [s for s in cands if s.cp > 1]
    assert {s.pp for s in fed} >= {18, 36, 72}
    for s in fed:
        assert s.tp == 8 and s.gpus == 18432 and s.m >= s.pp
        assert 2048 // (s.dp * s.cp) < s.pp   # its unfed twin was starved
        check_applicable(w, s)
