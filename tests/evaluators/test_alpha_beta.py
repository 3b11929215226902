"""Alpha-beta ring times: closed forms by hand, and the topology estimate on hand-built cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from evaluators.alpha_beta import (
    ring_allgather_time,
    ring_allreduce_estimate,
    ring_allreduce_time,
    ring_neighbour_profile,
    ring_reducescatter_time,
)
from topologies.model import Topology
from topologies.registry import from_spec

GIB = float(2 ** 30)


# ------------------------------------------------------------------ closed forms
def test_allreduce_by_hand():
    # 4 NPUs, 4 GB, 1 GB/s, 0.5 s: 2*3 steps of (0.5 s + 1 GB / 1 GB/s) = 9 s.
    assert ring_allreduce_time(4, 4e9, 1e9, 0.5) == pytest.approx(9.0, rel=1e-15)
    # 8 NPUs, 1 GiB, 100 Gbps (12.5e9 B/s), 1 us.
    expected = 14 * (1e-6 + GIB / 8 / 12.5e9)
    assert ring_allreduce_time(8, GIB, 12.5e9, 1e-6) == pytest.approx(expected, rel=1e-15)


def test_allgather_and_reducescatter_by_hand():
    assert ring_allgather_time(4, 4e9, 1e9, 0.5) == pytest.approx(4.5, rel=1e-15)
    assert ring_reducescatter_time(5, 10.0, 2.0, 0.0) == pytest.approx(4 * 1.0, rel=1e-15)


def test_single_npu_takes_no_time():
    assert ring_allreduce_time(1, GIB, 1e9, 1e-6) == 0.0
    assert ring_allgather_time(1, GIB, 1e9, 1e-6) == 0.0
    assert ring_allreduce_estimate(Topology(1, 0, [], [], 1e9, 0.0), GIB) == 0.0


@given(n=st.integers(1, 4096), size=st.just(0.0) | st.floats(1.0, 1e13), bw=st.floats(1e3, 1e13),
       lat=st.floats(0, 1e-2))
def test_allreduce_is_reducescatter_plus_allgather(n, size, bw, lat):
    ar = ring_allreduce_time(n, size, bw, lat)
    assert ar == pytest.approx(ring_reducescatter_time(n, size, bw, lat)
                               + ring_allgather_time(n, size, bw, lat), rel=1e-12)
    # Busbw of a ring all-reduce with no latency is exactly the link bandwidth (nccl-tests).
    if n > 1 and size > 0 and lat == 0:
        assert size / ring_allreduce_time(n, size, bw, 0.0) * 2 * (n - 1) / n == pytest.approx(
            bw, rel=1e-12)


@pytest.mark.parametrize("args", [
    (0, 1.0, 1.0, 0.0), (True, 1.0, 1.0, 0.0), (2.0, 1.0, 1.0, 0.0), (4, -1.0, 1.0, 0.0),
    (4, 1.0, 0.0, 0.0), (4, 1.0, -5.0, 0.0), (4, 1.0, 1.0, -1e-6), (4, math.nan, 1.0, 0.0),
    (4, 1.0, math.inf, 0.0),
])
def test_bad_arguments_raise_one_line_invalid_spec(args):
    for fn in (ring_allreduce_time, ring_allgather_time, ring_reducescatter_time):
        with pytest.raises(InvalidSpecError) as info:
            fn(*args)
        assert "\n" not in str(info.value)


# ---------------------------------------------------------------- the estimate
@pytest.mark.parametrize("n", [2, 3, 8])
def test_estimate_on_a_ring_is_the_closed_form(n):
    topo = from_spec(f"ring:{n},bw=50GB/s,lat=2us")
    assert ring_allreduce_estimate(topo, GIB) == pytest.approx(
        ring_allreduce_time(n, GIB, 50e9, 2e-6), rel=1e-12)


def test_estimate_on_a_switch_counts_two_hops_of_latency():
    topo = from_spec("switch:8,bw=25GB/s,lat=1us")
    assert ring_allreduce_estimate(topo, GIB) == pytest.approx(
        ring_allreduce_time(8, GIB, 25e9, 2e-6), rel=1e-12)


def test_parallel_links_are_pooled():
    # Two NPUs joined by 1 GB/s + 2 GB/s links each way: one 3 GB/s pipe.
    topo = Topology(2, 0, [0, 0, 1, 1], [1, 1, 0, 0], [1e9, 2e9, 1e9, 2e9], 1e-6)
    lat, bw = ring_neighbour_profile(topo)
    np.testing.assert_allclose(bw, [3e9, 3e9])
    np.testing.assert_allclose(lat, [1e-6, 1e-6])  # route uses the fastest of the parallel links
    assert ring_allreduce_estimate(topo, 6e9) == pytest.approx(2 * (1e-6 + 3e9 / 3e9))


def _dumbbell(trunk_bw: float, bw: float = 4e9, lat: float = 1e-6) -> Topology:
    # NPUs 0, 1 on switch 4; NPUs 2, 3 on switch 5; one cable 4 <-> 5.
    cables = [(0, 4, bw), (1, 4, bw), (2, 5, bw), (3, 5, bw), (4, 5, trunk_bw)]
    src = [u for u, v, _ in cables] + [v for u, v, _ in cables]
    dst = [v for u, v, _ in cables] + [u for u, v, _ in cables]
    b = [c for *_, c in cables] * 2
    return Topology(4, 2, src, dst, b, lat)


def test_dumbbell_id_order_by_hand():
    # Ring 0->1->2->3->0: 0->1 and 2->3 cross 2 links, 1->2 and 3->0 cross the trunk
    # (3 links), each trunk direction carrying one route.
    topo = _dumbbell(trunk_bw=1e9)
    lat, bw = ring_neighbour_profile(topo)
    np.testing.assert_allclose(lat, [2e-6, 3e-6, 2e-6, 3e-6])
    np.testing.assert_allclose(bw, [4e9, 1e9, 4e9, 1e9])
    size = 8e9
    step = max(2e-6 + size / 4 / 4e9, 3e-6 + size / 4 / 1e9)
    assert ring_allreduce_estimate(topo, size) == pytest.approx(6 * step, rel=1e-12)


def test_dumbbell_shared_trunk_halves_the_bandwidth():
    # Ring order 0,2,1,3: every neighbour crosses the trunk; each direction carries two
    # routes (0->2 and 1->3 go 4->5; 2->1 and 3->0 go 5->4): 4 GB/s / 2 each.
    topo = _dumbbell(trunk_bw=4e9)
    lat, bw = ring_neighbour_profile(topo, order=[0, 2, 1, 3])
    np.testing.assert_allclose(bw, [2e9] * 4)
    np.testing.assert_allclose(lat, [3e-6] * 4)
    assert ring_allreduce_estimate(topo, 8e9, order=[0, 2, 1, 3]) == pytest.approx(
        6 * (3e-6 + 8e9 / 4 / 2e9), rel=1e-12)


def test_torus_wraparound_neighbour_shares_a_link():
    # torus:4x4 in id order: 3->4 goes (3,0)->(0,0)->(0,1) or similar, 2 hops, and shares
    # its first or second link with another neighbour route: half bandwidth, 2 latencies.
    topo = from_spec("torus:4x4,bw=10GB/s,lat=1us")
    lat, bw = ring_neighbour_profile(topo)
    assert sorted(set(np.round(lat * 1e6).astype(int))) == [1, 2]
    assert bw.min() == pytest.approx(5e9) and bw.max() == pytest.approx(10e9)
    assert ring_allreduce_estimate(topo, GIB) == pytest.approx(
        30 * (2e-6 + GIB / 16 / 5e9), rel=1e-12)


@pytest.mark.parametrize("spec", ["hypercube:3", "torus:3x3", "mesh:2x3", "fc:5", "uniring:5",
                                  "hier:ring4_fc2_switch2"])
def test_estimate_is_bounded_by_injection_and_fastest_ring(spec):
    topo = from_spec(spec)
    lat, bw = ring_neighbour_profile(topo)
    assert np.all(bw <= topo.injection_bandwidth() * (1 + 1e-12))
    n, size = topo.npus, GIB
    lower = 2 * (n - 1) * (topo.latency.min() + size / (n * topo.injection_bandwidth().max()))
    assert ring_allreduce_estimate(topo, size) >= lower * (1 - 1e-12)


@pytest.mark.parametrize("order", [[0, 1, 2], [0, 1, 2, 2], [0, 1, 2, 4], [[0, 1], [2, 3]]])
def test_bad_ring_order_raises(order):
    with pytest.raises(InvalidSpecError):
        ring_allreduce_estimate(from_spec("ring:4"), GIB, order=order)


@pytest.mark.parametrize("size", [-1.0, math.nan, math.inf])
def test_bad_size_raises(size):
    with pytest.raises(InvalidSpecError):
        ring_allreduce_estimate(from_spec("ring:4"), size)
