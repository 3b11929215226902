"""`codesign synth --algorithm mcf`: epsilon met (exit 0) or missed with the reason (exit 1)."""

from __future__ import annotations

import json

from codesign.app.cli import main


def _run(capsys, argv):
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


BASE = ["synth", "uniring:5,lat=0", "--collective", "allgather", "--size", "5GB",
        "--algorithm", "mcf", "--json"]


def test_synth_mcf_reports_chunks_and_why(capsys):
    code, out = _run(capsys, BASE + ["--option", "epsilon=0.01"])
    assert code == 0 and out["valid"] and out["within_epsilon"] is True
    assert out["time_s"] <= out["fluid_time_s"] * 1.01 * (1 + 1e-9)
    assert out["chunks"] == out["replays"] * out["split"]
    assert out["route"] in ("fluid-trees", "tree-columns")
    assert "eps=0.01" in out["chunk_reason"] and out["epsilon"] == 0.01


def test_synth_mcf_missing_epsilon_exits_1_with_best_reached(capsys):
    code, out = _run(capsys, BASE + ["--option", "epsilon=0.01", "--option", "max_transfers=500"])
    assert code == 1
    assert out["valid"] is True and out["within_epsilon"] is False
    assert out["chunk_reason"].startswith("cannot reach eps=0.01")
    assert out["ratio"] > 1.01 and out["transfers"] <= 500
