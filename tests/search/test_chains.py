"""Strategy-search chains as jobs: the same choices in one process and on Ray workers."""

from __future__ import annotations

import pytest

from codesign.workloads import get_hardware, get_workload
from search.per_fabric import SearchBudget, WorkloadPlan, best_strategies
from search.strategy.chains import (ChainResult, local_topology, merge, on_ray, run_chains)
from search.strategy.feasible import feasible_start
from search.strategy.mcmc import SearchResult
from search.strategy.space import Candidate
from topologies.registry import from_spec

SPEC = "torus:4x4,bw=100Gbps"


def _mix(hw):
    return [WorkloadPlan(name, weight, None, get_workload(name),
                         feasible_start(get_workload(name), 128, hw))
            for name, weight in (("bert", 1.0), ("resnet50", 2.0))]


def _choices(topo, hw):
    got = best_strategies(topo, _mix(hw), hw, collective_method="best",
                          budget=SearchBudget(evaluations=8, restarts=2), seed=5)
    return [(c.name, str(c.candidate.strategy), c.candidate.order, c.time_s, c.start_time_s,
             c.evaluations, c.metrics["collectives"]) for c in got]


def test_chains_on_ray_workers_give_the_choices_of_one_process(ray_shared):
    hw = get_hardware("A100-80")
    here = _choices(from_spec(SPEC), hw)
    with on_ray():       # four chains (two workloads x two restarts) as Ray tasks
        spread = _choices(from_spec(SPEC), hw)
        warm = _choices(from_spec(SPEC), hw)   # the workers' caches are warm now
    with on_ray(tasks=1):  # at most one task: the chains in two groups of two
        capped = _choices(from_spec(SPEC), hw)
    assert spread == here and warm == here and capped == here
    assert all(c[6] for c in here)       # best decisions reported with each choice


def test_on_ray_with_no_tasks_runs_every_chain_here(ray_shared, monkeypatch):
    import search.strategy.chains as chains

    hw = get_hardware("A100-80")
    here = _choices(from_spec(SPEC), hw)
    monkeypatch.setattr(chains, "_chains_task", lambda: pytest.fail("a chain was shipped"))
    with on_ray(tasks=0):
        assert _choices(from_spec(SPEC), hw) == here


def test_merge_takes_the_best_chain_first_on_ties_and_adds_the_work():
    def result(t, evals, key):
        cand = Candidate.__new__(Candidate)
        return ChainResult(SearchResult(best=cand, best_time_s=t, initial_time_s=9.0,
                                        evaluations=evals, accepted=1, proposed=evals,
                                        times={key: t}))
    a, b, c = result(2.0, 3, "a"), result(1.0, 4, "b"), result(1.0, 5, "c")
    m = merge([a, b, c])
    assert m.search.best is b.search.best and m.search.best_time_s == 1.0
    assert m.search.evaluations == 12 and m.search.times == {"a": 2.0, "b": 1.0, "c": 1.0}


def test_one_network_maps_to_one_object_per_process():
    first = local_topology(from_spec(SPEC))
    assert local_topology(from_spec(SPEC)) is first
    assert local_topology(from_spec("torus:4x4,bw=50Gbps")) is not first
    assert run_chains([]) == []


@pytest.mark.parametrize("restarts", [1, 3])
def test_the_chains_split_the_budget(restarts):
    hw = get_hardware("A100-80")
    plan = _mix(hw)[:1]
    (c,) = best_strategies(from_spec(SPEC), plan, hw, collective_method="auto",
                           budget=SearchBudget(evaluations=6, restarts=restarts, shapes=0),
                           seed=1)
    assert 1 <= c.evaluations <= 6 + restarts     # each chain also times the start
    assert c.time_s <= c.start_time_s
