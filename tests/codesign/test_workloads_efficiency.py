"""Kernel compute model (issue 17): GEMM tile/wave quantisation, fused attention,
element-wise work at HBM bandwidth, profiles in the catalog, and the roofline fallback.

Hand-computed oracles: NVIDIA's Matrix Multiplication Background guide (tile and wave
quantisation with 108 A100 SMs and 256 x 128 tiles)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload
from codesign.workloads.compute import DEFAULT_EFFICIENCY, layer_time, uses_kernel_model
from codesign.workloads.efficiency import ComputeProfile, gemm_time, profile_from_dict
from codesign.workloads.hardware import hardware_to_yaml, load_hardware_catalog
from codesign.workloads.layers import attention, mlp

A100 = get_hardware("A100-80")
PEAK = 312e12
BW = 2039e9
IDEAL = ComputeProfile(sms=108, tile_m=256, tile_n=128, k_overhead=0.0, gemm_efficiency=1.0,
                       attention_efficiency=1.0, memory_efficiency=1.0)


def g(m, n, k, prof=IDEAL, count=1.0):
    return gemm_time(m, n, k, peak_flops=PEAK, bandwidth_Bps=BW, dtype_bytes=2,
                     profile=prof, count=count)


def test_wave_quantisation_by_hand():
    # 4096^3: 16 x 32 = 512 tiles of 256 x 128 -> ceil(512 / 108) = 5 waves, each one tile
    # of 2 * 256 * 128 * 4096 FLOPs at 312e12 / 108 FLOP/s per SM.
    expected = 5 * 2 * 256 * 128 * 4096 / (PEAK / 108)
    assert g(4096, 4096, 4096) == pytest.approx(expected, rel=1e-12)
    # ... which is the ideal time divided by the wave efficiency 512 / 540.
    ideal = 2 * 4096**3 / PEAK
    assert g(4096, 4096, 4096) == pytest.approx(ideal * 540 / 512, rel=1e-12)
    # 12 x 9 = 108 tiles exactly fill one wave: no quantisation loss.
    one_wave = 2 * 256 * 128 * 4096 / (PEAK / 108)
    assert g(256 * 12, 128 * 9, 4096) == pytest.approx(2 * 3072 * 1152 * 4096 / PEAK)
    assert g(256 * 12, 128 * 9, 4096) == pytest.approx(one_wave)
    # 11 x 10 = 110 tiles need a second wave: twice the time of 108.
    assert g(256 * 11, 128 * 10, 4096) == pytest.approx(2 * one_wave)


def test_tile_quantisation_by_hand():
    # M = 257 rounds up to two tile rows: as slow as M = 512 (2 x 54 = 108 tiles).
    assert g(257, 128 * 54, 4096) == pytest.approx(g(512, 128 * 54, 4096))
    assert g(257, 128 * 54, 4096) == pytest.approx(2 * 256 * 128 * 4096 / (PEAK / 108))


def test_k_overhead_and_efficiency():
    # A compute-bound single wave (108 tiles, K = 1024): time x (K + k0) / K / efficiency.
    prof = replace(IDEAL, k_overhead=128.0, gemm_efficiency=0.8)
    base = g(256 * 12, 128 * 9, 1024)
    assert base == pytest.approx(2 * 256 * 128 * 1024 / (PEAK / 108))
    assert g(256 * 12, 128 * 9, 1024, prof) == pytest.approx(base * (1024 + 128) / 1024 / 0.8)


def test_memory_bound_gemm_at_hbm_bandwidth():
    # K = 16: writing the 8192 x 8192 output dominates; (M K + K N + M N) x 2 bytes at
    # 80 % of HBM bandwidth (compute: 19 waves of 16-deep tiles, 12x shorter).
    prof = replace(IDEAL, memory_efficiency=0.8)
    t = g(8192, 8192, 16, prof)
    assert t == pytest.approx((8192 * 16 * 2 + 8192**2) * 2 / (BW * 0.8), rel=1e-12)
    assert t > 10 * 19 * 2 * 256 * 128 * 16 / (PEAK / 108)


def test_batched_gemms_share_waves():
    # 96 heads of (2048, 2048, 512): 96 x 8 x 16 tiles in ceil(12288 / 108) waves.
    t = g(2048, 2048, 512, count=96)
    assert t == pytest.approx(math.ceil(96 * 8 * 16 / 108) * 2 * 256 * 128 * 512 / (PEAK / 108))
    # With K = head_dim = 128 the s x s scores make the product memory bound.
    t = g(2048, 2048, 128, count=96)
    assert t == pytest.approx(96 * (2 * 2048 * 128 + 2048**2) * 2 / BW)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(1, 20000),
       dm=st.integers(1, 5000))
def test_gemm_time_monotone_in_each_dimension(m, n, k, dm):
    prof = A100.compute
    assert g(m + dm, n, k, prof) >= g(m, n, k, prof)
    assert g(m, n + dm, k, prof) >= g(m, n, k, prof)
    assert g(m, n, k + dm, prof) >= g(m, n, k, prof)
    # Achieved FLOP/s never exceeds peak x gemm_efficiency.
    assert 2.0 * m * n * k / g(m, n, k, prof) <= PEAK * prof.gemm_efficiency * (1 + 1e-9)


def _gemm_flops(layer):
    return sum(2 * m * n * k * c for m, n, k, c, _ in layer.gemms)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama3-8b", "bert", "transformer-1t"])
def test_gemms_add_up_to_the_layer_flops(name):
    w = get_workload(name)
    for layer in w.layers:
        if not layer.gemms:
            continue
        core = layer.attn_core_fwd_flops if layer.attention_kernel == "flash" else 0.0
        assert _gemm_flops(layer) + core == pytest.approx(layer.fwd_flops, rel=1e-12), \
            layer.name


def test_layer_time_is_gemms_plus_elementwise():
    layer = mlp("m", hidden=4096, ffn=16384, seq=2048, dtype_bytes=2)
    prof = A100.compute
    b = 2
    kw = dict(peak_flops=PEAK, bandwidth_Bps=BW, dtype_bytes=2, profile=prof)
    fwd = gemm_time(b * 2048, 16384, 4096, **kw) + gemm_time(b * 2048, 4096, 16384, **kw)
    fwd += b * layer.io_bytes / (BW * prof.memory_efficiency)
    t = layer_time(layer, A100, b)
    assert t.fwd_bound == "kernels"
    assert t.fwd_s == pytest.approx(fwd, rel=1e-12)


def test_flash_attention_causal_halves_the_core():
    kw = dict(hidden=4096, heads=32, kv_heads=32, seq=4096, dtype_bytes=2, flash=True)
    full = layer_time(attention("a", **kw), A100, 1)
    causal_layer = attention("a", causal=True, **kw)
    causal = layer_time(causal_layer, A100, 1)
    core = causal_layer.attn_core_fwd_flops / (PEAK * A100.compute.attention_efficiency)
    assert full.fwd_s - causal.fwd_s == pytest.approx(core / 2, rel=1e-9)
    assert full.bwd_s - causal.bwd_s == pytest.approx(2.5 * core / 2, rel=1e-9)


def test_unfused_attention_core_runs_below_gemm_rate():
    # The scores' K = head_dim = 128 products pay the per-tile overhead: the attention
    # layer reaches a lower FLOP rate than an MLP of the same width.
    a = attention("a", hidden=4096, heads=32, kv_heads=32, seq=2048, dtype_bytes=2)
    m = mlp("m", hidden=4096, ffn=16384, seq=2048, dtype_bytes=2)
    ta, tm = layer_time(a, A100, 4), layer_time(m, A100, 4)
    assert a.fwd_flops / ta.fwd_s < m.fwd_flops / tm.fwd_s


def test_time_monotone_in_batch_and_efficiency():
    layer = get_workload("gpt3-175b").layers[1]
    times = [layer_time(layer, A100, b).total_s for b in (0.5, 1, 2, 3, 8)]
    assert times == sorted(times)
    slow = replace(A100, compute=A100.compute.with_parameters(gemm_efficiency=0.4))
    assert layer_time(layer, slow, 1).total_s > layer_time(layer, A100, 1).total_s


def test_roofline_fallbacks():
    layer = get_workload("gpt3-175b").layers[1]
    assert uses_kernel_model(layer, A100, "bf16")
    # An explicit efficiency, a GPU without profile, or a 4-byte format: the roofline.
    explicit = layer_time(layer, A100, 1, efficiency=0.5)
    assert explicit.fwd_bound in ("compute", "memory")
    bare = replace(A100, compute=None)
    assert layer_time(layer, bare, 1).fwd_s == pytest.approx(explicit.fwd_s)
    assert layer_time(layer, bare, 1, efficiency=DEFAULT_EFFICIENCY) == \
        layer_time(layer, bare, 1)
    assert not uses_kernel_model(layer, A100, "tf32")
    # Convolutions list no GEMMs: the roofline.
    conv = next(x for x in get_workload("resnet50").layers if x.kind == "convolution")
    assert not uses_kernel_model(conv, A100, "bf16")


def test_catalog_profiles_and_sources():
    for name in ("V100", "A100-40", "A100-80", "H100", "H200", "B200"):
        prof = get_hardware(name).compute
        assert prof is not None and prof.source
    assert get_hardware("A100-80").compute.sms == 108
    assert get_hardware("H100").compute.sms == 132


@pytest.mark.parametrize("spec, needle", [
    ({"sms": 0}, "sms"), ({"tile_m": 128}, "sms"), ({"sms": 108, "gemm_efficiency": 1.5},
                                                   "gemm_efficiency"),
    ({"sms": 108, "bogus": 1}, "bogus"), ([1, 2], "compute"),
    ({"sms": 108, "k_overhead": -1}, "k_overhead"),
])
def test_bad_profiles(spec, needle):
    with pytest.raises(InvalidSpecError, match=needle):
        profile_from_dict(spec)


def test_profile_file_round_trip(tmp_path):
    import yaml

    hw = replace(A100, compute=A100.compute.with_parameters(gemm_efficiency=0.61))
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(hardware_to_yaml(hw)))
    back = load_hardware_catalog(path).get("A100-80")
    assert back.compute == hw.compute
    assert dict(back.peak) == dict(hw.peak) and back.memory_bandwidth_Bps == hw.memory_bandwidth_Bps
    # A bad compute value in a file names the GPU and the field.
    doc = hardware_to_yaml(hw)
    doc["gpus"]["A100-80"]["compute"]["memory_efficiency"] = 2
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidSpecError, match="A100-80.*memory_efficiency"):
        load_hardware_catalog(path)
