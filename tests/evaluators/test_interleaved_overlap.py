"""Data-parallel communication under the interleaved schedule: when each model chunk's
gradients are handed to the network and how much of ZeRO's parameter all-gather the
next forward passes hide (``evaluators.iteration.model``, "Gradient synchronisation",
"Optimizer")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codesign.workloads import get_hardware, get_workload
from codesign.workloads.strategy import layer_chunks, parse_strategy, stage_bounds
from evaluators.iteration.model import _chunk_grad_ready, _exposed_param_gather, evaluate


def _backward_order(m: int, pp: int, vpp: int) -> list[int]:
    """The model chunk of every backward pass of one stage, in order: Megatron-core's
    schedule table (micro-batches in groups of ``pp`` per chunk, the last group taking
    the remainder; ``get_schedule_table``), the backward walking it with the chunk
    index reversed (``get_model_chunk_id(..., forward=False)``)."""
    table = []
    for lo in range(0, m, pp):
        hi = m if lo + pp >= m else lo + pp
        table += [c for c in range(vpp) for _ in range(lo, hi)]
        if hi == m:
            break
    return [vpp - 1 - c for c in table]


@pytest.mark.parametrize("m, pp, vpp", [(8, 4, 2), (16, 8, 12), (12, 4, 3), (128, 8, 12),
                                         (10, 2, 5)])
def test_a_chunks_gradients_are_final_c_pp_chunk_backwards_before_the_end(m, pp, vpp):
    # Brute force over the schedule table: after chunk c's last backward the stage
    # still runs c * pp chunk-backwards (micro-batches a multiple of pp, as the
    # strategy requires for this schedule), the window _chunk_grad_ready gives it.
    order = _backward_order(m, pp, vpp)
    assert len(order) == m * vpp
    b, end = 0.01, 5.0
    for c in range(vpp):
        last = max(i for i, x in enumerate(order) if x == c)
        after = len(order) - 1 - last
        assert after == c * pp
        # stage 0 hands chunk c over at its last backward's end
        assert _chunk_grad_ready(end, c, pp, 0, b) == pytest.approx(end - c * pp * b)
        # a later stage p waits p more chunk-backwards, never past its own end
        for p in range(pp):
            got = _chunk_grad_ready(end, c, pp, p, b)
            assert got == pytest.approx(min(end, end - (c * pp - p) * b))


@given(st.floats(0, 10), st.floats(0, 10), st.integers(1, 16), st.integers(1, 12))
def test_interleaving_never_exposes_more_of_the_gather_than_one_chunk(g, f, pp, vpp):
    once = _exposed_param_gather(g, f, pp, 1)
    got = _exposed_param_gather(g, f, pp, vpp)
    assert once == pytest.approx(max(0.0, g - f))
    assert 0.0 <= got <= once + 1e-9
    # chunk 0 cannot hide under more than its own first forward
    assert got >= max(0.0, g / vpp - f / vpp) - 1e-9
    if pp * f >= g:          # every later chunk hides under pp forwards
        assert got == pytest.approx(max(0.0, (g - f) / vpp))


def test_layer_chunks_follow_the_stages_blocks():
    w = get_workload("gpt3-175b", layers=8, hidden=256, heads=8, ffn=1024, vocab=1000,
                     seq_len=128, positions=128, batch_size=16)
    s = parse_strategy("dp=1,pp=2,microbatches=4,schedule=interleaved,vpp=2")
    names = [x.name for x in w.layers]
    chunks = layer_chunks(names, s, stage_bounds(w, s))
    by_block = {}
    for name, c in zip(names, chunks):
        if name.startswith("block"):
            by_block.setdefault(int(name.split(".")[0][5:]), set()).add(c)
    # 8 blocks on 2 stages of 2 chunks: blocks 0-1 chunk 0, 2-3 chunk 1 (stage 0), ...
    assert by_block == {0: {0}, 1: {0}, 2: {1}, 3: {1}, 4: {0}, 5: {0}, 6: {1}, 7: {1}}
    assert chunks[0] == 0 and chunks[-1] == 1       # embedding, output layer


def test_interleaving_hides_the_gradients_of_every_chunk_but_the_last_handed_over():
    # A data-parallel reduction and gather of the order of a few micro-batches'
    # backward: without interleaving they overlap one micro-batch's backward and
    # forward; with 4 chunks on 4 stages every chunk but the last handed over has 4 and
    # more chunk-backwards (and chunk-forwards) to hide under -- under the windows of
    # the schedule without interleaving, the exposed time would stay about the same.
    w = get_workload("gpt3-175b", layers=16, hidden=2048, heads=16, ffn=8192, vocab=1000,
                     seq_len=2048, positions=2048, batch_size=64)
    hw = get_hardware("H100")
    common = "dp=2,tp=1,pp=4,microbatches=32,zero=1"
    kw = dict(hardware=hw, check_memory=False, param_gather_overlap=True)
    flat = evaluate("ideal:8,bw=100Gbps", w, common, **kw).breakdown
    inter = evaluate("ideal:8,bw=100Gbps", w, common + ",schedule=interleaved,vpp=4",
                     **kw).breakdown
    assert inter["dp_s"] > 0 and inter["zero_s"] > 0    # the last chunk stays exposed
    assert inter["dp_s"] + inter["zero_s"] < 0.6 * (flat["dp_s"] + flat["zero_s"])
