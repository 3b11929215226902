"""Fabric cost functions: counts and dollars worked out by hand (TopoOpt Appendix G
counting), validation, monotonicity (topologies/cost.py)."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from codesign.errors import InvalidSpecError
from topologies.cost import (
    COMPONENTS, CostBreakdown, cost_equivalent_fattree, expander_cost, fattree_cost,
    ideal_switch_cost, load_catalog, ocs_reconfig_cost, topoopt_cost,
)

GBPS = 1e9 / 8
G100 = 100 * GBPS
# Table 2 at 100 Gbps and 200 Gbps, and the $150 fibre (0.30 $/m x 500 m mean length).
NIC, XCVR, PORT, PP, OCS, SW12 = 678, 99, 187, 100, 520, 25
NIC200, XCVR200, PORT200 = 815, 198, 374
FIBRE = 150


def test_fattree_k4_by_hand():
    c = fattree_cost(16, G100)
    # 16 hosts; 20 switches of 4 ports = 80 ports; cables: 16 host + 16 edge-agg + 16 agg-core.
    assert c.counts == {"nic": 16, "transceiver": 16 + 80, "switch_port": 80, "fibre": 48}
    assert c.items["nic"] == 16 * NIC
    assert c.total_usd == 16 * NIC + 96 * XCVR + 80 * PORT + 48 * FIBRE == 42512
    assert c.fabric == "fattree"


@pytest.mark.parametrize("k", [4, 6, 8, 10, 26])
def test_fattree_kary_closed_form(k):
    # k-ary fat-tree: 5k^2/4 switches of k ports, k^3/4 hosts, 3 k^3/4 cables.
    n = k ** 3 // 4
    for sizing in ("per_port", "kary"):
        c = fattree_cost(n, G100, sizing=sizing)
        assert c.counts["switch_port"] == (5 * k * k // 4) * k
        assert c.counts["fibre"] == 3 * n
        assert c.counts["transceiver"] == n + c.counts["switch_port"]
        assert c.counts["nic"] == n


def test_fattree_oversubscribed_by_hand():
    # 128 servers, 2:1: 128 host cables, 64 edge->agg cables, 128 agg->core cables.
    c = fattree_cost(128, G100, oversub=2)
    assert c.counts == {"nic": 128, "transceiver": 2 * 128 + 2 * 192,
                        "switch_port": 128 + 2 * 192, "fibre": 128 + 192}
    assert c.fabric == "fattree-oversub2"
    assert c.total_usd < fattree_cost(128, G100).total_usd


def test_fattree_tiers():
    one = fattree_cost(8, G100, tiers=1)         # a single switch
    assert one.counts == {"nic": 8, "transceiver": 16, "switch_port": 8, "fibre": 8}
    two = fattree_cost(32, G100, tiers=2, oversub=2)   # leaf-spine, 16 uplinks
    assert two.counts == {"nic": 32, "transceiver": 96, "switch_port": 64, "fibre": 48}


def test_fattree_kary_sizing_buys_the_whole_tree():
    # 17 servers need the k = 6 tree (54 hosts): 270 ports, 108 inter-switch cables,
    # but only 17 NICs, host cables and host transceiver pairs.
    c = fattree_cost(17, G100, sizing="kary")
    assert c.counts == {"nic": 17, "transceiver": 2 * 17 + 2 * 108, "switch_port": 270,
                        "fibre": 17 + 108}
    assert fattree_cost(17, G100).counts["switch_port"] == 5 * 17


@pytest.mark.parametrize("n", [1, 2, 3, 16, 17, 54, 55, 128, 129, 1000, 4394, 4395])
def test_kary_sizing_uses_the_smallest_tree(n):
    # Brute-force oracle: smallest even k with k^3/4 >= n.
    k = next(k for k in range(2, 100, 2) if k ** 3 // 4 >= n)
    assert fattree_cost(n, G100, sizing="kary").counts["switch_port"] == 5 * k ** 3 // 4


def test_degree_multiplies_the_link_rate():
    assert fattree_cost(16, 25 * GBPS, degree=4) == fattree_cost(16, 100 * GBPS)


def test_ideal_switch_by_hand():
    # d = 4, B = 100 Gbps: 400 Gbps server links = 2 lanes of 200 Gbps (footnote 4 bundling),
    # each lane a 1-port 200G NIC, 2 fibres per lane.
    c = ideal_switch_cost(128, 4, G100)
    assert c.counts == {"nic": 256, "transceiver": 2 * 768, "switch_port": 2 * 640,
                        "fibre": 2 * 2 * 384}
    assert c.total_usd == 256 * NIC200 + 1536 * XCVR200 + 1280 * PORT200 + 1536 * FIBRE
    assert c.fabric == "ideal"


def test_topoopt_patch_panel_by_hand():
    c = topoopt_cost(128, 4, G100)
    # 4 interfaces per server on two 2-port NICs; 2d panels -> 2 ports per interface.
    assert c.counts == {"nic": 256, "transceiver": 512, "patch_panel_port": 1024,
                        "switch_1x2": 512, "fibre": 512}
    assert c.total_usd == 256 * NIC + 512 * XCVR + 1024 * PP + 512 * SW12 + 512 * FIBRE
    assert c.fabric == "topoopt-patch_panel"


def test_topoopt_without_lookahead_and_with_ocs():
    c = topoopt_cost(128, 4, G100, lookahead=False)
    assert c.counts == {"nic": 256, "transceiver": 512, "patch_panel_port": 512, "fibre": 512}
    o = topoopt_cost(128, 4, G100, technology="ocs")
    assert o.counts == {"nic": 256, "transceiver": 512, "ocs_port": 512, "fibre": 512}
    assert o.total_usd == 256 * NIC + 512 * XCVR + 512 * OCS + 512 * FIBRE
    r = ocs_reconfig_cost(128, 4, G100)
    assert (r.total_usd, r.counts, r.fabric) == (o.total_usd, o.counts, "ocs-reconfig")


def test_topoopt_at_200g_and_odd_degree():
    c = topoopt_cost(10, 4, 200 * GBPS)
    # A 200G interface fills a NIC (two 100G lanes) and uses 2 fibre runs; optical ports
    # stay one per interface (their price does not depend on the rate).
    assert c.counts == {"nic": 40, "transceiver": 40, "patch_panel_port": 80,
                        "switch_1x2": 40, "fibre": 80}
    assert topoopt_cost(10, 3, G100).counts["nic"] == 10 * 2     # ceil(3 / 2) per server


def test_expander_by_hand():
    c = expander_cost(128, 4, G100)
    assert c.counts == {"nic": 256, "transceiver": 512, "fibre": 256}
    assert c.total_usd == 256 * NIC + 512 * XCVR + 256 * FIBRE
    with pytest.raises(InvalidSpecError, match="even"):
        expander_cost(5, 3, G100)


def test_cost_equivalent_fattree():
    budget = topoopt_cost(128, 4, G100).total_usd
    rate, c = cost_equivalent_fattree(128, budget, degree=4)
    # Oracle: no other catalog rate gives a fat-tree closer to the budget.
    for other in load_catalog().rates_Bps:
        alt = fattree_cost(128, other, degree=4).total_usd
        assert abs(c.total_usd - budget) <= abs(alt - budget)
    assert rate == 25 * GBPS and c == fattree_cost(128, 25 * GBPS, degree=4)


def test_breakdown_is_consistent():
    for c in (fattree_cost(54, G100, oversub=2), ideal_switch_cost(16, 8, 40 * GBPS),
              topoopt_cost(33, 5, 25 * GBPS, technology="ocs"), expander_cost(20, 3, 10 * GBPS)):
        assert isinstance(c, CostBreakdown)
        assert set(c.items) == set(c.counts) and set(c.items) <= set(COMPONENTS)
        assert c.total_usd == pytest.approx(math.fsum(c.items.values()))
        assert all(isinstance(v, int) and v > 0 for v in c.counts.values())
        d = c.to_dict()
        assert d["cost_usd"] == c.total_usd and d["breakdown_usd"] == c.items
        assert d["counts"] == c.counts and d["fabric"] == c.fabric


@pytest.mark.parametrize("call, needle", [
    (lambda: fattree_cost(0, G100), "servers"),
    (lambda: fattree_cost(True, G100), "servers"),
    (lambda: fattree_cost(16, -1.0), "link rate"),
    (lambda: fattree_cost(16, float("nan")), "link rate"),
    (lambda: fattree_cost(16, G100, oversub=0), "oversub"),
    (lambda: fattree_cost(16, G100, tiers=0), "tiers"),
    (lambda: fattree_cost(16, G100, sizing="exact"), "sizing"),
    (lambda: fattree_cost(16, G100, degree=2.5), "degree"),
    (lambda: fattree_cost(16, G100, catalog={"rates": {}}), "catalog"),
    (lambda: topoopt_cost(16, 0, G100), "degree"),
    (lambda: topoopt_cost(16, 4, G100, technology="mems"), "technology"),
    (lambda: topoopt_cost(16, 4, G100, lookahead="yes"), "lookahead"),
    (lambda: expander_cost(16, 4, 0), "link rate"),
    (lambda: cost_equivalent_fattree(16, -5), "budget"),
])
def test_bad_arguments_raise_one_line(call, needle):
    with pytest.raises(InvalidSpecError) as exc:
        call()
    assert needle in str(exc.value) and "\n" not in str(exc.value)


FABRICS = {
    "fattree": lambda n, d, r: fattree_cost(n, r, degree=d),
    "fattree-kary": lambda n, d, r: fattree_cost(n, r, degree=d, sizing="kary"),
    "oversub": lambda n, d, r: fattree_cost(n, r, degree=d, oversub=2),
    "ideal": lambda n, d, r: ideal_switch_cost(n, d, r),
    "topoopt": lambda n, d, r: topoopt_cost(n, d, r),
    "topoopt-ocs": lambda n, d, r: topoopt_cost(n, d, r, technology="ocs"),
    "expander": lambda n, d, r: expander_cost(2 * n, d, r),
}


@settings(max_examples=80, deadline=None)
@given(fabric=st.sampled_from(sorted(FABRICS)), n1=st.integers(1, 3000),
       n2=st.integers(1, 3000), d=st.integers(1, 8))
def test_cost_grows_with_servers(fabric, n1, n2, d):
    lo, hi = sorted((n1, n2))
    f = FABRICS[fabric]
    assert f(lo, d, G100).total_usd <= f(hi, d, G100).total_usd


@settings(max_examples=80, deadline=None)
@given(fabric=st.sampled_from(sorted(FABRICS)), g1=st.floats(1, 1600), g2=st.floats(1, 1600),
       n=st.integers(1, 300), d=st.integers(1, 8))
def test_cost_grows_with_link_rate(fabric, g1, g2, n, d):
    lo, hi = sorted((g1, g2))
    f = FABRICS[fabric]
    assert f(n, d, lo * GBPS).total_usd <= f(n, d, hi * GBPS).total_usd + 1e-6


def test_direct_fabrics_are_linear_in_servers():
    for f in (FABRICS["topoopt"], FABRICS["topoopt-ocs"], FABRICS["fattree"]):
        assert f(300, 4, G100).total_usd == pytest.approx(3 * f(100, 4, G100).total_usd)
