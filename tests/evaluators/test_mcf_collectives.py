"""Reversal (reducescatter, reduce, gather), allreduce joint LP, all-to-all LP 3.16."""

import numpy as np
import pytest

from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topologies.builder import LinkBuilder
from topology_cases import cached_topology

M = 1e9


def bandwidth_bound(topology, collective):
    b = lower_bound(topology, collective)
    return max(v for k, v in b.components.items() if k != "latency")


def skewed(reverse=False):
    """A strongly connected directed network with unequal, one-way links."""
    src = [0, 1, 2, 3, 4, 0, 3, 4, 2, 1]
    dst = [1, 2, 3, 4, 0, 2, 1, 2, 0, 4]
    bw = [10e9, 9e9, 8e9, 7e9, 6e9, 5e9, 7e9, 3e9, 4e9, 2e9]
    lb = LinkBuilder(5)
    lb.links(dst if reverse else src, src if reverse else dst, bw, 0.0)
    return lb.build(name="skewed-rev" if reverse else "skewed")


@pytest.mark.parametrize("pair", [("reducescatter", "allgather"), ("reduce", "broadcast"),
                                  ("gather", "scatter")])
def test_reduction_is_the_reversed_copy_collective(pair):
    red, cp = pair
    topo, rev = skewed(), skewed(reverse=True)
    for root in (0, 3):
        kw = {"root": root} if red != "reducescatter" else {}
        a = fluid_optimum(topo, Collective(red, tuple(range(5)), M, **kw))
        b = fluid_optimum(rev, Collective(cp, tuple(range(5)), M, **kw))
        assert a.optimal and b.optimal
        assert a.time_s == pytest.approx(b.time_s, rel=1e-6)
        assert a.secondary_cost_bytes == pytest.approx(b.secondary_cost_bytes, rel=1e-6)
        if red == "reducescatter":
            break


def test_reduction_at_least_its_cut_bound_on_the_skewed_network():
    topo = skewed()
    for kind in ("allgather", "reducescatter", "broadcast", "reduce", "scatter", "gather"):
        coll = Collective.on(kind, 5, M)
        assert fluid_optimum(topo, coll).time_s >= bandwidth_bound(topo, coll) * (1 - 1e-9)


@pytest.mark.parametrize("spec", ["ring:4", "uniring:5", "switch:4", "dgx1", "irregular"])
def test_allreduce_joint_between_bound_and_rs_plus_ag(spec):
    topo = cached_topology(spec)
    n = topo.npus
    joint = fluid_optimum(topo, Collective.on("allreduce", n, M))
    equal = fluid_optimum(topo, Collective.on("allreduce", n, M), shares="equal")
    rs = fluid_optimum(topo, Collective.on("reducescatter", n, M)).time_s
    ag = fluid_optimum(topo, Collective.on("allgather", n, M)).time_s
    bound = bandwidth_bound(topo, Collective.on("allreduce", n, M))
    assert joint.optimal and equal.optimal
    assert bound * (1 - 1e-6) <= joint.time_s <= equal.time_s * (1 + 1e-6)
    assert equal.time_s <= (rs + ag) * (1 + 1e-6)
    assert sum(joint.shares.values()) == pytest.approx(1.0, abs=1e-6)
    assert all(v == pytest.approx(1 / n, abs=1e-9) for v in equal.shares.values())


def test_allreduce_joint_beats_rs_plus_ag_on_irregular():
    # The two triangles joined by a slow cable: sharing the bandwidth of the
    # phases (and choosing the shares) beats running them back to back.
    topo = cached_topology("irregular")
    joint = fluid_optimum(topo, Collective.on("allreduce", 6, M)).time_s
    rs = fluid_optimum(topo, Collective.on("reducescatter", 6, M)).time_s
    ag = fluid_optimum(topo, Collective.on("allgather", 6, M)).time_s
    assert joint < 0.9 * (rs + ag)


def test_allreduce_ring_closed_form():
    # Bidirectional ring: 2 (n-1) M / (2 n b) -- RS + AG, each at its ingress bound.
    topo = cached_topology("ring:5")
    b = float(topo.bandwidth[0])
    r = fluid_optimum(topo, Collective.on("allreduce", 5, M))
    assert r.time_s == pytest.approx(2 * 4 * M / (2 * 5 * b), rel=1e-6)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_alltoall_fully_connected_hand_value(n):
    # Every ordered pair has its own link: M/n bytes over b.
    topo = cached_topology(f"fc:{n}")
    b = float(topo.bandwidth[0])
    r = fluid_optimum(topo, Collective.on("alltoall", n, M))
    assert r.time_s == pytest.approx(M / n / b, rel=1e-6)
    # Each block crosses exactly one NPU link.
    assert r.secondary_cost_bytes == pytest.approx((n - 1) * M, rel=1e-6)


def test_alltoall_ring4_hand_value():
    # Neighbours 1 hop, the opposite NPU 2 hops either way: per NPU 4 block-hops
    # of M/4, 16 in all over 8 directed links -> 2 blocks per link: 2 (M/4) / b.
    topo = cached_topology("ring:4")
    b = float(topo.bandwidth[0])
    r = fluid_optimum(topo, Collective.on("alltoall", 4, M))
    assert r.time_s == pytest.approx(2 * (M / 4) / b, rel=1e-6)
    assert r.secondary_cost_bytes == pytest.approx(16 * M / 4, rel=1e-6)


@pytest.mark.parametrize("spec", ["ring:5", "torus:3x3", "switch:4", "irregular", "dgx1"])
def test_alltoall_at_least_cut_bound(spec):
    topo = cached_topology(spec)
    coll = Collective.on("alltoall", topo.npus, M)
    r = fluid_optimum(topo, coll)
    assert r.optimal
    assert r.time_s >= bandwidth_bound(topo, coll) * (1 - 1e-9)


def test_alltoall_flows_have_no_copies():
    topo = cached_topology("irregular")
    r = fluid_optimum(topo, Collective.on("alltoall", 6, M))
    per_link = np.zeros(topo.n_links)
    for fl in r.flows:
        f = fl.flow_bytes.toarray()
        assert np.allclose(fl.usage_bytes, f.sum(axis=0))
        on = fl.network.link >= 0
        np.add.at(per_link, fl.network.link[on], fl.usage_bytes[on])
    assert np.all(per_link <= topo.bandwidth * r.time_s * (1 + 1e-6))
    # At the optimum some link is saturated (else R could shrink).
    assert (per_link / (topo.bandwidth * r.time_s)).max() == pytest.approx(1.0, rel=1e-6)
