"""``codesign workload show NAME --strategy ...``: the demand summary."""

import json

import pytest

from codesign.app.cli import main


def test_workload_show_strategy_json(capsys):
    code = main(["workload", "show", "resnet50", "--option", "batch_size=2048",
                 "--strategy", "dp=16", "--hardware", "A100-80", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    d = json.loads(out)["demand"]
    assert d["strategy"]["text"] == "dp=16,tp=1,pp=1"
    assert (d["placement"]["servers"], d["placement"]["gpus_per_server"]) == (2, 8)
    grads = 4.0 * 25_557_032  # fp32 gradients of ResNet-50
    # Ring of 16 GPUs over 2 servers: two server crossings of 2 (n-1)/n x gradients.
    assert d["inter_server_bytes"] == pytest.approx(2 * 2 * 15 / 16 * grads)
    assert d["memory"]["fits"] is True and d["bubble_fraction"] == 0


def test_workload_show_strategy_human_and_errors(capsys):
    assert main(["workload", "show", "gpt3-175b", "--strategy", "dp=1,tp=8,pp=16"]) == 0
    out, _ = capsys.readouterr()
    assert "does not fit" in out and "bubble 0.484" in out
    assert main(["workload", "show", "gpt3-175b", "--strategy", "dp=1,zero=5"]) == 2
    _, err = capsys.readouterr()
    assert err.strip().count("\n") == 0 and "strategy zero" in err
