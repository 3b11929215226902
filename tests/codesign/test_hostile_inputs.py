"""Issue 18: every oversized or hostile input gets a one-line answer, fast and small.

* Oversized requests run in one subprocess under a 2 GiB address-space limit
  (``RLIMIT_AS``); each must exit 2 with one line naming the field within 10 s.
* Hostile files (FIFO, UTF-16, binary, YAML alias bomb), bad output paths,
  invalid schedules, ``--json`` errors and empty option values run in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codesign.app.cli import main
from codesign.resources import memory_limit_scope

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, out, err, needle):
    assert code == 2, (out, err)
    assert out == "" and err.count("\n") == 1, err
    assert "Traceback" not in err and needle in err, err


# ----------------------------------------------------------- oversized requests
ASTRA_HUGE = "topology: [Ring]\nnpus_count: [1000000000]\nbandwidth: [50]\nlatency: [500]\n"
YAML_NPUS = "npus: 1000000000\nbandwidth: 25GB/s\nlatency: 1us\nlinks:\n  - {src: 0, dst: 1}\n"
YAML_COUNT = ("npus: 2\nbandwidth: 25GB/s\nlatency: 1us\nlinks:\n"
              "  - {src: 0, dst: 1, count: 1000000000}\n")
SYNTH = ["--collective", "allreduce", "--size", "1GB"]

OVERSIZED = [
    (["synth", "ring:100000", *SYNTH, "--algorithm", "tacos"], "npus=100000"),
    (["synth", "ring:100000", *SYNTH, "--algorithm", "mcf"], "npus=100000"),
    (["synth", "ring:10000", *SYNTH, "--algorithm", "tacos"], "npus=10000"),
    (["bound", "ring:100000", *SYNTH, "--method", "mcf"], "npus=100000"),
    (["topology", "show", "ring:100000"], "nodes=100000"),
    (["topology", "show", "{npus}"], "npus=1000000000"),
    (["topology", "show", "{count}"], "links=1000000000"),
    (["topology", "show", "{astra}"], "shape=1000000000"),
    (["topology", "show", "torus:1000x1000x1000"], "shape=1000x1000x1000"),
    (["topology", "show", "switch:10000000"], "shape=10000000"),
    (["topology", "show", "ring:99999999999999999999999"], "shape=9999"),
    (["whatif", "--servers", "1000000", "--budget", "1e6"], "--servers=1000000"),
    (["topology", "topoopt", "--servers", "20000", "--degree", "8", "--bandwidth", "100Gbps"],
     "servers=20000"),
    (["synth", "ring:8", "--collective", "allreduce", "--size", "1e30TiB"], "--size"),
    (["synth", "themis:2d-sw-sw", *SYNTH, "--algorithm", "themis", "--out", "{out}"],
     "npus=1024"),
]

_RUNNER = textwrap.dedent("""
    import contextlib, io, json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from codesign.app.cli import main
    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        except BaseException as exc:  # a traceback is a failure of the test
            code, err = -1, io.StringIO(f"Traceback: {type(exc).__name__}: {exc}"[:300])
        results.append({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                        "s": time.perf_counter() - t0})
    print(json.dumps(results))
""")


def test_oversized_requests_are_refused_in_one_line_under_2gib(tmp_path):
    files = {"npus": YAML_NPUS, "count": YAML_COUNT, "astra": ASTRA_HUGE}
    paths = {k: tmp_path / f"{k}.yaml" for k in files}
    for k, text in files.items():
        paths[k].write_text(text)
    paths["out"] = tmp_path / "schedule.json"
    argvs = [[a.format(**paths) for a in argv] for argv, _ in OVERSIZED]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    env.pop("CODESIGN_MAX_MEMORY", None)
    proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(argvs)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    for (argv, needle), r in zip(OVERSIZED, results):
        assert r["code"] == 2, (argv, r)
        assert r["out"] == "" and r["err"].count("\n") == 1, (argv, r)
        assert needle in r["err"] and "Traceback" not in r["err"], (argv, r)
        assert r["s"] < 10.0, (argv, r["s"])
    assert not paths["out"].exists()


def test_refusal_names_estimate_limit_and_remedy(capsys):
    code, out, err = run(capsys, "topology", "show", "ring:64", "--max-memory", "1KB")
    one_line_error(code, out, err, "shape=64")
    assert "limit 1000 B" in err and "--max-memory" in err and "smaller network" in err


def test_json_error_object_on_stdout(capsys):
    code, out, err = run(capsys, "synth", "ring:8", *SYNTH, "--algorithm", "tacos",
                         "--max-memory", "1KB", "--json")
    assert code == 2 and err == ""
    data = json.loads(out)
    assert set(data) == {"error", "kind", "field", "exit"}
    assert data["exit"] == 2 and data["field"] == "shape" and "refused" in data["error"]
    code, out, _ = run(capsys, "topology", "show", "ring:8,bw=1e-300", "--json")
    data = json.loads(out)
    assert code == 2 and data["field"] == "ring bw" and "1e-300" in data["error"]


def test_usage_error_with_json_is_a_json_object(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["synth", "ring:8", "--json"])
    assert exc.value.code == 2
    data = json.loads(capsys.readouterr().out)
    assert data["exit"] == 2 and "--collective" in data["error"]


@pytest.mark.parametrize("argv, flag", [
    (["evaluate", "--topology", "ring:4", "--workload", "resnet50", "--strategy", ""],
     "--strategy"),
    (["synth", "ring:8", "--collective", "allgather", "--size", " "], "--size"),
    (["topology", "show", ""], "spec"),
])
def test_empty_option_values_are_errors(capsys, argv, flag):
    code, out, err = run(capsys, *argv)
    one_line_error(code, out, err, f"invalid {flag} ")


def test_tiny_bandwidth_and_huge_size_are_refused(capsys):
    for argv, needle in ((["bound", "ring:4,bw=1e-300", *SYNTH], "ring bw"),
                         (["bound", "ring:4", "--collective", "allreduce", "--size",
                           "1e30TiB"], "--size")):
        one_line_error(*run(capsys, *argv), needle)


def test_sub_byte_chunks_are_refused_with_the_largest_allowed(capsys):
    # 1 MiB over 16 NPUs is 65536 bytes a piece: more chunks than that would be sub-byte.
    for cmd in ("synth", "bound"):
        one_line_error(*run(capsys, cmd, "torus:4x4", "--collective", "allgather", "--size",
                            "1MiB", "--chunks", "100000"), "at most 65536")
    code, out, _ = run(capsys, "bound", "torus:4x4", "--collective", "allgather", "--size",
                       "1MiB", "--chunks", "65536")
    assert code == 0 and out


@pytest.mark.parametrize("argv, needle", [
    (["synth", "ring:4", "--collective", "allgather", "--size", "-1MiB"], "--size '-1MiB'"),
    (["bound", "ring:4", "--collective", "allgather", "--size", "-.5GB"], "--size '-.5GB'"),
    (["whatif", "--gpus", "8", "--budget", "-5e6"], "budget '-5e6'"),
])
def test_negative_values_reach_their_field_check(capsys, argv, needle):
    # argparse alone would say "expected one argument" for a value starting with '-'.
    one_line_error(*run(capsys, *argv), needle)


# ---------------------------------------------------------------- hostile files
def hostile_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nnpus: 2\nname: *i\nlinks: []\n")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    u16 = tmp_path / "u16.yaml"
    u16.write_bytes("npus: 2\n".encode("utf-16"))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\nnpus: 2\n".encode("latin-1"))
    deep = tmp_path / "deep.yaml"
    deep.write_text("npus: " + "[" * 5000 + "]" * 5000 + "\n")
    return {"bomb": (bomb, "alias bomb"), "fifo": (fifo, "FIFO"), "u16": (u16, "UTF-16"),
            "bin": (binary, "NUL bytes"), "latin": (latin, "not UTF-8"),
            "deep": (deep, "nested")}


@pytest.mark.parametrize("kind", ["bomb", "fifo", "u16", "bin", "latin", "deep"])
def test_hostile_topology_files(capsys, tmp_path, kind):
    path, needle = hostile_files(tmp_path)[kind]
    code, out, err = run(capsys, "topology", "show", path)
    one_line_error(code, out, err, needle)
    assert len(err) < 400  # the alias bomb's expansion is never echoed


@pytest.mark.parametrize("kind", ["bomb", "fifo", "u16", "bin"])
def test_hostile_sweep_catalog_and_csv_files(capsys, tmp_path, kind):
    path, needle = hostile_files(tmp_path)[kind]
    argvs = [["sweep", path, "--results", tmp_path / "r", "--quiet"],
             ["topology", "cost", "ring:4", "--catalog", path]]
    if kind != "bomb":  # as CSV the bomb is just a ragged table (also exit 2)
        argvs.append(["reorder", path, "--algorithm", "ring"])
    for argv in argvs:
        one_line_error(*run(capsys, *argv), needle)
    assert not (tmp_path / "r").exists()


def test_outputs_into_missing_folder_or_directory(capsys, tmp_path):
    base = ["synth", "ring:4", "--collective", "allgather", "--size", "1MB", "--out"]
    one_line_error(*run(capsys, *base, tmp_path / "nope" / "s.json"), "does not exist")
    one_line_error(*run(capsys, *base, tmp_path), "is a directory")
    code, out, _ = run(capsys, *base, tmp_path / "s.json", "--json")
    assert code == 0 and json.loads(out)["out"].endswith("s.json")
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary file left


def test_names_longer_than_the_file_system_allows(capsys, tmp_path):
    """A name part over 255 bytes: ``Path.is_file`` raises on Python 3.11, so every check
    of "is this a file?" and "can I write there?" goes through codesign.files."""
    long = "x" * 300
    out = tmp_path / long
    runs = ROOT / "experiments" / "validation" / "runs.csv"
    for argv, needle in (
            (["synth", f"ring:8,{long}", "--collective", "allgather", "--size", "1MiB"],
             "ring"),
            (["topology", "cost", "ring:8", "--catalog", long], "--catalog"),
            (["report", long], "results folder"),
            (["calibrate", long, "--hardware", "H100"], "runs file"),
            (["synth", "ring:8", "--collective", "allgather", "--size", "1MiB", "--out",
              f"{out}.json"], "name too long"),
            (["calibrate", runs, "--hardware", "H100", "--out", f"{out}.yaml"],
             "name too long"),
            (["whatif", "--gpus", "64", "--workload", "llama3-8b", "--budget", "1e6",
              "--quiet", "--families", "ideal", "--report", out], "name too long"),
            (["sweep", ROOT / "experiments" / "sweeps" / "small.yaml", "--results", out],
             "name too long")):
        one_line_error(*run(capsys, *argv), needle)
    assert list(tmp_path.iterdir()) == []


def test_output_folders_and_files_are_checked_before_the_work(capsys, tmp_path):
    # These wrote only after computing, and a bad path was a Python traceback.
    afile = tmp_path / "afile"
    afile.write_text("x")
    whatif = ["whatif", "--gpus", "64", "--workload", "llama3-8b", "--budget", "1e6",
              "--quiet", "--search-evaluations", "0", "--families", "ideal"]
    runs = ROOT / "experiments" / "validation" / "runs.csv"
    calibrate = ["calibrate", runs, "--hardware", "A100-80", "--holdout", "none", "--out"]
    for argv, needle in (
            ([*whatif, "--report", afile], "--report folder"),
            ([*whatif, "--report", afile / "sub"], "is a file, not a folder"),
            ([*calibrate, tmp_path / "nodir" / "x.yaml"], "does not exist"),
            ([*calibrate, tmp_path], "is a directory"),
            (["optimize", "--workload", "ncf", "--servers", "4", "--degree", "2",
              "--bandwidth", "100Gbps", "--out", afile], "is a file, not a folder")):
        one_line_error(*run(capsys, *argv), needle)
    code, out, _ = run(capsys, *whatif, "--report", afile, "--json")
    assert code == 2 and json.loads(out)["field"] == "--report folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing created


def test_whatif_exit_codes_for_a_format_the_gpu_lacks_and_an_unaffordable_request(capsys):
    base = ["whatif", "--servers", "2", "--gpu", "A100-80", "--workload", "llama3-8b",
            "--quiet", "--search-evaluations", "0", "--families", "ideal"]
    # Caller's error (exit 2), not "no fabric of the grid can run the mix" (exit 1).
    one_line_error(*run(capsys, *base, "--budget", "1e6", "--option", "precision=fp8"),
                   "invalid precision 'fp8': expected one of")
    code, out, err = run(capsys, *base, "--budget", "10")
    assert code == 1 and "costs at most $10" in out and "infeasible" in err
    code, out, _ = run(capsys, *base, "--budget", "10,1e6")  # one budget buys: an answer
    assert code == 0


def test_plain_output_has_no_python_reprs(capsys):
    code, out, _ = run(capsys, "bound", "ring:8", "--collective", "allreduce", "--size",
                       "1MiB", "--method", "mcf")
    assert code == 0 and "optimal: yes" in out and "size_bytes: 1048576\n" in out
    assert "None" not in out and "True" not in out
    code, out, _ = run(capsys, "simulate", "ring:8", "--send", "0:3:1MiB", "--send", "1:5:1MiB")
    assert code == 0 and "transfers: 2\n  src 0, dst 3, size_bytes 1048576" in out
    assert "{" not in out and "[" not in out
    one_line_error(*run(capsys, "simulate", "ring:8"), "invalid --send []: expected at least")


def test_json_errors_name_the_key_of_a_mapping(capsys, tmp_path):
    hw = tmp_path / "h.yaml"
    hw.write_text("gpus:\n  G:\n    peak: 1\n")
    code, out, _ = run(capsys, "evaluate", "--hardware-file", hw, "--hardware", "G",
                       "--workload", "bert", "--topology", "ideal:2", "--json")
    assert code == 2 and json.loads(out)["field"] == "peak"


# ------------------------------------------------------------ schedules on load
def _schedule(tmp_path, capsys, spec="ring:4", kind="allgather"):
    path = tmp_path / "s.json"
    code, _, _ = run(capsys, "synth", spec, "--collective", kind, "--size", "1MB",
                     "--out", path)
    assert code == 0
    return path, json.loads(path.read_text())


def _set(d, key, i, value):
    d["transfers"][key][i] = value


SCHEDULE_CASES = {
    "text": (lambda d: _set(d, "start", 0, "zero"), "a number"),
    "huge int": (lambda d: _set(d, "src", 0, 10 ** 30), "magnitude"),
    "chunk out of range": (lambda d: _set(d, "chunk", 0, 99), "chunk id"),
    "unknown op": (lambda d: _set(d, "op", 0, 7), "0 (copy) or 1 (reduce)"),
    "end before start": (lambda d: _set(d, "end", 0, -1.0), "transfer 0"),
    "link model": (lambda d: d["metadata"].update(link_model="telepathy"), "link_model"),
    "other collective": (lambda d: d["collective"].update(kind="reducescatter"), "invalid"),
    "incomplete": (lambda d: [d["transfers"][k].pop() for k in
                              ("chunk", "src", "dst", "op", "start", "end", "path_ptr",
                               "path_links")]
                   + ([d["transfers"]["hop_start"].pop()] if d["transfers"]["hop_start"]
                      else []), "incomplete"),
    "foreign npus": (lambda d: d["collective"].update(npus=[0, 1, 2, 9]), "NPU"),
    "deep": (lambda d: d["metadata"].update(x=json.loads("[" * 200 + "]" * 200)), "nested"),
}


@pytest.mark.parametrize("case", sorted(SCHEDULE_CASES))
def test_invalid_schedules_exit_2_naming_the_violation(capsys, tmp_path, case):
    path, data = _schedule(tmp_path, capsys)
    mutate, needle = SCHEDULE_CASES[case]
    mutate(data)
    bad = tmp_path / "bad.json"
    text = json.dumps(data)
    bad.write_text(text)
    one_line_error(*run(capsys, "simulate", "ring:4", "--schedule", bad), needle)


def test_nan_and_fewer_npus_schedules(capsys, tmp_path):
    path, data = _schedule(tmp_path, capsys)
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(data).replace('"start":[0.0', '"start":[NaN', 1)
                   if '"start":[0.0' in json.dumps(data) else
                   json.dumps(data).replace('"start": [0.0', '"start": [NaN', 1))
    one_line_error(*run(capsys, "simulate", "ring:4", "--schedule", bad), "NaN")
    # A 4-NPU ring schedule replayed on an 8-NPU ring: its paths are not links there.
    one_line_error(*run(capsys, "simulate", "ring:8", "--schedule", path), "invalid")
    code, out, _ = run(capsys, "simulate", "ring:4", "--schedule", path, "--json")
    assert code == 0 and json.loads(out)["makespan_s"] > 0


# ------------------------------------------------------------- Themis at scale
THEMIS_PLATFORMS = ["2d-sw-sw", "3d-sw-sw-sw-homo", "3d-sw-sw-sw-hetero", "3d-fc-ring-sw",
                    "4d-ring-sw-sw-sw", "4d-ring-fc-ring-sw"]


def test_themis_at_1024_npus_is_model_only_and_never_slower_than_baseline(capsys):
    from evaluators.algorithms.themis import themis_model
    from topologies.families.themis_presets import preset_dimensions

    speedups = []
    for name in THEMIS_PLATFORMS:
        code, out, _ = run(capsys, "synth", f"themis:{name}", *SYNTH, "--algorithm", "themis",
                           "--json")
        data = json.loads(out)
        assert code == 0 and data["model_only"] is True and data["valid"] is None
        # Oracle: the Sec. 4.4 model called directly (Algorithm 1 vs the static baseline).
        dims = preset_dimensions(name)
        assert data["time_s"] == themis_model(dims, "allreduce", 1e9, chunks=64)["time_s"]
        assert data["baseline_time_s"] == themis_model(dims, "allreduce", 1e9, chunks=64,
                                                       policy="fifo", baseline=True)["time_s"]
        assert data["time_s"] <= data["baseline_time_s"] * (1 + 1e-12)
        assert data["time_s"] >= data["lower_bound_s"] * (1 - 1e-9)
        assert len(data["dimensions"]) == len(dims)
        speedups.append(data["speedup_over_baseline"])
    assert min(speedups) >= 1.0 and sum(speedups) / len(speedups) > 1.05


def test_themis_astra_file_matches_the_preset(capsys, tmp_path):
    from topologies.families.themis_presets import preset_dimensions

    dims = preset_dimensions("3d-fc-ring-sw")
    kinds = {"fc": "FullyConnected", "ring": "Ring", "switch": "Switch"}
    path = tmp_path / "net.yaml"
    # ASTRA-sim bandwidth is per link in GB/s = 2^30 B/s; links per pair folded in.
    path.write_text(
        f"topology: [{', '.join(kinds[d.kind] for d in dims)}]\n"
        f"npus_count: [{', '.join(str(d.size) for d in dims)}]\n"
        f"bandwidth: [{', '.join(repr(d.bandwidth_Bps * d.links / 2 ** 30) for d in dims)}]\n"
        f"latency: [{', '.join(repr(d.latency_s * 1e9) for d in dims)}]\n")
    code, out, _ = run(capsys, "synth", path, *SYNTH, "--algorithm", "themis", "--json")
    data = json.loads(out)
    assert code == 0 and data["model_only"] and data["npus"] == 1024
    assert data["time_s"] <= data["baseline_time_s"]


def test_small_themis_still_builds_the_schedule(capsys):
    code, out, _ = run(capsys, "synth", "torus:4x4", *SYNTH, "--algorithm", "themis", "--json")
    data = json.loads(out)
    assert code == 0 and data["valid"] is True and "model_only" not in data


def test_memory_limit_scope_restores():
    from codesign.resources import memory_limit

    before = memory_limit()
    with memory_limit_scope(1e6):
        assert memory_limit() == 1e6
    assert memory_limit() == pytest.approx(before, rel=0.2)


# ------------------------------------------------------------------ sweeps
def test_sweep_trials_of_oversized_designs_are_pruned_with_the_reason(monkeypatch):
    import topologies.routing as routing
    from search.sweeps.driver import SweepPoint, evaluate_trial

    with memory_limit_scope(256 * 2 ** 20):
        # 65,536 servers: neither the all-pairs tables (24 B x 65536^2) nor breadth-first
        # searches from every server (65536 x 327,680 visits) are within bounds.
        big = evaluate_trial(SweepPoint("torus", 65536, 4, 12.5e9))
        small = evaluate_trial(SweepPoint("torus", 16, 4, 12.5e9))
    kept, searched = [], []
    fit, bfs = routing._tables_fit, routing._bfs
    monkeypatch.setattr(routing, "_tables_fit", lambda t: kept.append(fit(t)) or kept[-1])
    monkeypatch.setattr(routing, "_bfs", lambda t, s: searched.append(len(s)) or bfs(t, s))
    with memory_limit_scope(64 * 2 ** 20):
        # 1,024: the tables' build (25 MB) is over their share of 64 MiB, BFS rows a
        # block at a time are not: the trial completes without them (its fixed
        # strategies only: the strategy search would time the same routes 30 times over).
        mid = evaluate_trial(SweepPoint("torus", 1024, 4, 12.5e9, search_evaluations=0,
                                        search_shapes=0))
    assert big.status == "pruned" and "refused" in big.reason and "nodes=65536" in big.reason
    assert "\n" not in big.reason
    assert mid.status == small.status == "complete"
    assert kept and not any(kept) and searched       # routed without the tables


@pytest.mark.parametrize("spec, algorithm, kind", [
    ("ring:16", "ring", "allreduce"), ("uniring:9", "ring", "allgather"),
    ("ring:12", "bidir-ring", "reducescatter"), ("fc:8", "direct", "alltoall"),
    ("ring:10", "ring", "broadcast")])
def test_closed_form_model_only_equals_the_replayed_schedule(capsys, monkeypatch, spec,
                                                             algorithm, kind):
    import evaluators.algorithms.model_only as mo

    monkeypatch.setattr(mo, "MODEL_ONLY_TRANSFERS", 10)  # force the model at a small size
    argv = ["synth", spec, "--collective", kind, "--size", "3MB", "--chunks", "2",
            "--algorithm", algorithm, "--json"]
    code, out, _ = run(capsys, *argv)
    model = json.loads(out)
    code2, out2, _ = run(capsys, *argv, "--option", "schedule=true")
    full = json.loads(out2)
    assert code == code2 == 0 and model["model_only"] is True and full["valid"] is True
    assert model["time_s"] == pytest.approx(full["time_s"], rel=1e-9)
    assert model["chunks"] == full["chunks"]


def test_ring_at_100000_npus_answers_from_the_closed_form(capsys):
    from evaluators.algorithms.closed_form import closed_form_time

    code, out, _ = run(capsys, "synth", "ring:100000", *SYNTH, "--json")
    data = json.loads(out)
    assert code == 0 and data["model_only"] and data["lower_bound_s"] is None
    assert data["time_s"] == closed_form_time("ring", "allreduce", 100000, 1e9, 25e9, 1e-6)
    assert "cut bound" in data["lower_bound_note"]


def test_an_unknown_catalog_name_lists_the_catalogs(capsys):
    # Fuzzing: `topology cost ring:8 --catalog nope` said "cannot read spec file 'nope'".
    assert main(["topology", "cost", "ring:4", "--catalog", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--catalog 'nope'" in err and "parts-2026" in err


@pytest.mark.parametrize("spec, key", [
    ("torus:4x4,bw=100", "torus bw"), ("mesh:4x4,bw=1e9:100", "mesh bw"),
    ("torus:4x4,lat=5", "torus lat"), ("ring:8,bw=100", "ring bw"),
    ("railopt:144,gpus=4,scaleup=72,scaleup_bw=900,bw=800Gbps", "railopt scaleup_bw")])
def test_a_bare_implausible_number_is_refused_by_every_family(capsys, spec, key):
    # (per-dimension tori and meshes and the scale-up domain parsed without the check)
    one_line_error(*run(capsys, "topology", "show", spec), key)


@pytest.mark.parametrize("extra, needle", [
    (["--bandwidth", "100"], "invalid bandwidth '100'"),
    (["--bandwidth", "100Gbps", "--collective-method", "nope"], "collective_method 'nope'")])
def test_optimize_checks_bandwidth_and_collective_method_before_the_work(capsys, extra, needle):
    # both ran (100 B/s links past a 2-minute limit; 'nope' as inf ms with exit 0)
    one_line_error(*run(capsys, "optimize", "--workload", "dlrm", "--servers", "16",
                        "--degree", "4", "--workers", "0", *extra), needle)


def _runs_csv(tmp_path, edit) -> Path:
    """Three Megatron-LM H100 rows of the validation table, each edited by ``edit``."""
    import csv

    with open(ROOT / "experiments" / "validation" / "runs.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["id"].startswith("megatron-h100-")][:3]
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(edit(dict(r)) for r in rows)
    return path


def test_calibrate_refuses_runs_faster_than_the_peak_and_profiles_it_cannot_write(
        capsys, tmp_path):
    # 4x the published TFLOP/s: above the H100's bf16 peak on the model's own FLOPs
    fast = _runs_csv(tmp_path, lambda r: {**r, "value": str(4 * float(r["value"]))})
    one_line_error(*run(capsys, "calibrate", fast, "--hardware", "H100"),
                   "above the H100's bf16 peak")
    # 1 Gb/s NICs: predicted 50x slower than measured; the file would carry an error
    # above 100 %, which the profile loader refuses (it was written, then unusable)
    slow = _runs_csv(tmp_path, lambda r: {**r, "system": r["system"].replace(
        r["system"].split("bw=")[1], "1Gbps")})
    out = tmp_path / "h100.yaml"
    code, _, err = run(capsys, "calibrate", slow, "--hardware", "H100", "--out", out)
    lines = err.splitlines()   # (the fit's progress lines first)
    assert code == 2 and "Traceback" not in err and lines[-1].startswith("codesign: error")
    assert "held-out error is" in lines[-1] and "nothing written" in lines[-1]
    assert not out.exists()


def test_direct_schedules_are_estimated_with_the_fabrics_path_length(capsys):
    """``direct`` routes every pair over the fabric's shortest path (5.38 links on this
    1,024-NPU three-tier fabric): at 600 B per transfer its 6.3 M transfers were
    estimated at 3.5 GiB and ran out of memory after 2 minutes (7.8 GB measured)."""
    from evaluators.collectives import Collective
    from evaluators.estimates import BYTES_PER_HOP, BYTES_PER_TRANSFER, estimate_schedule_bytes
    from topologies.registry import from_spec

    topo = from_spec("themis:3d-sw-sw-sw-hetero")
    coll = Collective("alltoall", tuple(range(1024)), 2 ** 30, chunks_per_npu=6)
    transfers, nbytes = estimate_schedule_bytes(coll, "direct", {}, topo)
    assert transfers == 1024 * 1023 * 6
    assert nbytes == pytest.approx(transfers * (BYTES_PER_TRANSFER + BYTES_PER_HOP * (
        topo.mean_path_length - 1)))
    # neighbour-to-neighbour algorithms keep one link per transfer
    assert estimate_schedule_bytes(coll, "ring", {}, topo)[1] == transfers * BYTES_PER_TRANSFER
    with memory_limit_scope(4 * 2 ** 30):
        one_line_error(*run(capsys, "synth", "themis:3d-sw-sw-sw-hetero", "--collective",
                            "alltoall", "--size", "1GiB", "--algorithm", "direct",
                            "--chunks", "6"), "needs about 6.97 GiB")


def test_ring_schedules_are_refused_by_their_routed_length(capsys):
    """A ring whose neighbours are far apart on a sparse fabric: generator 31 on a
    64-node ring topology sends every transfer over 31 links (closed form), so its
    64 x 63 transfers take 64 x 63 x 31 links; the plan refuses them once routed, before
    the per-hop arrays exist (a 2,048-server what-if grew a worker past 18 GB this way:
    the count before routing assumes one link per transfer)."""
    from evaluators.estimates import BYTES_PER_HOP, BYTES_PER_TRANSFER

    transfers, hops = 64 * 63, 64 * 63 * 31
    need = transfers * BYTES_PER_TRANSFER + (hops - transfers) * BYTES_PER_HOP
    argv = ("synth", "ring:64", "--collective", "allgather", "--size", "1MiB",
            "--algorithm", "multiring", "--option", "generators=[31]")
    with memory_limit_scope(need // 2):
        code, out, err = run(capsys, *argv)
    one_line_error(code, out, err, f"over {hops:.3g} links")
    assert "multiring allgather" in err
    with memory_limit_scope(need * 2):
        code, out, _ = run(capsys, *argv)
    assert code == 0


@pytest.mark.parametrize("argv, needle", [
    (["whatif", "--shared-cluster", "--budget", "1e6"], "whatif --budget"),
    (["whatif", "--shared-cluster", "--workload", "bert"], "whatif --workload"),
    (["whatif", "--workload", "bert", "--mix", "bert:1", "--servers", "16", "--budget", "1e6"],
     "not with --mix"),
    (["whatif", "--servers", "16", "--budget", "1e6", "--families", "torus,torus"],
     "each once"),
    (["simulate", "ring:8", "--schedule", "s.json", "--send", "0:1:1MiB"],
     "no --send with --schedule"),
    # (exit 1 "infeasible" before: values the user gave that no fabric can have)
    # (100,000 servers: a partly populated fat-tree exists, its all-pairs routes do not fit)
    (["whatif", "--shared-cluster", "--servers", "100000"], "all-pairs hop matrix"),
    (["whatif", "--shared-cluster", "--servers", "433"], "servers 433: expected one "
                                                         "the leafspine fabric can have"),
    (["whatif", "--shared-cluster", "--degree", "1000"], "degree 1000"),
    (["whatif", "--shared-cluster", "--servers", "100"], "at least 432 for 27 jobs")])
def test_arguments_that_would_be_ignored_are_refused(capsys, argv, needle):
    one_line_error(*run(capsys, *argv), needle)


def test_a_runs_file_column_nobody_reads_is_refused(capsys, tmp_path):
    # a misspelt optional column (here `evaluate`) was dropped without a word
    path = _runs_csv(tmp_path, lambda r: r)
    path.write_text(path.read_text().replace(",evaluate,", ",evalute,", 1))
    one_line_error(*run(capsys, "calibrate", path, "--hardware", "H100"), "column 'evalute'")


def test_a_runs_file_system_that_does_not_fit_names_the_row(capsys, tmp_path):
    # (the error named only the topology field, not which of the file's runs it was;
    # now the file's reader builds the system and names the row before any prediction)
    path = _runs_csv(tmp_path, lambda r: {**r, "system": "ring:3"})
    code, out, err = run(capsys, "calibrate", path, "--hardware", "H100")
    assert code == 2 and "Traceback" not in err
    assert "codesign: error: invalid runs.csv row 1 system 'ring:3': expected a topology " \
           "whose NPUs are the run's servers" in err.splitlines()[-1]
