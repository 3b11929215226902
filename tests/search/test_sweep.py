"""The sweep driver on local Ray: records, resume (also after kill -9), lost workers, outcomes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from codesign.errors import InvalidSpecError
from codesign.records import load_records
from search.per_fabric import DEFAULT_SHAPES
from search.ray_session import ray_session
from search.sweeps.driver import (BYTES_PER_TRIAL, SweepPoint, distinct_designs, evaluate_trial,
                                  planned_note, run_sweep)
from search.sweeps.spec import WorkloadItem, parse_sweep_spec

RATE = 100e9 / 8


def _spec(**kw):
    raw = {"study": "t", "workloads": "bert",
           "space": {"families": ["ideal", "torus", "fattree"], "servers": 8,
                     "degree": [2, 3], "link_rate": ["100Gbps", "400Gbps"]},
           "trials": 3, "seed": 11, "population_size": 2, "max_in_flight": 2, "batch_size": 2}
    raw.update(kw)
    return parse_sweep_spec(raw)


@pytest.fixture(scope="module")
def ray_cluster(ray_shared):
    with ray_session(num_cpus=2):
        yield


# ------------------------------------------------------------ evaluate_trial (no Ray)
def test_infeasible_designs_are_pruned_with_reasons():
    # unbuildable: a 2:1 leaf-spine of a prime number of servers has no leaf size
    o = evaluate_trial(SweepPoint("leafspine", 7, 2, RATE))
    assert o.status == "pruned" and o.reason.startswith("unbuildable:") and "7 servers" in o.reason
    # 8 servers is no k^3/4: the 16-server fat-tree partially populated (it was pruned)
    tree = evaluate_trial(SweepPoint("fattree", 8, 2, RATE))
    assert tree.status == "complete"
    assert tree.metrics["topology_spec"] == "fattree:servers=8,radix=4,bw=200Gbps"
    # budget exceeded: the price is known, the budget below it
    free = evaluate_trial(SweepPoint("torus", 16, 4, RATE))
    assert free.status == "complete"
    cost = free.metrics["cost_usd"]
    o = evaluate_trial(SweepPoint("torus", 16, 4, RATE, budget_usd=cost - 1))
    assert o.status == "pruned" and o.reason.startswith("budget exceeded:")
    assert evaluate_trial(SweepPoint("torus", 16, 4, RATE, budget_usd=cost)).status == "complete"
    # memory: no strategy of GPT-3 175B fits on 16 A100-80 (the feasible start says
    # how short the closest attempt is)
    o = evaluate_trial(SweepPoint("ideal", 2, 4, RATE, workloads=(WorkloadItem("gpt3-175b"),)))
    assert o.status == "pruned" and o.reason.startswith("memory:") and "short by" in o.reason
    # ... and a fixed strategy that does not fit is pruned on memory too
    o = evaluate_trial(SweepPoint("torus", 16, 4, RATE, search_evaluations=0, workloads=(
        WorkloadItem("gpt3-175b", strategy="dp=128"),)))
    assert o.status == "pruned" and o.reason.startswith("memory:") and "GiB" in o.reason
    # strategy on the wrong number of GPUs
    o = evaluate_trial(SweepPoint("torus", 16, 4, RATE,
                                  workloads=(WorkloadItem("resnet50", strategy="dp=64"),)))
    assert o.status == "pruned" and "uses 64 GPUs" in o.reason


def test_weighted_mix_is_the_weighted_mean_of_single_workloads():
    # Fixed strategies (the feasible starts): a searched workload's chains are seeded by
    # its place in the mix, so its search alone may end elsewhere than in the mix.
    one = {n: evaluate_trial(SweepPoint("ideal", 16, 2, RATE, workloads=(WorkloadItem(n),),
                                        search_evaluations=0))
           for n in ("resnet50", "bert")}
    mix = evaluate_trial(SweepPoint("ideal", 16, 2, RATE, search_evaluations=0, workloads=(
        WorkloadItem("resnet50", 3.0), WorkloadItem("bert", 1.0))))
    t = {n: o.metrics["iteration_time_s"] for n, o in one.items()}
    assert mix.metrics["iteration_time_s"] == pytest.approx(
        (3 * t["resnet50"] + t["bert"]) / 4, rel=1e-12)
    c = mix.metrics["cost_usd"]
    assert mix.metrics["throughput_per_usd"] == pytest.approx(
        1 / (c * mix.metrics["iteration_time_s"]))
    per = json.loads(mix.metrics["per_workload_json"])
    assert [p["workload"] for p in per] == ["resnet50", "bert"]
    # More link bandwidth never slows an iteration down (same fabric, same workload).
    slow = evaluate_trial(SweepPoint("torus", 16, 4, RATE, search_evaluations=0))
    fast = evaluate_trial(SweepPoint("torus", 16, 4, 4 * RATE, search_evaluations=0))
    assert fast.metrics["iteration_time_s"] <= slow.metrics["iteration_time_s"]


def test_topoopt_family_is_topology_finder_on_the_trials_demand():
    from codesign.workloads import demand_for, get_hardware, get_workload
    from evaluators.iteration import evaluate
    from topologies.topoopt import topology_finder

    o = evaluate_trial(SweepPoint("topoopt", 16, 4, RATE, workloads=(WorkloadItem("bert"),),
                                  collective_method="auto", search_evaluations=0))
    assert o.status == "complete" and o.metrics["topology_spec"].startswith("topoopt:16,")
    assert o.metrics["switches"] == 0 and o.metrics["links"] == 16 * 4  # d out-links each
    hw, w = get_hardware("A100-80"), get_workload("bert")
    groups, mp = demand_for(w, "dp=128", hw).split()
    topo = topology_finder(16, 4, groups, mp, link_bandwidth=RATE, seed=0).topology
    expect = evaluate(topo, w, "dp=128", hardware=hw, collective_method="auto",
                      routing="auto").iteration_time_s
    assert o.metrics["iteration_time_s"] == pytest.approx(expect, rel=1e-12)
    # With the search on, the alternating loop is never slower than that start.
    co = evaluate_trial(SweepPoint("topoopt", 16, 4, RATE, workloads=(WorkloadItem("bert"),),
                                   collective_method="auto", search_evaluations=6))
    assert co.metrics["iteration_time_s"] <= expect * (1 + 1e-12)
    assert co.metrics["start_iteration_time_s"] == pytest.approx(expect, rel=1e-12)


# ---------------------------------------------------------------- the loop on Ray
def test_tiny_sweep_records_resume_and_refusals(tmp_path, ray_cluster):
    import optuna
    import ray
    from optuna.trial import TrialState

    spec = _spec()
    seen = []
    res = run_sweep(spec, results_dir=tmp_path / "a",
                    progress=lambda done, total: seen.append((done, total)))
    assert ray.is_initialized() and seen == [(1, 3), (2, 3), (3, 3)]
    assert res.trials_run == 3 and res.records == 3 and res.failed == 0
    df = pd.read_parquet(tmp_path / "a" / "t" / "records")  # plain pandas reads the folder
    assert sorted(df["trial"]) == [0, 1, 2]
    for row in df.to_dict("records"):
        assert row["config_hash"] == spec.config_hash() and row["seed"] == 11
        assert row["workload"] == "bert" and row["gpu"] == "A100-80"
        if row["family"] == "torus" and row["degree"] == 3:
            assert row["status"] == "pruned" and "even degree" in row["reason"]
        else:
            assert row["status"] == "complete" and row["cost_usd"] > 0
            s = row["strategies"][0]
            assert row["strategy"] == s["text"] and row["gpus"] == 64
            assert s["dp"] * s["tp"] * s["pp"] == 64
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(res.journal_path)))
    study = optuna.load_study(study_name="t", storage=storage)
    states = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED}
    for t, row in zip(study.get_trials(), df.sort_values("trial").to_dict("records")):
        assert t.state == states[row["status"]]
        if row["status"] == "complete":
            assert t.values == [row["iteration_time_s"], row["cost_usd"]]

    # Same spec, fresh folder: same designs.
    run_sweep(spec, results_dir=tmp_path / "b")
    cols = ["trial", "family", "degree", "link_bandwidth_Bps", "status"]
    assert load_records(tmp_path / "b")[cols].equals(load_records(tmp_path / "a")[cols])

    # An existing study needs --resume; another spec is refused.
    with pytest.raises(InvalidSpecError, match="--resume"):
        run_sweep(spec.replace(trials=4), results_dir=tmp_path / "a")
    with pytest.raises(InvalidSpecError, match="another specification"):
        run_sweep(spec.replace(seed=12), results_dir=tmp_path / "a", resume=True)
    notes = []
    more = run_sweep(spec.replace(trials=4), results_dir=tmp_path / "a", resume=True,
                     notify=notes.append)
    assert more.trials_run == 1 and load_records(tmp_path / "a")["trial"].tolist() == [0, 1, 2, 3]
    assert notes == []          # same code: nothing to say
    # A resume under other code than the study was made with says so, once, before the
    # trials run (its old records keep the old model's times).
    study = optuna.load_study(study_name="t", storage=storage)
    study.set_user_attr("codesign_code", "0123456789abcdef")
    run_sweep(spec.replace(trials=5), results_dir=tmp_path / "a", resume=True,
              notify=notes.append)
    assert len(notes) == 1 and "4 finished trials" in notes[0] and "0123456789abcdef" in notes[0]


def test_failures_and_timeouts_are_recorded(tmp_path, ray_cluster):
    def flaky(point):  # nested: Ray ships it by value
        if point.family == "ideal":
            raise RuntimeError("boom\nsecond line")
        if point.family == "fattree":
            time.sleep(60)
        return evaluate_trial(point)

    # A generous timeout: a loaded CI machine must not time out the honest trials (10 s
    # did once, with the other xdist worker and a second job on the 2 cores).  Seed 1
    # proposes torus, fattree, torus, ideal: one trial waits out the timeout (not two).
    # Fixed strategies keep the honest trials short (no strategy search to time out).
    spec = _spec(trials=4, trial_timeout_s=20.0, seed=1, population_size=50)
    spec = spec.replace(space=spec.space.__class__(
        **{**spec.space.__dict__, "strategy_search": None}))
    res = run_sweep(spec, results_dir=tmp_path, evaluate=flaky)
    df = load_records(tmp_path)
    assert df["trial"].tolist() == [0, 1, 2, 3]
    for row in df.to_dict("records"):
        if row["family"] == "ideal":
            assert row["status"] == "failed" and row["reason"] == "RuntimeError: boom"
        elif row["family"] == "fattree":
            assert row["status"] == "failed" and row["reason"] == "timed out after 20 s"
        else:
            assert row["status"] in ("complete", "pruned")
    assert res.failed == int((df["family"] != "torus").sum()) >= 1
    assert set(df["family"]) == {"torus", "fattree", "ideal"}   # every path taken


def test_a_lost_worker_is_retried_once_then_recorded_failed(tmp_path, ray_cluster):
    marker = tmp_path / "killed-once"

    def dies_once(point):
        # The first attempt of every trial kills its worker process (as an OOM kill
        # would); Ray reruns the task once and the retry succeeds.
        flag = Path(f"{marker}-{point.family}-{point.degree}-{point.link_bandwidth_Bps}")
        if not flag.exists():
            flag.touch()
            os._exit(1)
        return evaluate_trial(point)

    def always_dies(point):
        os._exit(1)

    res = run_sweep(_spec(trials=2, study="once"), results_dir=tmp_path, evaluate=dies_once)
    assert res.failed == 0 and res.records == 2
    assert list(tmp_path.glob("killed-once-*"))  # the workers really died
    res = run_sweep(_spec(trials=2, study="always"), results_dir=tmp_path, evaluate=always_dies)
    df = load_records(tmp_path / "always")
    assert res.failed == 2 and (df["status"] == "failed").all()
    assert df["reason"].str.contains("Worker|worker|died|crash", regex=True).all()


_DRIVER = textwrap.dedent("""
    import sys, time
    from search.sweeps.driver import run_sweep, evaluate_trial
    from search.sweeps.spec import parse_sweep_spec

    def slow(point):
        time.sleep(0.4)
        return evaluate_trial(point)

    spec = parse_sweep_spec({"study": "k", "workloads": "bert", "trials": 10,
        "space": {"families": ["ideal", "torus", "perms"], "servers": 8,
                  "degree": [2, 3, 4], "link_rate": ["100Gbps", "400Gbps"]},
        "population_size": 4, "max_in_flight": 2, "batch_size": 2, "seed": 3})
    run_sweep(spec, results_dir=sys.argv[1], resume=True, num_cpus=2,
              evaluate=slow if sys.argv[2] == "slow" else None)
""")


def _slow_sweep_with_a_batch_on_disk(tmp_path, stderr=subprocess.DEVNULL):
    """The driver script's slow sweep, started in its own session and returned (process,
    results folder, environment) once its first batch of records is on disk."""
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, str(script), str(results), "slow"], env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=stderr, text=True)
    records = results / "k" / "records"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list(records.glob("part-*.parquet")):
        time.sleep(0.1)
    if proc.poll() is not None:
        raise AssertionError("the sweep ended before it could be stopped")
    return proc, results, env


def test_resume_after_kill_9_gives_exactly_the_planned_trials(tmp_path):
    proc, results, env = _slow_sweep_with_a_batch_on_disk(tmp_path)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a batch is on disk, the sweep not over
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = load_records(results / "k")
    assert 0 < len(before) < 10
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(results), "fast"],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    df = load_records(results / "k")
    assert sorted(df["trial"].tolist()) == list(range(10))  # unique, none lost or repeated
    assert set(df["status"]) <= {"complete", "pruned", "failed"}
    # The rows written before the kill are unchanged.
    merged = before.merge(df, on="trial", suffixes=("", "_after"))
    assert (merged["status"] == merged["status_after"]).all() and len(merged) == len(before)


def test_grid_sampler_strategy_search_and_storage_url(tmp_path, ray_cluster):
    # Grid over 2 families x 2 degrees x 1 rate = 4 points, 3 trials with the per-trial
    # strategy search; sqlite storage instead of the journal.
    spec = parse_sweep_spec({
        "study": "g", "workloads": "bert", "sampler": "grid", "trials": 3, "seed": 2,
        "storage": f"sqlite:///{tmp_path / 'optuna.db'}",
        "space": {"families": ["ideal", "torus"], "servers": 8, "degree": [2, 4],
                  "link_rate": "100Gbps", "collective_method": "auto",
                  "strategy_search": {"evaluations": 4}},
        "objectives": ["throughput_per_usd"]})
    res = run_sweep(spec, results_dir=tmp_path)
    assert res.journal_path is None and (tmp_path / "optuna.db").exists()
    df = load_records(tmp_path / "g")
    assert len(df) == 3 and df["sampler"].unique().tolist() == ["grid"]
    combos = {(r["family"], r["degree"]) for r in df.to_dict("records")}
    assert len(combos) == 3  # the grid never repeats a point
    for row in df.to_dict("records"):
        if row["status"] == "complete":
            s = row["strategies"][0]
            assert s["dp"] * s["tp"] * s["pp"] == 64 and row["strategy"] == s["text"]
            assert row["iteration_time_s"] <= row["start_iteration_time_s"] * (1 + 1e-12)
            assert 1 <= row["search_evaluations"] <= 1 + DEFAULT_SHAPES + 4
            assert row["throughput_per_usd"] == pytest.approx(
                1 / (row["cost_usd"] * row["iteration_time_s"]))
        else:
            assert row["reason"].split(":")[0] in ("memory", "strategy", "unbuildable",
                                                   "inapplicable")
    assert sum(res.reasons.values()) == res.pruned + res.failed
    # A grid covered exactly (2 points, 2 trials): the sampler's stop signal is harmless.
    full = run_sweep(spec.replace(study="g2", trials=2, space=spec.space.__class__(
        **{**spec.space.__dict__, "degrees": (2,), "strategy_search": None})),
        results_dir=tmp_path)
    assert full.records == 2 and full.failed == 0
    assert sorted(load_records(tmp_path / "g2")["family"]) == ["ideal", "torus"]


def test_records_do_not_depend_on_the_worker_count(tmp_path, ray_cluster):
    # The same grid sweep with the per-trial strategy search and `best` collectives, one
    # trial at a time and two at a time: identical records but for timings.
    base = {"study": "w1", "workloads": [{"name": "resnet50"}, {"name": "bert"}],
            "sampler": "grid", "trials": 3, "seed": 5,
            "space": {"families": ["ideal", "torus", "expander"], "servers": 8, "degree": 2,
                      "link_rate": "100Gbps", "strategy_search": {"evaluations": 4}}}
    one = parse_sweep_spec({**base, "max_in_flight": 1})
    two = parse_sweep_spec({**base, "study": "w2", "max_in_flight": 2})
    run_sweep(one, results_dir=tmp_path)
    run_sweep(two, results_dir=tmp_path)
    cols = ["trial", "status", "reason", "family", "iteration_time_s", "start_iteration_time_s",
            "strategy", "search_evaluations", "collective_algorithms_json"]
    a = load_records(tmp_path / "w1")[cols]
    b = load_records(tmp_path / "w2")[cols]
    assert (a["status"] == "complete").any()
    pd.testing.assert_frame_equal(a, b)


def test_sigterm_stops_the_sweep_with_its_records_written(tmp_path):
    # A scheduler or `timeout` stops a job with SIGTERM; Ray's own handler used to dump
    # native stacks and skip the final write, leaving told trials without records.
    proc, results, _ = _slow_sweep_with_a_batch_on_disk(tmp_path, stderr=subprocess.PIPE)
    try:
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "SIGTERM received" not in err and "KeyboardInterrupt" in err
    told = sum(1 for line in (results / "k" / "optuna-journal.log").read_text().splitlines()
               if json.loads(line).get("op_code") == 6)  # a trial's state set: told
    assert 0 < told == len(load_records(results / "k")) < 10


def test_a_plan_beyond_the_space_or_the_disk(tmp_path, monkeypatch):
    spec = _spec()  # 3 families x 2 degrees x 2 link rates
    assert distinct_designs(spec) == 12
    assert planned_note(spec) is None and planned_note(spec.replace(trials=12)) is None
    note = planned_note(spec.replace(trials=13))
    assert note.startswith("13 trials planned over 12 distinct designs")
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(0, 0, 10 * BYTES_PER_TRIAL))
    with pytest.raises(InvalidSpecError, match=r"sweep trials 11: expected at most 10 more"):
        run_sweep(spec.replace(trials=11), results_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()  # refused before anything was created


@pytest.mark.parametrize("storage, needle", [
    ("sqlite:////nonexistent/dir/x.db", "unable to open database file"),
    ("foo://bar", "Can't load plugin"),
])
def test_a_storage_url_that_does_not_open_is_one_line(tmp_path, storage, needle):
    # Fuzzing: both URLs raised sqlalchemy tracebacks; refused before Ray, nothing left.
    with pytest.raises(InvalidSpecError, match=rf"invalid sweep storage .*{needle}"):
        run_sweep(_spec(storage=storage), results_dir=tmp_path / "r")
    assert list((tmp_path / "r").iterdir()) == []


def test_a_corrupt_journal_names_the_file_and_the_fix(tmp_path):
    # Fuzzing: `{{{` appended to the journal raised a JSONDecodeError traceback on --resume.
    journal = tmp_path / "t" / "optuna-journal.log"
    journal.parent.mkdir()
    journal.write_text("{{{\n")
    with pytest.raises(InvalidSpecError, match=r"invalid sweep journal '.*optuna-journal.log':"
                       r" cannot be read \(JSONDecodeError.*restore it"):
        run_sweep(_spec(), results_dir=tmp_path, resume=True)


def test_resume_records_a_trial_killed_before_its_design_was_drawn(tmp_path):
    # kill -9 between two of the sampler's suggestions leaves a RUNNING trial with part
    # of its parameters in the journal; the resume stopped on "invalid sweep point degree
    # 0" (a traceback, and no resume). Now it is a failed record holding what was drawn.
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from search.sweeps.driver import run_sweep

    spec = {"study": "p", "workloads": "bert", "trials": 2, "seed": 1,
            "space": {"families": ["ideal", "torus"], "servers": 8, "degree": [2, 4],
                      "link_rate": "100Gbps", "collective_method": "auto",
                      "strategy_search": "off"}}
    run_sweep(parse_sweep_spec(spec), results_dir=tmp_path, num_cpus=1)
    journal = tmp_path / "p" / "optuna-journal.log"
    study = optuna.load_study(study_name="p",
                              storage=JournalStorage(JournalFileBackend(str(journal))))
    half = study.ask()
    half.suggest_categorical("family", ["ideal", "torus"])   # ... and then the kill
    del study
    res = run_sweep(parse_sweep_spec({**spec, "trials": 3}), results_dir=tmp_path,
                    resume=True, num_cpus=1)
    df = load_records(tmp_path / "p").set_index("trial")
    assert sorted(df.index) == [0, 1, 2] and res is not None
    row = df.loc[2]
    assert row["status"] == "failed" and "before its design was drawn" in row["reason"]
    assert row["family"] == json.loads(row["params_json"])["family"]
    assert pd.isna(row["degree"]) and pd.isna(row["link_bandwidth_Bps"])
    assert (df.loc[[0, 1], "status"] != "failed").all()
