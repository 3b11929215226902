"""Model-parallel sub-topology: repeated maximum-weight matchings with a discount.

TopoOpt NSDI'23 Algorithm 1, lines 12-17: ``d_MP`` times, find a maximum-weight
matching (Blossom) on the MP demand and divide the demand of every matched pair by
two, "a diminishing return" (Sec. 4.2 Step 3).  Appendix E.4 states it as the
utility ``T(i, j) x Discount(L(i, j))`` with ``Discount(l) = sum_{x=1..l} 2^-x``
(Eq. 2): the marginal utility of the ``(l+1)``-th link of a pair is ``T 2^-(l+1)``,
i.e. the demand weight is multiplied by ``2^-l`` after ``l`` links -- the "halve"
discount.  :data:`DISCOUNTS` also has ``"none"`` (``Discount = 1`` as used for
SiP-ML in App. F) and ``"harmonic"`` (weight ``T / (l + 1)``, a slower decay).

Speed (an engineering choice, documented in :func:`mp_matching`): networkx's
Blossom is pure Python, ~1 s for a dense 128-server graph and several seconds for
1024 servers.  A matching round therefore runs Blossom exactly on a *candidate
graph* -- every positive pair when there are at most ``blossom_max_edges`` of them,
otherwise each server's ``top_k`` heaviest pairs that stand out above the server's
median pair weight (the hot pairs over a uniform all-to-all background) -- and then
completes it greedily over all positive pairs among the servers left unmatched.
When the remaining weights are uniform (an all-to-all) every completion has the
same weight, so the result is still a maximum-weight matching.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from codesign.specs import check_choice

__all__ = ["DISCOUNTS", "discount_function", "mp_matching", "BLOSSOM_MAX_EDGES",
           "BLOSSOM_MAX_NODES", "HOT_TOP_K"]

#: Pair-weight multiplier after ``l`` links of a pair (module docstring).
DISCOUNTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "halve": lambda links: np.power(0.5, links),
    "none": lambda links: np.ones_like(links, dtype=np.float64),
    "harmonic": lambda links: 1.0 / (1.0 + links),
}
#: Run Blossom on all positive pairs when there are at most this many.
BLOSSOM_MAX_EDGES = 2000
#: Connected pieces of the candidate graph larger than this are matched greedily.
BLOSSOM_MAX_NODES = 400
#: Hot pairs kept per server in the candidate graph.
HOT_TOP_K = 4
_HOT_RTOL = 1e-6


def discount_function(discount) -> Callable[[np.ndarray], np.ndarray]:
    """The multiplier function for a discount name or callable ``f(links) -> factor``."""
    if callable(discount):
        return lambda links: np.asarray(discount(links), dtype=np.float64)
    check_choice("discount", discount, DISCOUNTS, "or a callable")
    return DISCOUNTS[discount]


def _blossom(weights: np.ndarray, us: np.ndarray, vs: np.ndarray) -> list[tuple[int, int]]:
    import networkx as nx

    g = nx.Graph()
    g.add_weighted_edges_from(zip(us.tolist(), vs.tolist(), weights[us, vs].tolist()))
    return [(int(a), int(b)) for a, b in nx.max_weight_matching(g)]


def _greedy(weights: np.ndarray, free: np.ndarray, noise: np.ndarray) -> list[tuple[int, int]]:
    """Servers in decreasing order of their heaviest pair each take their heaviest free
    partner (``noise``: tiny seeded tie-breaks)."""
    w = np.where(weights > 0, weights * (1.0 + noise), -np.inf)
    w[~free, :] = -np.inf
    w[:, ~free] = -np.inf
    order = np.argsort(-w.max(axis=1), kind="stable")
    taken = ~free.copy()
    pairs = []
    for i in order.tolist():
        if taken[i]:
            continue
        row = np.where(taken, -np.inf, w[i])
        j = int(np.argmax(row))
        if not np.isfinite(row[j]):
            continue
        taken[i] = taken[j] = True
        pairs.append((i, j))
    return pairs


def mp_matching(weights: np.ndarray, available: np.ndarray, *, rng: np.random.Generator,
                blossom_max_edges: int = BLOSSOM_MAX_EDGES,
                blossom_max_nodes: int = BLOSSOM_MAX_NODES,
                top_k: int = HOT_TOP_K) -> tuple[list[tuple[int, int]], bool]:
    """One matching round of Algorithm 1 line 14 over the available servers.

    Parameters
    ----------
    weights : numpy.ndarray
        Symmetric ``n x n`` pair weights (discounted MP bytes), zero diagonal.
    available : numpy.ndarray of bool
        Servers with a free interface.
    rng : numpy.random.Generator
        Tie-breaks of the greedy completion.
    blossom_max_edges, blossom_max_nodes, top_k : int, optional
        Candidate-graph limits (module docstring).

    Returns
    -------
    pairs : list of (int, int)
        Matched server pairs (only pairs of positive weight).
    exact : bool
        Whether Blossom saw every positive pair (the matching is then a maximum-weight
        matching of the round).
    """
    idx = np.flatnonzero(available)
    if idx.size < 2:
        return [], True
    w = weights[np.ix_(idx, idx)]
    pos = w > 0
    np.fill_diagonal(pos, False)
    iu, ju = np.nonzero(np.triu(pos, 1))
    exact = iu.size <= blossom_max_edges
    if not exact:
        # Hot pairs: among each server's top_k, those above its median positive weight.
        masked = np.where(pos, w, np.nan)
        with np.errstate(all="ignore"):
            base = np.nan_to_num(np.nanmedian(masked, axis=1), nan=0.0)
        k = min(top_k, idx.size - 1)
        top = np.argpartition(-np.nan_to_num(masked, nan=-np.inf), k - 1, axis=1)[:, :k]
        rows = np.repeat(np.arange(idx.size), k)
        cols = top.ravel()
        keep = pos[rows, cols] & (w[rows, cols] > base[rows] * (1 + _HOT_RTOL))
        a, b = np.minimum(rows[keep], cols[keep]), np.maximum(rows[keep], cols[keep])
        pairs_u = np.unique(a * idx.size + b)
        iu, ju = pairs_u // idx.size, pairs_u % idx.size
    matched: list[tuple[int, int]] = []
    if iu.size:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        adj = coo_matrix((np.ones(iu.size), (iu, ju)), shape=(idx.size, idx.size))
        ncomp, label = connected_components(adj, directed=False)
        node_count = np.bincount(label, minlength=ncomp)
        small = node_count[label[iu]] <= blossom_max_nodes
        if small.any():
            matched += _blossom(w, iu[small], ju[small])
        if (~small).any():
            exact = False
            big_nodes = np.isin(label, np.flatnonzero(node_count > blossom_max_nodes))
            sub = np.zeros_like(w)
            sub[iu[~small], ju[~small]] = w[iu[~small], ju[~small]]
            sub = sub + sub.T
            matched += _greedy(sub, big_nodes, np.zeros_like(w))
    free = np.ones(idx.size, dtype=bool)
    for a, b in matched:
        free[a] = free[b] = False
    if free.sum() >= 2:
        noise = rng.random((idx.size, idx.size)) * 1e-9
        noise = np.triu(noise, 1)
        noise = noise + noise.T
        matched += _greedy(w, free, noise)
    return [(int(idx[a]), int(idx[b])) for a, b in matched], exact
