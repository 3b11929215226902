"""TotientPerms and SelectPermutations (TopoOpt NSDI'23, Sec. 4.3, Algorithms 2 and 3).

A *regular ring* over a group of ``k`` servers (positions ``0..k-1`` in the group's
own order) with generator ``p`` connects position ``i`` to ``(i + p) mod k``.  By
Theorem 2 (Appendix E.1) it is one cycle through all ``k`` positions -- a valid
ring-AllReduce order -- exactly when ``gcd(p, k) = 1``.  TotientPerms lists these
generators; SelectPermutations picks ``d_k`` of them close (in L1) to a geometric
sequence of ratio ``k^(1/d_k)`` so that the union of the rings has a small diameter
(Theorem 1: ``O(d_k k^(1/d_k))``, Appendix E.2, :func:`theorem1_diameter_bound`).
"""

from __future__ import annotations

from math import gcd, isqrt

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_int

__all__ = ["totient_perms", "ring_order", "ring_targets", "select_permutations",
           "theorem1_diameter_bound", "THEOREM1_CONSTANT"]

#: Constant ``C`` of :func:`theorem1_diameter_bound` (see its docstring).
THEOREM1_CONSTANT = 1.0


def _is_prime(p: int) -> bool:
    if p < 2:
        return False
    return all(p % q for q in range(2, isqrt(p) + 1))


def totient_perms(n: int, *, primes_only: bool = False) -> list[int]:
    """TotientPerms (Algorithm 2): the ring generators of a group of ``n`` servers.

    Every ``1 <= p < n`` with ``gcd(p, n) = 1`` (line 3); each describes a distinct
    ring ``S_i -> S_(i+p) mod n`` through all ``n`` servers (Theorem 2).

    Parameters
    ----------
    n : int
        Group size, >= 2.
    primes_only : bool, optional
        Keep only prime ``p`` (Sec. 4.3: "we restrict p to be a prime number",
        ``O(n / ln n)`` candidates).  ``p = 1`` is kept as well: it is the first
        term ``x^0`` of the geometric sequence SelectPermutations fits (App. E.2).

    Returns
    -------
    list of int
        Ascending generators.

    Examples
    --------
    >>> totient_perms(12)
    [1, 5, 7, 11]
    >>> totient_perms(12, primes_only=True)
    [1, 5, 7, 11]
    >>> totient_perms(16, primes_only=True)
    [1, 3, 5, 7, 11, 13]
    """
    n = check_int("totient_perms n", n, 2)
    gens = [p for p in range(1, n) if gcd(p, n) == 1]
    if primes_only:
        gens = [p for p in gens if p == 1 or _is_prime(p)]
    return gens


def ring_order(k: int, p: int) -> np.ndarray:
    """Positions visited by the ring with generator ``p``: ``0, p, 2p, ... (mod k)``.

    Examples
    --------
    >>> ring_order(5, 2).tolist()
    [0, 2, 4, 1, 3]
    """
    return (np.arange(k, dtype=np.int64) * int(p)) % k


def ring_targets(members, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Directed links ``members[i] -> members[(i + p) mod k]`` of one ring.

    ``members`` are server ids in the group's order (position ``i`` is
    ``members[i]``); returns ``(src, dst)`` arrays of length ``k``.
    """
    m = np.asarray(members, dtype=np.int64)
    return m, np.roll(m, -int(p) % m.size)


def select_permutations(n: int, perms, d_k: int, *, min_ratio: float = 1.0) -> list[int]:
    """SelectPermutations (Algorithm 3): ``d_k`` generators near a geometric sequence.

    Start from the smallest candidate ``q = P_k[0]`` (line 3), then ``d_k - 1`` times
    take the unused candidate closest in L1 to ``q * r`` and make it the new ``q``
    (lines 5-10), with ratio ``r = max(min_ratio, n^(1/d_k))`` (line 5's "ratio of the
    geometric sequence to fit"; ``min_ratio=2`` is App. E.2's advice for
    ``n^(1/d) < 2``).  Ties go to the smaller candidate.

    Parameters
    ----------
    n : int
        Group size (the ring positions are ``0..n-1``).
    perms : sequence of int
        Candidate generators (TotientPerms output).
    d_k : int
        How many to choose, ``1 <= d_k <= len(perms)``.
    min_ratio : float, optional
        Lower limit of the ratio (default 1: the ratio as printed).

    Returns
    -------
    list of int
        The chosen generators in the order chosen.

    Examples
    --------
    >>> select_permutations(12, totient_perms(12), 2)    # 1, then closest to 12^(1/2)
    [1, 5]
    >>> select_permutations(64, totient_perms(64), 3)    # 1, ~4, ~16
    [1, 3, 11]
    """
    cands = sorted(set(int(p) for p in perms))
    if isinstance(d_k, bool) or not isinstance(d_k, (int, np.integer)) \
            or not 1 <= d_k <= len(cands):
        raise invalid("select_permutations d_k", d_k,
                      f"an integer from 1 to {len(cands)} (the number of candidate generators "
                      f"for n={n})")
    ratio = max(float(min_ratio), float(n) ** (1.0 / int(d_k)))
    q = cands[0]
    chosen = [q]
    left = np.array(cands[1:], dtype=np.float64)
    for _ in range(int(d_k) - 1):
        target = q * ratio
        i = int(np.argmin(np.abs(left - target)))   # first minimum: the smaller candidate
        q = int(left[i])
        chosen.append(q)
        left = np.delete(left, i)
    return chosen


def theorem1_diameter_bound(n: int, d: int, *, constant: float = THEOREM1_CONSTANT) -> float:
    """Theorem 1's diameter bound ``C * d' * x`` for the rings of SelectPermutations.

    App. E.2: with ``x = n^(1/d)`` and the generators ``1, x, ..., x^(d-1)`` every
    distance ``m < n`` is a sum of at most ``d (x - 1)`` of them (greedy, one base-``x``
    digit per generator), so the diameter is ``O(d n^(1/d))``; when ``x < 2`` the
    appendix uses ``x = 2`` and ``d' = ceil(log2 n)`` generators.  Here
    ``d' = min(d, ceil(log2 n))`` and ``x = max(2, n^(1/d'))``.  The generators
    actually chosen are projections of the sequence onto the co-prime candidates
    (not exact powers), which the proof does not cover ("under certain
    assumptions"); still, ``C = 1`` (:data:`THEOREM1_CONSTANT`) holds for every
    ``n = 4..600`` and ``d = 1..8`` with the printed ratio (largest diameter /
    ``d' x`` = 0.998, the single ring ``d = 1``), checked in
    ``tests/topologies/test_topoopt.py``.

    Examples
    --------
    >>> round(theorem1_diameter_bound(1000, 3), 6)      # 3 * 10
    30.0
    """
    n = check_int("theorem1 n", n, 2)
    d = check_int("theorem1 d", d, 1)
    d_eff = min(d, max(1, int(np.ceil(np.log2(n)))))
    x = max(2.0, float(n) ** (1.0 / d_eff))
    return constant * d_eff * x
