"""Cost models of collective algorithms under a rank order (cloud rank reordering, Section 4.1).

The paper ("cloud-collectives-rank-reordering", Section 4.2) drops the bandwidth
term and models every point-to-point transfer by its probed one-way latency, so a
cost model here is a function of a pairwise one-way cost matrix ``C`` (seconds,
``C[u, v]`` = cost of sending from node ``u`` to node ``v``; the diagonal is
ignored) and a rank order ``order`` (a permutation: ``order[k]`` is the node that
runs rank ``k``).  The cost between ranks ``a`` and ``b`` is
``C[order[a], order[b]]``.  All models count one pass of the algorithm (e.g. one
reduce-scatter or one allgather), exactly like the printed formulas; an allreduce
doubles every model and so leaves the best order unchanged.

Deviations from the printed formulas (index errors and gaps), each explained
where the model is built:

* ring -- none (the printed sum with rank ``N`` aliased to 0 is correct).
* halving-doubling -- partner ``j XOR 2^i`` instead of ``j + 2^i`` and max over all
  ``N`` ranks, not ``j = 0..N/2-1``; non-powers of two handled MPICH-style.
* double binary tree -- children at the midpoints of the half ranges (the printed
  ``(3i+j)/2 - 1`` and ``(i+3j)/2 + 1`` fall outside ``[i, j]``), no edge into an
  empty subtree, and the cost is the max over the two trees.
* BCube -- ``k = 1..B-1`` (the printed ``k = 1..B`` reaches ``j + B^{i+1}``, which is
  not a peer) and the peer replaces digit ``i`` of ``j`` instead of adding
  ``k B^i`` (which carries into the next digit); max over all ``N`` ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from codesign.errors import invalid
from codesign.units import MAX_TIME_S

__all__ = [
    "ALGORITHMS",
    "check_cost_matrix",
    "check_order",
    "cost_function",
    "rank_cost",
    "ring_cost",
]

#: Algorithm names accepted by :func:`rank_cost` / :func:`cost_function` (``rhd`` is an alias of ``hd``).
ALGORITHMS = ("ring", "hd", "dbt", "bcube")
_ALIASES = {"rhd": "hd", "halving-doubling": "hd", "double-binary-tree": "dbt"}


def check_cost_matrix(costs: object) -> np.ndarray:
    """Validate a pairwise one-way cost matrix and return it as a float array.

    Parameters
    ----------
    costs : array_like
        Square ``n x n`` matrix of one-way costs in seconds, ``n >= 2``; finite and
        non-negative (the diagonal is ignored but must be valid too).

    Returns
    -------
    numpy.ndarray
        ``float64`` copy of the matrix.

    Raises
    ------
    InvalidSpecError
        If the matrix is not square, too small, or holds NaN/inf/negative entries.
    """
    try:
        c = np.array(costs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise invalid("cost matrix", type(costs).__name__, "a square numeric matrix") from exc
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise invalid("cost matrix shape", c.shape, "a square n x n matrix")
    if c.shape[0] < 2:
        raise invalid("cost matrix size", c.shape[0], "at least 2 nodes")
    # (at most MAX_TIME_S: the sum of n costs, a ring's, then stays finite)
    bad = ~np.isfinite(c) | (c < 0) | (c > MAX_TIME_S)
    if bad.any():
        r, k = np.argwhere(bad)[0]
        raise invalid(f"cost matrix entry [row {r}, column {k}]", float(c[r, k]),
                      f"a non-negative cost in seconds, at most {MAX_TIME_S:g}")
    return c


def check_order(order: object, n: int) -> np.ndarray:
    """Validate a rank order (a permutation of ``0..n-1``) and return it as an int array."""
    o = np.asarray(order)
    if o.shape != (n,) or not np.issubdtype(o.dtype, np.integer) \
            or not np.array_equal(np.sort(o), np.arange(n)):
        raise invalid("rank order", o.tolist() if o.size <= 16 else f"array of shape {o.shape}",
                      f"a permutation of 0..{n - 1}")
    return o.astype(np.intp)


# ---------------------------------------------------------------------------------- ring


def ring_cost(costs: np.ndarray, order: np.ndarray) -> float:
    """Ring cost ``sum_k c(rank k -> rank k+1 mod N)`` in seconds (paper Section 4.1, "Ring").

    Parameters
    ----------
    costs : numpy.ndarray
        ``n x n`` one-way costs in seconds.
    order : numpy.ndarray
        Rank order, ``order[k]`` = node at rank ``k``.

    Returns
    -------
    float
        Sum of the ``n`` directed hop costs in seconds.
    """
    return _ring(np.asarray(costs, dtype=np.float64), np.asarray(order))


def _ring(c: np.ndarray, o: np.ndarray) -> float:
    # Printed formula is correct once rank N aliases to 0 (the paper's convention).
    return float(c[o, np.roll(o, -1)].sum())


# ---------------------------------------------------------------------- halving-doubling


@lru_cache(maxsize=64)
def _hd_plan(n: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Rank pairs of every round of recursive halving/doubling on ``n`` ranks.

    Each round is ``(src_ranks, dst_ranks)``; the round's cost is the max of
    ``C[order[src], order[dst]]``.

    Fix of the printed formula: round ``i`` pairs rank ``j`` with ``j XOR 2^i``
    (recursive halving/doubling, Thakur et al.), not ``j + 2^i`` for ``j < N/2``:
    the printed indices give e.g. pairs (0,1),(1,2) for N=4, i=0, whereas the
    algorithm exchanges (0,1),(2,3).  The exchange is in both directions, so we take
    the max over all N ranks ``j`` (both directions of every pair).

    Non-powers of two (MPICH / Rabenseifner): with ``p = 2^floor(log2 n)`` and
    ``r = n - p``, a first round has each even rank ``2k`` (``k < r``) send its data
    to rank ``2k + 1``; the ``p`` survivors (odd ranks ``< 2r`` and all ranks
    ``>= 2r``) run the power-of-two algorithm among themselves (survivor number
    ``s`` playing rank ``s``), and a last round sends the result back from
    ``2k + 1`` to ``2k``.  For ``n`` a power of two this is the plain algorithm.
    """
    p = 1 << (n.bit_length() - 1)
    r = n - p
    survivors = np.concatenate([np.arange(1, 2 * r, 2), np.arange(2 * r, n)]).astype(np.intp)
    rounds = []
    evens = np.arange(0, 2 * r, 2, dtype=np.intp)
    if r:
        rounds.append((evens, evens + 1))
    j = np.arange(p, dtype=np.intp)
    bit = 1
    while bit < p:
        rounds.append((survivors[j], survivors[j ^ bit]))
        bit <<= 1
    if r:
        rounds.append((evens + 1, evens))
    return tuple(rounds)


def _rounds_cost(c: np.ndarray, o: np.ndarray, plan) -> float:
    return float(sum(c[o[a], o[b]].max() for a, b in plan))


# -------------------------------------------------------------------- double binary tree


@lru_cache(maxsize=64)
def _dbt_plan(n: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Tree edges of ``T(0, n-1)`` grouped by depth, as (parent ranks, child ranks).

    Fix of the printed recursion: the root of ``T(i, j)`` is ``m = floor((i+j)/2)``
    and its children are the roots of the two halves ``[i, m-1]`` and ``[m+1, j]``,
    i.e. ``floor((i+m-1)/2)`` and ``floor((m+1+j)/2)``.  The printed indices
    ``(3i+j)/2 - 1`` and ``(i+3j)/2 + 1`` divide by 2 instead of 4 and lie outside
    ``[i, j]`` (for ``T(0, 7)`` they give -1 and 11).  The printed recursion also
    adds an edge into an empty half (``i > m-1``); we add no edge there.  The
    recursion's ``T`` is the max over root-to-leaf paths of the sum of
    parent->child costs, which we compute level by level.
    """
    parents: list[list[int]] = []
    children: list[list[int]] = []
    stack = [(0, n - 1, -1, 0)]  # (lo, hi, parent rank, depth)
    while stack:
        lo, hi, parent, depth = stack.pop()
        if lo > hi:
            continue
        m = (lo + hi) // 2
        if parent >= 0:
            while len(parents) < depth:
                parents.append([])
                children.append([])
            parents[depth - 1].append(parent)
            children[depth - 1].append(m)
        stack.append((lo, m - 1, m, depth + 1))
        stack.append((m + 1, hi, m, depth + 1))
    return tuple((np.array(p, dtype=np.intp), np.array(ch, dtype=np.intp))
                 for p, ch in zip(parents, children))


def _tree_cost(c: np.ndarray, o: np.ndarray, plan) -> float:
    dist = np.zeros(c.shape[0])
    for p, ch in plan:
        dist[ch] = dist[p] + c[o[p], o[ch]]
    return float(dist.max())


# ----------------------------------------------------------------------------- BCube


@lru_cache(maxsize=64)
def _bcube_plan(n: int, base: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(src ranks, dst ranks) of every BCube round with group size ``base``.

    Fix of the printed formula: in round ``i`` rank ``j`` talks to the ``B-1`` ranks
    that differ from ``j`` only in base-``B`` digit ``i``, i.e. digit ``d_i`` replaced
    by ``(d_i + k) mod B`` for ``k = 1..B-1``.  The printed ``c_{j, j+kB^i}`` with
    ``k = 1..B`` includes ``k = B`` (rank ``j + B^{i+1}``, outside the group) and
    carries into digit ``i+1`` when ``d_i + k >= B``; and the printed max over
    ``j = 0..N/B-1`` misses most ranks, so we take the max over all ``N`` ranks.
    """
    j = np.arange(n, dtype=np.intp)
    rounds = []
    stride = 1
    while stride < n:
        digit = (j // stride) % base
        src = np.tile(j, base - 1)
        dst = np.concatenate([j + (((digit + k) % base) - digit) * stride for k in range(1, base)])
        rounds.append((src, dst))
        stride *= base
    return tuple(rounds)


def _check_bcube(n: int, base: object) -> int:
    if isinstance(base, bool) or not isinstance(base, (int, np.integer)) or base < 2:
        raise invalid("bcube base", base, "an integer >= 2")
    m = 1
    while m < n:
        m *= int(base)
    if m != n:
        raise invalid("bcube node count", n, f"a power of the base {base} (or choose another base)")
    return int(base)


# ------------------------------------------------------------------------- front door


def canonical_algorithm(algorithm: str) -> str:
    """The registered name of a rank-cost ``algorithm`` (aliases resolved)."""
    name = _ALIASES.get(algorithm, algorithm)
    if name not in ALGORITHMS:
        raise invalid("algorithm", algorithm, "one of " + ", ".join(ALGORITHMS) + " (alias rhd = hd)")
    return name


def cost_function(n: int, algorithm: str, *, base: int = 2) -> Callable[[np.ndarray, np.ndarray], float]:
    """A fast ``f(costs, order) -> seconds`` for ``n`` ranks with precomputed index plans.

    No validation inside ``f`` (for search loops); validate inputs once with
    :func:`check_cost_matrix` / :func:`check_order`.

    Parameters
    ----------
    n : int
        Number of ranks.
    algorithm : str
        ``ring``, ``hd`` (alias ``rhd``), ``dbt`` or ``bcube``.
    base : int
        BCube group size (only for ``bcube``).
    """
    name = canonical_algorithm(algorithm)
    if name == "ring":
        return _ring
    if name == "hd":
        plan = _hd_plan(n)
        return lambda c, o: _rounds_cost(c, o, plan)
    if name == "dbt":
        # Tree 1 is T(0, N-1) over ranks (_dbt_plan), its cost the max over root-to-leaf
        # paths of the summed parent->child costs; tree 2 is the paper's mirrored tree, the
        # same structure with every rank decremented (r -> r-1 mod N: node order[r-1] =
        # roll(order, 1)[r]).  The cost is the max of the two trees ("the total cost is the
        # maximum cost of all trees"); the printed formula only states tree 1.
        plan = _dbt_plan(n)
        return lambda c, o: max(_tree_cost(c, o, plan), _tree_cost(c, np.roll(o, 1), plan))
    # BCube: sum over the log_B N rounds of the max cost between a rank and any of its
    # B - 1 peers of the round (_bcube_plan); N must be a power of B; B = 2 is hd.
    plan = _bcube_plan(n, _check_bcube(n, base))
    return lambda c, o: _rounds_cost(c, o, plan)


def rank_cost(costs: object, order: object, algorithm: str, *, base: int = 2) -> float:
    """Cost in seconds of running ``algorithm`` with rank order ``order`` over ``costs``.

    Parameters
    ----------
    costs : array_like
        ``n x n`` one-way costs in seconds (validated).
    order : array_like
        Permutation of ``0..n-1``; ``order[k]`` is the node at rank ``k`` (validated).
    algorithm : str
        ``ring``, ``hd`` (alias ``rhd``), ``dbt`` or ``bcube``.
    base : int
        BCube group size.

    Returns
    -------
    float
        Cost in seconds.
    """
    c = check_cost_matrix(costs)
    o = check_order(order, c.shape[0])
    return cost_function(c.shape[0], algorithm, base=base)(c, o)
