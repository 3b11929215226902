"""The quickstart study end to end on local Ray (a tiny version), plus resume and config checks."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from codesign.errors import InvalidSpecError
from codesign.records import load_records
from evaluators.alpha_beta import ring_allreduce_time
from search.quickstart import (
    RECORD_ATTR,
    QuickstartConfig,
    _encode,
    _open_study,
    _point,
    _record,
    run_quickstart,
)
from search.ray_session import ray_session

GIB = float(2 ** 30)
RATES = (100e9 / 8, 400e9 / 8)


def _config(tmp_path, **kw):
    base = dict(servers=8, trials=3, seed=11, families=("fattree", "ideal", "torus"),
                link_rates_Bps=RATES, degree_range=(2, 3), max_in_flight=2, batch_size=2,
                results_dir=tmp_path, population_size=2)
    base.update(kw)
    return QuickstartConfig(**base)


@pytest.fixture(scope="module")
def ray_cluster():
    # One local Ray for the module; run_quickstart must reuse it and leave it running.
    with ray_session(num_cpus=2):
        yield


def _check_rows(df: pd.DataFrame, config: QuickstartConfig) -> None:
    """Every row against an independent oracle for its family."""
    for row in df.to_dict("records"):
        params = json.loads(row["params_json"])
        assert (params["family"], params["degree"], params["link_bandwidth_Bps"]) == (
            row["family"], row["degree"], row["link_bandwidth_Bps"])
        bw, d = row["link_bandwidth_Bps"], row["degree"]
        if row["family"] == "fattree":  # 8 servers is not k^3/4
            assert row["status"] == "pruned" and "k^3/4" in row["reason"]
            assert pd.isna(row["cost_usd"]) and pd.isna(row["iteration_time_s"])
        elif row["family"] == "torus" and d == 3:
            assert row["status"] == "pruned" and "even degree" in row["reason"]
        elif row["family"] == "torus":  # a ring of 8, 1 hop of 1us
            assert row["status"] == "complete" and row["topology_spec"].startswith("torus:8,")
            assert row["iteration_time_s"] == pytest.approx(
                ring_allreduce_time(8, GIB, bw, 1e-6), rel=1e-12)
        else:  # ideal: 2 hops of 1us at d x B
            assert row["status"] == "complete" and row["switches"] == 1
            assert row["iteration_time_s"] == pytest.approx(
                ring_allreduce_time(8, GIB, d * bw, 2e-6), rel=1e-12)
        if row["status"] == "complete":
            assert row["cost_usd"] > 0 and row["reason"] == ""
            assert sum(json.loads(row["cost_breakdown"]).values()) == pytest.approx(
                row["cost_usd"])
        assert row["seed"] == 11 and row["config_hash"] == config.config_hash()
        assert row["study"] == "quickstart" and row["package_version"]


def test_tiny_quickstart_on_ray(tmp_path, ray_cluster):
    import optuna
    import ray
    from optuna.trial import TrialState

    config = _config(tmp_path / "a")
    seen = []
    result = run_quickstart(config, progress=lambda done, total: seen.append((done, total)))
    assert ray.is_initialized()  # not shut down: the fixture started it
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert result.trials_run == 3 and result.records == 3
    assert result.complete + result.pruned + result.failed == 3 and result.failed == 0
    assert result.results_dir == tmp_path / "a" / "quickstart"
    assert json.loads(json.dumps(result.to_dict()))["records"] == 3

    df = pd.read_parquet(config.records_dir)  # plain pandas reads the records folder
    assert sorted(df["trial"]) == [0, 1, 2]
    assert set(df["status"]) <= {"complete", "pruned"}
    _check_rows(df, config)
    # batch_size=2: two parts for three trials.
    assert sorted(p.name for p in config.records_dir.iterdir()) == [
        "part-00000.parquet", "part-00001.parquet"]

    # The journal agrees with the records: states and objective values.
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(config.journal)))
    study = optuna.load_study(study_name="quickstart", storage=storage)
    states = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED}
    for t, row in zip(study.get_trials(), df.sort_values("trial").to_dict("records")):
        assert t.state == states[row["status"]]
        if row["status"] == "complete":
            assert t.values == [row["iteration_time_s"], row["cost_usd"]]

    # Same seed, fresh folder: the same designs are proposed.
    again = _config(tmp_path / "b")
    run_quickstart(again)
    other = load_records(again.records_dir)
    cols = ["trial", "family", "degree", "link_bandwidth_Bps", "status"]
    assert other[cols].equals(load_records(config.records_dir)[cols])

    # Resume: raising the planned count runs only the missing trial; old parts untouched.
    before = {p.name: p.read_bytes() for p in config.records_dir.iterdir()}
    more = run_quickstart(_config(tmp_path / "a", trials=4))
    assert more.trials_run == 1 and more.records == 4
    assert all((config.records_dir / n).read_bytes() == b for n, b in before.items())
    df = load_records(config.records_dir)
    assert df["trial"].tolist() == [0, 1, 2, 3]
    _check_rows(df, config)


def test_complete_study_does_not_start_ray_and_other_config_is_refused(tmp_path):
    import ray
    from optuna.trial import TrialState

    config = _config(tmp_path, trials=1)
    study = _open_study(config)
    # Trial 0 was told by a run that stopped before writing its record batch;
    # trial 1 was still running when that run stopped.
    t0 = study.ask(config.search_space())
    row = _record(config, t0.number, _point(config, t0.params), None, status="failed",
                  reason="kept in the journal")
    t0.set_user_attr(RECORD_ATTR, _encode(row))
    study.tell(t0, state=TrialState.FAIL)
    study.ask(config.search_space())
    was_running = ray.is_initialized()

    result = run_quickstart(_config(tmp_path, trials=2))
    assert result.trials_run == 0 and ray.is_initialized() == was_running
    df = load_records(config.records_dir)
    assert df["trial"].tolist() == [0, 1]
    assert df["reason"].tolist() == ["kept in the journal",
                                     "interrupted: the run evaluating this trial stopped before "
                                     "it finished"]
    assert df["status"].tolist() == ["failed", "failed"]

    with pytest.raises(InvalidSpecError, match="another configuration"):
        run_quickstart(_config(tmp_path, trials=2, seed=12))


@pytest.mark.parametrize("kw", [
    {"servers": 1}, {"trials": 0}, {"seed": -1}, {"families": ()}, {"families": ("torus", "torus")},
    {"families": ("dragonfly",)}, {"link_rates_Bps": ()}, {"link_rates_Bps": ("fast",)},
    {"degree_range": (3, 2)}, {"degree_range": (0, 2)}, {"degree_range": (2.5, 3)},
    {"allreduce_size_bytes": -1.0}, {"study": "../x"}, {"study": ""}, {"max_in_flight": 0},
    {"population_size": 1}, {"trial_timeout_s": 0}, {"leafspine_oversub": 0.0},
    {"servers": True},
])
def test_bad_config_raises_invalid_spec(tmp_path, kw):
    with pytest.raises(InvalidSpecError) as info:
        _config(tmp_path, **kw)
    assert "\n" not in str(info.value)


def test_config_parses_units_and_hash_ignores_placement(tmp_path):
    a = _config(tmp_path, link_rates_Bps=("100Gbps", "400Gbps"), allreduce_size_bytes="1GiB")
    assert a.link_rates_Bps == RATES and a.allreduce_size_bytes == GIB
    b = _config(tmp_path / "elsewhere", trials=50, batch_size=7, num_cpus=1)
    assert a.config_hash() == b.config_hash()
    assert a.config_hash() != _config(tmp_path, servers=16).config_hash()
    assert a.journal == tmp_path / "quickstart" / "optuna-journal.log"
    assert _config(tmp_path, storage="sqlite:///x.db").journal is None


def test_failures_and_timeouts_are_recorded_and_the_study_goes_on(tmp_path, ray_cluster):
    import time

    from optuna.trial import TrialState

    from search.evaluate_design import evaluate_design

    def flaky(point):  # nested: Ray ships it by value
        if point.family == "ideal":
            raise RuntimeError("boom\nsecond line")
        if point.family == "fattree":
            time.sleep(30)
        return evaluate_design(point)

    # population 50: the 4 trials are NSGA-II's seeded random phase whatever the outcomes;
    # seed 4 draws fattree, ideal, torus, torus.
    config = _config(tmp_path, trials=4, trial_timeout_s=2.0, seed=4, population_size=50,
                     families=("ideal", "torus", "fattree"))
    result = run_quickstart(config, evaluate=flaky)
    df = load_records(config.records_dir)
    assert result.records == 4 and df["trial"].tolist() == [0, 1, 2, 3]
    for row in df.to_dict("records"):
        if row["family"] == "ideal":
            assert row["status"] == "failed" and row["reason"] == "RuntimeError: boom"
        elif row["family"] == "fattree":
            assert row["status"] == "failed" and row["reason"] == "timed out after 2 s"
        else:
            assert row["status"] in ("complete", "pruned")
    assert result.failed == int((df["family"] != "torus").sum())
    assert set(df["family"]) == {"ideal", "torus", "fattree"}  # every branch was taken
    study = _open_study(config)
    assert [t.state == TrialState.FAIL for t in study.get_trials()] == [
        s == "failed" for s in df["status"]]


def test_records_without_their_journal_are_refused(tmp_path):
    from codesign.records import RecordWriter

    config = _config(tmp_path)
    RecordWriter(config.records_dir).write([{"study": "quickstart", "trial": 0,
                                             "status": "pruned"}])
    for _ in range(2):  # refused before anything is created, so refused again
        with pytest.raises(InvalidSpecError, match="restore the journal"):
            run_quickstart(config)
