"""Activation offloading to host memory (strategy ``offload_layers``, Megatron-core's
``cpu_offloading_num_layers``): which layers, what the GPU and the host hold, what the
copies expose.  Oracles: a brute-force chunk walk, closed forms from the per-layer
activation bytes and pass times, the hardware's host memory and link."""

from __future__ import annotations

from dataclasses import replace

import pytest

from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload
from codesign.workloads.compute import layer_time
from codesign.workloads.memory import memory_per_gpu
from codesign.workloads.placement import Placement
from codesign.workloads.sharding import shard_layer
from codesign.workloads.strategy import (
    layer_offload, layer_strategies, parse_strategy, recompute_ladder, stage_bounds)
from evaluators.iteration import evaluate


def gpt(layers: int = 6, batch: int = 16):
    return get_workload("gpt3-175b", layers=layers, hidden=256, heads=8, ffn=1024,
                        vocab=1000, seq_len=128, positions=128, batch_size=batch,
                        flash_attention=True)


def test_strategy_string_rules() -> None:
    s = parse_strategy("dp=8,offload_layers=3")
    assert s.offload_layers == 3 and str(s) == "dp=8,tp=1,pp=1,offload_layers=3"
    assert parse_strategy(str(s)) == s
    with pytest.raises(InvalidSpecError, match="offload_layers.*recompute=selective"):
        parse_strategy("dp=8,recompute=selective,offload_layers=3")
    with pytest.raises(InvalidSpecError, match="offload_layers"):
        parse_strategy("dp=8,offload_layers=0")
    w = gpt(layers=6)
    with pytest.raises(InvalidSpecError, match="fewer than the transformer blocks.*3 in"):
        memory_per_gpu(w, "dp=2,pp=2,microbatches=2,offload_layers=3", "GB200-NVL72")
    # The search's recomputation ladder keeps offloading with "none" only.
    ladder = recompute_ladder(w, parse_strategy("dp=2,offload_layers=2"))
    assert {x.offload_layers for x in ladder if x.recompute == "none"} == {2}
    assert all(x.offload_layers is None for x in ladder if x.recompute != "none")


@pytest.mark.parametrize("strategy", ["dp=2,offload_layers=2",
                                      "dp=1,pp=2,microbatches=4,split=layers,offload_layers=2",
                                      "dp=1,pp=2,microbatches=4,schedule=interleaved,vpp=2,"
                                      "split=layers,offload_layers=1"])
def test_the_first_blocks_of_every_model_chunk_are_offloaded(strategy: str) -> None:
    # Brute force: walk each stage's blocks in vpp equal chunks, mark the first N.
    w = gpt(layers=8)
    s = parse_strategy(strategy)
    names = [x.name for x in w.layers]
    stages = stage_bounds(w, s)
    got = layer_offload(names, s, stages)
    for start, stop in stages:
        blocks = sorted({n.split(".")[0] for n in names[start:stop] if "." in n},
                        key=lambda b: int(b[5:]))
        per = len(blocks) // s.vpp
        want = {b for c in range(s.vpp) for b in blocks[c * per:c * per + s.offload_layers]}
        for i in range(start, stop):
            assert got[i] == (names[i].split(".")[0] in want)


def test_memory_moves_the_offloaded_activations_to_the_host() -> None:
    # One micro-batch in flight: the GPU keeps the other blocks' activations, or one
    # offloaded layer in transit beside the first kept one if that is more; the host
    # the offloaded ones (closed form from the sharded layers).
    w = gpt(layers=6)
    base, off = "dp=2,microbatches=2", "dp=2,microbatches=2,offload_layers=4"
    hw = "GB200-NVL72"
    s = parse_strategy(off)
    names = [x.name for x in w.layers]
    stages = stage_bounds(w, s)
    flags = layer_offload(names, s, stages)
    acts = [shard_layer(x, ls).activation_bytes_per_sample
            for x, ls in zip(w.layers, layer_strategies(names, s, stages, precision="bf16"))]
    micro = w.batch_size / (2 * 2)
    kept = sum(a for a, f in zip(acts, flags) if not f)
    moved = sum(a for a, f in zip(acts, flags) if f)
    transit = max(a for a, f in zip(acts, flags) if f)
    top = max(a for a, f in zip(acts, flags) if not f)
    m0, m1 = memory_per_gpu(w, base, hw), memory_per_gpu(w, off, hw)
    assert m1.offloaded_bytes == pytest.approx(moved * micro)
    assert m1.activations_bytes == pytest.approx(max(kept, transit + top) * micro)
    assert m0.activations_bytes == pytest.approx((kept + moved) * micro)
    assert m1.fits and m1.host_capacity_bytes == get_hardware(hw).host_memory_bytes
    assert "GiB of activations offloaded to host memory (of 240.0)" in m1.message()
    assert "offloaded" not in m0.message()
    # A host too small, or none catalogued: refused, saying which.
    small = replace(get_hardware(hw), host_memory_bytes=0.5 * moved * micro)
    m2 = memory_per_gpu(w, off, small)
    assert not m2.fits and "host memory" in m2.message()
    none = replace(get_hardware(hw), host_memory_bytes=None)
    assert "no host memory" in memory_per_gpu(w, off, none).message()


@pytest.mark.parametrize("link, exposed", [(1e15, False), (1e6, True)])
def test_copies_expose_only_their_excess_over_the_next_pass(link: float, exposed: bool) -> None:
    # Each offloaded layer's copy (its saved bytes of one micro-batch over the host
    # link) runs under one layer's pass, forward and backward; the excess is
    # offload_s, once per micro-batch (closed form from layer_time).
    w = gpt(layers=6)
    hw = replace(get_hardware("A100-80"), host_link_Bps=link)
    pl = Placement(servers=1, gpus_per_server=2)
    r0 = evaluate("ideal:1", w, "dp=2,microbatches=2", hardware=hw, placement=pl)
    r1 = evaluate("ideal:1", w, "dp=2,microbatches=2,offload_layers=4", hardware=hw,
                  placement=pl)
    s = parse_strategy("dp=2,microbatches=2,offload_layers=4")
    names = [x.name for x in w.layers]
    stages = stage_bounds(w, s)
    b = w.batch_size / 4
    want = 0.0
    for x, ls, f in zip(w.layers, layer_strategies(names, s, stages, precision="bf16"),
                        layer_offload(names, s, stages)):
        if f:
            shard = shard_layer(x, ls)
            t = layer_time(shard.local, hw, b)
            copy = shard.activation_bytes_per_sample * b / link
            want += max(0.0, copy - t.fwd_s) + max(0.0, copy - t.bwd_s)
    assert (r1.offload_time_s > 0) == exposed
    assert r1.offload_time_s == pytest.approx(2 * want, rel=1e-9)
    assert r1.breakdown["offload_s"] == pytest.approx(r1.offload_time_s, rel=1e-9)
    assert r1.iteration_time_s == pytest.approx(r0.iteration_time_s + r1.offload_time_s,
                                                rel=1e-9)


def test_offloading_needs_a_host_link() -> None:
    hw = replace(get_hardware("A100-80"), host_link_Bps=None)
    with pytest.raises(InvalidSpecError, match="host_bandwidth"):
        evaluate("ideal:1", gpt(), "dp=2,offload_layers=2", hardware=hw,
                 placement=Placement(servers=1, gpus_per_server=2), check_memory=False)


def test_nvidias_gb200_llama3_70b_recipe_fits_with_its_offloading() -> None:
    # Megatron-Bridge 25.11 starter pack, Llama 3 70B FP8-CS on 64 GB200: FSDP, MBS 2,
    # cpu_offloading_num_layers=40 (scripts/performance/configs/llama at 97ad8cc6f).
    # Without the offloading the memory model refused the published configuration.
    w = get_workload("llama3-70b", batch_size=256)
    base = "dp=64,microbatches=2,zero=3,precision=fp8-cs,grad_precision=bf16"
    assert not memory_per_gpu(w, base, "GB200-NVL72").fits
    m = memory_per_gpu(w, base + ",offload_layers=40", "GB200-NVL72")
    assert m.fits and m.offloaded_bytes > 0.4 * (m.offloaded_bytes + m.activations_bytes)


def test_host_memory_and_link_round_trip_through_a_hardware_file(tmp_path) -> None:
    # codesign calibrate writes hardware profiles: the host figures survive, and a bad
    # one is refused naming the field.
    import yaml

    from codesign.workloads.hardware import hardware_to_yaml, load_hardware_catalog

    gb = get_hardware("GB200-NVL72")
    path = tmp_path / "gb200.yaml"
    path.write_text(yaml.safe_dump(hardware_to_yaml(gb)))
    back = load_hardware_catalog(path).get("GB200-NVL72")
    assert (back.host_memory_bytes, back.host_link_Bps) == (240 * 2**30, 225e9)
    doc = hardware_to_yaml(gb)
    doc["gpus"]["GB200-NVL72"]["host_bandwidth"] = "fast"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidSpecError, match="host_bandwidth"):
        load_hardware_catalog(path)


@pytest.mark.parametrize("link, want", [(225e9, "offload"), (10e9, "recompute"),
                                        (None, "recompute")])
def test_memory_repair_offloads_where_it_costs_less_than_recomputation(link, want) -> None:
    # The search's memory repair (search.strategy.feasible.fit_to_memory) orders
    # offloading among the recomputation levels by estimated time: copies hidden under
    # the next block's pass (GB200's C2C) cost nothing and come before any
    # recomputation; over a slow link, or with no host link catalogued, recomputation
    # remains the repair. One sample per micro-batch, so more micro-batches cannot help.
    from search.strategy.feasible import fit_to_memory
    from search.strategy.space import Candidate

    w = get_workload("llama3-70b", batch_size=64)
    hw = replace(get_hardware("GB200-NVL72"), memory_bytes=150 * 2**30, host_link_Bps=link)
    base = parse_strategy("dp=64,microbatches=1,zero=3,precision=fp8-cs")
    assert not memory_per_gpu(w, base, hw).fits
    got = fit_to_memory(Candidate(base), w, hw).strategy
    assert memory_per_gpu(w, got, hw).fits
    assert (got.offload_layers is not None) == (want == "offload")
    assert (got.recompute == "full") == (want == "recompute")
    if want == "offload":   # the fewest offloaded blocks that fit, of the offered counts
        assert got.offload_layers == 20


def test_cli_evaluate_reports_the_offloaded_bytes_and_refuses_bad_offloading(capsys) -> None:
    from codesign.app.cli import main

    args = ["evaluate", "--topology", "ideal:1", "--workload", "llama3-8b", "--hardware",
            "GB200-NVL72", "--gpus-per-server", "8", "--option", "batch_size=64"]
    assert main(args + ["--strategy", "dp=8,microbatches=8,offload_layers=16"]) == 0
    out = capsys.readouterr().out
    assert "offload_s" in out or "offload_time_s" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("offloaded_bytes"))
    assert "(host, of 240.00 GiB)" in line
    # Bad input: one line, exit code 2, naming the field.
    assert main(args + ["--strategy", "dp=8,recompute=full,offload_layers=16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "offload_layers" in err[0]
