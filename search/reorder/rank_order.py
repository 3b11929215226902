"""Cloud-aware rank reordering (cloud-collectives-rank-reordering, Section 4.3).

Given a pairwise one-way cost matrix (seconds) and a collective algorithm, find a
rank order (``order[k]`` = node at rank ``k``) that minimises the algorithm's cost
model (:mod:`evaluators.rank_cost`, Section 4.1).

The paper runs a two-stage search: simulated annealing with "permuting a random
sub-array, permuting random pairs" moves and a timeout, then hands the incumbent
``C_0`` to an SMT solver (Z3) that keeps running to find a better order or prove
there is none.  We keep the annealing stage for ``hd``/``dbt``/``bcube``
(:func:`_anneal`, plus a swap descent polish).  The ring model
(:func:`evaluators.rank_cost.ring_cost`) is a plain *sum* of the ``n`` directed hop
costs -- not a bottleneck max -- so it is exactly an asymmetric travelling-salesman
tour over the one-way cost matrix, and for it we use TSP machinery:

1. ``n <= 12``: Held-Karp dynamic programming (exact).
2. Otherwise a fast seeded heuristic: nearest-neighbour start + 2-opt/Or-opt local
   search with O(1) delta evaluation (vectorised over one endpoint); without the
   solver stage it is followed by seeded double-bridge kicks.
3. The paper's second stage, with a solver built for the problem instead of Z3:
   OR-tools' CP-SAT with a ``circuit`` constraint (:func:`improve_ring_order`),
   hinted with the heuristic tour.  CP-SAT proves optimality when it can (its LP
   relaxation of the circuit gives a lower bound), and with one worker and a
   *deterministic-time* budget it is reproducible; the wall-clock limit is only a
   safety net.  It replaces the kicks, which at 512 nodes cost ~3 s and found
   nothing on the benchmark instances.

Why CP-SAT and not OR-tools' routing library (the issue's suggestion) or LKH
(``elkai``): on a random asymmetric 100-node matrix the routing library's guided
local search, started from our tour, was still 62 % above the optimum after 10 s
(and it is reproducible only through a solution limit, ~5 ms per solution here),
whereas CP-SAT proved the optimum in under 3 s; ``elkai`` wraps LKH, whose licence
forbids commercial use, and exposes neither a time limit nor a starting tour.

Integer costs: CP-SAT needs integers, so arc costs are scaled by
``10**9 / max(cost)`` and rounded; each arc is off by at most ``0.5e-9 * max(cost)``
seconds, a tour by at most ``0.5e-9 * n * max(cost)``, so the solver's tour is within
``1e-9 * n * max(cost)`` of the optimum over its arcs.  Every tour is re-evaluated
with the float cost function and the better of (heuristic tour, solver tour) is kept.

Candidate arcs: all ``n (n - 1)`` arcs for ``n <= 40`` (then ``optimal`` means
optimal); otherwise each node's 12 cheapest outgoing and 12 cheapest incoming arcs
(equal costs broken by a seeded random key, so planted instances with many ties do
not all point at the lowest node ids) plus the heuristic tour's arcs, and
``optimal`` is reported as ``candidate-optimal`` (optimal over those arcs only).

Determinism: every run is a function of ``(matrix, algorithm, seed, time_limit_s,
solver options)`` as long as no wall-clock limit is reached (iteration budgets and
the CP-SAT deterministic-time budget are fixed; the time limits only cut a run short
as a safety net).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from codesign.errors import invalid
from codesign.units import MAX_TIME_S
from codesign.specs import check_choice, check_int, check_number
from evaluators.rank_cost import (
    canonical_algorithm, check_cost_matrix, check_order, cost_function, ring_cost)

__all__ = ["CostMatrix", "ReorderResult", "RingImprovement", "load_cost_matrix", "reorder",
           "improve_ring_order", "is_header", "HELD_KARP_MAX_N", "SOLVERS"]

#: Largest node count solved exactly by Held-Karp for the ring.
HELD_KARP_MAX_N = 12
#: Values of ``reorder(..., solver=)``: the ring improvement stage, or none.
SOLVERS = ("cp-sat", "none")
#: Largest node count for which CP-SAT gets every arc (above: nearest-neighbour arcs).
CIRCUIT_COMPLETE_MAX_N = 40
#: Cheapest outgoing and incoming arcs per node kept as CP-SAT candidates above that size.
CIRCUIT_NEIGHBOURS = 12
#: Integer range of the scaled arc costs (the largest cost maps to this).
_COST_SCALE = 10**9
#: Default CP-SAT deterministic-time budget as a fraction of ``time_limit_s``
#: (one unit took 2-9 s of wall clock at n = 60..512 on the shared 2-core dev machine).
_EFFORT_PER_SECOND = 0.1
#: Share of the CP-SAT budget given to the proving solve (the rest improves).
_PROVE_SHARE = 0.25
#: Share of ``time_limit_s`` the heuristic may use before the solver stage (safety net).
_HEURISTIC_SHARE = 0.5


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
        Stages that ran, joined by ``+``: ``held-karp`` (exact); ``2opt+oropt``
        (heuristic with kicks, no solver); ``2opt+oropt+cp-sat:STATUS`` with the
        :class:`RingImprovement` status of the solver stage; or ``anneal``.
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


def is_header(cells) -> bool:
    """Whether a first CSV row is node names: some cell is not a number, or every cell is
    a plain integer (node ids); other numbers are data (the rule of both
    :func:`load_cost_matrix` and :func:`search.reorder.probe.save_cost_matrix`)."""
    return any(_number(c) is None for c in cells) or all(c.isdigit() for c in cells)


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
        ``path`` not a path, unreadable file, ragged or non-square table, or a
        non-numeric, NaN, infinite or negative cell (the message names row and column,
        1-based data rows).
    """
    from codesign.files import read_text

    # read_text first: it refuses a non-path (None, 5) with one line; Path() would not.
    text = read_text(path, what="cost matrix file")
    p = Path(path)
    try:
        rows = [[cell.strip() for cell in row] for row in csv.reader(text.splitlines())]
    except csv.Error as exc:
        raise invalid("cost matrix file", str(p), f"a readable CSV file ({exc})") from None
    rows = [r for r in rows if any(cell for cell in r)]
    if not rows:
        raise invalid("cost matrix file", str(p), "a non-empty square CSV of costs in seconds")
    width = len(rows[0])
    # A header only if it leaves a square table: then a bad cell in the first data row of a
    # headerless file is reported as a bad cell, not as a strange header.  Integer-looking
    # names ("0", "17") count as node ids; names with other numbers are read as data.
    header = len(rows) == width + 1 and is_header(rows[0])
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
            if v is None or not 0 <= v <= MAX_TIME_S:   # (NaN fails too)
                raise invalid(f"cost matrix cell (row {i + 1}, column {names[j]!s})", cell,
                              f"a non-negative number of seconds, at most {MAX_TIME_S:g}")
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


# ------------------------------------------------------------------ ring: CP-SAT stage


class RingImprovement(NamedTuple):
    """Outcome of :func:`improve_ring_order`.

    Attributes
    ----------
    order : tuple of int
        The better of the start order and the solver's tour (the start order on ties).
    cost_s : float
        Ring cost of ``order`` in seconds (float re-evaluation, never above ``start_cost_s``).
    start_cost_s : float
        Ring cost of the start order in seconds.
    status : str
        ``optimal`` (proved optimal over all arcs, up to the integer rounding),
        ``candidate-optimal`` (proved optimal over the candidate arcs only),
        ``feasible`` (budget reached first), ``no-solution`` (the solver returned no
        tour, e.g. out of time: the start order is kept) or ``unavailable``
        (OR-tools cannot be imported: the start order is kept).
    """

    order: tuple[int, ...]
    cost_s: float
    start_cost_s: float
    status: str


def _candidate_mask(c: np.ndarray, tour: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Boolean ``n x n`` mask of the arcs given to CP-SAT, and whether it holds all of them."""
    n = c.shape[0]
    off = ~np.eye(n, dtype=bool)
    if n <= CIRCUIT_COMPLETE_MAX_N or 2 * CIRCUIT_NEIGHBOURS >= n - 1:
        return off, True
    k = CIRCUIT_NEIGHBOURS
    cost = np.where(off, c, np.inf)
    tie = rng.random((n, n))    # seeded tie-break: equal costs must not all pick low ids
    mask = np.zeros((n, n), dtype=bool)
    rows = np.arange(n)[:, None]
    mask[rows, np.lexsort((tie, cost), axis=1)[:, :k]] = True        # k cheapest out-arcs
    mask[np.lexsort((tie.T, cost.T), axis=1)[:, :k], rows] = True    # k cheapest in-arcs
    mask[tour, np.roll(tour, -1)] = True                             # the hint stays feasible
    return mask & off, False


def _cpsat_ring(c: np.ndarray, tour: np.ndarray, *, seed: int, effort: float, deadline: float,
                rng: np.random.Generator) -> tuple[np.ndarray | None, str]:
    """Minimum-cost Hamiltonian circuit with CP-SAT, hinted with ``tour``.

    Two solves of one model, both with one worker and a deterministic-time budget:

    1. *prove* (``_PROVE_SHARE`` of ``effort``): linearization level 2, whose circuit
       cuts (subtour elimination) give a strong LP bound -- on rack-structured
       matrices it proves the hint optimal in a fraction of the budget;
    2. *improve* (the rest): linearization level 1 (assignment relaxation only),
       whose cheaper nodes let the search move far from a poor hint -- on random
       asymmetric matrices it is the level that finds better tours.

    Returns ``(tour or None, status)`` (statuses of :class:`RingImprovement`; the
    tour is the solver's, not yet compared with the hint by float cost).
    """
    if time.monotonic() >= deadline:    # no time left: do not even build the model
        return None, "no-solution"
    try:
        from ortools.sat.python import cp_model
    except ImportError:     # declared dependency; degrade to the heuristic if it is broken
        return None, "unavailable"
    n = c.shape[0]
    mask, complete = _candidate_mask(c, tour, rng)
    us, vs = np.nonzero(mask)
    top = float(c[mask].max())
    scale = _COST_SCALE / top if top > 0 else 1.0
    weights = np.rint(c[us, vs] * scale).astype(np.int64)
    model = cp_model.CpModel()
    lits = [model.new_bool_var("") for _ in range(us.size)]
    model.add_circuit(list(zip(us.tolist(), vs.tolist(), lits)))
    model.minimize(cp_model.LinearExpr.weighted_sum(lits, weights.tolist()))
    arc_index = np.full((n, n), -1, dtype=np.intp)
    arc_index[us, vs] = np.arange(us.size)

    def solve(hint: np.ndarray, level: int, budget: float) -> tuple[int, np.ndarray | None]:
        wall = deadline - time.monotonic()
        if wall <= 0:
            return cp_model.UNKNOWN, None
        on = np.zeros(us.size, dtype=bool)
        on[arc_index[hint, np.roll(hint, -1)]] = True
        model.clear_hints()
        for lit, hinted in zip(lits, on.tolist()):
            model.add_hint(lit, hinted)
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = 1                  # one worker + deterministic time = reproducible
        params.random_seed = int(seed) % (2**31 - 1)
        params.linearization_level = level
        params.max_deterministic_time = budget
        params.max_time_in_seconds = wall       # safety net only
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return status, None
        chosen = np.fromiter((solver.boolean_value(lit) for lit in lits), dtype=bool, count=len(lits))
        return status, _successors_to_tour(n, us[chosen], vs[chosen])

    best, result = None, "no-solution"
    for level, budget in ((2, _PROVE_SHARE * effort), (1, (1.0 - _PROVE_SHARE) * effort)):
        status, found = solve(tour if best is None else best, level, budget)
        if found is None:
            continue
        best, result = found, "feasible"
        if status == cp_model.OPTIMAL:
            result = "optimal" if complete else "candidate-optimal"
            break
    return best, result


def _successors_to_tour(n: int, us: np.ndarray, vs: np.ndarray) -> np.ndarray | None:
    """Tour from node 0 along the chosen arcs, or None if they are not one Hamiltonian circuit."""
    if us.size != n:
        return None
    succ = np.full(n, -1, dtype=np.intp)
    succ[us] = vs
    out = np.empty(n, dtype=np.intp)
    node = 0
    for k in range(n):
        out[k] = node
        node = succ[node]
        if node < 0:
            return None
    if node != 0 or np.unique(out).size != n:
        return None
    return out


def _improve(c: np.ndarray, tour: np.ndarray, *, seed: int, effort: float, deadline: float,
             rng: np.random.Generator) -> RingImprovement:
    start_cost = ring_cost(c, tour)
    best, best_cost = tour, start_cost
    if start_cost > 0:          # a zero-cost tour is already optimal
        found, status = _cpsat_ring(c, tour, seed=seed, effort=effort, deadline=deadline, rng=rng)
    else:
        found, status = None, "optimal"
    if found is not None:
        cost = ring_cost(c, found)
        # Float re-evaluation decides: rounding to integers may hide a tiny loss.
        if cost < start_cost - 1e-12 * max(1.0, start_cost):
            best, best_cost = found, cost
    return RingImprovement(tuple(int(v) for v in best), float(best_cost), float(start_cost), status)


def improve_ring_order(matrix: object, order: object, *, seed: int = 0, effort: float = 1.0,
                       time_limit_s: float = 10.0) -> RingImprovement:
    """Improve a ring rank order with an exact solver (the paper's second stage, Section 4.3).

    CP-SAT's ``circuit`` constraint over the candidate arcs with integer costs (module
    docstring, items 3, "Integer costs" and "Candidate arcs"), ``order`` as the solution
    hint; the better of ``order`` and the solver's tour by the float cost is kept.

    Parameters
    ----------
    matrix : array_like
        ``n x n`` one-way costs in seconds.
    order : array_like
        Start order (a permutation of ``0..n-1``), e.g. a heuristic's.
    seed : int
        CP-SAT random seed and seed of the candidate tie-break.
    effort : float
        CP-SAT deterministic-time budget (> 0; its work units, about seconds of one
        core on a fast machine).  Fixes the result for a given input and seed.
    time_limit_s : float
        Wall-clock safety net in seconds (> 0); if it ends the search first the
        result may depend on the machine's speed.

    Returns
    -------
    RingImprovement
        Best order, its cost, the start cost and the solver status.

    Raises
    ------
    InvalidSpecError
        Bad matrix, order or option.

    Examples
    --------
    >>> import numpy as np
    >>> c = np.random.default_rng(0).random((30, 30))
    >>> r = improve_ring_order(c, np.arange(30))
    >>> r.status, r.cost_s < r.start_cost_s
    ('optimal', True)
    """
    c = check_cost_matrix(matrix)
    o = check_order(order, c.shape[0])
    check_int("seed", seed, 0)   # numpy generators take non-negative seeds only
    check_number("effort", effort)
    check_number("time_limit_s", time_limit_s)
    return _improve(c, o, seed=int(seed), effort=float(effort),
                    deadline=time.monotonic() + float(time_limit_s), rng=np.random.default_rng(seed))


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
            base: int = 2, solver: str = "cp-sat", solver_effort: float | None = None) -> ReorderResult:
    """Find a rank order minimising ``algorithm``'s cost model over ``matrix``.

    Parameters
    ----------
    matrix : array_like
        ``n x n`` pairwise one-way costs in seconds (``matrix[u, v]``: u sends to v),
        e.g. ``load_cost_matrix(path).costs``.
    algorithm : str
        ``ring``, ``hd`` (alias ``rhd``), ``dbt`` or ``bcube``.
    seed : int
        Seed of the randomized search; same seed, same result (unless a wall-clock
        limit cuts the run short).
    time_limit_s : float
        Wall-clock budget in seconds (> 0).  Held-Karp is not interrupted (it takes
        well under a second for n <= 12).  For the ring with the solver stage the
        heuristic may use half of it and the solver the rest.
    base : int
        BCube group size ``B`` (``n`` must be a power of ``B``).
    solver : str
        Ring improvement stage for ``n > 12``: ``cp-sat`` (default; see
        :func:`improve_ring_order`) or ``none`` (heuristic only, with kicks).
        Ignored by the other algorithms.
    solver_effort : float or None
        CP-SAT deterministic-time budget (> 0); ``None`` means ``0.1 * time_limit_s``.

    Returns
    -------
    ReorderResult
        Best order found, its cost, the identity order's cost and the stages that ran
        (:attr:`ReorderResult.method`: ``held-karp`` for a ring of at most 12 nodes,
        ``2opt+oropt[+cp-sat:STATUS]`` for a larger ring, ``anneal`` (simulated annealing
        + swap descent) for ``hd``/``dbt``/``bcube``).

    Raises
    ------
    InvalidSpecError
        Bad matrix, unknown algorithm, bad option.

    Examples
    --------
    >>> import numpy as np
    >>> c = np.random.default_rng(0).random((20, 20))
    >>> r = reorder(c, "ring", seed=0)
    >>> r.method, r.cost_s < r.baseline_cost_s
    ('2opt+oropt+cp-sat:optimal', True)
    """
    c = check_cost_matrix(matrix)
    name = canonical_algorithm(algorithm)
    check_int("seed", seed, 0)   # numpy generators take non-negative seeds only
    check_number("time_limit_s", time_limit_s)
    check_choice("solver", solver, SOLVERS)
    if solver_effort is not None:
        check_number("solver_effort", solver_effort)
    n = c.shape[0]
    cost = cost_function(n, name, base=base)
    start = time.monotonic()
    deadline = start + float(time_limit_s)
    rng = np.random.default_rng(seed)
    identity = np.arange(n, dtype=np.intp)
    baseline = cost(c, identity)
    if name == "ring" and n <= HELD_KARP_MAX_N:
        order, method = _held_karp(c), "held-karp"
    elif name == "ring" and solver == "none":
        order, method = _ring_search(c, rng, deadline, kicks=min(200, 4 * n)), "2opt+oropt"
    elif name == "ring":
        # Stage 1 (paper: stochastic search with a timeout): no kicks, CP-SAT searches better.
        tour = _ring_search(c, rng, start + _HEURISTIC_SHARE * float(time_limit_s), kicks=0)
        effort = _EFFORT_PER_SECOND * float(time_limit_s) if solver_effort is None else float(solver_effort)
        # Stage 2 (paper: a solver continues from the incumbent C_0).
        found = _improve(c, tour, seed=int(seed), effort=effort, deadline=deadline, rng=rng)
        order, method = np.array(found.order, dtype=np.intp), f"2opt+oropt+cp-sat:{found.status}"
    else:
        start_order = _nearest_neighbour(c, int(rng.integers(n)))
        if cost(c, start_order) > baseline:
            start_order = identity
        iterations = max(4000, 40 * n)
        order, order_cost = _anneal(c, cost, start_order, rng, deadline, iterations)
        if n <= 64:
            order, order_cost = _swap_descent(c, cost, order, order_cost, deadline)
        method = "anneal"
    order_cost = cost(c, order)
    if order_cost > baseline:   # never return something worse than doing nothing
        order, order_cost = identity, baseline
    return ReorderResult(tuple(int(v) for v in order), float(order_cost), float(baseline), method)
