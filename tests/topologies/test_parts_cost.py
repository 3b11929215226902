"""Parts-catalog pricing (topologies.parts) and power: closed forms and published counts."""

import json
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from topologies.cost import load_catalog, topology_cost
from topologies.parts import PARTS, load_parts_catalog, node_levels, parts_cost
from topologies.registry import FAMILIES, family_names, from_spec

family_names()
CAT = load_parts_catalog()


def _unit(rate_gbps, cls):
    return CAT.optics[rate_gbps * 1e9 / 8][cls]


def test_catalog_has_sources_date_and_every_class():
    assert CAT.date.startswith("2026") and "estimates" in CAT.description
    rates = sorted(r * 8 / 1e9 for r in CAT.optics)
    assert rates == [200, 400, 800, 1600]
    big = [m for m in CAT.switches if m.port_rate_Bps * 8 / 1e9 * m.ports == 51200]
    assert {m.ports for m in big} >= {64, 128}            # 64x800G and 128x400G
    assert _unit(800, "dr").power_w == 16                  # NVIDIA MMS4X00 datasheet, typical


def test_superpod_4su_closed_form_price_and_power():
    """128 DGX-class servers, 8 x 400G rails (DGX SuperPOD 4 SU): 32 leaves + 16 spines of
    64 x 400G, 1024 node-leaf + 1024 leaf-spine optical cables (4096 transceivers), one
    400G NIC per GPU; every count and every dollar and watt by hand."""
    t = from_spec("railopt:128,gpus=8,bw=400Gbps")
    c = topology_cost(t, catalog=load_catalog("parts-2026"))
    sw = next(m for m in CAT.switches if m.ports == 64 and m.port_rate_Bps == 50e9)
    nic_usd, nic_w, _ = CAT.nics[50e9]
    dr = _unit(400, "dr")
    assert c.counts == {"switch": 48, "nic": 1024, "transceiver": 4096, "fibre": 2048}
    usd = 48 * sw.usd + 1024 * nic_usd + 4096 * dr.usd + 2048 * 0.30 * CAT.fibre_length_m["dr"]
    assert c.total_usd == pytest.approx(usd)
    assert c.power_w == pytest.approx(48 * sw.power_w + 1024 * nic_w + 4096 * dr.power_w)


def test_tpu_v4_pod_optics_and_ocs_ports_match_published():
    # TPU v4 (ISCA'23): 48 OCS x 128 ports, 1.5 optical transceivers per chip, copper inside
    # the cubes; ICI is on the chip (no NICs).
    c = parts_cost(from_spec("tpu:4x4x4,cubes=64"), CAT)
    assert c.counts["ocs_port"] == 48 * 128
    assert c.counts["transceiver"] == 1.5 * 4096
    assert c.counts["dac"] == 4096 * 3 - 3072          # all ICI cables minus the optical ones
    assert "nic" not in c.counts and "switch" not in c.counts


def test_nvl72_racks_buy_nine_switch_trays_each():
    c = parts_cost(from_spec("railopt:144,gpus=4,scaleup=72,scaleup_bw=900GB/s,bw=800Gbps"), CAT)
    assert c.counts["nvlink_switch_tray"] == 8 * 9       # NVIDIA: 9 NVLink switch trays per rack
    hgx = parts_cost(from_spec("fattree:servers=64,radix=64,scaleup=8"), CAT)
    assert "nvlink_switch_tray" not in hgx.counts and any("baseboard" in n for n in hgx.notes)


def test_switch_model_is_the_cheapest_that_fits():
    # 64 x 800G leaf ports -> one 51.2T 64x800G box; 100 ports -> the 128x800G box.
    small = parts_cost(from_spec("fattree:servers=64,radix=64,bw=800Gbps"), CAT)
    assert small.counts["switch"] == 1
    assert small.items["switch"] == min(m.usd for m in CAT.switches
                                        if m.port_rate_Bps >= 100e9 and m.ports >= 64)
    one = parts_cost(from_spec("switch:100,bw=800Gbps"), CAT)
    assert one.counts["switch"] == 1 and one.items["switch"] == 110000


def test_reach_class_follows_the_clos_level():
    t = from_spec("fattree:k=8,bw=800Gbps")
    lev = node_levels(t)
    assert lev[:128].max() == 0 and sorted(set(lev[128:].tolist())) == [1, 2, 3]
    c = parts_cost(t, CAT)
    # 128 host + 128 edge-agg cables are DR, 128 agg-core cables FR.
    dr, fr = _unit(800, "dr"), _unit(800, "fr")
    assert c.items["transceiver"] == pytest.approx(2 * 256 * dr.usd + 2 * 128 * fr.usd)


def test_multiplane_endpoint_is_one_nic_card():
    c = parts_cost(from_spec("multiplane:64,planes=4,radix=64,bw=200Gbps"), CAT)
    assert c.counts["nic"] == 64                             # 4 x 200G = one 800G card


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_example_has_a_price_and_power(name):
    c = topology_cost(from_spec(FAMILIES[name].example), catalog=CAT)
    # One server (dgx1, nvl:8) has no network to buy; everything else costs and draws power.
    assert (c.total_usd > 0 and c.power_w > 0) or (c.total_usd == 0 and c.notes)
    assert set(c.items) <= set(PARTS)
    assert c.total_usd == pytest.approx(sum(c.items.values()))
    json.dumps(c.to_dict())


def test_table2_catalog_keeps_its_numbers_and_has_no_power():
    c = topology_cost(from_spec("fattree:k=8,bw=100Gbps"))
    assert c.counts["switch_port"] == 640 and c.power_w is None
    assert c.to_dict()["power_w"] is None


def test_bad_parts_catalog_names_the_field(tmp_path):
    from importlib.resources import files

    spec = yaml.safe_load((files("topologies") / "data" / "parts-2026.yaml").read_text())
    spec["switches"][0]["prots"] = 3
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(spec))
    with pytest.raises(InvalidSpecError, match="prots"):
        load_catalog(p)
    spec["switches"][0].pop("prots")
    spec["optics"]["800Gbps"].pop("fr")
    p.write_text(yaml.safe_dump(spec))
    with pytest.raises(InvalidSpecError, match="fr"):
        load_catalog(p)


def test_cli_cost_json_has_power_w():
    out = subprocess.run([sys.executable, "-m", "codesign", "topology", "cost",
                          "railopt:4,gpus=2,radix=4,bw=400Gbps", "--catalog", "parts-2026",
                          "--json"], capture_output=True, text=True, check=True)
    payload = json.loads(out.stdout)
    assert payload["power_w"] > 0 and payload["fabric"] == "parts"


def test_a_lone_nvlink_domain_is_priced_as_its_trays():
    # nvl:72 has no cables at all: its network is the crossbar, 72 GPUs x ceil(900 / 50)
    # NVLink ports over 144-port trays = 9 trays (module docstring, GB200 NVL72); it was
    # priced 0 USD with the trays' power counted.
    r = parts_cost(from_spec("nvl:72"), CAT)
    assert r.counts == {"nvlink_switch_tray": 9}
    assert r.total_usd == pytest.approx(9 * CAT.tray_usd)
    assert r.power_w == pytest.approx(9 * CAT.tray_power_w)


def test_a_servers_own_nvlink_domain_comes_with_the_server():
    # A GB200 NVL72 rack (the hardware catalog's 72-GPU server) is priced with its 9
    # trays by the price catalog (codesign/data/cluster-2026.yaml); pricing them again
    # as network counted 64 racks' 576 trays twice.  Domains larger than the server stay
    # network (here 72-GPU domains over 4-GPU compute trays: 8 racks x 9 trays).
    spec = "railopt:144,gpus=4,scaleup=72,scaleup_bw=900GB/s,bw=800Gbps"
    full = parts_cost(from_spec(spec), CAT)
    own = parts_cost(from_spec(spec), CAT, server_gpus=72)
    trays = parts_cost(from_spec(spec), CAT, server_gpus=4)
    assert "nvlink_switch_tray" not in own.counts
    assert any("come with the servers" in n for n in own.notes)
    assert own.total_usd == pytest.approx(full.total_usd - 8 * 9 * CAT.tray_usd)
    assert trays.counts == full.counts and trays.total_usd == full.total_usd
    assert topology_cost(from_spec(spec), catalog=CAT, server_gpus=72).counts == own.counts


def test_an_oversize_switch_node_is_priced_as_a_nonblocking_clos():
    # The Ideal Switch of 128 servers x 8 x 400G is 512 lanes of 800G: no box has them,
    # so it is the full-bisection Clos TopoOpt Sec. 5.2 prices it as -- on 128-port
    # boxes 2 tiers, 512 / 64 = 8 leaves + 512 / 128 = 4 spines and 512 inner links (two
    # 800G transceivers each) besides the servers' 256 1.6T cables.  It was 4 boxes and
    # no inner links, half the price of any buildable fabric of that bandwidth.
    c = parts_cost(from_spec("ideal:128,degree=8,bw=400Gbps"), CAT)
    assert c.counts["switch"] == 12
    assert c.counts["transceiver"] == 2 * 256 + 2 * 512
    assert any("non-blocking Clos" in n for n in c.notes)
    twin = parts_cost(from_spec("leafspine:128,oversub=1,bw=3200Gbps"), CAT)
    assert c.total_usd == pytest.approx(twin.total_usd, rel=0.05)
    assert parts_cost(from_spec("switch:100,bw=800Gbps"), CAT).counts["switch"] == 1


@settings(max_examples=200, deadline=None)
@given(ports=st.integers(1, 2_000_000), radix=st.sampled_from([1, 2, 3, 4, 8, 16, 64, 128]))
def test_a_switch_node_has_the_fewest_tiers_that_hold_its_ports(ports, radix):
    from topologies.parts import SwitchModel, _switch_node

    units, inner = _switch_node(ports, SwitchModel("box", 1e11, radix, 1.0, 1.0))
    if ports <= radix:
        assert (units, inner) == (1, 0)
        return
    if radix < 4:   # (a catalog may list such a box: no Clos, and no endless loop)
        assert (units, inner) == (-(-ports // radix), 0)
        return
    tiers = inner // ports + 1
    half = radix // 2
    assert inner == (tiers - 1) * ports and 2 * half ** tiers >= ports > 2 * half ** (tiers - 1)
    # (2t - 1) ports / R boxes of a t-tier folded Clos, up to one partly used box a tier
    assert (2 * tiers - 1) * ports / radix <= units <= (2 * tiers - 1) * ports / radix + tiers
