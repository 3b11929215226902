"""Re-configured workloads in sweeps and what-ifs: a mix entry's ``options`` (a sweep
YAML's per-workload mapping, ``whatif --option``) reach the workload every trial times."""

from __future__ import annotations

import json

import pytest

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from codesign.workloads import get_workload
from search.sweeps.spec import WorkloadItem, parse_sweep_spec, with_options
from search.sweeps.trial import SweepPoint, evaluate_trial

BASE = {"study": "s", "space": {"families": ["ideal"], "servers": 16, "degree": 4,
                                "link_rate": "100Gbps"}}


def test_options_are_parsed_sorted_labelled_and_hashed():
    spec = parse_sweep_spec({**BASE, "workloads": [
        {"name": "bert", "options": {"seq_len": 256, "batch_size": 512}},
        {"name": "bert"}]})
    first, plain = spec.workloads
    assert first.options == (("batch_size", 512), ("seq_len", 256)) and plain.options == ()
    assert first.label == "bert[batch_size=512,seq_len=256]" and plain.label == "bert"
    assert first.load().seq_len == 256 and first.load().batch_size == 512
    assert plain.load().seq_len == get_workload("bert").seq_len
    # The options are part of what defines the study.
    other = parse_sweep_spec({**BASE, "workloads": [{"name": "bert",
                                                     "options": {"seq_len": 128}}]})
    assert other.config_hash() != parse_sweep_spec({**BASE, "workloads": "bert"}).config_hash()


@pytest.mark.parametrize("options,needle", [
    ({"seq_lenn": 256}, "sweep workloads[0] options: unknown parameter 'seq_lenn'"),
    ({"seq_len": -4}, "sweep workloads[0] options"),
    ({"seq_len": [1, 2]}, "sweep workloads[0] options seq_len"),
    ([1, 2], "sweep workloads[0] options"),
    ({"lora_rank": 8, "lora_modules": "linear_qkv+bogus"}, "lora_modules"),
])
def test_bad_options_raise_one_line_naming_the_entry(options, needle):
    with pytest.raises(InvalidSpecError) as info:
        parse_sweep_spec({**BASE, "workloads": [{"name": "bert", "options": options}]})
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_entries_differing_only_by_options_are_distinct():
    spec = parse_sweep_spec({**BASE, "workloads": [
        {"name": "bert", "options": {"seq_len": 128}},
        {"name": "bert", "options": {"seq_len": 256}}]})
    assert len({w.label for w in spec.workloads}) == 2
    with pytest.raises(InvalidSpecError, match="distinct"):
        parse_sweep_spec({**BASE, "workloads": [
            {"name": "bert", "options": {"seq_len": 128}},
            {"name": "bert", "options": {"seq_len": 128}}]})


def test_a_trial_times_the_configured_workload():
    """Oracle: the iteration model on the workload built with the options, on the trial's
    fabric and strategy -- and a different time than the zoo entry as it is."""
    from evaluators.iteration import evaluate
    from topologies.registry import from_spec

    item = with_options(WorkloadItem("bert"), {"seq_len": 256, "batch_size": 1024}, "test")
    times = {}
    for it in (item, WorkloadItem("bert")):
        o = evaluate_trial(SweepPoint("ideal", 16, 4, 12.5e9, workloads=(it,),
                                      collective_method="auto", search_evaluations=0))
        assert o.status == "complete", o.reason
        per = json.loads(o.metrics["per_workload_json"])
        assert per[0]["workload"] == it.label
        direct = evaluate(from_spec(o.metrics["topology_spec"]), it.load(),
                          o.metrics["strategy"], hardware="A100-80", collective_method="auto")
        assert o.metrics["iteration_time_s"] == pytest.approx(direct.iteration_time_s, rel=1e-9)
        times[it.label] = o.metrics["iteration_time_s"]
    assert times[item.label] != pytest.approx(times["bert"], rel=1e-3)


def test_whatif_option_on_the_command_line(capsys):
    fast = ["whatif", "--budget", "1e9", "--servers", "16", "--workload", "bert",
            "--search-evaluations", "0", "--collective-method", "auto", "--families", "ideal",
            "--json"]
    assert main(fast) == 0
    plain = json.loads(capsys.readouterr().out)["budgets"][0]
    assert main([*fast, "--option", "seq_len=256", "--option", "batch_size=1024"]) == 0
    out = json.loads(capsys.readouterr().out)
    choice = out["budgets"][0]
    assert choice["per_workload"][0]["workload"] == "bert[batch_size=1024,seq_len=256]"
    assert choice["iteration_time_s"] != pytest.approx(plain["iteration_time_s"], rel=1e-3)
    # Refused with one line, exit code 2: a bad key or value, and --option with --mix
    # (here with --workload too, which a mix replaces: that is named first).
    for extra, needle in ((["--option", "seq_lenn=3"], "whatif --option"),
                          (["--option", "seq_len=[1,2]"], "whatif --option"),
                          (["--mix", "bert:1", "--option", "seq_len=256"], "not with --mix")):
        assert main([*fast[:-1], *extra]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    no_workload = [a for a in fast[:-1] if a not in ("--workload", "bert")]
    assert main([*no_workload, "--mix", "bert:1", "--option", "seq_len=256"]) == 2
    assert "whatif --option" in capsys.readouterr().err


MODEL = "name: my-llm\nbase: bert\nparams: {layers: 6, seq_len: 128}\n"


def test_model_files_in_sweeps_and_whatif_mixes(tmp_path, monkeypatch, capsys):
    """A user model file is a mix entry of its own (``file:`` in a sweep, a path in
    ``--workload`` / ``--mix``), timed like ``evaluate --workload FILE``."""
    from codesign.workloads import load_workload
    from search.whatif import parse_mix

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(MODEL)
    spec = parse_sweep_spec({**BASE, "workloads": [{"file": "m.yaml", "weight": 2},
                                                   {"name": "bert"}]})
    item = spec.workloads[0]
    assert item.name == "my-llm" and item.label == "my-llm(m.yaml)" and item.weight == 2
    assert item.file == str(tmp_path / "m.yaml") and item.load().layers == \
        load_workload("m.yaml").layers
    assert [w.label for w in parse_mix("m.yaml:3,bert")] == ["my-llm(m.yaml)", "bert"]
    # An edited file is another study (its digest is part of the identity).
    before = spec.config_hash()
    (tmp_path / "m.yaml").write_text(MODEL.replace("layers: 6", "layers: 4"))
    again = parse_sweep_spec({**BASE, "workloads": [{"file": "m.yaml", "weight": 2},
                                                    {"name": "bert"}]})
    assert again.config_hash() != before and len(again.workloads[0].load().layers) < \
        len(item.load().layers)
    # The what-if times the file's model: the same answer as the zoo model it re-sizes,
    # given the same hyper-parameters as options.
    fast = ["whatif", "--budget", "1e9", "--servers", "16", "--search-evaluations", "0",
            "--collective-method", "auto", "--families", "ideal", "--json"]
    assert main([*fast, "--workload", "m.yaml"]) == 0
    from_file = json.loads(capsys.readouterr().out)["budgets"][0]
    assert main([*fast, "--workload", "bert", "--option", "layers=4",
                 "--option", "seq_len=128"]) == 0
    from_options = json.loads(capsys.readouterr().out)["budgets"][0]
    assert from_file["per_workload"][0]["workload"] == "my-llm(m.yaml)"
    assert from_file["iteration_time_s"] == pytest.approx(from_options["iteration_time_s"],
                                                          rel=1e-9)


@pytest.mark.parametrize("entry,needle", [
    ({"file": "missing.yaml"}, "sweep workloads[0] file 'missing.yaml'"),
    ({"file": "bad.yaml"}, "sweep workloads[0]: "),
    ({"file": "m.yaml", "options": {"seq_len": 64}}, "sweep workloads[0] options"),
    ({"file": "m.yaml", "config": "x"}, "sweep workloads[0] config"),
    ({"file": "m.yaml", "name": "bert"}, "exactly one of name"),
    ({"weight": 2}, "exactly one of name"),
])
def test_bad_model_file_entries_raise_one_line(tmp_path, monkeypatch, entry, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(MODEL)
    (tmp_path / "bad.yaml").write_text("name: x\nbase: bert\nparams: {layerz: 2}\n")
    with pytest.raises(InvalidSpecError) as info:
        parse_sweep_spec({**BASE, "workloads": [entry]})
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_closed_pipe_ends_the_command_quietly():
    """``codesign ... | head``: the reader going away is not a traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "codesign", "workload", "show",
                             "gpt3-175b", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()   # before the command writes anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err and "Exception" not in err


@pytest.mark.parametrize("name", ["x" * 5000, "a\x00b", "x" * 5000 + ".yaml"])
def test_names_no_file_system_holds_are_refused_with_one_line(name, capsys):
    from codesign.workloads import is_model_file

    assert is_model_file(name) == name.endswith(".yaml")
    assert main(["whatif", "--budget", "1e6", "--servers", "16", "--workload", name]) == 2
    assert main(["evaluate", "--topology", "ideal:16", "--workload", name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err
