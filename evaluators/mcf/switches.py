"""Realisability of a relaxed solution at non-copying nodes, and where to refine.

The switch relaxations (thesis LP 3.13 / 3.14) only conserve the *amount*
of usage at a switch; the flows may still pretend that one transmission into
a switch serves destinations it leaves towards on different links (a copy
the switch cannot make), or balance usage with transmissions that carry no
flow.  Thesis Sec. 3.1, "Finding provably optimal algorithms": check whether
the transmissions the solution describes really deliver the data; where not,
duplicate the switch vertices involved and solve again; a solution that
passes the check is optimal, since the LP was a relaxation.

**The check**, per block (origin) and per connected *region* ``C`` of
generic non-copying nodes of its network: the data enters ``C`` from
copying nodes (*entries* ``L``) and leaves to copying nodes (*exits* ``V``).
A realisation sends from every entry ``L`` a stream ``q[L, V]`` towards every
exit ``V`` (the entry may copy, so a stream carries whatever the entry holds),
routes the streams through ``C`` without copying -- usage on every edge at
most the solution's ``w`` -- and must deliver each destination ``d`` the data
the solution's flows bring it: a split ``g[L, V, d] <= q[L, V]`` of the
flows with the solution's per-entry amounts ``F_in[L, d]`` and per-exit
amounts ``F_out[V, d]``.  That is a small LP (multicommodity routing of the
streams, commodities = entries); we minimise the total capacity overflow plus
the undelivered flow and call the region realisable when it is ``~0``.  Two
cases pass without an LP: a single entry with usage (the entry sends the whole
conserved usage flow and copies as needed) and a single exit (everything
merges into one stream).  Like LP 3.10 itself (thesis: LP 3.10 "is a
relaxation ... typically sufficient"), the check takes for granted that flows
of one origin that meet at a *copying* node can share data.

**Refinement**: failing regions are split into entry-labelled copies
(:mod:`evaluators.mcf.ten`), where usage conservation is exact, so every
region passes after at most one split and the loop terminates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evaluators.mcf.fluid import Block, check_lp, lp_options
from evaluators.mcf.ten import noncopy_components

__all__ = ["RegionCheck", "edge_values", "check_blocks"]

#: Values below this (normalised units) are treated as zero.
ZERO = 1e-9
#: A region passes when its overflow is at most this times (1 + its usage).
PASS_TOL = 1e-6


@dataclass(frozen=True)
class RegionCheck:
    """Outcome of the check for one region of one block.

    Attributes
    ----------
    block : int
        Block index in the LP.
    keys : tuple of int
        Time-expanded keys ``phys * (T + 1) + t`` of the region's nodes.
    overflow : float
        Minimal capacity overflow plus undelivered flow (normalised units).
    passed : bool
    """

    block: int
    keys: tuple[int, ...]
    overflow: float
    passed: bool


def edge_values(block: Block, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-edge usage ``w`` and dense flows ``f[d, e]`` of one block's columns ``z``.

    Edges without a usage column (hold-overs at copying nodes) get
    ``max_d f``; flow blocks get ``sum_d f``.
    """
    net = block.net
    f = np.zeros((net.destinations.size, net.n_edges))
    f[block.f_dest, block.f_edge] = np.maximum(z[: block.n_f], 0.0)
    if block.kind == "flow":
        return f.sum(axis=0), f
    w = f.max(axis=0) if f.size else np.zeros(net.n_edges)
    has = block.w_col >= 0
    w[has] = np.maximum(z[block.w_col[has]], 0.0)
    return w, f


def check_blocks(blocks: list[Block], zs: list[np.ndarray]) -> list[RegionCheck]:
    """Check every region of generic non-copying nodes of every copy block.

    Parameters
    ----------
    blocks : list of Block
    zs : list of ndarray
        Each block's solution columns.

    Returns
    -------
    list of RegionCheck
        One per region that carries usage; regions that need an LP are checked
        in one block-diagonal LP (their objectives are independent).
    """
    out: list[RegionCheck] = []
    pending: list[tuple[int, tuple[int, ...], float, dict]] = []
    for b, (block, z) in enumerate(zip(blocks, zs)):
        if block.kind != "copy":
            continue
        net = block.net
        comp, count = noncopy_components(net)
        if count == 0:
            continue
        w, f = edge_values(block, z)
        w = np.where(w > ZERO, w, 0.0)
        f = np.where(f > ZERO, f, 0.0)
        ct, ch = comp[net.tail], comp[net.head]
        for c in range(count):
            touch = (ct == c) | (ch == c)
            if not (w[touch] > 0).any():
                continue
            keys = tuple(int(k) for k in net.key(np.flatnonzero(comp == c)))
            entry = np.flatnonzero((ch == c) & (ct != c) & (w > 0))
            exit_ = np.flatnonzero((ct == c) & (ch != c) & (w > 0))
            inner = np.flatnonzero((ct == c) & (ch == c) & (w > 0))
            if np.unique(net.tail[entry]).size <= 1 or np.unique(net.head[exit_]).size <= 1:
                out.append(RegionCheck(b, keys, 0.0, True))
                continue
            lp = _region_lp(net, w, f, entry, inner, exit_)
            pending.append((b, keys, float(w[touch].sum()), lp))
    if pending:
        overflow = _solve_regions([p[3] for p in pending])
        for (b, keys, usage, _), ov in zip(pending, overflow):
            out.append(RegionCheck(b, keys, ov, ov <= PASS_TOL * (1.0 + usage)))
    return out


def _region_lp(net, w, f, entry, inner, exit_) -> dict:
    """The realisation LP of one region (module docstring), as sparse pieces."""
    L, l_of = np.unique(net.tail[entry], return_inverse=True)
    V, v_of = np.unique(net.head[exit_], return_inverse=True)
    nL, nV = L.size, V.size
    K = f.shape[0]
    F_in = np.zeros((nL, K))
    np.add.at(F_in, l_of, f[:, entry].T)
    F_out = np.zeros((nV, K))
    np.add.at(F_out, v_of, f[:, exit_].T)
    F_in[F_in <= ZERO] = 0.0
    F_out[F_out <= ZERO] = 0.0
    # Columns: g[l, v, k] (where both amounts are positive), q[l, v], r[l, e], s[e], u[v, k].
    gl, gv, gk = np.nonzero((F_in[:, None, :] > 0) & (F_out[None, :, :] > 0))
    n_g = gl.size
    q0 = n_g
    n_q = nL * nV
    edges = np.concatenate([entry, inner, exit_])
    n_e = edges.size
    e_entry_of = np.full(n_e, -1)
    e_entry_of[: entry.size] = l_of
    # r[l, e]: entry edges only for their own entry, every inner and exit edge.
    rl = np.concatenate([l_of, np.repeat(np.arange(nL), inner.size + exit_.size)])
    re = np.concatenate([np.arange(entry.size),
                         np.tile(np.arange(entry.size, n_e), nL)])
    r0 = q0 + n_q
    n_r = rl.size
    s0 = r0 + n_r
    uv, uk = np.nonzero(F_out > 0)
    u0 = s0 + n_e
    n_cols = u0 + uv.size
    cost = np.zeros(n_cols)
    cost[s0:] = 1.0
    ub_r, ub_c, ub_v, ub_b = [], [], [], []
    row = 0
    # (1) sum_v g[l, v, k] <= F_in[l, k]
    lk = gl * K + gk
    keys, inv = np.unique(lk, return_inverse=True)
    ub_r.append(row + inv); ub_c.append(np.arange(n_g)); ub_v.append(np.ones(n_g))
    ub_b.append(F_in.ravel()[keys]); row += keys.size
    # (2) -sum_l g[l, v, k] - u[v, k] <= -F_out[v, k]
    vk_all = uv * K + uk
    pos = {int(k): i for i, k in enumerate(vk_all)}
    gvk = np.array([pos[int(k)] for k in gv * K + gk], dtype=np.int64)
    ub_r += [row + gvk, row + np.arange(uv.size)]
    ub_c += [np.arange(n_g), u0 + np.arange(uv.size)]
    ub_v += [-np.ones(n_g), -np.ones(uv.size)]
    ub_b.append(-F_out[uv, uk]); row += uv.size
    # (3) g[l, v, k] - q[l, v] <= 0
    ub_r += [row + np.arange(n_g)] * 2
    ub_c += [np.arange(n_g), q0 + gl * nV + gv]
    ub_v += [np.ones(n_g), -np.ones(n_g)]
    ub_b.append(np.zeros(n_g)); row += n_g
    # (6) sum_l r[l, e] - s[e] <= w[e]
    ub_r += [row + re, row + np.arange(n_e)]
    ub_c += [r0 + np.arange(n_r), s0 + np.arange(n_e)]
    ub_v += [np.ones(n_r), -np.ones(n_e)]
    ub_b.append(w[edges]); row += n_e
    n_ub = row
    # (4) conservation of r[l] at region nodes; (5) r[l] into exit v equals q[l, v].
    nodes = np.unique(np.concatenate([net.head[entry], net.tail[exit_], net.tail[inner],
                                      net.head[inner]]))
    node_pos = {int(x): i for i, x in enumerate(nodes)}
    n_nodes = nodes.size
    eh = net.head[edges][re]
    et = net.tail[edges][re]
    eq_r, eq_c, eq_v = [], [], []
    is_exit = re >= entry.size + inner.size
    in_region_head = ~is_exit
    hpos = np.array([node_pos[int(x)] for x in eh[in_region_head]], dtype=np.int64)
    eq_r.append(rl[in_region_head] * n_nodes + hpos)
    eq_c.append(r0 + np.flatnonzero(in_region_head)); eq_v.append(np.ones(hpos.size))
    out_region = re >= entry.size
    tpos = np.array([node_pos[int(x)] for x in et[out_region]], dtype=np.int64)
    eq_r.append(rl[out_region] * n_nodes + tpos)
    eq_c.append(r0 + np.flatnonzero(out_region)); eq_v.append(-np.ones(tpos.size))
    base = nL * n_nodes
    exit_idx = re[is_exit] - entry.size - inner.size
    eq_r.append(base + rl[is_exit] * nV + v_of[exit_idx])
    eq_c.append(r0 + np.flatnonzero(is_exit)); eq_v.append(np.ones(int(is_exit.sum())))
    eq_r.append(base + np.arange(n_q)); eq_c.append(q0 + np.arange(n_q)); eq_v.append(-np.ones(n_q))
    n_eq = base + n_q
    cat = np.concatenate
    return {
        "c": cost,
        "A_ub": sp.csr_array((cat(ub_v), (cat(ub_r), cat(ub_c))), shape=(n_ub, n_cols)),
        "b_ub": cat(ub_b),
        "A_eq": sp.csr_array((cat(eq_v), (cat(eq_r), cat(eq_c))), shape=(n_eq, n_cols)),
        "b_eq": np.zeros(n_eq),
    }


def _solve_regions(lps: list[dict]) -> list[float]:
    """Solve the region LPs as one block-diagonal LP; per-region optimal overflow."""
    from scipy.optimize import linprog

    from codesign.errors import CodesignError

    sizes = np.array([lp["c"].size for lp in lps])
    res = linprog(np.concatenate([lp["c"] for lp in lps]),
                  A_ub=sp.block_diag([lp["A_ub"] for lp in lps], format="csr"),
                  b_ub=np.concatenate([lp["b_ub"] for lp in lps]),
                  A_eq=sp.block_diag([lp["A_eq"] for lp in lps], format="csr"),
                  b_eq=np.concatenate([lp["b_eq"] for lp in lps]),
                  bounds=(0, None), method="highs", options=lp_options())
    check_lp(res)
    if res.x is None:
        raise CodesignError(f"switch realisability check failed to solve: {res.message}")
    cost = np.concatenate([lp["c"] for lp in lps]) * res.x
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [float(cost[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:])]
