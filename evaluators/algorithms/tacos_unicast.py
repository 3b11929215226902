"""TACOS link-chunk matching for unicast collectives: scatter, gather, all-to-all.

Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for
Distributed Machine Learning" (MICRO 2024) synthesizes spreads (all-gather,
broadcast) by greedy link-chunk matching on the time-expanded network (TEN,
Section VI-A); :func:`evaluators.algorithms.tacos.greedy_match` implements
it.  Scatter, gather and all-to-all differ: every chunk starts at one node and
must reach exactly *one* other node, and the nodes in between only relay it.
A request "destination wants chunk" (Fig. 15(b), backtracking from the
requesting NPU) is therefore not enough: a relay never requests the chunk.
:func:`unicast_match` keeps the rest of the method and drives the matching
from the chunk's side instead:

* **Event driven** (Section VI-A, the TEN steps of time clustering): events
  are time 0 and every chunk arrival; at each event every free logical link
  may take one chunk its source node holds.
* **Useful links.**  A link ``u -> w`` is useful for chunk ``c`` at ``u``
  only if it brings ``c`` strictly closer to its destination ``d``:
  ``dist[w, d] < dist[u, d]``, ``dist`` being the *time* distance over the
  logical links, each weighted by its TEN length ``latency + chunk_bytes /
  bandwidth``.  Distances strictly decrease along every chunk's path, so no
  chunk loops, and the next hop of a shortest path is always useful.
* **Earliest delivery** (Section VI-B, shorter-link-first matching): among
  its useful links a chunk at ``u`` takes the one with the earliest estimated
  delivery at its destination ``d``::

      max(t, free_at[l]) + backlog[l] + dur[l] + wait[w, d] + dist[w, d]

  ``backlog[l]`` is the link's expected queue at ``u``: every other chunk
  waiting at ``u`` counts ``1 / (its number of useful links)`` on each of them,
  times ``dur[l]``; it steers chunks that have alternatives away from links
  that other chunks depend on (a scatter root's slow link that the shards of
  its own row must take).  ``wait[w, d]`` looks one hop ahead: the chunks
  already at (or on their way to) ``w`` with the same destination, times the
  seconds per chunk of ``w``'s useful links towards ``d``.  Busy links are
  candidates too: when a busy link still delivers earlier than every free one
  (a fast link that frees soon versus a slow detour) the chunk waits for it.
  The estimate of a free link grows with ``t`` and that of a busy link does
  not, so a waiting chunk keeps waiting until its link frees: a node is
  visited again only when one of its links frees or a chunk arrives.
* **Order.**  The paper visits requests in a random order (Fig. 15(c), the
  source of its jitter, Section VI-C).  Here the chunks at a node are shuffled
  (``rng``) and then, by default, stably sorted farthest-first (largest
  remaining time distance), the critical-path rule of list scheduling: with
  purely random order a scatter root often sends its nearest shard first and
  its farthest last (``order="random"`` keeps the paper's order; measured on
  rings, meshes, tori, ``dgx1`` and permutation graphs it was 10-50% slower
  on scatters and up to 30% on all-to-alls).  Ties between equally
  good links follow a random link order.
* **Link model** (docs/architecture.md section 5): a link carries one chunk at a time for
  ``latency + chunk_bytes / bandwidth``; a chunk is forwarded only after it
  has fully arrived (Section VI-B, arrival time analysis).  Each chunk moves
  along one path (no copies), so chunk replacement (Section VI-B) never
  arises.

Gather is synthesized as the time reversal of a scatter on the transposed
logical network, the duality TACOS uses for reduce and broadcast (Fig. 17):
the root's ingress is the bottleneck, and the reversed scatter decides the
root's links first, with every chunk still available, instead of last.  Each
transposed transfer ``w -> u`` during ``[s, e]`` becomes ``u -> w`` during
``[T - e, T - s]`` on the original link; hops of a chunk stay ordered
(store-and-forward) and links stay exclusive.  On ``mesh:4x4`` with unequal
dimension bandwidths the forward gather was up to 1.6x slower.

Relays may be any node of the logical network: participants, NPUs outside the
collective and, through unwound switch links
(:func:`evaluators.algorithms.unwind.unwind`), the NPUs around a switch.  One
node holds a chunk at any time.

Cost: one Dijkstra per distinct destination (:func:`scipy.sparse.csgraph.dijkstra`),
then per event and visited node at most one numpy pass per free out-link over
the node's waiting chunks.  A 64-NPU all-to-all on ``torus:4x4x4`` (4032
chunks, 12288 hops) takes about a second.

Quality (time / :func:`evaluators.bounds.lower_bound`, 64 MB, 1-4 chunks
per NPU, seeds 0-3): all-to-all 1.0-1.26 on rings, meshes, tori, ``dgx1``
and permutation graphs (``direct``: 1.25-7.8); scatter and gather 1.0-1.1 on
homogeneous rings, meshes and tori, up to 1.7 on ``dgx1`` and 1.6 on meshes
and tori with unequal dimension bandwidths with one chunk per NPU (less with
more chunks).  The useful-link rule allows only paths that approach the
destination at every hop, and the estimates look one hop ahead, so the
greedy can overload one slow link that a global plan would spread: gather on
``mesh:3x3,bw=10GB/s:50GB/s`` is about 1.2x slower than ``direct`` (whose
x-then-y routes happen to balance the slow x links there).
"""

from __future__ import annotations

import heapq

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_choice
from evaluators.algorithms.unwind import LogicalLinks
from evaluators.collectives import Collective

__all__ = ["unicast_match", "tacos_unicast_match", "UNICAST_KINDS", "ORDERS"]

#: Collective kinds whose chunks each go from one node to one other node.
UNICAST_KINDS = ("scatter", "gather", "alltoall")

#: Orders in which the chunks waiting at a node are considered.
ORDERS = ("farthest", "random")

#: Relative tolerance under which two delivery estimates count as a tie.
_TIE = 1e-9


def _time_distances(links: LogicalLinks, n_nodes: int, dur: np.ndarray,
                    targets: np.ndarray) -> np.ndarray:
    """``dist[v, j]``: shortest time from node ``v`` to node ``targets[j]``, seconds.

    Parallel links count once, with their shortest duration (a sparse matrix
    would sum them).
    """
    order = np.lexsort((dur, links.dst, links.src))
    s, d, w = links.src[order], links.dst[order], dur[order]
    first = np.ones(s.size, dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    # Reversed graph: distances *to* each target are distances *from* it there.
    rev = csr_matrix((w[first], (d[first], s[first])), shape=(n_nodes, n_nodes))
    return dijkstra(rev, directed=True, indices=targets).T


class _Matcher:
    """State of one :func:`unicast_match` run (module docstring)."""

    def __init__(self, links: LogicalLinks, n_nodes: int, src: np.ndarray, dst: np.ndarray,
                 moving: np.ndarray, chunk_bytes: float, rng: np.random.Generator,
                 order: str) -> None:
        self.rng, self.farthest = rng, order == "farthest"
        self.dst = dst
        self.lsrc, self.ldst = links.src, links.dst
        self.dur = links.latency + chunk_bytes / links.bandwidth     # TEN length, s
        targets, self.target_of = np.unique(dst, return_inverse=True)
        self.dist = _time_distances(links, n_nodes, self.dur, targets)   # (nodes, targets), s
        far = ~np.isfinite(self.dist[src[moving], self.target_of[moving]])
        if far.any():
            c = int(moving[np.flatnonzero(far)[0]])
            raise InfeasibleError(f"tacos: chunk {c} cannot reach node {int(dst[c])} from node "
                                  f"{int(src[c])}: no path over the (unwound) links")
        # Strictly closer by more than a hair: float sums must not let a chunk
        # bounce between two nodes at the same distance.
        self.eps = 1e-6 * float(self.dur.min())
        useful = self.dist[self.ldst] < self.dist[self.lsrc] - self.eps   # (links, targets)
        rate = np.zeros((n_nodes, targets.size))                          # chunks/s
        np.add.at(rate, self.lsrc, np.where(useful, 1.0 / self.dur[:, None], 0.0))
        self.per = np.divide(1.0, rate, out=np.zeros_like(rate), where=rate > 0)  # s/chunk
        self.queue = np.zeros((n_nodes, targets.size))    # chunks at or bound for a node
        np.add.at(self.queue, (src[moving], self.target_of[moving]), 1.0)
        by_src = np.argsort(self.lsrc, kind="stable")
        ptr = np.searchsorted(self.lsrc[by_src], np.arange(n_nodes + 1))
        self.outs = [by_src[ptr[u]:ptr[u + 1]] for u in range(n_nodes)]
        self.free_at = np.zeros(len(links))               # s
        self.waiting: list[list[int]] = [[] for _ in range(n_nodes)]
        for c in moving.tolist():
            self.waiting[int(src[c])].append(c)
        self.pending: list = []                           # heap (end, seq, chunk, link)
        self.rows: list[tuple[int, int, float, float]] = []

    def run(self, touched: set[int], remaining: int):
        t = 0.0
        while remaining:
            for u in sorted(touched):
                if self.waiting[u] and (self.free_at[self.outs[u]] <= t).any():
                    self._visit(u, t)
            if not self.pending:
                # Unreachable after the distance check: every waiting chunk has
                # a useful link (its shortest path's next hop) and takes it when free.
                c = next(c for w in self.waiting for c in w)
                raise InfeasibleError(f"tacos: chunk {c} is stuck before reaching node "
                                      f"{int(self.dst[c])}")
            t = self.pending[0][0]
            touched = set()
            while self.pending and self.pending[0][0] <= t:
                _, _, c, l = heapq.heappop(self.pending)
                v = int(self.ldst[l])
                touched.add(int(self.lsrc[l]))
                if v == self.dst[c]:
                    remaining -= 1
                else:
                    self.waiting[v].append(c)
                    touched.add(v)
        return self.rows

    def _visit(self, u: int, t: float) -> None:
        """Match the free out-links of node ``u`` at time ``t`` to its waiting chunks."""
        rng, dist, dur = self.rng, self.dist, self.dur
        out = self.outs[u]
        out = out[rng.permutation(out.size)]                 # random tie-break among links
        free = self.free_at[out] <= t
        chunks = np.asarray(self.waiting[u], dtype=np.int64)
        chunks = chunks[rng.permutation(chunks.size)]
        if self.farthest:
            chunks = chunks[np.argsort(-dist[u, self.target_of[chunks]], kind="stable")]
        tj = self.target_of[chunks]
        nxt = self.ldst[out]
        rest = dist[nxt][:, tj].T                            # (chunks, links) after the hop, s
        useful = rest < dist[u, tj][:, None] - self.eps
        rest = rest + (self.queue[nxt] * self.per[nxt])[:, tj].T
        cost = np.where(useful, dur[out] + rest, np.inf)
        ready = np.maximum(self.free_at[out], t)             # next possible start per link, s
        share = useful / useful.sum(axis=1, keepdims=True)
        load = share.sum(axis=0)
        d_out = dur[out]
        taken = []
        first = 0
        while first < chunks.size:
            # The first chunk (in order) whose earliest delivery is through a
            # free link takes it; the chunks before it wait for busy links.
            e = ready + cost[first:] + (load - share[first:]) * d_out
            best = e.min(axis=1)
            go = (e <= best[:, None] * (1 + _TIE)) & free & np.isfinite(best)[:, None]
            rows = np.flatnonzero(go.any(axis=1))
            if rows.size == 0:
                break
            i = first + int(rows[0])
            k = int(np.argmax(go[rows[0]]))
            l, c = int(out[k]), int(chunks[i])
            end = t + float(dur[l])
            self.free_at[l] = ready[k] = end
            load -= share[i]
            free[k] = False
            self.queue[u, tj[i]] -= 1
            if nxt[k] != self.dst[c]:
                self.queue[nxt[k], tj[i]] += 1
            heapq.heappush(self.pending, (end, len(self.rows), c, l))
            self.rows.append((c, l, t, end))
            taken.append(c)
            first = i + 1
            if not free.any():
                break
        if taken:
            gone = set(taken)
            self.waiting[u] = [c for c in self.waiting[u] if c not in gone]


def unicast_match(links: LogicalLinks, n_nodes: int, sources, dests, chunk_bytes: float,
                  rng: np.random.Generator, *, order: str = "farthest"):
    """Link-chunk matching for chunks that each go from one node to one node.

    Parameters
    ----------
    links : LogicalLinks
        Point-to-point links (after unwinding switches).
    n_nodes : int
        Number of nodes; node ids of ``links``, ``sources`` and ``dests`` are
        below it.
    sources, dests : array_like of int, shape (n_chunks,)
        Node holding chunk ``c`` at time 0 and node that must receive it.
        Chunks with ``sources[c] == dests[c]`` need no transfer.
    chunk_bytes : float
        Bytes per chunk (> 0).
    rng : numpy.random.Generator
        Source of the random chunk and tie-break orders.
    order : {"farthest", "random"}, optional
        Order of the chunks waiting at a node: shuffled, then farthest-first
        (default), or shuffled only (the paper's random order).

    Returns
    -------
    tuple of ndarray
        ``(chunk, link, start, end)`` per transfer (logical link ids,
        seconds), in start-time order; each chunk's transfers form one path
        from its source to its destination.

    Raises
    ------
    InvalidSpecError
        If the arrays have different lengths or hold a node id out of range,
        ``chunk_bytes`` is not a positive number or ``order`` is unknown.
    InfeasibleError
        If some chunk's destination cannot be reached from its source.

    Notes
    -----
    Module docstring: event driven, each free link takes at most one chunk,
    a link is useful only if it brings the chunk strictly closer (in time
    distance) to its destination, and the chunk takes the useful link that
    delivers it earliest, possibly waiting for a busy one.  Cost: one
    Dijkstra per distinct destination, an ``n_nodes x destinations`` distance
    matrix, then about ``hops * degree`` numpy passes.

    Examples
    --------
    >>> from topologies.families.multidim import ring
    >>> from evaluators.algorithms.unwind import unwind
    >>> links = unwind(ring(4, bandwidth=1e9, latency=0.0))
    >>> c, l, s, e = unicast_match(links, 4, [0], [2], 1e9, np.random.default_rng(0))
    >>> e.tolist()      # two hops of 1 s each, the second after the first
    [1.0, 2.0]
    """
    src = np.asarray(sources, dtype=np.int64).ravel()
    dst = np.asarray(dests, dtype=np.int64).ravel()
    if src.shape != dst.shape:
        raise invalid("unicast dests", f"{dst.size} entries",
                      f"one destination per source ({src.size})")
    for name, arr in (("unicast sources", src), ("unicast dests", dst)):
        if arr.size and (arr.min() < 0 or arr.max() >= n_nodes):
            bad = int(arr[(arr < 0) | (arr >= n_nodes)][0])
            raise invalid(name, bad, f"node ids in 0..{n_nodes - 1}")
    chunk_bytes = float(chunk_bytes)
    if not np.isfinite(chunk_bytes) or chunk_bytes <= 0:
        raise invalid("chunk bytes", chunk_bytes, "a finite number of bytes > 0")
    check_choice("unicast order", order, ORDERS)
    moving = np.flatnonzero(src != dst)
    if moving.size == 0:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    m = _Matcher(links, n_nodes, src, dst, moving, chunk_bytes, rng, order)
    rows = m.run(set(np.unique(src[moving]).tolist()), int(moving.size))
    chunk, lid, start, end = (np.asarray(x) for x in zip(*rows))
    by_time = np.lexsort((end, start))
    return (chunk.astype(np.int64)[by_time], lid.astype(np.int64)[by_time],
            start.astype(np.float64)[by_time], end.astype(np.float64)[by_time])


def _endpoints(collective: Collective) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination node of every chunk, from the pre/postconditions."""
    pre, post = collective.precondition(), collective.postcondition()
    n = collective.n_chunks
    src = np.fromiter((next(iter(pre[c])) for c in range(n)), dtype=np.int64, count=n)
    dst = np.fromiter((next(iter(post[c])) for c in range(n)), dtype=np.int64, count=n)
    return src, dst


def tacos_unicast_match(topology, collective: Collective, links: LogicalLinks,
                        rng: np.random.Generator):
    """TACOS scatter, gather or all-to-all as ``(chunk, link, start, end)`` arrays.

    Parameters
    ----------
    topology : topologies.Topology
        The network (only ``n_nodes`` is used; the links are ``links``).
    collective : Collective
        ``scatter``, ``gather`` or ``alltoall``, on all NPUs or a subset;
        any ``chunks_per_npu``.
    links : LogicalLinks
        ``unwind(topology, degree)``.
    rng : numpy.random.Generator
        Source of the random orders (same state, same transfers).

    Returns
    -------
    tuple of ndarray
        ``(chunk, link, start, end)`` per transfer on the logical links
        (seconds), in start-time order, like
        :func:`evaluators.algorithms.tacos.greedy_match`; every transfer is a
        COPY.

    Raises
    ------
    InvalidSpecError
        If the collective is not a unicast kind.
    InfeasibleError
        If some chunk cannot reach its destination.
    """
    check_choice("collective for tacos unicast matching", collective.kind, UNICAST_KINDS)
    src, dst = _endpoints(collective)
    if collective.kind != "gather":
        return unicast_match(links, topology.n_nodes, src, dst, collective.chunk_bytes, rng)
    # Gather: a scatter from the root on the transposed links, reversed in time
    # (module docstring).  Reachability is checked forwards for a clear message.
    dur = links.latency + collective.chunk_bytes / links.bandwidth
    to_root = _time_distances(links, topology.n_nodes, dur, np.array([collective.root]))[:, 0]
    cut_off = [p for p in collective.npus if not np.isfinite(to_root[p])]
    if cut_off:
        raise InfeasibleError(f"tacos: NPU {cut_off[0]} cannot reach the gather root "
                              f"{collective.root}: no path over the (unwound) links")
    chunk, lid, start, end = unicast_match(links.transposed(), topology.n_nodes, dst, src,
                                           collective.chunk_bytes, rng)
    total = float(end.max()) if end.size else 0.0
    # Transposed link l carries dst[l] -> src[l]; reversed in time it carries
    # src[l] -> dst[l], the original direction.
    new_start, new_end = total - end, total - start
    by_time = np.lexsort((new_end, new_start))
    return chunk[by_time], lid[by_time], new_start[by_time], new_end[by_time]
