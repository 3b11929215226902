"""Design points -> topology specs -> (time, cost): hand-checked, no Ray."""

from __future__ import annotations

import pickle

import pytest

from codesign.errors import InfeasibleError, InvalidSpecError
from evaluators.alpha_beta import ring_allreduce_time
from search.evaluate_design import (
    DESIGN_FAMILIES,
    TIME_MODEL,
    DesignPoint,
    evaluate_design,
    topology_spec_for,
)
from search.quickstart import DEFAULT_FAMILIES

GIB = float(2 ** 30)
G100 = 100e9 / 8  # 100 Gbps in bytes/s


def _p(family, servers=16, degree=4, bw=G100, **kw):
    return DesignPoint(family, servers, degree, bw, GIB, **kw)


@pytest.mark.parametrize("point, spec", [
    (_p("torus"), "torus:4x4,bw=100Gbps"),
    (_p("torus", degree=2), "torus:16,bw=100Gbps"),
    (_p("torus", servers=27, degree=6), "torus:3x3x3,bw=100Gbps"),
    (_p("torus", servers=36), "torus:6x6,bw=100Gbps"),        # not 3x12 or 4x9
    (_p("fattree", degree=2), "fattree:k=4,bw=200Gbps"),      # links of d x B
    (_p("fattree", servers=54, degree=1), "fattree:k=6,bw=100Gbps"),
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
    (_p("fattree", servers=20), "k\\^3/4"),
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


def test_complete_evaluation_by_hand():
    from topologies.cost import topology_cost
    from topologies.registry import from_spec

    point = _p("ideal", servers=8, degree=2)
    res = evaluate_design(point)
    assert res.status == "complete" and res.reason == ""
    assert res.topology_spec == "ideal:8,degree=2,bw=100Gbps"
    # One switch, each server on d*B: a ring neighbour is 2 hops of 1us at 2 x 100 Gbps.
    expected = ring_allreduce_time(8, GIB, 2 * G100, 2e-6)
    assert res.allreduce_time_s == pytest.approx(expected, rel=1e-12)
    assert res.iteration_time_s == res.allreduce_time_s
    assert (res.npus, res.switches, res.links, res.diameter) == (8, 1, 16, 2)
    cost = topology_cost(from_spec(res.topology_spec))
    assert res.cost_usd == pytest.approx(cost.total_usd)
    assert sum(res.cost_breakdown.values()) == pytest.approx(res.cost_usd)
    assert res.time_model == TIME_MODEL and res.duration_s >= 0
    assert res.started_at.tzinfo is not None


def test_ring_torus_is_the_closed_form():
    res = evaluate_design(_p("torus", servers=8, degree=2, bw=4 * G100))
    assert res.topology_spec == "torus:8,bw=400Gbps"
    assert res.allreduce_time_s == pytest.approx(ring_allreduce_time(8, GIB, 4 * G100, 1e-6),
                                                 rel=1e-12)


def test_infeasible_design_is_pruned_with_reason():
    res = evaluate_design(_p("torus", degree=5))
    assert res.status == "pruned"
    assert res.reason.startswith("InfeasibleError:") and "even degree" in res.reason
    assert res.iteration_time_s is None and res.cost_usd is None and res.npus is None


@pytest.mark.parametrize("family", DEFAULT_FAMILIES)
def test_every_default_family_evaluates_at_16_servers(family):
    assert family in DESIGN_FAMILIES
    res = evaluate_design(_p(family, degree=4))
    assert res.status == "complete", res.reason
    assert res.npus == 16 and res.cost_usd > 0 and res.iteration_time_s > 0
    # "For any pair of d and B, no network can communicate faster than" the Ideal
    # Switch (TopoOpt Section 5.1); fattree and leafspine get d x B links, and still
    # need at least its two hops.
    ideal = evaluate_design(_p("ideal", degree=4))
    assert res.iteration_time_s >= ideal.iteration_time_s * (1 - 1e-12)


def test_points_pickle_for_ray():
    p = _p("expander", seed=3)
    assert pickle.loads(pickle.dumps(p)) == p
    r = evaluate_design(p)
    assert pickle.loads(pickle.dumps(r)) == r
