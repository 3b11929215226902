"""Weights kept in FP8 (strategy ``fp8_params``, Megatron-Bridge's ``fp8_param_gather``):
the grammar, the memory of each layer and ZeRO's parameter all-gathers, against closed
forms from the layers' own parameter counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload
from codesign.workloads.demand import CollectiveOp, demand_for
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.sharding import shard_layer
from codesign.workloads.strategy import (
    PRECISIONS, layer_recompute, layer_strategies, parse_strategy, stage_bounds)

H100 = get_hardware("H100")
SMALL = dict(layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000,
             seq_len=2048, batch_size=64)


@given(st.sampled_from(PRECISIONS), st.booleans())
def test_only_per_tensor_fp8_recipes_keep_fp8_weights(precision, on):
    text = f"dp=8,precision={precision},fp8_params={str(on).lower()}"
    if on and precision not in ("fp8", "fp8-cs"):
        with pytest.raises(InvalidSpecError, match="strategy fp8_params 'true'.*precision"):
            parse_strategy(text)
    else:
        s = parse_strategy(text)
        assert s.fp8_params is on
        assert parse_strategy(str(s)) == s
        assert ("fp8_params=true" in str(s)) is on


@pytest.mark.parametrize("text", ["dp=8,precision=bf16,fp8_params=true",
                                  "dp=8,precision=mxfp8,fp8_params=true",
                                  "dp=8,precision=fp8,fp8_params=1"])
def test_bad_fp8_params_name_the_field(text):
    with pytest.raises(InvalidSpecError, match="strategy fp8_params") as err:
        parse_strategy(text)
    assert "\n" not in str(err.value)


def test_weights_of_the_fp8_gemm_layers_take_one_byte():
    w = get_workload("llama3-8b", **SMALL)
    on = parse_strategy("dp=8,precision=fp8-cs,fp8_params=true")
    off = parse_strategy("dp=8,precision=fp8-cs")
    for layer in w.layers:
        sh_on, sh_off = shard_layer(layer, on), shard_layer(layer, off)
        # The transformer blocks' weights are FP8; the embedding (a lookup) and the
        # output layer (16-bit GEMM, Megatron-LM) stay at 2 bytes.
        fp8 = layer.kind != "embedding" and layer.name != "lm_head"
        assert sh_on.weight_dtype_bytes == (1 if fp8 else 2)
        assert sh_on.shared_bytes == layer.params * (1 if fp8 else 2)
        (w_on, g_on, o_on), _ = sh_on.model_state(12.0)
        (w_off, g_off, o_off), _ = sh_off.model_state(12.0)
        assert w_on == layer.params * (1 if fp8 else 2)
        assert (g_on, o_on) == (g_off, o_off)   # FP32 master weights stay in the optimizer
    blocks = sum(layer.params for layer in w.layers
                 if layer.kind != "embedding" and layer.name != "lm_head")
    m_on = memory_per_gpu(w, on, H100)
    m_off = memory_per_gpu(w, off, H100)
    assert m_off.weights_bytes - m_on.weights_bytes == pytest.approx(blocks)
    assert m_on.activations_bytes == m_off.activations_bytes


def _zero_gathers(w, text):
    d = demand_for(w, text, H100, check=False)
    return [op for op in d.op_sets if isinstance(op, CollectiveOp) and op.purpose == "zero"]


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_gathers_the_updated_weights_in_their_format(zero):
    w = get_workload("llama3-8b", **SMALL)
    base = f"dp=8,zero={zero},precision=fp8-cs,grad_precision=fp32"
    off = _zero_gathers(w, base)
    on = _zero_gathers(w, base + ",fp8_params=true")
    fp8 = sum(layer.params for layer in w.layers
              if layer.kind != "embedding" and layer.name != "lm_head")
    rest = sum(layer.params for layer in w.layers) - fp8
    assert sum(op.bytes for op in off) == pytest.approx(2 * (fp8 + rest))
    assert sum(op.bytes for op in on) == pytest.approx(fp8 + 2 * rest)
    assert len(on) == len(off)       # the same buckets


def test_zero3_gathers_each_fp8_layer_at_one_byte_per_weight():
    w = get_workload("llama3-8b", **SMALL)
    s = "dp=8,zero=3,microbatches=2,precision=fp8-cs,fp8_params=true"
    by_layer: dict[str, float] = {}
    for op in _zero_gathers(w, s):
        if op.phase == "forward":
            by_layer[op.layer] = by_layer.get(op.layer, 0.0) + op.bytes
    for layer in w.layers:
        fp8 = layer.kind != "embedding" and layer.name != "lm_head"
        assert by_layer[layer.name] == pytest.approx(layer.params * (1 if fp8 else 2))


def test_the_workloads_precision_decides_when_the_strategy_gives_none():
    from codesign.workloads.strategy import check_applicable, keeps_fp8_weights

    s = parse_strategy("dp=8,fp8_params=true")
    fp8 = get_workload("llama3-8b", **SMALL, precision="fp8-cs")
    bf16 = get_workload("llama3-8b", **SMALL)
    assert keeps_fp8_weights(fp8) and not keeps_fp8_weights(bf16)
    assert not keeps_fp8_weights(fp8, "mxfp8")
    check_applicable(fp8, s)
    with pytest.raises(InvalidSpecError, match="strategy fp8_params 'true'.*precision not given"):
        check_applicable(bf16, s)
    with pytest.raises(InvalidSpecError, match="strategy fp8_params"):
        memory_per_gpu(bf16, s, H100)


# --------------------------------------------------------------- 8-bit saved inputs
def _saved(layer, text):
    from codesign.workloads.sharding import activation_bytes_per_sample

    return activation_bytes_per_sample(layer, parse_strategy(text))


@pytest.mark.parametrize("par, split_sp, split_rest", [
    ("dp=8", 1, 1), ("dp=2,tp=4,sp=true", 4, 4), ("dp=2,tp=4", 1, 4)])
def test_8bit_gemms_keep_their_saved_inputs_in_one_byte(par, split_sp, split_rest):
    w = get_workload("llama3-8b", **SMALL)
    s, h, f = 2048, 1024, 4096
    # closed forms (bytes per sample, 2-byte model): attention saves the QKV input
    # (the norm output, s h, in the sequence-parallel part) and the projection input
    # (s x 8 heads x 128 = s h); the SwiGLU MLP its first input (s h) and second (s f)
    want = {"attention": (s * h * 2, s * h * 2), "dense": (s * h * 2, s * f * 2)}
    for layer in w.layers:
        for precision in ("fp8", "fp8-cs", "mxfp8"):
            freed = _saved(layer, f"{par},precision=bf16") - \
                _saved(layer, f"{par},precision={precision}")
            if layer.name == "lm_head" or layer.kind == "embedding":
                assert freed == 0           # a 16-bit GEMM, a lookup
                continue
            sp, rest = want[layer.kind]
            assert freed == pytest.approx(sp / 2 / split_sp + rest / 2 / split_rest)


def test_8bit_inputs_already_dropped_by_recomputation_are_not_counted_twice():
    w = get_workload("llama3-8b", **SMALL)
    attn = w.layer("block0.attn")
    s, h = 2048, 1024
    base = "dp=8,recompute=selective,recompute_modules=layernorm"
    # the norm output is the QKV input: dropped, so only the projection input halves
    assert _saved(attn, base + ",precision=bf16") - _saved(attn, base + ",precision=fp8") \
        == pytest.approx(s * h * 2 / 2)
    # full recomputation keeps the block's input only, in 16 bits
    assert _saved(attn, "dp=8,recompute=full,precision=fp8") == \
        _saved(attn, "dp=8,recompute=full,precision=bf16")
    moe_w = get_workload("mixtral-8x7b", layers=2, seq_len=1024, batch_size=8)
    moe = next(layer for layer in moe_w.layers if layer.kind == "expert")
    # top-2 copies of each token into experts of width 14336: their first inputs (h)
    # and second inputs (ffn); moe_act drops the second, so only the first halve
    s, h, f = 1024, 4096, 14336
    assert moe.gemm_in_saved_bytes == 2 * s * (h + f) * 2
    act = "dp=8,recompute=selective,recompute_modules=moe_act"
    assert _saved(moe, act + ",precision=bf16") - _saved(moe, act + ",precision=fp8-cs") \
        == pytest.approx(2 * s * h * 2 / 2)


def test_the_workloads_8bit_precision_shrinks_the_memory_as_the_strategys_does():
    a = memory_per_gpu(get_workload("llama3-8b", **SMALL, precision="fp8-cs"), "dp=8", H100)
    b = memory_per_gpu(get_workload("llama3-8b", **SMALL), "dp=8,precision=fp8-cs", H100)
    c = memory_per_gpu(get_workload("llama3-8b", **SMALL), "dp=8", H100)
    assert a.activations_bytes == b.activations_bytes < c.activations_bytes


def test_layer_strategies_carry_the_precision_the_layers_run_in():
    # One home for the rule the memory model, the demand and the search's repair
    # estimate share: the caller states the resolved format (keyword required), every
    # layer's strategy carries it beside its own recomputation mode.
    w = get_workload("llama3-8b", **SMALL, precision="fp8-cs")
    s = parse_strategy("dp=8,recompute=full,recompute_layers=1")
    names = [x.name for x in w.layers]
    stages = stage_bounds(w, s)
    got = layer_strategies(names, s, stages, precision="fp8-cs")
    assert {x.precision for x in got} == {"fp8-cs"}
    assert [x.recompute for x in got] == list(layer_recompute(names, s, stages))
    with pytest.raises(TypeError):
        layer_strategies(names, s, stages)  # type: ignore[call-arg]
