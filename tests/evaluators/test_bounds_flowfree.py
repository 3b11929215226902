"""Flow-free cut bounds for very large graphs (issue 18: bounded time).

Above ``CUT_FLOW_MAX_SIZE`` nodes + links ``lower_bound`` runs no max-flow; its
cut components then come from single-node and candidate sets.  Oracle: on
small networks, forcing the flow-free path must give a bound that is still a
lower bound of the exact one (never above it), and a min-cut capacity that is
never below the exact minimum cut.
"""

from __future__ import annotations

import pytest

import evaluators.bounds as bounds
from evaluators.bounds import lower_bound
from evaluators.collectives import KINDS, Collective
from evaluators.cuts import CutNetwork, min_pair_cuts
from topologies.registry import from_spec

SPECS = ["ring:8", "torus:3x4", "switch:6", "fattree:k=4", "mesh:3x3,bw=10GB/s:40GB/s",
         "dgx1", "expander:12,degree=3"]


@pytest.mark.parametrize("spec", SPECS)
def test_single_node_pair_cut_is_never_below_the_minimum_cut(spec):
    topo = from_spec(spec)
    net = CutNetwork.from_topology(topo)
    pairs = [(a, b) for a in range(topo.npus) for b in range(topo.npus) if a != b]
    exact = min_pair_cuts(net, pairs)
    free = min_pair_cuts(net, pairs, max_flows=0)
    assert free.flows == 0 and not free.exact
    assert free.weight >= exact.weight
    assert net.cut_weight(free.mask) == free.weight  # a real cut of the graph


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("kind", KINDS)
def test_flow_free_bound_is_a_weaker_valid_bound(monkeypatch, spec, kind):
    topo = from_spec(spec)
    coll = Collective.on(kind, topo.npus, 1e9)
    exact = lower_bound(topo, coll)
    monkeypatch.setattr(bounds, "CUT_FLOW_MAX_SIZE", 0)
    free = lower_bound(topo, coll)
    assert free.time_s <= exact.time_s * (1 + 1e-12)
    for key in ("ingress", "egress", "latency"):  # flow-free components are unchanged
        if key in exact.components:
            assert free.components[key] == pytest.approx(exact.components[key])


@pytest.mark.parametrize("spec", SPECS)
def test_latency_from_a_subset_of_sources_stays_below_the_exact_one(monkeypatch, spec):
    topo = from_spec(spec)
    coll = Collective.on("allgather", topo.npus, 1e9)
    exact = lower_bound(topo, coll).components["latency"]
    monkeypatch.setattr(bounds, "LATENCY_ROW_WORK", 1)  # one search only
    one = lower_bound(topo, coll).components["latency"]
    assert 0 < one <= exact * (1 + 1e-12)
