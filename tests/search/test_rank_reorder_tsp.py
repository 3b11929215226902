"""The CP-SAT ring stage of search.reorder.rank_order against brute force, Held-Karp, planted optima
and the assignment lower bound; determinism, time limit, graceful failure, bad options."""

import itertools
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model  # imported here so that timings below exclude it
from scipy.optimize import linear_sum_assignment

import search.reorder.rank_order as ro
from codesign.errors import InvalidSpecError
from evaluators.rank_cost import ring_cost
from search.reorder.rank_order import CIRCUIT_NEIGHBOURS, improve_ring_order, reorder

A, B = 1e-5, 1e-4   # in-rack and cross-rack one-way costs (s)


def planted(racks, size, seed):
    n = racks * size
    rack = np.repeat(np.arange(racks), size)[np.random.default_rng(seed).permutation(n)]
    c = np.where(rack[:, None] == rack[None, :], A, B)
    np.fill_diagonal(c, 0.0)
    return c


def planted_optimum(racks, size):
    # Every rack is entered at least once (R cross-rack hops), the other hops cost >= A.
    return racks * B + (racks * size - racks) * A


def brute_force_ring(c):
    """Cheapest directed ring by enumeration (node 0 fixed first), vectorised over permutations."""
    n = c.shape[0]
    rest = np.array(list(itertools.permutations(range(1, n))), dtype=np.intp).reshape(-1, n - 1)
    tours = np.hstack([np.zeros((rest.shape[0], 1), dtype=np.intp), rest])
    return float(c[tours, np.roll(tours, -1, axis=1)].sum(axis=1).min())


def rounding_slack(c):
    # Documented bound: the integer model is within 1e-9 * n * max(cost) of the float one.
    return 1e-9 * c.shape[0] * c.max() + 1e-15


def assignment_bound(c):
    d = c.copy()
    np.fill_diagonal(d, np.inf)
    r, k = linear_sum_assignment(d)
    return float(d[r, k].sum())


# ---------------------------------------------------------------------- exactness


@pytest.mark.parametrize("n,seed", [(4, 0), (5, 1), (6, 2), (7, 3), (7, 4), (8, 5), (8, 6),
                                    (9, 7), (9, 8), (9, 9)])
def test_solver_stage_reaches_brute_force_optimum(n, seed):
    c = np.random.default_rng(seed).random((n, n))          # asymmetric
    for start in (np.arange(n), np.arange(n)[::-1]):
        r = improve_ring_order(c, start, seed=seed)
        assert r.status == "optimal"
        assert sorted(r.order) == list(range(n))
        assert r.cost_s == pytest.approx(ring_cost(c, np.array(r.order)), rel=1e-12)
        assert r.start_cost_s == pytest.approx(ring_cost(c, start), rel=1e-12)
        assert abs(r.cost_s - brute_force_ring(c)) <= rounding_slack(c)


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 7), st.integers(0, 2**32 - 1), st.sampled_from([1e-6, 1.0, 3e3]))
def test_solver_stage_optimal_property(n, seed, unit):
    # Any scale of costs (the integer scaling is relative to the largest cost).
    c = np.random.default_rng(seed).random((n, n)) * unit
    r = improve_ring_order(c, np.arange(n), seed=seed % 1000)
    assert r.status == "optimal"
    assert r.cost_s <= r.start_cost_s
    assert abs(r.cost_s - brute_force_ring(c)) <= rounding_slack(c)


def test_rounding_bound_with_outlier_cost():
    # One huge entry makes the integer grid coarse for the others (~1e-9 s per unit):
    # the answer must stay within the documented bound of the optimum.
    rng = np.random.default_rng(3)
    c = rng.random((8, 8)) * 1e-6
    c[2, 5] = 1.0
    r = improve_ring_order(c, np.arange(8))
    assert r.cost_s <= brute_force_ring(c) + rounding_slack(c)


@pytest.mark.parametrize("n,seed", [(14, 0), (15, 1)])
def test_solver_stage_matches_held_karp_above_12(n, seed):
    # Beyond reorder's Held-Karp range the stage still sees every arc (n <= 40): optimal.
    c = np.random.default_rng(seed).random((n, n))
    exact = ring_cost(c, ro._held_karp(c))
    r = improve_ring_order(c, np.arange(n), seed=seed)
    assert r.status == "optimal"
    assert abs(r.cost_s - exact) <= rounding_slack(c)
    res = reorder(c, "ring", seed=seed)
    assert res.method.startswith("2opt+oropt+cp-sat:")
    assert res.cost_s <= exact + rounding_slack(c)


def test_zero_and_constant_matrices():
    z = np.zeros((20, 20))
    r = improve_ring_order(z, np.arange(20))
    assert (r.status, r.cost_s, r.order) == ("optimal", 0.0, tuple(range(20)))
    k = np.full((20, 20), 2e-6)
    r = improve_ring_order(k, np.arange(20)[::-1])
    assert r.cost_s == pytest.approx(20 * 2e-6) and r.order == tuple(range(20))[::-1]


# ---------------------------------------------------------------- planted / quality


@pytest.mark.parametrize("racks,size,seed", [(8, 8, 0), (32, 8, 1)])
def test_planted_racks_reach_known_optimum(racks, size, seed):
    c = planted(racks, size, seed)
    r = reorder(c, "ring", seed=seed)
    assert r.cost_s == pytest.approx(planted_optimum(racks, size), rel=1e-9)
    # n > 40: sparse candidate arcs, and the circuit cuts prove the tour optimal over them.
    assert r.method == "2opt+oropt+cp-sat:candidate-optimal"


def test_planted_solver_alone_from_identity():
    # The solver stage, not the heuristic, finds the optimum from a poor start.
    c = planted(8, 8, 2)
    start = np.arange(64)
    assert ring_cost(c, start) > 2 * planted_optimum(8, 8)
    r = improve_ring_order(c, start, effort=2.0, time_limit_s=60)
    assert r.cost_s == pytest.approx(planted_optimum(8, 8), rel=1e-9)


def test_random_sparse_close_to_assignment_bound():
    # Random asymmetric costs: the heuristic alone is far off, the solver lands within 2 %
    # of the assignment lower bound (every ring is a cycle cover).
    n = 80
    c = np.random.default_rng(21).random((n, n))
    bound = assignment_bound(c)
    heuristic = reorder(c, "ring", seed=0, solver="none")
    r = improve_ring_order(c, heuristic.order, effort=1.0, time_limit_s=60)
    assert r.status in ("candidate-optimal", "feasible")
    assert bound - 1e-9 <= r.cost_s <= 1.02 * bound
    assert r.cost_s < heuristic.cost_s


def test_candidate_arcs_sparse_and_diverse():
    n = 128
    c = planted(16, 8, 4)
    tour = np.random.default_rng(0).permutation(n)
    mask, complete = ro._candidate_mask(c, tour, np.random.default_rng(1))
    assert not complete
    assert not mask.diagonal().any()
    assert mask[tour, np.roll(tour, -1)].all()
    assert (mask.sum(axis=1) >= CIRCUIT_NEIGHBOURS).all() and (mask.sum(axis=0) >= CIRCUIT_NEIGHBOURS).all()
    assert mask.sum() <= n * (2 * CIRCUIT_NEIGHBOURS + 1)
    # Ties broken at random: cross-rack candidate arcs reach many nodes, not just low ids.
    cross_targets = np.unique(np.nonzero(mask & (c == B))[1])
    assert cross_targets.size > n // 2
    full, complete = ro._candidate_mask(c[:40, :40], np.arange(40), np.random.default_rng(1))
    assert complete and full.sum() == 40 * 39


# --------------------------------------------------------- determinism and limits


def test_same_seed_same_result_with_solver():
    c = np.random.default_rng(5).random((120, 120))
    first = reorder(c, "ring", seed=3, time_limit_s=60, solver_effort=0.3)
    assert first.method.startswith("2opt+oropt+cp-sat:")
    assert reorder(c, "ring", seed=3, time_limit_s=60, solver_effort=0.3) == first
    again = improve_ring_order(c, np.arange(120), seed=4, effort=0.2, time_limit_s=60)
    assert improve_ring_order(c, np.arange(120), seed=4, effort=0.2, time_limit_s=60) == again


def test_time_limit_respected():
    c = np.random.default_rng(8).random((300, 300))
    t0 = time.perf_counter()
    r = reorder(c, "ring", seed=0, time_limit_s=0.5)
    assert time.perf_counter() - t0 < 2.0
    assert sorted(r.order) == list(range(300))
    assert r.cost_s == pytest.approx(ring_cost(c, np.array(r.order)))
    assert r.cost_s <= r.baseline_cost_s
    assert r.method.startswith("2opt+oropt+cp-sat:")


# ------------------------------------------------------------------ graceful failure


def test_solver_finds_nothing_keeps_heuristic(monkeypatch):
    monkeypatch.setattr(cp_model.CpSolver, "solve", lambda self, model, *a, **k: cp_model.UNKNOWN)
    c = np.random.default_rng(2).random((30, 30))
    r = improve_ring_order(c, np.arange(30))
    assert (r.status, r.order) == ("no-solution", tuple(range(30)))
    assert r.cost_s == r.start_cost_s == pytest.approx(ring_cost(c, np.arange(30)))
    res = reorder(c, "ring", seed=1)
    assert res.method == "2opt+oropt+cp-sat:no-solution"
    assert res.cost_s == pytest.approx(ring_cost(c, np.array(res.order)))
    assert res.cost_s <= res.baseline_cost_s


def test_solver_unavailable_keeps_heuristic(monkeypatch):
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)   # import now fails
    c = np.random.default_rng(2).random((20, 20))
    r = improve_ring_order(c, np.arange(20))
    assert (r.status, r.order) == ("unavailable", tuple(range(20)))
    assert reorder(c, "ring").method == "2opt+oropt+cp-sat:unavailable"


def test_worse_solver_tour_is_not_taken(monkeypatch):
    # Forward arcs cost 0.01, backward arcs 1: the identity ring is cheap, its reverse is not.
    n = 16
    c = np.where(np.arange(n)[:, None] < np.arange(n)[None, :], 0.01, 1.0)
    monkeypatch.setattr(ro, "_successors_to_tour", lambda n, us, vs: np.arange(n)[::-1].copy())
    r = improve_ring_order(c, np.arange(n))
    assert r.order == tuple(range(n))
    assert r.cost_s == pytest.approx((n - 1) * 0.01 + 1.0)


def test_invalid_circuit_from_solver_is_rejected():
    assert ro._successors_to_tour(4, np.array([0, 1, 2, 3]), np.array([1, 0, 3, 2])) is None  # two cycles
    assert ro._successors_to_tour(3, np.array([0, 1]), np.array([1, 2])) is None             # missing arc
    assert ro._successors_to_tour(3, np.array([0, 1, 2]), np.array([2, 0, 1])).tolist() == [0, 2, 1]


# ---------------------------------------------------------------------- bad options


@pytest.mark.parametrize("kwargs", [
    {"solver": "lkh"}, {"solver": None}, {"solver_effort": 0}, {"solver_effort": -1.0},
    {"solver_effort": float("nan")}, {"solver_effort": True}, {"solver_effort": "1"},
    {"time_limit_s": float("inf")},
])
def test_reorder_bad_solver_options(kwargs):
    with pytest.raises(InvalidSpecError):
        reorder(np.ones((16, 16)), "ring", **kwargs)


@pytest.mark.parametrize("order,kwargs", [
    ([0, 0, 1, 2], {}), ([0, 1, 2], {}), ([0, 1, 2, 3], {"effort": 0}),
    ([0, 1, 2, 3], {"time_limit_s": -1}), ([0, 1, 2, 3], {"seed": "x"}),
])
def test_improve_bad_input(order, kwargs):
    with pytest.raises(InvalidSpecError):
        improve_ring_order(np.ones((4, 4)), order, **kwargs)


def test_costs_whose_ring_sum_overflows_are_refused_and_the_largest_allowed_work(tmp_path):
    """1e308 s per hop summed to inf: Held-Karp's argmin over an all-inf row then broke
    its parent chain and the 'order' repeated a node.  Costs are capped at
    codesign.units.MAX_TIME_S, both in the CSV reader and the library check."""
    import numpy as np

    from codesign.errors import InvalidSpecError
    from codesign.units import MAX_TIME_S
    from search.reorder.rank_order import load_cost_matrix, reorder

    huge = np.full((5, 5), 1e308)
    with pytest.raises(InvalidSpecError, match="at most 1e\\+09"):
        reorder(huge, "ring")
    path = tmp_path / "c.csv"
    path.write_text("\n".join(",".join(["1e308"] * 3) for _ in range(3)) + "\n")
    with pytest.raises(InvalidSpecError, match="row 1, column"):
        load_cost_matrix(path)
    for n in (5, 20):   # Held-Karp and the local search at the cap: permutations
        r = reorder(np.full((n, n), MAX_TIME_S), "ring")
        assert sorted(r.order) == list(range(n))
        assert r.cost_s == pytest.approx(n * MAX_TIME_S)
