"""The co-design commands' communication-overlap policy (``comm_overlap``): which knobs
each policy sets for a strategy, and that every co-design path times candidates with it."""

from __future__ import annotations

import pytest

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload, parse_strategy
from evaluators.iteration import comm_overlap_options, evaluate
from search.strategy.chains import Timing
from search.strategy.space import Candidate
from search.sweeps.spec import WorkloadItem
from search.sweeps.trial import SweepPoint, evaluate_trial
from search.topoopt.alternating import OptimizeSpec
from search.whatif import run_whatif

NONE = {"tp_comm_overlap": False, "param_gather_overlap": False, "pp_comm_overlap": False}


@pytest.mark.parametrize("strategy, tp", [
    ("dp=4,tp=2,sp=true,zero=1", True),      # TP with sequence parallelism: TE's overlap
    ("dp=4,tp=2,zero=1", False),             # no SP: Megatron-Bridge switches it off
    ("dp=8,zero=1", False),                  # TP 1: nothing to overlap
])
def test_policies_set_the_knobs_the_framework_would(strategy, tp):
    assert comm_overlap_options("none", strategy) == NONE
    assert comm_overlap_options("framework", parse_strategy(strategy)) == {
        "tp_comm_overlap": tp, "param_gather_overlap": True, "pp_comm_overlap": True}


def test_an_unknown_policy_is_refused_everywhere():
    with pytest.raises(InvalidSpecError, match="comm_overlap.*framework"):
        comm_overlap_options("always", "dp=8")
    with pytest.raises(InvalidSpecError, match="comm_overlap"):
        OptimizeSpec("dlrm", 16, 4, "100Gbps", comm_overlap="sometimes")
    with pytest.raises(InvalidSpecError, match="whatif comm_overlap"):
        run_whatif([1e6], servers=16, comm_overlap="sometimes")


def test_cli_offers_exactly_the_policies():
    from codesign.app.cli import _COMMON
    from evaluators.iteration import COMM_OVERLAPS

    assert tuple(_COMMON["--comm-overlap"]["choices"]) == COMM_OVERLAPS
    assert _COMMON["--comm-overlap"]["default"] == COMM_OVERLAPS[0]


def test_cli_refuses_an_unknown_policy_with_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["whatif", "--servers", "16", "--budget", "1e6", "--comm-overlap", "all"])
    assert exc.value.code == 2
    assert "--comm-overlap" in capsys.readouterr().err


def _llm():
    # A small Llama-like job whose TP, ZeRO-1 gather and pipeline sends all cross a slow
    # network, so each overlap hides something.
    return get_workload("llama3-8b", layers=8, seq_len=1024, batch_size=64)


STRATEGY = "dp=4,tp=2,pp=2,microbatches=8,schedule=interleaved,vpp=2,sp=true,zero=1"


def test_timing_times_candidates_with_the_policy():
    hw = get_hardware("H100")
    topo, w = "ideal:4,bw=25Gbps", _llm()
    cand = Candidate(parse_strategy(STRATEGY))
    got = {p: Timing(hw, "ring", gpus_per_server=4, comm_overlap=p)
           .evaluate(topo, w, cand).iteration_time_s for p in ("framework", "none")}
    # the oracle: evaluate with the knobs spelled out, the placement the search uses
    for policy, t in got.items():
        want = evaluate(topo, w, cand.strategy, hardware=hw, collective_method="ring",
                        routing="auto", placement=cand.placement(4),
                        **comm_overlap_options(policy, cand.strategy))
        assert t == pytest.approx(want.iteration_time_s, rel=1e-12)
    assert got["framework"] < got["none"]


def test_a_sweep_trial_carries_its_policy_to_the_search():
    items = (WorkloadItem("llama3-8b", options=(("layers", 8), ("seq_len", 1024),
                                                ("batch_size", 64)), strategy=STRATEGY),)
    out = {p: evaluate_trial(SweepPoint("ideal", 2, 1, 25e9 / 8, gpu="H100",
                                        gpus_per_server=8, workloads=items,
                                        search_evaluations=0, comm_overlap=p))
           for p in ("framework", "none")}
    assert all(o.status == "complete" for o in out.values()), [o.reason for o in out.values()]
    t = {p: o.metrics["iteration_time_s"] for p, o in out.items()}
    assert t["framework"] < t["none"]
