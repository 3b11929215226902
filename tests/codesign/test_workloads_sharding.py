"""The per-layer sharding rule (codesign.workloads.sharding), and that the memory check and
the demand read their per-layer numbers from it.

Oracles: conservation (the shards of a layer over its TP x CP group add up to the layer;
ZeRO's shards over the group add up to the unsharded state), Korthikanti et al. 2022
Eqs. 2, 4 and 6 by hand for a GPT block, and the demand's operations compared with the
shard's numbers op by op.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.workloads import get_workload, parse_strategy
from codesign.workloads.demand import CollectiveOp, Compute, demand_for
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.sharding import LayerShard, shard_layer
from codesign.workloads.strategy import Strategy, stage_bounds


def gpt(hidden=256, heads=8, seq=128, batch=64, **kw):
    """A small GPT with Korthikanti's assumptions (LayerNorm, dropout, no flash)."""
    return get_workload("gpt3-175b", layers=4, hidden=hidden, heads=heads, ffn=4 * hidden,
                        vocab=1000, seq_len=seq, positions=seq, batch_size=batch, **kw)


@pytest.mark.parametrize("tp, cp", [(1, 1), (2, 1), (4, 2), (8, 1), (2, 4)])
def test_shards_of_a_layer_add_up_to_the_layer(tp, cp):
    w = gpt()
    s = Strategy(dp=1, tp=tp, cp=cp)
    for layer in w.layers:
        sh = shard_layer(layer, s)
        t = (tp if layer.tp_shardable else 1) * cp
        assert sh.local.fwd_flops * t == pytest.approx(layer.fwd_flops, rel=1e-12)
        assert sh.local.bwd_flops * t == pytest.approx(layer.bwd_flops, rel=1e-12)
        assert sh.local.io_bytes * t == pytest.approx(layer.io_bytes, rel=1e-12)
        # GEMM work (2 M N K per GEMM, ``count`` of them) splits the same way.
        whole = sum(2 * m * n * k * c for m, n, k, c, _ in layer.gemms)
        part = sum(2 * m * n * k * c for m, n, k, c, _ in sh.local.gemms)
        assert part * t == pytest.approx(whole, rel=1e-12)
        # Parameters are split by TP only (CP ranks share the weights).
        tps = tp if layer.tp_shardable else 1
        assert sh.shared_params * tps == pytest.approx(layer.params, rel=1e-12)
        assert sh.expert_params == 0


def test_experts_are_divided_over_ep_and_tp():
    w = get_workload("mixtral-8x7b")
    layer = next(x for x in w.layers if x.experts)
    sh = shard_layer(layer, Strategy(dp=8, tp=2, ep=4))
    assert sh.expert_params == pytest.approx(layer.expert_params / (2 * 4))
    assert sh.shared_params == pytest.approx((layer.params - layer.expert_params) / 2)
    assert sh.local.params == round(sh.shared_params + sh.expert_params)
    assert sh.local.experts == 0


@pytest.mark.parametrize("strategy, per_token_over_h", [
    # Korthikanti et al. 2022: bytes per layer = s b h x (...); here per sample (b = 1).
    ("tp=4", lambda a, s, h, t: 10 + 24 / t + 5 * a * s / (h * t)),               # Eq. 2
    ("tp=4,sp=true", lambda a, s, h, t: (34 + 5 * a * s / h) / t),                # Eq. 4
    ("tp=4,sp=true,recompute=selective", lambda a, s, h, t: 34 / t),              # Eq. 6
])
def test_block_activations_follow_korthikanti(strategy, per_token_over_h):
    h, a, seq = 256, 8, 128
    w = gpt(hidden=h, heads=a, seq=seq)
    s = parse_strategy(f"dp=1,{strategy}")
    got = sum(shard_layer(w.layer(f"block0.{x}"), s).activation_bytes_per_sample
              for x in ("attn", "mlp"))
    assert got == pytest.approx(seq * h * per_token_over_h(a, seq, h, 4), rel=1e-12)


def test_full_recomputation_keeps_the_layer_input_and_reruns_the_forward():
    w = gpt()
    s = parse_strategy("dp=1,tp=2,sp=true,recompute=full")
    attn = shard_layer(w.layer("block0.attn"), s)
    # Only the block input (2 s h bytes), split by TP with sequence parallelism.
    assert attn.activation_bytes_per_sample == pytest.approx(2 * 128 * 256 / 2)
    assert attn.recompute_flops == attn.local.fwd_flops
    sel = shard_layer(w.layer("block0.attn"), parse_strategy("dp=1,tp=2,recompute=selective"))
    assert sel.recompute_flops == pytest.approx(w.layer("block0.attn").attn_core_fwd_flops / 2)
    assert shard_layer(w.layer("block0.mlp"), parse_strategy(
        "dp=1,tp=2,recompute=selective")).recompute_flops == 0.0


@settings(max_examples=60, deadline=None)
@given(zero=st.integers(0, 3), dp=st.sampled_from([1, 2, 4, 8]), ep=st.sampled_from([1, 2, 4]),
       tp=st.sampled_from([1, 2]))
def test_zero_shards_add_up_to_the_unsharded_state(zero, dp, ep, tp):
    w = get_workload("mixtral-8x7b")
    layer = next(x for x in w.layers if x.experts)
    if dp % ep:
        ep = 1
    s = Strategy(dp=dp, tp=tp, ep=ep, zero=zero)
    K = float(w.optimizer_bytes_per_param)
    plain = shard_layer(layer, Strategy(dp=dp, tp=tp, ep=ep))
    for part, group in enumerate(s.zero_groups):
        w_, g_, o_ = shard_layer(layer, s).model_state(K)[part]
        w0, g0, o0 = plain.model_state(K)[part]
        assert o_ * (group if zero >= 1 else 1) == pytest.approx(o0)
        assert g_ * (group if zero >= 2 else 1) == pytest.approx(g0)
        assert w_ * (group if zero >= 3 else 1) == pytest.approx(w0)
    params = plain.shared_params + plain.expert_params
    assert plain.model_state(K)[0][0] + plain.model_state(K)[1][0] == pytest.approx(
        params * layer.dtype_bytes)


def test_memory_check_reads_the_shards():
    w = gpt()
    s = parse_strategy("dp=2,tp=2,pp=2,microbatches=4,zero=1,sp=true")
    mem = memory_per_gpu(w, s, "A100-80")
    start, stop = stage_bounds(w, s)[mem.stage]
    K = float(w.optimizer_bytes_per_param)
    shards = [shard_layer(x, s) for x in w.layers[start:stop]]
    states = [sum(part[i] for sh in shards for part in sh.model_state(K)) for i in range(3)]
    assert (mem.weights_bytes, mem.gradients_bytes, mem.optimizer_bytes) == pytest.approx(
        tuple(states))
    per_sample = sum(sh.activation_bytes_per_sample for sh in shards)
    assert mem.activations_bytes == pytest.approx(
        per_sample * mem.microbatch_size * mem.inflight_microbatches)


@pytest.mark.parametrize("strategy", [
    "dp=2,tp=2,pp=2,microbatches=4,zero=3",
    "dp=2,tp=2,cp=2,microbatches=2,sp=true,recompute=full",
])
def test_demand_ops_carry_the_shard_numbers(strategy):
    w = gpt()
    s = parse_strategy(strategy)
    d = demand_for(w, s, "A100-80", check=False)
    b = d.microbatch_size
    shards = {x.name: shard_layer(x, s) for x in w.layers}
    seen = set()
    for op in d.ops:
        sh: LayerShard | None = shards.get(op.name if isinstance(op, Compute) else op.layer)
        if sh is None:
            continue
        if isinstance(op, Compute) and op.kind == "compute":
            flops = sh.local.fwd_flops if op.phase == "forward" else sh.local.bwd_flops
            assert op.flops == pytest.approx(b * flops)
            seen.add("compute")
        elif isinstance(op, Compute) and op.kind == "recompute":
            assert op.flops == pytest.approx(b * sh.recompute_flops)
            seen.add("recompute")
        elif isinstance(op, CollectiveOp) and op.purpose == "tp":
            # Backward TP ops are the backward's, or the forward's rerun by recomputation.
            sizes = {sh.tp_bytes(b, "forward")} if op.phase == "forward" else {
                sh.tp_bytes(b, "backward"), sh.tp_bytes(b, "forward")}
            assert op.bytes in sizes
            seen.add("tp")
        elif isinstance(op, CollectiveOp) and op.purpose == "zero" and op.phase != "optimizer":
            assert op.bytes == sh.shared_bytes
            seen.add("zero")
        elif isinstance(op, CollectiveOp) and op.purpose == "cp":
            assert op.bytes == sh.cp_kv_bytes(b)
            seen.add("cp")
    expected = {"compute", "tp"} | ({"zero"} if s.zero >= 3 else set()) \
        | ({"cp", "recompute"} if s.cp > 1 else set())
    assert expected <= seen
    assert math.isfinite(b) and b > 0
