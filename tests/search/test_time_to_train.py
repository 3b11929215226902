"""Time to train and TCO: the arithmetic by hand on small cases."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.tco import (
    ServerPrice,
    TcoParams,
    cluster_tco,
    load_prices,
    run_cost_usd,
    server_price,
)
from codesign.workloads import get_hardware, get_workload
from search.time_to_train import TrainingGoal, days_to_train, parse_goal, procurement


def test_days_by_hand():
    # 1e9 tokens / (4 x 1000 tokens per iteration) = 250,000 iterations x 0.864 s = 2.5 days
    goal = TrainingGoal(tokens=1e9)
    assert goal.iterations(batch_size=4, seq_len=1000) == 250_000
    assert days_to_train(goal, batch_size=4, seq_len=1000, iteration_time_s=0.864) \
        == pytest.approx(2.5)
    # A partial iteration still runs: 1001 samples at 10 per iteration = 101 iterations.
    assert TrainingGoal(samples=1001).iterations(batch_size=10, seq_len=None) == 101
    # 2 ImageNet epochs at a batch of 1,281,167 / 7 samples is 14 iterations.
    assert TrainingGoal(epochs=2).iterations(batch_size=1_281_167 // 7, seq_len=None,
                                             workload="resnet50") == 15  # 7.0000x rounds up


def test_goal_errors():
    with pytest.raises(InvalidSpecError, match="exactly one"):
        TrainingGoal(tokens=1.0, samples=2.0)
    with pytest.raises(InvalidSpecError, match="sequence length"):
        TrainingGoal(tokens=1e9).iterations(batch_size=4, seq_len=None, workload="resnet50")
    with pytest.raises(InvalidSpecError, match="dataset-samples"):
        TrainingGoal(epochs=1).iterations(batch_size=4, seq_len=None, workload="dlrm")
    with pytest.raises(InvalidSpecError, match="--tokens"):
        parse_goal(tokens="lots")
    with pytest.raises(InvalidSpecError, match="--tokens"):
        parse_goal(tokens=-1)
    assert parse_goal() is None
    assert parse_goal(tokens="15e12").tokens == 15e12
    # Counts with decimal suffixes, as budgets take money ('15T' was refused).
    assert parse_goal(tokens="15T").tokens == 15e12
    assert parse_goal(samples="1.2M").samples == 1.2e6 and parse_goal(epochs="90").epochs == 90
    for bad in ("T", "15Q", "inf"):
        with pytest.raises(InvalidSpecError, match="e.g. 15e12 or 15T"):
            parse_goal(tokens=bad)


def test_tco_by_hand():
    # 2 servers x 1000 W x 0.5 utilisation + 200 W network = 1200 W, x PUE 1.25 = 1500 W;
    # 1500 W x 8760 h = 13,140 kWh a year x $0.10 = $1,314 a year.
    price = ServerPrice("X", 100_000.0, 100.0, 1000.0)
    p = TcoParams(usd_per_kwh=0.10, pue=1.25, utilisation=0.5, years=2.0)
    t = cluster_tco(2, price, network_usd=30_000.0, network_power_w=200.0, params=p)
    assert t.power_w == pytest.approx(1500.0)
    assert t.energy_kwh_per_year == pytest.approx(13_140.0)
    assert t.opex_usd_per_year == pytest.approx(1_314.0)
    assert t.capex_usd == pytest.approx(230_000.0)
    assert t.tco_usd == pytest.approx(230_000.0 + 2 * 1_314.0)
    assert sum(t.breakdown_usd.values()) == pytest.approx(t.tco_usd)
    # A 3-day run costs 72 of the 17,520 hours of the life.
    assert run_cost_usd(t, 3.0) == pytest.approx(t.tco_usd * 72 / 17_520)


def test_cloud_by_hand():
    p = TcoParams(years=1.0, gpu_hour_usd=2.0)
    t = cluster_tco(4, ServerPrice("X", 1.0, 1.0, 1.0), network_usd=9e9,
                    network_power_w=None, params=p, gpus_per_server=8)
    assert t.capex_usd == 0.0
    assert t.tco_usd == pytest.approx(32 * 2.0 * 8760)
    assert run_cost_usd(t, 1.0) == pytest.approx(32 * 2.0 * 24)


@pytest.mark.parametrize("bad", [dict(pue=0.9), dict(utilisation=0.0), dict(years=-1.0),
                                 dict(usd_per_kwh=float("nan")), dict(gpu_hour_usd=0.0)])
def test_tco_params_refuse_bad_values(bad):
    with pytest.raises(InvalidSpecError):
        TcoParams(**bad)


def test_catalog_prices_every_builtin_gpu_with_sources():
    from codesign.workloads.hardware import hardware_names

    _, params = load_prices()
    assert params.pue >= 1.0
    for name in hardware_names():
        p = server_price(name)
        assert p.server_usd > 0 and p.server_max_w > 8 * p.gpu_tdp_w * 0.5
        assert p.sources and p.solidity
    with pytest.raises(InvalidSpecError, match="price catalog"):
        server_price("TPUv9")


def test_procurement_combines_days_and_tco():
    hw = get_hardware("H100")
    wl = get_workload("llama3-70b")
    out = procurement(TrainingGoal(tokens=15e12), wl, iteration_time_s=10.0, servers=128,
                      hardware=hw, network_usd=1e6, network_power_w=5e4)
    per = wl.batch_size * wl.seq_len
    assert out["tokens_per_iteration"] == per
    assert out["iterations"] == math.ceil(15e12 / per)
    assert out["days_to_train"] == pytest.approx(out["iterations"] * 10.0 / 86400)
    assert out["capex_usd"] == pytest.approx(128 * server_price("H100").server_usd + 1e6)
    assert out["usd_per_run"] == pytest.approx(
        out["tco_usd"] / (out["tco"]["years"] * 8760) * 24 * out["days_to_train"])


def test_sweep_trial_records_procurement_objectives():
    from search.sweeps.spec import OBJECTIVES, WorkloadItem
    from search.sweeps.trial import SweepPoint, evaluate_trial

    for name in ("tco_usd", "usd_per_run", "days_to_train"):
        assert OBJECTIVES[name] == "minimize"
    point = SweepPoint("torus", 16, 4, 12.5e9, workloads=(WorkloadItem("resnet50"),),
                       search_evaluations=0, collective_method="auto",
                       procurement=(("epochs", 90.0), ("pue", 1.1)))
    out = evaluate_trial(point)
    assert out.status == "complete"
    m = out.metrics
    iters = math.ceil(90 * 1_281_167 / get_workload("resnet50").batch_size)
    assert m["days_to_train"] == pytest.approx(iters * m["iteration_time_s"] / 86400)
    assert m["tco_usd"] > 16 * server_price("A100-80").server_usd
    assert 0 < m["usd_per_run"] < m["tco_usd"]


def test_sweep_spec_procurement_validation():
    from search.sweeps.spec import parse_sweep_spec

    base = {"study": "s", "workloads": "llama3-8b",
            "space": {"families": ["torus"], "servers": 16, "degree": 4,
                      "link_rate": ["100Gbps"]}}
    spec = parse_sweep_spec({**base, "objectives": ["days_to_train", "usd_per_run"],
                             "procurement": {"tokens": "1e12", "years": 5}})
    assert dict(spec.procurement) == {"tokens": 1e12, "years": 5.0}
    for bad, needle in [({"objectives": ["tco_usd"]}, "procurement mapping"),
                        ({"objectives": ["days_to_train"], "procurement": {"pue": 1.2}},
                         "training goal"),
                        ({"procurement": {"tokens": 1e12, "pue": 0.2}}, "pue"),
                        ({"procurement": {"token": 1e12}}, "token")]:
        with pytest.raises(InvalidSpecError, match=needle):
            parse_sweep_spec({**base, **bad})


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.text(max_size=12), st.floats(allow_nan=True), st.integers(), st.none()))
def test_parse_goal_never_crashes(value):
    try:
        goal = parse_goal(tokens=value)
    except InvalidSpecError:
        return
    assert goal is None or (goal.tokens > 0 and math.isfinite(goal.tokens))


def test_price_file_errors_are_one_line(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("gpus: {H100: {server_usd: -1, gpu_tdp_w: 700, server_max_w: 10200}}\n")
    with pytest.raises(InvalidSpecError, match="server_usd"):
        load_prices(bad)
    bad.write_text("gpus: {H100: {server_usd: 1, gpu_tdp_w: 700, server_max_w: 1, x: 2}}\n")
    with pytest.raises(InvalidSpecError, match="x"):
        load_prices(bad)
    good = tmp_path / "q.yaml"
    good.write_text("defaults: {pue: 1.1}\ngpus: {H100: {server_usd: 250000, gpu_tdp_w: 700, "
                    "server_max_w: 10200}}\n")
    prices, params = load_prices(good)
    assert prices["H100"].server_usd == 250000 and params.pue == 1.1


def test_procurement_sweep_example_parses():
    from pathlib import Path

    from search.sweeps.spec import load_sweep_spec

    path = Path(__file__).parents[2] / "experiments" / "sweeps" / "procurement.yaml"
    spec = load_sweep_spec(path)
    assert spec.objectives == ("usd_per_run", "days_to_train")
    assert dict(spec.procurement) == {"epochs": 90.0, "pue": 1.2, "years": 5.0}
