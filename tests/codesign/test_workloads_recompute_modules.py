"""Fine-grained recomputation, ``recompute=selective,recompute_modules=...`` (Megatron-core's
``--recompute-modules``): the grammar, and what each module frees and reruns against
closed forms computed from the layers' own byte and operator counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload
from codesign.workloads.compute import attention_core_time, layer_time, recompute_time
from codesign.workloads.efficiency import gemm_time
from codesign.workloads.model import Layer
from codesign.workloads.sharding import activation_bytes_per_sample, shard_layer
from codesign.workloads.strategy import RECOMPUTE_MODULES, parse_strategy
from evaluators.iteration.model import evaluate

H100 = get_hardware("H100")
SYSTEM = "ideal:1,degree=8,bw=400Gbps"
SMALL = dict(layers=2, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000,
             seq_len=2048, batch_size=8)


@given(st.lists(st.sampled_from(RECOMPUTE_MODULES), min_size=1, unique=True))
def test_modules_round_trip_in_canonical_order(mods):
    s = parse_strategy(f"dp=8,recompute=selective,recompute_modules={'+'.join(mods)}")
    assert s.recompute_modules == tuple(m for m in RECOMPUTE_MODULES if m in mods)
    assert parse_strategy(str(s)) == s
    assert s.selective_modules == frozenset(mods)


@pytest.mark.parametrize("text, needle", [
    ("dp=8,recompute_modules=mlp", "recompute_modules.*recompute=selective"),
    ("dp=8,recompute=full,recompute_modules=mlp", "recompute_modules.*recompute=selective"),
    ("dp=8,recompute=selective,recompute_modules=attn", "recompute_modules 'attn'"),
    ("dp=8,recompute=selective,recompute_modules=mlp+mlp", "recompute_modules"),
    ("dp=8,recompute=selective,recompute_modules=", "recompute_modules"),
])
def test_bad_modules_name_the_field(text, needle):
    with pytest.raises(InvalidSpecError, match=needle):
        parse_strategy(text)


def test_selective_defaults_to_the_attention_core():
    assert parse_strategy("dp=8,recompute=selective").selective_modules == {"core_attn"}
    assert parse_strategy("dp=8").selective_modules == frozenset()


@pytest.mark.parametrize("tp, sp", [(1, False), (4, False), (4, True)])
def test_layernorm_frees_the_norm_output_per_layer(tp, sp):
    w = get_workload("llama3-8b", **SMALL)
    base = parse_strategy(f"dp=1,tp={tp},sp={str(sp).lower()},recompute=selective")
    mods = parse_strategy(f"dp=1,tp={tp},sp={str(sp).lower()},recompute=selective,"
                          "recompute_modules=core_attn+layernorm")
    split = tp if sp else 1     # the norm output sits in the sequence-parallel part
    for layer in w.layers:
        freed = activation_bytes_per_sample(layer, base) - \
            activation_bytes_per_sample(layer, mods)
        if layer.kind == "attention" or layer.is_mlp_block:
            assert layer.norm_saved_bytes == 1024 * 2048 * 2
            assert freed == pytest.approx(layer.norm_saved_bytes / split)
        else:
            assert freed == 0


def test_mlp_module_keeps_only_the_blocks_input_and_reruns_its_forward():
    w = get_workload("llama3-8b", **SMALL)
    full = parse_strategy("dp=1,recompute=full")
    mlp = parse_strategy("dp=1,recompute=selective,recompute_modules=mlp")
    none = parse_strategy("dp=1")
    assert not next(layer for layer in w.layers if layer.name == "lm_head").is_mlp_block
    for layer in w.layers:
        if layer.is_mlp_block:
            assert activation_bytes_per_sample(layer, mlp) == \
                activation_bytes_per_sample(layer, full)
            assert recompute_time(layer, H100, 4, {"mlp"}) == \
                layer_time(layer, H100, 4).fwd_s
        else:
            assert activation_bytes_per_sample(layer, mlp) == \
                activation_bytes_per_sample(layer, none)
            assert recompute_time(layer, H100, 4, {"mlp"}) == 0


def test_moe_act_frees_the_routed_activation_and_reruns_its_kernels():
    w = get_workload("mixtral-8x7b", layers=2, seq_len=1024, batch_size=8)
    moe = next(layer for layer in w.layers if layer.kind == "expert")
    # top-2 routed copies of every token's FFN activation output (14336 wide, 2 bytes)
    assert moe.act_saved_bytes == 2 * 1024 * 14336 * 2
    base = parse_strategy("dp=8,ep=8,recompute=selective")
    act = parse_strategy("dp=8,ep=8,recompute=selective,recompute_modules=moe_act")
    assert activation_bytes_per_sample(moe, base) - activation_bytes_per_sample(moe, act) \
        == pytest.approx(moe.act_saved_bytes)
    # SwiGLU forward reads two inputs and writes one (3 d per element), at HBM speed
    moved = 3 * 2 * 2 * 1024 * 14336
    hbm = H100.memory_bandwidth_Bps * H100.compute.memory_efficiency
    assert recompute_time(moe, H100, 4, {"moe_act"}) == pytest.approx(4 * moved / hbm)
    assert recompute_time(moe, H100, 4, {"layernorm"}) == pytest.approx(
        4 * 2 * 2 * 1024 * 4096 / hbm)


def test_core_attn_module_is_selective_recomputation():
    w = get_workload("gpt3-175b", layers=2, hidden=1024, heads=8, ffn=4096, vocab=32000,
                     seq_len=2048, batch_size=8)     # unfused attention: s x s saved
    attn = next(layer for layer in w.layers if layer.kind == "attention")
    assert recompute_time(attn, H100, 4, {"core_attn"}) == \
        attention_core_time(attn, H100, 4) > 0
    for text in ("dp=8,recompute=selective",
                 "dp=8,recompute=selective,recompute_modules=core_attn"):
        r = evaluate(SYSTEM, w, text, hardware=H100, check_memory=False)
        assert r.recompute_time_s > 0
    a = evaluate(SYSTEM, w, "dp=8,recompute=selective", hardware=H100, check_memory=False)
    b = evaluate(SYSTEM, w, "dp=8,recompute=selective,recompute_modules=core_attn",
                 hardware=H100, check_memory=False)
    assert a.iteration_time_s == b.iteration_time_s


#: A small DeepSeek-V3 (multi-head latent attention at its own widths: 128 heads, query
#: latent 1536, key/value latent 512, heads of 128 + 64 rotary, values of 128).
MLA = dict(layers=3, dense_layers=1, experts=16, expert_groups=4, group_top_k=2,
           seq_len=1024, batch_size=8)


@pytest.mark.parametrize("tp", [1, 4])
def test_mla_up_proj_frees_the_per_head_qkv_and_reruns_the_up_projections(tp):
    w = get_workload("deepseek-v3", **MLA)
    attn = w.layer("block1.attn")
    # Q and K of 128 heads x (128 + 64), V of 128 heads x 128, 1024 tokens, 2 bytes
    assert attn.up_proj_saved_bytes == 1024 * 128 * (192 + 192 + 128) * 2
    # the up projections: key/value latent 512 -> 128 x (128 + 128), query latent
    # 1536 -> 128 x 192
    assert set(attn.up_proj_gemms) == {(1024, 128 * 256, 512, 1, "n"),
                                       (1024, 128 * 192, 1536, 1, "n")}
    base = parse_strategy(f"dp=8,tp={tp},recompute=selective")
    up = parse_strategy(f"dp=8,tp={tp},recompute=selective,recompute_modules=mla_up_proj")
    for layer in w.layers:
        freed = activation_bytes_per_sample(layer, base) - \
            activation_bytes_per_sample(layer, up)
        assert freed == pytest.approx(layer.up_proj_saved_bytes / tp)
    # The rerun: the two column-parallel products' forward on this GPU's 1 / tp of N,
    # by the GEMM kernel model at the bf16 peak.
    local = shard_layer(attn, up).local
    want = sum(gemm_time(4 * 1024, n / tp, k, peak_flops=H100.peak_flops("bf16"),
                         bandwidth_Bps=H100.memory_bandwidth_Bps, dtype_bytes=2,
                         profile=H100.compute, count=1)
               for n, k in ((128 * 256, 512), (128 * 192, 1536)))
    assert recompute_time(local, H100, 4, {"mla_up_proj"}) == pytest.approx(want)
    assert shard_layer(attn, up).recompute_flops == pytest.approx(
        2 * 1024 * (128 * 256 * 512 + 128 * 192 * 1536) / tp)
    # The roofline: their share of the layer's forward FLOPs of its forward time.
    roof = layer_time(local, H100, 4, efficiency=0.5)
    assert recompute_time(local, H100, 4, {"mla_up_proj"}, efficiency=0.5) == pytest.approx(
        roof.fwd_s * shard_layer(attn, up).recompute_flops / local.fwd_flops)


def test_mla_up_proj_adds_exactly_its_reruns_to_the_iteration():
    w = get_workload("deepseek-v3", **MLA)
    kw = dict(hardware=H100, check_memory=False)
    # One GPU (no gradient reduction for the longer backward to hide), one micro-batch
    # of all 8 samples, three latent-attention layers.
    a = evaluate("ideal:1,degree=1,bw=400Gbps", w, "dp=1,recompute=selective", **kw)
    b = evaluate("ideal:1,degree=1,bw=400Gbps", w,
                 "dp=1,recompute=selective,recompute_modules=mla_up_proj", **kw)
    rerun = sum(recompute_time(layer, H100, 8, {"mla_up_proj"}) for layer in w.layers)
    assert rerun > 0 and a.recompute_time_s == 0
    assert b.recompute_time_s == pytest.approx(rerun)
    assert b.iteration_time_s - a.iteration_time_s == pytest.approx(rerun)
    assert a.memory["activations_bytes"] - b.memory["activations_bytes"] == pytest.approx(
        8 * sum(layer.up_proj_saved_bytes for layer in w.layers))


def test_mla_up_proj_changes_nothing_without_latent_attention():
    w = get_workload("llama3-8b", **SMALL)
    kw = dict(hardware=H100, check_memory=False)
    a = evaluate(SYSTEM, w, "dp=8,recompute=selective", **kw)
    b = evaluate(SYSTEM, w, "dp=8,recompute=selective,recompute_modules=core_attn+mla_up_proj",
                 **kw)
    assert a.iteration_time_s == b.iteration_time_s
    assert {k: v for k, v in a.memory.items() if k != "strategy"} == \
        {k: v for k, v in b.memory.items() if k != "strategy"}


def test_up_proj_gemms_must_be_among_the_layers_gemms():
    with pytest.raises(InvalidSpecError, match="up_proj_gemms"):
        Layer("a", "attention", 1, 1.0, 2.0, 1.0, gemms=((1, 2, 3, 1, "n"),),
              up_proj_gemms=((1, 2, 4, 1, "n"),))


@pytest.mark.parametrize("mods", ["layernorm", "mlp", "moe_act", "core_attn+layernorm+mlp",
                                  "layernorm+mlp+moe_act", "mla_up_proj",
                                  "layernorm+mla_up_proj"])
def test_more_modules_less_memory_more_time(mods):
    # Contract over the modules: against plain selective, each set keeps no more
    # activations and takes no less time.
    kw = dict(hardware=H100, check_memory=False)
    for wl, base, opts in (
            ("llama3-8b", "dp=2,tp=4,sp=true,microbatches=4", {"layers": 2}),
            ("mixtral-8x7b", "dp=8,ep=8,microbatches=4", {"layers": 2}),
            ("deepseek-v3", "dp=2,tp=4,sp=true,ep=2,microbatches=4",
             {k: v for k, v in MLA.items() if k not in ("seq_len", "batch_size")})):
        w = get_workload(wl, **opts, seq_len=2048, batch_size=32)
        a = evaluate(SYSTEM, w, base + ",recompute=selective", **kw)
        b = evaluate(SYSTEM, w, base + f",recompute=selective,recompute_modules={mods}",
                     **kw)
        assert b.memory["activations_bytes"] <= a.memory["activations_bytes"]
        assert b.iteration_time_s >= a.iteration_time_s
        assert b.recompute_time_s >= a.recompute_time_s
