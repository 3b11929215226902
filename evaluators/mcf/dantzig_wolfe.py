"""Dantzig-Wolfe decomposition by origin, plain and Mirrored (thesis Sec. 5.1 and 5.2).

A :class:`~evaluators.mcf.fluid.FluidLP` is a set of per-origin blocks tied
only by the bandwidth (linking) rows ``sum_blocks usage(L) <= R b(L)`` and,
for allreduce, by the share columns.  Dantzig-Wolfe (Sec. 5.1) keeps, per
block, a set of *columns* -- feasible solutions ``z`` of the block's own
constraints (subproblem 5.1: its ``A_eq``/``A_ub`` at unit demand) -- and
solves the **restricted master**

    min  R                        (phase 1; phase 2: min sum cost(z_j) lam_j, R <= R_max)
    s.t. sum_j usage(z_j) lam_j <= R b(L)     for every bandwidth set L   (linking rows)
         sum_{j of block b} lam_j = q_b       for every block             (convexity rows)

(``q_b`` the block's demand, 1 for allgather; for allreduce the share
column ``s_owner``, then ``sum s = 1``).  Columns are normalised to unit
demand: a block's polytope at demand ``q`` is ``q`` times the one at demand
1 (its constraints are homogeneous but for the demand), so ``sum lam_j = q``
is the thesis' convexity row ``sum lam = 1`` on ``q`` times the columns.

**Pricing** (column generation): with ``p = -y >= 0`` the master's duals on
the linking rows and ``mu_b`` on the convexity rows, block ``b``'s pricing LP
is its own LP with objective ``cost_b (phase 2 only) + p . usage_b`` at unit
demand; its optimum ``v_b`` gives the reduced cost ``v_b - mu_b`` and a
column is added when that is negative.  The pricing objective is
non-negative, so the pricing LP is bounded and no rays are needed.

**Certificate** (Lagrangian bound): for any ``p >= 0`` the Lagrangian
relaxation of the linking rows gives, in phase 1,
``LB = min_shares sum_b q_b v_b(p) / (p . b)`` (``v_b`` is linear in ``p``,
scale ``p`` so that ``p . b = 1``), and in phase 2
``LB = min_shares sum_b q_b v_b(p) - (p . b) R_max``.  We stop when the
relative gap ``(master - LB) / master`` is at most ``gap_tol`` or no column
prices out; the gap is reported.

**Mirrored Dantzig-Wolfe** (Sec. 5.2).  Origins in one symmetry class
(:mod:`topologies.symmetry`) get isomorphic blocks; by Theorem 7 some
optimal solution is symmetric, so the master keeps one set of columns per
class: a column ``z`` found for the representative counts, in the linking
rows, as ``sum_i pi_i(usage(z))`` -- the representative's usage mapped by
Lemma 6's automorphism ``pi_i`` onto every member -- and one convexity row
per class (member shares tied equal for allreduce).  Pricing: one LP per
class per iteration, with the prices pulled back to the representative,
``p_eff = sum_i p o pi_i``.  The final solution maps each class's combined
column onto every member's block (a column map built from the time-expanded
networks, which are isomorphic under ``pi_i`` because pruning depends only on
hop counts and switch splits are made symmetric by the refinement loop).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from evaluators.mcf.fluid import FluidLP, LPSolution, check_lp, lp_options, over_time_limit
from evaluators.mcf.ten import HOLD, Network

__all__ = ["DWStats", "solve_dw", "block_units", "mirror_keys", "DECOMPOSITIONS"]

DECOMPOSITIONS = ("none", "dw", "mirrored")
#: Relative Lagrangian gap at which column generation stops (phase 1; phase 2 uses 1e-6).
GAP_TOL = 1e-8
#: Largest number of master iterations.
MAX_ITER = 2000
#: Wentges dual smoothing: pricing point ``a * best-bound prices + (1 - a) * master prices``.
SMOOTHING = 0.5


@dataclass
class DWStats:
    """What the column generation did (summed over the solves of one fluid optimum)."""

    decomposition: str = "dw"
    units: int = 0                 # pricing problems per iteration (blocks or classes)
    iterations: int = 0
    columns: int = 0
    pricing_solves: int = 0
    pricing_s: float = 0.0
    master_s: float = 0.0
    lower_bound: float = float("nan")    # last Lagrangian bound (normalised units)
    gap: float = float("nan")            # last relative gap
    r_lower_bound: float = float("nan")  # phase 1: Lagrangian bound on R (normalised)
    r_gap: float = float("nan")          # phase 1: relative gap on R
    cost_gap: float = float("nan")       # phase 2: relative gap on the secondary cost
    converged: bool = True

    def to_dict(self) -> dict:
        """JSON-ready (plain floats; NaN, i.e. not computed, as None)."""
        out = {}
        for k, v in self.__dict__.items():
            if isinstance(v, (float, np.floating)):
                v = None if np.isnan(v) else float(v)
            out[k] = v
        return out


@dataclass
class _Unit:
    """One pricing problem: a block, or a symmetry class of blocks (mirrored)."""

    rep: int                                  # representative block
    members: list                             # [(block, col_map or None, row_perm or None)]
    cols: list = field(default_factory=list)  # [(idx, val)] sparse z of the representative
    usage: list = field(default_factory=list)  # per column: dense usage on live sets (unit)
    cost: list = field(default_factory=list)   # per column: secondary cost (unit)
    pricer: object = None                       # its _Pricer (kept for warm starts)


# ------------------------------------------------------------------ symmetry plumbing
def _edge_codes(net: Network, n_phys: int, n_links: int, node_map=None, link_map=None):
    """Identity of each network edge (link, tail step, tail/head labels), optionally mapped."""
    T1 = net.steps + 1
    NL = n_phys * T1 + 1
    phys_t = net.node_phys[net.tail]
    link = net.link
    hold = link == HOLD
    lab_t = net.node_label[net.tail]
    lab_h = net.node_label[net.head]
    if node_map is not None:
        phys_t = node_map[phys_t]
        link = np.where(hold, HOLD, link_map[np.where(hold, 0, link)])

        def mp(lab):
            return np.where(lab < 0, lab, node_map[np.maximum(lab, 0) // T1] * T1
                            + np.maximum(lab, 0) % T1)
        lab_t, lab_h = mp(lab_t), mp(lab_h)
    ext = np.where(hold, n_links + phys_t, link).astype(np.int64)
    return ((ext * T1 + net.node_time[net.tail]) * NL + lab_t + 1) * NL + lab_h + 1


def _column_map(rep, mem, h, n_phys: int, n_links: int) -> np.ndarray:
    """Member column of each representative column under automorphism ``h``."""
    a, b = rep.net, mem.net
    codes_b = _edge_codes(b, n_phys, n_links)
    order = np.argsort(codes_b)
    img = _edge_codes(a, n_phys, n_links, h.node, h.link)
    pos = np.searchsorted(codes_b[order], img)
    pos = np.minimum(pos, order.size - 1)
    if a.n_edges != b.n_edges or not np.array_equal(codes_b[order][pos], img):
        raise _NotIsomorphic()
    emap = order[pos]
    dpos = {int(d): k for k, d in enumerate(b.destinations.tolist())}
    kmap = np.array([dpos.get(int(h.node[d]), -1) for d in a.destinations.tolist()],
                    dtype=np.int64)
    if (kmap < 0).any():
        raise _NotIsomorphic()
    out = np.empty(rep.n_cols, dtype=np.int64)
    E = b.n_edges
    f_img = kmap[rep.f_dest] * E + emap[rep.f_edge]
    f_b = mem.f_dest * E + mem.f_edge
    p = np.searchsorted(f_b, f_img)
    if p.size and (p.max() >= f_b.size or not np.array_equal(f_b[p], f_img)):
        raise _NotIsomorphic()
    out[: rep.n_f] = p
    wc = mem.w_col[emap[rep.w_edge]]
    if (wc < 0).any():
        raise _NotIsomorphic()
    out[rep.n_f: rep.n_f + rep.n_w] = wc
    if rep.x_edge.size:
        A = int(max(rep.x_mult.max(), mem.x_mult.max() if mem.x_mult.size else 0)) + 1
        x_b = mem.x_edge * A + mem.x_mult
        x_img = emap[rep.x_edge] * A + rep.x_mult
        p = np.searchsorted(x_b, x_img)
        if p.max() >= x_b.size or not np.array_equal(x_b[p], x_img):
            raise _NotIsomorphic()
        out[rep.n_f + rep.n_w:] = mem.n_f + mem.n_w + p
    if np.unique(out).size != out.size:
        raise _NotIsomorphic()
    return out


class _NotIsomorphic(Exception):
    """A member's block is not the image of its representative's (internal)."""


def _row_perm(lp: FluidLP, link_map: np.ndarray, bw: np.ndarray) -> np.ndarray:
    """Live bandwidth set of each live set's image (sets matched by links and bandwidth)."""
    inc = lp.cap_incidence
    keys = {}
    sets = []
    for r in range(inc.shape[0]):
        links = inc.indices[inc.indptr[r]: inc.indptr[r + 1]]
        sets.append(links)
        keys[(frozenset(links.tolist()), float(bw[r]))] = r
    out = np.empty(len(sets), dtype=np.int64)
    for r, links in enumerate(sets):
        t = keys.get((frozenset(link_map[links].tolist()), float(bw[r])))
        if t is None:
            raise _NotIsomorphic()
        out[r] = t
    return out


def block_units(lp: FluidLP, block_keys: list, symmetry=None) -> list[_Unit]:
    """Pricing units: one per block, or (``symmetry``) one per (phase, class) of origins.

    ``block_keys[b] = (phase index, origin)``.  A member whose block is not
    the image of the representative's (should not happen) gets its own unit.
    """
    if symmetry is None:
        return [_Unit(b, [(b, None, None)]) for b in range(len(lp.blocks))]
    where = {key: b for b, key in enumerate(block_keys)}
    cls = symmetry.class_of()
    units = []
    done = set()
    bw = lp.cap_bw
    for b, (ph, o) in enumerate(block_keys):
        if b in done:
            continue
        if o not in cls:
            units.append(_Unit(b, [(b, None, None)]))
            done.add(b)
            continue
        k, _ = cls[o]
        members = [(m, h) for m, h in symmetry.classes[k] if (ph, m) in where]
        rep_h = dict(members)[o]
        unit = _Unit(b, [(b, None, None)])
        done.add(b)
        for m, h in members:
            mb = where[(ph, m)]
            if mb in done:
                continue
            g = h.compose_inverse(rep_h)            # maps origin o onto m
            try:
                cmap = _column_map(lp.blocks[b], lp.blocks[mb], g, symmetry.n_nodes,
                                   symmetry.n_links)
                rperm = _row_perm(lp, g.link, bw)
            except _NotIsomorphic:
                continue
            unit.members.append((mb, cmap, rperm))
            done.add(mb)
        units.append(unit)
    return units


def mirror_keys(symmetry, block_keys: list, block: int, keys, steps: int) -> list:
    """``[(block2, keys2)]``: a split of ``block`` mapped onto every block of its class."""
    ph, o = block_keys[block]
    cls = symmetry.class_of()
    if o not in cls:
        return [(block, set(keys))]
    k, _ = cls[o]
    maps = dict(symmetry.classes[k])
    where = {key: b for b, key in enumerate(block_keys)}
    T1 = steps + 1
    arr = np.fromiter(keys, dtype=np.int64)
    out = []
    for m, h in maps.items():
        if (ph, m) not in where:
            continue
        g = h.compose_inverse(maps[o])
        out.append((where[(ph, m)], set((g.node[arr // T1] * T1 + arr % T1).tolist())))
    return out


# ------------------------------------------------------------------ the algorithm
class _Pricer:
    """The pricing LP of one unit: its representative block at unit demand."""

    def __init__(self, lp: FluidLP, unit: _Unit, method: str):
        blk = lp.blocks[unit.rep]
        self.blk = blk
        self.S = (lp.cap_incidence @ blk.usage).tocsr()     # live sets x block columns
        self.ST = self.S.T.tocsr()
        self.A_eq, self.b_eq = blk.A_eq, blk.demand
        self.A_ub = blk.A_ub if blk.A_ub.shape[0] else None
        self.b_ub = np.zeros(blk.A_ub.shape[0]) if blk.A_ub.shape[0] else None
        self.mult = len(unit.members)
        self.method = method

        self.highs = None
        if _highspy() is not None:
            self._build_highs()

    def _build_highs(self):
        """One HiGHS model kept across iterations: only the costs change, and
        the simplex restarts from the previous optimal basis (warm start)."""
        hs = _highspy()
        A = sp.vstack([self.A_eq] + ([self.A_ub] if self.A_ub is not None else []),
                      format="csc")
        m_eq = self.A_eq.shape[0]
        m_ub = A.shape[0] - m_eq
        lp = hs.HighsLp()
        lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
        lp.col_cost_ = np.zeros(A.shape[1])
        lp.col_lower_ = np.zeros(A.shape[1])
        lp.col_upper_ = np.full(A.shape[1], hs.kHighsInf)
        lp.row_lower_ = np.concatenate([self.b_eq, np.full(m_ub, -hs.kHighsInf)])
        lp.row_upper_ = np.concatenate([self.b_eq, np.zeros(m_ub)])
        lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data.astype(float)
        h = _new_highs()
        h.setOptionValue("output_flag", False)
        h.passModel(lp)
        self.highs = h
        self.n = A.shape[1]
        self.idx = np.arange(self.n, dtype=np.int32)

    def price(self, p_eff: np.ndarray, phase2: bool):
        """Optimal ``z`` (sparse), its value, unit usage and unit cost."""
        c = self.ST @ p_eff
        if phase2:
            c = c + self.mult * self.blk.cost
        if self.highs is not None:
            h = self.highs
            h.changeColsCost(self.n, self.idx, np.asarray(c, dtype=float))
            # The call's wall-clock limit (fluid.lp_deadline) holds here too: a pricing
            # round is hundreds of these LPs, each quick, and none checked the deadline
            # (a 20 s limit ran 52 s on dgx-a100:16 allreduce, mirrored).  HiGHS compares
            # its limit with the model's run time summed over all its runs (measured,
            # highspy 1.16), so the limit is that sum plus the time left.
            limit = lp_options().get("time_limit")
            if limit is not None:
                h.setOptionValue("time_limit", h.getRunTime() + float(limit))
            h.run()
            status = h.getModelStatus()
            if status == _highspy().HighsModelStatus.kTimeLimit:
                over_time_limit()
            if status != _highspy().HighsModelStatus.kOptimal:
                raise RuntimeError(f"pricing LP failed: {h.modelStatusToString(h.getModelStatus())}")
            x = np.asarray(h.getSolution().col_value)
        else:
            from scipy.optimize import linprog

            res = linprog(c, A_ub=self.A_ub, b_ub=self.b_ub, A_eq=self.A_eq, b_eq=self.b_eq,
                          bounds=(0, None), method=self.method, options=lp_options())
            check_lp(res)
            if res.x is None:
                raise RuntimeError(f"pricing LP failed: {res.message}")
            x = res.x
        z = np.where(x > 1e-12, x, 0.0)
        idx = np.flatnonzero(z)
        return (idx, z[idx]), float(c @ z), self.S @ z, float(self.blk.cost @ z)


_BANNER_DONE = False


def _new_highs():
    """A ``highspy.Highs``; the first one of the process prints a banner on
    stdout (C level), which would corrupt ``--json`` output: swallow it."""
    global _BANNER_DONE
    hs = _highspy()
    if _BANNER_DONE:
        return hs.Highs()
    import ctypes
    import os
    import sys

    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        h = hs.Highs()
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):    # pragma: no cover - non-POSIX
            pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
        _BANNER_DONE = True
    return h


def _highspy():
    """The ``highspy`` module if installed (warm-started pricing), else None."""
    try:
        import highspy
    except ImportError:      # pragma: no cover - scipy's HiGHS is the fallback
        return None
    return highspy


def _unit_usage(unit: _Unit, u_rep: np.ndarray) -> np.ndarray:
    """Usage of a representative column summed over the unit's members (live sets)."""
    if len(unit.members) == 1:
        return u_rep
    out = np.zeros_like(u_rep)
    for _, _, rperm in unit.members:
        if rperm is None:
            out += u_rep
        else:
            np.add.at(out, rperm, u_rep)
    return out


def _effective_prices(unit: _Unit, p: np.ndarray) -> np.ndarray:
    """``sum_i p o pi_i``: prices pulled back to the representative."""
    if len(unit.members) == 1:
        return p
    out = np.zeros_like(p)
    for _, _, rperm in unit.members:
        out += p if rperm is None else p[rperm]
    return out


def _demand(lp: FluidLP, b: int):
    return lp.demands[b]


def solve_dw(lp: FluidLP, units: list[_Unit], *, R_max: float | None = None,
             method: str = "highs", stats: DWStats | None = None,
             gap_tol: float | None = None, max_iter: int = MAX_ITER) -> LPSolution:
    """Column generation on ``lp`` (module docstring); same result layout as ``lp.solve``.

    Parameters
    ----------
    lp : FluidLP
    units : list
        From :func:`block_units` (plain: one per block; mirrored: one per class).
    R_max : float, optional
        ``None``: phase 1 (minimise ``R``); else phase 2 (minimise the
        secondary cost with ``R <= R_max``).  Phase 2 starts from the columns
        phase 1 left in ``units`` (after a phase-1 run if there are none).
    method : str
        scipy HiGHS method for the master and pricing LPs.
    stats : DWStats, optional
        Accumulates iterations, columns and timings.
    gap_tol : float, optional
        Relative Lagrangian gap to stop at (default 1e-8 in phase 1, 1e-6 in phase 2).

    Returns
    -------
    LPSolution
        ``x`` in ``lp``'s column layout (the combined columns, mapped onto
        every member for mirrored units); ``dual_gap`` is the final relative
        gap between the master and the Lagrangian bound.
    """
    stats = stats if stats is not None else DWStats()
    phase2 = R_max is not None
    if phase2 and not any(u.cols for u in units):
        solve_dw(lp, units, method=method, stats=stats)
    if gap_tol is None:
        gap_tol = 1e-6 if phase2 else GAP_TOL
    for u in units:
        if u.pricer is None:
            u.pricer = _Pricer(lp, u, method)
    pricers = [u.pricer for u in units]
    n_live = lp.cap_bw.size
    bw = lp.cap_bw
    if not any(u.cols for u in units):
        p0 = 1.0 / bw
        for u, pr in zip(units, pricers):
            _add(u, pr, _effective_prices(u, p0), phase2, stats)
    result = None
    center, best_lb = None, -np.inf
    for _ in range(max_iter):
        stats.iterations += 1
        t0 = time.perf_counter()
        master = _master(lp, units, R_max)
        stats.master_s += time.perf_counter() - t0
        if master is None:
            return LPSolution(np.zeros(lp.n_cols), float("inf"), float("inf"),
                              "Dantzig-Wolfe master infeasible", False, float("inf"))
        res, ncol_of = master
        p = np.maximum(-np.asarray(res.ineqlin.marginals)[:n_live], 0.0)
        mu = np.asarray(res.eqlin.marginals)[: len(units)]
        obj = float(res.fun)
        result = (res, ncol_of)
        added = 0
        # Wentges smoothing: price first at a point between the best-bound
        # prices and the master's; fall back to the master's on mispricing.
        tries = [SMOOTHING * center + (1 - SMOOTHING) * p] if center is not None else []
        tries.append(p)
        for pp in tries:
            found = [_price(pr, _effective_prices(u, pp), phase2, stats)
                     for u, pr in zip(units, pricers)]
            lb = _lagrangian(lp, units, np.array([f[1] for f in found]), pp, bw, R_max)
            if lb > best_lb:
                best_lb, center = lb, pp
            for i, (u, (col, _, use, cst)) in enumerate(zip(units, found)):
                a = _unit_usage(u, use)
                c_col = cst * len(u.members)
                rc = (c_col if phase2 else 0.0) + float(p @ a) - mu[i]
                if rc < -1e-9 * max(1.0, abs(mu[i])):
                    u.cols.append(col)
                    u.usage.append(a)
                    u.cost.append(c_col)
                    added += 1
            if added:
                break
        stats.columns = sum(len(u.cols) for u in units)
        gap = (obj - best_lb) / max(abs(obj), 1e-300) if np.isfinite(best_lb) else float("inf")
        stats.lower_bound, stats.gap = best_lb, max(gap, 0.0)
        if added == 0 or gap <= gap_tol:
            break
    else:
        stats.converged = False
    res, ncol_of = result
    if phase2:
        stats.cost_gap = stats.gap
    else:
        stats.r_lower_bound, stats.r_gap = stats.lower_bound, stats.gap
    x = _assemble(lp, units, res.x, ncol_of)
    R = float(x[lp.R_col])
    objective = float(res.fun)
    return LPSolution(x, R, objective, f"Dantzig-Wolfe ({stats.decomposition}): "
                      f"{stats.iterations} iterations, gap {stats.gap:.2e}",
                      bool(stats.converged and res.status == 0), float(stats.gap))


def _price(pr: _Pricer, pe, phase2, stats):
    t0 = time.perf_counter()
    out = pr.price(pe, phase2)
    stats.pricing_s += time.perf_counter() - t0
    stats.pricing_solves += 1
    return out


def _add(u: _Unit, pr: _Pricer, pe, phase2, stats):
    col, _, use, cst = _price(pr, pe, phase2, stats)
    u.cols.append(col)
    u.usage.append(_unit_usage(u, use))
    u.cost.append(cst * len(u.members))


def _master(lp: FluidLP, units: list[_Unit], R_max):
    """Solve the restricted master; returns (linprog result, column offset per unit)."""
    from scipy.optimize import linprog

    n_live = lp.cap_bw.size
    counts = [len(u.cols) for u in units]
    ncol_of = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n_lam = int(ncol_of[-1])
    S = lp.n_shares
    R_col = n_lam
    n = n_lam + 1 + S
    U = np.column_stack([c for u in units for c in u.usage]) if n_lam else np.zeros((n_live, 0))
    A_ub = sp.hstack([sp.csr_array(U), sp.csr_array(-lp.cap_bw[:, None]),
                      sp.csr_array((n_live, S))], format="csr")
    rows, cols, vals, rhs = [], [], [], []
    for i, u in enumerate(units):
        for j in range(counts[i]):
            rows.append(i)
            cols.append(ncol_of[i] + j)
            vals.append(1.0)
        q = _demand(lp, u.rep)
        if isinstance(q, (int, np.integer)):
            rows.append(i)
            cols.append(R_col + 1 + int(q))
            vals.append(-1.0)
            rhs.append(0.0)
        else:
            rhs.append(float(q))
    r = len(units)
    if S:
        for j in range(S):
            rows.append(r)
            cols.append(R_col + 1 + j)
            vals.append(1.0)
        rhs.append(1.0)
        r += 1
        # Mirrored: every member's share equals its representative's.
        for u in units:
            qr = _demand(lp, u.rep)
            for mb, _, _ in u.members[1:]:
                qm = _demand(lp, mb)
                if isinstance(qr, (int, np.integer)) and isinstance(qm, (int, np.integer)):
                    rows += [r, r]
                    cols += [R_col + 1 + int(qm), R_col + 1 + int(qr)]
                    vals += [1.0, -1.0]
                    rhs.append(0.0)
                    r += 1
    A_eq = sp.csr_array((vals, (rows, cols)), shape=(r, n))
    c = np.zeros(n)
    lb = np.zeros(n)
    ub = np.full(n, np.inf)
    if S:
        lb[R_col + 1:] = lp.lb[lp.share0:]
        ub[R_col + 1:] = lp.ub[lp.share0:]
    if R_max is None:
        c[R_col] = 1.0
    else:
        c[:n_lam] = [x for u in units for x in u.cost]
        ub[R_col] = R_max
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n_live), A_eq=A_eq, b_eq=np.array(rhs),
                  bounds=np.column_stack([lb, ub]), method="highs", options=lp_options())
    check_lp(res)
    if res.x is None or res.status != 0:
        return None
    return res, ncol_of


def _lagrangian(lp: FluidLP, units, values, p, bw, R_max) -> float:
    """The Lagrangian lower bound at prices ``p`` (module docstring)."""
    pb = float(p @ bw)
    fixed = 0.0
    per_share = np.zeros(lp.n_shares)
    for u, v in zip(units, values):
        for mb, _, _ in u.members:
            q = _demand(lp, mb)
            share = v / len(u.members)
            if isinstance(q, (int, np.integer)):
                per_share[int(q)] += share
            else:
                fixed += float(q) * share
    total = fixed
    if lp.n_shares:
        total += _min_over_shares(lp, per_share)
    if R_max is None:
        return total / pb if pb > 0 else 0.0
    return total - pb * R_max


def _min_over_shares(lp: FluidLP, V: np.ndarray) -> float:
    from scipy.optimize import linprog

    S = lp.n_shares
    res = linprog(V, A_eq=np.ones((1, S)), b_eq=[1.0],
                  bounds=np.column_stack([lp.lb[lp.share0:], lp.ub[lp.share0:]]),
                  method="highs")
    return float(res.fun) if res.x is not None else float("-inf")


def _assemble(lp: FluidLP, units: list[_Unit], lam_x: np.ndarray, ncol_of) -> np.ndarray:
    """Full-LP columns from the master's weights (mapped onto members)."""
    x = np.zeros(lp.n_cols)
    for i, u in enumerate(units):
        n_rep = lp.blocks[u.rep].n_cols
        z = np.zeros(n_rep)
        for j, (idx, val) in enumerate(u.cols):
            lam = float(lam_x[ncol_of[i] + j])
            if lam > 0:
                z[idx] += lam * val
        for mb, cmap, _ in u.members:
            off = lp.offsets[mb]
            if cmap is None:
                x[off: off + n_rep] = z
            else:
                x[off + cmap] = z
    n_lam = int(ncol_of[-1])
    x[lp.R_col] = lam_x[n_lam]
    if lp.n_shares:
        x[lp.share0:] = lam_x[n_lam + 1:]
    return x
