"""Fluid optimum to discrete schedule: thesis Theorem 4 (K chunks, shifted replays).

Given the fluid solution ``(f, w)`` of LP 4.2 at time ``R`` over a
time-expanded network of ``T`` steps (:func:`evaluators.mcf.fluid_optimum`),
the proof of Theorem 4 splits the data into ``K > (T - 1) / eps`` chunks,
routes every chunk by ``(f, w)`` and starts chunk ``k`` ``k`` steps after chunk
0, with step length ``s' = R / K``: in any step a link carries at most
``sum_t w(l, t) / K <= s' b(l)`` (the K shifted replays overlap), so the
per-step bandwidth rows of LP 3.10 hold, and the ``T' = T + K - 1`` steps take
``s' T' = R (1 + (T - 1) / K) < R (1 + eps)``.

What this module adds to make that an executable :class:`Schedule`:

1. **Which data goes where.**  ``(f, w)`` says how much of an origin's data
   crosses each edge, not which part.  Per origin (block) we decompose the
   usage ``w`` greedily into weighted *trees* (:func:`_copy_trees`): a tree
   is a set of transmissions (NPU to NPU, through switches, which never copy
   or store) that brings one piece of data from the origin to every
   destination; it is grown destination by destination along the widest path
   in the residual usage (ties broken towards the destination's own flow
   ``f[d]``), and takes the weight its scarcest edge allows.  When no tree
   fits the residual usage any more (the LP relaxation let flows share an
   edge that no routing can share, thesis Sec. 3.1) the remaining trees
   overuse some edges; that is measured, not hidden (``rounding_overhead``
   below, and the tree-column master can do better).  A physical NPU is
   entered at most once per tree, so a reversed tree (a reduction:
   reduce-scatter, reduce, allreduce's first phase) counts every contribution
   exactly once.  Blocks without copies (all-to-all, scatter, gather: thesis LP 3.16)
   use the standard path decomposition of each destination's flow
   (:func:`_flow_paths`).
2. **Equal chunks, rounded over the whole schedule.**  The IR has equal
   chunks: ``K`` replays of ``q`` chunks per shard (allreduce: ``N q`` chunks
   per replay, dealt to the owners by the LP's shares), every chunk on one
   tree of its commodity.  Trees are chosen chunk by chunk over *all*
   replays (herding, :class:`~evaluators.mcf.chunking.Herding`), so the
   rounding of the trees' real weights to chunk counts is spread over
   ``K q`` chunks instead of being repeated in every replay; replays then
   differ, and their timing uses windows of ``W`` steps
   (:mod:`evaluators.mcf.chunking`: why, and the proof that every link can
   carry its transfers).  :func:`discretize` picks the fewest chunks ``K q``
   whose time is within ``(1 + eps) R``, and the route (the fluid solution's
   trees or the tree-column master's, :mod:`evaluators.mcf.tree_master`)
   that needs fewer; ``metadata["chunk_reason"]`` says why, or why epsilon
   cannot be reached (transfer cap, or trees that cannot reach ``R`` at this
   ``T``) and what the best schedule reached.
3. **Latency.**  The fluid LP has none.  A transmission over ``h`` links
   that starts in step ``u`` of the time-expanded network takes ``h`` steps;
   steps are ``s'`` long, and step ``u`` starts after the latency offset
   ``A_u = a_0 + ... + a_{u-1}`` (``a_u`` the largest latency of a link used
   in step ``u``), or that offset rounded up to whole steps when aligning the
   steps gives a shorter schedule (:func:`~evaluators.mcf.chunking.window_timing`).

**Why the old version missed epsilon** (issue 21; numbers in
``experiments/benchmarks/RESULTS.md``, "MCF epsilon").  Measured on the
issue's cases, term by term: the pipeline fill ``(T_tot - 1) / K`` was on
budget (``eps / 2``), the replay shifts and the latency re-timing cost
nothing beyond ``T_tot`` latencies; the whole miss was the per-replay
largest-remainder rounding: ``q`` chunks per shard and replay, the same
rounding in every replay, so its overhead only shrinks with ``q`` -- and
``K q`` transfers hit the cap first (torus:3x5 allgather at ``eps = 0.01``:
``K = 400``, ``q = 3``, overhead ``0.143``, 15 % slow although the trees
reach ``R``; dgx-a100:2: ``K = 600``, ``q = 2``, ``0.119``).  Rounding over
the whole schedule makes the overhead at most one chunk per tree in total.

**The claim tested** (``tests/evaluators/test_mcf_epsilon.py``,
``tests/evaluators/test_mcf_discretize.py``): the schedule is valid and,
with ``T_tot`` the steps of one replay (``T``; allreduce ``2T``, its reduce
and gather networks back to back as the thesis prescribes),

    time_s <= (K - 1 + T_tot W) s' + (latency offsets)
           <= R (1 + eps) + A_{T_tot}        when metadata["within_epsilon"],

with ``K s' = R (1 + delta)`` (``delta``: ``rounding_overhead``) and
``A_{T_tot} <= T_tot x`` (largest link latency) the fluid model's missing
latency (``metadata["latency_s"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_choice
from evaluators.collectives import KINDS, REDUCING_KINDS, Collective
from evaluators.mcf.chunking import (EPS_TOL, ChunkPlan, Herding, replays_lower_bound,
                                     stride_sequence, window_timing)
from evaluators.mcf.dantzig_wolfe import DECOMPOSITIONS
from evaluators.mcf.ten import HOLD, Network
from evaluators.registry import register_algorithm
from evaluators.schedule import COPY, REDUCE, Schedule

__all__ = ["discretize", "DiscretePlan", "synthesize_mcf", "DECOMPOSITIONS"]

#: Values (fractions of a block's data) below this are zero.
TOL = 1e-9
#: Largest number of chunks per shard and replay tried for the rounding.
MAX_SPLIT = 8
#: Default cap on transfers in one schedule (the validator replays them in
#: Python, about a microsecond each).
MAX_TRANSFERS = 2_000_000



@dataclass(frozen=True)
class _Tx:
    """One transmission of a block: ``tail -> head`` (NPUs) during network steps ``[t0, t1)``.

    ``links`` are physical links in the network's direction, ``edges`` the
    network edges it occupies (for the usage accounting).
    """

    tail: int
    head: int
    t0: int
    t1: int
    links: tuple[int, ...]
    edges: tuple[int, ...]


@dataclass(frozen=True)
class DiscretePlan:
    """How a fluid solution was discretised (also in the schedule's metadata).

    Attributes
    ----------
    replays : int
        ``K``, the shifted replays (Theorem 4's chunks).
    split : int
        ``q``, chunks per shard (allreduce: per ``n`` chunks) in each replay.
    steps : int
        ``T_tot``, steps of one replay.
    step_s : float
        ``s'``, seconds of bandwidth time per step.
    latency_s : float
        ``A_{T_tot}``, latency added over the steps, seconds.
    rounding_overhead : float
        ``delta``: the bottleneck's discrete load over the fluid ``R``, minus one.
    delta_max : float
        Rounding overhead the epsilon budget allows with this fill.
    trees : int
        Weighted trees (paths for flow blocks) over all blocks.
    window : int
        ``W``: steps of ``s'`` one step's transmissions may spread over
        (:mod:`evaluators.mcf.chunking`; 1 when every replay is rounded alike).
    """

    replays: int
    split: int
    steps: int
    step_s: float
    latency_s: float
    rounding_overhead: float
    delta_max: float
    trees: int
    window: int = 1


# ------------------------------------------------------------------- widest paths
def hold_layers(net: Network) -> list[np.ndarray]:
    """Edge ids grouped by the step of their tail (a topological order of the DAG)."""
    et = net.node_time[net.tail]
    order = np.argsort(et, kind="stable")
    bounds = np.searchsorted(et[order], np.arange(net.steps + 1))
    return [order[bounds[t]:bounds[t + 1]] for t in range(net.steps)]


def _widest(net: Network, layers, cap: np.ndarray, sources: np.ndarray,
            forbidden: np.ndarray, additive: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Max-bottleneck value and predecessor edge of every node, from ``sources`` (value inf).

    One vectorised pass per step (edges only go from step ``t`` to ``t + 1``);
    a node keeps its first best predecessor, so ties favour existing values.
    """
    val = np.full(net.n_nodes, -np.inf)
    val[sources] = np.inf
    pred = np.full(net.n_nodes, -1, dtype=np.int64)
    # Ties (widths equal to 1e-9) go to the path that leaves the sources latest:
    # joining a destination deep in the tree keeps the scarce edges near the
    # origin for the other trees (a tree crossing a tight cut twice cannot fit).
    left = np.full(net.n_nodes, -1, dtype=np.int64)
    left[sources] = net.node_time[sources]
    for idx in layers:
        if idx.size == 0:
            continue
        tl, hd = net.tail[idx], net.head[idx]
        if additive:   # cheapest path: values are minus the path cost (sources: 0)
            base = np.where(np.isposinf(val[tl]), 0.0, val[tl])
            cand = np.where(np.isneginf(val[tl]), -np.inf, base + cap[idx])
            ok = np.isfinite(cand) & ~forbidden[hd]
        else:
            cand = np.minimum(val[tl], cap[idx])
            ok = (cand > 0) & ~forbidden[hd]
        if not ok.any():
            continue
        e, h, c, lv = idx[ok], hd[ok], cand[ok], left[tl[ok]]
        cq = np.floor(np.clip(c, -1e9, 1e9) * 1e9)
        order = np.lexsort((-lv, -cq, h))
        e, h, c, lv = e[order], h[order], c[order], lv[order]
        first = np.r_[True, h[1:] != h[:-1]]
        e, h, c, lv = e[first], h[first], c[first], lv[first]
        better = (c > val[h]) & ~np.isposinf(val[h])
        val[h[better]] = c[better]
        pred[h[better]] = e[better]
        left[h[better]] = lv[better]
    return val, pred


def _trace(net: Network, pred: np.ndarray, val: np.ndarray, sink: int) -> list[int]:
    """Edges from a source (value inf) to ``sink``."""
    path = []
    x = sink
    while not np.isposinf(val[x]):
        e = int(pred[x])
        if e < 0:   # pragma: no cover - callers only trace reachable sinks
            raise RuntimeError(f"network node {x} is unreachable")
        path.append(e)
        x = int(net.tail[e])
    return path[::-1]


def _segments(net: Network, path: list[int], free: np.ndarray) -> list[_Tx]:
    """Split a path into transmissions between copying nodes (free hold-overs dropped)."""
    out = []
    seg: list[int] = []
    for e in path:
        if free[e]:
            continue
        seg.append(e)
        if net.copy[net.head[e]]:
            a, b = seg[0], seg[-1]
            links = tuple(int(net.link[x]) for x in seg if net.link[x] != HOLD)
            out.append(_Tx(int(net.node_phys[net.tail[a]]), int(net.node_phys[net.head[b]]),
                           int(net.node_time[net.tail[a]]), int(net.node_time[net.head[b]]),
                           links, tuple(seg)))
            seg = []
    return out


def free_holds(net: Network) -> np.ndarray:
    """Hold-over edges at copying nodes: they carry no capacity (data just stays)."""
    return (net.link == HOLD) & net.copy[net.tail]


# ------------------------------------------------------------------ decompositions
def copy_trees(net: Network, w: np.ndarray, f: np.ndarray) -> list[tuple[float, list[_Tx]]]:
    """Greedy decomposition of a copy block's usage into weighted trees.

    Parameters
    ----------
    net : Network
        The block's time-expanded network.
    w : ndarray
        Usage per edge, normalised to the block's data (fractions).
    f : ndarray, shape (destinations, edges)
        Flows, normalised likewise (each destination receives 1).

    Returns
    -------
    list of (float, list of _Tx)
        Weights (summing to 1) and each tree's transmissions.  Every tree
        enters a physical NPU at most once and reaches every destination.

    Notes
    -----
    Each round grows one tree: destinations in order, each joined by the
    widest path (max over paths of the smallest residual usage, divided by
    the tree's own use of the edge plus one) from any NPU the tree already
    holds the data at; ties go to edges of the destination's own flow.  The
    tree takes the largest weight its edges allow, which exhausts at least
    one edge, so there are at most ``edges + 1`` rounds.  If a destination
    cannot be joined within the residual usage, the cheapest overuse is
    taken and shows up in the discrete loads.
    """
    layers = hold_layers(net)
    free = free_holds(net)
    k = np.arange(net.destinations.size)
    best = None
    # A few destination orders; keep the decomposition with the least overuse.
    for order in (k, k[::-1], np.roll(k, k.size // 2)):
        trees, over = _grow_trees(net, layers, free, w, f, order)
        if best is None or over < best[1] - TOL:
            best = (trees, over)
        if over <= TOL:
            return _merge(trees)
    return _merge(_pack(net, layers, free, w, f, best[0]))


def tree_of(net: Network, layers, free, cost: np.ndarray, order) -> list[_Tx]:
    """Cheapest-path tree: each destination joined to the tree by its cheapest path."""
    dests = net.destinations
    phys, time, copy_node = net.node_phys, net.node_time, net.copy
    never = np.iinfo(np.int64).max // 4
    arrival = np.full(int(phys.max()) + 1, never, dtype=np.int64)
    arrival[net.origin] = 0
    txs: list[_Tx] = []
    for k in order:
        if arrival[dests[k]] < never:
            continue
        a = arrival[phys]
        held = copy_node & (a < never)
        forbidden = held & (time < a)
        for attempt in (forbidden, np.zeros_like(forbidden)):
            val, pred = _widest(net, layers, -cost, np.flatnonzero(held & (time >= a)),
                                attempt, additive=True)
            if np.isfinite(val[net.sinks[k]]) or np.isposinf(val[net.sinks[k]]):
                break
        for tx in _segments(net, _trace(net, pred, val, int(net.sinks[k])), free):
            if arrival[tx.head] <= tx.t1:
                continue
            if arrival[tx.head] < never:
                txs.remove(next(t for t in txs if t.head == tx.head))
            arrival[tx.head] = tx.t1
            txs.append(tx)
    return _prune(txs, set(dests.tolist()), net.origin)


def _uses(net: Network, txs: list[_Tx]) -> np.ndarray:
    m = np.zeros(net.n_edges)
    for tx in txs:
        np.add.at(m, list(tx.edges), 1.0)
    return m


def _pack(net: Network, layers, free, w, f, greedy, rounds: int = 60):
    """Fractional tree packing into the usage ``w`` by column generation.

    Master: maximise the total weight of trees with ``sum_j lam_j m_j <= w``
    and ``sum_j lam_j <= 1``; pricing: the cheapest tree under the master's
    edge duals (:func:`tree_of`, a heuristic for the Steiner arborescence).
    Starts from the greedy trees; what the packing cannot place (the LP
    relaxation's gap, or the heuristic's) goes on the greedy trees pro rata,
    overusing edges, as the discrete loads then show.
    """
    from scipy.optimize import linprog

    cap_rows = np.flatnonzero(~free)
    cols = [txs for _, txs in greedy]
    M = [_uses(net, t)[cap_rows] for t in cols]
    k = np.arange(net.destinations.size)
    lam = None
    for _ in range(rounds):
        A = np.vstack([np.column_stack(M), np.ones((1, len(M)))])
        b = np.concatenate([w[cap_rows], [1.0]])
        res = linprog(-np.ones(len(M)), A_ub=A, b_ub=b, bounds=(0, None), method="highs")
        if res.x is None:
            break
        lam = res.x
        if -res.fun >= 1.0 - TOL:
            break
        y = -res.ineqlin.marginals
        cost = np.zeros(net.n_edges)
        cost[cap_rows] = y[:-1] + 1e-9
        found = False
        for order in (k, k[::-1]):
            txs = tree_of(net, layers, free, cost, order)
            m = _uses(net, txs)[cap_rows]
            if 1.0 - float(y[:-1] @ m) - float(y[-1]) > 1e-9:
                cols.append(txs)
                M.append(m)
                found = True
                break
        if not found:
            break
    if lam is None:
        return greedy
    total = float(lam.sum())
    trees = [(float(l), t) for l, t in zip(lam, cols) if l > TOL * 1e-3]
    if total < 1.0 - TOL:    # scale up: the shortfall overuses edges pro rata
        trees = [(l / total, t) for l, t in trees]
    return trees


def _grow_trees(net: Network, layers, free, w, f, order):
    """One greedy decomposition (see :func:`copy_trees`); also its total overuse."""
    dests = net.destinations
    wr = np.where(free, 0.0, w).astype(float)
    support = f > TOL
    phys, time, copy_node = net.node_phys, net.node_time, net.copy
    never = np.iinfo(np.int64).max // 4
    trees = []
    remaining = 1.0
    for _ in range(net.n_edges + 2):
        if remaining <= TOL:
            break
        arrival = np.full(int(phys.max()) + 1, never, dtype=np.int64)
        arrival[net.origin] = 0
        txs: list[_Tx] = []
        m = np.zeros(net.n_edges)
        for k in order.tolist():
            if arrival[dests[k]] < never:
                continue
            a = arrival[phys]
            held = copy_node & (a < never)
            sources = np.flatnonzero(held & (time >= a))
            forbidden = held & (time < a)
            base = np.where(wr > TOL, wr / (m + 1.0), 0.0)
            bonus = 1.0 + 1e-7 * support[k]
            val, pred = _widest(net, layers, np.where(free, np.inf, base * bonus), sources,
                                forbidden)
            sink = int(net.sinks[k])
            if not val[sink] > 0:          # nothing fits any more: overuse, measured later
                cap = np.where(free, np.inf, np.maximum(base, 1e-12 / (m + 1.0)) * bonus)
                val, pred = _widest(net, layers, cap, sources, forbidden)
                if not val[sink] > 0:      # only through an NPU the tree reaches later
                    val, pred = _widest(net, layers, cap, sources, np.zeros_like(forbidden))
            for tx in _segments(net, _trace(net, pred, val, sink), free):
                if arrival[tx.head] <= tx.t1:
                    continue
                if arrival[tx.head] < never:   # reached earlier now: the old delivery goes
                    old = next(t for t in txs if t.head == tx.head)
                    txs.remove(old)
                    m[list(old.edges)] -= 1.0
                arrival[tx.head] = tx.t1
                txs.append(tx)
                m[list(tx.edges)] += 1.0
        txs = _prune(txs, set(dests.tolist()), net.origin)
        m = np.zeros(net.n_edges)
        for tx in txs:
            np.add.at(m, list(tx.edges), 1.0)
        used = (m > 0) & (wr > TOL)
        lam = remaining
        if used.any():
            lam = min(lam, float((wr[used] / m[used]).min()))
        wr = wr - lam * m
        trees.append((lam, txs))
        remaining -= lam
    if remaining > TOL:   # pragma: no cover - the loop bound is never reached
        trees.append((remaining, trees[-1][1]))
    return trees, float(np.maximum(-wr, 0.0).sum())


def _prune(txs: list[_Tx], dests: set[int], origin: int) -> list[_Tx]:
    """Drop transmissions into NPUs that are no destination and pass nothing on."""
    while True:
        senders = {t.tail for t in txs}
        keep = [t for t in txs if t.head in dests or t.head in senders]
        if len(keep) == len(txs):
            return txs
        txs = keep


def _merge(trees):
    """Merge identical trees, drop empty weights, renormalise."""
    out: dict[tuple, list] = {}
    for lam, txs in trees:
        if lam <= TOL * 1e-3:
            continue
        key = tuple(sorted((t.tail, t.head, t.t0, t.links) for t in txs))
        if key in out:
            out[key][0] += lam
        else:
            out[key] = [lam, txs]
    total = sum(v[0] for v in out.values())
    return [(v[0] / total, v[1]) for v in out.values()]


def flow_paths(net: Network, f_row: np.ndarray, sink: int) -> list[tuple[float, list[_Tx]]]:
    """Standard path decomposition of one destination's flow (normalised to 1).

    Widest path first, subtract its bottleneck, repeat: each round zeroes one
    edge, so at most ``edges`` paths.  Returns ``[(weight, transmissions)]``.
    """
    layers = hold_layers(net)
    free = free_holds(net)
    fr = f_row.astype(float).copy()
    sources = np.array([net.source])
    forbidden = np.zeros(net.n_nodes, dtype=bool)
    out = []
    remaining = 1.0
    for _ in range(net.n_edges + 2):
        if remaining <= TOL:
            break
        val, pred = _widest(net, layers, np.where(fr > TOL, fr, 0.0), sources, forbidden)
        if not val[sink] > 0:
            val, pred = _widest(net, layers, np.full(net.n_edges, 1e-12), sources, forbidden)
        path = _trace(net, pred, val, sink)
        lam = min(remaining, float(fr[path].min())) if path else remaining
        if lam <= TOL:
            lam = remaining
        fr[path] -= lam
        out.append((lam, _segments(net, path, free)))
        remaining -= lam
    return _merge(out)


# ------------------------------------------------------------------ discretisation
@dataclass
class _Commodity:
    """Data that travels as one unit: a copy block, or one destination of a flow block."""

    block: int
    trees: list            # [(weight, [_Tx])]
    shard: int             # shard index (unused for allreduce)
    owner: int = -1        # allreduce: position of the owner of the data
    load: np.ndarray | None = None    # (trees, links): link uses of one chunk per tree
    hops: np.ndarray | None = None    # (trees,): transfers of one chunk per tree


def _commodities(result, collective: Collective) -> tuple[list[_Commodity], np.ndarray]:
    """Decompose every block of ``result``; allreduce also returns the owners' shares."""
    kind = collective.kind
    N = collective.n
    pos = {p: i for i, p in enumerate(collective.npus)}
    shares = np.zeros(N)
    comms: list[_Commodity] = []
    for b, fl in enumerate(result.flows):
        net = fl.network
        f = fl.flow_bytes.toarray()
        into = np.array([f[k, net.head == s].sum() - f[k, net.tail == s].sum()
                         for k, s in enumerate(net.sinks.tolist())])
        if kind in ("alltoall", "scatter", "gather"):
            for k, d in enumerate(net.destinations.tolist()):
                if into[k] > 0:
                    shard = pos[fl.origin] * N + pos[d] if kind == "alltoall" else pos[d]
                    comms.append(_Commodity(b, flow_paths(net, f[k] / into[k],
                                                          int(net.sinks[k])), shard))
            continue
        data = float(into.max()) if into.size else 0.0
        if kind == "allreduce":
            share = float((result.shares or {}).get(fl.origin, 1.0 / N))
            shares[pos[fl.origin]] = share
            if share <= TOL:
                continue
        if data <= 0:
            continue
        shard = 0 if kind in ("broadcast", "reduce") else pos[fl.origin]
        comms.append(_Commodity(b, copy_trees(net, fl.usage_bytes / data, f / data), shard,
                                pos[fl.origin]))
    return comms, shares


def discretize(result, topology, collective: Collective, *, epsilon: float = 0.1,
               tree_master: bool = True, max_transfers: int = MAX_TRANSFERS) -> Schedule:
    """Theorem 4's discrete schedule from a fluid optimum (module docstring).

    Parameters
    ----------
    result : McfResult
        From :func:`evaluators.mcf.fluid_optimum` (or a decomposition) for
        ``collective`` on ``topology``.
    topology : topologies.Topology
        The network (latencies enter as the module docstring says).
    collective : Collective
        The collective; its ``chunks_per_npu`` divides the schedule's.
    epsilon : float, optional
        Relative slack over the fluid time ``R`` (``0 < epsilon <= 10``).
    tree_master : bool, optional
        For the copy kinds (allgather, broadcast, reduce-scatter, reduce,
        allreduce), when the trees of the fluid solution miss the budget or
        need more than the fewest chunks any plan could use, also try the
        tree columns of :mod:`evaluators.mcf.tree_master` and keep the route
        with the fewest chunks; the metadata then has ``tree_lp_time_s``
        (the best time of per-origin trees), ``tree_lp_gap``,
        ``relaxation_gap`` (``R_tree / R - 1``) and
        ``within_epsilon_of_tree_lp``.
    max_transfers : int, optional
        Largest number of transfers the schedule may have.

    Returns
    -------
    Schedule
        ``link_model="shared"``; ``metadata`` has ``fluid_time_s``, ``optimal``,
        ``dual_gap``, ``epsilon``, ``within_epsilon``, ``bound_s`` (``R (1 + eps)``
        plus the latency term), ``ratio`` (``time_s / R``), ``chunks``
        (per shard, ``K q``), ``chunk_reason``, ``route``
        (``"fluid-trees"`` or ``"tree-columns"``) and the
        :class:`DiscretePlan` fields.

    Notes
    -----
    ``K ~ (T_tot W - 1) / epsilon`` replays of ``q`` chunks per shard: about
    ``K q`` times the transmissions of one fluid replay.
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
            or not math.isfinite(epsilon) or not 0 < epsilon <= 10:
        raise invalid("epsilon", epsilon, "a number in (0, 10] (relative slack over R)")
    if isinstance(max_transfers, bool) or not isinstance(max_transfers, (int, np.integer)) \
            or max_transfers < 1:
        raise invalid("max_transfers", max_transfers, "an integer >= 1")
    kind = collective.kind
    T = int(result.steps)
    allreduce = kind == "allreduce"
    T_tot = 2 * T if allreduce else T
    comms, shares = _commodities(result, collective)
    ctx = _Context(result, topology, collective, T, T_tot, epsilon, max_transfers, shares)
    plan, assign = _choose(ctx, comms)
    route = "fluid-trees"
    tree_info = None
    K_min = replays_lower_bound(T_tot, epsilon, collective.chunks_per_npu)
    if tree_master and kind in TREE_MASTER_KINDS and comms \
            and (not plan.ok or plan.chunks > K_min):
        fluid_trees = [c.trees for c in comms]
        tree_info = _tree_master(result, topology, comms)
        if tree_info is not None:
            alt, alt_assign = _choose(ctx, comms)
            if _better(alt, plan):
                plan, assign, route = alt, alt_assign, "tree-columns"
            else:
                for c, trees in zip(comms, fluid_trees):
                    c.trees = trees
    sched = _timed(ctx, comms, assign, plan, sum(len(c.trees) for c in comms))
    m = sched.metadata
    R = float(result.time_s)
    m.update(route=route, chunks=plan.chunks, chunk_reason=plan.reason,
             ratio=sched.time_s / R if R > 0 else 1.0)
    m["within_epsilon"] = bool(plan.ok and sched.time_s <= m["bound_s"] * (1 + 1e-9))
    if tree_info is not None:
        # The trees' own optimum is the achievable target (thesis Sec. 5.2 remark).
        Rt = tree_info.time_s
        m.update(tree_master=True, tree_lp_time_s=Rt, tree_lp_gap=tree_info.gap,
                 tree_lp_iterations=tree_info.iterations,
                 relaxation_gap=Rt / R - 1.0 if R > 0 else 0.0,
                 within_epsilon_of_tree_lp=bool(
                     sched.time_s - m["latency_s"] <= Rt * (1 + epsilon) * (1 + 1e-9)))
    return sched


@dataclass(frozen=True)
class _Context:
    result: object
    topology: object
    collective: Collective
    T: int
    T_tot: int
    epsilon: float
    max_transfers: int
    shares: np.ndarray


@dataclass(frozen=True)
class _TreeRows:
    """Replay-independent transfers of one tree, in real steps (forward direction)."""

    src: np.ndarray
    dst: np.ndarray
    rs: np.ndarray
    re: np.ndarray
    op: int
    lengths: np.ndarray
    links: np.ndarray
    hop_step: np.ndarray


def _tree_rows(ctx: _Context, comms) -> list[list[_TreeRows]]:
    """Per commodity and tree: its transmissions as real-time rows (reductions reversed)."""
    T = ctx.T
    out = []
    for c in comms:
        fl = ctx.result.flows[c.block]
        offset = T if (ctx.collective.kind == "allreduce" and fl.phase == "allgather") else 0
        op = REDUCE if (fl.reversed and ctx.collective.kind in REDUCING_KINDS) else COPY
        trees = []
        for _, txs in c.trees:
            rows = []
            for tx in txs:
                if fl.reversed:
                    rows.append((tx.head, tx.tail, offset + T - tx.t1, offset + T - tx.t0,
                                 tx.links[::-1]))
                else:
                    rows.append((tx.tail, tx.head, offset + tx.t0, offset + tx.t1, tx.links))
            lengths = np.array([len(r[4]) for r in rows], dtype=np.int64)
            rs = np.array([r[2] for r in rows], dtype=np.int64)
            links = np.array([x for r in rows for x in r[4]], dtype=np.int64)
            first = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            hop = np.repeat(rs, lengths) + np.arange(links.size) - np.repeat(first, lengths)
            trees.append(_TreeRows(np.array([r[0] for r in rows], dtype=np.int64),
                                   np.array([r[1] for r in rows], dtype=np.int64), rs,
                                   np.array([r[3] for r in rows], dtype=np.int64), op,
                                   lengths, links, hop))
        out.append(trees)
    return out


class _Sequencer:
    """Trees of the chunks, placed replay by replay (cached: one sequence serves every ``K``).

    Chunks take their trees by herding (:class:`~evaluators.mcf.chunking.Herding`)
    on the work per (link, step).  Allreduce first deals the chunks to the
    owners by their shares (:func:`~evaluators.mcf.chunking.stride_sequence`);
    every chunk then takes one tree of its owner's reduce and one of its
    gather commodity.
    """

    def __init__(self, ctx: _Context, comms, rows) -> None:
        self.ctx, self.comms = ctx, comms
        L, Tt = ctx.topology.n_links, ctx.T_tot
        inv_bw = float(ctx.topology.bandwidth.max()) / ctx.topology.bandwidth
        loads, weights = [], []
        for c, trees in zip(comms, rows):
            x = np.zeros((len(trees), L * Tt))
            for j, tr in enumerate(trees):
                np.add.at(x[j], tr.links * Tt + tr.hop_step, inv_bw[tr.links])
            loads.append(x)
            w = np.array([max(x_, 0.0) for x_, _ in c.trees])
            weights.append(w / w.sum())
        # Only busy links can force a longer window: weight each cell by its
        # link's mean utilisation (1 at the bottleneck).
        mean = sum(w @ x for w, x in zip(weights, loads)).reshape(L, Tt).sum(axis=1)
        util = np.repeat(mean / max(float(mean.max()), 1e-300), Tt)
        self.herd = Herding([x * util[None, :] for x in loads], weights)
        self.allreduce = ctx.collective.kind == "allreduce"
        if self.allreduce:
            self.owners = sorted({c.owner for c in comms})
            sh = np.array([max(float(ctx.shares[o]), 0.0) for o in self.owners])
            self.share = sh / sh.sum()
            self.of_owner = {o: [i for i, c in enumerate(comms) if c.owner == o]
                             for o in self.owners}
        self.slots = 0                               # chunks (allreduce: slots) placed
        self.order = np.zeros(0, dtype=np.int64)     # commodity of each placement
        self.slot = np.zeros(0, dtype=np.int64)      # chunk index of each placement
        self.tree = np.zeros(0, dtype=np.int64)

    def _extend(self, n: int) -> None:
        if n <= self.slots:
            return
        n = max(n, 2 * self.slots)
        new = np.arange(self.slots, n)
        C = len(self.comms)
        if not self.allreduce:
            order = np.tile(np.arange(C), new.size)
            slot = np.repeat(new, C)
        else:
            owner = np.array(self.owners)[stride_sequence(self.share[None, :], n)[0][new]]
            order = np.concatenate([self.of_owner[o] for o in owner.tolist()])
            slot = np.concatenate([np.full(len(self.of_owner[o]), s)
                                   for s, o in zip(new.tolist(), owner.tolist())])
        self.order = np.concatenate([self.order, order])
        self.slot = np.concatenate([self.slot, slot])
        self.tree = np.concatenate([self.tree, self.herd.place(order)])
        self.slots = n

    def transfers_per_replay(self, q: int) -> float:
        """Expected transfers of one replay (trees' transfers weighted by their weights)."""
        per = [sum(w * len(txs) for w, txs in c.trees) for c in self.comms]
        if not self.allreduce:
            return q * float(sum(per))
        N = self.ctx.collective.n
        return N * q * float(sum(self.share[self.owners.index(c.owner)] * p
                                 for c, p in zip(self.comms, per)))

    def assign(self, q: int, K: int) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per commodity and tree: (chunk ids, replays) of its chunks (``K`` replays of ``q``)."""
        N = self.ctx.collective.n
        per = N * q if self.allreduce else q
        n = K * per
        self._extend(n)
        m = self.slot < n
        order, slot, tree = self.order[m], self.slot[m], self.tree[m]
        out = []
        for i, c in enumerate(self.comms):
            sel = order == i
            s, tj = slot[sel], tree[sel]
            ids = s if self.allreduce else c.shard * K * q + s
            out.append([(ids[tj == j], s[tj == j] // per) for j in range(len(c.trees))])
        return out


def _alpha(ctx: _Context, rows) -> np.ndarray:
    """Largest latency of a link used in each real step (over all trees), seconds."""
    used = np.zeros((max(ctx.T_tot, 1), ctx.topology.n_links), dtype=bool)
    for trees in rows:
        for tr in trees:
            used[tr.hop_step, tr.links] = True
    return np.where(used, ctx.topology.latency[None, :], 0.0).max(axis=1)


def _work(ctx: _Context, rows, assign, cb: float, K: int) -> np.ndarray:
    """Seconds of link bandwidth per (replay, link, real step)."""
    L, Tt = ctx.topology.n_links, ctx.T_tot
    idx, wts = [], []
    per_link = cb / ctx.topology.bandwidth
    for trees, pieces in zip(rows, assign):
        for tr, (_, reps) in zip(trees, pieces):
            if reps.size == 0 or tr.links.size == 0:
                continue
            cell = tr.links * Tt + tr.hop_step
            idx.append((reps[:, None] * (L * Tt) + cell[None, :]).ravel())
            wts.append(np.tile(per_link[tr.links], reps.size))
    if not idx:
        return np.zeros((K, L, Tt))
    w = np.bincount(np.concatenate(idx), weights=np.concatenate(wts), minlength=K * L * Tt)
    return w.reshape(K, L, Tt)


def _n_transfers(rows, assign) -> int:
    return int(sum(tr.src.size * ids.size for trees, pieces in zip(rows, assign)
                   for tr, (ids, _) in zip(trees, pieces)))


def _choose(ctx: _Context, comms):
    """Fewest chunks ``K q`` within ``(1 + eps) R`` (:mod:`evaluators.mcf.chunking`)."""
    R = max(float(ctx.result.time_s), 1e-300)
    eps, Tt, c0 = ctx.epsilon, ctx.T_tot, ctx.collective.chunks_per_npu
    rows = _tree_rows(ctx, comms)
    seq = _Sequencer(ctx, comms, rows)
    alpha = _alpha(ctx, rows)
    latency_s = float(alpha.sum())
    target = 1.0 + eps
    notes: list[str] = []
    tried: dict[tuple[int, int], tuple] = {}

    def evaluate(q: int, K: int):
        est = seq.transfers_per_replay(q) * K
        if est > ctx.max_transfers * 1.05:       # clearly over the cap: skip the placement
            return None, int(est)
        if (q, K) not in tried:
            assign = seq.assign(q, K)
            n_tx = _n_transfers(rows, assign)
            if n_tx > ctx.max_transfers:
                tried[q, K] = (None, n_tx)
            else:
                cb = ctx.collective.with_chunks(K * q).chunk_bytes
                step_s, W, off = window_timing(_work(ctx, rows, assign, cb, K), K, alpha)
                # Bandwidth part; latency beyond the fluid bound's allowance (its
                # rounding to whole steps) counts against epsilon.
                ratio = ((K - 1 + Tt * W) * step_s + float(off[-1]) - latency_s) / R
                plan = ChunkPlan(q, K, W, step_s, K * step_s / R - 1.0, ratio, n_tx,
                                 ratio <= target * (1 + EPS_TOL), "",
                                 tuple(float(x) for x in off))
                tried[q, K] = (plan, assign)
        return tried[q, K]

    best = None
    fallback = None
    for q in range(1, MAX_SPLIT + 1):
        mult = c0 // math.gcd(c0, q)
        K = replays_lower_bound(Tt, eps, mult)
        if best is not None and K * q >= best[0].chunks:
            break
        lo = 0
        prev_delta = None
        for _ in range(12):
            plan, assign = evaluate(q, K)
            if plan is None:
                notes.append(f"q={q} would need more than K={K} replays (over the cap of "
                             f"{ctx.max_transfers} transfers)")
                # Nothing fits yet: the most replays within the cap is the best reached.
                fit = mult * int(K * ctx.max_transfers / assign / mult)
                while fallback is None and fit >= mult:
                    p2, a2 = evaluate(q, fit)
                    if p2 is not None:
                        fallback = (p2, a2)
                    fit = mult * int(fit * 0.9 / mult)
                break
            if fallback is None or plan.ratio < fallback[0].ratio:
                fallback = (plan, assign)
            if plan.ok:
                # The growth step may overshoot: bisect down to the fewest replays that pass.
                while K - lo > mult:
                    mid = mult * ((lo + K) // (2 * mult))
                    if mid <= lo:
                        break
                    p2, a2 = evaluate(q, mid)
                    if p2 is not None and p2.ok:
                        K, plan, assign = mid, p2, a2
                    else:
                        lo = mid
                if best is None or plan.chunks < best[0].chunks:
                    best = (plan, assign)
                break
            lo = K
            room = target / (1.0 + plan.delta) - 1.0
            # Rounding alone above epsilon and not shrinking with more replays: these
            # trees cannot be rounded closer at this split, so more replays only cost time
            # (the tree-column route, or a larger split, is the way out).
            if room <= 0 and prev_delta is not None and plan.delta > 0.7 * prev_delta:
                notes.append(f"q={q}: rounding {plan.delta:.2e} stopped shrinking at K={K}")
                break
            prev_delta = plan.delta
            extra = (plan.offsets_s[-1] - latency_s) / plan.step_s
            grow = math.ceil((Tt * plan.window + extra - 1) / room) if room > 0 else 2 * K
            K = mult * math.ceil(max(grow, K + 1) / mult)
    if best is not None:
        plan, assign = best
        why = (f"K={plan.replays} replays of q={plan.split} chunk(s) per shard: the fewest "
               f"chunks found whose pipeline fill (T_tot W - 1)/K = ({Tt}x{plan.window} - 1)/"
               f"{plan.replays} and rounding {max(plan.delta, 0.0):.2e} fit eps={eps:g}")
        return ChunkPlan(plan.split, plan.replays, plan.window, plan.step_s, plan.delta,
                         plan.ratio, plan.transfers, True, why, plan.offsets_s), assign
    if fallback is None:
        raise InfeasibleError(f"max_transfers={ctx.max_transfers} is fewer than one replay "
                              f"of the {ctx.collective.kind} needs")
    plan, assign = fallback
    why = (f"cannot reach eps={eps:g}: best {plan.ratio:.4f} x R with q={plan.split}, "
           f"K={plan.replays}, W={plan.window} (rounding {plan.delta:.2e})")
    if notes:
        why += "; " + notes[-1]
    return ChunkPlan(plan.split, plan.replays, plan.window, plan.step_s, plan.delta, plan.ratio,
                     plan.transfers, False, why, plan.offsets_s), assign


def _better(a: ChunkPlan, b: ChunkPlan) -> bool:
    """Within epsilon first, then fewer chunks (or, both missing, a better ratio)."""
    if a.ok != b.ok:
        return a.ok
    if a.ok:
        return a.chunks < b.chunks
    return a.ratio < b.ratio


#: Kinds whose blocks are copy trees of single origins (the tree master's scope;
#: allreduce keeps the fluid LP's shares, its two phases share the link rows).
TREE_MASTER_KINDS = ("allgather", "broadcast", "reducescatter", "reduce", "allreduce")


def _tree_master(result, topology, comms):
    """Replace the commodities' trees by the tree master's (module :mod:`tree_master`)."""
    from evaluators.mcf.tree_master import tree_master as solve

    nets, datas = [], []
    for c in comms:
        fl = result.flows[c.block]
        f = fl.flow_bytes.toarray()
        net = fl.network
        into = np.array([f[k, net.head == s].sum() - f[k, net.tail == s].sum()
                         for k, s in enumerate(net.sinks.tolist())])
        nets.append(net)
        datas.append(float(into.max()))
    try:
        out = solve(nets, datas, [c.trees for c in comms], topology.bandwidth,
                    scale_s=max(float(result.time_s), 1e-300))
    except Exception:        # pragma: no cover - keep the greedy trees if the master fails
        return None
    for c, trees in zip(comms, out.trees):
        c.trees = trees
    return out


def _timed(ctx: _Context, comms, assign, plan: ChunkPlan, n_trees: int) -> Schedule:
    """All transfers, timed by windows (:mod:`evaluators.mcf.chunking`)."""
    collective, result = ctx.collective, ctx.result
    K, q, W, Tt = plan.replays, plan.split, plan.window, ctx.T_tot
    coll = collective.with_chunks(K * q)
    rows = _tree_rows(ctx, comms)
    parts = {k: [] for k in ("chunk", "k", "src", "dst", "rs", "re", "op", "len", "links",
                             "hop")}
    for trees, pieces in zip(rows, assign):
        for tr, (ids, reps) in zip(trees, pieces):
            n, r = ids.size, tr.src.size
            if n == 0 or r == 0:
                continue
            parts["chunk"].append(np.repeat(ids, r))
            parts["k"].append(np.repeat(reps, r))
            for key, arr in (("src", tr.src), ("dst", tr.dst), ("rs", tr.rs), ("re", tr.re),
                             ("len", tr.lengths)):
                parts[key].append(np.tile(arr, n))
            parts["op"].append(np.full(n * r, tr.op, dtype=np.int8))
            parts["links"].append(np.tile(tr.links, n))
            parts["hop"].append(np.tile(tr.hop_step, n))
    cat = {k: (np.concatenate(v) if v else np.zeros(0, dtype=np.int64)) for k, v in parts.items()}
    off = np.asarray(plan.offsets_s, dtype=float)
    s = plan.step_s
    k, rs, re = cat["k"], cat["rs"], cat["re"]
    start = (k + rs * W) * s + off[rs]
    end = (k + re * W) * s + off[re]
    ptr = np.concatenate([[0], np.cumsum(cat["len"])]).astype(np.int64)
    R = float(result.time_s)
    latency_s = float(_alpha(ctx, rows).sum())
    delta_max = (1 + ctx.epsilon) / (1 + (Tt * W - 1) / K) - 1
    dplan = DiscretePlan(K, q, Tt, s, latency_s, float(plan.delta), float(delta_max), n_trees,
                         W)
    meta = dict(algorithm="mcf", link_model="shared", fluid_time_s=R,
                optimal=bool(result.optimal), dual_gap=float(result.dual_gap),
                epsilon=float(ctx.epsilon), within_epsilon=bool(plan.ok),
                bound_s=R * (1 + ctx.epsilon) + latency_s, switch_model=result.switch_model,
                fluid_steps=int(result.steps), **dplan.__dict__)
    return Schedule(coll, chunk=cat["chunk"], src=cat["src"], dst=cat["dst"], path_ptr=ptr,
                    path_links=cat["links"], start=start, end=end, op=cat["op"].astype(np.int8),
                    metadata=meta)


# ------------------------------------------------------------------ the `mcf` method
@register_algorithm("mcf", kinds=KINDS, options=("epsilon", "switch_model", "steps",
                                                  "decomposition", "max_transfers",
                                                  "time_limit"),
                    summary="fluid multicommodity-flow optimum (thesis LP 4.2/3.16), "
                            "discretised by Theorem 4")
def synthesize_mcf(topology, collective: Collective, *, epsilon: float = 0.1,
                   switch_model: str | None = None, steps: int | None = None,
                   decomposition: str = "none", max_transfers: int = MAX_TRANSFERS,
                   time_limit: float | None = None) -> Schedule:
    """Bandwidth-optimal schedule within ``epsilon`` of the fluid optimum.

    Parameters
    ----------
    topology : topologies.Topology
    collective : Collective
        Any kind (:data:`evaluators.collectives.KINDS`).
    epsilon : float, optional
        Relative slack over the fluid time ``R`` (default 0.1): more replays
        and chunks for smaller values (module docstring).
    switch_model : {"3.14", "3.13", "exact", "multicast"}, optional
        Passed to :func:`evaluators.mcf.fluid_optimum` (default there: by
        ``decomposition``).
    steps : int, optional
        ``T`` of the time-expanded network (default: searched).
    decomposition : {"none", "dw", "mirrored"}, optional
        How the fluid LP is solved: whole (``"none"``), by Dantzig-Wolfe
        column generation (``"dw"``, thesis Sec. 5.1) or by Mirrored
        Dantzig-Wolfe (``"mirrored"``, Sec. 5.2); see
        :mod:`evaluators.mcf.dantzig_wolfe`.
    max_transfers : int, optional
        Cap on the schedule's transfers (see :func:`discretize`).
    time_limit : float, optional
        Seconds the fluid LPs may take together (default: :func:`fluid_optimum`'s).

    Returns
    -------
    Schedule
        See :func:`discretize`; ``metadata["algorithm"] == "mcf"``;
        ``metadata["within_epsilon"]`` is False (and ``chunk_reason`` says
        why) when no chunking within the cap reaches ``(1 + epsilon) R``.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = synthesize_mcf(from_spec("ring:4,lat=0"), Collective.on("allgather", 4, 4e6))
    >>> s.metadata["within_epsilon"], round(s.time_s / s.metadata["fluid_time_s"], 6)
    (True, 1.1)
    """
    from evaluators.mcf.api import fluid_optimum

    check_choice("decomposition", decomposition, DECOMPOSITIONS)
    limit = {} if time_limit is None else {"time_limit": time_limit}
    result = fluid_optimum(topology, collective, steps=steps, switch_model=switch_model,
                           decomposition=decomposition, **limit)
    return discretize(result, topology, collective, epsilon=epsilon,
                      max_transfers=max_transfers)
