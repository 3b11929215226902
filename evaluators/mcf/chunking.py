"""How many chunks a Theorem 4 schedule needs, and how its replays are timed.

The discretisation (:mod:`evaluators.mcf.discretize`) sends every shard as
``K`` shifted replays (thesis Theorem 4) of ``q`` equal chunks each, every
chunk routed on one tree (or path) of its commodity.  The proof's time is
``R (1 + (T_tot - 1) / K)``: the pipeline fill of ``T_tot - 1`` steps (the
steps of one replay) over ``K`` steps of ``R / K``.

**Why the old discretisation missed epsilon** (measured in
``experiments/benchmarks/RESULTS.md``, "MCF epsilon").  The trees' weights are
reals; the old code gave each tree ``largest_remainder(weight x q)`` chunks
*in every replay*, so each replay repeated the same rounding error, which
does not shrink with ``K`` -- only with ``q``.  Its step length was the
bottleneck of one rounded replay, so the whole schedule paid that error
(``rounding_overhead``).  With ``K ~ 2 (T_tot - 1) / eps`` replays, ``K q``
transfers per tree reached the transfer cap at ``q = 2..3`` for
``eps = 0.01``, leaving ``delta = 12-14 %`` (torus:3x5 allgather: 60 trees,
``q = 3``, ``delta = 0.143``; dgx-a100:2: ``q = 2``, ``delta = 0.119``) although
the trees themselves reach ``R`` (tree LP == R).  Pipeline fill (``0.5 %``),
the replay shifts (none: they are exact) and the re-timing (none: latency is
added once per step index) were not the cause.  (Integer tree counts by a
MILP per replay were tried too: over the trees at hand they stayed 1-2 %
above ``R`` at ``q <= 13``.)

**The fix: round over the whole schedule, time by windows.**

1. *Assignment* (:class:`Herding`): the ``K q`` chunks of a commodity take
   their trees one by one over the whole schedule, each the tree that keeps
   the running excess of every (link, step) cell's work over its mean
   smallest (herding, a greedy Frank-Wolfe rounding), weighted by the link's
   utilisation (only busy links can force a longer window).  Allreduce
   first deals the ``N q`` chunks of every replay to the owners by the LP's
   shares in a prefix-balanced order (:func:`stride_sequence`, Tijdeman's
   chairman assignment); an owner's chunk then takes one reduce tree and
   one gather tree.  The total rounding error is about one chunk per tree
   over the *whole* schedule instead of per replay.
2. *Windows* (:func:`window_timing`): a replay-``k`` transmission of real
   step ``u`` gets the window ``[(k + u W) s', (k + (u + 1) W) s']`` (plus the
   latency offset ``A_u``), ``W >= 1`` steps long, and the next step of the
   same chunk starts where it ends.  Let ``c_k(l, u)`` be link ``l``'s work
   (seconds at its bandwidth) of replay ``k``'s step-``u`` transmissions,
   ``a(l, u)`` its mean over ``k`` and ``D(l, u)`` the largest excess of a run
   of consecutive replays over ``a`` (prefix sums).  Any time window
   ``[x, x + m s' + (W - 1) s']`` contains the windows of at most ``m``
   consecutive replays per class ``u``, i.e. work at most
   ``m a(l) + E(l)`` with ``a(l) = sum_u a(l, u)``, ``E(l) = sum_u D(l, u)``.
   With ``s' = max_l a(l)`` and ``W = max_l ceil((E(l) + a(l)) / s')`` that
   is at most the window's length for every ``m >= 1``: Horn's condition,
   so earliest-deadline-first meets every deadline on every link -- what
   :func:`evaluators.validate.validate_schedule` checks in the ``"shared"``
   link model.  With exact per-replay counts ``E = 0`` and ``W = 1``: the
   proof's schedule.  (The latency offsets ``A_u`` shift the classes against
   each other, which is why ``E`` sums the classes; rounding the offsets up
   to whole steps aligns them, and then the run excess of their *combined*
   work per link replaces ``E`` -- often a smaller ``W`` for at most
   ``T_tot`` extra steps.  :func:`window_timing` takes the shorter.)

Time: ``(K - 1 + T_tot W) s' + A_{T_tot}`` with ``K s' = R (1 + delta)``,
``delta`` the total rounding (measured; ``1e-4``-``3e-3`` on the issue's cases).
The discretisation's search (``_choose`` in :mod:`evaluators.mcf.discretize`)
tries ``q = 1, 2, ...`` and for each the fewest ``K`` whose time is within
``(1 + eps) R`` (plus the latency term), and keeps the fewest chunks ``K q``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["EPS_TOL", "ChunkPlan", "Herding", "stride_sequence", "window_timing",
           "replays_lower_bound"]

#: Relative tolerance on "time <= (1 + eps) R".
EPS_TOL = 1e-9


@dataclass(frozen=True)
class ChunkPlan:
    """The chosen chunking and timing.

    Attributes
    ----------
    split : int
        ``q``: chunks per shard (allreduce: per ``N`` chunks) in each replay.
    replays : int
        ``K``: shifted replays.
    window : int
        ``W``: steps of ``s'`` a transmission of one step may spread over.
    step_s : float
        ``s'``, seconds.
    delta : float
        Total rounding: ``K s' / R - 1``.
    ratio : float
        Bandwidth time over ``R``: ``(K - 1 + T_tot W) s' / R``.
    transfers : int
    ok : bool
        ``ratio <= 1 + eps`` within the transfer cap.
    reason : str
        Why this chunk count (or why epsilon was not reached).
    offsets_s : tuple of float
        Seconds added to the start of step ``u`` (latency; see :func:`window_timing`).
    """

    split: int
    replays: int
    window: int
    step_s: float
    delta: float
    ratio: float
    transfers: int
    ok: bool
    reason: str
    offsets_s: tuple = ()

    @property
    def chunks(self) -> int:
        """Chunks per shard, ``K q``."""
        return self.replays * self.split


def stride_sequence(weights: np.ndarray, length: int) -> np.ndarray:
    """Tree of each of ``length`` chunks, every prefix balanced to its weights.

    Chunk ``n`` goes to the tree ``j`` with the largest deficit
    ``(n + 1) w_j - count_j`` (Tijdeman 1980: then
    ``|count_j(n) - n w_j| < 1`` for every prefix ``n`` and tree ``j``).

    Parameters
    ----------
    weights : ndarray, shape (commodities, trees)
        Rows sum to 1 (pad with zeros).
    length : int

    Returns
    -------
    ndarray of int, shape (commodities, length)

    Examples
    --------
    >>> stride_sequence(np.array([[0.5, 0.25, 0.25]]), 4).tolist()
    [[0, 1, 2, 0]]
    """
    w = np.atleast_2d(np.asarray(weights, dtype=float))
    C, J = w.shape
    out = np.zeros((C, length), dtype=np.int64)
    count = np.zeros((C, J))
    rows = np.arange(C)
    for n in range(length):
        j = np.argmax((n + 1) * w - count - 1e-12 * np.arange(J)[None, :], axis=1)
        out[:, n] = j
        count[rows, j] += 1.0
    return out


def window_timing(work: np.ndarray, n_replays: int, alpha: np.ndarray,
                  max_window: int = 64) -> tuple[float, int, np.ndarray]:
    """Step length ``s'``, window ``W`` and latency offsets of the module docstring.

    Two witnesses, the shorter schedule wins: *per class* (latency offsets
    ``A_u``, the real latencies; ``W = max_l ceil((E(l) + a(l)) / s')`` with
    ``E(l) = sum_u D(l, u)``) and *on a grid* (latency rounded up to whole
    steps ``lam_u``, so the classes align and the run excess ``D(l)`` of
    their combined work counts once).  With the same rounding in every
    replay both give ``W = 1`` and the per-class one adds no latency.

    Parameters
    ----------
    work : ndarray, shape (K, links, steps)
        Seconds of each link's bandwidth that replay ``k`` needs in each step.
    n_replays : int
        ``K``.
    alpha : ndarray, shape (steps,)
        Largest latency of a link used in each step, seconds.
    max_window : int, optional
        Largest ``W`` tried on the grid.

    Returns
    -------
    step_s : float
        ``s' = max_l a(l)`` (with ``1e-12`` relative headroom for float sums).
    window : int
        ``W``.
    offsets : ndarray, shape (steps + 1,)
        Seconds added to the start of step ``u`` (``A_u``, or ``lam_u s'``).
    """
    K, L, Tt = work.shape
    A = np.concatenate([[0.0], np.cumsum(alpha)])
    mean = work.sum(axis=0) / K                                   # a(l, u)
    a = mean.sum(axis=1)                                          # a(l)
    step_s = float(a.max()) * (1.0 + 1e-12)
    if step_s <= 0:
        return 0.0, 1, A

    def run_excess(x: np.ndarray, m: np.ndarray) -> np.ndarray:
        P = np.concatenate([np.zeros((1,) + m.shape), np.cumsum(x - m[None], axis=0)])
        return np.maximum((P[1:] - np.minimum.accumulate(P[:-1], axis=0)).max(axis=0), 0.0)

    E = run_excess(work, mean).sum(axis=1)                        # sum_u D(l, u)
    W_class = max(1, int(math.ceil(float(((E + a) / step_s).max()) * (1 - 1e-12) - 1e-9)))
    best = ((K - 1 + Tt * W_class) * step_s + A[-1], W_class, A)
    lam = np.concatenate([[0], np.cumsum(np.ceil(alpha / step_s - 1e-9))]).astype(np.int64)
    for W in range(1, min(W_class, max_window + 1)):
        total = (K - 1 + Tt * W + int(lam[-1])) * step_s
        if total >= best[0]:
            break
        g = np.zeros((K + Tt * W + int(lam[-1]), L))
        for u in range(Tt):
            s = u * W + int(lam[u])
            g[s: s + K] += work[:, :, u]
        if np.all(run_excess(g, a) + a <= W * step_s * (1 + 1e-12)):
            best = (total, W, lam * step_s)
            break
    return step_s, best[1], np.asarray(best[2], dtype=float)


def replays_lower_bound(steps: int, epsilon: float, multiple: int = 1) -> int:
    """Fewest replays any plan can use: ``(1 + (steps - 1) / K) <= 1 + eps``."""
    K = max(1, math.ceil((steps - 1) / epsilon * (1 - EPS_TOL) - 1e-9))
    return multiple * math.ceil(K / multiple)


class Herding:
    """Trees of chunks by herding: keep every cell's running excess near zero.

    A chunk of commodity ``c`` takes the tree ``j`` minimising
    ``||P + x_j - m_c||^2``, where ``x_j`` is the tree's work per cell (link,
    step), ``m_c = sum_j w_j x_j`` the commodity's mean work and ``P`` the
    running sum of ``x - m`` over the chunks placed so far (Welling 2009,
    "herding"; a greedy Frank-Wolfe rounding).  ``P`` stays bounded, and so
    do the run excesses that set the window ``W``.  Online: placing more
    chunks never changes the earlier choices, so one sequence serves every
    ``K``.

    Parameters
    ----------
    loads : list of ndarray, shape (trees, cells)
        Per commodity.
    weights : list of ndarray
        Per commodity, the trees' weights (summing to 1).
    """

    def __init__(self, loads: list[np.ndarray], weights: list[np.ndarray]) -> None:
        self.loads = loads
        self.means = [w @ x for w, x in zip(weights, loads)]
        # ||P + x - m||^2 = const + 2 <P, x> + ||x||^2 - 2 <m, x>: the terms that vary.
        self.fixed = [np.einsum("jc,jc->j", x, x) - 2.0 * x @ m
                      for x, m in zip(loads, self.means)]
        self.P = np.zeros(loads[0].shape[1]) if loads else np.zeros(0)

    def place(self, order: np.ndarray) -> np.ndarray:
        """Trees of the next chunks, whose commodities are ``order`` (in placing order)."""
        out = np.zeros(len(order), dtype=np.int64)
        P, loads, fixed, means = self.P, self.loads, self.fixed, self.means
        for i, c in enumerate(np.asarray(order).tolist()):
            x = loads[c]
            j = int(np.argmin(2.0 * (x @ P) + fixed[c])) if x.shape[0] > 1 else 0
            out[i] = j
            P += x[j] - means[c]
        return out
