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
   below).  A physical NPU is entered at most once per tree, so a reversed
   tree (a reduction: reduce-scatter, reduce, allreduce's first phase) counts
   every contribution exactly once.  Blocks without copies (all-to-all,
   scatter, gather: thesis LP 3.16) use the standard path decomposition of
   each destination's flow (:func:`_flow_paths`).
2. **One chunk size.**  The IR has equal chunks, so each replay carries ``q``
   chunks per shard (allreduce: ``n q`` chunks shared among the owners in
   proportion to the LP's shares), assigned to the trees by largest
   remainder of ``weight x count``.  ``q`` is the smallest value whose
   rounding overhead ``delta`` (the bottleneck link's discrete load per
   replay over its fluid load) fits the rest of the budget; the step length
   is then computed from the discrete loads, so bandwidth holds exactly.
3. **Latency.**  The fluid LP has none.  A transmission over ``h`` links
   that starts in step ``u`` of the time-expanded network takes ``h`` steps;
   steps are ``s'`` long plus, once per step index ``u``, the largest latency
   ``a_u`` of a link used in that step: the transfers of (replay ``k``, step
   ``u``) run in ``[(k + u) s' + A_u, (k + u + 1) s' + A_{u+1}]`` with
   ``A_u = a_0 + ... + a_{u-1}``.  Every (step ``u``) class then moves its bytes
   at a constant rate in a window of length ``s'`` that never overlaps its
   own next window, and the classes together never exceed a link's
   bandwidth -- the witness the ``"shared"`` link model of
   :func:`evaluators.validate.validate_schedule` accepts.

**The claim tested** (``tests/evaluators/test_mcf_discretize.py``): the
schedule is valid and, with ``T_tot`` the steps of one replay (``T``;
allreduce ``2T``, its reduce and gather networks back to back as the thesis
prescribes),

    time_s = (T_tot + K - 1) s' + A_{T_tot}
           <= R (1 + eps) + T_tot x (largest link latency),

whenever ``rounding_overhead <= delta_max`` (``metadata["within_epsilon"]``);
``K`` is the smallest multiple of the requested chunks per NPU with
``(T_tot - 1) / K <= eps / 2``, and ``delta_max = (1 + eps) / (1 + (T_tot - 1) / K) - 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codesign.errors import invalid
from evaluators.collectives import KINDS, REDUCING_KINDS, Collective
from evaluators.mcf.dantzig_wolfe import DECOMPOSITIONS
from evaluators.mcf.ten import HOLD, Network
from evaluators.registry import register_algorithm
from evaluators.schedule import COPY, REDUCE, Schedule

__all__ = ["discretize", "DiscretePlan", "synthesize_mcf", "DECOMPOSITIONS"]

#: Values (fractions of a block's data) below this are zero.
TOL = 1e-9
#: Largest number of chunks per shard and replay tried for the rounding.
MAX_SPLIT = 64
#: Rough cap on transfers in one schedule (bounds ``q``).
MAX_TRANSFERS = 400_000



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
        Rounding overhead the epsilon budget allows.
    trees : int
        Weighted trees (paths for flow blocks) over all blocks.
    """

    replays: int
    split: int
    steps: int
    step_s: float
    latency_s: float
    rounding_overhead: float
    delta_max: float
    trees: int


# ------------------------------------------------------------------- widest paths
def _layers(net: Network) -> list[np.ndarray]:
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


def _free_holds(net: Network) -> np.ndarray:
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
    layers = _layers(net)
    free = _free_holds(net)
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


def _tree_of(net: Network, layers, free, cost: np.ndarray, order) -> list[_Tx]:
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
    edge duals (:func:`_tree_of`, a heuristic for the Steiner arborescence).
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
            txs = _tree_of(net, layers, free, cost, order)
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
    layers = _layers(net)
    free = _free_holds(net)
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


def _largest_remainder(weights, n: int) -> np.ndarray:
    """Non-negative integers summing to ``n``, proportional to ``weights``."""
    w = np.maximum(np.asarray(weights, dtype=float), 0.0)
    if n == 0 or w.sum() <= 0:
        return np.zeros(w.size, dtype=np.int64)
    x = w / w.sum() * n
    base = np.floor(x).astype(np.int64)
    rest = n - int(base.sum())
    if rest > 0:
        base[np.argsort(-(x - base), kind="stable")[:rest]] += 1
    return base


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
               tree_master: bool = True) -> Schedule:
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
        When the greedy trees miss the budget (copy kinds: allgather,
        broadcast, reduce-scatter, reduce, allreduce with the LP's shares),
        re-decompose with the tree-column master of
        :mod:`evaluators.mcf.tree_master`; the metadata then has
        ``tree_lp_time_s`` (the best time of per-origin trees), ``tree_lp_gap``,
        ``relaxation_gap`` (``R_tree / R - 1``) and
        ``within_epsilon_of_tree_lp``.

    Returns
    -------
    Schedule
        ``link_model="shared"``; ``metadata`` has ``fluid_time_s``, ``optimal``,
        ``dual_gap``, ``epsilon``, ``within_epsilon``, ``bound_s`` (``R (1 + eps)``
        plus the latency term) and the :class:`DiscretePlan` fields.

    Notes
    -----
    ``K ~ 2 (T - 1) / epsilon`` replays of ``q`` chunks per shard: about
    ``K q`` times the transmissions of one fluid replay.
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
            or not math.isfinite(epsilon) or not 0 < epsilon <= 10:
        raise invalid("epsilon", epsilon, "a number in (0, 10] (relative slack over R)")
    kind = collective.kind
    N = collective.n
    T = int(result.steps)
    allreduce = kind == "allreduce"
    T_tot = 2 * T if allreduce else T
    c0 = collective.chunks_per_npu
    K = max(1, math.ceil((T_tot - 1) / (epsilon / 2) - 1e-9))
    K = c0 * math.ceil(K / c0)
    delta_max = (1 + epsilon) / (1 + (T_tot - 1) / K) - 1
    R = float(result.time_s)
    L = topology.n_links
    comms, shares = _commodities(result, collective)

    def counts(q: int) -> list[np.ndarray]:
        per_owner = _largest_remainder(shares, N * q) if allreduce else None
        return [_largest_remainder([w for w, _ in c.trees],
                                   int(per_owner[c.owner]) if allreduce else q) for c in comms]

    def rounding():
        for c in comms:
            c.load = np.zeros((len(c.trees), L))
            c.hops = np.zeros(len(c.trees), dtype=np.int64)
            for j, (_, txs) in enumerate(c.trees):
                for tx in txs:
                    np.add.at(c.load[j], list(tx.links), 1.0)
                c.hops[j] = len(txs)
        best = None
        for q in range(1, MAX_SPLIT + 1):
            cnt = counts(q)
            load = sum((n @ c.load for n, c in zip(cnt, comms)), np.zeros(L))
            cb = collective.with_chunks(K * q).chunk_bytes
            delta = float((load * cb / topology.bandwidth).max()) * K / R - 1.0 if R > 0 else 0.0
            transfers = K * sum(int(n @ c.hops) for n, c in zip(cnt, comms))
            if best is not None and transfers > MAX_TRANSFERS:
                break
            if best is None or delta < best[1] - 1e-12:
                best = (q, delta, cnt)
            if delta <= delta_max + 1e-12:
                break
        return best

    q, delta, cnt = rounding()
    tree_info = None
    if delta > delta_max + 1e-12 and tree_master and kind in TREE_MASTER_KINDS and comms:
        tree_info = _tree_master(result, topology, comms)
        if tree_info is not None:
            q2, delta2, cnt2 = rounding()
            q, delta, cnt = q2, delta2, cnt2
    plan_rows = _template(result, collective, comms, cnt, q, T, allreduce)
    sched = _timed(topology, collective, result, plan_rows, K, q, T_tot, delta, delta_max,
                   sum(len(c.trees) for c in comms), epsilon, N * q if allreduce else q)
    if tree_info is not None:
        # The trees' own optimum is the achievable target (thesis Sec. 5.2 remark).
        Rt = tree_info.time_s
        sched.metadata.update(
            tree_master=True, tree_lp_time_s=Rt, tree_lp_gap=tree_info.gap,
            tree_lp_iterations=tree_info.iterations,
            relaxation_gap=Rt / R - 1.0 if R > 0 else 0.0,
            within_epsilon_of_tree_lp=bool((1 + delta) * R <= Rt * (1 + delta_max) + 1e-12 * R))
    return sched


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


def _template(result, collective, comms, cnt, q: int, T: int, allreduce: bool):
    """Transfers of replay 0: chunk ids, ends, real steps, ops and link paths."""
    owner_first = {}
    if allreduce:
        per_owner = {}
        for c, n in zip(comms, cnt):
            per_owner.setdefault(c.owner, int(n.sum()))
        acc = 0
        for o in sorted(per_owner):
            owner_first[o] = acc
            acc += per_owner[o]
    rows = []   # (chunk identity, src, dst, first real step, end step, op, links)
    for c, n in zip(comms, cnt):
        fl = result.flows[c.block]
        offset = T if (allreduce and fl.phase == "allgather") else 0
        op = REDUCE if (fl.reversed and collective.kind in REDUCING_KINDS) else COPY
        first = owner_first[c.owner] if allreduce else 0
        starts = np.concatenate([[0], np.cumsum(n)])
        for j, (_, txs) in enumerate(c.trees):
            for i in range(int(starts[j]), int(starts[j + 1])):
                ident = (first + i) if allreduce else (c.shard, i)
                for tx in txs:
                    if fl.reversed:
                        rows.append((ident, tx.head, tx.tail, offset + T - tx.t1,
                                     offset + T - tx.t0, op, tx.links[::-1]))
                    else:
                        rows.append((ident, tx.tail, tx.head, offset + tx.t0, offset + tx.t1,
                                     op, tx.links))
    return rows


def _timed(topology, collective, result, rows, K: int, q: int, T_tot: int, delta: float,
           delta_max: float, n_trees: int, epsilon: float, stride: int) -> Schedule:
    """Replays ``k = 0..K-1`` of the template, timed as in the module docstring."""
    coll = collective.with_chunks(K * q)
    c = K * q
    cb = coll.chunk_bytes
    L = topology.n_links
    n = len(rows)
    ident = [r[0] for r in rows]
    if collective.kind == "allreduce":
        chunk0 = np.array(ident, dtype=np.int64)
    else:
        chunk0 = np.array([s * c + i for s, i in ident], dtype=np.int64).reshape(-1)
    src = np.array([r[1] for r in rows], dtype=np.int64)
    dst = np.array([r[2] for r in rows], dtype=np.int64)
    rs = np.array([r[3] for r in rows], dtype=np.int64)
    re = np.array([r[4] for r in rows], dtype=np.int64)
    op = np.array([r[5] for r in rows], dtype=np.int8)
    lengths = np.array([len(r[6]) for r in rows], dtype=np.int64)
    links = np.fromiter((l for r in rows for l in r[6]), dtype=np.int64, count=int(lengths.sum()))
    hop_step = np.repeat(rs, lengths) + (np.arange(links.size) - np.repeat(
        np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths))
    load = np.zeros((max(T_tot, 1), L))
    np.add.at(load, (hop_step, links), 1.0)
    per_link = load.sum(axis=0) * cb / topology.bandwidth
    step_s = float(per_link.max()) if n else 0.0
    step_s *= 1.0 + 1e-12          # float sums: keep every step within capacity
    alpha = np.where(load > 0, topology.latency[None, :], 0.0).max(axis=1)
    A = np.concatenate([[0.0], np.cumsum(alpha)])
    k = np.repeat(np.arange(K), n)
    rs_k, re_k = np.tile(rs, K), np.tile(re, K)
    start = (k + rs_k) * step_s + A[rs_k]
    end = (k + re_k) * step_s + A[re_k]
    chunk = np.tile(chunk0, K) + k * stride
    ptr = np.concatenate([[0], np.cumsum(np.tile(lengths, K))])
    R = float(result.time_s)
    latency_s = float(A[-1])
    plan = DiscretePlan(K, q, T_tot, step_s, latency_s, float(delta), float(delta_max), n_trees)
    meta = dict(algorithm="mcf", link_model="shared", fluid_time_s=R,
                optimal=bool(result.optimal), dual_gap=float(result.dual_gap),
                epsilon=float(epsilon), within_epsilon=bool(delta <= delta_max + 1e-9),
                bound_s=R * (1 + epsilon) + latency_s, switch_model=result.switch_model,
                fluid_steps=int(result.steps), **plan.__dict__)
    return Schedule(coll, chunk=chunk, src=np.tile(src, K), dst=np.tile(dst, K), path_ptr=ptr,
                    path_links=np.tile(links, K), start=start, end=end, op=np.tile(op, K),
                    metadata=meta)


# ------------------------------------------------------------------ the `mcf` method
@register_algorithm("mcf", kinds=KINDS, options=("epsilon", "switch_model", "steps",
                                                  "decomposition"),
                    summary="fluid multicommodity-flow optimum (thesis LP 4.2/3.16), "
                            "discretised by Theorem 4")
def synthesize_mcf(topology, collective: Collective, *, epsilon: float = 0.1,
                   switch_model: str | None = None, steps: int | None = None,
                   decomposition: str = "none") -> Schedule:
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

    Returns
    -------
    Schedule
        See :func:`discretize`; ``metadata["algorithm"] == "mcf"``.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = synthesize_mcf(from_spec("ring:4,lat=0"), Collective.on("allgather", 4, 4e6))
    >>> s.metadata["within_epsilon"], s.time_s <= s.metadata["fluid_time_s"] * 1.1
    (True, True)
    """
    from evaluators.mcf.api import fluid_optimum

    if decomposition not in DECOMPOSITIONS:
        raise invalid("decomposition", decomposition, f"one of {', '.join(DECOMPOSITIONS)}")
    result = fluid_optimum(topology, collective, steps=steps, switch_model=switch_model,
                           decomposition=decomposition)
    return discretize(result, topology, collective, epsilon=epsilon)
