"""k shortest simple paths by hop count (TopoOpt Algorithm 1 line 20, MP routing).

The paper routes MP transfers on "k-shortest paths" of the combined topology.  We
enumerate simple paths in order of hop count: for ``L = h(s, t), h(s, t) + 1, ...``
(``h`` the BFS hop matrix) a depth-first search extends a path ``s .. u`` of ``l``
hops to a neighbour ``v`` only when ``l + 1 + h(v, t) <= L`` and keeps the paths of
exactly ``L`` hops, neighbours in ascending id order.  This yields the same path
lengths as Yen's algorithm (networkx ``shortest_simple_paths``, used as the oracle
in the tests) at a fraction of the cost, because the hop matrix is computed once
for the whole topology.
"""

from __future__ import annotations

import numpy as np

__all__ = ["neighbour_lists", "k_shortest_paths", "MAX_EXTRA_HOPS"]

#: Paths at most this many hops longer than the shortest are considered.
MAX_EXTRA_HOPS = 2


def neighbour_lists(n: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Distinct out-neighbours of every node, ascending (parallel links collapse)."""
    keys = np.unique(src.astype(np.int64) * n + dst)
    out: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip((keys // n).tolist(), (keys % n).tolist()):
        out[u].append(v)
    return out


def k_shortest_paths(nbrs: list[list[int]], hops: np.ndarray, s: int, t: int, k: int, *,
                     max_extra_hops: int = MAX_EXTRA_HOPS) -> list[list[int]]:
    """Up to ``k`` simple paths ``[s, ..., t]`` with the fewest hops.

    Parameters
    ----------
    nbrs : list of list of int
        Out-neighbours (:func:`neighbour_lists`).
    hops : numpy.ndarray
        All-pairs hop counts (``-1`` unreachable), e.g. ``Topology.hop_matrix``.
    s, t : int
        Distinct endpoints.
    k : int
        Paths wanted (>= 1).
    max_extra_hops : int, optional
        Longest detour considered beyond the shortest path.

    Returns
    -------
    list of list of int
        Paths sorted by hop count; fewer than ``k`` if no more exist within
        ``h(s, t) + max_extra_hops`` hops; empty if ``t`` is unreachable.
    """
    h0 = int(hops[s, t])
    if h0 < 0 or s == t:
        return [] if s != t else [[s]]
    col = hops[:, t].tolist()
    found: list[list[int]] = []
    for limit in range(h0, h0 + max_extra_hops + 1):
        path = [s]
        on_path = {s}

        def dfs(u: int, length: int) -> None:
            budget = limit - length - 1      # hops left after the next one
            nb = nbrs[u]
            if budget == 0:
                if t in nb:
                    found.append(path + [t])
                return
            for v in nb:
                if len(found) >= k:
                    return
                hv = col[v]
                if v == t or v in on_path or hv < 0 or hv > budget:
                    continue
                path.append(v)
                on_path.add(v)
                dfs(v, length + 1)
                path.pop()
                on_path.discard(v)

        dfs(s, 0)
        if len(found) >= k:
            break
    return found
