"""Cost models of evaluators.rank_cost against hand calculations on small matrices."""


import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.rank_cost import rank_cost, ring_cost


def halving_doubling_cost(c, order):
    return rank_cost(c, order, "hd")


def double_binary_tree_cost(c, order):
    return rank_cost(c, order, "dbt")


def bcube_cost(c, order, base):
    return rank_cost(c, order, "bcube", base=base)

# C[u, v] = 10 (u + 1) + (v + 1): every entry distinct, so a wrong index changes the result.
C4 = np.array([[0, 12, 13, 14], [21, 0, 23, 24], [31, 32, 0, 34], [41, 42, 43, 0]], dtype=float)
ORDER = np.array([2, 0, 3, 1])  # rank k runs node ORDER[k]


def test_ring_hand():
    # ranks 0->1->2->3->0 are nodes 2->0->3->1->2: 31 + 14 + 42 + 23
    assert ring_cost(C4, ORDER) == 110
    assert ring_cost(C4, np.arange(4)) == 12 + 23 + 34 + 41


def test_halving_doubling_hand():
    # round 1 (distance 1): rank pairs (0,1),(2,3) = nodes (2,0),(3,1): max(31,13,42,24) = 42
    # round 2 (distance 2): rank pairs (0,2),(1,3) = nodes (2,3),(0,1): max(34,43,12,21) = 43
    assert halving_doubling_cost(C4, ORDER) == 42 + 43
    # The printed j + 2^i indexing would use pair (1,2) in round 1 instead of (2,3).
    assert halving_doubling_cost(C4, np.arange(4)) == max(12, 21, 34, 43) + max(13, 31, 24, 42)


def test_halving_doubling_non_power_of_two_hand():
    # n = 3: rank 0 -> 1 (12), then ranks 1 <-> 2 exchange (max(23, 32)), then 1 -> 0 (21)
    c3 = C4[:3, :3]
    assert halving_doubling_cost(c3, np.arange(3)) == 12 + 32 + 21
    # n = 6: p = 4, r = 2: pre (0->1, 2->3), survivors 1,3,4,5, then post (1->0, 3->2)
    c6 = np.arange(36, dtype=float).reshape(6, 6)
    pre = max(c6[0, 1], c6[2, 3])
    r1 = max(c6[1, 3], c6[3, 1], c6[4, 5], c6[5, 4])
    r2 = max(c6[1, 4], c6[4, 1], c6[3, 5], c6[5, 3])
    post = max(c6[1, 0], c6[3, 2])
    assert halving_doubling_cost(c6, np.arange(6)) == pre + r1 + r2 + post


def test_double_binary_tree_hand():
    # T(0,3): root 1, children 0 and 2, 2 has child 3.  Tree 1 (nodes): 0->2 (13); 0->3->1 (14+42)
    # Mirror (rank r-1 at position r): ranks 0->3 = nodes 2->1 (32); ranks 0->1->2 = 2->0->3 (31+14)
    assert double_binary_tree_cost(C4, ORDER) == max(13, 14 + 42, 32, 31 + 14)


def test_double_binary_tree_mirror_counts():
    c = np.zeros((4, 4))
    c[0, 3] = 100.0  # only the mirrored tree has the edge rank 0 -> rank 3
    assert double_binary_tree_cost(c, np.arange(4)) == 100.0
    c = np.zeros((4, 4))
    c[2, 3] = 5.0
    c[1, 2] = 7.0    # tree 1 path 1 -> 2 -> 3
    assert double_binary_tree_cost(c, np.arange(4)) == 12.0


def test_double_binary_tree_eight_hand():
    # T(0,7): root 3; left [0,2] root 1 (children 0, 2); right [4,7] root 5 (children 4, 6->7).
    c = np.zeros((8, 8))
    c[3, 5], c[5, 6], c[6, 7] = 1.0, 2.0, 4.0
    assert double_binary_tree_cost(c, np.arange(8)) == 7.0
    c[3, 1], c[1, 0] = 3.0, 5.0
    assert double_binary_tree_cost(c, np.arange(8)) == 8.0


def test_bcube_hand():
    # B = 4, n = 4: one round, every rank talks to the 3 others: max of all off-diagonal
    assert bcube_cost(C4, ORDER, base=4) == 43
    # B = 2 is halving-doubling
    assert bcube_cost(C4, ORDER, base=2) == halving_doubling_cost(C4, ORDER)


def _bcube_oracle(c, order, base):
    n = len(order)
    digits = int(round(np.log(n) / np.log(base)))
    total = 0.0
    for i in range(digits):
        worst = 0.0
        for j in range(n):
            ds = [(j // base**t) % base for t in range(digits)]
            for d in range(base):
                if d != ds[i]:
                    peer = sum((d if t == i else ds[t]) * base**t for t in range(digits))
                    worst = max(worst, c[order[j], order[peer]])
        total += worst
    return total


@pytest.mark.parametrize("n,base", [(9, 3), (16, 4), (8, 2), (27, 3)])
def test_bcube_against_digit_oracle(n, base):
    rng = np.random.default_rng(n)
    c = rng.random((n, n))
    order = rng.permutation(n)
    assert bcube_cost(c, order, base=base) == pytest.approx(_bcube_oracle(c, order, base))


def test_relabelling_invariance():
    # Relabelling the nodes and the order together leaves every model unchanged.
    rng = np.random.default_rng(5)
    c = rng.random((8, 8))
    order = rng.permutation(8)
    sigma = rng.permutation(8)
    inv = np.argsort(sigma)
    c2 = c[np.ix_(inv, inv)]          # node u of c is node sigma[u] of c2
    for alg in ("ring", "hd", "dbt", "bcube"):
        assert rank_cost(c, order, alg) == pytest.approx(rank_cost(c2, sigma[order], alg))


@pytest.mark.parametrize("bad", [
    lambda: rank_cost(np.ones((3, 4)), [0, 1, 2], "ring"),
    lambda: rank_cost(np.array([[0, -1.0], [1, 0]]), [0, 1], "ring"),
    lambda: rank_cost(np.array([[0, np.nan], [1, 0]]), [0, 1], "ring"),
    lambda: rank_cost(np.ones((3, 3)), [0, 0, 1], "ring"),
    lambda: rank_cost(np.ones((3, 3)), [0, 1, 2], "mesh"),
    lambda: rank_cost(np.ones((6, 6)), list(range(6)), "bcube", base=4),
    lambda: rank_cost(np.ones((4, 4)), list(range(4)), "bcube", base=1),
])
def test_bad_input_raises(bad):
    with pytest.raises(InvalidSpecError):
        bad()


def test_alias_rhd():
    assert rank_cost(C4, ORDER, "rhd") == rank_cost(C4, ORDER, "hd")
