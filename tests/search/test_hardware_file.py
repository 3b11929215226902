"""A hardware catalog file (e.g. one written by ``codesign calibrate``) in every main job:
``evaluate``, ``optimize``, ``whatif`` (``--hardware-file``) and sweeps (``hardware_file``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from search.topoopt.alternating import OptimizeSpec
from search.sweeps.spec import parse_sweep_spec
from search.sweeps.trial import SweepPoint

CATALOG = """gpus:
  Small-GPU:
    description: an A100 with 1 GiB of memory (a test entry)
    peak_flops: {fp16: 312TFLOP/s, tf32: 156TFLOP/s, fp32: 19.5TFLOP/s}
    memory: 1GiB
    memory_bandwidth: 2039GB/s
    gpus_per_server: 4
    fabric_bandwidth: 300GB/s
"""


@pytest.fixture()
def catalog(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(CATALOG)
    return str(path)


def test_optimize_looks_the_gpu_up_in_the_file(catalog, capsys) -> None:
    spec = OptimizeSpec(workload="bert", servers=2, degree=1, bandwidth_Bps="100Gbps",
                        hardware="Small-GPU", hardware_file=catalog)
    assert spec.hw.memory_bytes == 2**30
    with pytest.raises(InvalidSpecError, match="hardware"):
        OptimizeSpec(workload="bert", servers=2, degree=1, bandwidth_Bps="100Gbps",
                     hardware="Small-GPU")      # not in the built-in catalog
    code = main(["optimize", "--workload", "llama3-8b", "--servers", "2", "--degree", "1",
                 "--bandwidth", "100Gbps", "--hardware", "Small-GPU", "--hardware-file",
                 catalog, "--workers", "0"])
    assert code == 1
    assert "fits in Small-GPU memory" in capsys.readouterr().err


def test_whatif_looks_the_gpu_up_in_the_file(catalog, capsys) -> None:
    code = main(["whatif", "--budget", "1e6", "--gpus", "8", "--gpu", "Small-GPU",
                 "--hardware-file", catalog, "--workload", "llama3-8b", "--quiet"])
    assert code == 1
    assert "Small-GPU" in capsys.readouterr().err


def test_sweep_spec_hardware_file(catalog) -> None:
    base = {"study": "s", "workloads": [{"name": "resnet50"}],
            "space": {"families": ["ideal"], "servers": 4, "degree": [1],
                      "link_rate": ["100Gbps"], "hardware_file": catalog},
            "trials": 1}
    spec = parse_sweep_spec(base)
    assert spec.space.gpus == ("Small-GPU",) and spec.space.hardware_file == catalog
    hw = SweepPoint("ideal", 4, 1, 12.5e9, gpu="Small-GPU",
                    hardware_file=spec.space.hardware_file).hardware()
    assert hw.name == "Small-GPU" and hw.memory_bytes == 2**30
    bad = {**base, "space": {**base["space"], "hardware_file": "/nonexistent/h.yaml"}}
    with pytest.raises(InvalidSpecError):
        parse_sweep_spec(bad)
    other = {**base, "space": {**base["space"], "gpu": ["H100"]}}
    with pytest.raises(InvalidSpecError, match="gpu"):
        parse_sweep_spec(other)


def _first_choice(capsys, *args: str) -> dict:
    """``codesign whatif ARGS --search-evaluations 0 --collective-method auto --json``:
    its first budget's answer."""
    import json

    code = main(["whatif", *args, "--search-evaluations", "0", "--collective-method",
                 "auto", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    return out["budgets"][0] if "budgets" in out else out["choices"][0]


def test_whatif_lists_fabrics_within_the_model_error(capsys) -> None:
    choice = _first_choice(capsys, "--budget", "1e8", "--servers", "16", "--gpu", "H100",
                           "--workload", "llama3-8b")
    from codesign.workloads import get_hardware

    compute = get_hardware("H100").compute  # the catalog's, not a copy
    assert choice["model_error"] == pytest.approx(compute.validated_error)
    # Fabrics are compared with the (smaller) validated error of a comparison.
    pair = compute.validated_comparison_error
    assert choice["comparison_error"] == pytest.approx(pair) and pair < compute.validated_error
    best = choice["iteration_time_s"]
    # Llama 3 8B on 16 servers is compute bound: most fabrics are within the H100's
    # validated error of the fastest, so they are listed, not ranked.
    assert len(choice["within_model_error"]) >= 10
    assert choice["topology_spec"] not in choice["within_model_error"]
    assert f"validated error of a comparison, {pair:.1%}" in choice["note"]
    assert best > 0
    # With a $100M budget the fastest fabric is not the cheapest one the model cannot
    # tell from it: that one is named, with its price and time.
    cheap = choice["cheapest_within_error"]
    assert cheap is not None and cheap["topology_spec"] in choice["within_model_error"]
    assert cheap["cost_usd"] < choice["cost_usd"]
    assert f"the cheapest of them, {cheap['label']}, costs ${cheap['cost_usd']:,.0f}" in \
        choice["note"]


@settings(max_examples=60, deadline=None)
@given(costs=st.lists(st.integers(1, 20), min_size=1, max_size=8), n_close=st.integers(0, 7))
def test_cheapest_within_error_is_the_cheapest_listed_design(costs, n_close) -> None:
    # Brute force: the answer is design 0, the designs within the error the next
    # n_close; the cheapest of them all is named unless the answer is (ties keep it).
    from types import SimpleNamespace as NS

    from search.whatif import _cheapest_within_error

    keys = [("leafspine", i + 1, 50e9) for i in range(len(costs))]
    by_key = {k: (float(c), "spec") for k, c in zip(keys, costs)}
    results = {k: (NS(family=k[0], degree=k[1], link_bandwidth_Bps=k[2]),
                   NS(metrics={"topology_spec": f"s{k[1]}", "iteration_time_s": 1.0 + k[1]}))
               for k in keys}
    close = tuple(keys[1:1 + n_close])
    got = _cheapest_within_error(keys[0], close, results, by_key)
    cheapest = min(costs[:1 + len(close)])
    if cheapest >= costs[0]:
        assert got is None
    else:
        assert got["cost_usd"] == cheapest
        assert got["topology_spec"] in {f"s{k[1]}" for k in close
                                        if by_key[k][0] == cheapest}
        assert got["label"].startswith("leafspine d=")


@pytest.mark.parametrize("workload, why", [
    ("mixtral-8x7b", "a mixture-of-experts model"),
    ("dlrm", "a model with neither attention nor convolution layers")])
def test_whatif_claims_no_validated_error_outside_the_validation(capsys, workload, why):
    choice = _first_choice(capsys, "--budget", "1e8", "--servers", "4", "--gpu", "H100",
                           "--workload", workload, "--families", "leafspine,railopt")
    assert choice["model_error"] is None and not choice["within_model_error"]
    assert choice["note"].startswith(f"{why}: the model's error is not validated")


def test_whatif_compares_todays_gpu_fabrics(capsys) -> None:
    choice = _first_choice(capsys, "--budget", "1e7", "--gpus", "128", "--gpu", "H100",
                           "--workload", "llama3-8b", "--families",
                           "railopt,multiplane,leafspine,perms")
    timed = {choice["topology_spec"], *choice["within_model_error"]}
    # Rail-optimised and multi-plane fabrics of 8 GPUs per server were timed (degree 8 =
    # the H100 server's GPUs; the other degrees do not apply to a GPU-level fabric).
    assert any(s.startswith("railopt:16,gpus=8") for s in timed)
    assert any(s.startswith("multiplane:128,planes=2") for s in timed)
    assert main(["whatif", "--budget", "1e7", "--gpus", "128", "--families", "railopt,x"]) == 2
