"""The iteration model with the execution knobs (issue 15): breakdown, MFU, schedules,
recomputation, context parallelism, single-server systems and the CLI's JSON."""

from __future__ import annotations

import json

import pytest

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
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
    # One more forward of every transformer block's layers (not the output layer), per
    # micro-batch.
    d = demand_for(w, "dp=2,microbatches=2", "A100-80", pl)
    forward = sum(o.seconds * o.repeat for o in d.compute()
                  if o.phase == "forward" and o.flops > 0 and 0 in o.ranks
                  and o.name.startswith("block"))
    assert full.breakdown["recompute_s"] == pytest.approx(forward, rel=1e-9)
    assert full.breakdown["compute_s"] == pytest.approx(base.breakdown["compute_s"])


def test_cp_exchange_hides_behind_attention() -> None:
    w = gpt(batch=4)
    pl = Placement(servers=2, gpus_per_server=1)
    fast = evaluate("ideal:2,bw=10000Gbps,lat=0", w, "dp=1,cp=2", placement=pl)
    slow = evaluate("ideal:2,bw=1Gbps,lat=0", w, "dp=1,cp=2", placement=pl)
    assert fast.breakdown["cp_s"] == 0.0 and fast.cp_s > 0
    assert slow.breakdown["cp_s"] > 0


def test_cp_allgather_is_exposed_even_on_a_fast_network() -> None:
    # Llama 3's all-gather CP (Sec. 3.3.2): the exchange precedes the attention, so all
    # of it is on the critical path however fast the network.
    w = gpt(batch=4)
    pl = Placement(servers=2, gpus_per_server=1)
    r = evaluate("ideal:2,bw=10000Gbps,lat=0", w, "dp=1,cp=2,cp_comm=allgather",
                 placement=pl)
    assert r.cp_s > 0
    assert r.breakdown["cp_s"] == pytest.approx(r.cp_s, rel=1e-9)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_zero3_gathers_hide_under_their_layers_pass(recompute: str) -> None:
    # ZeRO-3 prefetches: each layer's gather runs under a layer's pass (forward; the
    # backward with its recomputation), demand_for.
    from codesign.workloads.demand import Compute

    w = gpt(layers=2)
    pl = Placement(servers=2, gpus_per_server=1)
    strategy = f"dp=2,microbatches=2,zero=3,recompute={recompute}"
    d = demand_for(w, strategy, "A100-80", pl)
    passes: dict = {}
    for o in d.ops:
        if isinstance(o, Compute) and 0 in o.ranks and o.phase in ("forward", "backward"):
            key = (o.name, o.phase)
            passes[key] = passes.get(key, 0.0) + o.seconds
    gathers = [o for o in d.collectives() if o.purpose == "zero"]
    assert len(gathers) == 2 * sum(1 for layer in w.layers if layer.params)
    for o in gathers:
        assert o.hidden_s == pytest.approx(passes[(o.layer, o.phase)], rel=1e-12)
    if recompute == "full":
        assert any(o.hidden_s > passes[(o.layer, "forward")] * 2.5 for o in gathers
                   if o.phase == "backward")


@pytest.mark.parametrize("bw, hidden_fully", [("1000000Gbps", True), ("1Gbps", False)])
def test_zero3_gathers_expose_only_their_excess(bw: str, hidden_fully: bool) -> None:
    w = gpt(layers=4, tied=False)   # an output layer of its own: a gather to time
    pl = Placement(servers=2, gpus_per_server=1)
    strategy = "dp=2,microbatches=2,zero=3"
    r = evaluate(f"ideal:2,bw={bw},lat=0", w, strategy, placement=pl)
    assert r.zero_s > 0                       # the gathers' own time, all of it
    if hidden_fully:
        assert r.breakdown["zero_s"] == 0.0
    else:
        # 1 Gb/s: every gather outlasts its layer's pass, so what is exposed is the
        # gathers' time less the passes they ran under (once per micro-batch each).
        d = demand_for(w, strategy, "A100-80", pl)
        under = sum(o.hidden_s * o.repeat for o in d.collectives()
                    if o.purpose == "zero" and 0 in o.members)
        # The first micro-batch's gradient reduce-scatters run during the second one,
        # beside its gathers on the same two links: each of the 2 steady slots carries a
        # micro-batch's gathers and half the reduce-scatters (a 2-member ring moves half
        # of a buffer over each link), so a slot waits for the reduce-scatters' half
        # beyond the compute that no gather covers; the wait is ZeRO's (its gathers load
        # the links most).
        compute = (r.compute_time_s - r.optimizer_time_s) / 2     # per micro-batch
        rs = sum(o.bytes for o in d.collectives() if o.phase == "gradient"
                 and o.kind == "reducescatter" and 0 in o.members)
        wait = max(0.0, rs / 2 / 2 / (1e9 / 8) - (compute - under / 2))
        assert wait > 0
        assert r.breakdown["zero_s"] == pytest.approx(r.zero_s - under + 2 * wait, rel=1e-9)


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


_ALL = {"tp_comm_overlap": True, "param_gather_overlap": True, "pp_comm_overlap": True}


@pytest.mark.parametrize("flags, knobs", [
    # default --comm-overlap framework: this strategy has TP 2 with sequence parallelism,
    # ZeRO-1 and the interleaved schedule, so every knob is on
    ([], _ALL),
    (["--tp-comm-overlap", "false"], {**_ALL, "tp_comm_overlap": False}),
    (["--comm-overlap", "none"], {}),
    (["--comm-overlap", "none", "--tp-comm-overlap", "backward"],
     {"tp_comm_overlap": "backward"}),
    (["--comm-overlap", "none", "--tp-comm-overlap", "true", "--param-gather-overlap",
      "--pp-comm-overlap"], _ALL),
])
def test_cli_evaluate_takes_the_execution_knobs(flags, knobs, capsys) -> None:
    # What a validation row's `evaluate` column sets, from the command line.
    strategy = "dp=2,tp=2,pp=2,microbatches=4,schedule=interleaved,vpp=2,sp=true,zero=1"
    w = get_workload("gpt3-175b", layers=4, hidden=512, heads=8, ffn=2048, vocab=1000,
                     seq_len=256, positions=256, batch_size=16)
    code = main(["evaluate", "--topology", "ideal:2,bw=10Gbps", "--workload", "gpt3-175b",
                 *[x for kv in ("layers=4", "hidden=512", "heads=8", "ffn=2048", "vocab=1000",
                                "seq_len=256", "positions=256", "batch_size=16")
                   for x in ("--option", kv)],
                 "--hardware", "H100", "--gpus-per-server", "4", "--strategy", strategy,
                 "--network-model", "flow", "--routing", "shortest", *flags, "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    pl = Placement(servers=2, gpus_per_server=4)
    lib = evaluate("ideal:2,bw=10Gbps", w, strategy, hardware="H100", network_model="flow",
                   routing="shortest", placement=pl, **knobs)
    base = evaluate("ideal:2,bw=10Gbps", w, strategy, hardware="H100", network_model="flow",
                    routing="shortest", placement=pl)
    assert out["iteration_time_s"] == pytest.approx(lib.iteration_time_s, rel=1e-12)
    if knobs:   # on a 10 Gb/s network every knob hides something
        assert lib.iteration_time_s < base.iteration_time_s


def test_cli_evaluate_rejects_a_bad_overlap_value(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--topology", "ideal:2", "--workload", "gpt3-175b",
              "--tp-comm-overlap", "sometimes"])
    assert exc.value.code == 2
    assert "--tp-comm-overlap" in capsys.readouterr().err


def test_cli_evaluate_human_output(capsys) -> None:
    assert main(["evaluate", "--topology", "ideal:2", "--workload", "llama3-8b",
                 "--hardware", "H100", "--strategy",
                 "dp=2,tp=8,microbatches=1024,sp=true,zero=1,recompute=full"]) == 0
    out = capsys.readouterr().out
    assert "breakdown (adds up to the iteration time)" in out and "recompute_s" in out
    assert "memory per GPU" in out
    # The synthesizer tournament is one summary line, not its record (that is --json's).
    line = next(x for x in out.splitlines() if x.strip().startswith("collectives"))
    assert "timed:" in line and "{" not in out


# ------------------------------------------------- pipeline sends under one chunk's compute
_PP = "dp=1,pp=2,microbatches=4,schedule=interleaved,vpp=2"


def test_pp_comm_overlap_hides_each_send_under_one_chunk_pass() -> None:
    # Megatron-LM's overlap_p2p_comm: every send / receive of the interleaved schedule
    # runs under one model chunk's pass, the stage's pass over vpp (demand_for).
    from codesign.workloads.demand import Compute, Transfer

    w = gpt(layers=4)
    pl = Placement(servers=2, gpus_per_server=1)
    d = demand_for(w, _PP, "A100-80", pl, pp_comm_overlap=True)
    passes: dict = {}
    for o in d.ops:
        if isinstance(o, Compute) and o.kind != "optimizer":
            passes[(o.stage, o.phase)] = passes.get((o.stage, o.phase), 0.0) + o.seconds
    sends = [o for o in d.ops if isinstance(o, Transfer)]
    assert sends
    for o in sends:
        # forward sends leave the sender's forward pass; gradients arrive in the
        # receiver's backward pass (both attributed to the lower stage, or to the sender
        # for the wrap-around)
        owner = o.src if o.phase == "forward" else min(o.src, o.dst)
        assert o.hidden_s == pytest.approx(passes[(owner, o.phase)] / 2, rel=1e-12)
    plain = demand_for(w, _PP, "A100-80", pl)
    assert all(o.hidden_s == 0 for o in plain.ops if isinstance(o, Transfer))


@pytest.mark.parametrize("bw, hidden_fully", [("1000000Gbps", True), ("1Gbps", False)])
def test_pp_comm_overlap_exposes_only_the_excess(bw: str, hidden_fully: bool) -> None:
    w = gpt(layers=4)
    pl = Placement(servers=2, gpus_per_server=1)
    net = f"ideal:2,bw={bw},lat=0"
    off = evaluate(net, w, _PP, placement=pl)
    on = evaluate(net, w, _PP, placement=pl, pp_comm_overlap=True)
    assert off.breakdown["pp_s"] > 0
    if hidden_fully:
        assert on.breakdown["pp_s"] == 0.0
    else:   # 1 Gb/s: a send takes longer than a chunk's compute, the excess stays
        assert 0 < on.breakdown["pp_s"] < off.breakdown["pp_s"]
    assert on.compute_time_s == pytest.approx(off.compute_time_s, rel=1e-12)
    assert on.iteration_time_s < off.iteration_time_s


def test_pp_comm_overlap_is_ignored_without_interleaving() -> None:
    w = gpt(layers=4)
    pl = Placement(servers=2, gpus_per_server=1)
    plain = "dp=1,pp=2,microbatches=4"
    a = evaluate("ideal:2,bw=1Gbps", w, plain, placement=pl)
    b = evaluate("ideal:2,bw=1Gbps", w, plain, placement=pl, pp_comm_overlap=True)
    assert a.iteration_time_s == b.iteration_time_s
    with pytest.raises(InvalidSpecError, match="pp_comm_overlap.*true or false"):
        evaluate("ideal:2", w, _PP, placement=pl, pp_comm_overlap="yes")


@pytest.mark.parametrize("sp", [False, True])
def test_stage_boundary_gathers_only_without_sequence_parallelism(sp: bool) -> None:
    # Without SP the receiving TP group all-gathers the scattered shares (SC'21 Sec. 4.1);
    # with SP the shares are the sequence split the next stage starts from.
    from codesign.workloads.demand import CollectiveOp, Transfer

    w = gpt(layers=4)
    strat = f"dp=1,tp=2,pp=2,microbatches=4,sp={'true' if sp else 'false'}"
    d = demand_for(w, strat, "A100-80", Placement(servers=2, gpus_per_server=2))
    sends = [o for o in d.ops if isinstance(o, Transfer) and o.purpose == "pp"]
    gathers = [o for o in d.ops if isinstance(o, CollectiveOp) and o.purpose == "pp"]
    # each TP rank sends half of the 4-sample boundary activation (s x h x 2 bytes)
    assert sends and all(o.bytes == 4 * 128 * 256 * 2 / 2 for o in sends)
    assert (not gathers) if sp else (len(gathers) == 2)


def test_interleaved_wrap_carries_a_chunk_output_not_the_logits() -> None:
    # The last stage's chunk feeds stage 0's next chunk with a transformer block's
    # output; the output layer's logits (vocab wide) never cross a boundary.
    from codesign.workloads.demand import Transfer

    w = gpt(layers=4)
    d = demand_for(w, _PP, "A100-80", Placement(servers=2, gpus_per_server=1))
    sizes = {o.bytes for o in d.ops if isinstance(o, Transfer)}
    assert sizes == {4 * 128 * 256 * 2}


def test_expert_all_to_all_overlap_hides_under_the_layer_compute() -> None:
    # DualPipe-style overlap: each of a MoE layer's four all-to-alls hides under a
    # quarter of the layer's forward + backward compute (of another micro-batch); with
    # one micro-batch there is nothing to pair with.  Checked against the demand's own
    # op times: the exposed expert time falls by at most the hidden compute, to zero
    # on a fabric fast enough.
    w = get_workload("mixtral-8x7b", layers=2, hidden=512, heads=8, kv_heads=8, ffn=1024,
                     vocab=1000, seq_len=512, experts=8, top_k=2, batch_size=16)
    pl = Placement(servers=8, gpus_per_server=1)
    kw = dict(placement=pl, hardware="H100")
    slow, fast = "ideal:8,degree=1,bw=10Gbps", "ideal:8,degree=8,bw=3200Gbps"
    st = "dp=8,ep=8,microbatches=2"
    base = evaluate(slow, w, st, **kw)
    over = evaluate(slow, w, st, ep_comm_overlap=True, **kw)
    assert 0 < over.breakdown["ep_s"] < base.breakdown["ep_s"]
    d = demand_for(w, st, "H100", pl, ep_comm_overlap=True)
    hidden = sum(o.hidden_s * o.repeat for o in d.collectives()
                 if o.purpose == "ep" and 0 in o.members)
    assert base.breakdown["ep_s"] - over.breakdown["ep_s"] <= hidden * (1 + 1e-9)
    assert evaluate(fast, w, st, ep_comm_overlap=True, **kw).breakdown["ep_s"] \
        == pytest.approx(0.0, abs=1e-12)
    one = "dp=8,ep=8,microbatches=1"
    assert evaluate(slow, w.with_batch(8), one, ep_comm_overlap=True, **kw).breakdown == \
        evaluate(slow, w.with_batch(8), one, **kw).breakdown
    with pytest.raises(InvalidSpecError, match="ep_comm_overlap"):
        evaluate(slow, w, st, ep_comm_overlap="yes", **kw)


def test_hidden_deepep_all_to_all_still_costs_its_sms() -> None:
    # DeepEP's kernels run on 20 SMs (DeepSeek-V3 report Sec. 3.2.2): an exchange hidden
    # under another micro-batch's compute slows that compute by 20 / 132 of the H100's
    # SMs for as long as it runs, so on a fabric fast enough to hide everything the
    # exposed expert time is that share of the exchanges' time, not zero; the
    # all-to-all dispatcher (no published SM count) stays fully hidden.
    from codesign.workloads.dispatch import overlap_sm_share
    w = get_workload("mixtral-8x7b", layers=2, hidden=512, heads=8, kv_heads=8, ffn=1024,
                     vocab=1000, seq_len=512, experts=8, top_k=2, batch_size=16)
    kw = dict(placement=Placement(servers=4, gpus_per_server=2), hardware="H100",
              ep_comm_overlap=True)
    fast, st = "ideal:4,degree=8,bw=3200Gbps", "dp=8,ep=8,microbatches=2"
    share = overlap_sm_share("hierarchical", get_hardware("H100").compute.sms)
    assert share == pytest.approx(20 / 132)
    hier = evaluate(fast, w, st, ep_dispatch="hierarchical", **kw)
    assert hier.ep_s > 0
    assert hier.breakdown["ep_s"] == pytest.approx(share * hier.ep_s, rel=1e-9)
    assert evaluate(fast, w, st, **kw).breakdown["ep_s"] == pytest.approx(0.0, abs=1e-12)
    # Without overlap the exchange is exposed whole, whatever its kernels hold.
    plain = evaluate(fast, w, st, **{**kw, "ep_comm_overlap": False},
                     ep_dispatch="hierarchical")
    assert plain.breakdown["ep_s"] == pytest.approx(plain.ep_s, rel=1e-9)


def test_attention_kernel_is_an_execution_choice() -> None:
    # On H100 the default is cuDNN's kernel; FlashAttention-2 (stacks without Transformer
    # Engine) only slows the attention; an unknown or unmeasured kernel is refused.
    from evaluators.iteration import Cluster, Execution

    w = get_workload("gpt3-175b", layers=2, hidden=1024, heads=8, ffn=4096, vocab=1000,
                     seq_len=2048, positions=2048, batch_size=16, flash_attention=True)
    kw = dict(hardware="H100", placement=Placement(servers=1, gpus_per_server=8))
    default = evaluate("ideal:1,bw=100Gbps", w, "dp=8", **kw)
    cudnn = evaluate("ideal:1,bw=100Gbps", w, "dp=8", attention_kernel="cudnn", **kw)
    fa2 = evaluate("ideal:1,bw=100Gbps", w, "dp=8", attention_kernel="flash2", **kw)
    assert cudnn.iteration_time_s == default.iteration_time_s
    assert fa2.compute_time_s > default.compute_time_s
    with pytest.raises(InvalidSpecError, match="attention_kernel 'flash9'"):
        Execution("dp=8", attention_kernel="flash9")
    # FlashAttention-2 is A100's default; no cuDNN kernel speed is measured there
    with pytest.raises(InvalidSpecError, match="attention_kernel 'cudnn'"):
        evaluate(Cluster("ideal:1,bw=100Gbps", "A100-80"), w,
                 Execution("dp=8", placement=kw["placement"], attention_kernel="cudnn"))


def test_cli_attention_kernel(capsys) -> None:
    args = ["evaluate", "--hardware", "H100", "--topology", "ideal:1,degree=8,bw=400Gbps",
            "--workload", "llama3-8b", "--option", "batch_size=16", "--strategy",
            "dp=8,microbatches=2,zero=1", "--json"]
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)["iteration_time_s"]
    assert main(args + ["--attention-kernel", "flash2"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_time_s"] > default
    code = main(["evaluate", "--hardware", "A100-80", "--topology",
                 "ideal:1,degree=8,bw=400Gbps", "--workload", "llama3-8b", "--strategy",
                 "dp=8", "--attention-kernel", "cudnn"])  # refused before the memory check
    err = capsys.readouterr().err
    assert code == 2 and "attention_kernel 'cudnn'" in err and err.count("\n") == 1


@pytest.mark.parametrize("network_model", ["flow", "congestion"])
def test_no_link_carries_more_than_its_bandwidth_moves_in_the_iteration(network_model):
    """Oracle, a physical bound: busiest link bytes / bandwidth <= the iteration time.
    ZeRO-3 with 8 micro-batches booked the earlier micro-batches' reduce-scatters beside
    the gathers on the same links (utilisation 1.40: 1.52 s, where ZeRO-2's
    reduce-scatters alone took 0.80 s); the excess is exposed gradient communication."""
    from codesign.workloads import get_workload
    from evaluators.iteration import evaluate

    w = get_workload("llama3-8b", layers=1, batch_size=64)
    z2, z3 = (evaluate("switch:8", w, f"dp=8,tp=8,microbatches=8,zero={z}", hardware="H100",
                       network_model=network_model) for z in (2, 3))
    for r in (z2, z3):
        assert r.max_link_utilisation <= 1 + 1e-9
        assert sum(r.breakdown.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    # ZeRO-3 moves ZeRO-2's traffic plus the gathers over the same links: slower
    assert z3.iteration_time_s > z2.iteration_time_s
    # the analytical model has no link sharing (ASTRA-sim's congestion-unaware model)
    a = evaluate("switch:8", w, "dp=8,tp=8,microbatches=8,zero=3", hardware="H100",
                 network_model="analytical")
    assert a.max_link_utilisation > 1


@pytest.mark.parametrize("folded", [False, True])
def test_context_parallel_ranks_are_expert_ranks_like_data_parallel_ones(folded) -> None:
    # Expert layers work token by token, so splitting each sequence over cp ranks and
    # giving each rank cp times the samples (dp=D, cp=C) hands them exactly the tokens
    # dp=D*C would: the same ranks on the data axis form the expert-parallel and
    # expert-gradient groups, with the same all-to-all bytes, expert-layer time and model
    # state -- only the attention and its K/V exchange differ.  (cp with ep was refused.)
    from codesign.workloads.compute import layer_time
    from codesign.workloads.memory import memory_per_gpu
    from codesign.workloads.sharding import shard_layer
    from codesign.workloads.strategy import parse_strategy

    w = get_workload("mixtral-8x7b", layers=2, hidden=512, heads=8, kv_heads=8, ffn=1024,
                     vocab=1000, seq_len=1024, experts=8, top_k=2, batch_size=16)
    hw, pl = get_hardware("H100"), Placement(servers=8, gpus_per_server=1)
    fold = ",tp=2,etp=1,sp=true" if folded else ""
    dps = (4, 2, 1) if folded else (8, 4, 2)
    base = parse_strategy(f"dp={dps[0]}{fold},ep=4,microbatches=2")
    ex = next(layer for layer in w.layers if layer.kind == "expert")

    def expert_view(st, samples):
        s = parse_strategy(st)
        d = demand_for(w, s, hw, pl)
        ops = sorted((o.kind, o.members, o.bytes, o.repeat, o.phase, o.purpose)
                     for o in d.collectives() if o.purpose in ("ep", "dp-expert"))
        t = layer_time(shard_layer(ex, s).local, hw, samples)
        m = memory_per_gpu(w, s, hw, pl)
        return ops, (t.fwd_s, t.bwd_s), (m.weights_bytes, m.gradients_bytes,
                                         m.optimizer_bytes), s.expert_dp

    want = expert_view(str(base), 16 / (base.dp * 2))
    assert want[0] and want[3] == base.tp * base.dp // (4 * base.expert_tp)
    for cp, dp in ((2, dps[1]), (4, dps[2])):
        st = f"dp={dp}{fold},cp={cp},ep=4,microbatches=2"
        assert expert_view(st, 16 / (dp * 2)) == want
        r = evaluate("ideal:8,degree=1,bw=100Gbps", w, st, placement=pl, hardware=hw)
        assert r.ep_s == pytest.approx(evaluate("ideal:8,degree=1,bw=100Gbps", w, str(base),
                                                placement=pl, hardware=hw).ep_s, rel=1e-12)
    with pytest.raises(InvalidSpecError, match="a divisor of dp x cp"):
        parse_strategy("dp=3,cp=2,ep=4")
