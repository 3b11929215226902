"""``codesign topology topoopt`` (TopoOpt TopologyFinder on the command line)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codesign.app.cli import main
from topologies.topoopt import coin_change_table
from topologies.yaml_io import load_yaml_topology


def test_topoopt_cli_json_and_files(tmp_path, capsys):
    out = tmp_path / "t.yaml"
    rc = main(["topology", "topoopt", "--servers", "16", "--degree", "3", "--bandwidth",
               "100Gbps", "--out", str(out), "--json"])
    assert rc == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["degree_allreduce"] == 3 and payload["degree_mp"] == 0
    gens = payload["groups"][0]["generators"]
    assert payload["diameter"] == int(coin_change_table(16, gens).dist.max())
    topo = load_yaml_topology(out)
    assert np.all(np.bincount(topo.src, minlength=16) == 3)
    assert np.allclose(topo.bandwidth, 12.5e9)
    routes = json.loads((tmp_path / "t.routes.json").read_text())
    assert routes["0-1"] == [[0, 1]]


def test_topoopt_cli_workload_demand(capsys):
    rc = main(["topology", "topoopt", "--servers", "8", "--degree", "4", "--bandwidth",
               "100Gbps", "--workload", "dlrm", "--strategy", "dp=64,embedding=model"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "dlrm" in text and "diameter" in text


@pytest.mark.parametrize("argv,match", [
    (["--servers", "1"], "servers"), (["--servers", "7", "--workload", "dlrm",
                                       "--strategy", "dp=64"], "divisor"),
    (["--servers", "8", "--workload", "dlrm"], "both"), (["--bandwidth", "fast"], "bandwidth"),
    # Fuzzing: 10^9 servers built a 10^9-server group (10 s, out of memory) before the
    # finder's range check; 10^9 interfaces allocated links the same way.
    (["--servers", "1000000000"], "--servers 1000000000: expected an integer in [2, 20000]"),
    (["--degree", "1000000000"], "--degree 1000000000: expected an integer in [1, 1024]")])
def test_topoopt_cli_bad_input_exits_2(argv, match, capsys):
    base = {"--servers": "8", "--degree": "2", "--bandwidth": "100Gbps"}
    args = list(argv)
    for k, v in base.items():
        if k not in args:
            args += [k, v]
    assert main(["topology", "topoopt", *args]) == 2
    assert match in capsys.readouterr().err


def test_topoopt_cli_takes_a_model_file(tmp_path, capsys):
    # Fuzzing: --workload with a model file was refused as an unknown zoo name, although
    # the message offered model files (every other command takes them).
    model = tmp_path / "m.yaml"
    model.write_text("name: m\nbatch_size: 64\nlayers:\n  - {name: l0, kind: dense, "
                     "params: 1000000, fwd_flops: 1.0e9, activation_bytes: 4096}\n")
    assert main(["topology", "topoopt", "--servers", "16", "--degree", "4", "--bandwidth",
                 "100Gbps", "--workload", str(model), "--strategy", "dp=16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["demand"].startswith(str(model)) and out["servers"] == 16
    # one AllReduce group of the 16 servers, each sending its successor 2 (n-1)/n of the
    # 2 MB of 16-bit gradients (the model file's default dtype) per iteration
    (group,) = out["groups"]
    assert group["servers"] == 16
    assert group["bytes"] == pytest.approx(2 * 15 / 16 * 2e6, rel=1e-12)
