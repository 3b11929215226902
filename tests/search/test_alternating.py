"""TopoOpt alternating optimisation: loop invariants, baselines, Ray workers, CLI."""

from __future__ import annotations

import json
import math

import pytest

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from search.topoopt.alternating import BASELINES, OptimizeSpec, optimize
from topologies.cost import topoopt_cost


@pytest.fixture(scope="module")
def small():
    spec = OptimizeSpec(workload="dlrm", servers=16, degree=4, bandwidth_Bps="100Gbps",
                        rounds=2, budget=6, seed=1)
    return spec, optimize(spec, workers=0)


def test_result_is_the_best_seen_and_the_topology_is_a_degree_d_direct_connect(small):
    spec, r = small
    assert math.isfinite(r.iteration_time_s)
    assert r.iteration_time_s <= r.initial_time_s
    assert all(r.iteration_time_s <= log.searched_time_s + 1e-12 for log in r.rounds)
    assert 1 <= len(r.rounds) <= spec.rounds
    topo = r.topology
    assert topo.npus == spec.servers and topo.switches == 0
    out_deg = [len(topo.out_links(v)) for v in range(topo.npus)]
    assert out_deg == [spec.degree] * spec.servers
    assert r.cost_usd == pytest.approx(topoopt_cost(16, 4, 12.5e9).total_usd)
    assert r.candidate.strategy.gpus == spec.gpus


def test_every_baseline_is_evaluated_with_its_cost(small):
    spec, r = small
    assert set(r.baselines) == set(BASELINES)
    for b in r.baselines.values():
        assert b.iteration_time_s > 0 and b.cost_usd > 0, b
    # The cost-equivalent fat-tree is priced near TopoOpt (Sec. 5.1): the closest catalog rate.
    assert r.baselines["fattree"].cost_usd == pytest.approx(r.cost_usd, rel=0.5)
    # The Ideal Switch has the same d x B per server and no forwarding: never slower than
    # the cost-equivalent fat-tree, whose server links are d x B' with B' < B.
    assert r.baselines["ideal"].iteration_time_s <= r.baselines["fattree"].iteration_time_s


def test_same_result_with_zero_one_or_two_ray_workers(small, ray_shared):
    spec, r0 = small
    fast = OptimizeSpec(**{**spec.__dict__, "baselines": ("ideal", "expander", "fattree")})
    a = optimize(fast, workers=0).to_dict()
    b = optimize(fast, workers=2).to_dict()
    for key in ("strategy", "placement", "iteration_time_s", "initial_time_s", "baselines",
                "diameter", "mean_path_length"):
        assert a[key] == b[key], key
    assert [x["strategy"] for x in a["rounds"]] == [x["strategy"] for x in b["rounds"]]


@pytest.mark.parametrize("kwargs, field", [
    ({"servers": 1}, "servers"), ({"degree": 0}, "degree"),
    ({"bandwidth_Bps": "fast"}, "bandwidth"), ({"bandwidth_Bps": -1.0}, "bandwidth"),
    ({"baselines": ("torus",)}, "baselines"), ({"rounds": 0}, "rounds"),
    ({"hardware": "Z80"}, "hardware"), ({"reconfig_delay_s": -1.0}, "reconfig_delay_s"),
    # The starting strategy and the job's size are checked when the spec is built, before
    # Ray starts (they reached the user as a remote traceback from inside the Ray task).
    ({"initial_strategy": "dp=64,recompute=banana"}, "strategy recompute"),
    ({"initial_strategy": "dp=32,tp=3"}, "strategy dp\\*tp\\*pp\\*cp"),
    ({"servers": 10_000_000}, "servers 10000000: expected at most 2,500,000 servers"),
    # --budget is strategy evaluations here (dollars in whatif): a million is refused.
    ({"budget": 1_000_000}, "budget 1000000: expected an integer between 1 and 10,000"),
    ({"rounds": 1000}, "rounds 1000: expected an integer between 1 and 100")])
def test_bad_spec(kwargs, field):
    base = dict(workload="dlrm", servers=16, degree=4, bandwidth_Bps=12.5e9)
    with pytest.raises(InvalidSpecError, match=field):
        OptimizeSpec(**{**base, **kwargs})


def test_bad_workers():
    spec = OptimizeSpec(workload="dlrm", servers=16, degree=4, bandwidth_Bps=12.5e9)
    with pytest.raises(InvalidSpecError, match="workers"):
        optimize(spec, workers=-1)


def test_cli_optimize_json_and_files(tmp_path, capsys):
    code = main(["optimize", "--workload", "ncf", "--servers", "8", "--degree", "2",
                 "--bandwidth", "100Gbps", "--budget", "3", "--rounds", "1", "--workers", "0",
                 "--baselines", "fattree,ideal", "--out", str(tmp_path), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("strategy", "iteration_time_s", "cost_usd", "diameter", "mean_path_length",
                "baselines"):
        assert key in out
    assert set(out["baselines"]) == {"fattree", "ideal"}
    assert (tmp_path / "topology.yaml").is_file()
    routes = json.loads((tmp_path / "routes.json").read_text())
    assert routes and all(p[0][0] == int(k.split("-")[0]) for k, p in routes.items())


def test_cli_optimize_names_a_baseline_that_cannot_be_built(capsys):
    # d = 5 on 4 servers: no simple 5-regular expander exists; its line says why.
    code = main(["optimize", "--workload", "ncf", "--servers", "4", "--degree", "5",
                 "--bandwidth", "100Gbps", "--budget", "3", "--rounds", "1", "--workers", "0",
                 "--baselines", "expander,ideal"])
    assert code == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
    assert "not built: invalid expander degree 5" in lines["expander"]
    assert "inf" not in lines["expander"] and "nan" not in lines["expander"]
    assert lines["ideal"].split()[2] == "ms"


def test_cli_optimize_bad_input_exits_2(capsys):
    code = main(["optimize", "--workload", "dlrm", "--servers", "8", "--degree", "2",
                 "--bandwidth", "lots", "--workers", "0"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bandwidth" in err
    # A bad starting strategy with Ray workers: one line, before any Ray starts.
    code = main(["optimize", "--workload", "dlrm", "--servers", "16", "--degree", "4",
                 "--bandwidth", "100Gbps", "--strategy", "dp=64,recompute=banana"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "recompute 'banana'" in err
    assert "ray" not in err.lower()


def test_same_network_recognises_a_copy_and_a_change():
    import pickle

    from search.strategy.chains import local_topology
    from topologies.registry import from_spec

    t = local_topology(from_spec("perms:8,p=1:3,bw=100Gbps"))
    assert local_topology(pickle.loads(pickle.dumps(t))) is t    # as an actor receives it
    assert local_topology(from_spec("perms:8,p=1:5,bw=100Gbps")) is not t
    assert local_topology(from_spec("perms:8,p=1:3,bw=200Gbps")) is not t


@pytest.mark.parametrize("argv, match", [
    # Fuzzing: 10^9 hung in the strategy search (divisors of the batch), 0 was read as
    # "not given" and ran with the default batch, degree 10^9 ran out of memory after
    # 6.8 s, and --workers 10^6 started a local Ray of a million CPUs.
    (["--batch-size", "1000000000"], "batch_size 1000000000: expected an integer in "
                                     "[1, 16777216]"),
    (["--batch-size", "0"], "batch_size 0: expected an integer in [1, 16777216]"),
    (["--degree", "1000000000"], "degree 1000000000: expected an integer in [1, 1024]"),
    (["--workers", "1000000"], "workers 1000000: expected at most"),
])
def test_cli_optimize_refuses_sizes_beyond_their_bounds_at_once(capsys, argv, match):
    import time

    base = {"--workload": "dlrm", "--servers": "16", "--degree": "4",
            "--bandwidth": "100Gbps", "--workers": "0"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    t0 = time.perf_counter()
    assert main(["optimize", *[x for kv in base.items() for x in kv]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err and time.perf_counter() - t0 < 1.0
