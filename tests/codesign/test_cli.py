"""Command-line contract: --json output, one-line errors and exit code 2 on bad input."""

import json
import subprocess
import sys

import pytest

from codesign.app.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topology_show_json_counts(capsys):
    code, out, _ = run(capsys, "topology", "show", "torus:4x4x4", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["npus"], data["switches"], data["links"], data["diameter"]) == (64, 0, 384, 6)
    assert data["injection_Bps"] == pytest.approx(6 * 25e9)


@pytest.mark.parametrize("spec, needle", [
    ("torus:0x4", "torus shape"),
    ("ring:abc", "ring shape"),
    ("ring:8,bw=-5Gbps", "ring bw"),
    ("nosuchfamily:4", "topology family"),
    ("ring:8,colour=red", "ring key"),
    ("mesh:4x4,bw=1GB/s:2GB/s:3GB/s", "mesh bw"),
])
def test_bad_specs_exit_2_with_one_line(capsys, spec, needle):
    code, out, err = run(capsys, "topology", "show", spec)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


@pytest.mark.parametrize("option", ["config=large", "name=gpt"])
def test_workload_option_naming_an_argument_exits_2(capsys, option):
    # 'config' and 'name' are get_workload's own arguments: an --option of that name
    # once collided with them (TypeError traceback) instead of being refused.
    code, out, err = run(capsys, "workload", "show", "bert", "--option", option)
    assert code == 2 and out == ""
    key = option.split("=")[0]
    assert err.count("\n") == 1 and f"unknown parameter '{key}'" in err
    assert ("--config" in err) == (key == "config")


def test_usage_errors_are_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["topology", "show"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1


def test_console_script_runs():
    proc = subprocess.run([sys.executable, "-m", "codesign", "topology", "show", "ring:4",
                           "--json"], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["links"] == 8


SYNTH_FIELDS = {"npus", "collective", "algorithm", "size_bytes", "chunks", "time_s", "algbw_Bps",
                "busbw_Bps", "lower_bound_s", "synthesis_s", "valid"}


@pytest.mark.parametrize("algorithm", ["ring", "bidir-ring", "direct", "rhd", "dbt",
                                       "hierarchical", "multiring"])
def test_synth_json_fields_and_validity(capsys, algorithm):
    code, out, _ = run(capsys, "synth", "torus:3x3", "--collective", "allreduce", "--size",
                       "64MiB", "--algorithm", algorithm, "--json")
    data = json.loads(out)
    assert code == 0 and SYNTH_FIELDS <= set(data)
    assert data["valid"] is True
    assert data["time_s"] >= data["lower_bound_s"] > 0
    assert data["algbw_Bps"] == pytest.approx(64 * 2**20 / data["time_s"])
    assert data["busbw_Bps"] == pytest.approx(data["algbw_Bps"] * 2 * 8 / 9)


def test_synth_options_and_schedule_replay(capsys, tmp_path):
    path = tmp_path / "s.json"
    code, out, _ = run(capsys, "synth", "ring:4", "--collective", "allgather", "--size", "4MiB",
                       "--option", "order=[0,2,1,3]", "--out", str(path), "--json")
    assert code == 0 and json.loads(out)["valid"]
    code, out, _ = run(capsys, "simulate", "ring:4", "--schedule", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and len(data["transfers"]) == 12 and data["makespan_s"] > 0
    code, _, err = run(capsys, "synth", "ring:4", "--collective", "allgather", "--size", "4MiB",
                       "--option", "colour=1")
    assert code == 2 and "one of: order" in err


def test_bound_and_simulate_match_hand_values(capsys):
    # ring:8 allgather, 25GB/s per direction: (N-1)M/N / (2B)
    code, out, _ = run(capsys, "bound", "ring:8", "--collective", "allgather", "--size", "8GB",
                       "--json")
    assert code == 0
    assert json.loads(out)["lower_bound_s"] == pytest.approx(7e9 / 50e9)
    # one hop of 1MB at 25GB/s plus 1us
    code, out, _ = run(capsys, "simulate", "ring:8", "--send", "0:1:1MB", "--json")
    data = json.loads(out)
    assert data["makespan_s"] == pytest.approx(1e6 / 25e9 + 1e-6)


@pytest.mark.parametrize("argv, needle", [
    (["simulate", "ring:4", "--send", "0:9:1MB"], "DST"),
    (["simulate", "ring:4", "--send", "0-1-1MB"], "SRC:DST:SIZE"),
    (["simulate", "ring:4"], "--send"),
    (["synth", "ring:4", "--collective", "allgather", "--size=-1MB"], "--size"),
    (["synth", "ring:4", "--collective", "allgather", "--size", "1MB", "--algorithm", "nope"],
     "algorithm"),
    (["synth", "ring:4", "--collective", "alltoall", "--size", "1MB"], "collective"),
])
def test_bad_command_input_exits_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


def test_reorder_finds_the_planted_ring(capsys, tmp_path):
    # two racks {0, 2} and {1, 3}: 1us inside a rack, 100us across; the identity ring crosses
    # racks four times, the best ring twice.
    inside, across = 1e-6, 100e-6
    rack = [0, 1, 0, 1]
    rows = [",".join("0" if i == j else str(inside if rack[i] == rack[j] else across)
                     for j in range(4)) for i in range(4)]
    path = tmp_path / "m.csv"
    path.write_text("a,b,c,d\n" + "\n".join(rows) + "\n")
    code, out, _ = run(capsys, "reorder", str(path), "--algorithm", "ring", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["baseline_cost_s"] == pytest.approx(4 * across)
    assert data["cost_s"] == pytest.approx(2 * inside + 2 * across)
    assert sorted(data["order"]) == [0, 1, 2, 3]
    path.write_text("0,1\n1,0,3\n")
    code, _, err = run(capsys, "reorder", str(path), "--algorithm", "ring")
    assert code == 2 and err.count("\n") == 1


def test_probe_writes_a_matrix_that_reorder_reads(capsys, tmp_path, ray_shared):
    path = tmp_path / "lat.csv"
    code, out, _ = run(capsys, "probe", "--nodes", "3", "--rounds", "3", "--out", str(path),
                       "--json")
    data = json.loads(out)
    assert code == 0 and len(data["nodes"]) == 3
    assert 0 < data["min_s"] <= data["max_s"] < 0.01
    code, out, _ = run(capsys, "reorder", str(path), "--algorithm", "ring", "--json")
    assert code == 0 and sorted(json.loads(out)["order"]) == [0, 1, 2]


def test_evaluate_states_the_validated_errors(capsys):
    from codesign.workloads import get_hardware

    base = ["evaluate", "--topology", "ideal:2,degree=8,bw=400Gbps", "--hardware", "H100"]
    assert main([*base, "--workload", "gpt3-175b", "--option", "layers=2",
                 "--option", "hidden=1024", "--option", "heads=8", "--option", "ffn=4096",
                 "--option", "batch_size=16"]) == 0
    c = get_hardware("H100").compute
    line = next(x for x in capsys.readouterr().out.splitlines() if "validated error" in x)
    assert f"{c.validated_error:.1%} for this time" in line
    assert f"{c.validated_comparison_error:.1%} for its ratio to another design's" in line
    # A mixture-of-experts model: no error is claimed.
    assert main([*base, "--workload", "mixtral-8x7b", "--option", "layers=2",
                 "--option", "hidden=1024", "--option", "heads=8", "--option", "kv_heads=8",
                 "--option", "ffn=1024", "--option", "seq_len=1024", "--option",
                 "batch_size=16", "--strategy", "dp=16,ep=8"]) == 0
    assert "validated error: none for this case" in capsys.readouterr().out
