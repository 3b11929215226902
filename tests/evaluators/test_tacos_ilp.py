"""Tests of TACOS-ILP (``evaluators.algorithms.tacos_ilp``).

Oracles: closed forms (a unidirectional ring all-gather takes ``n - 1`` steps,
a fully connected one 1 step, a switch unwound at degree max ``n - 1`` steps
of ``1/(n-1)`` bandwidth), the lower bounds of ``evaluators.bounds`` (where
they are tight, hand-checked in the comments), TACOS-GREEDY over 10 seeds
(the ILP optimum can only be faster), the independent validator, and an
exhaustive search over TEN schedules written here from scratch
(:func:`brute_force_steps`) on tiny instances.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from evaluators.algorithms.tacos import holders_need, greedy_match
from evaluators.algorithms import tacos_ilp
from evaluators.algorithms.tacos_ilp import discretise, ilp_solve, tacos_exact
from evaluators.algorithms.unwind import LogicalLinks, unwind
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.registry import synthesize
from evaluators.schedule import COPY, REDUCE
from evaluators.validate import validate_schedule
from topologies.builder import LinkBuilder
from topologies.registry import from_spec

GB = 1e9


# ------------------------------------------------------------ brute force
def brute_force_steps(n_nodes, links, holders, need, max_steps):
    """Fewest TEN steps, by exhaustive search over every choice of (chunk or
    idle) per free link per step.  ``links`` is a list of ``(src, dst, k)``
    (``k`` steps per transfer); ``holders``/``need`` a set of chunks per node.
    Same rules as the ILP: only a node that needs a chunk receives it, once;
    a transfer can start only when its source holds the chunk."""
    need = tuple(frozenset(s) for s in need)

    def feasible(T):
        @lru_cache(maxsize=None)
        def go(t, hold, flight):
            hold, flight = list(hold), list(flight)
            for i, f in enumerate(flight):        # arrivals at step t
                if f is not None and f[1] == t:
                    d = links[i][1]
                    hold[d] = hold[d] | {f[0]}
                    flight[i] = None
            if all(need[v] <= hold[v] for v in range(n_nodes)) and flight == [None] * len(links):
                return True
            if t >= T:
                return False
            coming = [{f[0] for i, f in enumerate(flight) if f and links[i][1] == v}
                      for v in range(n_nodes)]
            options = []
            for i, (s, d, k) in enumerate(links):
                if flight[i] is not None or t + k > T:
                    options.append([None])
                else:
                    options.append([None] + sorted((hold[s] & need[d]) - hold[d] - coming[d]))
            for choice in product(*options):
                picked = [(links[i][1], c) for i, c in enumerate(choice) if c is not None]
                if len(set(picked)) < len(picked):      # one node gets a chunk once
                    continue
                nxt = tuple(flight[i] if c is None else (c, t + links[i][2])
                            for i, c in enumerate(choice))
                if go(t + 1, tuple(hold), nxt):
                    return True
            return False
        return go(0, tuple(frozenset(h) for h in holders), (None,) * len(links))

    return next((T for T in range(max_steps + 1) if feasible(T)), None)


def _logical(edges, ks):
    """Logical links with duration ``k`` seconds for 1-byte chunks (bandwidth 1 B/s)."""
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    return LogicalLinks(src, dst, np.ones(len(edges)), np.asarray(ks, float) - 1.0,
                        [(i,) for i in range(len(edges))], "exclusive")


def _sets(matrix):
    return [set(np.flatnonzero(row).tolist()) for row in matrix]


# Two 4-node directed graphs (durations k seconds) where a 2-chunk broadcast
# from node 0 takes 7 (8) steps, found by a random search in which the best of
# 10 greedy seeds needed 8 (9): the greedy sends the first chunk on the slow
# 1->3 link, the optimum relays it through 2 and keeps 1->3 for the second.
TRAP_A = ([(0, 1), (1, 0), (1, 2), (1, 3), (2, 3), (3, 1), (3, 2)], [2, 3, 2, 3, 2, 1, 3], 7)
TRAP_B = ([(0, 2), (1, 3), (2, 0), (2, 1), (2, 3), (3, 1), (3, 2)], [3, 1, 2, 1, 3, 3, 2], 8)


def _random_instance(seed):
    """A connected directed graph, links of 1-2 steps, and an all-gather on 3
    nodes (1 chunk each) or a 2-chunk broadcast from node 0 on 3-4 nodes (the
    exhaustive search grows fast)."""
    rng = np.random.default_rng(seed)
    n = 3 if seed % 2 else int(rng.integers(3, 5))
    perm = rng.permutation(n)
    edges = {(int(a), int(b)) for a, b in zip(perm, perm[1:])}
    edges |= {(b, a) for a, b in edges}
    for _ in range(int(rng.integers(0, 3))):
        a, b = rng.choice(n, 2, replace=False)
        edges.add((int(a), int(b)))
    edges = sorted(edges)
    ks = rng.integers(1, 3, len(edges)).tolist()
    if seed % 2:
        holders, need = np.eye(n, dtype=bool), np.ones((n, n), bool)
    else:
        holders = np.zeros((n, 2), bool)
        holders[0] = True
        need = np.ones((n, 2), bool)
    return n, edges, ks, holders, need


@pytest.mark.parametrize("case", ["trap_a", "trap_b"] + [f"random{s}" for s in range(8)])
def test_ilp_optimum_equals_brute_force(case):
    if case.startswith("trap"):
        edges, ks, expected = TRAP_A if case == "trap_a" else TRAP_B
        n = 4
        holders = np.zeros((4, 2), bool)
        holders[0] = True
        need = np.ones((4, 2), bool)
    else:
        n, edges, ks, holders, need = _random_instance(int(case[6:]))
        expected = None
    res = ilp_solve(_logical(edges, ks), n, holders, need, 1.0)
    best = brute_force_steps(n, [(a, b, k) for (a, b), k in zip(edges, ks)], _sets(holders),
                             _sets(need), 12)
    if expected is not None:
        assert best == expected
    assert res.optimal and res.exact and res.mip_gap == 0.0
    assert res.bound_steps * res.step_s <= best + 1e-9      # the cheap bound is valid
    # Durations are whole seconds, so steps * step_s is the optimum in seconds.
    assert res.steps * res.step_s == pytest.approx(best)
    assert res.time_s == pytest.approx(best)
    greedy = min(greedy_match(_logical(edges, ks), n, holders, need, 1.0,
                              np.random.default_rng(s))[3].max() for s in range(10))
    assert res.time_s <= greedy + 1e-9


def test_trap_through_topology_and_registry_greedy():
    """TRAP_A as a topology: the exact schedule validates and is no slower than
    the best greedy schedule of 10 seeds (the greedy needed 8 s when written)."""
    edges, ks, expected = TRAP_A
    b = LinkBuilder(4)
    b.links([e[0] for e in edges], [e[1] for e in edges], [1e6 / k for k in ks], 0.0)
    t = b.build(name="trap")
    coll = Collective.on("broadcast", 4, 2e6, chunks_per_npu=2)     # 1 MB chunks
    s = tacos_exact(t, coll)
    assert validate_schedule(s, t).valid
    assert s.time_s == pytest.approx(expected)
    assert s.metadata["exact"] and s.metadata["mip_gap"] == 0.0
    greedy = min(synthesize(t, coll, "tacos", seed=i).time_s for i in range(10))
    assert s.time_s <= greedy * (1 + 1e-9)


# ------------------------------------------------------------ closed forms
@pytest.mark.parametrize("n", [3, 4, 5])
def test_unidirectional_ring_allgather_takes_n_minus_1_steps(n):
    t = from_spec(f"uniring:{n},bw=1GB/s,lat=0")
    s = tacos_exact(t, Collective.on("allgather", n, n * GB))      # 1 s per chunk
    assert s.time_s == pytest.approx(n - 1)
    assert s.metadata["ilp_steps"] == n - 1 and s.metadata["exact"]


@pytest.mark.parametrize("n", [3, 4, 6])
def test_fully_connected_allgather_one_step(n):
    t = from_spec(f"fc:{n},bw=1GB/s,lat=0")
    s = tacos_exact(t, Collective.on("allgather", n, n * GB))
    assert s.time_s == pytest.approx(1.0) and s.metadata["ilp_steps"] == 1


@pytest.mark.parametrize("n", [4, 5])
def test_bidirectional_ring_allgather(n):
    # Each NPU needs n-1 chunks over 2 incoming links and the farthest one is
    # floor(n/2) hops away: ceil((n-1)/2) steps of 1 s.
    t = from_spec(f"ring:{n},bw=1GB/s,lat=0")
    s = tacos_exact(t, Collective.on("allgather", n, n * GB))
    assert s.time_s == pytest.approx(-(-(n - 1) // 2))


def test_ring4_two_chunks_meets_lower_bound():
    # 6 chunks of 0.5 GB into each NPU over 2 links of 1 GB/s: 1.5 s, the
    # ingress bound (evaluators.bounds), reached in 3 steps.
    t = from_spec("ring:4,bw=1GB/s,lat=0")
    coll = Collective.on("allgather", 4, 4 * GB, chunks_per_npu=2)
    s = tacos_exact(t, coll)
    assert s.time_s == pytest.approx(1.5)
    assert s.time_s == pytest.approx(lower_bound(t, coll).time_s)


@pytest.mark.parametrize("degree,steps", [("max", 1), (1, 3)])
def test_switch_unwound(degree, steps):
    # Degree max: 3 logical links per NPU at 1/3 bandwidth, one step of 3 s;
    # degree 1: a unidirectional ring at full bandwidth, 3 steps of 1 s.
    # Both meet the ingress bound 3 GB / 1 GB/s.
    t = from_spec("switch:4,bw=1GB/s,lat=0")
    coll = Collective.on("allgather", 4, 4 * GB)
    s = tacos_exact(t, coll, switch_degree=degree)
    assert s.metadata["ilp_steps"] == steps
    assert s.time_s == pytest.approx(3.0) == pytest.approx(lower_bound(t, coll).time_s)
    assert s.link_model == ("shared" if degree == "max" else "exclusive")
    assert validate_schedule(s, t).valid


def test_parallel_links_carry_twin_chunks_at_once():
    # Two NPUs joined by two parallel cables: the two pieces of each shard
    # cross at once (allreduce: 0.25 GB chunks, twice); the symmetry-breaking
    # rows must allow interchangeable chunks to arrive at the same step.
    b = LinkBuilder(2)
    b.links([0, 1], [1, 0], GB, 0.0, count=2)
    t = b.build(name="double")
    for kind, expected in (("allgather", 0.5), ("broadcast", 0.5), ("allreduce", 0.5)):
        size = 2 * GB if kind == "allgather" else GB
        coll = Collective.on(kind, 2, size, chunks_per_npu=2)
        s = tacos_exact(t, coll)
        assert s.time_s == pytest.approx(expected) and s.metadata["exact"], kind
        assert validate_schedule(s, t).valid


def test_ilp_alone_without_greedy_incumbent(monkeypatch):
    # With no greedy runs the search starts from the given horizon, so the
    # ILP itself must find the 1-step schedule of the double cable (the greedy
    # would have found it and the step bound proved it).
    b = LinkBuilder(2)
    b.links([0, 1], [1, 0], GB, 0.0, count=2)
    links = unwind(b.build(name="double"))
    holders = np.array([[True, True, False, False], [False, False, True, True]])
    monkeypatch.setattr(tacos_ilp, "UPPER_SEEDS", 0)
    res = ilp_solve(links, 2, holders, np.ones((2, 4), bool), 1e9, horizon=4)
    assert res.source == "ilp" and res.steps == 1 and res.optimal
    # The same on TRAP_A, whose optimum (7) is above the step bound.
    edges, ks, expected = TRAP_A
    holders = np.zeros((4, 2), bool)
    holders[0] = True
    res = ilp_solve(_logical(edges, ks), 4, holders, np.ones((4, 2), bool), 1.0, horizon=12)
    assert res.source == "ilp" and res.steps == expected and res.optimal
    assert res.bound_steps < expected
    assert [o for _, o, _ in res.solves][-1] == "infeasible"


# ------------------------------------------------- against greedy and bounds
SMALL = [("ring:4", 1), ("ring:5", 1), ("uniring:4", 1), ("fc:4", 1), ("mesh:2x3", 1),
         ("mesh:3x3", 1), ("mesh:2x3,bw=2GB/s:1GB/s", 1), ("switch:4", 1), ("ring:4", 2)]
KINDS = ["allgather", "reducescatter", "allreduce", "broadcast", "reduce"]


@pytest.mark.parametrize("spec,chunks", SMALL)
def test_valid_bounded_and_not_slower_than_greedy(spec, chunks):
    t = from_spec(spec + ("," if "," in spec else ",bw=1GB/s,") + "lat=0")
    for kind in KINDS:
        coll = Collective.on(kind, t.npus, t.npus * GB, chunks_per_npu=chunks)
        s = tacos_exact(t, coll, time_limit_s=30)
        report = validate_schedule(s, t)
        assert report.valid, (kind, report.errors[:3])
        assert s.time_s >= lower_bound(t, coll).time_s * (1 - 1e-9), kind
        greedy = min(synthesize(t, coll, "tacos", seed=i).time_s for i in range(10))
        assert s.time_s <= greedy * (1 + 1e-9), (kind, s.time_s, greedy)
        # lat=0 and bandwidths 1 and 2 GB/s: commensurate durations, proven optimal.
        assert s.metadata["exact"] and s.metadata["mip_gap"] == 0.0, kind
        # Each participant receives each chunk once per phase.
        m, n = coll.n_chunks, coll.n
        assert len(s) == m * (n - 1) * (2 if kind == "allreduce" else 1)
        ops = set(s.op.tolist())
        assert ops == ({REDUCE} if kind in ("reducescatter", "reduce") else
                       {COPY, REDUCE} if kind == "allreduce" else {COPY})


def test_heterogeneous_mesh_slow_links_span_steps():
    # bw 2 GB/s along x, 1 GB/s along y, 0.5 GB chunks: 0.25 s and 0.5 s, so
    # the step is 0.25 s and y links take 2 steps.
    t = from_spec("mesh:2x3,bw=2GB/s:1GB/s,lat=0")
    coll = Collective.on("allgather", 6, 6 * GB, chunks_per_npu=2)
    links = unwind(t)
    holders, need = holders_need(coll, t.n_nodes, "allgather")
    res = ilp_solve(links, t.n_nodes, holders, need, coll.chunk_bytes)
    assert res.step_s == pytest.approx(0.25) and res.commensurate and res.optimal
    assert res.time_s == pytest.approx(res.steps * 0.25)


def test_incommensurate_durations_are_an_upper_bound():
    # Default latency makes 25 and 50 GB/s durations non-multiples: the ceiling
    # discretisation may overestimate, so the result is not claimed exact.
    t = from_spec("mesh:2x3,bw=50GB/s:25GB/s")
    coll = Collective.on("allgather", 6, 6e8, chunks_per_npu=2)
    s = tacos_exact(t, coll)
    assert validate_schedule(s, t).valid
    assert not s.metadata["exact"]
    assert s.time_s <= s.metadata["ilp_steps"] * s.metadata["step_s"] * (1 + 1e-9)
    assert s.time_s >= lower_bound(t, coll).time_s


# ------------------------------------------------ limits and proof status
def _bcast_mesh():
    """mesh:2x3 broadcast of 6 chunks: the cheap step bound is below the optimum,
    so the ILP has to prove a horizon infeasible."""
    t = from_spec("mesh:2x3,bw=1GB/s,lat=0")
    coll = Collective.on("broadcast", 6, 6 * GB, chunks_per_npu=6)
    holders, need = holders_need(coll, t.n_nodes, "broadcast")
    return unwind(t), t.n_nodes, holders, need, coll.chunk_bytes


def test_infeasibility_proof_and_early_stop():
    args = _bcast_mesh()
    full = ilp_solve(*args)
    assert full.optimal and any(o == "infeasible" for _, o, _ in full.solves)
    assert full.lower_steps == full.steps
    # No time for any ILP: the greedy incumbent comes back, with its gap.
    early = ilp_solve(*args, time_limit_s=1e-9)
    assert early.status == "time_limit" and early.source == "greedy" and not early.optimal
    assert early.steps >= full.steps > early.lower_steps
    assert early.mip_gap == pytest.approx((early.steps - early.lower_steps) / early.steps)
    # A horizon proven too short, or not solved in time, has no schedule.
    with pytest.raises(InfeasibleError, match="proven infeasible"):
        ilp_solve(*args, horizon=full.steps - 1)
    with pytest.raises(InfeasibleError, match="time limit"):
        ilp_solve(*args, horizon=full.steps - 1, time_limit_s=1e-9)
    with pytest.raises(InfeasibleError, match="below the lower bound"):
        ilp_solve(*args, horizon=1)
    tight = ilp_solve(*args, horizon=full.steps)
    assert tight.steps == full.steps and tight.optimal


def test_ilp_transfers_have_greedy_shape():
    chunk, link, start, end = ilp_solve(*_bcast_mesh()).transfers
    assert chunk.dtype == np.int64 and link.dtype == np.int64 and start.dtype == np.float64
    assert np.all(np.diff(start) >= 0) and np.all(end > start)


def test_unreachable_and_bad_options():
    links = _logical([(0, 1), (1, 0)], [1, 1])
    holders = np.array([[True], [False], [False]])
    need = np.ones((3, 1), bool)
    with pytest.raises(InfeasibleError, match="cannot reach node 2"):
        ilp_solve(links, 3, holders, need, 1.0)
    ok = (links, 2, holders[:2], need[:2], 1.0)
    for bad in (dict(time_limit_s=0), dict(time_limit_s=float("nan")), dict(horizon=0),
                dict(horizon=True), dict(horizon=2.5), dict(step_s=-1.0)):
        with pytest.raises(InvalidSpecError):
            ilp_solve(*ok, **bad)
    with pytest.raises(InvalidSpecError):
        ilp_solve(links, 2, holders, need, 1.0)         # shape mismatch
    t = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="alltoall"):
        tacos_exact(t, Collective.on("alltoall", 4, 4e6))
    with pytest.raises(InvalidSpecError):
        tacos_exact(t, Collective.on("allgather", 4, 4e6), switch_degree=0)
    nothing = ilp_solve(links, 2, np.ones((2, 1), bool), np.ones((2, 1), bool), 1.0)
    assert nothing.status == "trivial" and nothing.chunk.size == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-9, 1e3), min_size=1, max_size=8),
       st.one_of(st.none(), st.floats(1e-6, 1e2)))
def test_discretise_properties(durations, step):
    dur = np.asarray(durations)
    step_s, k, commensurate = discretise(dur, step)
    assert step_s > 0 and np.all(k >= 1)
    # The ceiling: a transfer fits in its steps and one step fewer would not.
    assert np.all(k * step_s >= dur * (1 - 1e-9))
    assert np.all((k == 1) | ((k - 1) * step_s < dur * (1 + 1e-9)))
    if commensurate:
        np.testing.assert_allclose(k * step_s, dur, rtol=1e-8)
    if step is None:
        assert step_s <= dur.min() * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.floats(max_value=0.0), st.just(float("inf")), st.just(float("nan")),
                 st.booleans(), st.text(max_size=3)))
def test_bad_time_limit_rejected(value):
    links = _logical([(0, 1), (1, 0)], [1, 1])
    with pytest.raises(InvalidSpecError, match="time_limit_s"):
        ilp_solve(links, 2, np.eye(2, dtype=bool), np.ones((2, 2), bool), 1.0,
                  time_limit_s=value)


def test_an_ilp_beyond_the_size_bound_is_refused_at_once():
    # Fuzzing: synth mesh:2x3 ... --option exact=true --chunks 100000 hung (ILP unguarded).
    import time

    from codesign.resources import ResourceLimitError

    t0 = time.perf_counter()
    with pytest.raises(ResourceLimitError, match=r"TACOS-ILP .* with chunks=100000 plans "
                                                 r"8.4e\+06 entries \(at most 1.31e\+05\)"):
        tacos_exact(from_spec("mesh:2x3"), Collective.on("allreduce", 6, 2 ** 20,
                                                         chunks_per_npu=100_000))
    assert time.perf_counter() - t0 < 0.5
