"""Graph symmetry (:mod:`topologies.symmetry`) for its two users, the cut bounds and
Mirrored Dantzig-Wolfe.

Oracle: every automorphism enumerated by networkx's isomorphism matcher.  The
bounds' orbits (candidate maps and twins, no search) must each lie inside one true
orbit; the MCF's classes (candidates, twins, then colour refinement and search) must
be the true orbits, each with a verified map.
"""

import networkx as nx
import numpy as np
import pytest

from topologies.families.multidim import mesh, ring, torus
from topologies.model import Topology
from topologies.registry import from_spec
from topologies.symmetry import Verifier, npu_classes, participant_orbits
from topology_cases import cached_topology

SPECS = ["ring:6", "uniring:5", "mesh:2x3", "torus:3x3", "dgx1", "switch:4", "irregular",
         "hypercube:3", "fattree:k=4", "hier:ring4_switch2"]


def true_orbits(topo, members):
    """:func:`brute_force_orbits`, or the known answer where enumeration is too long."""
    if topo.name == "fattree:k=4":  # every host is alike (the group has ~10^10 elements)
        return {frozenset(members)}
    return brute_force_orbits(topo, members)


def brute_force_orbits(topo, members):
    """Orbits of ``members`` under all automorphisms (networkx enumeration)."""
    from networkx.algorithms.isomorphism import MultiDiGraphMatcher

    g = nx.MultiDiGraph()
    for v in range(topo.n_nodes):
        g.add_node(v, npu=v < topo.npus)
    for s, d, b, l in zip(topo.src.tolist(), topo.dst.tolist(), topo.bandwidth.tolist(),
                          topo.latency.tolist()):
        g.add_edge(s, d, keys=(b, l))

    def edge_match(a, b):
        return sorted(x["keys"] for x in a.values()) == sorted(x["keys"] for x in b.values())

    m = MultiDiGraphMatcher(g, g, node_match=lambda a, b: a["npu"] == b["npu"],
                            edge_match=edge_match)
    autos = list(m.isomorphisms_iter())
    return {frozenset(h[v] for h in autos) for v in members}


def test_orbits():
    assert len(participant_orbits(torus([4, 4]), range(16))) == 1
    assert len(participant_orbits(from_spec("hier:ring4_switch2"), range(8))) == 1
    # mesh 3x3 under reflections: corners, edge midpoints, centre.
    orbits = participant_orbits(mesh([3, 3]), range(9))
    assert sorted(map(tuple, orbits)) == [(0, 2, 6, 8), (1, 3, 5, 7), (4,)]
    # A subset that translations do not preserve: no merging.
    assert len(participant_orbits(ring(8), [0, 1, 2])) == 3
    # Custom graphs have no coordinates: every member alone.
    t = Topology(3, 0, [0, 1, 2], [1, 2, 0], 1e9, 0.0)
    assert len(participant_orbits(t, range(3))) == 3


@pytest.mark.parametrize("spec", SPECS)
def test_participant_orbits_lie_in_true_orbits(spec):
    topo = cached_topology(spec)
    members = list(range(topo.npus))
    true = true_orbits(topo, members)
    for orbit in participant_orbits(topo, members):
        assert any(set(orbit) <= o for o in true)


@pytest.mark.parametrize("spec", SPECS)
def test_npu_classes_are_the_orbits(spec):
    topo = cached_topology(spec)
    members = list(range(topo.npus))
    labels = [(v < topo.npus,) for v in range(topo.n_nodes)]
    sc = npu_classes(topo, members, link_cost=topo.latency, labels=labels)
    assert {frozenset(m for m, _ in cl) for cl in sc.classes} == true_orbits(topo, members)
    # Every map is an automorphism sending the representative to the member.
    for cl in sc.classes:
        rep = cl[0][0]
        for m, h in cl:
            assert h.node[rep] == m
            assert sorted(h.node.tolist()) == list(range(topo.n_nodes))
            assert np.array_equal(topo.src[h.link], h.node[topo.src])
            assert np.array_equal(topo.dst[h.link], h.node[topo.dst])
            assert np.array_equal(topo.bandwidth[h.link], topo.bandwidth)
            assert np.array_equal(topo.latency[h.link], topo.latency)


def test_verifier_checks_links_labels_and_groups():
    topo = ring(4, bandwidth=1e9, latency=0.0)
    shift = np.array([1, 2, 3, 0])
    h = Verifier(topo)(shift)
    assert h is not None and np.array_equal(topo.src[h.link], shift[topo.src])
    assert Verifier(topo)(np.array([0, 0, 1, 2])) is None                 # not a bijection
    assert Verifier(topo)(np.array([1, 0, 2, 3])) is None                 # not an automorphism
    assert Verifier(topo, labels=[0, 1, 1, 1])(shift) is None             # moves a label
    one_link = [([0], 1.0)]
    assert Verifier(topo, groups=one_link)(shift) is None                 # moves a group
    assert Verifier(topo, groups=[(list(range(topo.n_links)), 1.0)])(shift) is not None


@pytest.mark.parametrize("spec", ["fattree:k=4", "leafspine:8", "switch:5", "dgx-a100:2",
                                  "hier:ring4_switch2", "irregular", "ring:5"])
def test_twin_classes_match_a_plain_grouping(spec):
    topo = cached_topology(spec)
    nodes = list(range(topo.n_nodes))

    def rows(links, ends):
        return tuple(sorted((int(ends[i]), topo.bandwidth[i], topo.latency[i]) for i in links))

    plain = {}
    for x in nodes:
        plain.setdefault((rows(topo.out_links(x), topo.dst), rows(topo.in_links(x), topo.src)),
                         []).append(x)
    expected = sorted(g for g in plain.values() if len(g) > 1)
    from topologies.symmetry import twin_classes
    assert twin_classes(topo, nodes) == expected
    # Labels split twins.
    labels = [x % 2 for x in nodes]
    assert all(len({labels[x] for x in g}) == 1 for g in twin_classes(topo, nodes, labels=labels))


# ------------------------------------------------------------------ group maps
def _induced_isomorphism(topo, a, b):
    """Brute-force oracle on a small graph: does some automorphism send a[i] to b[i]?"""
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(topo.n_nodes))
    for l in range(topo.n_links):
        g.add_edge(int(topo.src[l]), int(topo.dst[l]),
                   key=(float(topo.bandwidth[l]), float(topo.latency[l])))
    for v in range(topo.n_nodes):
        g.nodes[v]["tag"] = ("npu" if v < topo.npus else "switch",
                             a.index(v) if v in a else -1)
    h = g.copy()
    for v in range(topo.n_nodes):
        h.nodes[v]["tag"] = ("npu" if v < topo.npus else "switch",
                             b.index(v) if v in b else -1)
    same = nx.algorithms.isomorphism.categorical_node_match("tag", None)
    return nx.is_isomorphic(g, h, node_match=same)


@pytest.mark.parametrize("spec, a, b", [
    ("torus:4x4", (0, 1, 2, 3), (4, 5, 6, 7)), ("torus:4x4", (0, 1), (0, 5)),
    ("torus:4x4", (0, 1, 2, 3), (0, 4, 8, 12)), ("ring:6", (0, 2), (1, 3)),
    ("ring:6", (0, 1, 2), (0, 2, 4)), ("fattree:k=4", (0, 1, 2), (4, 5, 6)),
    ("fattree:k=4", (0, 1), (0, 2)), ("fattree:k=4", (0, 1), (1, 0)),
    ("leafspine:8,oversub=2,hosts_per_leaf=4,bw=100Gbps", (0, 1), (4, 5)),
    ("leafspine:8,oversub=2,hosts_per_leaf=4,bw=100Gbps", (0, 1), (0, 4)),
])
def test_group_maps_are_verified_automorphisms(spec, a, b):
    # Found: a verified automorphism sending a onto b in order (bandwidths kept, NPUs onto
    # NPUs); not found: the brute-force oracle agrees that none exists on these graphs.
    from topologies.symmetry import group_map

    topo = from_spec(spec)
    h = group_map(topo, a, b)
    exists = _induced_isomorphism(topo, list(a), list(b))
    assert (h is not None) == exists
    if h is not None:
        assert h.node[list(a)].tolist() == list(b)
        assert np.array_equal(topo.src[h.link], h.node[topo.src])
        assert np.array_equal(topo.dst[h.link], h.node[topo.dst])
        assert np.array_equal(topo.bandwidth[h.link], topo.bandwidth)
        assert np.all(h.node[:topo.npus] < topo.npus)


def test_a_relabelled_schedule_is_valid_and_takes_the_same_time():
    # The TP groups of two servers of a rail-optimised fabric: the winner's schedule
    # moved by the map validates on the other group and replays in the same time, its
    # link bytes permuted (oracle: the validator and the simulator on both).
    from evaluators.collectives import Collective
    from evaluators.netsim import replay_time
    from evaluators.registry import synthesize
    from evaluators.validate import validate_schedule
    from topologies.symmetry import group_map

    topo = from_spec("railopt:4,gpus=4,bw=100Gbps")
    a, b = (0, 1, 2, 3), (8, 9, 10, 11)
    h = group_map(topo, a, b)
    assert h is not None
    for method in ("ring", "direct", "rhd"):
        sched = synthesize(topo, Collective("allgather", a, 2 ** 24), method=method)
        moved = sched.relabelled(h.node, h.link, Collective("allgather", b, 2 ** 24))
        assert validate_schedule(moved, topo).valid
        for model in ("flow", "congestion"):
            assert replay_time(moved, topo, model=model) == pytest.approx(
                replay_time(sched, topo, model=model), rel=1e-12)
