"""topology_cost on built topologies: graph counting by hand, family dispatch agreeing
with the closed forms, intra-server links (topologies/cost.py)."""

import pytest

from codesign.errors import InvalidSpecError
from topologies.builder import LinkBuilder
from topologies.cost import (
    expander_cost, fattree_cost, ideal_switch_cost, topology_cost, topoopt_cost,
)
from topologies.registry import from_spec

GBPS = 1e9 / 8
G100 = 100 * GBPS
NIC, XCVR, PORT, FIBRE = 678, 99, 187, 150


def test_star_by_hand():
    b = LinkBuilder(4, 1)
    b.cable([0, 1, 2, 3], 4, G100, 1e-6)
    c = topology_cost(b.build(name="star"))
    assert c.counts == {"nic": 4, "transceiver": 8, "switch_port": 4, "fibre": 4}
    assert c.total_usd == 4 * NIC + 8 * XCVR + 4 * PORT + 4 * FIBRE
    assert c.fabric == "graph"


def test_ring_two_ports_share_a_two_port_nic():
    b = LinkBuilder(4)
    b.cable([0, 1, 2, 3], [1, 2, 3, 0], G100, 1e-6)
    assert topology_cost(b.build()).counts == {"nic": 4, "transceiver": 8, "fibre": 4}


def test_parallel_links_mixed_rates_and_lone_links():
    b = LinkBuilder(3)
    b.cable(0, 1, G100, 1e-6, count=2)          # two 100G cables 0-1
    b.cable(1, 2, 10 * GBPS, 1e-6)              # one 10G cable 1-2
    b.links(2, 0, 200 * GBPS, 1e-6)             # a lone 200G directed link 2->0
    c = topology_cost(b.build())
    # Cables: 2 x 100G, 1 x 10G, 1 x 200G (lone link = a cable, 2 fibre runs at 200G).
    # NICs: NPU0: 2 x 100G -> 1 + 1 x 200G -> 1; NPU1: 2 x 100G -> 1, 1 x 10G -> 1;
    # NPU2: 1 x 10G -> 1, 1 x 200G -> 1.
    assert c.counts == {"nic": 6, "transceiver": 8, "fibre": 5}
    assert c.items["nic"] == 2 * NIC + 2 * 185 + 2 * 815
    assert c.items["transceiver"] == 4 * XCVR + 2 * 20 + 2 * 198


def test_asymmetric_pair_uses_the_faster_direction():
    b = LinkBuilder(2)
    b.links(0, 1, G100, 1e-6)
    b.links(1, 0, 10 * GBPS, 1e-6)
    c = topology_cost(b.build())
    assert c.counts == {"nic": 2, "transceiver": 2, "fibre": 1}
    assert c.items["nic"] == 2 * NIC


def test_single_npu_costs_nothing():
    c = topology_cost(LinkBuilder(1).build())
    assert c.total_usd == 0 and c.items == {} and c.counts == {}


def test_fattree_family_matches_closed_form():
    for k in (4, 8):
        t = from_spec(f"fattree:k={k},bw=100Gbps")
        c = topology_cost(t)
        ref = fattree_cost(k ** 3 // 4, G100)
        assert (c.counts, c.total_usd) == (ref.counts, ref.total_usd)


def test_leafspine_family_matches_two_tier_closed_form():
    t = from_spec("leafspine:32,oversub=2,bw=100Gbps")
    ref = fattree_cost(32, G100, tiers=2, oversub=2)
    assert topology_cost(t).counts == ref.counts


def test_expander_family_matches_closed_form():
    t = from_spec("expander:64,degree=4,bw=100Gbps,seed=3")
    ref = expander_cost(64, 4, G100)
    assert (topology_cost(t).counts, topology_cost(t).total_usd) == (ref.counts, ref.total_usd)


def test_ideal_family_is_priced_as_a_fat_tree_of_d_times_b():
    t = from_spec("ideal:128,degree=4,bw=100Gbps")
    c = topology_cost(t)
    ref = ideal_switch_cost(128, 4, G100)
    assert (c.total_usd, c.counts, c.fabric) == (ref.total_usd, ref.counts, "ideal")
    assert c.notes and "fat-tree" in c.notes[0]
    # Far more than the single switch the graph shows (128 ports).
    assert c.counts["switch_port"] == 1280


def test_perms_family_is_priced_as_topoopt():
    # Each one-directional permutation uses one interface per server.
    t = from_spec("perms:128,p=1:3:5:7,bw=100Gbps")
    ref = topoopt_cost(128, 4, G100)
    c = topology_cost(t)
    assert (c.counts, c.total_usd) == (ref.counts, ref.total_usd)
    # Bidirectional permutations use two interfaces per server each.
    t2 = from_spec("perms:128,p=1:3,bidir=true,bw=100Gbps")
    assert topology_cost(t2).counts == ref.counts


def test_direct_connect_technology_param_and_matchings():
    b = LinkBuilder(4)
    b.cable([0, 2], [1, 3], G100, 1e-6)         # a matching: one interface at each end
    b.links([0, 1, 2, 3], [1, 2, 3, 0], G100, 1e-6)   # a ring permutation
    ocs = topology_cost(b.build(family="perms", params={"technology": "ocs"}))
    # 2 interfaces per server (permutation + matching): 8 interfaces.
    assert ocs.counts == {"nic": 4, "transceiver": 8, "ocs_port": 8, "fibre": 8}
    assert ocs.counts == topoopt_cost(4, 2, G100, technology="ocs").counts
    with pytest.raises(InvalidSpecError, match="technology"):
        topology_cost(b.build(family="perms", params={"technology": "mems"}))


def test_links_inside_servers_are_not_priced():
    # Two servers of two NPUs: NVLink-like cable inside each, an in-server switch for
    # server 0, and a network switch joining NPU 0 and NPU 2.
    b = LinkBuilder(4, 2)
    b.cable([0, 2], [1, 3], 300e9, 1e-6)        # inside servers
    b.cable([0, 1], [4, 4], 300e9, 1e-6)        # switch 4 only sees server 0: internal
    b.cable([0, 2], [5, 5], G100, 1e-6)         # network
    t = b.build(node_attrs={"server": [0, 0, 1, 1]})
    c = topology_cost(t)
    assert c.counts == {"nic": 2, "transceiver": 4, "switch_port": 2, "fibre": 2}
    assert c.notes and "8 directed links inside servers" in c.notes[0]
    every = topology_cost(t, intra_server=True)
    assert every.total_usd > c.total_usd
    with pytest.raises(InvalidSpecError, match="intra_server"):
        topology_cost(t, intra_server="no")


def test_dgx_boxes():
    # A single DGX-1 has no cluster network; its NVLinks are part of the server.
    assert topology_cost(from_spec("dgx1")).total_usd == 0
    assert topology_cost(from_spec("dgx1"), intra_server=True).counts["fibre"] == 24 * 2
    # dgx-a100:2 -- one 200G NIC per GPU to rail switches (8 rails x 2 GPUs).
    c = topology_cost(from_spec("dgx-a100:2"))
    assert c.counts == {"nic": 16, "transceiver": 32, "switch_port": 16, "fibre": 32}


@pytest.mark.parametrize("spec", ["ring:8", "torus:4x4", "hypercube:3", "mesh:3x3",
                                  "hier:ring4_fc2_switch4", "uniring:5", "switch:8"])
def test_every_graph_gets_a_positive_consistent_cost(spec):
    t = from_spec(spec)
    c = topology_cost(t)
    assert c.total_usd > 0 and c.total_usd == pytest.approx(sum(c.items.values()))
    # Default links are 25 GB/s = 200 Gbps: two fibre runs per cable, a transceiver at
    # each end, so as many transceivers as fibre runs.
    assert t.bandwidth.max() == 25e9
    assert c.counts["transceiver"] == c.counts["fibre"]
