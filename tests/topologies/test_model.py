"""Tests of the Topology model: validation, adjacency, routing, summaries."""

import pickle

import networkx as nx
import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from topologies import Topology
from topologies.builder import LinkBuilder
from topologies.registry import from_spec


def _pair_line(n):
    b = LinkBuilder(n)
    b.cable(np.arange(n - 1), np.arange(1, n), 10e9, 1e-6)
    return b.build(name=f"line{n}")


def test_arrays_are_read_only():
    t = _pair_line(3)
    with pytest.raises(ValueError):
        t.bandwidth[0] = 1.0
    with pytest.raises(ValueError):
        t.src[0] = 2


@pytest.mark.parametrize("kwargs, field", [
    (dict(src=[0], dst=[5]), "dst"),
    (dict(src=[0], dst=[0]), "self-loops"),
    (dict(src=[0, 1], dst=[1, 0], bandwidth=[1.0, -1.0]), "bandwidth"),
    (dict(src=[0, 1], dst=[1, 0], latency=[0.0, -1e-6]), "latency"),
])
def test_bad_links_are_rejected(kwargs, field):
    base = dict(bandwidth=1e9, latency=0.0)
    base.update(kwargs)
    with pytest.raises(InvalidSpecError, match=field):
        Topology(2, 0, base["src"], base["dst"], base["bandwidth"], base["latency"])


def test_disconnected_is_rejected_with_node_named():
    with pytest.raises(InvalidSpecError, match="NPU 2 is not connected"):
        Topology(3, 0, [0, 1], [1, 0], 1e9, 0.0)


def test_one_way_link_is_not_connected():
    with pytest.raises(InvalidSpecError, match="not connected"):
        Topology(2, 0, [0], [1], 1e9, 0.0)


def test_csr_adjacency_matches_arrays():
    t = from_spec("torus:3x4")
    for node in range(t.n_nodes):
        out = t.out_links(node)
        assert np.all(t.src[out] == node)
        assert sorted(out.tolist()) == np.flatnonzero(t.src == node).tolist()
        inn = t.in_links(node)
        assert sorted(inn.tolist()) == np.flatnonzero(t.dst == node).tolist()


def test_routes_are_shortest_and_contiguous():
    t = from_spec("mesh:4x3")
    g = nx.DiGraph(zip(t.src.tolist(), t.dst.tolist()))
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    for u in range(t.npus):
        for v in range(t.npus):
            path = t.route(u, v)
            assert len(path) == lengths[u][v]
            node = u
            for link in path:
                assert t.src[link] == node
                node = int(t.dst[link])
            assert node == v


def test_route_prefers_the_faster_parallel_link():
    t = Topology(2, 0, [0, 0, 1], [1, 1, 0], [1e9, 5e9, 1e9], 0.0)
    assert t.route(0, 1) == (1,)


def test_diameter_and_mean_path_length_of_a_line():
    t = _pair_line(4)
    assert t.diameter == 3
    # ordered pairs: distances 1,2,3,1,2,1 each twice -> 20 / 12
    assert t.mean_path_length == pytest.approx(20 / 12)


def test_injection_bandwidth_sums_outgoing_links():
    t = Topology(3, 1, [0, 3, 1, 3, 2, 3, 0], [3, 0, 3, 1, 3, 2, 3], 
                 [1e9, 1e9, 2e9, 2e9, 3e9, 3e9, 4e9], 0.0)
    assert t.injection_bandwidth().tolist() == [5e9, 2e9, 3e9]


@pytest.mark.parametrize("spec, expected", [
    ("ring:8", 2 * 25e9),
    ("ring:7", 2 * 25e9),
    ("uniring:6", 25e9),
    ("fc:6", 9 * 25e9),
    ("switch:8", 4 * 25e9),
    ("switch:7", 3 * 25e9),
    ("hypercube:3", 4 * 25e9),
    ("torus:4x4", 8 * 25e9),
])
def test_exact_bisection_matches_closed_forms(spec, expected):
    topo = from_spec(spec)
    value, method = topo._bisection_exact(), "exact"
    assert value == pytest.approx(expected)
    assert method == "exact"


def test_large_bisection_is_an_upper_bound_of_a_closed_form():
    # 8x8 torus: closed form 2*8 cables; Kernighan-Lin returns a real cut >= that.
    topo = from_spec("torus:8x8")
    value, method = topo.bisection_bandwidth()
    assert method == "closed-form" and value == pytest.approx(16 * 25e9)
    kl = topo._bisection_kl()
    assert kl >= value * (1 - 1e-12)


def test_pickle_round_trip_keeps_everything_and_drops_caches():
    t = from_spec("torus:4x4")
    _ = t.diameter, t.route(0, 5)
    state = t.__getstate__()
    assert "_paths" not in state
    u = pickle.loads(pickle.dumps(t))
    assert u.summary() == t.summary()
    assert u.route(0, 5) == t.route(0, 5)


def test_networkx_view_has_same_counts_and_attributes():
    t = from_spec("switch:4")
    g = t.to_networkx()
    assert g.number_of_nodes() == 5 and g.number_of_edges() == t.n_links
    assert g.nodes[4]["kind"] == "switch"
    assert all(d["bandwidth"] == 25e9 for _, _, d in g.edges(data=True))


def test_dimensions_must_multiply_to_npus():
    from topologies import Dimension

    with pytest.raises(InvalidSpecError, match="product"):
        Topology(2, 0, [0, 1], [1, 0], 1e9, 0.0, dims=[Dimension("ring", 4, 1e9, 0.0)])


def test_a_builder_too_large_names_the_count_that_makes_it_so():
    # Fuzzing: a topology file with npus: 2 and switches: 10^8 was refused as
    # "building the topology with npus=2 needs about 8.94 GiB".
    from codesign.resources import ResourceLimitError, memory_limit_scope
    from topologies.builder import LinkBuilder

    with memory_limit_scope(2 ** 30), pytest.raises(ResourceLimitError,
                                                    match=r"switches=100000000 needs about"):
        LinkBuilder(2, 100_000_000)
    with memory_limit_scope(2 ** 30), pytest.raises(ResourceLimitError,
                                                    match=r"npus=100000000 needs about"):
        LinkBuilder(100_000_000, 2)
