"""whatif's procurement options on the command line: days, dollars, failures, report."""

import json

import pytest

from codesign.app.cli import main

SMALL = ("whatif", "--servers", "16", "--workload", "resnet50", "--budget", "2e5,1e6",
         "--families", "fattree,torus,perms", "--search-evaluations", "0",
         "--collective-method", "auto", "--quiet", "--workers", "1")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("extra,needle", [
    (("--tokens", "lots"), "--tokens"),
    (("--tokens", "1e9"), "sequence length"),                 # resnet50 has none
    (("--epochs", "1", "--samples", "5"), "exactly one"),
    (("--objective", "days_to_train"), "training goal"),
    (("--objective", "fastest"), "whatif objective"),
    (("--fail", "cables=10%"), "--fail kind"),
    (("--fail", "links=200%"), "--fail links"),
    (("--pue", "0.5"), "tco pue"),
    (("--gpu-hour-usd", "cheap"), "--gpu-hour-usd"),
    (("--dataset-samples", "10"), "--dataset-samples"),
    # Fuzzing: these printed 30-digit days and dollars.
    (("--epochs", "1e20"), "--epochs 1e+20: expected at most 100000"),
    (("--tokens", "1e20"), "--tokens 1e+20: expected at most 1e+16"),
    (("--tokens", "1e30"), "--tokens '1e30': expected a value between 0 and 1e+24"),
    (("--epochs", "90", "--usd-per-kwh", "1e30"), "usd_per_kwh 1e+30: expected a number in "
                                                  "[0, 10]"),
    (("--gpu-hour-usd", "1e30"), "gpu_hour_usd 1e+30: expected a number in (0, 1000]"),
])
def test_bad_procurement_input_exits_2_with_one_line(capsys, extra, needle):
    code, out, err = run(capsys, *SMALL, *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_goal_with_a_mix_is_refused(capsys):
    code, _, err = run(capsys, "whatif", "--servers", "16", "--mix", "resnet50,vgg16",
                       "--budget", "1e6", "--epochs", "1", "--quiet")
    assert code == 2 and "one workload" in err and err.count("\n") == 1


def test_days_dollars_failures_and_report(capsys, tmp_path):
    code, out, _ = run(capsys, *SMALL, "--epochs", "90", "--fail",
                       "links=5%,seed=1,samples=2", "--report", str(tmp_path), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["goal"] == {"epochs": 90.0}
    for c in d["budgets"]:
        p = c["procurement"]
        # 90 ImageNet epochs at the global batch: iterations x iteration time / 86400.
        assert p["iterations"] == -(-90 * 1_281_167 // p["samples_per_iteration"])
        assert c["days_to_train"] == pytest.approx(p["iterations"] * c["iteration_time_s"]
                                                   / 86400)
        assert c["tco_usd"] == pytest.approx(sum(p["tco"]["breakdown_usd"].values()))
        assert c["usd_per_run"] > 0
        f = c["failures"]
        assert f["samples"] == 2 and 0 <= f["stopped_fraction"] <= 1
    for name in ("report.html", "report.md", "tco_breakdown.png", "days_vs_budget.png",
                 "slowdown_cdf.png"):
        assert (tmp_path / name).stat().st_size > 0
    text = (tmp_path / "report.md").read_text()
    assert "Procurement" in text
    # Under each budget's table: what the validated error says about the answer (A100:
    # the catalog's comparison error), with the fabrics too close to rank, if any.
    from codesign.workloads import get_hardware

    pair = get_hardware("A100-80").compute.validated_comparison_error
    for c in d["budgets"]:
        close = c["within_model_error"]
        expected = (f"Not ranked against this answer: {len(close)} other" if close else
                    "Every other affordable fabric timed is slower")
        assert expected in text and f"validated error of a comparison, {pair:.1%}" in text


def test_objective_usd_per_run_and_cloud_price(capsys):
    code, out, _ = run(capsys, *SMALL, "--epochs", "90", "--objective", "usd_per_run",
                       "--gpu-hour-usd", "catalog", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["objective"] == "usd_per_run"
    for c in d["budgets"]:
        t = c["procurement"]["tco"]
        assert t["model"] == "cloud price per GPU-hour" and t["breakdown_usd"].keys() == {"cloud"}
        # 128 A100-80 GPUs at the catalog's $5.12 per GPU-hour.
        assert c["usd_per_run"] == pytest.approx(128 * 5.12 * 24 * c["days_to_train"])


def test_ranking_note_states_what_the_error_allows():
    from codesign.app.procurement_report import ranking_note

    base = {"topology_spec": "torus:4x4", "comparison_error": 0.034, "model_error": 0.073}
    many = ranking_note({**base, "within_model_error": [f"f{i}" for i in range(7)]})
    assert many.startswith("Not ranked against this answer: 7 other affordable fabric(s)")
    assert "3.4% (of one predicted time: 7.3%)" in many and "f4 and 2 more" in many
    assert ranking_note({**base, "within_model_error": []}).startswith("Every other")
    moe = {"topology_spec": "x", "comparison_error": None, "note": "mixture-of-experts: ..."}
    assert ranking_note(moe) == "mixture-of-experts: ..."
    assert ranking_note({"topology_spec": None, "note": "no fabric"}) == ""
    # A cheaper fabric the model cannot tell from the answer is named with both prices
    # and both times.
    cheap = {"topology_spec": "f3", "label": "perms d=3 400Gbps", "cost_usd": 1181184.0,
             "iteration_time_s": 15.91}
    note = ranking_note({**base, "within_model_error": ["f3"], "cost_usd": 3149824.0,
                         "iteration_time_s": 15.4, "cheapest_within_error": cheap})
    assert note.endswith("The cheapest of them is f3 (perms d=3 400Gbps): $1,181,184 of "
                         "network against $3,149,824, 15.9 s per iteration against 15.4 s.")


def test_a_report_folder_that_cannot_be_created_is_refused_before_the_work(capsys, tmp_path):
    # Fuzzing: `--report /proc/xx` raised FileNotFoundError after the whole what-if.
    (tmp_path / "afile").write_text("x")
    for folder, needle in (("/proc/xx", "no folder can be created in '/proc'"),
                           (str(tmp_path / "afile"), "is a file, not a folder")):
        code, out, err = run(capsys, *SMALL, "--report", folder)
        assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


@pytest.mark.parametrize("argv, needle", [
    # Fuzzing: --servers 0 said "missing --budget or --servers/--gpus" (0 read as not
    # given), --shared-cluster --servers 0 used 432 servers, and --servers with --gpus
    # silently used --gpus.
    (("whatif", "--budget", "1e6", "--servers", "0"), "whatif servers 0: expected an "
                                                      "integer >= 2"),
    (("whatif", "--shared-cluster", "--servers", "0"), "shared cluster servers 0"),
    (("whatif", "--budget", "1e6", "--servers", "16", "--gpus", "256"),
     "whatif --servers/--gpus '16/256': expected one of them"),
])
def test_zero_servers_and_both_servers_and_gpus_are_refused(capsys, argv, needle):
    code, out, err = run(capsys, *argv, "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


def test_a_failure_study_too_large_for_an_answer_keeps_the_answers(capsys, tmp_path,
                                                                   monkeypatch):
    # The study's size is known only once an answer's fabric is: refused there, it is a
    # note on that answer, not an error that threw the what-if's answers away (a
    # 4,608-GPU rail-optimised GB200 fabric was refused after 2 minutes of search).
    import search.failure_whatif as fw

    monkeypatch.setattr(fw, "MAX_FAILURE_WORK", 10.0)
    code, out, _ = run(capsys, *SMALL, "--fail", "links=5%,seed=1,samples=2", "--report",
                       str(tmp_path), "--json")
    assert code == 0
    d = json.loads(out)
    answered = [c for c in d["budgets"] if c.get("topology_spec")]
    assert answered and all(c["iteration_time_s"] > 0 for c in answered)
    for c in answered:
        assert "use fewer --samples" in c["failures"]["refused"]
    text = (tmp_path / "report.md").read_text()
    assert "not run: refused" in text and not (tmp_path / "slowdown_cdf.png").exists()
    code, out, _ = run(capsys, *SMALL, "--fail", "links=5%,seed=1,samples=2")
    assert code == 0 and "samples): not run, refused" in out
