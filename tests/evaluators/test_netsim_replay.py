"""Schedule replay under the network models, and input validation of the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from codesign.errors import InvalidSpecError
from evaluators.collectives import Collective
from evaluators.netsim import (
    Message, dependency_levels, replay, replay_time, schedule_messages, simulate,
    transfer_dependencies,
)
from evaluators.schedule import REDUCE, Schedule
from topologies.registry import from_spec

B, L = 1e9, 1e-6


def link(t, u, v):
    return t.route(u, v)[0]


def ring_allgather(t, n, size):
    c = Collective.on("allgather", n, size)
    rows = []
    for step in range(1, n):
        for r in range(n):
            chunk = (r - step + 1) % n
            rows.append((chunk, r, (r + 1) % n, (link(t, r, (r + 1) % n),), 0.0, 0.0))
    return Schedule.from_transfers(c, rows, algorithm="ring")


def test_chain_forwarding_and_unrelated_transfer():
    t = from_spec("ring:6,bw=1GB/s,lat=1us")
    c = Collective.on("allgather", 6, 6e6)                # 1 MB chunks
    T = L + 1e6 / B
    rows = [(0, 0, 1, (link(t, 0, 1),), 9, 9),
            (3, 3, 4, (link(t, 3, 4),), 9, 9),            # independent of chunk 0
            (0, 1, 2, (link(t, 1, 2),), 9, 9),
            (0, 2, 3, (link(t, 2, 3),), 9, 9)]
    s = Schedule.from_transfers(c, rows)
    out = replay(s, t, model="congestion")
    assert out.end.tolist() == pytest.approx([T, T, 2 * T, 3 * T], rel=1e-12)
    assert out.start.tolist() == pytest.approx([0, 0, T, 2 * T], rel=1e-12)
    assert out.hop_start.tolist() == pytest.approx([0, 0, T, 2 * T], rel=1e-12)
    assert out.metadata["link_model"] == "exclusive"
    assert out.metadata["network_model"] == "congestion"
    for name in ("chunk", "src", "dst", "path_ptr", "path_links", "op"):
        assert np.array_equal(getattr(out, name), getattr(s, name))
    assert replay_time(s, t) == pytest.approx(3 * T, rel=1e-12)


def test_only_earlier_transfers_are_dependencies():
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    c = Collective.on("allgather", 4, 4e6)
    # index 0 sends chunk 0 from 1 although 1 only receives it at index 1: no dependency
    rows = [(0, 1, 2, (link(t, 1, 2),), 0, 0), (0, 0, 1, (link(t, 0, 1),), 0, 0)]
    out = replay(Schedule.from_transfers(c, rows), t)
    assert out.start.tolist() == [0.0, 0.0]


def test_reduce_waits_for_every_incoming_partial():
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    c = Collective.on("reduce", 4, 1e6)
    T = L + 1e6 / B
    rows = [(0, 0, 1, (link(t, 0, 1),), 0, 0, REDUCE),
            (0, 3, 0, (link(t, 3, 0),), 0, 0, REDUCE),                          # T
            (0, 2, 1, (link(t, 2, 1),), 0, 0, REDUCE),                          # T
            (0, 1, 0, (link(t, 1, 0),), 0, 0, REDUCE)]                          # waits for 0, 2
    s = Schedule.from_transfers(c, rows)
    ptr, idx = transfer_dependencies(s)
    assert [idx[ptr[i]:ptr[i + 1]].tolist() for i in range(4)] == [[], [], [], [0, 2]]
    assert replay(s, t).end.tolist() == pytest.approx([T, T, T, 2 * T], rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 4)),
                min_size=0, max_size=30))
def test_transfer_dependencies_brute_force(rows):
    rows = [(c, s, d) for c, s, d in rows if s != d]
    n = len(rows)
    chunk = np.array([r[0] for r in rows], dtype=np.int64)
    src = np.array([r[1] for r in rows], dtype=np.int64)
    dst = np.array([r[2] for r in rows], dtype=np.int64)

    class Fake:                                            # only what the function reads
        def __len__(self):
            return n

    f = Fake()
    f.chunk, f.src, f.dst = chunk, src, dst
    ptr, idx = transfer_dependencies(f)
    for i in range(n):
        expected = [j for j in range(i) if dst[j] == src[i] and chunk[j] == chunk[i]]
        assert idx[ptr[i]:ptr[i + 1]].tolist() == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 4)),
                min_size=0, max_size=40))
def test_dependency_levels_brute_force(rows):
    """The running-maximum pass equals depth over the listed dependencies (brute force)."""
    rows = [(c, s, d) for c, s, d in rows if s != d]

    class Fake:
        def __len__(self):
            return len(rows)

    f = Fake()
    f.chunk, f.src, f.dst = (np.array([r[k] for r in rows], dtype=np.int64) for k in range(3))
    depth: list[int] = []
    for i, (c, s, _) in enumerate(rows):
        deps = [depth[j] for j in range(i) if rows[j][2] == s and rows[j][0] == c]
        depth.append(1 + max(deps) if deps else 0)
    assert dependency_levels(f).tolist() == depth


def test_dependency_levels_of_a_ring_allgather():
    """Ring all-gather on n nodes: step k's transfers forward what arrived at step k-1."""
    n = 5
    s = ring_allgather(from_spec(f"ring:{n},bw=1GB/s,lat=1us"), n, 5e6)
    assert dependency_levels(s).tolist() == [k for k in range(n - 1) for _ in range(n)]


@pytest.mark.parametrize("model", ["analytical", "congestion", "flow"])
def test_ring_allgather_closed_form_every_model(model):
    n, size = 6, 6e6
    t = from_spec(f"ring:{n},bw=1GB/s,lat=1us")
    s = ring_allgather(t, n, size)
    out = replay(s, t, model=model)
    chunk = size / n
    # every step waits for the previous one; no link carries two chunks at once
    assert out.time_s == pytest.approx((n - 1) * (L + chunk / B), rel=1e-12)
    assert out.metadata["link_model"] == {"analytical": "none", "congestion": "exclusive",
                                          "flow": "shared"}[model]
    assert (out.hop_start is not None) == (model == "congestion")


def test_replay_contention_between_chunks():
    # two chunks from 0 to 2 over the same two links: the second queues behind the first
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    c = Collective.on("allgather", 4, 4e6, chunks_per_npu=2)       # 0.5 MB chunks
    T = L + 0.5e6 / B
    path = t.route(0, 2)
    assert len(path) == 2
    rows = [(0, 0, 2, path, 0, 0), (1, 0, 2, path, 0, 0)]
    out = replay(Schedule.from_transfers(c, rows), t)
    assert out.end.tolist() == pytest.approx([2 * T, 3 * T], rel=1e-12)
    flow = replay(Schedule.from_transfers(c, rows), t, model="flow")
    assert flow.end.tolist() == pytest.approx([1e6 / B + 2 * L] * 2, rel=1e-12)


def test_replay_rejects_broken_schedules():
    t = from_spec("ring:4")
    c = Collective.on("allgather", 4, 4e6)
    with pytest.raises(InvalidSpecError, match="transfer 0 path"):
        replay(Schedule.from_transfers(c, [(0, 0, 1, (), 0, 0)]), t)
    with pytest.raises(InvalidSpecError, match="message 0 path"):
        replay(Schedule.from_transfers(c, [(0, 0, 2, (link(t, 0, 1),), 0, 0)]), t)
    with pytest.raises(InvalidSpecError, match="network model"):
        replay(Schedule.from_transfers(c, [(0, 0, 1, (link(t, 0, 1),), 0, 0)]), t, model="x")


def test_schedule_messages_size_is_chunk_bytes():
    t = from_spec("ring:4")
    s = ring_allgather(t, 4, 8e6)
    batch = schedule_messages(s, t)
    assert batch.size.tolist() == [2e6] * len(s)
    assert batch.n_hops == len(s)


# ------------------------------------------------------------- validation
T4 = from_spec("ring:4")


@pytest.mark.parametrize("msg,pattern", [
    ((0, 4, 1.0), "message 0 dst 4"),
    ((-1, 1, 1.0), "message 0 src -1"),
    ((0, 1, -1.0), "size_bytes"),
    ((0, 1, float("nan")), "size_bytes"),
    ((0, 1, 1.0, -2.0), "ready_s"),
    ((0, 1, "1MB"), "size_bytes"),
    ((True, 1, 1.0), "src"),
    (Message(0, 1, 1.0, deps=(5,)), "message dep 5"),
    (Message(0, 1, 1.0, deps=(0,)), "cannot wait for itself"),
    (Message(0, 1, 1.0, path=(999,)), "link id"),
    (Message(0, 1, 1.0, path=()), "message 0 path"),
    ("0:1:1", "message 0"),
])
def test_bad_messages_raise_one_line_errors(msg, pattern):
    with pytest.raises(InvalidSpecError, match=pattern) as e:
        simulate(T4, [msg])
    assert "\n" not in str(e.value)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 5), st.integers(-2, 5),
                          st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                    st.integers(-5, 10**7)),
                          st.floats(-1, 1)), max_size=5),
       st.sampled_from(["analytical", "congestion", "flow"]))
def test_simulate_accepts_valid_or_raises_invalid_spec(msgs, model):
    try:
        r = simulate(T4, msgs, model=model)
    except InvalidSpecError:
        ok = all(0 <= s < 4 and 0 <= d < 4 and np.isfinite(z) and z >= 0 and 0 <= rd
                 for s, d, z, rd in msgs)
        assert not ok
        return
    for i, (s, d, z, rd) in enumerate(msgs):
        assert r.finish_s[i] >= rd
        assert r.finish_s[i] == rd if s == d else r.finish_s[i] > rd
    assert r.makespan_s == (max(r.finish_s) if msgs else 0.0)
