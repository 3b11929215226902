"""Design points -> topology specs: hand-checked, no Ray."""

from __future__ import annotations

import pickle

import pytest

from codesign.errors import InfeasibleError, InvalidSpecError
from search.design_point import DESIGN_FAMILIES, DesignPoint, topology_spec_for
from search.sweeps.quickstart import DEFAULT_FAMILIES

G100 = 100e9 / 8  # 100 Gbps in bytes/s


def _p(family, servers=16, degree=4, bw=G100, **kw):
    return DesignPoint(family, servers, degree, bw, **kw)


@pytest.mark.parametrize("point, spec", [
    (_p("torus"), "torus:4x4,bw=100Gbps"),
    (_p("torus", degree=2), "torus:16,bw=100Gbps"),
    (_p("torus", servers=27, degree=6), "torus:3x3x3,bw=100Gbps"),
    (_p("torus", servers=36), "torus:6x6,bw=100Gbps"),        # not 3x12 or 4x9
    (_p("fattree", degree=2), "fattree:k=4,bw=200Gbps"),      # links of d x B
    (_p("fattree", servers=54, degree=1), "fattree:k=6,bw=100Gbps"),
    # not k^3/4: the smallest k-ary fat-tree that holds them, partially populated
    (_p("fattree", servers=20), "fattree:servers=20,radix=6,bw=400Gbps"),
    (_p("fattree", servers=2048, degree=8), "fattree:servers=2048,radix=22,bw=800Gbps"),
    (_p("leafspine", degree=2), "leafspine:16,oversub=2,hosts_per_leaf=8,bw=200Gbps"),
    (_p("leafspine", servers=12, degree=1, oversub=3.0),
     "leafspine:12,oversub=3,hosts_per_leaf=6,bw=100Gbps"),
    (_p("ideal", degree=3), "ideal:16,degree=3,bw=100Gbps"),
    (_p("expander", seed=5), "expander:16,degree=4,seed=5,bw=100Gbps"),
    (_p("perms", degree=2), "perms:16,p=1:3,bw=100Gbps"),     # targets 1, 4 -> 1, 3
    (_p("perms", servers=12, degree=4), "perms:12,p=1:5:7:11,bw=100Gbps"),
    (_p("ideal", bw=1e9 + 1), "ideal:16,degree=4,bw=1000000001.0"),
])
def test_specs_by_hand(point, spec):
    assert topology_spec_for(point) == spec


@pytest.mark.parametrize("point, match", [
    (_p("torus", degree=3), "even degree"),
    (_p("torus", degree=6), "3-dimensional torus"),
    (_p("perms", servers=12, degree=5), "only 4 ring permutations"),
    (_p("leafspine", servers=7, oversub=2.0), "leafspine of 7"),
])
def test_impossible_designs_are_infeasible(point, match):
    with pytest.raises(InfeasibleError, match=match):
        topology_spec_for(point)


@pytest.mark.parametrize("point", [
    _p("dragonfly"), _p("torus", servers=1), _p("torus", degree=0), _p("torus", bw=-1.0),
    _p("torus", degree=True),
])
def test_bad_points_are_invalid(point):
    with pytest.raises(InvalidSpecError):
        topology_spec_for(point)


@pytest.mark.parametrize("family", DEFAULT_FAMILIES)
def test_every_default_family_builds_at_16_servers_with_degree_d(family):
    from topologies.registry import from_spec

    assert family in DESIGN_FAMILIES
    topo = from_spec(topology_spec_for(_p(family, degree=4)))
    assert topo.npus == 16


def test_points_pickle_for_ray():
    p = _p("expander", seed=3)
    assert pickle.loads(pickle.dumps(p)) == p


@pytest.mark.parametrize("servers", [8, 20, 100, 256])
def test_a_partly_populated_fattree_keeps_full_bisection(servers):
    # The closed form of a full-bisection fabric: half the servers' injection; at k^3/4
    # servers the partly populated spec is the k-ary fat-tree itself.
    from topologies.registry import from_spec

    t = from_spec(topology_spec_for(_p("fattree", servers=servers)))
    assert t.npus == servers
    assert t.params["bisection_Bps"] == pytest.approx(servers * 4 * G100 / 2)
    full, part = from_spec("fattree:k=8"), from_spec("fattree:servers=128,radix=8")
    assert (full.switches, full.n_links) == (part.switches, part.n_links)
