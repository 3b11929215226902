"""Dantzig-Wolfe and Mirrored Dantzig-Wolfe (thesis Sec. 5.1, 5.2) against the whole LP.

Oracles: the cut bound (tight for allgather on these topologies, see
test_mcf_allgather.py), the whole LP 4.2 / 3.16 solved directly, brute-force
orbits from networkx's enumeration of all automorphisms, and an independent
feasibility check of the returned flows (demand delivered, link capacity).
"""

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topologies.symmetry import npu_classes
from topology_cases import cached_topology

SIZE = 1e9
TIGHT = ["ring:4", "ring:5", "ring:6", "ring:7", "ring:8", "uniring:5", "torus:3x3",
         "torus:4x4", "hypercube:3", "hypercube:4", "switch:4", "switch:8", "fc:5", "dgx1",
         "dgx-a100:2"]
SLOW_DW = {"torus:4x4", "hypercube:4"}


def cut_bound(topo, coll):
    b = lower_bound(topo, coll)
    return max(v for k, v in b.components.items() if k != "latency")


def _params():
    for spec in TIGHT:
        for d in ("dw", "mirrored"):
            marks = [pytest.mark.slow] if (d == "dw" and spec in SLOW_DW) else []
            yield pytest.param(spec, d, marks=marks, id=f"{spec}-{d}")


@pytest.mark.parametrize("spec, decomposition", list(_params()))
def test_allgather_decomposition_equals_cut_bound(spec, decomposition):
    topo = cached_topology(spec)
    coll = Collective.on("allgather", topo.npus, SIZE)
    r = fluid_optimum(topo, coll, secondary=False, decomposition=decomposition)
    assert r.optimal and r.decomposition == decomposition
    assert r.time_s == pytest.approx(cut_bound(topo, coll), rel=1e-6)
    st = r.decomposition_stats
    # The Lagrangian bound certifies the master's value.
    assert st["converged"] and st["r_gap"] <= 1e-6
    assert st["lower_bound_s"] <= r.time_s * (1 + 1e-9)
    assert st["lower_bound_s"] >= r.time_s * (1 - 1e-6)
    if decomposition == "mirrored":
        assert st["units"] == st["classes"] <= topo.npus
    else:
        assert st["units"] == topo.npus


@pytest.mark.parametrize("kind, spec", [
    ("alltoall", "torus:3x3"), ("alltoall", "dgx-a100:2"), ("reducescatter", "torus:3x3"),
    ("allreduce", "ring:4"), ("allreduce", "switch:4"), ("broadcast", "torus:3x3"),
    ("reduce", "mesh:2x3"), ("allgather", "mesh:2x3"), ("allgather", "irregular"),
])
def test_kinds_match_whole_lp_with_secondary_cost(kind, spec):
    topo = cached_topology(spec)
    coll = Collective.on(kind, topo.npus, SIZE)
    whole = fluid_optimum(topo, coll)
    for d in ("dw", "mirrored"):
        r = fluid_optimum(topo, coll, decomposition=d)
        assert r.optimal
        assert r.time_s == pytest.approx(whole.time_s, rel=1e-6)
        assert r.secondary_cost_bytes == pytest.approx(whole.secondary_cost_bytes, rel=1e-6)
        assert r.dual_gap <= 1e-6


def test_mirrored_flows_are_feasible_for_every_origin():
    # Independent check of the assembled solution: every member block (built
    # by mapping the representative's columns) delivers its shard, usage covers
    # flows, and the links stay within bandwidth x time.
    topo = cached_topology("torus:3x3")
    coll = Collective.on("allgather", topo.npus, SIZE)
    r = fluid_optimum(topo, coll, decomposition="mirrored")
    assert r.decomposition_stats["classes"] == 1
    shard = SIZE / topo.npus
    per_link = np.zeros(topo.n_links)
    for fl in r.flows:
        net = fl.network
        f = fl.flow_bytes.toarray()
        for k in range(len(fl.destinations)):
            into = f[k, net.head == net.sinks[k]].sum() - f[k, net.tail == net.sinks[k]].sum()
            out = f[k, net.tail == net.source].sum() - f[k, net.head == net.source].sum()
            assert into == pytest.approx(shard, rel=1e-6)
            assert out == pytest.approx(shard, rel=1e-6)
        assert np.all(fl.usage_bytes >= f.max(axis=0) - 1e-6 * shard)
        on = net.link >= 0
        np.add.at(per_link, net.link[on], fl.usage_bytes[on])
    assert np.all(per_link <= topo.bandwidth * r.time_s * (1 + 1e-6))
    # Symmetric solution: every origin sends the same bytes in total.
    sent = [fl.usage_bytes[fl.network.link >= 0].sum() for fl in r.flows]
    assert np.allclose(sent, sent[0], rtol=1e-6)


def test_mirrored_with_switch_refinement():
    # LP 3.13 needs switch splits on a fat-tree; mirrored splits them in every
    # block of a class and still reaches the optimum of the exact model.
    topo = cached_topology("fattree:k=4")
    coll = Collective.on("allgather", topo.npus, SIZE)
    r13 = fluid_optimum(topo, coll, switch_model="3.13", decomposition="mirrored",
                        secondary=False)
    r14 = fluid_optimum(topo, coll, switch_model="3.14", secondary=False)
    assert r13.optimal and r13.refinement_rounds >= 1 and r13.switch_copies > 0
    assert r13.time_s == pytest.approx(r14.time_s, rel=1e-6)


def test_costs_break_symmetry():
    # A cost on one link makes its end points distinguishable.
    topo = cached_topology("ring:4")
    labels = [(True,)] * 4
    cost = np.zeros(topo.n_links)
    cost[0] = 1.0
    sc = npu_classes(topo, [0, 1, 2, 3], link_cost=cost, labels=labels)
    assert sc.n_classes > 1
    r = fluid_optimum(topo, Collective.on("allgather", 4, SIZE), link_costs=cost,
                      decomposition="mirrored")
    whole = fluid_optimum(topo, Collective.on("allgather", 4, SIZE), link_costs=cost)
    assert r.time_s == pytest.approx(whole.time_s, rel=1e-9)
    assert r.secondary_cost_bytes == pytest.approx(whole.secondary_cost_bytes, rel=1e-6)


@pytest.mark.parametrize("value", ["magic", "", "DW", 3, None])
def test_bad_decomposition_rejected(value):
    with pytest.raises(InvalidSpecError, match="decomposition"):
        fluid_optimum(cached_topology("ring:4"), Collective.on("allgather", 4, SIZE),
                      decomposition=value)


def test_synth_schedule_from_mirrored_is_valid():
    from evaluators.mcf.discretize import synthesize_mcf
    from evaluators.validate import validate_schedule

    topo = cached_topology("ring:6")
    coll = Collective.on("allgather", 6, 6e6)
    s = synthesize_mcf(topo, coll, decomposition="mirrored")
    assert validate_schedule(s, topo, s.collective).valid
    assert s.metadata["fluid_time_s"] == pytest.approx(
        fluid_optimum(topo, coll, secondary=False).time_s, rel=1e-9)


def test_memory_node_link_group_and_participant_subset():
    # Roles and bandwidth sets are part of the symmetry (thesis Sec. 5.2's
    # conditions): a memory switch with a joint bandwidth limit, and a subset
    # of a ring whose reflection pairs NPUs 0 and 2 (classes {0, 2}, {1}).
    t = cached_topology("switch:4")
    c = Collective.on("allgather", 4, SIZE)
    kw = dict(memory_nodes=(4,), link_groups=[(list(range(t.n_links)), 3e10)])
    whole = fluid_optimum(t, c, **kw)
    r = fluid_optimum(t, c, decomposition="mirrored", **kw)
    assert r.optimal and r.time_s == pytest.approx(whole.time_s, rel=1e-6)
    assert r.secondary_cost_bytes == pytest.approx(whole.secondary_cost_bytes, rel=1e-6)
    ring = cached_topology("ring:5")
    sub = Collective("allgather", (0, 1, 2), SIZE)
    whole = fluid_optimum(ring, sub)
    r = fluid_optimum(ring, sub, decomposition="mirrored")
    assert r.decomposition_stats["classes"] == 2
    assert r.time_s == pytest.approx(whole.time_s, rel=1e-6)
    assert r.secondary_cost_bytes == pytest.approx(whole.secondary_cost_bytes, rel=1e-6)
