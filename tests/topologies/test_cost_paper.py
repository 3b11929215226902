"""The cost model against the numbers TopoOpt (NSDI'23) states in Section 5.2 and
Appendix G, with the tolerances stated here (topologies/cost.py)."""

import statistics

import pytest

from topologies.cost import (
    expander_cost, fattree_cost, ideal_switch_cost, load_catalog, topoopt_cost,
)

GBPS = 1e9 / 8
G100 = 100 * GBPS
#: The Figure 10 setting we assume (d and B of the Section 5.3 simulations).
D, B = 4, G100
#: Server counts of the k-ary fat-trees k = 4..26 (4,394 is the paper's k = 26 point).
KARY = [k ** 3 // 4 for k in range(4, 28, 2)]
TOL = 0.10   # relative tolerance on the paper's stated ratios


def test_appendix_g_k8_fattree_counts():
    # "a standard k = 8 Fat-tree has 80 switches ..., or 640 switch ports in total, in
    # addition to 1 NIC per host and one transceiver per NIC and switch port."
    c = fattree_cost(128, G100)
    assert c.counts["switch_port"] == 640
    assert c.counts["nic"] == 128
    assert c.counts["transceiver"] == 128 + 640


@pytest.mark.parametrize("d", [1, 2, 4, 8])
def test_appendix_g_topoopt_counts(d):
    # "A TopoOpt system of 128 nodes with degree d uses 128 x d NICs and transceivers,
    # but 128 x 2 x d patch panel ports": 128 d NIC ports (2 per NIC), 1x2 switch per link.
    c = topoopt_cost(128, d, G100)
    assert c.counts["transceiver"] == 128 * d
    assert c.counts["nic"] * 2 >= 128 * d > (c.counts["nic"] - 128) * 2
    assert c.counts["patch_panel_port"] == 128 * 2 * d
    assert c.counts["switch_1x2"] == 128 * d


def test_optical_parts_do_not_depend_on_rate():
    # "the cost of optical components stays constant as link bandwidth increases"
    cat = load_catalog()
    for comp in ("patch_panel_port", "ocs_port", "switch_1x2"):
        assert len({cat.price(comp, r) for r in cat.rates_Bps}) == 1


def test_ocs_port_about_five_times_a_patch_panel_port():
    # Appendix B: "each port is five times more expensive"
    cat = load_catalog()
    assert cat.price("ocs_port", B) / cat.price("patch_panel_port", B) == pytest.approx(5, rel=TOL)


def test_ocs_over_patch_panel_mean_is_1_33():
    # Section 5.2: "using OCSs for TopoOpt is more expensive (1.33x, on average)". Ours: 1.36.
    ratios = [topoopt_cost(n, D, B, technology="ocs").total_usd / topoopt_cost(n, D, B).total_usd
              for n in KARY]
    assert statistics.mean(ratios) == pytest.approx(1.33, rel=TOL)


def test_ideal_over_topoopt_at_4394_servers_is_3_0():
    # Section 5.2: at 4,394 servers (k = 26) the full-bisection fat-tree (Ideal Switch)
    # relative to TopoOpt is 3.0x with Table 2 prices. Ours: 2.94.
    ratio = ideal_switch_cost(4394, D, B).total_usd / topoopt_cost(4394, D, B).total_usd
    assert ratio == pytest.approx(3.0, rel=TOL)


def test_ideal_over_topoopt_mean_is_3_2():
    # Section 5.2: "the ratio of Ideal Switch's cost to TopoOpt's cost is 3.2x on average".
    # Ours: 2.94 with per-port sizing (-8%); the whole-k-ary sizing over powers of two gives
    # 3.62 (+13%); the paper's figure lies between (experiments/cost/).
    per_port = statistics.mean(ideal_switch_cost(n, D, B).total_usd
                               / topoopt_cost(n, D, B).total_usd for n in KARY)
    assert per_port == pytest.approx(3.2, rel=TOL)
    pow2 = [2 ** i for i in range(4, 13)]
    kary = statistics.mean(ideal_switch_cost(n, D, B, sizing="kary").total_usd
                           / topoopt_cost(n, D, B).total_usd for n in pow2)
    assert per_port < 3.2 < kary


@pytest.mark.parametrize("n", [16, 128, 1024, 4394])
def test_fabric_order_of_figure_10(n):
    # Expander is the least expensive; the Ideal Switch costs more than the oversubscribed
    # fat-tree; TopoOpt with OCS more than with patch panels.
    exp = expander_cost(n, D, B).total_usd
    pp = topoopt_cost(n, D, B).total_usd
    ocs = topoopt_cost(n, D, B, technology="ocs").total_usd
    over = fattree_cost(n, B, degree=D, oversub=2).total_usd
    ideal = ideal_switch_cost(n, D, B).total_usd
    assert exp < pp < ocs < over < ideal
