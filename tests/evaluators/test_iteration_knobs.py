"""The iteration model with the execution knobs (issue 15): breakdown, MFU, schedules,
recomputation, context parallelism, single-server systems and the CLI's JSON."""

from __future__ import annotations

import json

import pytest

from codesign.app.cli import main
from codesign.workloads import demand_for, get_hardware, get_workload
from codesign.workloads.placement import Placement
from evaluators.iteration import evaluate
from evaluators.iteration.model import BREAKDOWN


def gpt(layers: int = 4, batch: int = 16, **kw):
    return get_workload("gpt3-175b", layers=layers, hidden=256, heads=8, ffn=1024,
                        vocab=1000, seq_len=128, positions=128, batch_size=batch, **kw)


@pytest.mark.parametrize("strategy", [
    "dp=8",
    "dp=2,tp=2,pp=2,microbatches=4,sp=true",
    "dp=2,tp=2,pp=2,microbatches=4,schedule=interleaved,vpp=2,recompute=full",
    "dp=2,pp=2,cp=2,microbatches=4,zero=3",
    "dp=4,tp=2,zero=1,recompute=selective,microbatches=2",
    "dp=1,pp=8,microbatches=16,schedule=gpipe",
])
def test_breakdown_adds_up_and_mfu_is_model_flops_over_peak(strategy: str) -> None:
    w = gpt()
    r = evaluate("ideal:2,bw=100Gbps", w, strategy, hardware="A100-80",
                 placement=Placement(servers=2, gpus_per_server=4))
    assert set(r.breakdown) == set(BREAKDOWN)
    assert sum(r.breakdown.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert all(v >= -1e-15 for v in r.breakdown.values())
    peak = get_hardware("A100-80").peak_flops("bf16")
    assert r.peak_flops == peak and r.precision == "bf16"
    assert r.mfu == pytest.approx(w.flops_per_iteration / (8 * peak * r.iteration_time_s))
    assert r.flops_per_gpu_s == pytest.approx(r.mfu * peak)
    assert r.memory["total_bytes"] > 0 and r.memory["strategy"] == r.strategy
    json.dumps(r.to_dict())


def test_interleaving_shrinks_the_bubble_by_v() -> None:
    # A fast network: the stage time is compute; T = (m + (p - 1) / v) t_stage.
    w = gpt(layers=8, batch=8)
    pl = Placement(servers=4, gpus_per_server=1)
    one = evaluate("ideal:4,bw=1000000Gbps,lat=0", w, "dp=1,pp=4,microbatches=8",
                   placement=pl)
    two = evaluate("ideal:4,bw=1000000Gbps,lat=0", w,
                   "dp=1,pp=4,microbatches=8,schedule=interleaved,vpp=2", placement=pl)
    t_stage = one.breakdown["bubble_s"] / 3
    assert two.breakdown["bubble_s"] == pytest.approx(1.5 * t_stage, rel=1e-3)
    assert one.iteration_time_s - two.iteration_time_s == pytest.approx(1.5 * t_stage,
                                                                        rel=1e-3)
    assert two.bubble_fraction == pytest.approx(3 / (2 * 8 + 3))


def test_full_recomputation_costs_one_forward() -> None:
    w = gpt(batch=8)
    pl = Placement(servers=1, gpus_per_server=2)
    base = evaluate("ideal:1", w, "dp=2,microbatches=2", placement=pl)
    full = evaluate("ideal:1", w, "dp=2,microbatches=2,recompute=full", placement=pl)
    # One more forward of every layer with FLOPs, per micro-batch.
    d = demand_for(w, "dp=2,microbatches=2", "A100-80", pl)
    forward = sum(o.seconds * o.repeat for o in d.compute()
                  if o.phase == "forward" and o.flops > 0 and 0 in o.ranks)
    assert full.breakdown["recompute_s"] == pytest.approx(forward, rel=1e-9)
    assert full.breakdown["compute_s"] == pytest.approx(base.breakdown["compute_s"])


def test_cp_exchange_hides_behind_attention() -> None:
    w = gpt(batch=4)
    pl = Placement(servers=2, gpus_per_server=1)
    fast = evaluate("ideal:2,bw=10000Gbps,lat=0", w, "dp=1,cp=2", placement=pl)
    slow = evaluate("ideal:2,bw=1Gbps,lat=0", w, "dp=1,cp=2", placement=pl)
    assert fast.breakdown["cp_s"] == 0.0 and fast.cp_s > 0
    assert slow.breakdown["cp_s"] > 0


@pytest.mark.parametrize("system", ["ideal:1", "dgx-a100:1", "hgx-h100:1"])
def test_a_single_server_is_a_system(system: str) -> None:
    r = evaluate(system, gpt(batch=8), "dp=1,tp=8,sp=true", hardware="H100")
    assert r.servers == 1 and r.gpus == 8 and r.iteration_time_s > 0


def test_cli_evaluate_json_reports_knobs_and_accepts_a_model_file(tmp_path, capsys) -> None:
    model = tmp_path / "my-model.yaml"
    model.write_text("name: my-llm\nbuilder: transformer\n"
                     "params: {layers: 4, hidden: 512, heads: 8, vocab: 1000, seq_len: 256}\n"
                     "batch_size: 16\n")
    code = main(["evaluate", "--topology", "ideal:2,bw=100Gbps", "--workload", str(model),
                 "--hardware", "H100", "--strategy",
                 "dp=4,tp=2,pp=2,microbatches=4,sp=true,recompute=selective,zero=1", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workload"] == "my-llm"
    assert {"mfu", "flops_per_gpu_s", "breakdown", "memory"} <= set(out)
    assert sum(out["breakdown"].values()) == pytest.approx(out["iteration_time_s"])
    for key in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"):
        assert out["memory"][key] > 0
    # The same transformer by --option on the zoo entry.
    code = main(["evaluate", "--topology", "ideal:2,bw=100Gbps", "--workload", "gpt3-175b",
                 "--option", "layers=4", "--option", "hidden=512", "--option", "heads=8",
                 "--option", "ffn=2048", "--option", "vocab=1000", "--option", "seq_len=256",
                 "--option", "positions=256", "--option", "batch_size=16",
                 "--hardware", "H100", "--strategy", "dp=16", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 16


def test_cli_evaluate_human_output(capsys) -> None:
    assert main(["evaluate", "--topology", "ideal:1", "--workload", "llama3-8b",
                 "--hardware", "H100", "--strategy",
                 "dp=1,tp=8,microbatches=2048,sp=true,zero=1,recompute=full"]) == 0
    out = capsys.readouterr().out
    assert "breakdown (adds up to the iteration time)" in out and "recompute_s" in out
    assert "memory per GPU" in out
