"""Component catalog: the packaged TopoOpt Table 2, rate resolution, loading errors,
user replacement (topologies/cost.py, topologies/data/components.yaml)."""

import json
import math

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from codesign.errors import InvalidSpecError
from topologies.cost import (
    COMPONENTS, catalog_from_dict, fattree_cost, load_catalog, topology_cost,
)

GBPS = 1e9 / 8  # bytes/s per Gbit/s

# TopoOpt NSDI'23 Table 2, typed in from the paper (independent of the YAML file):
# rate: (transceiver, NIC, electrical switch port, patch panel port, OCS port, 1x2 switch)
TABLE2 = {
    10: (20, 185, 94, 100, 520, 25),
    25: (39, 185, 144, 100, 520, 25),
    40: (39, 354, 144, 100, 520, 25),
    100: (99, 678, 187, 100, 520, 25),
    200: (198, 815, 374, 100, 520, 25),
}
COLUMNS = ("transceiver", "nic", "switch_port", "patch_panel_port", "ocs_port", "switch_1x2")


def minimal_spec(**row_overrides):
    row = {"transceiver": 10, "nic": 100, "switch_port": 50, "patch_panel_port": 5,
           "ocs_port": 20, "switch_1x2": 1}
    row.update(row_overrides)
    return {"rates": {"100Gbps": row}, "fibre": {"usd_per_m": 1, "length_m": 10}}


def test_default_catalog_is_table2():
    cat = load_catalog()
    assert [r * 8 / 1e9 for r in cat.rates_Bps] == [10, 25, 40, 100, 200]
    for gbps, prices in TABLE2.items():
        for column, usd in zip(COLUMNS, prices):
            assert cat.price(column, gbps * GBPS) == usd, (gbps, column)
    # Appendix G: $0.30/m, lengths uniform on 0..1000 m -> $150 per fibre in expectation.
    assert cat.fibre_usd == pytest.approx(150.0)
    assert cat.price("fibre", 10 * GBPS) == pytest.approx(150.0)
    # Footnote 4: 200G transceivers and switch ports are 2x the 100G ones.
    assert cat.price("transceiver", 200 * GBPS) == 2 * cat.price("transceiver", 100 * GBPS)
    assert cat.price("switch_port", 200 * GBPS) == 2 * cat.price("switch_port", 100 * GBPS)


def test_default_catalog_is_cached_and_immutable():
    cat = load_catalog()
    assert load_catalog() is cat
    with pytest.raises(AttributeError):
        cat.fibre_usd_per_m = 1.0  # frozen dataclass


@pytest.mark.parametrize("gbps, row_gbps, lanes", [
    (10, 10, 1), (1, 10, 1), (10.5, 25, 1), (30, 40, 1), (99.999999, 100, 1), (100, 100, 1),
    (150, 200, 1), (200, 200, 1), (250, 200, 2), (400, 200, 2), (401, 200, 3),
    (600, 200, 3), (2400, 200, 12),
])
def test_rate_resolution(gbps, row_gbps, lanes):
    row, n = load_catalog().resolve(gbps * GBPS)
    assert (row.rate_Bps * 8 / 1e9, n) == (pytest.approx(row_gbps), lanes)
    assert load_catalog().lanes(gbps * GBPS) == lanes


@pytest.mark.parametrize("rate", [0, -1.0, float("nan"), float("inf"), "fast", True])
def test_resolve_rejects_bad_rates(rate):
    with pytest.raises(InvalidSpecError, match="link rate"):
        load_catalog().resolve(rate)


def test_price_unknown_component_lists_the_valid_ones():
    with pytest.raises(InvalidSpecError) as exc:
        load_catalog().price("router", 12.5e9)
    msg = str(exc.value)
    assert "router" in msg and all(c in msg for c in COMPONENTS) and "\n" not in msg


def write(tmp_path, data, name="cat.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_user_catalog_replaces_the_default(tmp_path):
    spec = minimal_spec(nic_ports=1)
    spec["description"] = "my prices"
    cat = load_catalog(write(tmp_path, spec))
    assert cat.description == "my prices" and len(cat.rates) == 1
    assert cat.fibre_usd == 10.0                 # fixed 10 m at $1/m
    # k = 4 fat-tree at 100 Gbps by hand: 16 NICs, 96 transceivers, 80 ports, 48 fibres.
    c = fattree_cost(16, 100 * GBPS, catalog=cat)
    assert c.items == {"nic": 1600, "transceiver": 960, "switch_port": 4000, "fibre": 480}
    assert c.total_usd == 7040
    # The only row serves every rate: 400 Gbps is 4 lanes of 100 Gbps.
    assert cat.resolve(50e9)[1] == 4
    # topology_cost and the CLI take it too.
    from topologies.families.multidim import ring

    assert topology_cost(ring(4, bandwidth=100 * GBPS), catalog=cat).total_usd == (
        4 * 2 * 100 + 8 * 10 + 4 * 10)         # NICs are 1-port here


def test_cli_topology_cost_with_catalog(tmp_path, capsys):
    from codesign.app.cli import main

    path = write(tmp_path, minimal_spec(nic_ports=1))
    assert main(["topology", "cost", "switch:4,bw=100Gbps", "--catalog", str(path),
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # 4 NPUs on one switch: 4 NICs, 8 transceivers, 4 switch ports, 4 fibres.
    assert data["counts"] == {"nic": 4, "transceiver": 8, "switch_port": 4, "fibre": 4}
    assert data["cost_usd"] == 4 * 100 + 8 * 10 + 4 * 50 + 4 * 10


def test_fibre_length_range_uses_the_mean():
    spec = minimal_spec()
    spec["fibre"] = {"usd_per_m": "0.5", "length_m": {"min": 100, "max": 300}}
    assert catalog_from_dict(spec).fibre_usd == pytest.approx(100.0)


def test_rates_are_sorted_whatever_the_file_order():
    spec = minimal_spec()
    spec["rates"]["10Gbps"] = dict(spec["rates"]["100Gbps"], nic=1)
    spec["rates"] = dict(reversed(list(spec["rates"].items())))
    cat = catalog_from_dict(spec)
    assert cat.rates_Bps == (10 * GBPS, 100 * GBPS)
    assert cat.price("nic", 5 * GBPS) == 1 and cat.price("nic", 50 * GBPS) == 100


@pytest.mark.parametrize("mutate, needle", [
    (lambda s: s.update(colour="red"), "colour"),
    (lambda s: s["rates"]["100Gbps"].update(tranceiver=5), "tranceiver"),
    (lambda s: s["rates"]["100Gbps"].pop("nic"), "nic"),
    (lambda s: s["rates"]["100Gbps"].update(nic=-5), "nic"),
    (lambda s: s["rates"]["100Gbps"].update(ocs_port="lots"), "ocs_port"),
    (lambda s: s["rates"]["100Gbps"].update(nic_ports=0), "nic_ports"),
    (lambda s: s["rates"]["100Gbps"].update(fibres_per_link=1.5), "fibres_per_link"),
    (lambda s: s["rates"].update({"12.5GB/s": dict(s["rates"]["100Gbps"])}), "once"),
    (lambda s: s["rates"].update({"fast": dict(s["rates"]["100Gbps"])}), "fast"),
    (lambda s: s.update(rates={}), "rates"),
    (lambda s: s.pop("fibre"), "fibre"),
    (lambda s: s["fibre"].update(length_m={"min": 5, "max": 1}), "min <= max"),
    (lambda s: s["fibre"].update(length_m=-3), "length_m"),
    (lambda s: s["fibre"].update(usd_per_m=-0.3), "usd_per_m"),
    (lambda s: s["fibre"].update(colour=1), "colour"),
])
def test_bad_catalogs_raise_one_line_naming_the_field(mutate, needle):
    spec = minimal_spec()
    mutate(spec)
    with pytest.raises(InvalidSpecError) as exc:
        catalog_from_dict(spec)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(InvalidSpecError, match="cannot read"):
        load_catalog(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rates: [1, 2\n", encoding="utf-8")
    with pytest.raises(InvalidSpecError, match="invalid YAML"):
        load_catalog(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(InvalidSpecError, match="mapping"):
        load_catalog(listed)


@settings(max_examples=60, deadline=None)
@given(component=st.sampled_from(COLUMNS),
       price=st.floats(max_value=-1e-6, min_value=-1e9, allow_nan=False))
def test_any_negative_price_is_rejected(component, price):
    spec = minimal_spec(**{component: price})
    with pytest.raises(InvalidSpecError) as exc:
        catalog_from_dict(spec)
    assert component in str(exc.value)


@settings(max_examples=60, deadline=None)
@given(component=st.sampled_from(COLUMNS),
       price=st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False))
def test_any_valid_price_is_read_back(component, price):
    cat = catalog_from_dict(minimal_spec(**{component: price}))
    assert cat.price(component, 100 * GBPS) == pytest.approx(price)
    assert math.isfinite(cat.fibre_usd)


@settings(max_examples=60, deadline=None)
@given(key=st.text(min_size=1, max_size=12).filter(
    lambda k: k not in COLUMNS + ("nic_ports", "fibres_per_link")))
def test_any_unknown_row_key_is_rejected(key):
    spec = minimal_spec()
    spec["rates"]["100Gbps"][key] = 1
    with pytest.raises(InvalidSpecError, match="unknown key"):
        catalog_from_dict(spec)
