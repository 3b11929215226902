"""Bisection bandwidth: small exact cases against closed forms and hand counts.

Definition (Topology.bisection_bandwidth): fewest bytes/s from one half of the
NPUs to the other over balanced splits, switches placed wherever the cut is
smallest.
"""

import itertools

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from topologies.families.clos import fattree, ideal, leafspine
from topologies.families.nodes import dgx_a100, rail_bisection_bandwidth
from topologies.registry import from_spec

B = 25e9


def _brute_force_no_switches(t):
    """Independent exact bisection for switchless topologies (plain enumeration)."""
    n = t.npus
    best = np.inf
    for chosen in itertools.combinations(range(n), n // 2):
        side = np.zeros(n, dtype=bool)
        side[list(chosen)] = True
        for s in (side, ~side):
            best = min(best, t.bandwidth[s[t.src] & ~s[t.dst]].sum())
    return best


@pytest.mark.parametrize("spec, expected", [
    ("ring:2", 1 * B),       # one cable
    ("ring:8", 2 * B),       # two cables cut, one direction each
    ("ring:7", 2 * B),
    ("uniring:8", 1 * B),
    ("fc:8", 16 * B),        # 4 x 4 pairs
    ("hypercube:3", 4 * B),  # 2^(3-1) cables
    ("mesh:4x4", 4 * B),     # cut between columns 1 and 2
    ("torus:4x4", 8 * B),    # 2 x 4 wrap-around rings
])
def test_switchless_bisection_exact_equals_hand_count(spec, expected):
    t = from_spec(spec)
    assert _brute_force_no_switches(t) == pytest.approx(expected)
    assert t.bisection_bandwidth()[0] == pytest.approx(expected)


def test_hypercube_closed_form_equals_exact():
    t = from_spec("hypercube:4")
    value, method = t.bisection_bandwidth()
    assert method == "closed-form"
    assert value == pytest.approx(t._bisection_exact()) == pytest.approx(8 * B)


def test_dgx1_bisection_is_the_six_links_between_the_quads():
    t = from_spec("dgx1")
    # Quads {0..3} and {4..7}: NVLinks 0-4 (2), 1-5 (2), 2-6 (1), 3-7 (1).
    assert _brute_force_no_switches(t) == pytest.approx(6 * B)
    assert t.bisection_bandwidth() == (pytest.approx(6 * B), "exact")


def test_expander_and_perms_exact_bisection_matches_brute_force():
    for spec in ("expander:12,degree=3,seed=2", "perms:12,p=1:5"):
        t = from_spec(spec)
        value, method = t.bisection_bandwidth()
        assert method == "exact"
        assert value == pytest.approx(_brute_force_no_switches(t))


def test_star_switch_and_ideal_switch():
    assert from_spec("switch:8").bisection_bandwidth()[0] == pytest.approx(4 * B)
    t = ideal(8, degree=2, bandwidth=B)
    assert t.params["bisection_Bps"] == pytest.approx(t._bisection_exact()) == 8 * B
    assert ideal(7, degree=1).params["bisection_Bps"] == 3 * 25e9


@pytest.mark.parametrize("hosts, m, oversub, expected_links", [
    (8, 4, 2, 2),     # 2 leaves, 2 spines: one cut link per spine
    (8, 2, 1, 4),     # 4 leaves, 2 spines, full bisection: H/2
    (8, 2, 0.5, 4),   # more uplinks than hosts: the host links limit it
    (12, 3, 3, 2),    # 4 leaves, 1 spine: L/2 links
])
def test_leafspine_closed_form_equals_exact(hosts, m, oversub, expected_links):
    t = leafspine(hosts, hosts_per_leaf=m, oversub=oversub, bandwidth=B)
    assert t.params["bisection_Bps"] == pytest.approx(expected_links * B)
    assert t._bisection_exact() == pytest.approx(expected_links * B)


def test_leafspine_without_closed_form_falls_back_to_exact():
    t = leafspine(12, hosts_per_leaf=4, oversub=2, bandwidth=B)  # 3 leaves: odd
    assert "bisection_Bps" not in t.params
    value, method = t.bisection_bandwidth()
    assert method == "exact" and value == pytest.approx(4 * B)


def test_fattree_k4_closed_form_equals_exact_min_cut():
    """k=4: 16 hosts, 2 per edge switch.  Independent exact oracle with scipy
    max-flow: hosts under one edge switch are interchangeable, so enumerate how
    many of each edge switch's hosts are on side S (sum 8), and for each take
    the min cut with every switch free to go either way."""
    t = fattree(4, bandwidth=B)
    n, k = t.npus, 4
    n_sw = t.switches
    s_node, t_node = n_sw, n_sw + 1
    sw = (t.src >= n) & (t.dst >= n)
    base_rows, base_cols = (t.src[sw] - n).tolist(), (t.dst[sw] - n).tolist()
    best = np.inf
    for counts in itertools.product(range(3), repeat=k * k // 2):
        if sum(counts) != n // 2:
            continue
        rows, cols, caps = list(base_rows), list(base_cols), [1] * len(base_rows)
        for e, c in enumerate(counts):
            if c:
                rows.append(s_node), cols.append(e), caps.append(c)      # S hosts -> edge e
            if 2 - c:
                rows.append(e), cols.append(t_node), caps.append(2 - c)  # edge e -> T hosts
        g = csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(n_sw + 2,) * 2)
        g.sum_duplicates()
        best = min(best, maximum_flow(g, s_node, t_node).flow_value)
    assert best * B == pytest.approx(t.params["bisection_Bps"]) == pytest.approx(8 * B)
    assert t.bisection_bandwidth() == (pytest.approx(8 * B), "closed-form")


def _rail_brute_force(nodes, bv, bn):
    """Enumerate every balanced split of the GPUs (independent of the DP)."""
    n = 8 * nodes
    best = np.inf
    for mask in range(1 << n):
        if bin(mask).count("1") != n // 2:
            continue
        x = np.array([(mask >> i) & 1 for i in range(n)]).reshape(nodes, 8)
        a, c = x.sum(axis=1), x.sum(axis=0)
        rails = np.minimum(c, nodes - c).sum() if nodes > 1 else 0
        best = min(best, bv * np.minimum(a, 8 - a).sum() + bn * rails)
    return best


@pytest.mark.parametrize("bv, bn", [(300e9, 25e9), (1.0, 1.0), (1.0, 3.0)])
def test_rail_bisection_dp_matches_enumeration_for_two_nodes(bv, bn):
    assert rail_bisection_bandwidth(2, bv, bn) == pytest.approx(_rail_brute_force(2, bv, bn))


def test_rail_bisection_hand_values():
    # One node: 4 GPUs' NVSwitch links.  Two nodes: the 8 rails each cut once.
    assert rail_bisection_bandwidth(1, 300e9, 25e9) == 4 * 300e9
    assert rail_bisection_bandwidth(2, 300e9, 25e9) == 8 * 25e9
    # Three nodes (24 GPUs): node 0 whole on side S plus GPUs 0-1 of nodes 1 and
    # 2.  NVSwitch cut: 2 + 2 links; rails 0-1 lie wholly in S (no cut); rails
    # 2-7 have one GPU of three in S (one link each).  Better than the obvious
    # 4 NVLinks + 8 NIC links of "one and a half nodes".
    assert rail_bisection_bandwidth(3, 300e9, 25e9) == pytest.approx(4 * 300e9 + 6 * 25e9)
    t = dgx_a100(2)
    assert t.params["bisection_Bps"] == 8 * 25e9
    assert t.bisection_bandwidth() == (8 * 25e9, "closed-form")
