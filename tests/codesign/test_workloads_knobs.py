"""Execution knobs of the iteration model (issue 15), each against a closed form or a
hand-computed case: pipeline schedules, recomputation, sequence and context parallelism,
sharded optimizers with pipelining, precision, MoE capacity, published configurations."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import get_workload, workload_from_dict
from codesign.workloads.compute import resolve_precision
from codesign.workloads.efficiency import flash_attention_time
from codesign.workloads.hardware import get_hardware
from codesign.workloads.demand import CollectiveOp, Compute, demand_for
from codesign.workloads.memory import activation_bytes_per_sample, memory_per_gpu
from codesign.workloads.placement import Placement
from codesign.workloads.sharding import shard_layer
from codesign.workloads.strategy import (
    Strategy, bubble_fraction, inflight_microbatches, layer_recompute, parse_strategy,
    stage_bounds)

GIB = 2.0**30


def gpt(layers: int = 2, hidden: int = 256, heads: int = 8, seq: int = 128, batch: int = 16,
        **kw):
    """A small GPT (LayerNorm, biases, dropout, no flash attention): Korthikanti's model."""
    return get_workload("gpt3-175b", layers=layers, hidden=hidden, heads=heads,
                        ffn=4 * hidden, vocab=1000, seq_len=seq, positions=seq,
                        batch_size=batch, **kw)


def block_bytes(w, strategy: str) -> float:
    """Activation bytes per sample of one transformer block (attention + MLP) on a GPU."""
    s = parse_strategy(strategy)
    return sum(activation_bytes_per_sample(w.layer(f"block0.{x}"), s) for x in ("attn", "mlp"))


# --------------------------------------------------------------------------- strings
_knobs = st.builds(
    lambda dp, tp, pp, cp, v, rec, sp, zero, prec, mult, grad, cpc, n: Strategy(
        dp=dp, tp=tp, pp=pp, cp=cp, recompute=rec, sp=sp and tp > 1, zero=zero,
        recompute_layers=n if rec == "full" else None,
        precision=prec, schedule="interleaved" if v > 1 and pp > 1 else "1f1b",
        vpp=v if pp > 1 else 1, microbatches=pp * mult if pp > 1 else None,
        grad_precision=grad, cp_comm=cpc if cp > 1 else "ring"),
    st.integers(1, 32), st.integers(1, 16), st.integers(1, 16), st.integers(1, 8),
    st.integers(1, 4), st.sampled_from(["none", "selective", "full"]), st.booleans(),
    st.integers(0, 3), st.sampled_from([None, "fp32", "tf32", "bf16", "fp16", "fp8"]),
    st.integers(1, 8), st.sampled_from([None, "fp32", "bf16", "fp16"]),
    st.sampled_from(["ring", "allgather"]), st.one_of(st.none(), st.integers(1, 64)))


@given(_knobs)
@settings(max_examples=200, deadline=None)
def test_every_knob_roundtrips_through_the_string(s: Strategy) -> None:
    assert parse_strategy(str(s)) == s
    assert s.gpus == s.dp * s.tp * s.pp * s.cp


@pytest.mark.parametrize("text, field", [
    ("dp=8,sp=true", "strategy sp"),                       # SP needs TP
    ("dp=8,sp=yes", "strategy sp"),
    ("dp=8,recompute=some", "strategy recompute"),
    ("dp=8,tp=2,pp=2,vpp=2", "strategy vpp"),              # vpp needs interleaved
    ("dp=8,pp=2,schedule=interleaved", "strategy schedule"),
    ("dp=8,pp=4,microbatches=6,schedule=interleaved,vpp=2", "strategy microbatches"),
    ("dp=3,cp=2,ep=4", "strategy ep"),                 # ep divides dp x cp (6)
    ("dp=8,precision=fp64", "strategy precision"),
    ("dp=8,schedule=zb", "strategy schedule"),
    ("dp=8,grad_precision=fp8", "strategy grad_precision"),
    ("dp=8,cp=2,cp_comm=p2p", "strategy cp_comm"),
    ("dp=8,cp_comm=allgather", "strategy cp_comm"),       # nothing to gather without CP
])
def test_bad_knobs_name_the_field(text: str, field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        parse_strategy(text)


# --------------------------------------------------------------------------- schedules
def _simulate_interleaved(p: int, m: int, v: int, tf: float, tb: float):
    """Megatron-LM's interleaved 1F1B by dependency simulation (independent oracle).

    Device ``s`` holds chunks ``s, s + p, ...`` (virtual stage ``c p + s``); it runs
    ``2 (p - s - 1) + (v - 1) p`` warm-up chunk forwards, then alternates one forward and
    one backward; forward ``k`` is chunk ``(k // p) mod v`` of micro-batch ``(k // pv) p +
    k mod p``, backwards visit chunks in reverse.  Returns (makespan, peak chunk
    forwards outstanding per device).
    """
    total = m * v
    orders = []
    for s in range(p):
        warm = min(2 * (p - s - 1) + (v - 1) * p, total)
        seq = [("F", k) for k in range(warm)]
        f, b = warm, 0
        while b < total:
            if f < total:
                seq.append(("F", f))
                f += 1
            seq.append(("B", b))
            b += 1
        orders.append(seq)

    def op(kind: str, k: int, s: int) -> tuple[str, int, int]:
        c = (k // p) % v if kind == "F" else v - 1 - (k // p) % v
        return kind, c * p + s, (k // (p * v)) * p + k % p

    done: dict = {}
    pos, free, live, peak = [0] * p, [0.0] * p, [0] * p, [0] * p
    progress = True
    while progress:
        progress = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, vs, i = op(*orders[s][pos[s]], s)
                deps = []
                if kind == "F" and vs > 0:
                    deps.append(("F", vs - 1, i))
                if kind == "B":
                    deps.append(("F", vs, i))
                    if vs < p * v - 1:
                        deps.append(("B", vs + 1, i))
                if any(d not in done for d in deps):
                    break
                start = max([free[s]] + [done[d] for d in deps])
                free[s] = start + (tf if kind == "F" else tb) / v
                done[(kind, vs, i)] = free[s]
                live[s] += 1 if kind == "F" else -1
                peak[s] = max(peak[s], live[s])
                pos[s] += 1
                progress = True
    assert all(pos[s] == len(orders[s]) for s in range(p))
    return max(free), peak


@pytest.mark.parametrize("p, m, v", [(2, 4, 2), (4, 8, 2), (4, 16, 4), (8, 16, 2), (4, 4, 2)])
def test_interleaved_bubble_and_inflight_match_the_schedule(p: int, m: int, v: int) -> None:
    tf, tb = 1.0, 2.0
    makespan, peak = _simulate_interleaved(p, m, v, tf, tb)
    assert bubble_fraction(p, m, v) == pytest.approx(1 - m * (tf + tb) / makespan)
    s = Strategy(dp=1, pp=p, microbatches=m, schedule="interleaved", vpp=v)
    assert s.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))
    for stage in range(p):
        assert inflight_microbatches(s, stage) == pytest.approx(peak[stage] / v)
    # Korthikanti et al. Sec. 4.2.3: stage 0 holds p (1 + (p - 1) / (p v)) micro-batches
    # (when there are that many).
    assert inflight_microbatches(s, 0) == pytest.approx(min(m, p * (1 + (p - 1) / (p * v))))


def test_gpipe_and_1f1b_inflight() -> None:
    one = Strategy(dp=1, pp=4, microbatches=8)
    gp = Strategy(dp=1, pp=4, microbatches=8, schedule="gpipe")
    assert [inflight_microbatches(one, s) for s in range(4)] == [4, 3, 2, 1]
    assert [inflight_microbatches(gp, s) for s in range(4)] == [8, 8, 8, 8]
    assert gp.bubble_fraction == one.bubble_fraction == pytest.approx(3 / 11)


# --------------------------------------------------------------------------- activations
@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_activation_bytes_follow_korthikanti(t: int) -> None:
    """Per block and sample, 2-byte activations with dropout (Korthikanti et al. 2022):
    TP alone Eq. 2, SP Eq. 4, selective Eq. 6, full recomputation 2 s h."""
    s, h, a = 128, 256, 8
    w = gpt(seq=s, hidden=h, heads=a)
    sh = s * h
    tp = f"dp=1,tp={t}"
    sp = f"{tp},sp=true" if t > 1 else tp
    assert block_bytes(w, tp) == pytest.approx(sh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert block_bytes(w, sp) == pytest.approx(sh * (34 + 5 * a * s / h) / t)
    assert block_bytes(w, f"{sp},recompute=selective") == pytest.approx(34 * sh / t)
    assert block_bytes(w, f"{tp},recompute=selective") == pytest.approx(sh * (10 + 24 / t))
    assert block_bytes(w, f"{tp},recompute=full") == pytest.approx(2 * sh)
    assert block_bytes(w, f"{sp},recompute=full") == pytest.approx(2 * sh / t)
    # Context parallelism: each rank holds s / cp tokens.
    assert block_bytes(w, f"{sp},cp=2") == pytest.approx(sh * (34 + 5 * a * s / h) / t / 2)


def test_flash_attention_has_nothing_for_selective_to_drop() -> None:
    w = gpt(flash_attention=True)
    assert block_bytes(w, "dp=1,tp=2,sp=true") == block_bytes(
        w, "dp=1,tp=2,sp=true,recompute=selective")


def test_full_recomputation_memory_keeps_inputs_and_one_working_block() -> None:
    w = gpt(layers=4, batch=8)
    m = memory_per_gpu(w, "dp=1,tp=2,sp=true,recompute=full", "A100-80")
    s, h = 128, 256
    # Checkpoints (SP-split over tp = 2): 4 block inputs, the LM head's input (which it
    # keeps: the output layer is not recomputed) and the 8-byte token ids of the
    # embedding.
    inputs = 4 * 2 * s * h / 2 + 2 * s * h / 2 + 8 * s / 2
    block = s * h * (34 + 5 * 8 * s / h) / 2     # one block's full activations, SP
    # The last block is rerun first, after the LM head's backward freed its input.
    work = block - 2 * s * h / 2
    assert m.recompute_workspace_bytes == pytest.approx(8 * work)
    assert m.activations_bytes == pytest.approx(8 * inputs + 8 * work)


# --------------------------------------------------------------------------- recompute
def test_recompute_flops_full_and_selective() -> None:
    w = gpt(layers=2, batch=4)
    pl = Placement(servers=1, gpus_per_server=2)

    def ops(strategy: str) -> list[Compute]:
        return demand_for(w, strategy, "A100-80", pl, check=False).compute()

    base = {(o.name, o.phase): o for o in ops("dp=1,tp=2") if o.kind == "compute"}
    full = [o for o in ops("dp=1,tp=2,recompute=full") if o.kind == "recompute"]
    # Full: one more forward of every transformer block's layers (Narayanan et al.
    # SC'21 Eq. 3: 4 forward passes' worth instead of 3 for the transformer layers);
    # the output layer is not rerun (its term of the same formula, 6 B s h V, is 3).
    blocks = {n for (n, p), o in base.items() if p == "forward" and n.startswith("block")}
    assert {o.name for o in full} == blocks == {f"block{i}.{k}" for i in (0, 1)
                                                for k in ("attn", "mlp")}
    for o in full:
        assert o.flops == pytest.approx(base[(o.name, "forward")].flops)
        assert o.seconds == pytest.approx(base[(o.name, "forward")].seconds)
    in_blocks = sum(o.flops for (n, p), o in base.items() if n in blocks)
    assert (in_blocks + sum(o.flops for o in full)) / in_blocks == pytest.approx(4 / 3)
    # Selective: the attention core only, 4 s^2 h FLOPs per sample (Q K^T and softmax V),
    # split over the TP ranks.
    sel = [o for o in ops("dp=1,tp=2,recompute=selective") if o.kind == "recompute"]
    s, h, b = 128, 256, 4
    assert sorted(o.name for o in sel) == ["block0.attn", "block1.attn"]
    assert all(o.flops == pytest.approx(b * 4 * s * s * h / 2) for o in sel)


def test_partial_recomputation_picks_the_first_blocks_of_each_model_chunk() -> None:
    # 8 blocks over pp=2 stages of vpp=2 chunks: stage 0 holds blocks 0-3 as chunks
    # (0, 1) and (2, 3), stage 1 blocks 4-7; recompute_layers=1 recomputes the first
    # block of every chunk (Megatron-LM's block method): blocks 0, 2, 4 and 6.
    w = gpt(layers=8, batch=8)
    s = parse_strategy("dp=1,pp=2,microbatches=4,schedule=interleaved,vpp=2,split=layers,"
                       "recompute=full,recompute_layers=1")
    modes = dict(zip((x.name for x in w.layers),
                     layer_recompute([x.name for x in w.layers], s, stage_bounds(w, s))))
    full = sorted({n.split(".")[0] for n, mode in modes.items() if mode == "full"})
    assert full == ["block0", "block2", "block4", "block6"]
    assert modes["embed"] == modes["lm_head"] == "none"
    assert all(modes[f"block{i}.attn"] == modes[f"block{i}.mlp"] for i in range(8))
    # Without interleaving the stage is one chunk: its first two blocks with N = 2.
    s1 = parse_strategy("dp=1,pp=2,microbatches=4,split=layers,recompute=full,"
                        "recompute_layers=2")
    modes = layer_recompute([x.name for x in w.layers], s1, stage_bounds(w, s1))
    full = sorted({x.name.split(".")[0] for x, mode in zip(w.layers, modes) if mode == "full"})
    assert full == ["block0", "block1", "block4", "block5"]


def test_partial_recomputation_trades_memory_for_time_between_none_and_full() -> None:
    # Each more recomputed block: one more block forward in the backward pass and one
    # block's activations (less its checkpoint) fewer per micro-batch in flight.  No
    # working block while a kept block follows the recomputed ones (its backward frees
    # what rerunning one builds), so all but one recomputed needs the memory of all
    # recomputed (here the LM head's input, freed before the last block is rerun, equals
    # a block's checkpoint); N at least the blocks per stage is full recomputation.
    w = gpt(layers=4, hidden=512, seq=256, batch=8)
    pl = Placement(servers=1, gpus_per_server=1)
    base = "dp=1,microbatches=8"

    def cost(strategy: str) -> tuple[float, float, int]:
        d = demand_for(w, strategy, "A100-80", pl, check=False)
        rec = [o for o in d.compute() if o.kind == "recompute"]
        return d.memory.activations_bytes, sum(o.seconds for o in rec), len(rec)

    none = cost(base)
    full = cost(base + ",recompute=full")
    parts = [cost(f"{base},recompute=full,recompute_layers={n}") for n in (1, 2, 3, 4, 9)]
    assert parts[-1] == parts[-2] == full
    assert [p[2] for p in parts] == [2, 4, 6, 8, 8]       # attention + MLP per block
    one_block = parts[0][1]
    assert [p[1] for p in parts] == pytest.approx([one_block * k for k in (1, 2, 3, 4, 4)])
    keep = block_bytes(w, "dp=1")                      # per sample, no recomputation
    ckpt = block_bytes(w, "dp=1,recompute=full")
    memory = [none[0]] + [p[0] for p in parts[:3]]     # 1 sample per micro-batch
    assert [a - b for a, b in zip(memory, memory[1:])] == pytest.approx([keep - ckpt] * 3)
    assert full[0] == pytest.approx(parts[2][0])


@pytest.mark.parametrize("text, field", [
    ("dp=1,recompute_layers=2", "recompute_layers"),
    ("dp=1,recompute=selective,recompute_layers=2", "recompute_layers"),
    ("dp=1,recompute=full,recompute_layers=0", "recompute_layers"),
    ("dp=1,recompute=full,recompute_layers=-1", "recompute_layers")])
def test_recompute_layers_needs_full_recomputation_and_a_count(text: str, field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        parse_strategy(text)


# --------------------------------------------------------------------------- SP and CP
@pytest.mark.parametrize("seq, strategy, ok", [
    (4, "dp=1,tp=8,sp=true", False), (8, "dp=1,tp=8,sp=true", True),
    (12, "dp=1,tp=4,cp=2,sp=true", False), (16, "dp=1,tp=4,cp=2,sp=true", True),
    (4, "dp=1,tp=8", True)])
def test_sequence_parallelism_needs_tokens_for_every_tp_rank(seq, strategy, ok) -> None:
    # Each TP rank holds seq / (cp x tp) tokens of the norms and dropouts (Korthikanti et
    # al. Sec. 4.2.2); fewer tokens than ranks was timed as if they split.
    w = gpt(seq=seq, batch=8)
    pl = Placement(servers=1, gpus_per_server=8)
    if ok:
        demand_for(w, strategy, "A100-80", pl, check=False)
    else:
        with pytest.raises(InvalidSpecError, match=r"strategy sp 'true': expected false, or "
                                                   r"tp\*cp \(8\) dividing"):
            demand_for(w, strategy, "A100-80", pl, check=False)


def test_sequence_parallelism_replaces_the_tp_allreduce() -> None:
    w = gpt(batch=4)
    pl = Placement(servers=1, gpus_per_server=2)
    tp = [o for o in demand_for(w, "dp=1,tp=2", "A100-80", pl).collectives()
          if o.purpose == "tp"]
    sp = [o for o in demand_for(w, "dp=1,tp=2,sp=true", "A100-80", pl).collectives()
          if o.purpose == "tp"]
    assert {o.kind for o in tp} == {"allreduce"}
    assert {o.kind for o in sp} == {"reducescatter", "allgather"}
    # Same ring volume: RS + AG of S bytes = AR of S bytes (2 (n-1)/n S per member),
    # plus the backward re-gather of every sub-layer's sequence-split input for its
    # weight gradient (Korthikanti et al. Sec. 4.2.2): one more all-gather per forward
    # one of the transformer sub-layers; the output layer (no forward collective) and
    # the embedding (no backward one) have none.
    blocks = {f"block{i}.{k}" for i in (0, 1) for k in ("attn", "mlp")}
    fwd_ag = [o for o in sp if o.phase == "forward" and o.kind == "allgather"
              and o.layer in blocks]
    bwd_ag = [o for o in sp if o.phase == "backward" and o.kind == "allgather"]
    bwd_rs = [o for o in sp if o.phase == "backward" and o.kind == "reducescatter"]
    assert {o.layer for o in fwd_ag} == blocks
    assert len(bwd_ag) == len(bwd_rs) + len(fwd_ag)
    assert sum(o.bytes for o in sp) == pytest.approx(2 * sum(o.bytes for o in tp)
                                                     + sum(o.bytes for o in fwd_ag))


@pytest.mark.parametrize("overlap", [False, "backward", True])
def test_sequence_parallel_regather_is_hidden_only_by_full_overlap(overlap) -> None:
    # The re-gather precedes the weight-gradient GEMM that needs it, so Megatron's
    # asynchronous backward overlap ("backward") cannot hide it; full TP overlap shares
    # the pass's compute among all three backward collectives.
    w = gpt(batch=4)
    pl = Placement(servers=1, gpus_per_server=2)
    d = demand_for(w, "dp=1,tp=2,sp=true", "A100-80", pl, tp_comm_overlap=overlap)
    bwd = {o.name: o.seconds for o in d.compute() if o.phase == "backward"}
    for layer in ("block0.attn", "block1.mlp"):
        ops = [o for o in d.collectives() if o.purpose == "tp" and o.layer == layer
               and o.phase == "backward"]
        assert [o.kind for o in ops] == ["reducescatter", "allgather", "allgather"]
        want = {False: [0, 0, 0], "backward": [bwd[layer] / 4] * 2 + [0],
                True: [bwd[layer] / 3] * 3}[overlap]
        assert [o.hidden_s for o in ops] == pytest.approx(want)


def test_context_parallel_ring_exchange_and_work_split() -> None:
    s_len, h, b = 128, 256, 4
    w = gpt(batch=b, seq=s_len, hidden=h)
    pl = Placement(servers=1, gpus_per_server=4)
    d = demand_for(w, "dp=2,cp=2", "A100-80", pl)
    cp = [o for o in d.collectives() if o.purpose == "cp"]
    # Per attention layer: forward all-gather of every rank's K and V (2 s h bytes per
    # sample, MHA), backward all-gather + reduce-scatter of their gradients; groups are
    # the cp = 2 neighbours on the data axis.
    kv = (b / 2) * 2 * s_len * h * 2
    assert {(o.phase, o.kind) for o in cp} == {("forward", "allgather"),
                                                ("backward", "allgather"),
                                                ("backward", "reducescatter")}
    assert all(o.bytes == pytest.approx(kv) for o in cp)
    assert {o.members for o in cp} == {(0, 1), (2, 3)}
    assert all(0 < o.hidden_s for o in cp)
    # Each CP rank computes half of its replica's tokens; gradients over dp x cp ranks.
    one = demand_for(w, "dp=2", "A100-80", Placement(servers=1, gpus_per_server=2))
    f = {o.name: o.flops for o in d.compute() if o.phase == "forward" and o.kind == "compute"}
    f1 = {o.name: o.flops for o in one.compute()
          if o.phase == "forward" and o.kind == "compute"}
    assert all(f[n] == pytest.approx(f1[n] / 2) for n in f1)
    grads = [o for o in d.collectives() if o.phase == "gradient"]
    assert {o.members for o in grads} == {(0, 1, 2, 3)}


def test_context_parallel_allgather_is_exposed_and_runs_one_kernel_over_all_keys() -> None:
    # Llama 3's CP (Sec. 3.3.2): K/V all-gathered before the attention, so nothing hides
    # the exchange; the fused kernel then loops over all s keys, not a ring's s / cp.
    w = gpt(batch=4, seq=4096, hidden=1024, heads=8, flash_attention=True, dropout=False)
    pl = Placement(servers=1, gpus_per_server=8)
    ring = demand_for(w, "dp=2,cp=4", "H100", pl)
    ag = demand_for(w, "dp=2,cp=4,cp_comm=allgather", "H100", pl)
    cp_ring = [o for o in ring.collectives() if o.purpose == "cp"]
    cp_ag = [o for o in ag.collectives() if o.purpose == "cp"]
    assert [(o.kind, o.bytes) for o in cp_ag] == [(o.kind, o.bytes) for o in cp_ring]
    assert all(o.hidden_s > 0 for o in cp_ring) and all(o.hidden_s == 0 for o in cp_ag)
    s = parse_strategy("dp=2,cp=4,cp_comm=allgather")
    attn = w.layer("block0.attn")
    assert shard_layer(attn, s).local.attn_keys == 4096
    assert shard_layer(attn, parse_strategy("dp=2,cp=4")).local.attn_keys == 1024
    # Same FLOPs either way; a kernel over 32 key blocks pays fewer per-tile costs than
    # one over 8 (efficiency.flash_attention_time): the forward differs by exactly that.
    hw = get_hardware("H100")
    flops = 2 * shard_layer(attn, s).local.attn_core_fwd_flops    # 2 samples per rank
    fa = [flash_attention_time(flops, keys, causal=True, peak_flops=hw.peak_flops("bf16"),
                               profile=hw.compute)[0] for keys in (1024, 4096)]
    attn_s = [next(o.seconds for o in d.compute() if o.name == "block0.attn"
                   and o.phase == "forward" and 0 in o.ranks) for d in (ring, ag)]
    assert fa[0] > fa[1]
    assert attn_s[0] - attn_s[1] == pytest.approx(fa[0] - fa[1], rel=1e-9)


def test_cp_needs_attention_and_a_divisible_sequence() -> None:
    with pytest.raises(InvalidSpecError, match="strategy cp"):
        memory_per_gpu(gpt(seq=130), "dp=1,cp=2", "A100-80")   # 130 % 4 != 0
    with pytest.raises(InvalidSpecError, match="strategy cp"):
        memory_per_gpu(get_workload("resnet50"), "dp=256,cp=2", "A100-80")


# --------------------------------------------------------------------------- ZeRO with PP
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_sharded_optimizer_with_pipelining_by_hand(zero: int) -> None:
    w = workload_from_dict({
        "name": "tiny", "batch_size": 64, "dtype_bytes": 2, "optimizer_bytes_per_param": 12,
        "layers": [{"name": f"fc{i}", "kind": "dense", "params": 1_000_000,
                    "fwd_flops": 1e6, "activation_bytes": 100} for i in range(4)]})
    m = memory_per_gpu(w, f"dp=4,pp=2,zero={zero}", "A100-80")
    psi, n = 2e6, 4                          # two layers per stage, ZeRO over dp = 4
    assert m.weights_bytes == pytest.approx(2 * psi / (n if zero >= 3 else 1))
    assert m.gradients_bytes == pytest.approx(2 * psi / (n if zero >= 2 else 1))
    assert m.optimizer_bytes == pytest.approx(12 * psi / (n if zero >= 1 else 1))
    d = demand_for(w, f"dp=4,pp=2,zero={zero}", "A100-80",
                   Placement(servers=8, gpus_per_server=1))
    grads = [o for o in d.collectives() if o.phase == "gradient"]
    assert {o.kind for o in grads} == {"allreduce" if zero == 0 else "reducescatter"}
    # ZeRO-2/3 reduce-scatter every micro-batch (no local accumulation), ZeRO-3 gathers
    # parameters for every micro-batch's forward and backward.
    assert {o.repeat for o in grads} == {d.microbatches if zero >= 2 else 1}
    gathers = [o for o in d.collectives() if o.purpose == "zero" and o.phase != "optimizer"]
    assert bool(gathers) == (zero == 3)


def _tiny(dtype: int = 2):
    return workload_from_dict({
        "name": "tiny", "batch_size": 64, "dtype_bytes": dtype, "optimizer_bytes_per_param": 12,
        "layers": [{"name": f"fc{i}", "kind": "dense", "params": 1_000_000,
                    "fwd_flops": 1e6, "activation_bytes": 100} for i in range(4)]})


@pytest.mark.parametrize("d", [1, 4, 64])
def test_fp32_gradients_match_megatrons_bytes_per_parameter(d: int) -> None:
    # Megatron-LM's distributed-optimizer guide (docs/source/distrib_optimizer.md at commit
    # f2e5db4): "float16 param, fp32 grads" take 18 bytes per parameter with Adam, and
    # 6 + 12 / d with the distributed optimizer (ZeRO-1) over d data-parallel ranks.
    w = _tiny()
    plain = memory_per_gpu(w, f"dp={d},grad_precision=fp32", "A100-80")
    dist = memory_per_gpu(w, f"dp={d},zero=1,grad_precision=fp32", "A100-80")
    per = lambda m: (m.weights_bytes + m.gradients_bytes + m.optimizer_bytes) / 4e6  # noqa: E731
    assert per(plain) == pytest.approx(18)
    assert per(dist) == pytest.approx(6 + 12 / d)
    # bf16 gradients (the default for a 2-byte model) keep 2 bytes
    assert per(memory_per_gpu(w, f"dp={d}", "A100-80")) == pytest.approx(16)


@pytest.mark.parametrize("zero", [0, 1, 3])
def test_fp32_gradients_double_the_reduction_not_the_weight_gather(zero: int) -> None:
    w = _tiny()
    pl = Placement(servers=4, gpus_per_server=1)
    base = demand_for(w, f"dp=4,zero={zero}", "A100-80", pl)
    fp32 = demand_for(w, f"dp=4,zero={zero},grad_precision=fp32", "A100-80", pl)

    def total(d, phase):
        return sum(o.bytes * o.repeat for o in d.collectives() if o.phase == phase)
    # every parameter's gradient reduced once, 4 bytes instead of 2
    assert total(base, "gradient") == pytest.approx(4e6 * 2)
    assert total(fp32, "gradient") == pytest.approx(4e6 * 4)
    for phase in ("forward", "backward", "optimizer"):   # weights stay bf16
        assert total(fp32, phase) == pytest.approx(total(base, phase))
    assert (total(base, "optimizer") > 0) == (zero == 1)
    # the optimizer step reads 4-byte gradients: 2 K + 2 d + g bytes per local parameter
    n = 4e6 / (4 if zero else 1)
    (step,) = [o for o in fp32.compute() if o.kind == "optimizer"]
    assert step.seconds == pytest.approx(n * (24 + 4 + 4) / 2039e9, rel=1e-9)


def test_optimizer_step_is_memory_bound_over_the_shard() -> None:
    w = gpt(batch=8)
    d = demand_for(w, "dp=4,zero=1", "A100-80", Placement(servers=4, gpus_per_server=1))
    step = [o for o in d.compute() if o.kind == "optimizer"]
    assert len(step) == 1
    # (2 K + 3 d) bytes per local parameter at HBM bandwidth (Adam, K = 12; bf16 d = 2).
    expected = w.parameters / 4 * (2 * 12 + 3 * 2) / 2039e9
    assert step[0].seconds == pytest.approx(expected, rel=1e-9)


# --------------------------------------------------------------------------- precision
def test_precision_defaults_and_overrides() -> None:
    resnet = get_workload("resnet50")           # 4-byte (FlexFlow FP32 in TopoOpt)
    assert resolve_precision(resnet, "A100-80") == "tf32"
    assert resolve_precision(resnet, "V100") == "fp32"   # no TF32 tensor cores
    assert resolve_precision(get_workload("llama3-8b"), "H100") == "bf16"
    assert resolve_precision(resnet, "A100-80", "fp32") == "fp32"
    with pytest.raises(InvalidSpecError, match="precision"):
        resolve_precision(get_workload("llama3-8b"), "A100-80", "fp8")
    # TF32 runs the convolutions at 156 instead of 19.5 TFLOP/s: 8x faster compute.
    w = resnet.with_batch(512)
    pl = Placement(servers=4, gpus_per_server=1)
    tf32 = sum(o.seconds for o in demand_for(w, "dp=4", "A100-80", pl).compute()
               if o.kind == "compute")
    fp32 = sum(o.seconds for o in demand_for(w, "dp=4,precision=fp32", "A100-80", pl).compute()
               if o.kind == "compute")
    assert 4 < fp32 / tf32 <= 8


# --------------------------------------------------------------------------- MoE
def test_moe_capacity_factor_and_shared_experts() -> None:
    kw = dict(layers=1, hidden=256, heads=8, kv_heads=8, ffn=512, vocab=1000, seq_len=64,
              experts=8, top_k=2, batch_size=8)
    base = get_workload("mixtral-8x7b", **kw).layer("block0.mlp")
    cf = get_workload("mixtral-8x7b", capacity_factor=1.25, **kw).layer("block0.mlp")
    shared = get_workload("mixtral-8x7b", shared_experts=1, **kw).layer("block0.mlp")
    one_expert = base.expert_params // 8
    router = 2.0 * 256 * 8 * 64
    assert cf.fwd_flops - router == pytest.approx(1.25 * (base.fwd_flops - router))
    assert cf.ep_alltoall_bytes == pytest.approx(1.25 * base.ep_alltoall_bytes)
    assert shared.params - base.params == one_expert
    assert shared.expert_params == base.expert_params      # replicated, not expert-sharded
    assert shared.fwd_flops - base.fwd_flops == pytest.approx((base.fwd_flops - router) / 2)


def _moe(**extra):
    return get_workload("mixtral-8x7b", layers=1, hidden=256, heads=8, kv_heads=8, ffn=512,
                        vocab=1000, seq_len=64, experts=8, top_k=2, batch_size=8, **extra)


def test_folded_experts_reach_expert_parallelism_beyond_dp() -> None:
    # tp=4, dp=2 on 8 GPUs: without folding ep divides dp (at most 2); with etp=1 the
    # expert layer folds the 8 ranks into ep=8, one whole expert per GPU (Liu et al.
    # 2025, "MoE parallel folding").
    with pytest.raises(InvalidSpecError, match="strategy ep.*etp=1"):
        parse_strategy("dp=2,tp=4,ep=8")
    with pytest.raises(InvalidSpecError, match="strategy etp"):
        parse_strategy("dp=2,tp=4,sp=true,ep=4,etp=2")
    with pytest.raises(InvalidSpecError, match="strategy etp.*sp=true"):
        parse_strategy("dp=2,tp=4,ep=8,etp=1")
    s = parse_strategy("dp=2,tp=4,sp=true,ep=8,etp=1")
    assert (s.expert_tp, s.expert_dp) == (1, 1)
    assert str(s) == "dp=2,tp=4,pp=1,ep=8,etp=1,sp=true"
    w = _moe()
    layer = w.layer("block0.mlp")
    sh = shard_layer(layer, s)
    one_expert = layer.expert_params / 8
    router_and_norm = layer.params - layer.expert_params
    assert sh.params == pytest.approx((router_and_norm / 4, one_expert))
    # The expert GEMMs of one GPU: its one expert whole (N, K unsplit), fed with the
    # tokens of 8 ranks that each hold 1/4 of a sample (sequence parallelism): 2 x a
    # sample's tokens per expert; the FLOPs per GPU are the unfolded 1/tp share.
    unfolded = shard_layer(layer, parse_strategy("dp=2,tp=4,sp=true,ep=2"))
    for (m, n, k, c, tag), (m0, n0, k0, c0, _) in zip(sh.local.gemms, layer.gemms):
        if tag in ("en", "ek"):
            assert (m, n, k, c) == pytest.approx((m0 * 8 / 4, n0, k0, c0 / 8))
    assert sh.local.fwd_flops == pytest.approx(unfolded.local.fwd_flops)
    # No TP collective for the routed experts; the attention keeps its.
    pl = Placement(servers=1, gpus_per_server=8)
    tp_layers = {o.layer for o in demand_for(w, s, "H100", pl, check=False).collectives()
                 if o.purpose == "tp"}
    assert "block0.attn" in tp_layers and "block0.mlp" not in tp_layers
    ep = [o for o in demand_for(w, s, "H100", pl, check=False).collectives()
          if o.purpose == "ep"]
    assert ep and all(o.members == tuple(range(8)) for o in ep)
    # A shared expert is split like the dense layers and keeps its TP collective.
    shared = _moe(shared_experts=1)
    tp_layers = {o.layer for o in demand_for(shared, s, "H100", pl, check=False).collectives()
                 if o.purpose == "tp"}
    assert "block0.mlp" in tp_layers


def test_folded_expert_groups_follow_megatron_rank_order() -> None:
    # etp=1 over tp=2 x dp=4 (TP index fastest): ep=4 takes 4 consecutive ranks, the
    # expert-data-parallel replicas are 4 apart; unfolded, ep=2 pairs DP indices per TP
    # index as before.
    s = parse_strategy("dp=4,tp=2,sp=true,ep=4,etp=1")
    pl = Placement.for_strategy(s, 8)
    assert pl.ep_groups(s, 0) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert pl.expert_dp_groups(s, 0) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert s.zero_groups == (1, 1) and replace(s, zero=1).zero_groups == (4, 2)
    u = parse_strategy("dp=4,tp=2,ep=2")
    assert pl.ep_groups(u, 0) == [(0, 2), (4, 6), (1, 3), (5, 7)]
    assert pl.expert_dp_groups(u, 0) == [(0, 4), (2, 6), (1, 5), (3, 7)]


# --------------------------------------------------------------------------- published
def _megatron(name: str):
    """Korthikanti et al. 2022 Table 3 (and Narayanan et al. SC'21 Table 1) models on
    DGX A100 80 GB: TP 8, micro-batch 1, sequence 2048."""
    if name == "175B":
        return gpt3(96, 12288, 96, 64), "dp=1,tp=8,pp=8,microbatches=64"
    if name == "530B":
        return gpt3(105, 20480, 128, 280), "dp=1,tp=8,pp=35,microbatches=280"
    return get_workload("transformer-1t", batch_size=512), "dp=1,tp=8,pp=64,microbatches=512"


def gpt3(layers: int, hidden: int, heads: int, batch: int):
    return get_workload("gpt3-175b", layers=layers, hidden=hidden, heads=heads,
                        ffn=4 * hidden, batch_size=batch)


@pytest.mark.parametrize("name", ["175B", "530B", "1T"])
def test_megatron_configurations_fit_only_with_their_recomputation(name: str) -> None:
    w, strategy = _megatron(name)
    assert not memory_per_gpu(w, strategy, "A100-80").fits
    assert memory_per_gpu(w, f"{strategy},sp=true,recompute=selective", "A100-80").fits
    assert memory_per_gpu(w, f"{strategy},recompute=full", "A100-80").fits


def test_llama3_405b_published_configuration_fits_with_sharding() -> None:
    """Grattafiori et al. 2024 Table 4: 8,192 H100, TP 8, CP 1, PP 16, DP 64, 16M-token
    batches (32 sequences of 8192 per DP replica); FSDP-style sharding of optimizer state
    and gradients (Sec. 3.3.2), no activation checkpointing at 8K sequences."""
    w = get_workload("llama3-405b")
    published = "dp=64,tp=8,pp=16,microbatches=32,sp=true"
    assert not memory_per_gpu(w, published, "H100").fits          # 114.9 GiB
    assert not memory_per_gpu(w, "dp=64,tp=8,pp=16,microbatches=32", "H100").fits
    fit = memory_per_gpu(w, f"{published},zero=2", "H100")
    assert fit.fits and 60 * GIB < fit.total_bytes < 80 * GIB


# --------------------------------------------------------------------------- collectives
def test_cp_collectives_are_ring_kinds() -> None:
    d = demand_for(gpt(batch=4), "dp=1,cp=2", "A100-80",
                   Placement(servers=1, gpus_per_server=2))
    assert all(isinstance(o, CollectiveOp) for o in d.collectives())
    assert any(o.purpose == "cp" for o in d.collectives())


@pytest.mark.parametrize("sp", [False, True])
def test_backward_tp_overlap_hides_only_the_backward_collectives(sp: bool) -> None:
    # Megatron-LM's asynchronous TP all-reduce (Korthikanti et al. 2022, Sec. 6.2): the
    # input gradient's collective runs under the weight-gradient GEMMs, half of the
    # layer's backward time; forward (and recomputed-forward) collectives stay exposed.
    w = gpt()
    pl = Placement(servers=1, gpus_per_server=4)
    strat = f"dp=1,tp=4,microbatches=2,recompute=full,sp={'true' if sp else 'false'}"
    off = demand_for(w, strat, "A100-80", pl)
    on = demand_for(w, strat, "A100-80", pl, tp_comm_overlap="backward")
    full = demand_for(w, strat, "A100-80", pl, tp_comm_overlap=True)
    bwd = {o.name: o.seconds for o in on.compute()
           if o.phase == "backward" and o.kind == "compute"}
    kinds = 2 if sp else 1
    tp_on = [o for o in on.collectives() if o.purpose == "tp"]
    tp_off = [o for o in off.collectives() if o.purpose == "tp"]
    assert [(o.phase, o.kind, o.bytes) for o in tp_on] == \
        [(o.phase, o.kind, o.bytes) for o in tp_off]
    fwd_ones = [o for o in tp_on if o.phase == "forward"]
    assert fwd_ones and all(o.hidden_s == 0 for o in tp_off + fwd_ones)
    # The backward phase also holds the recomputed forward's collectives (unhidden).
    hidden = [o for o in tp_on if o.phase == "backward" and o.hidden_s > 0]
    assert hidden and all(o.hidden_s == pytest.approx(bwd[o.layer] / 2 / kinds)
                          for o in hidden)
    rerun = {o.layer for o in tp_on if o.phase == "backward" and o.hidden_s == 0}
    assert rerun and rerun <= {o.layer for o in fwd_ones}
    # True hides every pass under its whole compute: at least as much as "backward".
    assert sum(o.hidden_s for o in full.collectives()) > sum(o.hidden_s for o in tp_on)


def test_tp_comm_overlap_rejects_other_values() -> None:
    with pytest.raises(InvalidSpecError, match="tp_comm_overlap.*true, false or backward"):
        demand_for(gpt(), "dp=1,tp=4", "A100-80", Placement(servers=1, gpus_per_server=4),
                   tp_comm_overlap="forward")


def _attention_core_fwd_ratio(variant: dict) -> float:
    """Forward seconds of one llama3-8b block's fused attention kernel (s = 8192) with
    the hyper-parameters ``variant``, over those of full causal attention."""
    from codesign.workloads.compute import layer_time
    kw = dict(layers=1, seq_len=8192, batch_size=8)
    hw = get_hardware("H100")

    def core(w) -> float:
        attn = w.layer("block0.attn")
        t = layer_time(attn, hw, 1)
        proj = layer_time(replace(attn, attn_core_fwd_flops=0.0), hw, 1)
        return t.fwd_s - proj.fwd_s

    return core(get_workload("llama3-8b", **variant, **kw)) / core(
        get_workload("llama3-8b", **kw))


def test_sliding_window_attention_time_and_context_parallelism() -> None:
    # The fused kernel's time follows the band: at s = 8192 a 1024-token window is
    # about 2 x 1024 / 8192 of the causal kernel's work, plus its per-tile costs;
    # context parallelism over a window is refused, naming cp.
    ratio = _attention_core_fwd_ratio(dict(window=1024))
    pairs = (8192 * 1024 - 1024 * 1023 / 2) / (8192 * 8193 / 2)
    assert pairs < ratio < 1.5 * pairs
    with pytest.raises(InvalidSpecError, match="strategy cp"):
        memory_per_gpu(get_workload("llama3-8b", window=1024), "dp=2,cp=2", "H100")


def test_packed_documents_attention_time_and_context_parallelism() -> None:
    # Packed documents of 256 tokens in an 8192-token sequence: the fused kernel does
    # (256 + 1) / (8192 + 1) of the causal work, plus a tile cost per document (two
    # blocks of 128 keys each: the diagonal blocks weigh more); context parallelism
    # over packed documents is refused, naming cp.
    ratio = _attention_core_fwd_ratio(dict(doc_len=256))
    pairs = 257 / 8193
    # The scores count s x 256 against s x 8192 (the full-attention convention), and
    # efficiency.flash_attention_time stretches a causal forward by (n + 1 + 2) / n for
    # n blocks of 128 keys: 2 per document, 64 for the whole sequence.
    tiles = ((2 + 3) / 2) / ((64 + 3) / 64)
    assert ratio == pytest.approx(256 / 8192 * tiles, rel=1e-9)
    assert pairs < ratio < 3 * pairs
    with pytest.raises(InvalidSpecError, match="strategy cp.*packed documents"):
        memory_per_gpu(get_workload("llama3-8b", doc_len=256), "dp=2,cp=2", "H100")
