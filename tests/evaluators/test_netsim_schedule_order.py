"""The ``congestion`` model's fixed link order (``order="schedule"``).

Hand-built schedules where FIFO-by-readiness and the schedule's own per-link
order give different times (times worked out by hand in the comments), an
independent fixed-point oracle on random message sets, and the requirement of
the issue: every TACOS schedule replays under ``order="schedule"`` to the time
TACOS synthesized.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from codesign.errors import InvalidSpecError
from evaluators.algorithms.unwind import unwind
from evaluators.collectives import Collective
from evaluators.netsim import (
    Messages, replay, replay_time, schedule_hop_order, simulate, transfer_dependencies,
)
from evaluators.bounds import lower_bound
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule
from evaluators.schedule import Schedule
from topologies.builder import LinkBuilder
from topologies.registry import from_spec

MS = 1e-3      # 1 MB over 1 GB/s with zero latency: one hop takes 1 ms


def lk(t, u, v):
    return int(t.links_between(u, v)[0])


# ------------------------------------------------------------ hand-built cases
def test_schedule_order_is_faster_than_fifo_when_fifo_serves_the_wrong_chunk_first():
    # 4 -> 1 and 0 -> 1 both deliver at 1 ms; link 1 -> 2 then has chunks a (index 2)
    # and b (index 3) ready.  The schedule sends b first (it continues to 3).
    b = LinkBuilder(5)
    b.cable([0, 4, 1, 2], [1, 1, 2, 3], 1e9, 0.0)
    t = b.build(name="tee")
    c = Collective.on("allgather", 5, 5e6)             # 1 MB chunks; a = 4, b = 0
    rows = [(4, 4, 1, (lk(t, 4, 1),), 0 * MS, 1 * MS),
            (0, 0, 1, (lk(t, 0, 1),), 0 * MS, 1 * MS),
            (4, 1, 2, (lk(t, 1, 2),), 2 * MS, 3 * MS),
            (0, 1, 2, (lk(t, 1, 2),), 1 * MS, 2 * MS),
            (0, 2, 3, (lk(t, 2, 3),), 2 * MS, 3 * MS)]
    s = Schedule.from_transfers(c, rows)
    # FIFO: tie at 1 ms broken by index -> a [1, 2], b [2, 3], b onwards [3, 4].
    fifo = replay(s, t)
    assert fifo.end.tolist() == pytest.approx([1 * MS, 1 * MS, 2 * MS, 3 * MS, 4 * MS], rel=1e-12)
    # Schedule order: b [1, 2], a [2, 3], b onwards [2, 3]: the synthesized times.
    kept = replay(s, t, order="schedule")
    assert kept.start.tolist() == pytest.approx(s.start.tolist(), rel=1e-12, abs=1e-15)
    assert kept.end.tolist() == pytest.approx(s.end.tolist(), rel=1e-12)
    assert replay_time(s, t, order="schedule") == pytest.approx(3 * MS, rel=1e-12)
    assert replay_time(s, t, order="fifo") == pytest.approx(4 * MS, rel=1e-12)


def test_schedule_order_can_be_slower_than_fifo():
    # Line 0 - 1 - 2.  Chunk a (held by 1) is scheduled on 1 -> 2 after chunk b, which
    # first has to come from 0: the link idles during [0, 1] ms although a is ready.
    t = from_spec("mesh:3,bw=1GB/s,lat=0")
    c = Collective.on("allgather", 3, 3e6)
    rows = [(1, 1, 2, (lk(t, 1, 2),), 2 * MS, 3 * MS),   # a, listed first
            (0, 0, 1, (lk(t, 0, 1),), 0 * MS, 1 * MS),
            (0, 1, 2, (lk(t, 1, 2),), 1 * MS, 2 * MS)]
    s = Schedule.from_transfers(c, rows)
    assert replay(s, t).end.tolist() == pytest.approx([1 * MS, 1 * MS, 2 * MS], rel=1e-12)
    assert replay(s, t, order="schedule").end.tolist() == \
        pytest.approx([3 * MS, 1 * MS, 2 * MS], rel=1e-12)


def test_multi_hop_keys_come_from_hop_start():
    # P = 0 -> 2 over (0->1, 1->2), Q = 1 -> 2.  With hop_start (0, 2 ms) the schedule
    # puts Q on 1 -> 2 first (it starts at 1 ms); without hop_start both hops of P are
    # keyed by P's start (0) and P goes first.
    t = from_spec("mesh:3,bw=1GB/s,lat=0")
    c = Collective.on("allgather", 3, 3e6)
    rows = [(0, 0, 2, (lk(t, 0, 1), lk(t, 1, 2)), 0 * MS, 3 * MS),
            (1, 1, 2, (lk(t, 1, 2),), 1 * MS, 2 * MS)]
    plain = Schedule.from_transfers(c, rows)
    timed = plain.retimed(plain.start, plain.end, [0 * MS, 2 * MS, 1 * MS])
    assert schedule_hop_order(plain).tolist() == [0.0, 1.0, 2.0]
    assert schedule_hop_order(timed).tolist() == [0.0, 2.0, 1.0]
    # Q keyed first: Q [0, 1] (its data is at 1 from the start), P hop 2 [1, 2].
    out = replay(timed, t, order="schedule")
    assert out.hop_start.tolist() == pytest.approx([0, 1 * MS, 0], abs=1e-15)
    assert out.end.tolist() == pytest.approx([2 * MS, 1 * MS], rel=1e-12)
    # P keyed first on 1 -> 2: P hop 2 [1, 2], then Q [2, 3].
    out = replay(plain, t, order="schedule")
    assert out.end.tolist() == pytest.approx([2 * MS, 3 * MS], rel=1e-12)
    # FIFO does not look at keys: Q is ready at 0 and goes first.
    assert replay(plain, t).end.tolist() == pytest.approx([2 * MS, 1 * MS], rel=1e-12)


def test_ties_on_start_are_broken_by_end_then_index():
    c = Collective.on("allgather", 2, 2e6)
    s = Schedule.from_transfers(c, [(0, 0, 1, (0,), 1.0, 3.0), (1, 0, 1, (0,), 1.0, 2.0),
                                    (0, 0, 1, (0,), 1.0, 2.0), (1, 0, 1, (0,), 0.5, 9.0)])
    assert schedule_hop_order(s).tolist() == [3.0, 1.0, 2.0, 0.0]


def test_messages_in_schedule_order_are_keyed_by_ready_time():
    # m0 = 0 -> 2 (via 1), ready 0; m1 = 1 -> 2, ready 0.5 ms.
    t = from_spec("mesh:3,bw=1GB/s,lat=0")
    msgs = [(0, 2, 1e6, 0.0), (1, 2, 1e6, 0.5 * MS)]
    # FIFO: m1 reaches 1 -> 2 at 0.5 ms, before m0 (1 ms): m1 [0.5, 1.5], m0 [1.5, 2.5].
    assert simulate(t, msgs).finish_s.tolist() == pytest.approx([2.5 * MS, 1.5 * MS], rel=1e-12)
    # Schedule order keyed by ready time: m0 first on 1 -> 2 [1, 2], then m1 [2, 3].
    r = simulate(t, msgs, order="schedule")
    assert r.finish_s.tolist() == pytest.approx([2 * MS, 3 * MS], rel=1e-12)
    assert r.start_s.tolist() == pytest.approx([0, 2 * MS], abs=1e-15)
    # Explicit per-hop keys: m1 first again (same as FIFO here).
    r = simulate(t, msgs, order=[5.0, 5.0, 1.0])
    assert r.finish_s.tolist() == pytest.approx([2.5 * MS, 1.5 * MS], rel=1e-12)
    assert r.link_busy_s.sum() == pytest.approx(3 * MS, rel=1e-12)


def test_contradictory_order_is_an_error():
    # Chunk 0 goes 0 -> 1 -> 0 -> 1; the last send is queued on 0 -> 1 before the first.
    t = from_spec("mesh:2,bw=1GB/s,lat=0")
    c = Collective.on("allgather", 2, 2e6)
    rows = [(0, 0, 1, (lk(t, 0, 1),), 2.0, 3.0), (0, 1, 0, (lk(t, 1, 0),), 3.0, 4.0),
            (0, 0, 1, (lk(t, 0, 1),), 0.0, 1.0)]
    s = Schedule.from_transfers(c, rows)
    assert replay_time(s, t) == pytest.approx(3 * MS, rel=1e-12)     # FIFO is fine
    with pytest.raises(InvalidSpecError, match="congestion order"):
        replay(s, t, order="schedule")


def test_dependency_cycle_is_still_reported_as_a_cycle():
    t = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="cycle"):
        simulate(t, [(0, 1, 1e6, 0.0, None, [1]), (1, 2, 1e6, 0.0, None, [0])],
                 order="schedule")


@pytest.mark.parametrize("bad", ["lifo", [1.0, 2.0], [np.nan], 3, None])
def test_bad_order_values_are_rejected(bad):
    t = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="order"):
        simulate(t, [(0, 1, 1e6)], order=bad)


def test_order_is_a_congestion_option_only():
    t = from_spec("ring:4")
    c = Collective.on("allgather", 4, 4e6)
    s = synthesize(t, c, "ring")
    for model in ("flow", "analytical"):
        with pytest.raises(InvalidSpecError, match="option for network model"):
            replay(s, t, model=model, order="schedule")


def test_fifo_default_is_unchanged():
    t = from_spec("mesh:3x4")
    c = Collective.on("reducescatter", 12, 12e6)
    s = synthesize(t, c, "tacos")
    assert replay_time(s, t) == replay_time(s, t, order="fifo")
    assert np.array_equal(replay(s, t).end, replay(s, t, model="congestion", order="fifo").end)


# ------------------------------------------------------ fixed-point oracle
def fixed_point(topology, batch: Messages, keys) -> np.ndarray:
    """Hop start times by Jacobi iteration of start = max(data ready, link predecessor end).

    Independent of the model's topological sweep: every hop is recomputed from the
    previous iterate until nothing changes (times only grow, from 0).
    """
    hop_msg = batch.hop_msg
    svc = topology.latency[batch.path_links] + batch.size[hop_msg] / topology.bandwidth[
        batch.path_links]
    n_hops = batch.n_hops
    pred = np.full(n_hops, -1)
    for link in np.unique(batch.path_links):
        hops = sorted(np.flatnonzero(batch.path_links == link), key=lambda h: (keys[h], h))
        for a, b in zip(hops, hops[1:]):
            pred[b] = a
    start = np.zeros(n_hops)
    finish = np.zeros(len(batch))
    for _ in range(n_hops + len(batch) + 2):
        end = start + svc
        deps = [batch.dep_idx[batch.dep_ptr[i]:batch.dep_ptr[i + 1]] for i in range(len(batch))]
        ready = np.array([max([batch.ready[i]] + [finish[d] for d in deps[i]])
                          for i in range(len(batch))])
        new_finish = np.array([end[batch.path_ptr[i + 1] - 1]
                               if batch.path_ptr[i + 1] > batch.path_ptr[i] else ready[i]
                               for i in range(len(batch))])
        new = np.zeros(n_hops)
        for h in range(n_hops):
            i = hop_msg[h]
            data = ready[i] if h == batch.path_ptr[i] else end[h - 1]
            new[h] = max(data, end[pred[h]] if pred[h] >= 0 else 0.0)
        if np.array_equal(new, start) and np.array_equal(new_finish, finish):
            return start
        start, finish = new, new_finish
    raise AssertionError("no fixed point")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["ring:5,lat=1us", "mesh:2x3,lat=0.5us",
                                                    "torus:3x3,bw=10GB/s:40GB/s"]))
def test_ordered_model_matches_fixed_point_oracle(seed, spec):
    rng = np.random.default_rng(seed)
    t = from_spec(spec)
    n = int(rng.integers(1, 12))
    rank = rng.permutation(n)          # a random linear extension of the dependencies
    msgs = []
    for i in range(n):
        u, v = (int(x) for x in rng.choice(t.npus, 2, replace=bool(rng.random() < 0.1)))
        earlier = [j for j in range(n) if rank[j] < rank[i]]
        deps = [int(j) for j in rng.choice(earlier, min(len(earlier), int(rng.integers(0, 3))),
                                           replace=False)] if earlier else []
        msgs.append((u, v, float(rng.integers(1, 4)) * 1e5, float(rng.integers(0, 3)) * 1e-6,
                     None, deps))
    batch = Messages.from_list(t, msgs)
    hop_msg = batch.hop_msg
    hop_pos = np.arange(batch.n_hops) - batch.path_ptr[hop_msg]
    keys = rank[hop_msg] * 100.0 + hop_pos          # consistent with the dependencies
    r = simulate(t, batch, order=keys)
    expected = fixed_point(t, batch, keys)
    assert r.hop_start.tolist() == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-18)
    # Every link serves its hops in key order, one at a time.
    svc = t.latency[batch.path_links] + batch.size[hop_msg] / t.bandwidth[batch.path_links]
    for link in np.unique(batch.path_links):
        hops = np.flatnonzero(batch.path_links == link)
        hops = hops[np.lexsort((hops, keys[hops]))]
        s = r.hop_start[hops]
        assert np.all(s[1:] >= s[:-1] + svc[hops[:-1]] - 1e-15)


# ------------------------------------------- TACOS schedules replay exactly
DIRECT_CASES = [
    ("ring:5", None), ("ring:6,bw=50GB/s", None), ("fc:4", None), ("fc:5", None),
    ("mesh:3x4", None), ("mesh:2x3,lat=0.5us", None), ("torus:3x4", None), ("torus:2x4", None),
    ("hypercube:3", None),
    ("mesh:3x3,bw=50GB/s:100GB/s", None),                 # heterogeneous per dimension
    ("mesh:2x5,bw=100GB/s:25GB/s,lat=1us:3us", None),
    ("dgx1", None),
    # 4x4 mesh with failed NPUs 7 and 9 (TACOS Fig. 22(a)): they do not participate,
    # and TACOS never relays through non-participants.
    ("mesh:4x4,bw=100GB/s", tuple(p for p in range(16) if p not in (7, 9))),
]
KINDS = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce")


def _collective(topology, kind, chunks, members):
    members = tuple(range(topology.npus)) if members is None else members
    return Collective.on(kind, members, len(members) * 1e6, chunks_per_npu=chunks)


def _direct_params():
    return [pytest.param(spec, members, kind, chunks, id=f"{spec}-{kind}-{chunks}")
            for spec, members in DIRECT_CASES for kind in KINDS for chunks in (1, 2)]


_TOPOLOGIES: dict = {}


def topo(spec):
    if spec not in _TOPOLOGIES:
        _TOPOLOGIES[spec] = from_spec(spec)
    return _TOPOLOGIES[spec]


@pytest.mark.parametrize("spec, members, kind, chunks", _direct_params())
def test_tacos_schedule_replays_to_its_time(spec, members, kind, chunks):
    t = topo(spec)
    s = synthesize(t, _collective(t, kind, chunks, members), "tacos")
    assert s.link_model == "exclusive"
    out = replay(s, t, order="schedule")
    # Never later than synthesized, transfer by transfer (TACOS's times are feasible;
    # reversed schedules have slack before the last reduction).
    assert np.all(out.end <= s.end * (1 + 1e-9))
    assert out.time_s == pytest.approx(s.time_s, rel=1e-9)


@pytest.mark.parametrize("spec, members", DIRECT_CASES)
@pytest.mark.parametrize("chunks", [1, 2])
def test_allreduce_has_no_barrier(spec, members, chunks):
    """TACOS's greedy joins reduce-scatter and all-gather with a barrier; the
    reported schedule is re-timed so each chunk's all-gather starts once it is
    reduced: never later than the greedy's own (barrier) estimate."""
    t = topo(spec)
    s = synthesize(t, _collective(t, "allreduce", chunks, members), "tacos")
    assert s.time_s <= s.metadata["logical_time_s"] * (1 + 1e-9)
    assert float(s.end[s.op == 1].max()) < s.time_s
    validate_schedule(s, t, s.collective)


# Switches, unwound with degree 1 (one exclusive route per logical link) or max.
SWITCH_CASES = ["switch:4", "switch:5,lat=0.5us",
                "hier:ring2_fc4_switch2,bw=200GB/s:100GB/s:50GB/s"]


@pytest.mark.parametrize("spec", SWITCH_CASES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("degree", [1, "max"])
def test_tacos_switch_schedule_replays_to_its_time(spec, kind, degree):
    """Through switches the greedy's logical link (one alpha-beta cost per route)
    is re-timed store-and-forward, hop by hop: the congestion replay agrees and
    the time is never below the logical estimate's physical floor (the bound)."""
    t = topo(spec)
    s = synthesize(t, _collective(t, kind, 1, None), "tacos", switch_degree=degree)
    assert s.link_model == "exclusive" and s.hop_start is not None
    assert replay_time(s, t, order="schedule") == pytest.approx(s.time_s, rel=1e-9)
    validate_schedule(s, t, s.collective)
    assert s.time_s >= lower_bound(t, s.collective).time_s * (1 - 1e-9)


def test_cli_simulate_passes_the_order_option(tmp_path, capsys):
    import json

    from codesign.app.cli import main
    from evaluators.schedule_io import save_schedule

    t = topo("mesh:3x4")
    s = synthesize(t, Collective.on("reducescatter", 12, 12e6), "tacos")
    path = tmp_path / "rs.json"
    save_schedule(s, path)
    times = {}
    for order in ("fifo", "schedule"):
        assert main(["simulate", "mesh:3x4", "--schedule", str(path), "--model", "congestion",
                     "--option", f"order={order}", "--json"]) == 0
        times[order] = json.loads(capsys.readouterr().out)["makespan_s"]
    assert times["schedule"] == pytest.approx(s.time_s, rel=1e-9)
    assert times["fifo"] == pytest.approx(replay_time(s, t), rel=1e-12)
    assert main(["simulate", "mesh:3x4", "--schedule", str(path), "--option", "order=lifo"]) == 2
    assert "order" in capsys.readouterr().err
