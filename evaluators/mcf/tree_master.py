"""Tree-column master for the discretisation (thesis Sec. 5.2, "Additional thoughts").

The fluid LP 4.2 is a relaxation: its usage ``w`` of one origin need not be
a combination of trees (thesis Sec. 3.1), and then the greedy decomposition
of :mod:`evaluators.mcf.discretize` overuses links.  The thesis' closing
remark of Chapter 5: the Dantzig-Wolfe subproblems need not be LPs -- solve
"the integer programming version of the minimization problem at each
subproblem ... just a directed Steiner tree problem".  This module does that
for the copy collectives (allgather, broadcast and, reversed, reduce-scatter
and reduce; allreduce's reduce and gather blocks with the fluid LP's shares):

**Master** (an LP over tree columns, one convexity row per origin):

    min R   s.t.  sum_o d_o sum_j lam_oj load_oj(l) / b(l) <= R   for every link l
                  sum_j lam_oj = 1                               for every origin o

where a column ``j`` of origin ``o`` is a tree of its time-expanded network
(transmissions between copying nodes reaching every destination) and
``load_oj(l)`` counts its uses of link ``l`` (aggregated over steps, as
Theorem 4's shifted replays need), ``d_o`` the origin's bytes.  Every
solution *is* a weighted tree decomposition, so the discretisation realises
it up to the rounding of chunks.

**Pricing**: with link prices ``p`` (the master's duals), the cheapest tree
of origin ``o`` under edge costs ``d_o p(l) / b(l)`` -- the origin's block
(:func:`evaluators.mcf.fluid.copy_block`, LP 3.13 rows) with integral usage
``w``, solved as a MILP (scipy/HiGHS): a tree is a feasible integral point,
so the MILP optimum ``v_o`` is a lower bound on the cheapest tree, and the
Lagrangian bound ``sum_o v_o / sum_l p_l`` certifies the master.  The
integral solution is turned into trees by the greedy decomposition
(:func:`evaluators.mcf.discretize.copy_trees`), whose trees become columns.
Start: the greedy trees of the fluid solution.

Result: ``R_tree >= R_fluid``; equal when the relaxation had no gap for
trees (then the discretisation is within epsilon of ``R``), otherwise the
discretisation targets ``R_tree`` and reports both.

The MILP also has the rows "links into a physical copying node carry at most
one unit of usage" (a tree of the discretisation enters an NPU once, so a
reversed tree counts each contribution once); without them the MILP let data
reach an NPU twice and its value was no longer the tree's cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TreeMasterResult", "tree_master"]


@dataclass
class TreeMasterResult:
    """Outcome of :func:`tree_master`.

    Attributes
    ----------
    trees : list of list of (float, list)
        Per commodity: weighted trees (weights sum to 1).
    time_s : float
        ``R_tree``: the master's optimum, seconds.
    lower_bound_s : float
        Best Lagrangian bound, seconds.
    gap : float
        ``(R_tree - bound) / R_tree``.
    iterations : int
    """

    trees: list
    time_s: float
    lower_bound_s: float
    gap: float
    iterations: int


def _load(txs, n_links: int) -> np.ndarray:
    m = np.zeros(n_links)
    for tx in txs:
        np.add.at(m, list(tx.links), 1.0)
    return m


def tree_master(nets: list, datas: list[float], initial: list[list], bandwidth: np.ndarray,
                *, scale_s: float = 1.0, max_iter: int = 200, gap_tol: float = 1e-7,
                time_limit_s: float = 60.0) -> TreeMasterResult:
    """Column generation over per-origin trees (module docstring).

    Parameters
    ----------
    nets : list of Network
        Each commodity's time-expanded network.
    datas : list of float
        Bytes of each commodity (its origin's data).
    initial : list of list of (float, list of _Tx)
        Starting trees per commodity (e.g. the greedy decomposition).
    bandwidth : ndarray
        Bytes/s per physical link.
    scale_s : float, optional
        Time unit of the LPs (e.g. the fluid optimum), so that the solvers'
        absolute tolerances are meaningful.
    max_iter, gap_tol, time_limit_s
        Stopping rules (the gap is reported either way).
    """
    import time

    from scipy.optimize import linprog

    t_start = time.perf_counter()
    L = bandwidth.size
    cols = [[txs for _, txs in trees] for trees in initial]
    loads = [[_load(t, L) for t in c] for c in cols]
    best_lb = 0.0
    it = 0
    res = None
    while True:
        it += 1
        counts = [len(c) for c in cols]
        off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        n = int(off[-1])
        A = np.zeros((L, n + 1))
        for c in range(len(cols)):
            for j, m in enumerate(loads[c]):
                A[:, off[c] + j] = datas[c] * m / bandwidth / scale_s
        A[:, n] = -1.0
        Aeq = np.zeros((len(cols), n + 1))
        for c in range(len(cols)):
            Aeq[c, off[c]: off[c + 1]] = 1.0
        cvec = np.zeros(n + 1)
        cvec[n] = 1.0
        res = linprog(cvec, A_ub=A, b_ub=np.zeros(L), A_eq=Aeq, b_eq=np.ones(len(cols)),
                      bounds=(0, None), method="highs")
        R = float(res.x[n])
        p = np.maximum(-res.ineqlin.marginals, 0.0)
        mu = res.eqlin.marginals
        if it > max_iter or time.perf_counter() - t_start > time_limit_s:
            break
        total = 0.0
        added = 0
        for c, net in enumerate(nets):
            cost_link = datas[c] * p / bandwidth / scale_s
            v, trees = _cheapest_trees(net, cost_link)
            total += v
            for txs in trees:
                m = _load(txs, L)
                if float(cost_link @ m) - mu[c] < -1e-9 * max(1.0, abs(mu[c])):
                    if not any(np.array_equal(m, x) for x in loads[c]):
                        cols[c].append(txs)
                        loads[c].append(m)
                        added += 1
        ps = float(p.sum())
        if ps > 0:
            best_lb = max(best_lb, total / ps)
        if added == 0 or R - best_lb <= gap_tol * R:
            break
    counts = [len(c) for c in cols]
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    trees = []
    for c in range(len(cols)):
        lam = res.x[off[c]: off[c + 1]]
        lam = np.where(lam > 1e-12, lam, 0.0)
        tot = float(lam.sum())
        trees.append([(float(w / tot), cols[c][j]) for j, w in enumerate(lam) if w > 0])
    R = float(res.x[-1])
    gap = max(0.0, (R - best_lb) / R) if R > 0 else 0.0
    return TreeMasterResult(trees, R * scale_s, best_lb * scale_s, gap, it)


def _cheapest_trees(net, cost_link: np.ndarray):
    """MILP lower bound on the cheapest tree and the trees of its integral solution."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    from evaluators.mcf.discretize import copy_trees
    from evaluators.mcf.fluid import copy_block
    from evaluators.mcf.switches import edge_values

    top = float(cost_link.max())
    if top <= 0:
        top = 1.0
    blk = copy_block(net, cost_link / top, "3.13")
    n = blk.n_cols
    integrality = np.zeros(n)
    integrality[blk.n_f: blk.n_f + blk.n_w] = 1
    cons = [LinearConstraint(blk.A_eq, blk.demand, blk.demand)]
    if blk.A_ub.shape[0]:
        cons.append(LinearConstraint(blk.A_ub, -np.inf, 0.0))
    # A tree enters every physical copying node at most once (what the
    # discretisation's trees require): sum of usage on links into the node <= 1.
    from evaluators.mcf.ten import HOLD
    import scipy.sparse as sp

    into = (net.link != HOLD) & net.copy[net.head] & (blk.w_col >= 0) \
        & (net.node_phys[net.head] != net.origin)
    e = np.flatnonzero(into)
    if e.size:
        phys = net.node_phys[net.head[e]]
        rows, inv = np.unique(phys, return_inverse=True)
        A1 = sp.csr_array((np.ones(e.size), (inv, blk.w_col[e])), shape=(rows.size, n))
        cons.append(LinearConstraint(A1, -np.inf, 1.0))
    ub = np.full(n, np.inf)
    ub[: blk.n_f] = 1.0
    res = milp(blk.cost, constraints=cons, integrality=integrality, bounds=Bounds(0, ub),
               options={"time_limit": 20.0, "mip_rel_gap": 1e-7})
    if res.x is None:
        return 0.0, []
    bound = getattr(res, "mip_dual_bound", None)
    lower = top * float(res.fun if bound is None or not np.isfinite(bound) else bound)
    w, f = edge_values(blk, res.x)
    out = [txs for _, txs in copy_trees(net, np.round(w), f)]
    # Also the cheapest-path tree under the same edge costs (a heuristic column).
    from evaluators.mcf.discretize import free_holds, hold_layers, tree_of
    from evaluators.mcf.ten import HOLD

    edge_cost = np.where(net.link == HOLD, 0.0, cost_link[np.maximum(net.link, 0)] / top)
    k = np.arange(net.destinations.size)
    out.append(tree_of(net, hold_layers(net), free_holds(net), edge_cost + 1e-9, k))
    return lower, out
