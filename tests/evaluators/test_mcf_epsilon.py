"""MCF schedules within (1 + epsilon) of the fluid optimum on the graph classes of issue 21.

Oracles: the independent validator (evaluators.validate), the fluid LP optimum R
(solved separately), and the cut lower bound of evaluators.bounds, which R must
equal (the LP is exact and the cut bound is tight on these graphs).  Latencies are
0 so that ``time <= (1 + eps) R`` is the whole claim.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from evaluators.mcf.chunking import Herding, stride_sequence, window_timing
from evaluators.mcf.discretize import discretize
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule
from topologies.registry import from_spec, load_topology

#: Hand-made graphs shared with experiments/benchmarks/bench_mcf_epsilon.py.
GRAPH_FILES = Path(__file__).resolve().parents[2] / "experiments" / "mcf" / "graphs"


GRAPHS = {
    "torus:3x3": lambda: from_spec("torus:3x3,lat=0"),
    "mesh:3x3,fail=4": lambda: from_spec("mesh:3x3,fail=4,lat=0"),
    "two-cliques": lambda: load_topology(GRAPH_FILES / "two-cliques.yaml"),
    "switch-unequal": lambda: load_topology(GRAPH_FILES / "switch-unequal.yaml"),
    "leafspine:8,oversub=2": lambda: from_spec("leafspine:8,oversub=2,lat=0"),
    "uniring:5": lambda: from_spec("uniring:5,lat=0"),
    "dgx-a100:2": lambda: from_spec("dgx-a100:2,lat=0"),
}
#: Marked slow (10-40 s on a loaded 2-core machine): all of dgx-a100:2, torus:3x3 but allgather.
SLOW = {"dgx-a100:2", "torus:3x3"}
KINDS = ["allgather", "reducescatter", "allreduce"]
_CACHE: dict = {}


def solved(graph: str, kind: str):
    if (graph, kind) not in _CACHE:
        t = GRAPHS[graph]()
        c = Collective.on(kind, t.npus, 1e9)
        _CACHE[graph, kind] = (t, c, fluid_optimum(t, c))
    return _CACHE[graph, kind]


def _cases():
    for g in GRAPHS:
        for k in KINDS:
            marks = [pytest.mark.slow] if g in SLOW and (g == "dgx-a100:2" or k != "allgather") \
                else []
            yield pytest.param(g, k, marks=marks, id=f"{g}-{k}")


@pytest.mark.parametrize("graph,kind", list(_cases()))
def test_lp_optimum_equals_cut_bound(graph, kind):
    t, c, r = solved(graph, kind)
    b = lower_bound(t, c)
    cut = max(v for k, v in b.components.items() if k != "latency")
    assert r.optimal
    assert r.time_s == pytest.approx(cut, rel=1e-6)


def _epsilon_cases():
    """Every graph and kind at the issue's 1 %; 5 % (a coarser chunking) on all but the
    largest graph, where it repeated the 1 % case's claim at 19 s of the suite's time."""
    for case in _cases():
        graph = case.values[0]
        for eps in ((0.01,) if graph == "dgx-a100:2" else (0.05, 0.01)):
            yield pytest.param(*case.values, eps, marks=case.marks,
                               id=f"{case.id}-{eps}")


@pytest.mark.parametrize("graph,kind,eps", list(_epsilon_cases()))
def test_schedule_valid_and_within_epsilon(graph, kind, eps):
    t, c, r = solved(graph, kind)
    s = discretize(r, t, c, epsilon=eps)
    rep = validate_schedule(s, t)
    assert rep.valid, rep.errors[:3]
    m = s.metadata
    assert m["within_epsilon"], m["chunk_reason"]
    assert r.time_s * (1 - 1e-9) <= s.time_s <= r.time_s * (1 + eps) * (1 + 1e-9)
    assert m["chunks"] == s.collective.chunks_per_npu == m["replays"] * m["split"]
    assert m["route"] in ("fluid-trees", "tree-columns") and m["chunk_reason"]
    # The proof's bound: (K - 1 + T_tot W) steps of s' (no latency here; a replay
    # whose last steps carry nothing ends earlier).
    steps = m["steps"]
    assert s.time_s <= (m["replays"] - 1 + steps * m["window"]) * m["step_s"] * (1 + 1e-9)


def test_issue_torus_3x5_at_one_percent():
    # The issue's case: 0.268 s against 0.2333 s (+15 %) before; now within 1 %.
    t = from_spec("torus:3x5,lat=0")
    c = Collective.on("allgather", 15, 2.5e10)
    s = synthesize(t, c, "mcf", epsilon=0.01)
    assert validate_schedule(s, t).valid
    assert s.metadata["fluid_time_s"] == pytest.approx(0.2333333, rel=1e-5)
    assert s.metadata["within_epsilon"] and s.time_s <= 0.2333333 * 1.01 * (1 + 1e-6)


def test_epsilon_half_percent_two_cliques():
    t, c, r = solved("two-cliques", "allgather")
    s = discretize(r, t, c, epsilon=0.005)
    assert validate_schedule(s, t).valid
    assert s.time_s <= r.time_s * 1.005 * (1 + 1e-9)


def test_missing_epsilon_is_reported_with_the_best_reached():
    # A transfer cap too small for eps = 0.01: the schedule is the best within
    # the cap, still valid, and says why it misses.
    t, c, r = solved("uniring:5", "allgather")
    s = discretize(r, t, c, epsilon=0.01, max_transfers=500)
    assert validate_schedule(s, t).valid
    m = s.metadata
    assert not m["within_epsilon"]
    assert "cannot reach eps=0.01" in m["chunk_reason"] and "cap of 500" in m["chunk_reason"]
    assert len(s) <= 500 and s.time_s > r.time_s * 1.01


def test_latency_adds_at_most_one_step_per_step_index():
    t = from_spec("ring:4")                      # 1 us links
    c = Collective.on("allgather", 4, 4e6)
    s = synthesize(t, c, "mcf", epsilon=0.05)
    assert validate_schedule(s, t).valid
    m = s.metadata
    assert m["latency_s"] == pytest.approx(m["steps"] * 1e-6, rel=1e-9)
    assert s.time_s <= m["bound_s"] * (1 + 1e-9)
    bw_part = (m["replays"] - 1 + m["steps"] * m["window"]) * m["step_s"]
    assert m["latency_s"] * (1 - 1e-6) <= s.time_s - bw_part \
        <= m["latency_s"] + m["steps"] * m["step_s"]


# ------------------------------------------------------------------ the pieces
def test_stride_sequence_prefixes_are_balanced():
    w = np.array([[0.5, 0.3, 0.2], [0.9, 0.1, 0.0]])
    seq = stride_sequence(w, 200)
    for n in range(1, 201):
        for c in range(2):
            counts = np.bincount(seq[c, :n], minlength=3)
            assert np.all(np.abs(counts - n * w[c]) < 1 + 1e-9)


def test_herding_keeps_the_running_excess_bounded():
    rng = np.random.default_rng(3)
    loads = [rng.integers(0, 3, size=(4, 12)).astype(float) for _ in range(3)]
    weights = [rng.dirichlet(np.ones(4)) for _ in range(3)]
    h = Herding(loads, weights)
    order = np.tile(np.arange(3), 3000)
    tree = h.place(order)
    P = np.zeros(12)
    worst = 0.0
    for c, j in zip(order, tree):
        P += loads[c][j] - weights[c] @ loads[c]
        worst = max(worst, float(np.abs(P).max()))
    assert worst < 20          # bounded: no drift over 9000 placements


def test_window_timing_exact_replays_need_no_window():
    work = np.ones((10, 2, 3)) * 0.5          # every replay alike: W = 1, s' = 1.5
    s, W, off = window_timing(work, 10, np.array([0.1, 0.2, 0.3]))
    assert W == 1 and math.isclose(s, 1.5, rel_tol=1e-9)
    assert np.allclose(off, [0, 0.1, 0.3, 0.6])           # the real latencies, per step
    work[::2, 0, 0] += 1.0                      # lumpy replays: a longer window
    work[1::2, 0, 0] -= 0.5
    s2, W2, _ = window_timing(work, 10, np.zeros(3))
    assert W2 >= 2 and s2 == pytest.approx(1.75, rel=1e-9)
