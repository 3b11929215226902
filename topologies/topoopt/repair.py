"""Filling free interfaces and the connectivity repair (TopoOpt App. E.4, OWAN).

Links are kept as a mutable :class:`LinkSet` (directed links with a kind: AllReduce
ring, MP matching, fill, repair) while a topology is being built.

Why repairs keep the degree and work
------------------------------------
Every server ends with as many outgoing as incoming links (``d`` each).  In such a
balanced directed multigraph every link lies on a directed cycle, so each weakly
connected piece is strongly connected.  The OWAN two-edge replacement (Jin et al.,
SIGCOMM'16; Algorithm 5 line 21) removes a link ``a -> b`` of one piece and
``c -> d`` of another and adds ``a -> d`` and ``c -> b``: degrees are unchanged and
the two pieces become one strongly connected piece (any path that used ``a -> b``
now goes ``a -> d ~> c -> b``: ``d`` reaches ``c`` because ``c -> d`` lay on a cycle,
and symmetrically).  Links of AllReduce rings are replaced only when a piece has no
other link, so CoinChangeMod routes usually survive.
"""

from __future__ import annotations

import numpy as np

from codesign.errors import InfeasibleError

__all__ = ["LinkSet", "RING", "MP", "FILL", "REPAIR", "KIND_NAMES", "fill_interfaces",
           "connect_pieces"]

RING, MP, FILL, REPAIR = 0, 1, 2, 3
KIND_NAMES = ("allreduce", "mp", "fill", "repair")


class LinkSet:
    """Growable list of directed links ``src -> dst`` with a kind (``RING`` ...)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._kind: list[np.ndarray] = []
        self._cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, src, dst, kind: int) -> None:
        s = np.atleast_1d(np.asarray(src, dtype=np.int64)).ravel()
        d = np.atleast_1d(np.asarray(dst, dtype=np.int64)).ravel()
        self._src.append(s)
        self._dst.append(d)
        self._kind.append(np.full(s.size, kind, dtype=np.int8))
        self._cache = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(src, dst, kind)`` arrays (copies are not made; do not modify)."""
        if self._cache is None:
            if self._src:
                self._cache = (np.concatenate(self._src), np.concatenate(self._dst),
                               np.concatenate(self._kind))
            else:
                z = np.zeros(0, dtype=np.int64)
                self._cache = (z, z.copy(), np.zeros(0, dtype=np.int8))
            self._src, self._dst, self._kind = [self._cache[0]], [self._cache[1]], \
                [self._cache[2]]
        return self._cache

    def replace(self, src: np.ndarray, dst: np.ndarray, kind: np.ndarray) -> None:
        self._src, self._dst, self._kind = [src], [dst], [kind]
        self._cache = None

    def out_degree(self) -> np.ndarray:
        return np.bincount(self.arrays()[0], minlength=self.n)

    def in_degree(self) -> np.ndarray:
        return np.bincount(self.arrays()[1], minlength=self.n)


def fill_interfaces(links: LinkSet, spare_tx: np.ndarray, spare_rx: np.ndarray,
                    rng: np.random.Generator) -> None:
    """Use every free transmit and receive interface (Algorithm 5 keeps allocating
    while some pair has both; with no demand left the choice is arbitrary, here
    random with ``rng``).

    Free transmit stubs are paired with free receive stubs in random order; pairs that
    would be self-loops are swapped with other pairs.  When only one server ``s`` has
    free interfaces, each free (tx, rx) pair of ``s`` is spliced into an existing link
    ``u -> v`` (not a ring link if possible): ``u -> s -> v`` replaces it, keeping
    every other server's degree.
    """
    tx = np.repeat(np.arange(links.n), spare_tx)
    rx = np.repeat(np.arange(links.n), spare_rx)
    if tx.size != rx.size:
        raise InfeasibleError(f"free transmit ({tx.size}) and receive ({rx.size}) "
                              "interfaces differ")
    if tx.size == 0:
        return
    tx = tx[rng.permutation(tx.size)]
    rx = rx[rng.permutation(rx.size)]
    bad = np.flatnonzero(tx == rx)
    lone: list[int] = []
    for i in bad.tolist():
        if tx[i] != rx[i]:
            continue
        ok = np.flatnonzero((tx != rx[i]) & (rx != tx[i]))
        if ok.size:
            j = int(ok[rng.integers(ok.size)])
            rx[i], rx[j] = rx[j], rx[i]
        else:
            lone.append(i)
    keep = np.ones(tx.size, dtype=bool)
    keep[lone] = False
    links.add(tx[keep], rx[keep], FILL)
    if not lone:
        return
    src, dst, kind = (a.copy() for a in links.arrays())
    for i in lone:
        s = int(tx[i])
        cand = np.flatnonzero((src != s) & (dst != s) & (kind != RING))
        if cand.size == 0:
            cand = np.flatnonzero((src != s) & (dst != s))
        if cand.size == 0:
            raise InfeasibleError(f"server {s} has free interfaces and no link to splice into")
        e = int(cand[rng.integers(cand.size)])
        v = int(dst[e])
        dst[e] = s
        kind[e] = FILL
        src = np.append(src, s)
        dst = np.append(dst, v)
        kind = np.append(kind, np.int8(FILL))
    links.replace(src, dst, kind)


def connect_pieces(links: LinkSet, rng: np.random.Generator) -> int:
    """Merge weakly connected pieces by two-edge replacement (module docstring).

    Returns the number of replacements made.  Requires every server to have equal
    in- and out-degree (checked).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    src, dst, kind = (a.copy() for a in links.arrays())
    n = links.n
    if not np.array_equal(np.bincount(src, minlength=n), np.bincount(dst, minlength=n)):
        raise InfeasibleError("connectivity repair needs equal in- and out-degrees")
    adj = coo_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    ncomp, label = connected_components(adj, directed=True, connection="weak")
    if ncomp == 1:
        return 0
    sizes = np.bincount(label, minlength=ncomp)
    main = int(np.argmax(sizes))
    in_main = label == main
    done = 0
    for comp in np.argsort(-sizes, kind="stable").tolist():
        if comp == main:
            continue
        pick = []
        for which in (in_main[src], label[src] == comp):
            cand = np.flatnonzero(which & (kind != RING))
            if cand.size == 0:
                cand = np.flatnonzero(which)
            if cand.size == 0:
                raise InfeasibleError(f"server piece {comp} has no link to replace")
            pick.append(int(cand[rng.integers(cand.size)]))
        e1, e2 = pick
        b, d = int(dst[e1]), int(dst[e2])
        dst[e1], dst[e2] = d, b            # a -> d and c -> b
        kind[e1] = kind[e2] = REPAIR
        in_main |= label == comp
        label[label == comp] = main
        done += 1
    links.replace(src, dst, kind)
    return done
