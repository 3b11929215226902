"""The search's shape screen: one fitting strategy per model-parallel shape, timed before
the chains (:func:`search.strategy.feasible.shape_candidates`, ``SearchBudget.shapes``).

Oracles: a brute force over every knob combination of every shape says which shapes fit;
a search of one chain evaluation returns exactly the fastest of the start and the screen,
timed one by one (the screen ranks with the cheap ``auto`` collectives: ring on a
leaf-spine, the method asked for there); with ``best`` every reported time is ``best``'s."""

from __future__ import annotations

import pytest

from codesign.errors import InvalidSpecError
from codesign.workloads import Strategy, get_hardware, get_workload
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.strategy import check_applicable
from evaluators.iteration import comm_overlap_options, evaluate
from search.per_fabric import SearchBudget, WorkloadPlan, best_strategies
from search.strategy.feasible import (
    KNOBS, PIPELINE_ORDER, _variants, feasible_start, model_parallel_shapes, shape_candidates)
from search.strategy.space import replica_batch
from search.sweeps.spec import load_sweep_spec as load_spec
from topologies.registry import from_spec


def _fits(w, s, hw, per):
    try:
        check_applicable(w, s)
    except InvalidSpecError:
        return False
    from codesign.workloads.placement import Placement
    return memory_per_gpu(w, s, hw, Placement.for_strategy(s, per)).fits


@pytest.mark.parametrize("name,gpus", [("llama3-70b", 64), ("llama3-8b", 32), ("bert", 16)])
def test_one_candidate_per_shape_that_fits(name, gpus):
    w, hw = get_workload(name), get_hardware("H100")
    per = hw.gpus_per_server
    cands = shape_candidates(w, gpus, hw)
    # Brute force: the shapes (tp inside the server) with any knob combination that fits.
    fitting = [(tp, pp) for tp, pp in model_parallel_shapes(gpus, per) if tp <= per and any(
        _fits(w, s, hw, per) for cheap in (False,)
        for s in _variants(Strategy(dp=gpus // (tp * pp), tp=tp, pp=pp), w, KNOBS, cheap))]
    assert [(c.strategy.tp, c.strategy.pp) for c in cands] == fitting
    for c in cands:
        s = c.strategy
        assert s.gpus == gpus and _fits(w, s, hw, per)
        assert memory_per_gpu(w, s, hw, c.placement(per)).fits
        if s.pp > 1:       # one sample per micro-batch, stages on neighbouring GPUs
            assert s.m == max(replica_batch(w.batch_size, s.dp), s.pp) or \
                s.m == replica_batch(w.batch_size, s.dp)
            assert c.order == PIPELINE_ORDER
    assert shape_candidates(w, gpus, hw, limit=3) == cands[:3]
    assert shape_candidates(w, gpus, hw, limit=0) == []


def test_shapes_where_nothing_fits_are_skipped():
    # Llama 3 70B on 8 H100 does not fit at all (its weights, gradients and Adam state
    # need 133 GiB per GPU split 8 ways: feasible_start refuses it): no candidate.  On 16
    # the feasible start's shape is the first one offered.
    w, hw = get_workload("llama3-70b"), get_hardware("H100")
    assert shape_candidates(w, 8, hw) == []
    cands = shape_candidates(w, 16, hw)
    start = feasible_start(w, 16, hw).strategy
    assert (cands[0].strategy.tp, cands[0].strategy.pp) == (start.tp, start.pp)
    assert all(_fits(w, c.strategy, hw, 8) for c in cands)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_limits_and_budgets_are_refused(bad):
    w = get_workload("bert")
    with pytest.raises(InvalidSpecError, match="limit"):
        shape_candidates(w, 16, "H100", limit=bad)
    with pytest.raises(InvalidSpecError, match="shapes"):
        SearchBudget(shapes=bad)


def test_the_search_keeps_the_fastest_of_the_start_and_the_screen():
    spec = "leafspine:8,oversub=2,hosts_per_leaf=4,bw=10Gbps"
    topo = from_spec(spec)
    hw, w = get_hardware("H100"), get_workload("llama3-8b")
    start = feasible_start(w, 64, hw)
    plan = WorkloadPlan("llama3-8b", 1.0, None, w, start)
    # One chain evaluation: the chain only re-times its start (the screen's fastest).
    (c,) = best_strategies(topo, [plan], hw, collective_method="ring",
                           budget=SearchBudget(evaluations=1, shapes=6), seed=0)
    cands = [start] + [x for x in shape_candidates(w, 64, hw, limit=6) if x != start]
    times = [evaluate(from_spec(spec), w,
                      x.strategy, hardware=hw, placement=x.placement(8),
                      collective_method="ring", routing="auto",
                      **comm_overlap_options("framework", x.strategy)).iteration_time_s
             for x in cands]
    best = min(range(len(cands)), key=lambda i: (times[i], i))
    assert c.candidate == cands[best]
    assert c.time_s == pytest.approx(times[best], rel=1e-12)
    assert c.start_time_s == pytest.approx(times[0], rel=1e-12)
    assert c.evaluations == len(cands)
    assert min(times) < times[0]     # the screen found a faster shape than the start


def test_the_sweep_spec_takes_the_screen(tmp_path):
    text = ("study: s\nworkloads: [{name: bert}]\n"
            "space: {families: [torus], servers: 16, degree: 4, link_rate: 100Gbps, "
            "strategy_search: {evaluations: 4, shapes: 0}}\ntrials: 1\n")
    f = tmp_path / "s.yaml"
    f.write_text(text)
    assert load_spec(f).space.strategy_search == SearchBudget(evaluations=4, shapes=0)
    f.write_text(text.replace("shapes: 0", "shapes: -2"))
    with pytest.raises(InvalidSpecError, match="shapes"):
        load_spec(f)


def test_with_best_collectives_the_times_reported_are_best_s():
    spec = "leafspine:8,oversub=2,hosts_per_leaf=4,bw=10Gbps"
    hw, w = get_hardware("H100"), get_workload("llama3-8b")
    start = feasible_start(w, 64, hw)
    (c,) = best_strategies(from_spec(spec), [WorkloadPlan("llama3-8b", 1.0, None, w, start)],
                           hw, collective_method="best",
                           budget=SearchBudget(evaluations=2, shapes=6), seed=0)

    def timed(x):
        return evaluate(from_spec(spec), w, x.strategy, hardware=hw, placement=x.placement(8),
                        collective_method="best", routing="auto",
                        **comm_overlap_options("framework", x.strategy)).iteration_time_s

    assert c.time_s == pytest.approx(timed(c.candidate), rel=1e-12)
    assert c.start_time_s == pytest.approx(timed(start), rel=1e-12)
    assert c.time_s < c.start_time_s


@pytest.mark.parametrize("strategy", [
    "dp=64", "dp=8,tp=8,microbatches=4,sp=true,zero=1",
    "dp=16,tp=2,pp=2,microbatches=8,zero=1,schedule=interleaved,vpp=2",
    "dp=4,tp=4,pp=4,microbatches=16,recompute=full"])
def test_the_time_bound_is_the_compute_floor(strategy):
    # The floor evaluate compares time_bound with is the pipeline's compute alone -- the
    # compute_time_s it reports without the optimizer step -- which no iteration beats.
    from evaluators.iteration import AboveBound
    topo = from_spec("leafspine:8,oversub=2,hosts_per_leaf=4,bw=10Gbps")
    w, hw = get_workload("llama3-8b"), "H100"
    r = evaluate(topo, w, strategy, hardware=hw, check_memory=False)
    floor = r.compute_time_s - r.optimizer_time_s
    assert 0 < floor <= r.iteration_time_s
    with pytest.raises(AboveBound):
        evaluate(topo, w, strategy, hardware=hw, check_memory=False,
                 time_bound=floor * (1 - 1e-9))
    again = evaluate(topo, w, strategy, hardware=hw, check_memory=False,
                     time_bound=floor * (1 + 1e-9))
    assert again.iteration_time_s == r.iteration_time_s
