"""search.reorder.rank_order.reorder against brute force and planted instances with known optima."""

import itertools

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.rank_cost import cost_function, rank_cost
from search.reorder.rank_order import reorder

A, B = 1e-5, 1e-4   # in-rack and cross-rack one-way costs (s)


def planted(racks, size, seed, a=A, b=B):
    """Racks of ``size`` nodes, cost a inside a rack and b across, node labels shuffled."""
    n = racks * size
    rack = np.repeat(np.arange(racks), size)[np.random.default_rng(seed).permutation(n)]
    c = np.where(rack[:, None] == rack[None, :], a, b)
    np.fill_diagonal(c, 0.0)
    return c


def brute_force(c, algorithm, base=2):
    n = c.shape[0]
    cost = cost_function(n, algorithm, base=base)   # unvalidated fast path of rank_cost
    # Rank 0 can be fixed to node 0 for the ring (rotation invariance); not for the others.
    perms = ([(0,) + p for p in itertools.permutations(range(1, n))] if algorithm == "ring"
             else itertools.permutations(range(n)))
    return min(cost(c, np.array(p)) for p in perms)


def is_permutation(order, n):
    return sorted(order) == list(range(n))


@pytest.mark.parametrize("n,seed", [(4, 0), (5, 1), (6, 2), (7, 3), (8, 4)])
def test_ring_exact_vs_brute_force(n, seed):
    c = np.random.default_rng(seed).random((n, n))    # asymmetric
    r = reorder(c, "ring", seed=seed)
    assert r.method == "held-karp"
    assert is_permutation(r.order, n)
    assert r.cost_s == pytest.approx(brute_force(c, "ring"), rel=1e-12)
    assert r.cost_s == pytest.approx(rank_cost(c, r.order, "ring"))


@pytest.mark.parametrize("algorithm", ["hd", "dbt"])
@pytest.mark.parametrize("n,seed", [(5, 1), (6, 2), (7, 3)])
def test_heuristic_not_worse_than_identity(algorithm, n, seed):
    c = np.random.default_rng(seed).random((n, n))
    r = reorder(c, algorithm, seed=seed)
    assert is_permutation(r.order, n)
    assert r.cost_s == pytest.approx(rank_cost(c, r.order, algorithm))
    assert r.baseline_cost_s == pytest.approx(rank_cost(c, np.arange(n), algorithm))
    assert r.cost_s <= r.baseline_cost_s
    assert r.cost_s >= brute_force(c, algorithm) - 1e-12


@pytest.mark.parametrize("n,base,seed", [(4, 2, 0), (4, 4, 1), (8, 2, 2)])
def test_bcube_heuristic_vs_brute_force(n, base, seed):
    c = np.random.default_rng(seed).random((n, n))
    r = reorder(c, "bcube", seed=seed, base=base)
    assert r.cost_s == pytest.approx(rank_cost(c, r.order, "bcube", base=base))
    assert brute_force(c, "bcube", base) - 1e-12 <= r.cost_s <= r.baseline_cost_s


@pytest.mark.parametrize("algorithm,racks,size", [
    ("ring", 2, 4), ("ring", 4, 2), ("hd", 2, 4), ("hd", 4, 2), ("dbt", 2, 4), ("dbt", 4, 2),
    ("bcube", 2, 4), ("hd", 2, 3), ("dbt", 3, 2),
])
def test_planted_equals_brute_force(algorithm, racks, size):
    c = planted(racks, size, seed=racks * 10 + size)
    r = reorder(c, algorithm, seed=1)
    assert r.cost_s == pytest.approx(brute_force(c, algorithm), rel=1e-12)


@pytest.mark.parametrize("racks,size,seed", [(3, 4, 0), (10, 6, 1), (25, 8, 2), (7, 1, 3)])
def test_planted_ring_closed_form(racks, size, seed):
    # The ring enters every rack at least once: >= R cross-rack hops (if R >= 2) and the
    # other n - R hops cost >= a; visiting racks one after the other attains it.
    c = planted(racks, size, seed)
    n = racks * size
    r = reorder(c, "ring", seed=seed)
    expected = racks * B + (n - racks) * A if racks > 1 else n * A
    assert r.cost_s == pytest.approx(expected, rel=1e-9)
    assert r.method.startswith("held-karp" if n <= 12 else "2opt+oropt")


@pytest.mark.parametrize("algorithm,m,k", [("hd", 4, 2), ("hd", 4, 1), ("bcube", 4, 3), ("hd", 5, 3)])
def test_planted_halving_doubling_closed_form(algorithm, m, k):
    # n = 2^m nodes in racks of 2^k: rounds with distance < 2^k stay in a rack when racks
    # occupy aligned rank blocks (cost a each), the other m - k rounds must cross racks (b).
    c = planted(2 ** (m - k), 2 ** k, seed=m + k)
    r = reorder(c, algorithm, seed=0)
    assert r.cost_s == pytest.approx(k * A + (m - k) * B, rel=1e-9)


def test_same_seed_same_result():
    c = np.random.default_rng(9).random((40, 40))
    for algorithm in ("ring", "hd", "dbt"):
        first = reorder(c, algorithm, seed=7)
        assert reorder(c, algorithm, seed=7) == first
    c = np.random.default_rng(9).random((16, 16))
    assert reorder(c, "bcube", seed=3, base=4) == reorder(c, "bcube", seed=3, base=4)


def test_ring_large_random_improves():
    c = np.random.default_rng(11).random((60, 60))
    r = reorder(c, "ring", seed=0)
    assert is_permutation(r.order, 60)
    assert r.cost_s == pytest.approx(rank_cost(c, r.order, "ring"))
    assert r.cost_s < 0.5 * r.baseline_cost_s


@pytest.mark.parametrize("kwargs", [
    {"algorithm": "star"}, {"algorithm": "ring", "time_limit_s": 0}, {"algorithm": "ring", "seed": 1.5},
    {"algorithm": "bcube", "base": 3},
])
def test_reorder_bad_options(kwargs):
    with pytest.raises(InvalidSpecError):
        reorder(np.ones((8, 8)), **kwargs)


def test_negative_seed_is_refused_naming_the_field():
    # Fuzzing: `codesign reorder m.csv --seed -5` reached numpy's default_rng (traceback).
    c = np.array([[0, 1e-6, 2e-6], [1e-6, 0, 1e-6], [2e-6, 1e-6, 0]])
    with pytest.raises(InvalidSpecError, match=r"invalid seed -5: expected an integer >= 0"):
        reorder(c, "ring", seed=-5)
