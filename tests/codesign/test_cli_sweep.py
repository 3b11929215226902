"""codesign sweep / report on the command line: JSON output, --resume, one-line errors."""

from __future__ import annotations

import json

import pytest
import yaml

from codesign.app.cli import main
from search.ray_session import ray_session

SPEC = {"study": "cli", "workloads": "bert", "trials": 2, "seed": 1, "population_size": 2,
        "space": {"families": ["ideal", "torus"], "servers": 8, "degree": [2],
                  "link_rate": ["100Gbps"]}}


@pytest.fixture(scope="module")
def ray_cluster(ray_shared):
    with ray_session(num_cpus=2):  # one Ray for the module; the CLI reuses it
        yield


def test_sweep_resume_and_report(tmp_path, capsys, ray_cluster):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump(SPEC))
    res = str(tmp_path / "res")
    assert main(["sweep", str(cfg), "--results", res, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trials_run"] == 2 and out["records"] == 2 and out["complete"] == 2
    # Again without --resume: refused with one line; with --resume and more trials: topped up.
    assert main(["sweep", str(cfg), "--results", res, "--json"]) == 2
    out = capsys.readouterr().out  # with --json the error is one JSON object on stdout
    assert out.count("\n") == 1 and "--resume" in json.loads(out)["error"]
    cfg.write_text(yaml.safe_dump({**SPEC, "trials": 3}))
    assert main(["sweep", str(cfg), "--results", res, "--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trials_run"] == 1
    assert main(["report", f"{res}/cli", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["markdown"].endswith("report.md")


def test_bad_sweep_file_is_one_line_exit_2(tmp_path, capsys):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump({**SPEC, "sampler": "magic"}))
    assert main(["sweep", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "sampler" in err and err.count("\n") == 1
    assert main(["sweep", str(tmp_path / "missing.yaml")]) == 2


def test_sweep_without_a_complete_trial_exits_1_with_reasons(tmp_path, capsys, ray_cluster):
    # A torus of odd degree does not exist: every trial is pruned as unbuildable.
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump({**SPEC, "study": "none", "space": {
        **SPEC["space"], "families": ["torus"], "degree": [3]}}))
    assert main(["sweep", str(cfg), "--results", str(tmp_path / "res"), "--json"]) == 1
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["complete"] == 0 and out["reasons"] == {"unbuildable": 2}
    assert "no trial of none is complete (unbuildable: 2)" in captured.err
