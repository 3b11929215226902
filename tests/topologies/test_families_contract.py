"""Contract test: every registered topology family's example spec (docs/architecture.md section 8).

Registering a family is enough to be covered here.  Each check uses an
oracle independent of the model's own bookkeeping (networkx BFS, Python sums,
pickling round trip).
"""

import json
import pickle

import networkx as nx
import numpy as np
import pytest

from topologies.registry import FAMILIES, family_names, from_spec

family_names()  # import every built-in family before parametrising
EXAMPLES = sorted((name, fam.example) for name, fam in FAMILIES.items())

_cache = {}


def _build(spec):
    if spec not in _cache:
        _cache[spec] = from_spec(spec)
    return _cache[spec]


@pytest.fixture(params=EXAMPLES, ids=[name for name, _ in EXAMPLES])
def topo(request):
    return _build(request.param[1])


def test_example_builds_and_is_strongly_connected(topo):
    g = nx.DiGraph(zip(topo.src.tolist(), topo.dst.tolist()))
    g.add_nodes_from(range(topo.n_nodes))
    assert nx.is_strongly_connected(g)
    assert topo.npus >= 2


def test_npu_ids_come_first_and_switches_only_route(topo):
    g = topo.to_networkx()
    kinds = nx.get_node_attributes(g, "kind")
    assert [n for n, k in kinds.items() if k == "npu"] == list(range(topo.npus))
    assert [n for n, k in kinds.items() if k == "switch"] == list(range(topo.npus, topo.n_nodes))
    # Every switch is used (in and out), every NPU injects.
    out_deg = np.bincount(topo.src, minlength=topo.n_nodes)
    in_deg = np.bincount(topo.dst, minlength=topo.n_nodes)
    assert np.all(out_deg > 0) and np.all(in_deg > 0)
    for key, arr in topo.node_attrs.items():
        assert arr.shape[0] == topo.npus, key


def test_summary_matches_independent_computation(topo):
    s = topo.summary()
    json.dumps(s)  # JSON-ready for the CLI
    json.dumps(dict(topo.params))  # params go into records and the cost model
    assert (s["npus"], s["switches"], s["links"]) == (topo.npus, topo.switches, topo.n_links)
    out = [0.0] * topo.npus
    for u, b in zip(topo.src.tolist(), topo.bandwidth.tolist()):
        if u < topo.npus:
            out[u] += b
    assert s["injection_Bps"] == pytest.approx(min(out))
    assert s["injection_max_Bps"] == pytest.approx(max(out))
    g = nx.DiGraph(zip(topo.src.tolist(), topo.dst.tolist()))
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    npu_pairs = [lengths[u][v] for u in range(topo.npus) for v in range(topo.npus) if u != v]
    assert s["diameter"] == max(npu_pairs)
    assert s["mean_path_length"] == pytest.approx(np.mean(npu_pairs), abs=1e-6)
    assert s["bisection_method"] in ("exact", "closed-form", "upper-bound")
    assert 0 < s["bisection_Bps"] <= topo.bandwidth.sum() / 2
    if s["bisection_method"] != "upper-bound":
        # The exact value is at most the cut of any particular balanced split.
        half = np.zeros(topo.n_nodes, dtype=bool)
        half[: topo.npus // 2] = True
        cuts = []
        for switches_left in (True, False):
            side = half.copy()
            side[topo.npus:] = switches_left
            cuts.append(topo.bandwidth[side[topo.src] & ~side[topo.dst]].sum())
        assert s["bisection_Bps"] <= min(cuts) * (1 + 1e-12)


def test_pickles_with_everything(topo):
    clone = pickle.loads(pickle.dumps(topo))
    for key in ("src", "dst", "bandwidth", "latency"):
        np.testing.assert_array_equal(getattr(clone, key), getattr(topo, key))
    assert (clone.name, clone.family, clone.dims) == (topo.name, topo.family, topo.dims)
    assert dict(clone.params) == dict(topo.params)
    assert clone.node_attrs.keys() == topo.node_attrs.keys()
    assert clone.diameter == topo.diameter
    assert clone.route(0, topo.npus - 1) == topo.route(0, topo.npus - 1)


def test_to_networkx_has_the_same_counts(topo):
    g = topo.to_networkx()
    assert g.number_of_nodes() == topo.n_nodes
    assert g.number_of_edges() == topo.n_links
    total = sum(d["bandwidth"] for _, _, d in g.edges(data=True))
    assert total == pytest.approx(float(topo.bandwidth.sum()))
