"""TACOS-ILP: exact link-chunk matching on the time-expanded network.

Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for
Distributed Machine Learning" (MICRO 2024), Section V-A (Fig. 12), on the
time-expanded network (TEN) of Section IV with the discretisation of
Section IV-C and the switch unwinding of Section IV-D
(:mod:`evaluators.algorithms.unwind`).

Formulation (:func:`ilp_solve`, horizon ``T`` TEN steps of ``step_s``
seconds; link ``l`` takes ``k_l = ceil(duration_l / step_s)`` steps, the
multi-step arrival of Section VI-B):

* ``sent[c, l, t]`` (binary): chunk ``c`` starts on link ``l`` at step ``t``
  and has fully arrived at ``dst(l)`` at step ``t + k_l <= T``;
* ``hold[c, v, t]`` (binary): node ``v`` fully holds chunk ``c`` at step ``t``
  (fixed to 1 for the precondition, Fig. 12(a));
* arrival: ``hold[c, v, t] = hold[c, v, t-1] + sum of sent[c, l, t - k_l]``
  over the links ``l`` into ``v`` -- a node holds a chunk from the step its
  transfer ends, and since ``hold <= 1`` it receives each chunk at most once;
* consistency (Fig. 12(c)): ``sent[c, l, t] <= hold[c, src(l), t]``: a node
  sends a chunk only from the step at whose start it fully holds it;
* congestion (Fig. 12(d)): at most one chunk occupies a link in any step
  (a transfer occupies its link for the ``k_l`` steps ``t .. t+k_l-1``);
* postcondition (Fig. 12(b)): ``hold[c, v, T] = 1`` for every ``(c, v)`` that
  must hold ``c``;
* symmetry breaking (ours, below): interchangeable chunks arrive in index
  order at one node.

As in :func:`~evaluators.algorithms.tacos.greedy_match` (so that the two are
compared on the same space of schedules), a node receives chunk ``c`` only if
it must hold it at the end: nodes outside the collective never relay, and
every needing node receives each chunk exactly once, which is also what makes
the time-reversed reduce-scatter (reduce) count every contribution once.

Minimising the completion step.  The paper makes the postcondition the
objective ("maximize the chunks that arrived by ``t_f``") and raises ``t_f``
from the diameter ``d, d+1, ...`` until every chunk arrives.  We keep the
postcondition as hard constraints (zero objective: each ILP is a pure
feasibility problem, which HiGHS stops on at the first feasible point) and
scan ``T`` *downwards*: from one step below the best of a few TACOS-GREEDY
runs on the discretised links (a known feasible horizon ``U``), each feasible
solution ``s`` steps long is followed by a solve at ``s - 1``, until a horizon
is proven infeasible or reaches a cheap lower bound (hop distance, per-node
ingress and egress capacity, in steps).  Feasibility is monotone in ``T``
(idle steps can be appended), so this finds the paper's minimum, and:

* it is an anytime search: every solve but the last is feasible (usually
  found by HiGHS's heuristics in a fraction of a second) and improves the
  schedule, so a time limit leaves the best schedule found so far, while
  the paper's upward scan has nothing until its last solve;
* only one infeasibility proof is needed, at ``T* - 1`` (the hard solve: the
  LP relaxation is feasible there), where the upward scan proves every
  ``T < T*`` and bisection proves infeasible horizons that are often just as
  hard; on our small cases bisection was no faster;
* one ILP at horizon ``U`` minimising a completion-step indicator would solve
  the biggest model every time, with a weak relaxation (the indicator
  couples to every postcondition variable).

Symmetry breaking (model (5)): chunks with identical holders and needs (the
``chunks_per_npu`` pieces of one shard) are interchangeable, so their
arrival steps at one receiving node are constrained to follow the chunk
order; without it HiGHS timed out (40 s) proving 2-3-chunk all-gathers on
2x3 and 2x4 meshes infeasible that it now proves in 2-10 s.

Proven optimality: the result is optimal on the TEN when every ``T`` below
the returned one is proven infeasible (or below the lower bound).  If the
time limit stops the search first, the best schedule found so far is
returned (at worst the greedy one: the early termination of Section V-B,
recovering with a feasible schedule) with ``optimal=False`` and
``mip_gap = (steps - lower_steps) / steps``.

Discretisation and exactness.  Step ``step_s`` defaults to a common divisor
of the link durations when one exists with few steps per link (the fastest
duration, or it divided by 2, 3 or 4), otherwise the fastest duration.  When
every duration is an integer number of steps the TEN optimum *is* the
continuous optimum: any continuous schedule maps to a TEN schedule by
``step(transfer) = floor(start / step_s)`` (an arrival ``s_j + k_j f <= s_i``
gives ``floor(s_j / f) + k_j <= floor(s_i / f)``; two transfers on one link
keep disjoint step ranges) that finishes no later.  When some duration is not
a multiple (``commensurate=False``) the ceiling makes slow links look slower
and the ILP optimum is only an upper bound on the continuous optimum
(Section IV-C: "the target communication finishes within the discretized
timestep"); ``exact`` is then False even when ``optimal`` is True.

Time domain translation (Fig. 11): the step solution is replayed in
continuous time -- transfers in step order, each starting as soon as its
link is free and its source holds the chunk, lasting ``latency +
chunk_bytes / bandwidth`` -- so the returned times are never later than
``step * step_s`` and equal it in the commensurate case.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse.csgraph import shortest_path

from codesign.errors import CodesignError, InfeasibleError, invalid
from codesign.resources import check_count
from codesign.specs import check_number
from evaluators.algorithms.tacos import holders_need, build_schedule, greedy_match
from evaluators.algorithms.unwind import LogicalLinks, parse_degree, unwind
from evaluators.collectives import Collective
from evaluators.schedule import COPY, REDUCE, Schedule

__all__ = ["IlpResult", "ilp_solve", "tacos_exact"]

#: Greedy seeds tried for the upper horizon (the best one is the incumbent).
UPPER_SEEDS = 8
#: Auto step: try the fastest duration divided by 1..MAX_DIVISOR ...
MAX_DIVISOR = 4
#: ... as long as no link spans more than this many steps.
MAX_STEPS_PER_LINK = 16
_RTOL = 1e-9
#: Add the arrival-order rows for interchangeable chunks (model (5)).
SYMMETRY_BREAKING = True
#: Most (chunk, link) pairs of one ILP (its binaries are these pairs times the horizon's
#: steps).  mesh:2x3 with 1,000 chunks per NPU (84,000 pairs) takes 12 s; the paper's
#: ILP found no schedule past 8 NPUs in an hour (Table I), so 2^17 leaves room for the
#: small cases the exact mode is for and refuses 10^5 chunks (8.4e6 pairs), which hung.
MAX_ILP_CHUNK_LINKS = 2 ** 17


@dataclass(frozen=True)
class IlpResult:
    """Outcome of :func:`ilp_solve`.

    Attributes
    ----------
    chunk, link : ndarray of int64
        Chunk and logical link of each transfer.
    start, end : ndarray of float64
        Seconds, after the time domain translation (module docstring); sorted
        by start, then end.
    steps : int
        TEN steps of the returned solution (its completion step).
    lower_steps : int
        Proven lower bound on the steps of any TEN solution.
    bound_steps : int
        The cheap part of it: hop distance, ingress and egress capacity in
        steps, before any ILP.
    step_s : float
        Duration of one TEN step, seconds.
    commensurate : bool
        Every link duration is an integer number of steps (no rounding).
    optimal : bool
        ``steps == lower_steps``: proven optimal on the TEN.
    exact : bool
        ``optimal and commensurate``: the makespan is the continuous optimum
        (over schedules where only needing nodes receive, each chunk once).
    mip_gap : float
        ``(steps - lower_steps) / steps`` (0 when optimal).
    status : str
        ``"optimal"``, ``"time_limit"`` (stopped early, best solution so far)
        or ``"trivial"`` (nothing to send).
    source : str
        Who found the returned solution: ``"ilp"`` or ``"greedy"`` (the
        incumbent, when the ILP proved it optimal or ran out of time).
    solves : tuple of (int, str, float)
        Each ILP solved: horizon ``T``, outcome (``"feasible"``,
        ``"infeasible"``, ``"time_limit"``) and wall-clock seconds.
    solve_time_s : float
        Wall-clock seconds of the whole call (greedy runs included).
    """

    chunk: np.ndarray
    link: np.ndarray
    start: np.ndarray
    end: np.ndarray
    steps: int
    lower_steps: int
    bound_steps: int
    step_s: float
    commensurate: bool
    optimal: bool
    exact: bool
    mip_gap: float
    status: str
    source: str
    solves: tuple = field(default=())
    solve_time_s: float = 0.0

    @property
    def time_s(self) -> float:
        """Makespan of the translated schedule, seconds."""
        return float(self.end.max()) if self.end.size else 0.0

    @property
    def transfers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(chunk, link, start, end)``, like :func:`~evaluators.algorithms.tacos.greedy_match`."""
        return self.chunk, self.link, self.start, self.end


# ----------------------------------------------------------------- arguments
def _check_inputs(links: LogicalLinks, n_nodes, holders, need, chunk_bytes):
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or n_nodes < 1:
        raise invalid("n_nodes", n_nodes, "an integer >= 1")
    holders = np.asarray(holders, dtype=bool)
    need = np.asarray(need, dtype=bool)
    if holders.ndim != 2 or holders.shape[0] != n_nodes or need.shape != holders.shape:
        raise invalid("holders/need shape", (holders.shape, need.shape),
                      f"two bool matrices of the same shape ({n_nodes}, n_chunks)")
    if len(links) and (links.src.min() < 0 or max(links.src.max(), links.dst.max()) >= n_nodes):
        raise invalid("logical link endpoints", (int(links.src.max()), int(links.dst.max())),
                      f"node ids in 0..{n_nodes - 1}")
    chunk_bytes = check_number("chunk_bytes", chunk_bytes)
    return int(n_nodes), holders, need, chunk_bytes


# ------------------------------------------------------------ discretisation
def discretise(duration: np.ndarray, step_s: float | None = None):
    """TEN step and per-link step counts (Section IV-C).

    Parameters
    ----------
    duration : ndarray of float
        Seconds per chunk on each link (``latency + chunk_bytes / bandwidth``).
    step_s : float, optional
        The step (the paper's discretisation factor ``f``).  Default: the
        fastest duration divided by the smallest ``q`` in ``1..4`` that makes
        every duration a whole number of steps (at most 16 per link), else
        the fastest duration.

    Returns
    -------
    step_s : float
        Seconds per TEN step.
    k : ndarray of int64
        Steps per link, ``ceil(duration / step_s)`` (at least 1).
    commensurate : bool
        Whether no duration was rounded up.
    """
    duration = np.asarray(duration, dtype=np.float64)
    if duration.size == 0:
        return (1.0 if step_s is None else float(step_s)), np.zeros(0, np.int64), True

    def fit(step):
        ratio = duration / step
        whole = np.rint(ratio)
        ok = bool(np.all((whole >= 1) & (np.abs(ratio - whole) <= _RTOL * ratio)))
        k = np.maximum(whole if ok else np.ceil(ratio * (1 - _RTOL)), 1).astype(np.int64)
        return k, ok

    if step_s is not None:
        k, ok = fit(float(step_s))
        return float(step_s), k, ok
    base = float(duration.min())
    for q in range(1, MAX_DIVISOR + 1):
        k, ok = fit(base / q)
        if ok and int(k.max()) <= MAX_STEPS_PER_LINK:
            return base / q, k, True
    k, _ = fit(base)
    return base, k, False


# -------------------------------------------------------------- lower bound
def _earliest(src, dst, k, n_nodes, holders, need):
    """Earliest step each node can hold each chunk, ignoring congestion:
    shortest paths (weights ``k``) from the chunk's holders through nodes that
    hold or need it (the only relays allowed).  Shape (n_chunks, n_nodes),
    ``inf`` where unreachable."""
    n_chunks = holders.shape[1]
    allowed = (holders | need).T                   # (chunks, nodes)
    earliest = np.full((n_chunks, n_nodes), np.inf)
    groups, inverse = np.unique(allowed, axis=0, return_inverse=True)
    for g, nodes_ok in enumerate(groups):
        keep = nodes_ok[src] & nodes_ok[dst]
        w = np.full((n_nodes, n_nodes), np.inf)
        np.minimum.at(w, (src[keep], dst[keep]), k[keep].astype(np.float64))
        dist = shortest_path(w, method="D", directed=True)     # inf entries: no edge
        for c in np.flatnonzero(inverse.ravel() == g):
            own = holders[:, c]
            if own.any():
                earliest[c] = dist[own].min(axis=0)
    earliest[holders.T] = 0.0
    return earliest


def _capacity_steps(k_links: np.ndarray, count: int) -> int:
    """Fewest steps ``T`` with ``sum_l floor(T / k_l) >= count`` (links of
    ``k_l`` steps each carry one chunk per ``k_l`` steps)."""
    if count <= 0:
        return 0
    if k_links.size == 0:
        return np.iinfo(np.int64).max
    t = max(1, count * int(k_links.min()) // k_links.size)
    while int((t // k_links).sum()) < count:
        t += 1
    return t


def _lower_steps(links: LogicalLinks, k, n_nodes, holders, need, earliest) -> int:
    """Distance, ingress and egress lower bounds on the TEN steps."""
    todo = need & ~holders
    if not todo.any():
        return 0
    dist = int(earliest.T[todo].max())
    ingress = max(_capacity_steps(k[links.dst == v], int(m))
                  for v, m in enumerate(todo.sum(axis=1)) if m)
    # A chunk held by one node only, and needed elsewhere, leaves it at least once.
    single = (holders.sum(axis=0) == 1) & todo.any(axis=0)
    owner_count = holders[:, single].sum(axis=1)
    egress = max((_capacity_steps(k[links.src == u], int(m))
                  for u, m in enumerate(owner_count) if m), default=0)
    return max(dist, ingress, egress, 1)


# ---------------------------------------------------------------- the model
def _build(links: LogicalLinks, k, n_nodes, holders, need, earliest, horizon: int):
    """Sparse TACOS-ILP for horizon ``T``: ``(c, integrality, bounds, constraint, xvars)``
    with ``xvars = (chunk, link, step)`` of the sent variables (the first ones)."""
    T = horizon
    src, dst = links.src, links.dst
    n_chunks = holders.shape[1]
    todo = need & ~holders                                   # (nodes, chunks) receivers
    # sent[c, l, t]: dst needs c, src holds or needs c, t >= earliest[c, src], t + k <= T.
    cand = todo[dst] & (holders | need)[src]                 # (links, chunks)
    first = earliest.T[src]                                  # (links, chunks)
    cand &= np.isfinite(first)
    l_idx, c_idx = np.nonzero(cand)
    a = first[l_idx, c_idx].astype(np.int64)
    b = T - k[l_idx]
    cnt = np.maximum(b - a + 1, 0)
    xl = np.repeat(l_idx, cnt)
    xc = np.repeat(c_idx, cnt)
    xt = np.repeat(a, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    nx = xl.size
    # hold[c, v, t] for receivers, t = earliest .. T (before earliest it is 0).
    hv, hc = np.nonzero(todo)
    h0 = earliest[hc, hv]
    if np.any(h0 > T):
        return None
    h0 = h0.astype(np.int64)
    hcnt = T - h0 + 1
    hc_all = np.repeat(hc, hcnt)
    hv_all = np.repeat(hv, hcnt)
    ht_all = np.repeat(h0, hcnt) + (np.arange(int(hcnt.sum())) -
                                    np.repeat(np.cumsum(hcnt) - hcnt, hcnt))
    nh = hc_all.size
    hidx = np.full((n_chunks, n_nodes, T + 1), -1, np.int64)
    hidx[hc_all, hv_all, ht_all] = nx + np.arange(nh)
    rows, cols, vals = [], [], []
    # (1) arrival: hold[t] - hold[t-1] - arrivals at t = 0, one row per hold variable.
    hvar = nx + np.arange(nh)
    rows.append(np.arange(nh)); cols.append(hvar); vals.append(np.ones(nh))
    prev = hidx[hc_all, hv_all, np.maximum(ht_all - 1, 0)]
    has_prev = (ht_all > h0.repeat(hcnt)) & (prev >= 0)
    rows.append(np.flatnonzero(has_prev)); cols.append(prev[has_prev])
    vals.append(-np.ones(int(has_prev.sum())))
    arrive = hidx[xc, dst[xl], xt + k[xl]]
    if np.any(arrive < 0):      # cannot happen: earliest is a shortest-path bound
        raise CodesignError("tacos-ilp: internal error (arrival before the earliest step)")
    rows.append(arrive - nx); cols.append(np.arange(nx)); vals.append(-np.ones(nx))
    n_eq = nh
    # (2) consistency: sent[c, l, t] <= hold[c, src, t] unless src holds c initially.
    relay = ~holders[src[xl], xc]
    ri = np.flatnonzero(relay)
    hs = hidx[xc[ri], src[xl[ri]], xt[ri]]
    if np.any(hs < 0):          # cannot happen: t >= earliest[c, src]
        raise CodesignError("tacos-ilp: internal error (send before the earliest step)")
    r2 = n_eq + np.arange(ri.size)
    rows += [r2, r2]; cols += [ri, hs]; vals += [np.ones(ri.size), -np.ones(ri.size)]
    n_le0 = ri.size
    # (3) congestion: one chunk per link per step; transfer occupies steps t .. t+k-1.
    occ = k[xl]
    ox = np.repeat(np.arange(nx), occ)
    ostep = np.repeat(xt, occ) + (np.arange(int(occ.sum())) - np.repeat(np.cumsum(occ) - occ, occ))
    key = xl[ox] * T + ostep
    ukey, slot = np.unique(key, return_inverse=True)
    r3 = n_eq + n_le0 + slot.ravel()
    rows.append(r3); cols.append(ox); vals.append(np.ones(ox.size))
    # (5) symmetry breaking: chunks with the same holders and needs (pieces of
    # one shard) are interchangeable, so relabelling any solution makes them
    # arrive in index order at one node ``v0`` of theirs.
    nxt, v0 = _twin_chunks(holders, need, earliest)
    n_sym = 0
    if SYMMETRY_BREAKING and np.any(nxt >= 0):
        pair_row = np.full(n_chunks, -1, np.int64)
        first_of_pair = np.flatnonzero(nxt >= 0)
        n_sym = first_of_pair.size
        pair_row[first_of_pair] = n_eq + n_le0 + ukey.size + np.arange(n_sym)
        prev = np.full(n_chunks, -1, np.int64)
        prev[nxt[first_of_pair]] = first_of_pair
        at_v0 = np.flatnonzero((v0[xc] >= 0) & (dst[xl] == v0[xc]))
        arr = (xt + k[xl])[at_v0].astype(np.float64)
        lead = pair_row[xc[at_v0]] >= 0             # x of c_i in pair (c_i, c_i+1)
        rows.append(pair_row[xc[at_v0][lead]]); cols.append(at_v0[lead]); vals.append(arr[lead])
        trail = prev[xc[at_v0]] >= 0                # x of c_i+1 in pair (c_i, c_i+1)
        rows.append(pair_row[prev[xc[at_v0][trail]]]); cols.append(at_v0[trail])
        vals.append(-arr[trail])
    n_rows = n_eq + n_le0 + ukey.size + n_sym
    A = sparse.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n_rows, nx + nh))
    lb = np.concatenate([np.zeros(n_eq), np.full(n_le0, -np.inf), np.full(ukey.size, -np.inf),
                         np.full(n_sym, -np.inf)])
    ub = np.concatenate([np.zeros(n_eq), np.zeros(n_le0), np.ones(ukey.size), np.zeros(n_sym)])
    var_lb = np.zeros(nx + nh)
    var_lb[nx + np.flatnonzero(ht_all == T)] = 1.0          # (4) postcondition
    bounds = Bounds(var_lb, np.ones(nx + nh))
    return (np.zeros(nx + nh), np.ones(nx + nh), bounds, LinearConstraint(A, lb, ub),
            (xc, xl, xt))


def _twin_chunks(holders, need, earliest):
    """For chunks with identical holder and need columns: ``nxt[c]``, the next
    such chunk (or -1), and ``v0[c]``, the receiving node where their arrival
    order is fixed (the one that can receive them first, lowest id on ties;
    -1 for chunks without a twin)."""
    n_chunks = holders.shape[1]
    nxt = np.full(n_chunks, -1, np.int64)
    v0 = np.full(n_chunks, -1, np.int64)
    key = np.concatenate([holders, need], axis=0).T
    _, group = np.unique(key, axis=0, return_inverse=True)
    group = group.ravel()
    order = np.lexsort((np.arange(n_chunks), group))
    same = group[order[1:]] == group[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    todo = (need & ~holders).T                       # (chunks, nodes)
    twins = np.flatnonzero(np.bincount(group)[group] > 1)
    for c in twins:
        cand = np.flatnonzero(todo[c])
        if cand.size:
            v0[c] = cand[np.argmin(earliest[c, cand])]
    nxt[v0 < 0] = -1
    return nxt, v0


def _solve_horizon(links, k, n_nodes, holders, need, earliest, horizon, time_limit):
    """One feasibility ILP: ``("feasible", (c, l, t))``, ``("infeasible", None)``
    or ``("time_limit", None)``."""
    model = _build(links, k, n_nodes, holders, need, earliest, horizon)
    if model is None:
        return "infeasible", None
    c, integrality, bounds, cons, (xc, xl, xt) = model
    res = milp(c, integrality=integrality, bounds=bounds, constraints=[cons],
               options={"time_limit": float(time_limit), "disp": False, "presolve": True})
    if res.x is not None and res.status in (0, 1):
        on = res.x[:xc.size] > 0.5
        return "feasible", (xc[on], xl[on], xt[on])
    if res.status == 2:
        return "infeasible", None
    if res.status == 1:
        return "time_limit", None
    raise CodesignError(f"tacos-ilp: HiGHS failed on horizon {horizon}: {res.message}")


# --------------------------------------------------------- solution helpers
def _steps_ok(src, dst, k, holders, need, chunk, link, step) -> bool:
    """Independent replay of a step solution against the TEN rules."""
    order = np.argsort(step, kind="stable")
    ready = np.where(holders, 0, -1).astype(np.int64)        # step a node holds a chunk
    busy: dict[int, list] = {}
    got = np.zeros_like(holders)
    # process by arrival so that ready is known before dependants are checked
    arrival = step + k[link]
    for i in np.argsort(arrival, kind="stable"):
        c, l = int(chunk[i]), int(link[i])
        v = int(dst[l])
        if holders[v, c] or not need[v, c] or got[v, c]:
            return False
        got[v, c] = True
        ready[v, c] = int(arrival[i])
    for i in order:
        c, l, t = int(chunk[i]), int(link[i]), int(step[i])
        if ready[int(src[l]), c] < 0 or ready[int(src[l]), c] > t:
            return False
        busy.setdefault(l, []).append((t, t + int(k[l])))
    for spans in busy.values():
        spans.sort()
        if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
            return False
    return bool(np.all(got | holders | ~need))


def _translate(src, dst, dur, holders, chunk, link, step):
    """Time domain translation: replay in step order, each transfer as early as
    its link and its chunk allow, with its true duration (seconds)."""
    order = np.lexsort((link, step))
    ready = np.where(holders, 0.0, np.inf)
    free = np.zeros(dur.size)
    start = np.empty(order.size)
    end = np.empty(order.size)
    for i in order.tolist():
        c, l = int(chunk[i]), int(link[i])
        s = max(ready[int(src[l]), c], free[l])
        e = s + dur[l]
        start[i], end[i] = s, e
        free[l] = e
        ready[int(dst[l]), c] = e
    out = np.lexsort((end, start))
    return (np.asarray(chunk, np.int64)[out], np.asarray(link, np.int64)[out], start[out],
            end[out])


def _greedy_incumbent(links, k, n_nodes, holders, need):
    """Best of :data:`UPPER_SEEDS` TACOS-GREEDY runs on the discretised links
    (every duration a whole number of steps), as ``(steps, (c, l, t))``."""
    disc = LogicalLinks(links.src, links.dst, np.full(len(links), np.inf),
                        k.astype(np.float64), links.paths, links.link_model)
    best = None
    for seed in range(UPPER_SEEDS):
        c, l, s, _ = greedy_match(disc, n_nodes, holders, need, 1.0,
                                  np.random.default_rng(seed))
        t = np.rint(s).astype(np.int64)
        if not _steps_ok(links.src, links.dst, k, holders, need, c, l, t):
            continue
        steps = int((t + k[l]).max()) if t.size else 0
        if best is None or steps < best[0]:
            best = (steps, (np.asarray(c, np.int64), np.asarray(l, np.int64), t))
    return best


# ------------------------------------------------------------------ solving
def ilp_solve(links: LogicalLinks, n_nodes: int, holders, need, chunk_bytes: float, *,
              time_limit_s: float = 60.0, horizon: int | None = None,
              step_s: float | None = None) -> IlpResult:
    """TACOS-ILP (Section V-A): the fewest TEN steps meeting ``need``.

    Parameters
    ----------
    links, n_nodes, holders, chunk_bytes
        As for :func:`~evaluators.algorithms.tacos.greedy_match`.
    need : ndarray of bool, shape (n_nodes, n_chunks)
        Who must hold each chunk at the end (only these nodes receive it).
    time_limit_s : float, optional
        Wall-clock budget of the whole search, seconds (each ILP gets what is
        left; the greedy runs count too).
    horizon : int, optional
        Largest number of TEN steps to consider.  Default: the best of
        :data:`UPPER_SEEDS` greedy runs on the discretised links.
    step_s : float, optional
        TEN step, seconds (default: see :func:`discretise`).

    Returns
    -------
    IlpResult
        Transfers ``(chunk, link, start, end)`` (seconds) and the proof status.

    Raises
    ------
    InvalidSpecError
        For malformed inputs or options.
    InfeasibleError
        If some need cannot be met (no path through nodes that hold or need
        the chunk), if ``horizon`` is below the lower bound or proven too
        short, or if the time limit ends the search without any feasible
        solution (possible only with ``horizon`` below the greedy horizon).

    Notes
    -----
    The model has ``O(chunks * links * T)`` binaries; HiGHS' branch and bound
    is exponential in the worst case, so this is for small networks (tens of
    NPUs, a few chunks each), as in the paper (Table I: no result past 8
    nodes in an hour).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> from evaluators.algorithms.unwind import unwind
    >>> links = unwind(from_spec("uniring:4,bw=1GB/s,lat=0"))
    >>> holders, need = np.eye(4, dtype=bool), np.ones((4, 4), dtype=bool)
    >>> r = ilp_solve(links, 4, holders, need, 1e9)
    >>> r.steps, r.optimal, round(r.time_s, 9)     # n - 1 steps on a unidirectional ring
    (3, True, 3.0)
    """
    t0 = _time.perf_counter()
    n_nodes, holders, need, chunk_bytes = _check_inputs(links, n_nodes, holders, need,
                                                        chunk_bytes)
    time_limit_s = check_number("time_limit_s", time_limit_s)
    if horizon is not None and (isinstance(horizon, bool) or
                                not isinstance(horizon, (int, np.integer)) or horizon < 1):
        raise invalid("horizon", horizon, "None or an integer number of TEN steps >= 1")
    if step_s is not None:
        step_s = check_number("step_s", step_s)
    src, dst = np.asarray(links.src, np.int64), np.asarray(links.dst, np.int64)
    dur = np.asarray(links.latency, np.float64) + chunk_bytes / np.asarray(links.bandwidth,
                                                                           np.float64)
    step, k, commensurate = discretise(dur, step_s)
    empty = np.zeros(0, np.int64)
    if not (need & ~holders).any():
        return IlpResult(empty, empty, np.zeros(0), np.zeros(0), 0, 0, 0, step, commensurate,
                         True, commensurate, 0.0, "trivial", "ilp", (),
                         _time.perf_counter() - t0)
    earliest = _earliest(src, dst, k, n_nodes, holders, need)
    todo = need & ~holders
    if np.isinf(earliest.T[todo]).any():
        v, c = np.argwhere(todo & np.isinf(earliest.T))[0]
        raise InfeasibleError(f"tacos-ilp: chunk {int(c)} cannot reach node {int(v)} through "
                              "nodes that hold or need it (relay NPUs are not used)")
    lo = bound = _lower_steps(links, k, n_nodes, holders, need, earliest)
    inc = _greedy_incumbent(links, k, n_nodes, holders, need)
    best_steps, best, source = (inc[0], inc[1], "greedy") if inc else (None, None, "greedy")
    cap = best_steps if best_steps is not None else horizon
    if horizon is not None:
        if horizon < lo:
            raise InfeasibleError(f"tacos-ilp: horizon {horizon} steps is below the lower "
                                  f"bound of {lo} steps of {step:.6g} s")
        if best_steps is not None and best_steps > horizon:
            best_steps, best, cap = None, None, horizon
    if cap is None:             # pragma: no cover - greedy always succeeds when reachable
        raise InfeasibleError("tacos-ilp: no feasible horizon (give horizon=...)")
    solves = []
    status = "optimal"
    while True:
        # Descend: one step below the best solution (or the horizon, without one).
        T = best_steps - 1 if best_steps is not None else cap
        if lo > T:
            break
        left = time_limit_s - (_time.perf_counter() - t0)
        if left <= 0:
            status = "time_limit"
            break
        ts = _time.perf_counter()
        outcome, sol = _solve_horizon(links, k, n_nodes, holders, need, earliest, T, left)
        solves.append((int(T), outcome, _time.perf_counter() - ts))
        if outcome == "feasible":
            c, l, t = sol
            if not _steps_ok(src, dst, k, holders, need, c, l, t):
                raise CodesignError(f"tacos-ilp: the ILP solution for horizon {T} breaks the "
                                    "TEN rules (internal error)")
            best_steps = int((t + k[l]).max())
            best, source = sol, "ilp"
        elif outcome == "infeasible":
            if best_steps is None:
                raise InfeasibleError(f"tacos-ilp: no schedule within horizon {T} steps of "
                                      f"{step:.6g} s (proven infeasible)")
            lo = T + 1
        else:
            status = "time_limit"
            break
    if best_steps is None:
        raise InfeasibleError(f"tacos-ilp: time limit of {time_limit_s:g} s reached before a "
                              f"feasible schedule within {cap} TEN steps was found; raise "
                              "time_limit_s or the horizon")
    lower = min(lo, best_steps)
    optimal = lower == best_steps
    chunk, link, start, end = _translate(src, dst, dur, holders, *best)
    return IlpResult(chunk, link, start, end, int(best_steps), int(lower), int(bound),
                     float(step), bool(commensurate), bool(optimal), bool(optimal and commensurate),
                     float((best_steps - lower) / best_steps), "optimal" if optimal else status,
                     source, tuple(solves), _time.perf_counter() - t0)


# -------------------------------------------------------------- collectives
def _phase(links, topology, collective, spread, time_limit_s, step_s) -> IlpResult:
    holders, need = holders_need(collective, topology.n_nodes, spread)
    return ilp_solve(links, topology.n_nodes, holders, need, collective.chunk_bytes,
                     time_limit_s=time_limit_s, step_s=step_s)


def _time_reversed(res: IlpResult):
    """An all-gather (broadcast) on the transposed links, reversed in time: the
    reduce-scatter (reduce) of Section VII-A, ``(chunk, link, start, end)`` on
    the original links (transposed link ``l`` copies ``dst -> src``; reversed,
    it reduces ``src -> dst``)."""
    total = res.time_s
    start, end = total - res.end, total - res.start
    order = np.lexsort((end, start))
    return res.chunk[order], res.link[order], start[order], end[order]


def tacos_exact(topology, collective: Collective, *, time_limit_s: float = 60.0,
                switch_degree="max", step_s: float | None = None) -> Schedule:
    """Synthesize ``collective`` with TACOS-ILP (exact mode of ``tacos``).

    Parameters
    ----------
    topology : topologies.Topology
        The network; switches (one level) are unwound (Section IV-D).
    collective : Collective
        allgather, broadcast (solved directly), reducescatter, reduce (time
        reversal of an all-gather / broadcast on the transposed links) or
        allreduce (reduce-scatter then all-gather, Section VII-A).
    time_limit_s : float, optional
        Wall-clock budget per ILP phase, seconds (allreduce has two phases).
    switch_degree : int or "max", optional
        Switch unwinding degree, as for ``tacos``.
    step_s : float, optional
        TEN step, seconds (default: :func:`discretise`).

    Returns
    -------
    Schedule
        Times in seconds.  ``metadata``: ``algorithm="tacos"``, ``exact``
        (every phase proven optimal with commensurate link durations),
        ``optimal`` (proven optimal on the TEN), ``mip_gap`` (over the phases'
        summed steps), ``ilp_steps`` and ``ilp_lower_steps`` (summed over
        phases), ``step_s``, ``ilp_source``, ``solve_time_s``,
        ``time_limit_s``, ``switch_degree``, ``link_model``.  For allreduce,
        optimality is that of each phase: RS + AG with optimal halves, not
        necessarily the optimal allreduce.

    Raises
    ------
    InvalidSpecError
        For an unsupported kind or a bad option.
    InfeasibleError
        If participants cannot reach each other through participants.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = tacos_exact(from_spec("fc:4,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> round(s.time_s, 9), s.metadata["exact"]
    (1.0, True)
    """
    time_limit_s = check_number("time_limit_s", time_limit_s)
    degree = parse_degree(switch_degree)
    kind = collective.kind
    if kind not in ("allgather", "broadcast", "reducescatter", "reduce", "allreduce"):
        raise invalid("collective for tacos exact mode", kind,
                      "one of allgather, reducescatter, allreduce, broadcast, reduce")
    links = unwind(topology, degree)
    # Every chunk of the collective (all-reduce: of each phase) on every logical link.
    pairs = float(collective.n) * collective.chunks_per_npu * links.src.size
    check_count(f"the TACOS-ILP ({pairs:.3g} chunk-link pairs, each a binary per step)",
                "chunks", collective.chunks_per_npu, pairs,
                "use fewer chunks or NPUs, or the greedy (no exact=true)",
                maximum=MAX_ILP_CHUNK_LINKS)

    def tagged(arrays, op, shift=0.0):
        c, l, s, e = arrays
        return c, l, s + shift, e + shift, np.full(c.size, op, np.int8)

    if kind in ("allgather", "broadcast"):
        results = [_phase(links, topology, collective, kind, time_limit_s, step_s)]
        parts = [tagged(results[0].transfers, COPY)]
    elif kind in ("reducescatter", "reduce"):
        spread = "allgather" if kind == "reducescatter" else "broadcast"
        results = [_phase(links.transposed(), topology, collective, spread, time_limit_s,
                          step_s)]
        parts = [tagged(_time_reversed(results[0]), REDUCE)]
    else:
        rs = _phase(links.transposed(), topology, collective, "allgather", time_limit_s, step_s)
        ag = _phase(links, topology, collective, "allgather", time_limit_s, step_s)
        results = [rs, ag]
        parts = [tagged(_time_reversed(rs), REDUCE), tagged(ag.transfers, COPY, rs.time_s)]
    steps = sum(r.steps for r in results)
    lower = sum(r.lower_steps for r in results)
    meta = dict(algorithm="tacos", link_model=links.link_model, switch_degree=degree,
                exact=all(r.exact for r in results), optimal=all(r.optimal for r in results),
                mip_gap=float((steps - lower) / steps) if steps else 0.0, ilp_steps=int(steps),
                ilp_lower_steps=int(lower), step_s=float(results[0].step_s),
                ilp_source="+".join(r.source for r in results),
                solve_time_s=float(sum(r.solve_time_s for r in results)),
                time_limit_s=time_limit_s)
    return build_schedule(collective, links, parts, meta)
