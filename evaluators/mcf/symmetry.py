"""Symmetry classes of NPUs for Mirrored Dantzig-Wolfe (thesis Sec. 5.2, "Symmetry").

Two vertices ``g1, g2`` are *indistinguishable* when some bijection ``chi`` of
the vertices maps ``g1`` to ``g2`` and preserves the edges, the vertex roles
(origins, destinations, nodes that store, copy or reduce), the edge costs and
the bandwidth of every bandwidth set ``L`` (thesis Sec. 5.2, the four
conditions).  The classes of the *Symmetry Partition* are the orbits of the
group ``H`` of such bijections, and Lemma 6's functions ``pi(., i)`` are one
element ``h_i`` of ``H`` per class member with ``h_i(rep) = member_i``.

How we find them without enumerating ``H``:

1. **Colour refinement** (1-dimensional Weisfeiler-Leman) of the labelled
   graph: vertices start with their role, and are repeatedly recoloured by
   their colour and the multiset of (link signature, neighbour colour) over
   in- and out-links, where a link signature is the multiset of (bandwidth,
   cost) of the parallel links of a pair.  Vertices in one orbit end with
   equal colours, so NPUs of different colours are in different classes.
2. **Individualise and refine** (the classic search of graph-automorphism
   tools): to test whether member ``m`` is in the orbit of the class
   representative ``r``, give ``r`` in one copy of the colouring and ``m`` in
   another the same new colour, refine both jointly, and, while some colour
   class has several vertices, individualise its first vertex against each
   candidate of the same class in the other copy (backtracking, at most
   :data:`SEARCH_BUDGET` leaves); a discrete leaf is a candidate map.
   **Orbit closure**: every automorphism found is kept as a generator and the
   representative's orbit is closed under all of them (composing maps), so a
   member already reached needs no search -- a vertex-transitive graph such
   as ``dgx-a100:16`` (128 GPUs) needs a handful of searches (0.7 s).  NPUs
   not reached start a new class (the search repeats on them).
3. Every map found is **verified** on the arrays (links onto links with equal
   bandwidth and cost, roles, link groups onto link groups with equal
   bandwidth) before it is used; a map that fails is not used (the NPU gets
   its own class), so a wrong symmetry can cost speed, never correctness.

Links: the node map induces a link map (parallel links of a pair are matched
in order of (bandwidth, cost, id)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Automorphism", "SymmetryClasses", "npu_classes"]


@dataclass(frozen=True)
class Automorphism:
    """One element of ``H``: node permutation and the link permutation it induces."""

    node: np.ndarray      # node[v] = h(v)
    link: np.ndarray      # link[l] = h(l)

    def compose_inverse(self, other: "Automorphism") -> "Automorphism":
        """``self o other^-1`` (maps ``other``'s image back, then applies ``self``)."""
        inv_n = np.empty_like(other.node)
        inv_n[other.node] = np.arange(other.node.size)
        inv_l = np.empty_like(other.link)
        inv_l[other.link] = np.arange(other.link.size)
        return Automorphism(self.node[inv_n], self.link[inv_l])


@dataclass(frozen=True)
class SymmetryClasses:
    """The Symmetry Partition of a set of NPUs with Lemma 6's maps.

    Attributes
    ----------
    classes : list of list of (int, Automorphism)
        Per class: ``(member, h)`` pairs with ``h(representative) = member``;
        the first pair is the representative with the identity.
    """

    classes: list
    n_nodes: int = 0
    n_links: int = 0

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def class_of(self) -> dict[int, tuple[int, int]]:
        """NPU -> (class index, position in its class)."""
        return {m: (k, i) for k, cl in enumerate(self.classes) for i, (m, _) in enumerate(cl)}


def _identity(n: int, L: int) -> Automorphism:
    return Automorphism(np.arange(n, dtype=np.int64), np.arange(L, dtype=np.int64))


def _link_signatures(src, dst, bw, cost, n):
    """Per ordered pair: signature (sorted (bw, cost) tuple) and links in matching order."""
    pairs: dict[tuple[int, int], list[int]] = {}
    for l in np.lexsort((np.arange(src.size), cost, bw, dst, src)).tolist():
        pairs.setdefault((int(src[l]), int(dst[l])), []).append(l)
    sig = {k: tuple((float(bw[l]), float(cost[l])) for l in v) for k, v in pairs.items()}
    return pairs, sig


def _verify(h: np.ndarray, src, dst, bw, cost, labels, pairs, groups):
    """Link permutation induced by node map ``h`` if ``h`` preserves everything, else None."""
    if sorted(h.tolist()) != list(range(h.size)):
        return None
    if any(labels[int(h[v])] != labels[v] for v in range(h.size)):
        return None
    link = np.full(src.size, -1, dtype=np.int64)
    for (u, v), ls in pairs.items():
        img = pairs.get((int(h[u]), int(h[v])))
        if img is None or len(img) != len(ls):
            return None
        for a, b in zip(ls, img):
            if bw[a] != bw[b] or cost[a] != cost[b]:
                return None
            link[a] = b
    if (link < 0).any():
        return None
    gset = {frozenset(g): b for g, b in groups}
    for g, b in groups:
        if gset.get(frozenset(int(link[x]) for x in g)) != b:
            return None
    return link


class _Refiner:
    """Joint colour refinement of two colourings of one graph (module docstring, step 1).

    Multisets of (link signature, neighbour colour) are hashed as sums of
    fixed random 64-bit words; a collision can only merge colours, which at
    worst makes a search fail (the NPU then gets its own class) -- every map
    is verified before use.
    """

    def __init__(self, n, pairs, sig):
        self.n = n
        keys = sorted(pairs)
        sig_id: dict = {}
        self.u = np.array([k[0] for k in keys], dtype=np.int64)
        self.v = np.array([k[1] for k in keys], dtype=np.int64)
        self.s = np.array([sig_id.setdefault(sig[k], len(sig_id)) for k in keys], dtype=np.int64)
        rng = np.random.default_rng(12345)
        self.word = rng.integers(1, 2 ** 62, size=(max(len(sig_id), 1), 2 * n + 2),
                                 dtype=np.int64).astype(np.uint64)

    def refine(self, a: np.ndarray, b: np.ndarray):
        """Refine colourings ``a``, ``b`` (same colour ids) to stability; None if they differ."""
        n = self.n
        while True:
            both = np.concatenate([a, b])
            k_out = np.zeros(2 * n, dtype=np.uint64)
            k_in = np.zeros(2 * n, dtype=np.uint64)
            for off, c in ((0, a), (n, b)):
                np.add.at(k_out, off + self.u, self.word[self.s, c[self.v]])
                np.add.at(k_in, off + self.v, self.word[self.s, n + 1 + c[self.u]])
            keys = np.stack([both.astype(np.uint64), k_out, k_in], axis=1)
            uniq, inv = np.unique(keys, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            na, nb = inv[:n], inv[n:]
            if not np.array_equal(np.bincount(na, minlength=uniq.shape[0]),
                                  np.bincount(nb, minlength=uniq.shape[0])):
                return None
            done = uniq.shape[0] == np.unique(both).size
            a, b = na, nb
            if done:
                return a, b


def _search(ref: _Refiner, a, b, check, budget: list):
    """Individualise-and-refine search for a map sending colouring ``a`` onto ``b``."""
    r = ref.refine(a, b)
    if r is None:
        return None
    a, b = r
    counts = np.bincount(a)
    if counts.max() == 1:
        h = np.empty(ref.n, dtype=np.int64)
        order_b = np.argsort(b)
        h[np.arange(ref.n)] = order_b[a]
        budget[0] -= 1
        return check(h)
    cell = int(np.flatnonzero(counts > 1)[np.argmin(counts[counts > 1])])
    v = int(np.flatnonzero(a == cell)[0])
    new = int(max(a.max(), b.max())) + 1
    for u in np.flatnonzero(b == cell).tolist():
        if budget[0] <= 0:
            return None
        a2, b2 = a.copy(), b.copy()
        a2[v] = new
        b2[u] = new
        out = _search(ref, a2, b2, check, budget)
        if out is not None:
            return out
    return None


#: Leaves of the individualise-and-refine search tried per member before giving up.
SEARCH_BUDGET = 64


def npu_classes(n_nodes: int, src: np.ndarray, dst: np.ndarray, bandwidth: np.ndarray,
                link_cost: np.ndarray, node_labels: list, members: list[int],
                groups=()) -> SymmetryClasses:
    """Symmetry Partition of ``members`` (module docstring).

    Parameters
    ----------
    n_nodes : int
    src, dst : ndarray of int
        Directed links.
    bandwidth, link_cost : ndarray
        Per link (compared exactly).
    node_labels : list of hashable
        Role of every node (participant, stores, copies, reduces...).
    members : list of int
        The NPUs to partition (the origins).
    groups : sequence of (sequence of int, float)
        Extra bandwidth sets that must map onto sets of equal bandwidth.

    Returns
    -------
    SymmetryClasses

    Notes
    -----
    Orbits are closed under the maps already found (a member reached by
    composing found automorphisms needs no search), so a vertex-transitive
    graph needs only about as many searches as its group has generators.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    bw = np.asarray(bandwidth, dtype=float)
    cost = np.asarray(link_cost, dtype=float)
    labels = [tuple(x) if isinstance(x, (tuple, list)) else (x,) for x in node_labels]
    groups = [(tuple(int(x) for x in g), float(b)) for g, b in groups]
    pairs, sig = _link_signatures(src, dst, bw, cost, n_nodes)
    ref = _Refiner(n_nodes, pairs, sig)
    table: dict = {}
    base = np.array([table.setdefault(x, len(table)) for x in labels], dtype=np.int64)
    r = ref.refine(base, base.copy())
    colours = r[0] if r is not None else base
    ident = _identity(n_nodes, src.size)
    gens: list[Automorphism] = []

    def check(h):
        link = _verify(h, src, dst, bw, cost, labels, pairs, groups)
        return None if link is None else Automorphism(h, link)

    def close(rep, maps):
        """Orbit of ``rep`` under ``gens`` with a map per point (BFS, composing)."""
        frontier = list(maps)
        while frontier:
            nxt = []
            for m in frontier:
                for g in gens:
                    t = int(g.node[m])
                    if t not in maps:
                        h = maps[m]
                        maps[t] = Automorphism(g.node[h.node], g.link[h.link])
                        nxt.append(t)
            frontier = nxt

    classes = []
    member_set = [int(m) for m in members]
    pool_by_colour: dict[int, list[int]] = {}
    for m in member_set:
        pool_by_colour.setdefault(int(colours[m]), []).append(m)
    for pool in pool_by_colour.values():
        while pool:
            rep = pool[0]
            maps = {rep: ident}
            close(rep, maps)
            left = []
            for m in pool[1:]:
                if m in maps:
                    continue
                a, b = colours.copy(), colours.copy()
                new = int(colours.max()) + 1
                a[rep] = new
                b[m] = new
                found = _search(ref, a, b, check, [SEARCH_BUDGET])
                if found is None:
                    left.append(m)
                    continue
                gens.append(found)
                maps[m] = found
                close(rep, maps)
            in_pool = set(pool)
            classes.append([(m, maps[m]) for m in pool if m in maps and m in in_pool])
            taken = {m for m, _ in classes[-1]}
            pool = [m for m in pool if m not in taken]
    return SymmetryClasses(classes, int(n_nodes), int(src.size))
