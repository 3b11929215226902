"""Tests of the TACOS-GREEDY synthesizer (``--algorithm tacos``) and switch unwinding.

Oracles: the independent validator, the lower bounds of ``evaluators.bounds``,
closed forms for fully connected networks, unidirectional rings and switches
(hand calculations in the comments), transfer counts (each participant
receives each chunk exactly once) and the congestion replay.
"""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import InfeasibleError, InvalidSpecError
from evaluators.algorithms.unwind import unwind
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.netsim import replay
from evaluators.registry import synthesize
from evaluators.schedule import COPY, REDUCE
from evaluators.validate import validate_schedule
from topologies.builder import LinkBuilder
from topologies.registry import from_spec
from topology_cases import cached_topology


topo = cached_topology



SPECS = ["ring:5", "torus:3x3", "mesh:3x4", "fc:4", "switch:4", "dgx1", "irregular",
         "hier:ring2_fc2_switch2,bw=50GB/s:25GB/s:10GB/s"]
KINDS = ["allgather", "reducescatter", "allreduce", "broadcast", "reduce"]


@pytest.mark.parametrize("chunks", [1, 2])
@pytest.mark.parametrize("spec", SPECS)
def test_valid_and_not_faster_than_bound(spec, chunks):
    t = topo(spec)
    for kind in KINDS:
        coll = Collective.on(kind, t.npus, 6e6, chunks_per_npu=chunks)
        s = synthesize(t, coll, "tacos", seed=3)
        report = validate_schedule(s, t)
        assert report.valid, (kind, report.errors[:3])
        assert s.time_s >= lower_bound(t, coll).time_s * (1 - 1e-9)
        n, m = coll.n, coll.n_chunks
        # Each participant receives each chunk exactly once (in-flight chunks
        # are not requested again): m*(n-1) transfers per all-gather phase.
        expected = {"allgather": m * (n - 1), "reducescatter": m * (n - 1),
                    "allreduce": 2 * m * (n - 1), "broadcast": m * (n - 1),
                    "reduce": m * (n - 1)}[kind]
        assert len(s) == expected
        ops = set(s.op.tolist())
        assert ops == ({REDUCE} if kind in ("reducescatter", "reduce") else
                       {COPY, REDUCE} if kind == "allreduce" else {COPY})


@pytest.mark.parametrize("degree", [1, 2, "max"])
def test_switch_unwinding_validates_on_original_topology(degree):
    t = topo("switch:4")
    for kind in ("allgather", "reducescatter", "allreduce"):
        coll = Collective.on(kind, 4, 8e6)
        s = synthesize(t, coll, "tacos", switch_degree=degree)
        # Re-timed hop by hop under the physical store-and-forward model.
        assert s.link_model == "exclusive" and s.hop_start is not None
        assert all(len(s.path(i)) == 2 for i in range(len(s)))   # NPU -> switch -> NPU
        report = validate_schedule(s, t)
        assert report.valid, report.errors[:3]
        assert s.time_s >= s.metadata["logical_time_s"] * (1 - 1e-12)


def test_degree_max_logical_times_overbook_the_uplink():
    """Why the greedy's degree-max times are only logical: d chunks share an uplink
    at 1/d bandwidth at once, which the exclusive link model does not allow."""
    t = topo("switch:4")
    s = synthesize(t, Collective.on("allgather", 4, 8e6), "tacos", switch_degree="max")
    logical = unwind(t, "max")
    # Logically each NPU sends 3 chunks at once, each at a third of the bandwidth.
    assert s.metadata["logical_time_s"] == pytest.approx(
        2e6 / logical.bandwidth[0] + logical.latency[0], rel=1e-12)
    # Three chunks leave each NPU one after another at full bandwidth, then cross
    # the switch: never faster than 3 uplink slots + 1 downlink slot.
    slot = 2e6 / t.bandwidth[0] + t.latency[0]
    assert s.time_s >= 4 * slot * (1 - 1e-12)
    assert s.metadata["logical_time_s"] < s.time_s


def test_unwind_links():
    t = from_spec("switch:4,bw=12GB/s,lat=1us")
    full = unwind(t, "max")
    assert len(full) == 12 and full.link_model == "shared"
    assert np.allclose(full.bandwidth, 4e9) and np.allclose(full.latency, 2e-6)
    pairs = {(int(a), int(b)) for a, b in zip(full.src, full.dst)}
    assert pairs == {(u, v) for u in range(4) for v in range(4) if u != v}
    for (a, b), p in zip(zip(full.src, full.dst), full.paths):
        assert (t.src[p[0]], t.dst[p[0]], t.src[p[1]], t.dst[p[1]]) == (a, 4, 4, b)
    two = unwind(t, 2)
    assert len(two) == 8 and np.allclose(two.bandwidth, 6e9)
    ring = unwind(t, 1)
    assert ring.link_model == "exclusive" and np.allclose(ring.bandwidth, 12e9)
    assert sorted(zip(ring.src.tolist(), ring.dst.tolist())) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert len(unwind(t, 10)) == 12      # clipped to k-1
    plain = unwind(from_spec("ring:4"), "max")
    assert len(plain) == 8 and plain.link_model == "exclusive"
    assert all(len(p) == 1 for p in plain.paths)


@pytest.mark.parametrize("n", [3, 4, 6])
def test_fc_allgather_equals_bound(n):
    # Every NPU sends its shard to the n-1 others at once: chunk / B.
    t = from_spec(f"fc:{n},bw=2GB/s,lat=0")
    coll = Collective.on("allgather", n, n * 1e6)
    s = synthesize(t, coll, "tacos")
    assert s.time_s == pytest.approx(1e6 / 2e9, rel=1e-12)
    assert s.time_s == pytest.approx(lower_bound(t, coll).time_s, rel=1e-9)
    assert s.hop_start is not None and np.array_equal(s.hop_start, s.start)


@pytest.mark.parametrize("n", [3, 5, 8])
def test_uniring_allgather_closed_form(n):
    # n-1 steps of one chunk per link: (n-1) (a + chunk/B).
    t = from_spec(f"uniring:{n},bw=1GB/s,lat=0")
    coll = Collective.on("allgather", n, n * 1e6)
    s = synthesize(t, coll, "tacos", seed=11)
    assert s.time_s == pytest.approx((n - 1) * 1e-3, rel=1e-12)
    assert s.time_s == pytest.approx(lower_bound(t, coll).time_s, rel=1e-9)
    tl = from_spec(f"uniring:{n},bw=1GB/s,lat=2us")
    assert synthesize(tl, coll, "tacos").time_s == pytest.approx((n - 1) * (1e-3 + 2e-6))


@pytest.mark.parametrize("degree", [1, "max"])
def test_switch_allgather_closed_form(degree):
    # Logical (the greedy's unwound links): d = k-1: every NPU sends to k-1 peers
    # at B/(k-1): (k-1) chunk/B + 2a; d = 1: ring through the switch:
    # (k-1) (chunk/B + 2a).  Physical (store-and-forward at the switch), d = 1:
    # every ring step is two hops, (k-1) 2 (chunk/B + a).
    k, chunk = 4, 1e6
    t = from_spec(f"switch:{k},bw=1GB/s,lat=1us")
    s = synthesize(t, Collective.on("allgather", k, k * chunk), "tacos", switch_degree=degree)
    logical = (k - 1) * chunk / 1e9 + (2e-6 if degree == "max" else (k - 1) * 2e-6)
    assert s.metadata["logical_time_s"] == pytest.approx(logical, rel=1e-12)
    if degree == 1:
        assert s.time_s == pytest.approx((k - 1) * 2 * (chunk / 1e9 + 1e-6), rel=1e-12)


def test_heterogeneous_prefers_earliest_delivery():
    # Two parallel cables 0<->1 at 1 and 4 GB/s: the chunk takes the fast one.
    b = LinkBuilder(2, 0)
    b.cable(0, 1, 1e9, 0.0)
    b.cable(0, 1, 4e9, 0.0)
    t = b.build(name="parallel")
    for seed in range(5):
        s = synthesize(t, Collective.on("allgather", 2, 8e6), "tacos", seed=seed)
        assert s.time_s == pytest.approx(4e6 / 4e9)
        assert all(t.bandwidth[s.path(i)[0]] == 4e9 for i in range(len(s)))


def test_reducescatter_is_time_reversed_allgather():
    # On a unidirectional ring the transposed network is the reverse ring: the
    # same closed form, and each reduce runs against the ring's direction of
    # the all-gather it mirrors.
    t = from_spec("uniring:5,bw=1GB/s,lat=0")
    rs = synthesize(t, Collective.on("reducescatter", 5, 5e6), "tacos")
    assert rs.time_s == pytest.approx(4e-3)
    assert validate_schedule(rs, t).valid
    ar = synthesize(t, Collective.on("allreduce", 5, 5e6), "tacos")
    assert ar.time_s == pytest.approx(8e-3)
    assert validate_schedule(ar, t).valid


def test_same_seed_same_schedule():
    t = topo("torus:3x3")
    coll = Collective.on("allreduce", 9, 9e6, chunks_per_npu=2)
    a = synthesize(t, coll, "tacos", seed=5)
    b = synthesize(t, coll, "tacos", seed=5)
    for name in ("chunk", "src", "dst", "path_ptr", "path_links", "start", "end", "op"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.metadata["seed"] == 5 and a.algorithm == "tacos"


@pytest.mark.parametrize("spec", ["uniring:4", "uniring:7", "fc:4", "fc:6"])
def test_congestion_replay_same_time(spec):
    # One chunk per NPU on a unidirectional ring (each link's source has exactly
    # one chunk its successor lacks at every step) and on a fully connected
    # network (one step): the congestion simulator (FIFO links, transfers in
    # start order) reproduces the synthesized time and every transfer's times.
    t = topo(spec)
    s = synthesize(t, Collective.on("allgather", t.npus, 4e6), "tacos", seed=1)
    r = replay(s, t)
    assert r.time_s == pytest.approx(s.time_s, rel=1e-9)
    assert np.allclose(r.start, s.start, rtol=0, atol=1e-12)


@pytest.mark.parametrize("spec", ["ring:5", "torus:3x3", "mesh:3x4", "dgx1", "irregular"])
def test_congestion_replay_valid(spec):
    # Elsewhere the simulator's FIFO queues may serve a link's ready chunks in
    # another order than the greedy's random one, so the replayed time can
    # differ (either way); it stays a valid schedule no faster than the bound.
    t = topo(spec)
    coll = Collective.on("allgather", t.npus, 4e6)
    r = replay(synthesize(t, coll, "tacos", seed=1), t)
    assert validate_schedule(r, t).valid
    assert r.time_s >= lower_bound(t, coll).time_s * (1 - 1e-9)


def test_bad_options_and_topologies():
    t = topo("ring:4")
    coll = Collective.on("allgather", 4, 4e6)
    for bad in (0, -1, "two", 1.5, True):
        with pytest.raises(InvalidSpecError, match="switch_degree"):
            synthesize(t, coll, "tacos", switch_degree=bad)
    with pytest.raises(InvalidSpecError, match="seed"):
        synthesize(t, coll, "tacos", seed="x")
    with pytest.raises(InvalidSpecError, match="replacement"):
        synthesize(t, coll, "tacos", replacement="sometimes")
    # Two switches cabled together: not a one-level switch network.
    b = LinkBuilder(4, 2)
    b.cable([0, 1, 2, 3], [4, 4, 5, 5], 10e9, 1e-6)
    b.cable(4, 5, 10e9, 1e-6)
    with pytest.raises(InvalidSpecError, match="switch"):
        synthesize(b.build(name="two-switch"), coll, "tacos")
    # Participants 0 and 2 of a ring:4 only meet through non-participants.
    with pytest.raises(InfeasibleError):
        synthesize(t, Collective("allgather", (0, 2), 2e6), "tacos")


@pytest.mark.parametrize("spec", ["mesh:3x3", "mesh:5x5", "mesh:4x4x4"])
def test_mesh_allgather_meets_corner_ingress_bound(spec):
    """A corner NPU has d incoming links and needs N-1 chunks: T >= (N-1)/d chunk
    times (the ingress bound, tight when d divides N-1); the greedy's best of 4
    seeds reaches it exactly."""
    t = from_spec(spec + ",bw=1GB/s,lat=0")
    coll = Collective.on("allgather", t.npus, t.npus * 1e6)
    d = len(t.dims)
    corner = (t.npus - 1) / d * 1e-3
    bound = lower_bound(t, coll)
    assert bound.time_s == pytest.approx(corner, rel=1e-12)
    assert bound.components["ingress"] == pytest.approx(corner, rel=1e-12)
    s = synthesize(t, coll, "tacos", instances=4)
    assert s.time_s == pytest.approx(corner, rel=1e-9)


def test_negative_seed_is_refused_naming_the_field():
    # Fuzzing: seed=-1 reached numpy's default_rng (ValueError traceback in the CLI).
    with pytest.raises(InvalidSpecError, match=r"invalid seed -1: expected an integer >= 0"):
        synthesize(from_spec("ring:8"), Collective.on("allreduce", 8, 2 ** 20), "tacos",
                   seed=-1)


@pytest.mark.parametrize("spec, instances, match", [
    ("ring:8", 100_000, r"invalid instances 100000: expected an integer in \[1, 1024\]"),
    ("ring:8", 10 ** 9, r"invalid instances 1000000000: expected an integer in \[1, 1024\]"),
    ("torus:8x8x8", 100, r"100 tacos instances .* plans 2.62e\+07 entries"),
])
def test_instances_beyond_the_work_bound_are_refused_at_once(spec, instances, match):
    # Fuzzing: instances=100000 ran for minutes and 1e9 ran out of memory after 25 s.
    import time

    t0 = time.perf_counter()
    with pytest.raises(InvalidSpecError, match=match):
        synthesize(from_spec(spec), Collective.on("allgather", from_spec(spec).npus, 2 ** 20),
                   "tacos", instances=instances)
    assert time.perf_counter() - t0 < 0.5
