"""collective_method='best': the fastest valid synthesizer, checked against timing each alone."""

from __future__ import annotations

import pytest

from evaluators.collectives import Collective
from evaluators.iteration.comm import BEST, CommTimer, System, best_candidates
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule
from topologies.registry import from_spec


def _best_cases():
    """Every fabric with both kinds, sizes at their class's representative
    (best_size_class), where best's decision is made; the ring-like perms:16, where
    halving-doubling is pruned before its replay (plan.prune_above), with the all-gather
    only: its all-reduce took 25 s (MCF synthesized three times) to repeat what the
    all-gather shows -- rhd, bidir-ring and direct pruned there too -- and
    test_prune_above_refuses_only_plans_that_cannot_beat_the_bound checks that all-reduce."""
    specs = ["torus:3x3,bw=100Gbps", "expander:8,degree=3,seed=1,bw=50Gbps",
             "leafspine:8,oversub=2,hosts_per_leaf=4,bw=100Gbps",
             "hier:ring2_switch3,bw=200GB/s:50GB/s", "perms:16,p=1,bw=100Gbps"]
    for kind, size in (("allreduce", 2.0 ** 26), ("allgather", 2.0 ** 18)):
        for spec in specs:
            if not (spec.startswith("perms") and kind == "allreduce"):
                yield spec, kind, size


@pytest.mark.parametrize("spec, kind, size", list(_best_cases()))
def test_best_is_the_fastest_valid_synthesizer_timed_alone(spec, kind, size):
    topo = from_spec(spec)
    nodes = tuple(range(topo.npus))
    sysm = System(topo, topo.npus * 4, 4, True, 4.5e11)
    timer = CommTimer(sysm, BEST, "flow")
    best = timer.inter_collective(kind, nodes, size).time_s
    names, skipped = best_candidates(topo, kind, len(nodes))
    alone = {}
    for name in names:
        try:
            sched = synthesize(topo, Collective(kind, nodes, size), method=name)
        except Exception:  # noqa: BLE001 - inapplicable to this fabric
            continue
        if not validate_schedule(sched, topo).valid:
            continue
        alone[name] = CommTimer(sysm, name, "flow").inter_collective(kind, nodes, size).time_s
    assert best == pytest.approx(min(alone.values()), rel=1e-9)
    (choice,) = timer.decisions()
    assert alone[choice.algorithm] == pytest.approx(best, rel=1e-9)
    assert choice.gain_over_ring == pytest.approx(alone["ring"] / best, rel=1e-9)
    assert set(choice.times_s) | set(choice.skipped) >= set(names)


def test_prune_above_refuses_only_plans_that_cannot_beat_the_bound():
    import numpy as np

    from evaluators.algorithms.plan import Pruned, prune_above

    topo = from_spec("perms:16,p=1,bw=100Gbps")
    coll = Collective("allreduce", tuple(range(16)), 64e6)
    plain = synthesize(topo, coll, method="rhd")
    load = float((np.bincount(plain.path_links, minlength=topo.n_links)
                  * plain.chunk_bytes / topo.bandwidth).max())
    with pytest.raises(Pruned) as err:
        with prune_above(load):          # the busiest link alone needs exactly the bound
            synthesize(topo, coll, method="rhd")
    assert err.value.load_s == pytest.approx(load)
    with prune_above(load * 1.0001):     # it might beat this: timed as usual
        kept = synthesize(topo, coll, method="rhd")
    assert np.array_equal(kept.end, plain.end) and np.array_equal(kept.start, plain.start)
    assert float(plain.end.max()) >= load   # the bound is sound: no schedule beats its load


def test_skips_are_recorded_with_reasons():
    topo = from_spec("fattree:k=4,bw=100Gbps")
    names, skipped = best_candidates(topo, "allreduce", 16)
    assert "ring" in names and "themis" in skipped and "multi-dimensional" in skipped["themis"]
    assert "mcf" in skipped and "switched fabric" in skipped["mcf"]
    _, big = best_candidates(from_spec("torus:8x8"), "allreduce", 64)
    assert "LP variables" in big["mcf"]
    _, tight = best_candidates(topo, "allreduce", 16, time_limit_s=1e-9)
    assert "tacos" in tight and "time estimate" in tight["tacos"]


def test_evaluate_accepts_best_and_it_is_never_slower_than_ring():
    from evaluators.iteration import evaluate

    topo = from_spec("mesh:2x4,bw=100Gbps")
    b = evaluate(topo, "bert", "dp=64", collective_method="best", routing="auto")
    r = evaluate(from_spec("mesh:2x4,bw=100Gbps"), "bert", "dp=64", collective_method="ring",
                 routing="auto")
    assert b.collective_method == "best"
    assert b.iteration_time_s <= r.iteration_time_s * (1 + 1e-9)


def test_a_synthesizer_that_refuses_a_subset_group_is_skipped():
    # TACOS does not relay through non-participants: on a sparse subset of a torus it
    # refuses (InfeasibleError); best must fall back to the others and say why.
    topo = from_spec("torus:4x4,bw=100Gbps")
    sysm = System(topo, 64, 4, True, 4.5e11)
    nodes = (0, 5, 10, 15)
    timer = CommTimer(sysm, BEST, "flow")
    t = timer.inter_collective("allreduce", nodes, 8e6).time_s
    (choice,) = timer.decisions()
    assert t > 0 and choice.algorithm in choice.times_s
    assert all(reason for reason in choice.skipped.values())


def test_a_decision_does_not_depend_on_which_size_asked_first():
    # Two sizes of one class asked in both orders on fresh fabrics: the same decision and
    # the same times (a decision is made at the class's representative size), which is
    # what lets chains on several Ray workers with warm caches agree with one process.
    from evaluators.iteration.comm import best_size_class

    sizes = (20e6, 200e6)
    assert best_size_class(sizes[0])[0] == best_size_class(sizes[1])[0]
    runs = []
    for order in (sizes, sizes[::-1]):
        topo = from_spec("torus:3x3,bw=100Gbps")
        timer = CommTimer(System(topo, 36, 4, True, 4.5e11), BEST, "flow")
        times = {s: timer.inter_collective("allreduce", tuple(range(9)), s).time_s
                 for s in order}
        (choice,) = timer.decisions()
        runs.append((times, choice.algorithm, choice.size_bytes))
    assert runs[0] == runs[1]
    assert runs[0][2] == best_size_class(sizes[0])[1]


def test_an_evaluation_reports_the_decisions_it_used():
    from evaluators.iteration import evaluate

    topo = from_spec("torus:4x4,bw=100Gbps")
    # Another evaluation on the same fabric first: its decisions must not leak into the next.
    evaluate(topo, "bert", "dp=16,tp=4,pp=2", collective_method="best", routing="auto")
    r = evaluate(topo, "bert", "dp=128", collective_method="best", routing="auto")
    assert r.collectives and {c["nodes"] for c in r.collectives} == {16}
    assert all(c["algorithm"] in c["times_s"] for c in r.collectives)
    assert evaluate(topo, "bert", "dp=128", collective_method="ring",
                    routing="auto").collectives is None


def test_schedule_caches_stay_within_their_share_of_the_memory_limit(monkeypatch):
    # Cached schedules of every topology count against one budget (a share of the memory
    # limit); past it every cache is dropped, and the same answers are timed again.
    from codesign.resources import memory_limit
    from evaluators.iteration import comm

    topos = [from_spec(f"torus:4x{k},bw=100Gbps") for k in (4, 5, 6)]
    sysm = [System(t, t.npus * 4, 4, True, 4.5e11) for t in topos]

    def times():
        # bidir-ring: a materialised schedule (ring is timed from its steps,
        # test_iteration_ring_steps.py).
        return [CommTimer(s, "bidir-ring", "flow").inter_collective(
            "allreduce", tuple(range(s.topology.npus)), 2.0 ** 26).time_s for s in sysm]

    monkeypatch.setattr(comm, "_SHARED", type(comm._SHARED)())
    monkeypatch.setattr(comm, "_SCHEDULE_BYTES", [0])
    free = times()
    held = comm._SCHEDULE_BYTES[0]
    assert held > 0 and all(comm._SHARED.get(t) for t in topos)   # all three kept
    largest = max(comm._schedule_bytes(next(iter(comm._SHARED[t].values()))["structure"]
                                       [("allreduce", tuple(range(t.npus)))]) for t in topos)
    # A budget of half of them: holding a schedule past it drops the caches first.
    monkeypatch.setattr(comm, "_SHARED", type(comm._SHARED)())
    monkeypatch.setattr(comm, "_SCHEDULE_BYTES", [0])
    monkeypatch.setattr(comm, "_SCHEDULE_SHARE", held / 2 / memory_limit())
    assert times() == free
    assert comm._SCHEDULE_BYTES[0] <= held / 2 + largest
    assert sum(bool(comm._SHARED.get(t)) for t in topos) < 3


@pytest.mark.parametrize("nodes,tried", [((30, 31), True), ((60, 61), False)])
def test_mcf_is_not_tried_on_members_far_apart(nodes, tried):
    # A one-permutation ring of 64 servers: each pair's return path is 63 hops; MCF's
    # discretization cost grows with the path (0.6 s here, 5.4 s at 127 hops), so best
    # tries it only within _MCF_MAX_HOPS = 32 hops.  A pair on perms:32 (31 hops) keeps it.
    topo = from_spec("perms:32,p=1,bw=200Gbps" if tried else "perms:64,p=1,bw=200Gbps")
    sysm = System(topo, topo.npus * 8, 8, True, 4.5e11)
    timer = CommTimer(sysm, BEST, "flow")
    nodes = (nodes[0] % topo.npus, nodes[1] % topo.npus)
    assert timer.inter_collective("reducescatter", nodes, 4e6).time_s > 0
    (choice,) = timer.decisions()
    assert ("mcf" in choice.times_s or "mcf" in choice.skipped) and \
        ("hops apart" in choice.skipped.get("mcf", "")) is (not tried)


def _synthesis_counts(monkeypatch, kind: str, groups) -> tuple:
    """(topology, timer, {group: (time, synthesizer calls)}) of ``kind`` collectives of
    64 MiB timed with ``best`` one group after another on an 8-server leaf-spine."""
    import evaluators.registry as registry

    topo = from_spec("leafspine:8,oversub=2,hosts_per_leaf=4,bw=100Gbps")
    calls = []
    real = registry.synthesize
    monkeypatch.setattr(registry, "synthesize",
                        lambda *a, **k: calls.append(k.get("method")) or real(*a, **k))
    timer = CommTimer(System(topo, 32, 4, True, 4.5e11), BEST, "flow")
    times = {}
    for nodes in groups:
        before = len(calls)
        times[nodes] = (timer.inter_collective(kind, nodes, 2.0 ** 26).time_s,
                        len(calls) - before)
    return topo, timer, times


def test_twin_groups_share_the_decision_and_take_their_own_time(monkeypatch):
    """Groups that a permutation of hosts under one leaf maps onto each other share the
    tournament (topologies.symmetry.twin_key): the second synthesizes only the winner,
    and its time and decision are those of a full tournament of its own (oracle: a fresh
    timer per group)."""
    topo, timer, times = _synthesis_counts(monkeypatch, "allreduce",
                                           ((0, 1), (3, 2), (4, 5), (0, 4)))
    assert times[(3, 2)][1] == 1 < times[(0, 1)][1]    # (3, 2): the winner only
    # (4, 5) is under the other leaf: no twin of (0, 1), but a leaf swap maps one onto
    # the other (an automorphism, test_groups_an_automorphism_maps_share_the_tournament):
    # nothing synthesized; (0, 4), across the leaves, runs its own tournament.
    assert times[(4, 5)][1] == 0 and times[(0, 4)][1] > 1
    decisions = {d.algorithm for d in timer.decisions()}
    for nodes, (t, _) in times.items():
        alone = CommTimer(System(from_spec(topo.name), 32, 4, True, 4.5e11), BEST, "flow")
        assert alone.inter_collective("allreduce", nodes, 2.0 ** 26).time_s == \
            pytest.approx(t, rel=1e-12)
        assert alone.decisions()[0].algorithm in decisions


@pytest.mark.parametrize("spec, strategy", [
    ("leafspine:16,oversub=2,hosts_per_leaf=4,bw=400Gbps",
     "dp=8,tp=8,cp=2,microbatches=256,sp=true"),
    ("fattree:k=8,bw=200Gbps", "dp=32,tp=8,pp=2,cp=2,microbatches=64,sp=true"),
])
def test_an_evaluation_with_shared_decisions_equals_one_tournament_per_group(
        monkeypatch, spec, strategy):
    """Oracle: every group its own tournament (no twins) gives the same iteration."""
    import evaluators.registry as registry
    import topologies.symmetry as symmetry
    from evaluators.iteration import evaluate

    calls = []
    real = registry.synthesize
    monkeypatch.setattr(registry, "synthesize",
                        lambda *a, **k: calls.append(1) or real(*a, **k))

    def run():
        calls.clear()
        r = evaluate(from_spec(spec), "llama3-8b", strategy, hardware="H100",
                     collective_method="best", routing="auto")
        return r, len(calls)

    shared, n_shared = run()
    monkeypatch.setattr(symmetry, "twin_key", lambda topology, nodes: tuple(nodes))
    alone, n_alone = run()
    assert n_shared < n_alone   # some groups were twins
    assert shared.iteration_time_s == pytest.approx(alone.iteration_time_s, rel=1e-12)
    assert shared.breakdown == pytest.approx(alone.breakdown, rel=1e-12)
    assert [(c["algorithm"], c["nodes"]) for c in shared.collectives] == \
        [(c["algorithm"], c["nodes"]) for c in alone.collectives]


def test_groups_an_automorphism_maps_share_the_tournament(monkeypatch):
    """A group that a verified automorphism maps onto a decided one member by member
    (topologies.symmetry.group_map) takes that group's winner, relabelled: no synthesis
    at all, and the time and algorithm of a full tournament of its own (oracle: a fresh
    timer per group).  Looked for only when the tournament is estimated to cost more
    than the look-up (here forced by a zero look-up cost)."""
    import evaluators.iteration.comm as comm

    monkeypatch.setattr(comm, "MAP_S_PER_ELEMENT", 0.0)
    topo, timer, times = _synthesis_counts(monkeypatch, "allgather",
                                           ((0, 1, 2), (4, 5, 6), (5, 7, 4), (0, 1, 4)))
    assert times[(0, 1, 2)][1] > 1
    # the other leaf's groups: mapped from (0, 1, 2) (a leaf swap, then a host
    # permutation under the leaf), nothing synthesized
    assert times[(4, 5, 6)][1] == times[(5, 7, 4)][1] == 0
    assert times[(0, 1, 4)][1] > 1          # two hosts under one leaf, one under the other
    for nodes, (t, _) in times.items():
        alone = CommTimer(System(from_spec(topo.name), 32, 4, True, 4.5e11), BEST, "flow")
        assert alone.inter_collective("allgather", nodes, 2.0 ** 26).time_s == \
            pytest.approx(t, rel=1e-12)
        assert alone.decisions()[0].algorithm == next(
            d.algorithm for d in timer.decisions() if d.nodes == len(nodes)
            and d.time_s == pytest.approx(alone.decisions()[0].time_s, rel=1e-12))
