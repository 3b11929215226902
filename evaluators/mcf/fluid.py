"""The fluid LP with aggregated capacity (thesis LP 4.2 over LP 3.10), in blocks.

Every origin's commodities form one :class:`Block` -- its own variables and
constraints on its own :class:`~evaluators.mcf.ten.Network` -- and the blocks
are tied only by the **linking rows** (bandwidth) and the shared columns
(the completion time ``R``; for allreduce the shares of the reduced buffer).
This is the structure Dantzig-Wolfe decomposition by origin (thesis Sec. 5.1,
subproblem 5.1 and its master) needs: a block's ``A_eq``/``A_ub``/``cost``
are the subproblem, its ``usage`` matrix the coefficients in the master's
bandwidth rows.

A **copy block** (allgather, broadcast and, reversed, reducescatter and
reduce) has, on the edges ``e`` of its network and destinations ``d``:

* flows ``f[d, e] >= 0`` with conservation (3.1)-(3.3): one unit (times the
  block's demand) from the origin ``(o, 0)`` to each sink ``(d, T)``;
* usage ``w[e] >= f[d, e]`` (3.7): one transmission serves every destination
  of the origin that the data is copied to later;
* at nodes that may not copy, usage conservation (3.12, LP 3.13); with the
  ``"3.14"`` model also the multiplicity variables ``x[a, e]`` (the amount of
  the usage bound for exactly ``a`` destinations) with ``sum_a x = w``,
  ``sum_a a x = sum_d f`` and per-``a`` conservation at those nodes (the
  switch rows of LP 3.14).  We keep only those rows of LP 3.14 that are valid
  for every algorithm: its multiplicity-monotonicity inequality at copying
  nodes (as printed, outflow ``<=`` inflow for every ``a``) would forbid the
  copies a copying node exists to make, so it is left out; the destination
  row ``x_1 = 1`` holds by construction (an edge into ``(d, T)`` only serves
  ``d``).  ``x`` lives only on edges touching a non-copying node, the only
  place its rows bind.

A **flow block** (all-to-all LP 3.16; scatter, gather) has flows only: every
destination's data is distinct, so usage is the sum of the flows.

The **linking rows** are (4.1): for every bandwidth set ``L`` (each link,
plus optional groups such as a memory's total read+write bandwidth, the
thesis' ``b(L)``), ``sum_blocks usage(L) <= R * b(L)``.  Phase 1 minimises
``R``; phase 2 fixes ``R`` at its optimum (``1e-7`` relative slack for the
solver's tolerances) and minimises the secondary cost ``sum_e c_e w_e``.

Units: flows in units of the block's data (one shard), bandwidths divided by
a reference bandwidth, so ``R`` is in ``unit / b_ref`` seconds per byte.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evaluators.mcf.ten import HOLD, Network

__all__ = ["Block", "copy_block", "flow_block", "FluidLP", "LPSolution", "SWITCH_MODELS",
           "Unreachable", "DEFAULT_TIME_LIMIT_S", "lp_deadline", "lp_options"]

#: Switch relaxations a copy block can use at generic (unsplit) non-copying nodes.
SWITCH_MODELS = ("3.13", "3.14")
#: Wall-clock limit of one fluid optimum's LPs together, seconds (``time_limit``).  The
#: LPs' size is bounded before they are built (:func:`evaluators.estimates.check_mcf`),
#: their solve time is not: it depends on degeneracy more than on size -- torus:4x4
#: allreduce takes 3 s at its default 4 steps and 169 s at 8 steps (2x the variables),
#: and more than 10 minutes at 25.
DEFAULT_TIME_LIMIT_S = 600.0

#: The least time limit an LP is given, seconds (:func:`lp_options`).
LP_MIN_TIME_S = 5.0
#: (deadline on time.monotonic, limit s, what is solved, what to do instead) or None.
_DEADLINE: ContextVar[tuple[float, float, str, str] | None] = ContextVar(
    "mcf_lp_deadline", default=None)


@contextmanager
def lp_deadline(limit_s: float, what: str, instead: str) -> Iterator[None]:
    """Every LP solved inside shares one wall-clock budget of ``limit_s`` seconds; past
    it :func:`lp_options` (before an LP) or :func:`check_lp` (after one) raise a
    one-line :class:`~codesign.resources.ResourceLimitError` naming ``what`` and
    ``instead``."""
    token = _DEADLINE.set((time.monotonic() + limit_s, limit_s, what, instead))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _over(d) -> Exception:
    from codesign.resources import ResourceLimitError

    return ResourceLimitError(f"refused: {d[2]} ran past its time limit of {d[1]:g} s "
                              f"(option time_limit); {d[3]}")


def lp_options(options: dict | None = None) -> dict:
    """HiGHS options with the time left of the current :func:`lp_deadline` (if any)."""
    opts = dict(options or {})
    d = _DEADLINE.get()
    if d is not None:
        left = d[0] - time.monotonic()
        if left <= 0:
            raise _over(d)
        # At least LP_MIN_TIME_S: HiGHS 1.12 hands its interior-point solver (IPX) the
        # time its presolve left, and IPX runs without any limit when that is not
        # positive (measured on torus:4x4 allreduce at 8 steps: limits of 0.3-0.8 s ran
        # on past 40 s, 1 s stopped at 1.1 s alone but ran on with three solves on two
        # cores, 2 and 5 s stopped in time there).
        opts["time_limit"] = max(LP_MIN_TIME_S, min(left, float(opts.get("time_limit", left))))
    return opts


def check_lp(res) -> None:
    """Raise the deadline's error if a scipy HiGHS result stopped at its time limit."""
    if getattr(res, "status", 0) == 1 and \
            "time limit" in str(getattr(res, "message", "")).lower():
        over_time_limit()


def over_time_limit() -> None:
    """Raise the current :func:`lp_deadline`'s one-line error (an LP stopped at the
    time limit :func:`lp_options` gave it); without a deadline, return."""
    d = _DEADLINE.get()
    if d is not None:
        raise _over(d)


@dataclass
class Block:
    """Variables and constraints of one origin (a Dantzig-Wolfe subproblem).

    Columns are ``[f (n_f), w (n_w), x (n_x)]``; constraints are
    ``A_eq @ z = q * demand`` (``q`` the block's demand, fixed or a shared
    column) and ``A_ub @ z <= 0``.

    Attributes
    ----------
    kind : str
        ``"copy"`` or ``"flow"``.
    net : Network
        The block's network.
    f_dest, f_edge : ndarray of int
        Destination index and network edge of each flow column.
    w_edge : ndarray of int
        Network edge of each usage column (copy blocks).
    w_col : ndarray of int
        Usage column of each network edge (``-1``: none, e.g. hold-overs at
        copying nodes, which carry no capacity or cost).
    x_edge, x_mult : ndarray of int
        Edge and multiplicity ``a`` of each 3.14 column.
    A_eq, A_ub : scipy.sparse.csr_array
    demand : ndarray
        Right-hand side of ``A_eq`` per unit of demand.
    usage : scipy.sparse.csr_array, shape (links, n_cols)
        Physical link usage of each column (the linking-row coefficients).
    cost : ndarray
        Secondary cost per column (per unit of data).
    """

    kind: str
    net: Network
    f_dest: np.ndarray
    f_edge: np.ndarray
    w_edge: np.ndarray
    w_col: np.ndarray
    x_edge: np.ndarray
    x_mult: np.ndarray
    A_eq: sp.csr_array
    demand: np.ndarray
    A_ub: sp.csr_array
    usage: sp.csr_array
    cost: np.ndarray

    @property
    def n_f(self) -> int:
        return int(self.f_edge.size)

    @property
    def n_w(self) -> int:
        return int(self.w_edge.size)

    @property
    def n_cols(self) -> int:
        return self.n_f + self.n_w + int(self.x_edge.size)


def _conservation(net: Network, fk: np.ndarray, fe: np.ndarray):
    """Rows (3.1)-(3.3) as COO pieces: in - out = +1 at sinks, -1 at the source."""
    N = net.n_nodes
    key_in = fk * N + net.head[fe]
    key_out = fk * N + net.tail[fe]
    k = np.arange(net.destinations.size)
    src_key = k * N + net.source
    sink_key = k * N + net.sinks
    keys, inv = np.unique(np.concatenate([key_in, key_out, src_key, sink_key]),
                          return_inverse=True)
    n_f = fe.size
    rows = inv[: 2 * n_f]
    cols = np.concatenate([np.arange(n_f), np.arange(n_f)])
    vals = np.concatenate([np.ones(n_f), -np.ones(n_f)])
    demand = np.zeros(keys.size)
    demand[inv[2 * n_f: 2 * n_f + k.size]] -= 1.0
    demand[inv[2 * n_f + k.size:]] += 1.0
    # A source or sink row without any flow variable means T is too small.
    touched = np.zeros(keys.size, dtype=bool)
    touched[rows] = True
    if not touched[demand != 0].all():
        raise Unreachable()
    return rows, cols, vals, demand, keys.size


class Unreachable(Exception):
    """A destination cannot be reached within the block's step count."""


def copy_block(net: Network, link_cost: np.ndarray, switch_model: str = "3.14") -> Block:
    """LP 4.2 block of one origin with copies (module docstring).

    Parameters
    ----------
    net : Network
        The origin's time-expanded network.
    link_cost : ndarray
        Secondary cost per physical link (per unit of data).
    switch_model : {"3.13", "3.14"}
        Constraints at generic non-copying nodes; labelled copies always get
        usage conservation (3.12) only, which is exact there.

    Returns
    -------
    Block
    """
    E, N = net.n_edges, net.n_nodes
    fk, fe = np.nonzero(net.allowed)
    n_f = fe.size
    noncopy = ~net.copy
    need_w = (net.link != HOLD) | noncopy[net.tail] | noncopy[net.head]
    w_edge = np.flatnonzero(need_w)
    n_w = w_edge.size
    w_col = np.full(E, -1, dtype=np.int64)
    w_col[w_edge] = n_f + np.arange(n_w)
    generic = noncopy & (net.node_label < 0)
    if switch_model == "3.14" and generic.any():
        xe = np.flatnonzero(generic[net.tail] | generic[net.head])
        m = net.allowed[:, xe].sum(axis=0)
        x_edge = np.repeat(xe, m)
        starts = np.repeat(np.cumsum(m) - m, m)
        x_mult = np.arange(x_edge.size) - starts + 1
    else:
        x_edge = np.zeros(0, dtype=np.int64)
        x_mult = np.zeros(0, dtype=np.int64)
    n_x = x_edge.size
    x0 = n_f + n_w
    n_cols = x0 + n_x

    r, c, v, demand, n_rows = _conservation(net, fk, fe)
    R, C, V = [r], [c], [v]
    # (3.12) usage conservation at every non-copying node (generic or labelled).
    nc_nodes = np.flatnonzero(noncopy)
    if nc_nodes.size:
        local = np.full(N, -1, dtype=np.int64)
        local[nc_nodes] = n_rows + np.arange(nc_nodes.size)
        for ends, sign in ((net.head, 1.0), (net.tail, -1.0)):
            sel = need_w & noncopy[ends]
            R.append(local[ends[sel]])
            C.append(w_col[sel])
            V.append(np.full(int(sel.sum()), sign))
        n_rows += nc_nodes.size
    if n_x:
        xcols = x0 + np.arange(n_x)
        # sum_a x[a, e] - w[e] = 0  and  sum_a a x[a, e] - sum_d f[d, e] = 0.
        xe_u, xe_inv = np.unique(x_edge, return_inverse=True)
        row_w = n_rows + xe_inv
        row_f = n_rows + xe_u.size + xe_inv
        R += [row_w, n_rows + np.arange(xe_u.size), row_f]
        C += [xcols, w_col[xe_u], xcols]
        V += [np.ones(n_x), -np.ones(xe_u.size), x_mult.astype(float)]
        pos = np.full(E, -1, dtype=np.int64)
        pos[xe_u] = np.arange(xe_u.size)
        fsel = pos[fe] >= 0
        R.append(n_rows + xe_u.size + pos[fe[fsel]])
        C.append(np.flatnonzero(fsel))
        V.append(-np.ones(int(fsel.sum())))
        n_rows += 2 * xe_u.size
        # Per-multiplicity conservation at generic non-copying nodes.
        amax = int(x_mult.max())
        gnodes = np.flatnonzero(generic)
        gl = np.full(N, -1, dtype=np.int64)
        gl[gnodes] = np.arange(gnodes.size)
        for ends, sign in ((net.head, 1.0), (net.tail, -1.0)):
            at = ends[x_edge]
            sel = generic[at]
            R.append(n_rows + gl[at[sel]] * amax + x_mult[sel] - 1)
            C.append(xcols[sel])
            V.append(np.full(int(sel.sum()), sign))
        n_rows += gnodes.size * amax
    A_eq = _csr(R, C, V, n_rows, n_cols)
    demand = np.concatenate([demand, np.zeros(n_rows - demand.size)])
    # (3.7) f[d, e] - w[e] <= 0 where e has a usage column.
    has_w = w_col[fe] >= 0
    fi = np.flatnonzero(has_w)
    ub_rows = np.arange(fi.size)
    A_ub = _csr([ub_rows, ub_rows], [fi, w_col[fe[fi]]],
                [np.ones(fi.size), -np.ones(fi.size)], fi.size, n_cols)
    link_w = w_edge[net.link[w_edge] != HOLD]
    usage = _csr([net.link[link_w]], [w_col[link_w]], [np.ones(link_w.size)],
                 link_cost.size, n_cols)
    cost = np.zeros(n_cols)
    cost[w_col[link_w]] = link_cost[net.link[link_w]]
    A_eq, demand = _drop_empty_rows(A_eq, demand)
    return Block("copy", net, fk, fe, w_edge, w_col, x_edge, x_mult, A_eq, demand, A_ub,
                 usage, cost)


def flow_block(net: Network, link_cost: np.ndarray) -> Block:
    """LP 3.16 block of one origin: distinct data per destination, no copies."""
    fk, fe = np.nonzero(net.allowed)
    n_f = fe.size
    r, c, v, demand, n_rows = _conservation(net, fk, fe)
    A_eq = _csr([r], [c], [v], n_rows, n_f)
    on_link = np.flatnonzero(net.link[fe] != HOLD)
    usage = _csr([net.link[fe[on_link]]], [on_link], [np.ones(on_link.size)],
                 link_cost.size, n_f)
    cost = np.zeros(n_f)
    cost[on_link] = link_cost[net.link[fe[on_link]]]
    empty = np.zeros(0, dtype=np.int64)
    return Block("flow", net, fk, fe, empty, np.full(net.n_edges, -1, dtype=np.int64), empty,
                 empty, A_eq, demand, sp.csr_array((0, n_f)), usage, cost)


def _csr(rows, cols, vals, n_rows: int, n_cols: int) -> sp.csr_array:
    r = np.concatenate([np.asarray(x, dtype=np.int64) for x in rows]) if rows else np.zeros(0)
    c = np.concatenate([np.asarray(x, dtype=np.int64) for x in cols]) if cols else np.zeros(0)
    v = np.concatenate([np.asarray(x, dtype=float) for x in vals]) if vals else np.zeros(0)
    m = sp.coo_array((v, (r, c)), shape=(n_rows, n_cols)).tocsr()
    m.sum_duplicates()
    return m


def _drop_empty_rows(A: sp.csr_array, rhs: np.ndarray):
    nnz = np.diff(A.indptr)
    keep = (nnz > 0) | (rhs != 0)
    if keep.all():
        return A, rhs
    return A[np.flatnonzero(keep)], rhs[keep]


@dataclass
class LPSolution:
    """One solve of a :class:`FluidLP`.

    Attributes
    ----------
    x : ndarray
        All columns.
    R : float
        Completion time (normalised units).
    objective : float
        The phase's objective value.
    status : str
        Solver message.
    success : bool
        Whether HiGHS reported an optimal solution.
    dual_gap : float
        ``|primal - dual| / max(1, |primal|)`` from HiGHS' duals.
    """

    x: np.ndarray
    R: float
    objective: float
    status: str
    success: bool
    dual_gap: float

    def block_x(self, lp: "FluidLP", b: int) -> np.ndarray:
        """Columns of block ``b``."""
        return self.x[lp.offsets[b]: lp.offsets[b + 1]]

    def shares(self, lp: "FluidLP") -> np.ndarray:
        """Values of the shared demand columns (allreduce shares)."""
        return self.x[lp.share0: lp.share0 + lp.n_shares]


class FluidLP:
    """Blocks tied by the bandwidth rows (4.1); columns ``[blocks..., R, shares...]``.

    Parameters
    ----------
    blocks : list of Block
    demands : list of float or int
        Per block: a fixed demand (float) or the index of a shared share
        column (int, for allreduce: owner ``j`` reduces and gathers
        ``share[j]`` of the buffer; the shares sum to 1).
    bandwidth : ndarray
        Normalised bandwidth per physical link.
    groups : sequence of (ndarray of int, float)
        Extra bandwidth sets: links and their joint normalised bandwidth.
    n_shares : int
        Number of share columns (0 unless some demand is an int).
    fixed_shares : ndarray or None
        Fix the shares (e.g. ``1/N`` each) instead of optimising them.
    """

    def __init__(self, blocks: list[Block], demands: list, bandwidth: np.ndarray,
                 groups=(), n_shares: int = 0, fixed_shares: np.ndarray | None = None) -> None:
        self.blocks = blocks
        self.demands = demands
        self.n_shares = n_shares
        self.offsets = np.concatenate([[0], np.cumsum([b.n_cols for b in blocks])]).astype(np.int64)
        nb = int(self.offsets[-1])
        self.R_col = nb
        self.share0 = nb + 1
        n = self.n_cols = nb + 1 + n_shares
        # Equality rows: block diagonal; a fixed demand goes to the right-hand
        # side, a shared one (allreduce) into its share column.
        blk = sp.block_diag([b.A_eq for b in blocks], format="coo")
        rows, cols, vals = [blk.row], [blk.col], [blk.data]
        rhs = []
        r0 = 0
        for b, q in zip(blocks, demands):
            if isinstance(q, (int, np.integer)):
                nz = np.flatnonzero(b.demand)
                rows.append(r0 + nz)
                cols.append(np.full(nz.size, self.share0 + int(q)))
                vals.append(-b.demand[nz])
                rhs.append(np.zeros(b.demand.size))
            else:
                rhs.append(b.demand * float(q))
            r0 += b.A_eq.shape[0]
        if n_shares:
            rows.append(np.full(n_shares, r0))
            cols.append(self.share0 + np.arange(n_shares))
            vals.append(np.ones(n_shares))
            rhs.append(np.ones(1))
            r0 += 1
        self.A_eq = _csr(rows, cols, vals, r0, n)
        self.b_eq = np.concatenate(rhs)
        # Inequalities: block rows (w >= f), then the bandwidth rows (4.1).
        blk = sp.block_diag([b.A_ub for b in blocks], format="coo")
        m_blk = blk.shape[0]
        n_links = bandwidth.size
        set_bw = np.concatenate([bandwidth, np.array([float(g[1]) for g in groups])])
        srows = np.concatenate([np.arange(n_links)] + [np.full(len(g[0]), n_links + i)
                                                       for i, g in enumerate(groups)])
        slinks = np.concatenate([np.arange(n_links)] + [np.asarray(g[0], dtype=np.int64)
                                                        for g in groups])
        incidence = sp.csr_array((np.ones(srows.size), (srows, slinks)),
                                 shape=(set_bw.size, n_links))
        cap = (incidence @ sp.hstack([b.usage for b in blocks], format="csr")).tocsr()
        live = np.flatnonzero(np.diff(cap.indptr) > 0)
        self.cap_sets = live
        self.cap_bw = set_bw[live]
        #: (live sets x links) membership, for the Dantzig-Wolfe master's rows.
        self.cap_incidence = incidence[live].tocsr()
        cap = cap[live].tocoo()
        self.A_ub = _csr([blk.row, m_blk + cap.row, m_blk + np.arange(live.size)],
                         [blk.col, cap.col, np.full(live.size, self.R_col)],
                         [blk.data, cap.data, -self.cap_bw], m_blk + live.size, n)
        self.b_ub = np.zeros(self.A_ub.shape[0])
        self.cost = np.concatenate([b.cost for b in blocks] + [np.zeros(n - nb)])
        self.lb = np.zeros(n)
        self.ub = np.full(n, np.inf)
        if n_shares:
            self.ub[self.share0:] = 1.0
            if fixed_shares is not None:
                self.lb[self.share0:] = fixed_shares
                self.ub[self.share0:] = fixed_shares

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns) of the whole LP."""
        return (self.A_eq.shape[0] + self.A_ub.shape[0], self.n_cols)

    def solve(self, *, R_max: float | None = None, method: str = "highs-ipm",
              options: dict | None = None) -> LPSolution:
        """Phase 1 (``R_max is None``: minimise ``R``) or phase 2 (minimise cost, ``R <= R_max``).

        ``method`` is a scipy ``linprog`` HiGHS method; the interior point
        method (with crossover) is much faster than simplex on these highly
        degenerate LPs (torus:4x4 allgather: 3 s against 27 s).
        """
        from scipy.optimize import linprog

        c = np.zeros(self.n_cols)
        ub = self.ub.copy()
        if R_max is None:
            c[self.R_col] = 1.0
        else:
            c[:] = self.cost
            ub[self.R_col] = R_max
        opts = lp_options({"presolve": True, **(options or {})})
        res = linprog(c, A_ub=self.A_ub, b_ub=self.b_ub, A_eq=self.A_eq, b_eq=self.b_eq,
                      bounds=np.column_stack([self.lb, ub]), method=method, options=opts)
        check_lp(res)
        if res.x is None:
            return LPSolution(np.zeros(self.n_cols), float("inf"), float("inf"), res.message,
                              False, float("inf"))
        return LPSolution(res.x, float(res.x[self.R_col]), float(res.fun), res.message,
                          res.status == 0, _dual_gap(res, c, self, ub))


def _dual_gap(res, c, lp: FluidLP, ub: np.ndarray) -> float:
    """Relative gap between the primal objective and the dual bound from HiGHS' duals."""
    try:
        dual = float(lp.b_eq @ res.eqlin.marginals + lp.b_ub @ res.ineqlin.marginals
                     + lp.lb @ res.lower.marginals)
        fin = np.isfinite(ub)
        dual += float(ub[fin] @ res.upper.marginals[fin])
    except (AttributeError, TypeError, ValueError):
        return float("nan")
    return abs(float(res.fun) - dual) / max(1.0, abs(float(res.fun)))
