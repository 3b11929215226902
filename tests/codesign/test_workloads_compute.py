"""Hardware catalog, roofline layer times (hand calculations) and measured profiles."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import (
    Layer, get_hardware, get_workload, hardware_names, layer_time, layer_times,
    load_hardware_catalog, load_profile)
from codesign.workloads.hardware import parse_flops
from codesign.workloads.layers import dense, embedding_bag


# ----------------------------------------------------------------------- catalog
def test_catalog_datasheet_numbers():
    assert hardware_names() == ["V100", "A100-40", "A100-80", "H100", "H200", "B200",
                                "GB200-NVL72"]
    a100 = get_hardware("A100-40")
    assert a100.peak_flops("fp16") == 312e12 and a100.peak_flops("bf16") == 312e12
    assert a100.peak_flops("tf32") == 156e12
    assert a100.memory_bytes == 40 * 2**30
    assert a100.memory_bandwidth_Bps == 1555e9
    assert a100.fabric_bandwidth_Bps == 300e9       # NVLink 600 GB/s bidirectional
    assert a100.nic_bandwidth_Bps == 25e9           # 200 Gb/s HDR per GPU
    assert a100.gpus_per_server == 8
    h100 = get_hardware("h100")                     # case-insensitive
    assert h100.peak_flops("fp16") == 989.5e12 and h100.peak_flops("fp8") == 1979e12
    assert get_hardware("H200").memory_bandwidth_Bps == 4.8e12
    assert get_hardware("B200").peak_flops("bf16") == 2.25e15
    with pytest.raises(InvalidSpecError, match="fp8.*one of fp16, tf32, fp32"):
        a100.peak_flops("fp8")
    with pytest.raises(InvalidSpecError, match="one of V100, A100-40"):
        get_hardware("TPUv4")


def test_user_catalog_replaces_the_builtin(tmp_path):
    path = tmp_path / "hw.yaml"
    path.write_text("gpus:\n  X1:\n    peak_flops: {fp16: 100TFLOP/s}\n    memory: 16GiB\n"
                    "    memory_bandwidth: 1TB/s\n    gpus_per_server: 4\n"
                    "    fabric_bandwidth: 50GB/s\n")
    cat = load_hardware_catalog(path)
    x1 = get_hardware("X1", cat)
    assert (x1.peak_flops(), x1.memory_bandwidth_Bps, x1.nic_bandwidth_Bps) == (1e14, 1e12, None)
    path.write_text("gpus:\n  X1:\n    peak_flops: {fp16: 100TFLOP/s}\n    memory: 16GiB\n"
                    "    memory_bandwith: 1TB/s\n")
    with pytest.raises(InvalidSpecError, match="unknown key 'memory_bandwith'"):
        load_hardware_catalog(path)
    path.write_text("gpus:\n  X1:\n    peak_flops: {fp17: 1}\n    memory: 1GiB\n"
                    "    memory_bandwidth: 1TB/s\n    gpus_per_server: 1\n"
                    "    fabric_bandwidth: 1GB/s\n")
    with pytest.raises(InvalidSpecError, match="fp17"):
        load_hardware_catalog(path)


@given(st.one_of(st.text(max_size=12), st.floats(), st.integers(), st.none(), st.booleans()))
@settings(max_examples=200, deadline=None)
def test_parse_flops_never_crashes(value):
    try:
        v = parse_flops(value)
    except InvalidSpecError:
        return
    assert 1e9 <= v <= 1e18


def test_parse_flops_units():
    assert parse_flops("312TFLOP/s") == 312e12
    assert parse_flops("2.25 PFLOPS") == 2.25e15
    assert parse_flops(1e9) == 1e9
    for implausible in ("1e-300TFLOP/s", 1e8, "2EFLOP/s"):   # 1e-300 timed 2.5e303 s
        with pytest.raises(InvalidSpecError, match="from 1GFLOP/s to 1EFLOP/s"):
            parse_flops(implausible)


# ----------------------------------------------------------------------- roofline
def test_compute_bound_dense_layer_by_hand():
    layer = dense("fc", 4096, 4096, dtype_bytes=2, bias=False)
    t = layer_time(layer, "A100-40", 1024, efficiency=0.5)
    fwd = 2 * 4096 * 4096 * 1024 / (312e12 * 0.5)
    assert t.fwd_s == pytest.approx(fwd) and t.bwd_s == pytest.approx(2 * fwd)
    assert (t.fwd_bound, t.bwd_bound) == ("compute", "compute")
    assert t.total_s == pytest.approx(3 * fwd)


def test_memory_bound_layers_by_hand():
    # One sample through a 4096 x 4096 layer: the weights dominate.
    layer = dense("fc", 4096, 4096, dtype_bytes=2, bias=False)
    t = layer_time(layer, "H100", 1, efficiency=1.0)
    moved = 4096 * 4096 * 2 + (4096 + 4096) * 2
    assert t.fwd_s == pytest.approx(moved / 3.35e12) and t.fwd_bound == "memory"
    assert t.bwd_s == pytest.approx(2 * moved / 3.35e12)
    # An embedding bag reads only the gathered rows, never the whole table.
    bag = embedding_bag("t", 10**7, 128, lookups=100, dtype_bytes=4)
    t = layer_time(bag, "A100-40", 1000, efficiency=0.5)
    assert t.fwd_s == pytest.approx(1000 * 101 * 128 * 4 / 1555e9)
    assert (t.fwd_bound, t.bwd_bound) == ("memory", "memory")
    # memory_efficiency scales the bandwidth.
    t2 = layer_time(bag, "A100-40", 1000, memory_efficiency=0.5)
    assert t2.fwd_s == pytest.approx(2 * t.fwd_s)


def test_dtype_selects_the_peak():
    layer = dense("fc", 8192, 8192, dtype_bytes=4, bias=False)
    fp32 = layer_time(layer, "A100-40", 4096, efficiency=1.0)
    tf32 = layer_time(layer, "A100-40", 4096, efficiency=1.0, dtype="tf32")
    assert fp32.fwd_s == pytest.approx(2 * 8192**2 * 4096 / 19.5e12)
    assert fp32.fwd_s / tf32.fwd_s == pytest.approx(156 / 19.5)


@pytest.mark.parametrize("kwargs, needle", [
    ({"efficiency": 0}, "efficiency"), ({"efficiency": 1.5}, "efficiency"),
    ({"memory_efficiency": -1}, "memory_efficiency"), ({"dtype": "fp8"}, "fp8"),
])
def test_bad_roofline_options(kwargs, needle):
    with pytest.raises(InvalidSpecError, match=needle):
        layer_time(dense("fc", 8, 8, dtype_bytes=2), "A100-40", 4, **kwargs)
    with pytest.raises(InvalidSpecError, match="batch"):
        layer_time(dense("fc", 8, 8, dtype_bytes=2), "A100-40", 0)


def test_workload_times_sum_layers():
    w = get_workload("resnet50", dtype_bytes=2)
    times = layer_times(w, "V100", 128, efficiency=0.4)
    assert [t.name for t in times] == [x.name for x in w.layers]
    compute = sum(t.fwd_s for t in times if t.fwd_bound == "compute")
    flops = sum(x.fwd_flops for x in w.layers
                if layer_time(x, "V100", 128, efficiency=0.4).fwd_bound == "compute")
    assert compute == pytest.approx(128 * flops / (125e12 * 0.4))
    # The pooling layers have no FLOPs: memory bound.
    assert times[1].fwd_bound == "memory"


# ----------------------------------------------------------------------- profiles
def test_csv_profile_interpolates_and_matches_signatures(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("layer,batch,fwd_s,bwd_s\nfc,10,1ms,2ms\nfc,30,3ms,5ms\n"
                    "Dense_8_8,4,0.5,1\n")
    prof = load_profile(path)
    fc = dense("fc", 16, 16, dtype_bytes=2)
    assert prof.time(fc, 10) == pytest.approx((1e-3, 2e-3))
    assert prof.time(fc, 20) == pytest.approx((2e-3, 3.5e-3))      # linear between
    assert prof.time(fc, 60) == pytest.approx((6e-3, 10e-3))       # proportional beyond
    assert prof.time(fc, 5) == pytest.approx((0.5e-3, 1e-3))
    other = dense("x", 8, 8, dtype_bytes=2)                        # signature Dense_8_8
    assert prof.time(other, 4) == (0.5, 1.0)
    assert prof.time(dense("y", 9, 9, dtype_bytes=2), 4) is None


def test_flexflow_measure_file(tmp_path):
    data = {"batch_size": 1024, "ngpus": 8, "measurements": [
        {"name": "Dense_64_64", "pc_str": "2-1-1", "fw_time": 4.0, "bw_time": 8.0,
         "mem_req": 1},
        {"name": "Dense_64_64", "pc_str": "2-1-4", "fw_time": 1.2, "bw_time": 2.0,
         "mem_req": 1},
        {"name": "Dense_64_64", "pc_str": "2-4-1", "fw_time": 9.0, "bw_time": 9.0,
         "mem_req": 1},
        {"name": "Embed_100x8", "pc_str": "2-1-2", "fw_time": 0.5, "bw_time": 1.0}]}
    path = tmp_path / "measure.json"
    path.write_text(json.dumps(data))
    prof = load_profile(path)
    assert prof.format == "flexflow" and prof.skipped == 1   # the weight-split entry
    layer = dense("any", 64, 64, dtype_bytes=4)
    assert prof.time(layer, 256) == pytest.approx((1.2e-3, 2.0e-3))   # 1024 / 4 samples
    assert prof.time(layer, 1024) == pytest.approx((4e-3, 8e-3))
    emb = embedding_bag("t", 100, 8, lookups=1, dtype_bytes=4)
    assert prof.time(emb, 512) == pytest.approx((0.5e-3, 1e-3))
    times = layer_times(get_workload("dlrm", "themis"), "A100-80", 256, profile=prof)
    assert all(t.fwd_bound != "profile" for t in times)       # no matching signature
    w = get_workload("dlrm", bottom_mlp=[64, 64], top_mlp=[1], tables=1, rows=100, dim=8)
    times = {t.name: t for t in layer_times(w, "A100-80", 256, profile=prof)}
    assert times["bottom0"].fwd_bound == "profile"
    assert times["bottom0"].fwd_s == pytest.approx(1.2e-3)
    assert times["top0"].fwd_bound in ("compute", "memory")


def test_json_profile_and_errors(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"measurements": [
        {"layer": "block0.attn", "batch": 2, "fwd_s": "1ms", "bwd_s": 0.002}]}))
    prof = load_profile(path)
    w = get_workload("gpt3-175b")
    assert prof.time(w.layer("block0.attn"), 4) == pytest.approx((2e-3, 4e-3))
    bad = [
        ("x.json", "{\"measurements\": [{\"layer\": \"a\", \"batch\": -1, \"fwd_s\": 1, "
                   "\"bwd_s\": 1}]}", "batch"),
        ("x.json", "[1, 2]", "measurements"),
        ("x.json", "{oops", "invalid JSON"),
        ("x.csv", "layer,batch,fwd\n", "columns"),
        ("x.csv", "layer,batch,fwd_s,bwd_s\na,1,1ms\n", "fields"),
        ("x.csv", "layer,batch,fwd_s,bwd_s\na,1,soon,1\n", "fwd_s"),
        ("x.json", json.dumps({"batch_size": 8, "measurements": [
            {"name": "a", "pc_str": "3-1-1", "fw_time": 1, "bw_time": 1}]}), "pc_str"),
    ]
    for name, text, needle in bad:
        p = tmp_path / name
        p.write_text(text)
        with pytest.raises(InvalidSpecError, match=needle):
            load_profile(p)
    with pytest.raises(InvalidSpecError, match="cannot read"):
        load_profile(tmp_path / "missing.csv")


def test_layer_validation_messages():
    with pytest.raises(InvalidSpecError, match="kind 'lstm'.*one of dense"):
        Layer(name="x", kind="lstm", params=1, fwd_flops=1, bwd_flops=1, activation_bytes=1)
    with pytest.raises(InvalidSpecError, match="params"):
        Layer(name="x", kind="dense", params=-1, fwd_flops=1, bwd_flops=1, activation_bytes=1)
    with pytest.raises(InvalidSpecError, match="top_k"):
        Layer(name="x", kind="expert", params=10, fwd_flops=1, bwd_flops=1,
              activation_bytes=1, experts=2, top_k=3)
