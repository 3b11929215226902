"""Cloud-aware rank reordering (cloud-collectives-rank-reordering, Section 4.3).

Given a pairwise one-way cost matrix (seconds) and a collective algorithm, find a
rank order (``order[k]`` = node at rank ``k``) that minimises the algorithm's cost
model (:mod:`evaluators.rank_cost`, Section 4.1).

The paper runs simulated annealing with "permuting a random sub-array, permuting
random pairs" moves and a timeout, then hands the incumbent to an SMT solver.  We
keep the annealing stage for every algorithm (:func:`_anneal`, plus a swap descent
polish) and, instead of an SMT solver, use the fact that the ring model is an
asymmetric travelling-salesman tour: Held-Karp dynamic programming (exact) for
``n <= 12``, otherwise nearest-neighbour start + 2-opt/Or-opt local search with
O(1) delta evaluation (vectorised over one endpoint) and seeded double-bridge
kicks.  No optional TSP package is used: the local search reaches the planted
optimum for 512 nodes well inside the time limit, so a dependency buys nothing.

Determinism: every run is a function of ``(matrix, algorithm, seed)`` as long as the
time limit is not reached (iteration budgets are fixed; the time limit only cuts a
run short as a safety net).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from codesign.errors import invalid
from evaluators.rank_cost import _canonical, check_cost_matrix, cost_function

__all__ = ["CostMatrix", "ReorderResult", "load_cost_matrix", "reorder", "HELD_KARP_MAX_N"]

#: Largest node count solved exactly by Held-Karp for the ring.
HELD_KARP_MAX_N = 12


@dataclass(frozen=True)
class ReorderResult:
    """Outcome of :func:`reorder`.

    Attributes
    ----------
    order : tuple of int
        ``order[k]`` is the node (row of the matrix) that should run rank ``k``.
    cost_s : float
        Cost model of ``order`` in seconds (never above ``baseline_cost_s``).
    baseline_cost_s : float
        Cost model of the identity order ``0..n-1`` in seconds.
    method : str
        ``held-karp`` (exact), ``2opt+oropt`` or ``anneal``.
    """

    order: tuple[int, ...]
    cost_s: float
    baseline_cost_s: float
    method: str


class CostMatrix(NamedTuple):
    """A cost matrix read by :func:`load_cost_matrix`: ``costs`` (seconds) and node ``names``."""

    costs: np.ndarray
    names: tuple[str, ...]


# ------------------------------------------------------------------------------ CSV


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def load_cost_matrix(path: str | Path) -> CostMatrix:
    """Read a square CSV of pairwise one-way costs in seconds.

    The first row is a header of node names if the file has one row more than
    columns and that row has a non-numeric cell or only plain integers (node ids).  Without a header the
    names are ``"0".."n-1"``.  Blank lines are skipped; cells are stripped.

    Parameters
    ----------
    path : str or Path
        CSV file.

    Returns
    -------
    CostMatrix
        ``costs`` (``n x n`` float array, seconds) and ``names`` (``n`` strings).

    Raises
    ------
    InvalidSpecError
        Unreadable file, ragged or non-square table, or a non-numeric, NaN, infinite
        or negative cell (the message names row and column, 1-based data rows).
    """
    p = Path(path)
    try:
        with p.open(newline="") as fh:
            rows = [[cell.strip() for cell in row] for row in csv.reader(fh)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise invalid("cost matrix file", str(p), f"a readable CSV file ({exc})") from exc
    rows = [r for r in rows if any(cell for cell in r)]
    if not rows:
        raise invalid("cost matrix file", str(p), "a non-empty square CSV of costs in seconds")
    width = len(rows[0])
    # A header only if it leaves a square table: then a bad cell in the first data row of a
    # headerless file is reported as a bad cell, not as a strange header.  Integer-looking
    # names ("0", "17") count as node ids; names with other numbers are read as data.
    header = len(rows) == width + 1 and (any(_number(cell) is None for cell in rows[0])
                                         or all(cell.isdigit() for cell in rows[0]))
    names = tuple(rows[0]) if header else tuple(str(i) for i in range(width))
    data = rows[1:] if header else rows
    if header and len(set(names)) != len(names):
        raise invalid("cost matrix header", ",".join(names), "distinct node names")
    for i, row in enumerate(data, start=1):
        if len(row) != width:
            raise invalid(f"cost matrix row {i} length", len(row), f"{width} columns like the first row")
    if len(data) != width:
        raise invalid("cost matrix shape", f"{len(data)} rows x {width} columns",
                      "a square matrix (as many data rows as columns)")
    if width < 2:
        raise invalid("cost matrix size", width, "at least 2 nodes")
    costs = np.empty((width, width))
    for i, row in enumerate(data):
        for j, cell in enumerate(row):
            v = _number(cell)
            if v is None or not np.isfinite(v) or v < 0:
                raise invalid(f"cost matrix cell (row {i + 1}, column {names[j]!s})", cell,
                              "a finite non-negative number of seconds")
            costs[i, j] = v
    return CostMatrix(costs, names)


# ------------------------------------------------------------------------ ring: exact


def _held_karp(c: np.ndarray) -> np.ndarray:
    """Exact minimum directed Hamiltonian cycle (Held-Karp DP), tour starting at node 0.

    ``dp[S, j]`` = cheapest path from node 0 through the node set ``S`` (bits over
    nodes ``1..n-1``) ending at ``j``; each mask is vectorised over ``j`` and the
    predecessor ``k``.  O(2^n n^2) time, O(2^n n) memory: fine for n <= 12.
    """
    n = c.shape[0]
    m = n - 1
    inner = c[1:, 1:]
    full = 1 << m
    dp = np.full((full, m), np.inf)
    parent = np.full((full, m), -1, dtype=np.int64)
    bits = np.arange(m)
    for j in range(m):
        dp[1 << j, j] = c[0, j + 1]
    for mask in range(1, full):
        js = bits[(mask >> bits) & 1 == 1]
        if js.size < 2:
            continue
        prev = mask ^ (1 << js)                    # one predecessor set per end node j
        vals = dp[prev] + inner[:, js].T           # [j, k]: reach k in prev, then k -> j
        k = vals.argmin(axis=1)
        dp[mask, js] = vals[np.arange(js.size), k]
        parent[mask, js] = k
    last = int(np.argmin(dp[full - 1] + c[1:, 0]))
    tour = []
    mask = full - 1
    while last >= 0:
        tour.append(last + 1)
        mask, last = mask ^ (1 << last), int(parent[mask, last])
    return np.array([0] + tour[::-1], dtype=np.intp)


# ---------------------------------------------------------------- ring: local search


def _nearest_neighbour(c: np.ndarray, start: int = 0) -> np.ndarray:
    n = c.shape[0]
    seen = np.zeros(n, dtype=bool)
    tour = np.empty(n, dtype=np.intp)
    cur = start
    for k in range(n):
        tour[k] = cur
        seen[cur] = True
        if k + 1 < n:
            row = np.where(seen, np.inf, c[cur])
            cur = int(np.argmin(row))
    return tour


def _two_opt_pass(c: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, bool]:
    """One first-improvement sweep of asymmetric 2-opt; returns (tour, improved).

    Reversing ``t[i+1..j]`` replaces edges ``(t_i, t_{i+1})``, ``(t_j, t_{j+1})`` and
    the forward inner edges by ``(t_i, t_j)``, ``(t_{i+1}, t_{j+1})`` and the
    backward inner edges; prefix sums of forward and backward edge costs make each
    delta O(1), evaluated for all ``j`` at once.
    """
    n = t.size
    improved = False
    i = 0
    while i < n - 2:
        nxt = np.roll(t, -1)
        fwd = c[t, nxt]
        bwd = c[nxt, t]
        F = np.concatenate([[0.0], np.cumsum(fwd)])
        B = np.concatenate([[0.0], np.cumsum(bwd)])
        j = np.arange(i + 2, n)
        tj1 = t[(j + 1) % n]
        delta = (c[t[i], t[j]] + c[t[i + 1], tj1] - fwd[i] - fwd[j]
                 + (B[j] - B[i + 1]) - (F[j] - F[i + 1]))
        k = int(np.argmin(delta))
        if delta[k] < -1e-12 * max(1.0, abs(fwd.sum())):
            jj = int(j[k])
            t = np.concatenate([t[:i + 1], t[i + 1:jj + 1][::-1], t[jj + 1:]])
            improved = True
        else:
            i += 1
    return t, improved


def _or_opt_pass(c: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, bool]:
    """One sweep of Or-opt: move a segment of 1-3 nodes elsewhere (no reversal)."""
    n = t.size
    improved = False
    for length in (1, 2, 3):
        if n < length + 3:
            break
        i = 0
        while i < n:
            seg = t[np.arange(i, i + length) % n]
            rest = np.concatenate([t[i + length:], t[:i]]) if i + length <= n else t[(i + length) % n:i]
            # rest is the tour with the segment removed, starting after the segment.
            a, b = rest[-1], rest[0]
            removed = c[a, seg[0]] + c[seg[-1], b] - c[a, b]
            p = rest
            q = np.roll(rest, -1)
            gain = c[p, seg[0]] + c[seg[-1], q] - c[p, q]
            gain[-1] = np.inf                       # re-inserting between a and b is a no-op
            k = int(np.argmin(gain))
            if gain[k] - removed < -1e-12 * max(1.0, removed):
                t = np.concatenate([rest[:k + 1], seg, rest[k + 1:]])
                improved = True
            else:
                i += 1
    return t, improved


def _local_search(c: np.ndarray, t: np.ndarray, deadline: float) -> np.ndarray:
    improved = True
    while improved and time.monotonic() < deadline:
        t, a = _two_opt_pass(c, t)
        t, b = _or_opt_pass(c, t)
        improved = a or b
    return t


def _double_bridge(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = t.size
    a, b, d = np.sort(rng.choice(np.arange(1, n), size=3, replace=False))
    return np.concatenate([t[:a], t[b:d], t[a:b], t[d:]])


def _ring_search(c: np.ndarray, rng: np.random.Generator, deadline: float, kicks: int,
                 patience: int = 8) -> np.ndarray:
    """Iterated local search: stops after ``kicks`` kicks or ``patience`` kicks in a row
    without improvement (a fixed, seed-determined budget, so runs are reproducible)."""
    ring = cost_function(c.shape[0], "ring")
    best = _local_search(c, _nearest_neighbour(c, int(rng.integers(c.shape[0]))), deadline)
    best_cost = ring(c, best)
    if c.shape[0] < 8:
        return best
    stall = 0
    for _ in range(kicks):
        if time.monotonic() >= deadline or stall >= patience:
            break
        cand = _local_search(c, _double_bridge(best, rng), deadline)
        cost = ring(c, cand)
        if cost < best_cost - 1e-12 * max(1.0, best_cost):
            best, best_cost, stall = cand, cost, 0
        else:
            stall += 1
    return best


# ------------------------------------------------------------- any algorithm: anneal


def _anneal(c, cost, start, rng, deadline, iterations):
    """Simulated annealing over permutations (paper Section 4.3): random pair swaps and
    random sub-array reversals, geometric cooling, best state kept."""
    n = start.size
    cur = start.copy()
    cur_cost = cost(c, cur)
    best, best_cost = cur.copy(), cur_cost
    # Initial temperature: mean uphill move of a few random swaps.
    ups = []
    for _ in range(32):
        i, j = rng.choice(n, size=2, replace=False)
        cand = cur.copy()
        cand[[i, j]] = cand[[j, i]]
        d = cost(c, cand) - cur_cost
        if d > 0:
            ups.append(d)
    t0 = float(np.mean(ups)) if ups else 0.0
    if t0 <= 0:
        return best, best_cost
    alpha = (1e-3) ** (1.0 / max(1, iterations))
    temp = t0
    for it in range(iterations):
        if it % 256 == 0 and time.monotonic() >= deadline:
            break
        i, j = np.sort(rng.choice(n, size=2, replace=False))
        cand = cur.copy()
        if rng.random() < 0.5:
            cand[[i, j]] = cand[[j, i]]
        else:
            cand[i:j + 1] = cand[i:j + 1][::-1]
        cand_cost = cost(c, cand)
        d = cand_cost - cur_cost
        if d <= 0 or rng.random() < np.exp(-d / temp):
            cur, cur_cost = cand, cand_cost
            if cur_cost < best_cost:
                best, best_cost = cur.copy(), cur_cost
        temp *= alpha
    return best, best_cost


def _swap_descent(c, cost, order, order_cost, deadline):
    """First-improvement pair-swap descent (polishes the annealing result)."""
    n = order.size
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for i in range(n - 1):
            for j in range(i + 1, n):
                cand = order.copy()
                cand[[i, j]] = cand[[j, i]]
                cc = cost(c, cand)
                if cc < order_cost:
                    order, order_cost, improved = cand, cc, True
            if time.monotonic() >= deadline:
                break
    return order, order_cost


# ------------------------------------------------------------------------ front door


def reorder(matrix: object, algorithm: str, *, seed: int = 0, time_limit_s: float = 10.0,
            base: int = 2) -> ReorderResult:
    """Find a rank order minimising ``algorithm``'s cost model over ``matrix``.

    Parameters
    ----------
    matrix : array_like
        ``n x n`` pairwise one-way costs in seconds (``matrix[u, v]``: u sends to v),
        e.g. ``load_cost_matrix(path).costs``.
    algorithm : str
        ``ring``, ``hd`` (alias ``rhd``), ``dbt`` or ``bcube``.
    seed : int
        Seed of the randomized search; same seed, same result (unless the time limit
        cuts the run short).
    time_limit_s : float
        Wall-clock budget in seconds (> 0).  Held-Karp is not interrupted (it takes
        well under a second for n <= 12).
    base : int
        BCube group size ``B`` (``n`` must be a power of ``B``).

    Returns
    -------
    ReorderResult
        Best order found, its cost, the identity order's cost and the method:
        ring with ``n <= 12`` -> ``held-karp`` (exact); ring otherwise ->
        ``2opt+oropt`` (nearest neighbour + 2-opt/Or-opt + double-bridge kicks);
        ``hd``/``dbt``/``bcube`` -> ``anneal`` (simulated annealing + swap descent).

    Raises
    ------
    InvalidSpecError
        Bad matrix, unknown algorithm, bad option.
    """
    c = check_cost_matrix(matrix)
    name = _canonical(algorithm)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise invalid("seed", seed, "an integer")
    if not isinstance(time_limit_s, (int, float)) or not time_limit_s > 0 or not np.isfinite(time_limit_s):
        raise invalid("time_limit_s", time_limit_s, "a positive number of seconds")
    n = c.shape[0]
    cost = cost_function(n, name, base=base)
    deadline = time.monotonic() + float(time_limit_s)
    rng = np.random.default_rng(seed)
    identity = np.arange(n, dtype=np.intp)
    baseline = cost(c, identity)
    if name == "ring" and n <= HELD_KARP_MAX_N:
        order, method = _held_karp(c), "held-karp"
    elif name == "ring":
        order, method = _ring_search(c, rng, deadline, kicks=min(200, 4 * n)), "2opt+oropt"
    else:
        start = _nearest_neighbour(c, int(rng.integers(n)))
        if cost(c, start) > baseline:
            start = identity
        iterations = max(4000, 40 * n)
        order, order_cost = _anneal(c, cost, start, rng, deadline, iterations)
        if n <= 64:
            order, order_cost = _swap_descent(c, cost, order, order_cost, deadline)
        method = "anneal"
    order_cost = cost(c, order)
    if order_cost > baseline:   # never return something worse than doing nothing
        order, order_cost = identity, baseline
    return ReorderResult(tuple(int(v) for v in order), float(order_cost), float(baseline), method)
