"""Report sections of sweeps: best per budget, sensitivity, per-workload tables, provenance."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codesign.records import RecordWriter, load_records
from codesign.app.report import best_per_budget, sensitivity, spearman, write_report

# (trial, family, degree, rate, cost, time): a saved sweep dataset.
DATA = [(0, "torus", 2, 12.5e9, 100.0, 0.9), (1, "torus", 4, 12.5e9, 200.0, 0.6),
        (2, "ideal", 2, 50e9, 400.0, 0.2), (3, "ideal", 4, 50e9, 800.0, 0.1),
        (4, "perms", 4, 25e9, 250.0, 0.5)]


def _dataset(folder):
    rows = []
    for trial, fam, d, rate, cost, t in DATA:
        per = [{"workload": "resnet50", "config": None, "weight": 1.0, "strategy": "dp=128",
                "iteration_time_s": t, "compute_time_s": t / 2,
                "exposed_communication_s": t / 2, "bandwidth_tax": 1.0}]
        rows.append({"study": "sw", "trial": trial, "status": "complete", "family": fam,
                     "degree": d, "link_bandwidth_Bps": rate, "servers": 16,
                     "cost_usd": cost, "iteration_time_s": t,
                     "throughput_per_usd": 1 / (cost * t), "workload": "resnet50",
                     "strategy": "dp=128", "gpu": "A100-80", "per_workload_json": json.dumps(per),
                     "budget_usd": 300.0, "sampler": "nsga2",
                     "objectives": "iteration_time_s,cost_usd", "seed": 5,
                     "config_hash": "abc123", "package_version": "0.0"})
    rows.append({"study": "sw", "trial": 5, "status": "pruned", "family": "torus",
                 "reason": "budget exceeded: the network costs $900 > budget $300"})
    RecordWriter(folder).write(rows)


def test_spearman_against_closed_forms():
    assert spearman([1, 2, 3], [3, 30, 300]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3])) and np.isnan(spearman([1, 2], [2, 1]))


def test_best_per_budget_matches_brute_force(tmp_path):
    _dataset(tmp_path)
    frame = load_records(tmp_path)
    rows = best_per_budget(frame)
    budgets = [r["budget_usd"] for r in rows]
    assert 300.0 in budgets and max(budgets) == 800.0
    for r in rows:
        fits = [(t, trial) for trial, _, _, _, cost, t in DATA if cost <= r["budget_usd"]]
        assert r.get("trial") == (min(fits)[1] if fits else None)
    assert next(r for r in rows if r["budget_usd"] == 300.0)["trial"] == 4
    # Designs within the A100-80's validated error of the best are counted, not ranked
    # (checked by hand against the relative difference): with one GPU type and workload
    # mix the error of a comparison (4.0 %, from the catalog), with two GPU types the
    # error of one predicted time (8.6 %).
    import pandas as pd

    from codesign.workloads import get_hardware

    compute = get_hardware("A100-80").compute
    for gpus, validated, close_at_125 in (
            (["A100-80"] * 4, compute.validated_comparison_error, 0),
            (["A100-80"] * 3 + ["H100"], compute.validated_error, 1)):
        frame = pd.DataFrame({"trial": [0, 1, 2, 3], "status": ["complete"] * 4,
                              "cost_usd": [100.0, 120.0, 130.0, 500.0],
                              "iteration_time_s": [1.0, 1.05, 1.3, 0.5], "gpu": gpus})
        rows = best_per_budget(frame)
        for r in rows:
            if r.get("trial") is None or r["gpu"] != "A100-80":
                continue
            assert r["model_error"] == pytest.approx(validated)
            fits = sorted(t for c, t in zip(frame["cost_usd"], frame["iteration_time_s"])
                          if c <= r["budget_usd"])
            by_hand = sum(1 for t in fits[1:] if (t - fits[0]) / fits[0] <= validated)
            assert r["within_model_error"] == by_hand
        # 1.05 s against 1.00 s: 5 %, beyond the comparison error, within the other.
        assert next(r for r in rows if r["budget_usd"] == 125.0)["within_model_error"] \
            == close_at_125
    # A mix with a mixture-of-experts, recommendation or MLP-only model is outside the
    # validation: no error claimed, nothing left unranked; a dense transformer or a CNN
    # keeps the comparison error.
    for name, expected in (("mixtral-8x7b", None), ("dlrm", None), ("candle", None),
                           ("resnet50", compute.validated_comparison_error),
                           ("llama3-8b", compute.validated_comparison_error)):
        mix = json.dumps([{"name": name, "weight": 1.0, "config": None, "strategy": None,
                           "options": [], "file": None, "digest": None}])
        frame = pd.DataFrame({"trial": [0, 1], "status": ["complete"] * 2,
                              "cost_usd": [100.0, 120.0], "iteration_time_s": [1.0, 1.01],
                              "gpu": ["A100-80"] * 2, "workload_mix_json": [mix] * 2})
        best = max(best_per_budget(frame), key=lambda r: r["budget_usd"])  # both affordable
        assert best["trial"] == 0
        assert best["model_error"] == expected
        assert best["within_model_error"] == (None if expected is None else 1)


def test_sensitivity_medians_and_correlations(tmp_path):
    _dataset(tmp_path)
    medians, corr = sensitivity(load_records(tmp_path))
    by = {(m["parameter"], m["value"]): m for m in medians}
    assert by[("family", "torus")]["iteration_time_s"] == pytest.approx(0.75)
    assert by[("family", "torus")]["designs"] == 2
    assert by[("degree", 4)]["cost_usd"] == pytest.approx(250.0)  # median of 200, 800, 250
    rho = {c["parameter"]: c for c in corr}
    assert set(rho) == {"degree", "link rate"}  # servers is constant
    assert rho["link rate"]["iteration_time_s"] < 0 < rho["link rate"]["cost_usd"]


def test_sweep_report_renders_from_saved_dataset(tmp_path):
    _dataset(tmp_path / "sw" / "records")
    paths = write_report(tmp_path / "sw")
    md = paths["markdown"].read_text()
    for heading in ("Best design per budget", "Sensitivity: grouped medians",
                    "Sensitivity: rank correlation", "Workload resnet50", "Provenance"):
        assert f"## {heading}" in md
    assert "nsga2" in md and "abc123" in md and "budget exceeded" in md
    assert paths["plot"].stat().st_size > 1000
    htm = paths["html"].read_text()
    assert "<h2>Best design per budget</h2>" in htm and "pareto.png" in htm


def test_records_folder_is_readable_by_arrow_and_others(tmp_path):
    import pyarrow.dataset as ds

    _dataset(tmp_path)
    table = ds.dataset(str(tmp_path), format="parquet").to_table()
    assert table.num_rows == 6 and "throughput_per_usd" in table.column_names
    for mod, read in (("duckdb", lambda m: m.sql(
            f"select count(*) from '{tmp_path}/*.parquet'").fetchone()[0]),
                      ("polars", lambda m: m.read_parquet(f"{tmp_path}/*.parquet").height)):
        try:
            m = __import__(mod)
        except ImportError:
            continue
        assert read(m) == 6


