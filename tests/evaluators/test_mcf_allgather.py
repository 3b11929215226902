"""Fluid LP 4.2 for allgather against the exact cut bound and hand values."""

import numpy as np
import pytest

from codesign.errors import InfeasibleError
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topology_cases import cached_topology

SIZE = 1e9


def bandwidth_bound(topology, collective):
    """The largest bandwidth component of evaluators.bounds (the cut bound family)."""
    b = lower_bound(topology, collective)
    assert b.exact
    return max(v for k, v in b.components.items() if k != "latency")


# Topologies on which the cut bound is tight for allgather (brief H).
TIGHT = ["ring:4", "ring:5", "ring:6", "ring:7", "ring:8", "uniring:5", "torus:3x3",
         "torus:4x4", "hypercube:3", "hypercube:4", "switch:4", "switch:8", "fc:5", "dgx1",
         "dgx-a100:2"]


@pytest.mark.parametrize("spec", TIGHT)
def test_allgather_equals_cut_bound(spec):
    topo = cached_topology(spec)
    coll = Collective.on("allgather", topo.npus, SIZE)
    r = fluid_optimum(topo, coll, secondary=False)
    assert r.optimal
    assert r.time_s == pytest.approx(bandwidth_bound(topo, coll), rel=1e-6)
    assert r.steps_certified
    # No path needs more steps than the diameter on these networks.
    assert r.steps == topo.diameter


@pytest.mark.parametrize("n", [4, 5, 6])
def test_ring_closed_form_and_secondary_cost(n):
    # Bidirectional ring, b per direction: every NPU takes in (n-1) M/n over
    # 2b, so R = (n-1) M / (2 n b); every byte crosses an NPU link, and each
    # NPU must receive (n-1) shards: secondary cost (n-1) M, no less.
    topo = cached_topology(f"ring:{n}")
    b = float(topo.bandwidth[0])
    r = fluid_optimum(topo, Collective.on("allgather", n, SIZE))
    assert r.time_s == pytest.approx((n - 1) * SIZE / (2 * n * b), rel=1e-9)
    assert r.secondary_cost_bytes == pytest.approx((n - 1) * SIZE, rel=1e-6)


def test_steps_too_small_is_infeasible_and_more_steps_do_not_help():
    topo = cached_topology("ring:6")          # diameter 3
    coll = Collective.on("allgather", 6, SIZE)
    with pytest.raises(InfeasibleError, match="at least 3 steps"):
        fluid_optimum(topo, coll, steps=2)
    times = [fluid_optimum(topo, coll, steps=T, secondary=False).time_s for T in (3, 4, 5)]
    assert times == pytest.approx([times[0]] * 3, rel=1e-9)


def test_uniring_needs_n_minus_1_steps():
    # On a unidirectional ring a shard must travel n-1 hops: T = n-1 and
    # R = (n-1) M / (n b) (every link carries n-1 shards).
    topo = cached_topology("uniring:5")
    b = float(topo.bandwidth[0])
    r = fluid_optimum(topo, Collective.on("allgather", 5, SIZE))
    assert r.steps == 4
    assert r.time_s == pytest.approx(4 * SIZE / (5 * b), rel=1e-9)


def test_flows_are_consistent_with_time_and_capacity():
    # Independent check of the returned flows: every commodity delivers one
    # shard, usage covers every flow, and no link carries more than b * time.
    topo = cached_topology("torus:3x3")
    coll = Collective.on("allgather", topo.npus, SIZE)
    r = fluid_optimum(topo, coll)
    shard = SIZE / topo.npus
    per_link = np.zeros(topo.n_links)
    cost = 0.0
    for fl in r.flows:
        net = fl.network
        f = fl.flow_bytes.toarray()
        for k, d in enumerate(fl.destinations):
            out_src = f[k, net.tail == net.source].sum() - f[k, net.head == net.source].sum()
            into_sink = f[k, net.head == net.sinks[k]].sum()
            assert out_src == pytest.approx(shard, rel=1e-6)
            assert into_sink == pytest.approx(shard, rel=1e-6)
        assert np.all(fl.usage_bytes >= f.max(axis=0) - 1e-6 * shard)
        on = net.link >= 0
        np.add.at(per_link, net.link[on], fl.usage_bytes[on])
        cost += fl.usage_bytes[on].sum()
    assert np.all(per_link <= topo.bandwidth * r.time_s * (1 + 1e-6))
    assert cost == pytest.approx(r.secondary_cost_bytes, rel=1e-6)
