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
    # Refused with one line, exit code 2: a bad key or value, and --option with --mix.
    for extra in (["--option", "seq_lenn=3"], ["--option", "seq_len=[1,2]"],
                  ["--mix", "bert:1", "--option", "seq_len=256"]):
        assert main([*fast[:-1], *extra]) == 2
        err = capsys.readouterr().err
        assert "whatif --option" in err and err.count("\n") == 1
