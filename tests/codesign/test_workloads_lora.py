"""LoRA fine-tuning (workload settings ``lora_rank``, ``lora_modules``;
:mod:`codesign.workloads.lora`): parameters, FLOPs, memory, gradient traffic and kernel
times against closed forms computed from the model's dimensions, the settings' errors,
and a contract over the zoo's transformers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload, parse_strategy
from codesign.workloads.compute import layer_time
from codesign.workloads.demand import demand_for
from codesign.workloads.efficiency import gemm_backward_shapes, gemm_time
from codesign.workloads.lora import LORA_MODULES
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.params import Param
from codesign.workloads.registry import workload_from_dict
from codesign.workloads.sharding import shard_layer
from codesign.workloads.strategy import stage_bounds

H100 = get_hardware("H100")
# A small Llama-style model: GQA (kv_heads < heads), gated MLP, untied output layer.
L, H, HEADS, KV, F, V, S = 2, 1024, 8, 2, 4096, 32000, 2048
SMALL = dict(layers=L, hidden=H, heads=HEADS, kv_heads=KV, ffn=F, vocab=V, seq_len=S,
             batch_size=8)
Q, KVD = H, KV * (H // HEADS)     # query and key/value widths
# Inputs and outputs (k, n) of the four weight GEMMs of a block, by Megatron-core name.
SHAPES = {"linear_qkv": (H, Q + 2 * KVD), "linear_proj": (Q, H),
          "linear_fc1": (H, 2 * F), "linear_fc2": (F, H)}


def _models(rank=0, **kw):
    full = get_workload("llama3-8b", **SMALL)
    return full, get_workload("llama3-8b", **SMALL, lora_rank=rank, **kw) if rank else full


@given(st.lists(st.sampled_from(LORA_MODULES), min_size=1, unique=True))
def test_modules_parse_in_canonical_order(mods):
    p = Param("subset", choices=LORA_MODULES)
    assert p.check("f", "+".join(mods)) == tuple(m for m in LORA_MODULES if m in mods)
    assert p.check("f", list(mods)) == p.check("f", "+".join(reversed(mods)))


@pytest.mark.parametrize("mods", [("linear_qkv",), LORA_MODULES, ("linear_proj", "linear_fc2")])
@pytest.mark.parametrize("rank", [1, 16])
def test_adapter_parameters_match_r_times_k_plus_n(rank, mods):
    full, tuned = _models(rank, lora_modules="+".join(mods))
    per_block = rank * sum(k + n for m, (k, n) in SHAPES.items() if m in mods)
    assert tuned.trainable_parameters == L * per_block
    assert tuned.parameters == full.parameters + L * per_block
    assert all(layer.frozen for layer in tuned.layers)
    assert tuned.lora_modules == mods and tuned.summary()["trainable_parameters"] == L * per_block


@pytest.mark.parametrize("rank", [8, 64])
def test_training_flops_drop_the_weight_gradients_and_add_the_adapters(rank):
    full, tuned = _models(rank)
    weight_fwd = 2.0 * S * (L * sum(k * n for k, n in SHAPES.values()) + H * V)
    adapters_fwd = 2.0 * S * rank * L * sum(k + n for k, n in SHAPES.values())
    embed_bwd = full.layer("embed").bwd_flops
    assert tuned.fwd_flops_per_sample == pytest.approx(full.fwd_flops_per_sample + adapters_fwd)
    # Backward: no weight gradients (their FLOPs equal the weight GEMMs' forward), the
    # adapters trained (2x their forward), the attention core unchanged.
    assert tuned.flops_per_sample == pytest.approx(
        full.flops_per_sample - weight_fwd - embed_bwd + 3.0 * adapters_fwd)


@pytest.mark.parametrize("strategy", ["dp=8,zero=0", "dp=4,tp=2,zero=1,sp=true",
                                      "dp=2,tp=2,pp=2,microbatches=4,zero=3"])
def test_model_state_holds_gradients_and_optimizer_for_the_adapters_only(strategy):
    full, tuned = _models(16)
    s = parse_strategy(strategy)
    a, b = memory_per_gpu(full, s, H100), memory_per_gpu(tuned, s, H100)
    start, stop = stage_bounds(tuned, s)[b.stage]
    adapters = sum(shard_layer(layer, s).trainable[0] for layer in tuned.layers[start:stop])
    group = s.dp * s.cp
    assert b.gradients_bytes < 0.02 * a.gradients_bytes
    assert b.optimizer_bytes < 0.02 * a.optimizer_bytes
    assert b.weights_bytes > a.weights_bytes      # the adapters' own weights
    assert b.activations_bytes >= a.activations_bytes
    # The most loaded GPU's optimizer state: 12 bytes per adapter parameter of its stage,
    # divided by ZeRO's group.
    assert b.optimizer_bytes == pytest.approx(12.0 * adapters / (group if s.zero else 1))
    assert b.gradients_bytes == pytest.approx(2.0 * adapters / (group if s.zero >= 2 else 1))


def test_gradient_reduction_carries_the_adapters_only():
    full, tuned = _models(16)
    s = parse_strategy("dp=8")
    total = {}
    for name, w in (("full", full), ("lora", tuned)):
        d = demand_for(w, s, H100)
        ops = [op for op in d.ops if getattr(op, "purpose", "") == "dp"]
        total[name] = sum(op.bytes for op in ops)
    assert total["full"] == pytest.approx(2.0 * full.trainable_parameters)
    assert total["lora"] == pytest.approx(2.0 * tuned.trainable_parameters)


def test_frozen_gemm_backward_is_the_data_gradient_alone():
    full, tuned = _models(16, lora_modules="linear_qkv")
    mlp_full, mlp_frozen = full.layer("block0.mlp"), tuned.layer("block0.mlp")
    assert mlp_frozen.frozen and not mlp_frozen.adapter_gemms   # no fc adapters
    prof = H100.compute
    kw = dict(peak_flops=H100.peak_flops("bf16"), bandwidth_Bps=H100.memory_bandwidth_Bps,
              dtype_bytes=2, profile=prof)
    wgrad = sum(gemm_time(*gemm_backward_shapes(m * 2, n, k)[1], count=c, **kw)
                for m, n, k, c, _ in mlp_full.gemms)
    a = layer_time(mlp_full, H100, 2, dtype="bf16")
    b = layer_time(mlp_frozen, H100, 2, dtype="bf16")
    assert b.fwd_s == pytest.approx(a.fwd_s)
    assert b.bwd_s == pytest.approx(a.bwd_s - wgrad)


def test_adapters_cost_their_thin_gemms_and_the_output_add():
    full, tuned = _models(16, lora_modules="linear_qkv")
    attn, tuned_attn = full.layer("block0.attn"), tuned.layer("block0.attn")
    k, n = SHAPES["linear_qkv"]
    assert tuned_attn.adapter_gemms == ((S, 16.0, k, 1.0, ""), (S, n, 16.0, 1.0, "n"))
    add = [op for op in tuned_attn.memory_ops if op[0].startswith("lora_add")]
    assert add == [("lora_add_linear_qkv", 3.0 * 2 * S * n, 2.0 * 2 * S * n, "tp")]
    assert tuned_attn.saved_bytes == attn.saved_bytes + S * 16 * 2
    # Under TP 4 the column-parallel adapter keeps A whole and splits B's columns.
    local = shard_layer(tuned_attn, parse_strategy("dp=1,tp=4")).local
    assert local.adapter_gemms == ((S, 16.0, k, 1.0, ""), (S, n / 4, 16.0, 1.0, "n"))


def test_roofline_backward_writes_the_trained_gradients_only():
    _, tuned = _models(16)
    mlp = tuned.layer("block0.mlp")
    # A memory-bound case: one token per sample at a low efficiency is dominated by
    # reading the weights (and, trained, writing their gradients).
    t = layer_time(mlp, H100, 1e-6, efficiency=1.0, dtype="bf16")
    moved = mlp.weight_bytes + 2 * mlp.trainable_params + 2e-6 * mlp.io_bytes
    assert t.bwd_s == pytest.approx(moved / H100.memory_bandwidth_Bps)


@pytest.mark.parametrize("overrides, needle", [
    (dict(lora_modules="linear_qkv"), "lora_modules 'linear_qkv'.*lora_rank >= 1"),
    (dict(lora_rank=8, lora_modules="q_proj"), "lora_modules 'q_proj'"),
    (dict(lora_rank=8, lora_modules="linear_qkv+linear_qkv"), "lora_modules"),
    (dict(lora_rank=-1), "lora_rank -1"),
    (dict(lora_rank=1.5), "lora_rank 1.5"),
])
def test_bad_settings_name_the_field(overrides, needle):
    with pytest.raises(InvalidSpecError, match=needle):
        get_workload("llama3-8b", **SMALL, **overrides)


def test_a_model_without_transformer_blocks_is_refused():
    with pytest.raises(InvalidSpecError, match="lora_modules.*modules the model has"):
        get_workload("resnet50", lora_rank=8)


def test_model_file_and_cli_take_the_settings(capsys):
    w = workload_from_dict({"name": "ft", "base": "llama3-8b",
                            "params": {**SMALL, "lora_rank": 4,
                                       "lora_modules": "linear_qkv"}})
    assert w.lora_rank == 4 and w.trainable_parameters == L * 4 * sum(SHAPES["linear_qkv"])
    args = ["workload", "show", "llama3-8b", "--json"] + \
        [x for k, v in SMALL.items() for x in ("--option", f"{k}={v}")]
    assert main(args + ["--option", "lora_rank=4"]) == 0
    d = json.loads(capsys.readouterr()[0])
    assert d["lora_rank"] == 4 and d["trainable_parameters"] == L * 4 * sum(
        k + n for k, n in SHAPES.values())
    bad = ["--option", "lora_rank=4", "--option", "lora_modules=fc1"]
    assert main([a for a in args if a != "--json"] + bad) == 2
    err = capsys.readouterr()[1]
    assert err.strip().count("\n") == 0 and "lora_modules 'fc1'" in err


TRANSFORMERS = ["llama3-8b", "gpt3-175b", "mixtral-8x7b", "bert"]


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_contract_lora_is_cheaper_than_full_training(name):
    """On every zoo transformer: LoRA trains fewer parameters, does fewer FLOPs, needs
    less model state, and no layer's backward takes longer than when it is trained."""
    full = get_workload(name, layers=2, seq_len=512)
    tuned = get_workload(name, layers=2, seq_len=512, lora_rank=8)
    assert 0 < tuned.trainable_parameters < 0.05 * full.trainable_parameters
    assert tuned.flops_per_sample < full.flops_per_sample
    assert tuned.memory.state_bytes < full.memory.state_bytes
    s = parse_strategy("dp=1,tp=2")
    for a, b in zip(full.layers, tuned.layers):
        ta = layer_time(shard_layer(a, s).local, H100, 1)
        tb = layer_time(shard_layer(b, s).local, H100, 1)
        if not b.adapter_params:
            assert tb.bwd_s <= ta.bwd_s * (1 + 1e-12)
            assert tb.fwd_s == pytest.approx(ta.fwd_s)
