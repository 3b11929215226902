"""The quickstart: the canonical small sweep with an embedded spec (experiments/sweeps/small.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from codesign.errors import InvalidSpecError
from codesign.records import load_records
from search.sweeps.quickstart import QUICKSTART_SPEC, QuickstartConfig, run_quickstart
from search.ray_session import ray_session

ROOT = Path(__file__).resolve().parents[2]


def test_embedded_spec_is_small_yaml():
    on_disk = yaml.safe_load((ROOT / "experiments" / "sweeps" / "small.yaml").read_text())
    assert on_disk == QUICKSTART_SPEC


def test_overrides_and_bad_values(tmp_path):
    spec = QuickstartConfig(servers=54, trials=3, seed=2, results_dir=tmp_path).spec()
    assert (spec.space.servers, spec.trials, spec.seed) == ((54,), 3, 2)
    assert QuickstartConfig().spec().trials == 12
    for kw in ({"servers": 1}, {"trials": 0}, {"seed": -1}, {"servers": True}):
        with pytest.raises(InvalidSpecError) as info:
            QuickstartConfig(**kw)
        assert "\n" not in str(info.value)


def test_tiny_quickstart_tops_up(tmp_path, ray_shared):
    with ray_session(num_cpus=2):
        res = run_quickstart(QuickstartConfig(trials=2, results_dir=tmp_path))
        assert res.trials_run == 2 and res.records == 2
        again = run_quickstart(QuickstartConfig(trials=3, results_dir=tmp_path))
    assert again.trials_run == 1
    df = load_records(tmp_path / "quickstart")
    assert df["trial"].tolist() == [0, 1, 2] and set(df["workload"]) == {"resnet50*1+dlrm*1"}
    assert set(df["status"]) <= {"complete", "pruned"}


def test_a_quickstart_without_a_complete_trial_exits_1_as_a_sweep_does(
        tmp_path, ray_shared, capsys, monkeypatch):
    # The report is still written, but exit 0 said the study had an answer.
    import search.sweeps.quickstart as quickstart
    from codesign.app.cli import main
    from search.sweeps.driver import TrialOutcome

    def every_design_pruned(point):   # (nested: Ray ships it by value to its workers)
        return TrialOutcome("pruned", "unbuildable: every design of this test")

    real = quickstart.run_quickstart
    monkeypatch.setattr(quickstart, "run_quickstart", lambda config, progress=None: real(
        config, progress=progress, evaluate=every_design_pruned))
    with ray_session(num_cpus=2):
        code = main(["quickstart", "--trials", "1", "--results", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "no trial of the quickstart is complete (1 pruned" in err
    assert (tmp_path / "quickstart" / "report.md").exists()


def test_other_server_counts_start_dlrm_from_its_feasible_start():
    # dp=128 is the 16 servers' 128 GPUs: on 54 servers every DLRM trial was pruned
    assert QuickstartConfig(servers=16).spec().workloads[1].strategy == \
        "dp=128,embedding=model"
    assert QuickstartConfig(servers=54).spec().workloads[1].strategy is None
