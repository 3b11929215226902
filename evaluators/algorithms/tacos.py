"""TACOS-GREEDY collective synthesis (``--algorithm tacos``).

Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for
Distributed Machine Learning" (MICRO 2024):

* Section IV: the network is a time-expanded network (TEN); switches are
  first unwound into point-to-point links (:mod:`evaluators.algorithms.unwind`,
  option ``switch_degree``).
* Section VI-A (Fig. 15): link-chunk matching.  The synthesis is event driven:
  at each event time (time 0 and every chunk arrival) every destination with
  free incoming links repeatedly picks one of its requested chunks uniformly at
  random among those some free incoming link can provide ("choose a requested
  chunk and backtrack the NPU") and matches it to such a link; every link
  carries one chunk at a time for ``latency + chunk_bytes / bandwidth``.
* Section VI-B, heterogeneous links:

  - *shorter-link-first*: among the free candidate links of a chunk the one
    that delivers it earliest wins (ties at random);
  - *arrival time analysis*: a slow link spans several TEN steps and its chunk
    can be forwarded only after it has fully arrived (the event queue);
  - *chunk replacement*: a chunk in flight to a node is not requested again,
    unless an otherwise idle link can deliver it strictly earlier; when that
    faster copy arrives, the slower transfer is outdated and, "in lieu of
    dropping the transmission", it is replaced by a chunk its source held when
    it started and the destination still needs (not held, not in flight);
    only if there is none is it dropped and its link freed at once (option
    ``replacement``).
* Section VI-C, jitter: ``instances=K`` runs seeds ``seed .. seed+K-1`` (in
  ``workers`` processes or Ray tasks, :mod:`evaluators.algorithms.tacos_parallel`)
  and keeps the fastest schedule.

Collectives: all-gather and broadcast natively; reduce-scatter and reduce as
the time reversal of an all-gather (broadcast) synthesized on the transposed
logical network (each copy ``v -> u`` during ``[s, e]`` on the transposed
link becomes a REDUCE ``u -> v`` during ``[T-e, T-s]`` on the original link,
Section VII-A's combining/non-combining duality); all-reduce is reduce-scatter
followed by all-gather.  Scatter, gather and all-to-all (chunks with a single
destination, relayed through any node) use the unicast variant of the
matching in :mod:`evaluators.algorithms.tacos_unicast`.

Link model: without switches (or with ``switch_degree=1``) every physical link
carries one chunk at a time, ``metadata["link_model"] == "exclusive"``; with
switch degree > 1 the unwound links share switch ports at ``1/d`` bandwidth
and the schedule declares ``"shared"`` (see :mod:`~evaluators.algorithms.unwind`).
Single-hop schedules also carry ``hop_start == start``.

For the spreading collectives, participants must be able to reach each other
through participants (and switches): non-participating NPUs never store chunks; otherwise the synthesis
stalls and raises :class:`~codesign.errors.InfeasibleError`.

Implementation notes (speed): chunk sets are bitsets (one ``uint64`` word per
64 chunks) per node; an event only re-examines the links that became free or
whose source received a chunk (a free link with no candidate stays useless
until its source receives something, since requests only disappear), and the
per-destination matching runs for all destinations at once, one chunk per
destination per round (rounds <= free incoming links of a node).  The random
draws differ from a one-request-at-a-time loop but the distribution is the
same: each step picks a uniformly random chunk among those an open link can
provide.
"""

from __future__ import annotations

import heapq
from functools import partial
from itertools import chain

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.resources import check_count
from codesign.specs import check_int
from evaluators.algorithms.unwind import LogicalLinks, parse_degree, unwind
from evaluators.algorithms.tacos_unicast import UNICAST_KINDS, tacos_unicast_match
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import COPY, REDUCE, Schedule

__all__ = ["tacos", "greedy_match", "MAX_INSTANCES", "MAX_INSTANCE_TRANSFERS"]

#: Most seeded instances (Section VI-C): each is a whole greedy synthesis, ~1.7 ms even
#: on ring:8 (so 1,024 take ~2 s there); 10^5 ran for minutes and 10^9 exhausted memory
#: on the list of seeds.
MAX_INSTANCES = 1024
#: Most transfers all instances together may synthesize: 2^24 at ~1.1 us each (bench:
#: torus:8x8x8 all-gather, 261,632 transfers in 0.3 s) is about 20 s of greedy matching.
MAX_INSTANCE_TRANSFERS = 2 ** 24

_ONE = np.uint64(1)
_WORD_DTYPE = np.dtype("<u8")    # little endian: bit c of a row is bit c % 64 of word c // 64


# --------------------------------------------------------------------- bitsets
_POP8 = np.array([bin(i).count("1") for i in range(256)], np.uint8)


def _popcount_bytes(words: np.ndarray) -> np.ndarray:
    """Set bits of each uint64 (byte table; for numpy < 2.0, which lacks
    ``np.bitwise_count``)."""
    per_byte = _POP8[np.ascontiguousarray(words).view(np.uint8)]
    return per_byte.reshape(words.shape + (8,)).sum(axis=-1, dtype=np.uint8)


_popcount = getattr(np, "bitwise_count", _popcount_bytes)


def _pack(mask: np.ndarray) -> np.ndarray:
    """Bool matrix (rows x n) -> bitsets (rows x ceil(n/64) words of 64 bits)."""
    rows, n = mask.shape
    words = max(1, -(-n // 64))
    packed = np.zeros((rows, words * 8), np.uint8)
    packed[:, :-(-n // 8)] = np.packbits(mask, axis=1, bitorder="little")
    return packed.view(_WORD_DTYPE)


def _kth_bit(bits: np.ndarray, k: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
    """Index of the ``k[i]``-th set bit (0-based) of each bitset row ``bits[i]``
    (``count``: its per-word bit counts, if already known)."""
    if count is None:
        count = _popcount(bits)
    cum = np.cumsum(count.ravel(), dtype=np.int64).reshape(count.shape)
    cum -= np.r_[0, cum[:-1, -1]][:, None]           # per-row running counts
    word = (cum <= k[:, None]).sum(axis=1)
    r = np.arange(k.size)
    left = k - (cum[r, word] - count[r, word])
    # Binary search inside the word: keep the half that holds the bit.
    x = bits[r, word].astype(np.uint64)
    pos = np.zeros(k.size, np.int64)
    for width in (32, 16, 8, 4, 2, 1):
        low = _popcount(x & np.uint64((1 << width) - 1)).astype(np.int64)
        up = left >= low
        left -= np.where(up, low, 0)
        shift = np.where(up, width, 0)
        x >>= shift.astype(np.uint64)
        pos += shift
    return word * 64 + pos


def _has_bit(bits: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``bits[rows, cols]`` as booleans (bit ``cols`` of bitset row ``rows``)."""
    return (bits[rows, cols >> 6] >> (cols & 63).astype(np.uint64)) & _ONE != 0


def _csr(keys: np.ndarray, n: int):
    """Group positions ``0..len(keys)-1`` by key: ``(ptr, idx)`` with
    ``idx[ptr[k]:ptr[k+1]]`` the positions of key ``k``."""
    idx = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, idx


def _expand(ptr: np.ndarray, idx: np.ndarray, keys: np.ndarray):
    """Concatenated ``idx[ptr[k]:ptr[k+1]]`` for every ``k`` in ``keys`` and, for
    each element, its position in ``keys``."""
    size = ptr[keys + 1] - ptr[keys]
    owner = np.repeat(np.arange(keys.size), size)
    offset = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
    return idx[ptr[keys][owner] + offset], owner


# --------------------------------------------------------------- greedy state
class _Greedy:
    """State of one TACOS-GREEDY run (see :func:`greedy_match`)."""

    def __init__(self, links: LogicalLinks, n_nodes: int, holders: np.ndarray,
                 need: np.ndarray, chunk_bytes: float, rng: np.random.Generator,
                 replacement: bool):
        self.rng = rng
        self.n_chunks = holders.shape[1]
        self.have = _pack(holders)
        wanted = need & ~holders
        self.want = _pack(wanted)              # not held and not in flight
        self.remaining = int(np.count_nonzero(wanted))
        self.src = np.asarray(links.src, np.int64)
        self.dst = np.asarray(links.dst, np.int64)
        self.dur = links.latency + chunk_bytes / links.bandwidth      # s per chunk
        n_links = self.src.size
        self.out_ptr, self.out_idx = _csr(self.src, n_nodes)
        self.in_ptr, self.in_idx = _csr(self.dst, n_nodes)
        self.busy = np.zeros(n_links)                     # link free from, s
        # Sort key of a link among the free ones: destination, then transfer time,
        # then (added per event) 20 random bits.
        speed = np.unique(self.dur, return_inverse=True)[1].ravel()
        if (n_nodes + 1) * (n_links + 1) >= 1 << 42:
            raise invalid("network size for tacos", f"{n_nodes} nodes, {n_links} links",
                          "(nodes + 1) * (links + 1) < 2**42")
        self.order_key = (self.dst * (speed.max(initial=0) + 1) + speed) << 20
        self.cur = np.full(n_links, -1, np.int64)         # transfer on the link
        # Replacement only matters if a later request can overtake an earlier
        # one, i.e. links have different transfer times.
        self.replacement = bool(replacement) and n_links > 0 and \
            float(self.dur.max()) > float(self.dur.min())
        self.dmin = float(self.dur.min()) if n_links else 0.0
        # Source's chunks when the link's current transfer started (the chunks
        # a replacement may carry).
        self.start_have = (np.zeros((n_links, self.have.shape[1]), _WORD_DTYPE)
                           if self.replacement else None)
        self.outdates: dict[int, list[int]] = {}  # faster copy -> slower copies it outdates
        self.unsorted = False                     # an event appended out of end order
        cap = self.remaining + 16
        self.t_chunk = np.empty(cap, np.int64)
        self.t_link = np.empty(cap, np.int64)
        self.t_start = np.empty(cap)
        self.t_end = np.empty(cap)
        self.n = 0
        self.pending: list = []                   # heap of (end, seq, transfer ids)
        self.seq = 0

    # ........................................................... bookkeeping
    def _add(self, t: float, lids: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        """Record transfers starting at ``t`` (stored sorted by end) and queue their
        arrivals; returns their ids in the order of ``lids``."""
        end = t + self.dur[lids]
        order = np.argsort(end, kind="stable")
        lids, chunks, end = lids[order], chunks[order], end[order]
        k = lids.size
        if self.n + k > self.t_chunk.size:
            cap = max(2 * self.t_chunk.size, self.n + k)
            for name in ("t_chunk", "t_link", "t_start", "t_end"):
                old = getattr(self, name)
                new = np.empty(cap, old.dtype)
                new[:self.n] = old[:self.n]
                setattr(self, name, new)
        ids = np.arange(self.n, self.n + k)
        self.t_chunk[ids], self.t_link[ids], self.t_start[ids], self.t_end[ids] = \
            chunks, lids, t, end
        self.n += k
        self.busy[lids] = end
        self.cur[lids] = ids
        if self.replacement:
            self.start_have[lids] = self.have[self.src[lids]]
        # One heap entry per distinct arrival time (homogeneous links: one per event).
        cut = np.flatnonzero(np.diff(end)) + 1
        for a, b in zip(np.r_[0, cut], np.r_[cut, k]):
            heapq.heappush(self.pending, (float(end[a]), self.seq, ids[a:b]))
            self.seq += 1
        aligned = np.empty_like(ids)
        aligned[order] = ids
        return aligned

    # ........................................................ Section VI-A
    def match(self, t: float, check: np.ndarray) -> None:
        """Greedy link-chunk matching at time ``t`` on the free links ``check``."""
        cand = np.take(self.have, self.src[check], axis=0)
        cand &= np.take(self.want, self.dst[check], axis=0)
        left = _popcount(cand).sum(axis=1, dtype=np.int64)   # candidates per link
        useful = left > 0
        rows, cand, left = check[useful], cand[useful], left[useful]
        # Links grouped by destination, fastest delivery first (shorter-link-first,
        # Section VI-B), ties in random order.
        order = np.argsort(self.order_key[rows] + self.rng.integers(0, 1 << 20, rows.size))
        rows, cand, left = rows[order], cand[order], left[order]
        out_l, out_c = [], []
        while rows.size:
            # Slot-major layout: slot[d, g] is destination g's d-th fastest link.
            rdst = self.dst[rows]
            head = np.r_[True, rdst[1:] != rdst[:-1]]
            starts = np.flatnonzero(head)
            group = np.cumsum(head) - 1
            slot = np.arange(rows.size) - starts[group]
            shape = (int(slot.max()) + 1, starts.size)
            bits = np.zeros(shape + (cand.shape[1],), _WORD_DTYPE)
            bits[slot, group] = cand
            link = np.full(shape, -1, np.int64)
            link[slot, group] = rows
            count = np.zeros(shape, np.int64)
            count[slot, group] = left
            gdst = rdst[starts]
            packed = rows.size
            while True:        # one chunk per destination per round
                offer = np.bitwise_or.reduce(bits, axis=0)
                per_word = _popcount(offer)
                total = per_word.sum(axis=1, dtype=np.int64)
                live = np.flatnonzero(total)
                if not live.size:
                    rows = rows[:0]
                    break
                if live.size < total.size:
                    offer, per_word, total = offer[live], per_word[live], total[live]
                # A uniformly random chunk among those the destination's open links offer...
                chunk = _kth_bit(offer, self.rng.integers(0, total), per_word)
                word, mask = chunk >> 6, _ONE << (chunk & 63).astype(np.uint64)
                col = bits[:, live, word]
                has = (col & mask) != 0
                # ...goes to the first (earliest-delivering) open link that has it.
                d = has.argmax(axis=0)
                out_l.append(link[d, live])
                out_c.append(chunk)
                bits[:, live, word] = col & ~mask
                bits[d, live] = 0
                count[:, live] -= has
                count[d, live] = 0
                self.want[gdst[live], word] &= ~mask
                alive = count > 0
                if 2 * int(np.count_nonzero(alive)) < packed:
                    g, d = np.nonzero(alive.T)       # destination order, then speed
                    rows, cand, left = link[d, g], bits[d, g], count[d, g]
                    break
        if out_c:
            chunks = np.concatenate(out_c)
            self.remaining -= chunks.size
            self._add(t, np.concatenate(out_l), chunks)

    # ........................................... Section VI-B: faster copies
    def overtake(self, t: float) -> None:
        """Send in-flight chunks again on idle links that deliver them earlier."""
        if not np.any(self.busy > t + self.dmin):
            return
        flying = np.flatnonzero(self.busy > t)
        tid = self.cur[flying]
        chunk, dst, arrive = self.t_chunk[tid], self.dst[flying], self.busy[flying]
        # Only the earliest copy of each (node, chunk) counts, and only if some
        # link could still beat it.
        key = dst * self.n_chunks + chunk
        order = np.lexsort((arrive, key))
        first = order[np.r_[True, key[order][1:] != key[order][:-1]]]
        first = first[arrive[first] > t + self.dmin]
        tid, chunk, dst, arrive = tid[first], chunk[first], dst[first], arrive[first]
        lids, owner = _expand(self.in_ptr, self.in_idx, dst)
        deliver = t + self.dur[lids]
        ok = (self.busy[lids] <= t) & (deliver < arrive[owner])
        lids, owner, deliver = lids[ok], owner[ok], deliver[ok]
        ok = _has_bit(self.have, self.src[lids], chunk[owner])
        lids, owner, deliver = lids[ok], owner[ok], deliver[ok]
        if not lids.size:
            return
        # Earliest delivery per in-flight chunk, each idle link used once.
        order = np.lexsort((self.rng.random(lids.size), deliver, owner))
        lids, owner = lids[order], owner[order]
        take = np.r_[True, owner[1:] != owner[:-1]]
        lids, owner = lids[take], owner[take]
        _, once = np.unique(lids, return_index=True)
        once.sort()
        lids, owner = lids[once], owner[once]
        ids = self._add(t, lids, chunk[owner])
        self.unsorted = True
        for j, i in zip(ids.tolist(), tid[owner].tolist()):
            self.outdates[j] = [i] + self.outdates.pop(i, [])

    def replace(self, t: float, chunk: int, outdated: list[int]) -> list[int]:
        """Replace (or drop) the transfers ``outdated`` whose ``chunk`` has just
        arrived by another path; returns the links freed by drops."""
        freed = []
        for i in outdated:
            if self.t_chunk[i] != chunk:     # already replaced when an earlier copy arrived
                continue
            lid = int(self.t_link[i])
            v = int(self.dst[lid])
            offer = self.start_have[lid] & self.want[v]
            total = int(_popcount(offer).sum())
            if total:
                c = int(_kth_bit(offer[None, :], self.rng.integers(0, total, size=1))[0])
                self.t_chunk[i] = c
                self.want[v, c >> 6] &= ~(_ONE << np.uint64(c & 63))
                self.remaining -= 1
            else:       # nothing left to carry: drop it, the link is free now
                self.t_chunk[i] = -1
                self.busy[lid] = t
                self.cur[lid] = -1
                freed.append(lid)
        return freed

    # ................................................................ events
    def arrivals(self, t: float) -> np.ndarray:
        """Deliver every chunk arriving by ``t``; return the links to re-examine."""
        batch = []
        while self.pending and self.pending[0][0] <= t:
            batch.append(heapq.heappop(self.pending)[2])
        ids = np.concatenate(batch)
        ids = ids[self.t_chunk[ids] >= 0]               # dropped transfers deliver nothing
        lids, chunks = self.t_link[ids], self.t_chunk[ids]
        nodes = self.dst[lids]
        np.bitwise_or.at(self.have, (nodes, chunks >> 6), _ONE << (chunks & 63).astype(np.uint64))
        mine = self.cur[lids] == ids
        self.cur[lids[mine]] = -1
        mark = np.zeros(self.src.size, bool)
        mark[lids] = True
        if self.outdates:
            for j, c in zip(ids.tolist(), chunks.tolist()):
                slower = self.outdates.pop(j, None)
                if slower is not None:
                    mark[self.replace(t, c, slower)] = True
        got = np.zeros(self.out_ptr.size - 1, bool)
        got[nodes] = True
        out, _ = _expand(self.out_ptr, self.out_idx, np.flatnonzero(got))
        mark[out] = True
        mark &= self.busy <= t
        return np.flatnonzero(mark)

    def run(self):
        check = np.arange(self.src.size)
        t = 0.0
        while True:
            if self.remaining and check.size:
                self.match(t, check)
            if self.replacement:
                self.overtake(t)
            if not self.remaining and not self.outdates:
                break
            if not self.pending:
                v, c = np.argwhere(np.unpackbits(self.want.view(np.uint8), axis=1,
                                                 bitorder="little"))[0]
                raise InfeasibleError(f"tacos: chunk {int(c)} cannot reach node {int(v)} "
                                      "through participants (relay NPUs are not used)")
            t = self.pending[0][0]
            check = self.arrivals(t)
        n = self.n
        out = [self.t_chunk[:n], self.t_link[:n], self.t_start[:n], self.t_end[:n]]
        keep = out[0] >= 0
        if not keep.all():                   # drop the outdated transfers
            out = [a[keep] for a in out]
        if self.unsorted:
            order = np.lexsort((out[3], out[2]))
            out = [a[order] for a in out]
        return tuple(out)


def greedy_match(links: LogicalLinks, n_nodes: int, holders: np.ndarray, need: np.ndarray,
                 chunk_bytes: float, rng: np.random.Generator, *, replacement: bool = True):
    """TACOS-GREEDY link-chunk matching (Section VI) on logical links.

    Parameters
    ----------
    links : LogicalLinks
        Point-to-point links (after unwinding).
    n_nodes : int
        Number of nodes (rows of ``holders`` and ``need``).
    holders : ndarray of bool, shape (n_nodes, n_chunks)
        Who holds each chunk at time 0.
    need : ndarray of bool, shape (n_nodes, n_chunks)
        Who must hold each chunk at the end.
    chunk_bytes : float
        Bytes per chunk.
    rng : numpy.random.Generator
        Source of the random choices.
    replacement : bool, optional
        Section VI-B chunk replacement: idle links may send an in-flight chunk
        again if they deliver it earlier; the outdated slower transfer then
        carries another chunk (or is dropped).  Only has an effect when links
        have different transfer times.

    Returns
    -------
    tuple of ndarray
        ``(chunk, link, start, end)`` per transfer, sorted by start then end
        (seconds); each node receives each chunk it needs exactly once.

    Raises
    ------
    InfeasibleError
        If some request can never be satisfied (no path through holders).

    Notes
    -----
    Per event the work is O(R * W) per matching round for the R re-examined
    links and W = ceil(n_chunks / 64) words; memory is O((nodes + links) * W)
    plus the transfers.
    """
    return _Greedy(links, n_nodes, holders, need, chunk_bytes, rng, replacement).run()


# ---------------------------------------------------------------- collectives
def holders_need(collective: Collective, n_nodes: int, spread: str):
    """Bool matrices (node x chunk) for an all-gather-like spread of every chunk.

    ``spread`` is ``"allgather"`` (chunk of shard ``s`` starts at participant
    ``s``) or ``"broadcast"`` (every chunk starts at the root); every
    participant needs every chunk.
    """
    n_chunks = collective.n_chunks
    holders = np.zeros((n_nodes, n_chunks), dtype=bool)
    need = np.zeros((n_nodes, n_chunks), dtype=bool)
    chunks = np.arange(n_chunks)
    if spread == "allgather":
        owners = np.asarray(collective.npus, np.int64)[chunks // collective.chunks_per_npu]
        holders[owners, chunks] = True
    else:
        holders[collective.root, :] = True
    need[np.asarray(collective.npus, np.int64), :] = True
    return holders, need


def _synth(links: LogicalLinks, topology, collective: Collective, spread: str, rng,
           replacement: bool):
    holders, need = holders_need(collective, topology.n_nodes, spread)
    return greedy_match(links, topology.n_nodes, holders, need, collective.chunk_bytes, rng,
                        replacement=replacement)


def _reversed(links: LogicalLinks, topology, collective, spread, rng, replacement):
    """Reduce-scatter (reduce) as the time reversal of an all-gather (broadcast)
    synthesized on the transposed logical network: ``(chunk, link, start, end)``
    on the original links (transposed link ``l`` copies ``dst[l] -> src[l]``;
    reversed it reduces ``src[l] -> dst[l]``) and the total time."""
    chunk, lid, start, end = _synth(links.transposed(), topology, collective, spread, rng,
                                    replacement)
    total = float(end.max()) if end.size else 0.0
    new_start, new_end = total - end, total - start
    order = np.lexsort((new_end, new_start))
    return (chunk[order], lid[order], new_start[order], new_end[order]), total


def build_schedule(collective: Collective, links: LogicalLinks, parts, metadata) -> Schedule:
    """A :class:`Schedule` from ``(chunk, link, start, end, op)`` arrays on logical links."""
    chunk, lid, start, end, op = (a[0] if len(a) == 1 else np.concatenate(a)
                                  for a in zip(*parts))
    lengths = np.fromiter(map(len, links.paths), np.int64, len(links.paths))
    flat = np.fromiter(chain.from_iterable(links.paths), np.int64, int(lengths.sum()))
    per = lengths[lid]
    if per.size == 0 or np.all(per == 1):
        ptr, path = np.arange(lid.size + 1), flat[lid]
        hop_start = start if per.size else None
    else:
        ptr = np.zeros(lid.size + 1, np.int64)
        np.cumsum(per, out=ptr[1:])
        first = np.cumsum(lengths) - lengths
        path = flat[np.repeat(first[lid] - ptr[:-1], per) + np.arange(int(ptr[-1]))]
        hop_start = None
    return Schedule(collective, chunk=chunk, src=links.src[lid], dst=links.dst[lid],
                    path_ptr=ptr, path_links=path, start=start, end=end, op=op,
                    metadata=metadata, hop_start=hop_start)


def _one_instance(topology, collective: Collective, seed: int, degree, replacement: bool,
                  links: LogicalLinks | None = None) -> Schedule:
    """One TACOS-GREEDY synthesis with ``seed`` (the unit of :func:`tacos`'s instances)."""
    links = unwind(topology, degree) if links is None else links
    rng = np.random.default_rng(seed)
    kind = collective.kind

    def tagged(arrays, op, shift=0.0):
        c, l, s, e = arrays
        if shift:
            s, e = s + shift, e + shift
        return c, l, s, e, np.full(c.size, op, np.int8)

    if kind in ("allgather", "broadcast"):
        parts = [tagged(_synth(links, topology, collective, kind, rng, replacement), COPY)]
    elif kind in ("reducescatter", "reduce"):
        spread = "allgather" if kind == "reducescatter" else "broadcast"
        parts = [tagged(_reversed(links, topology, collective, spread, rng, replacement)[0],
                        REDUCE)]
    elif kind in UNICAST_KINDS:   # scatter, gather, alltoall: one destination per chunk
        parts = [tagged(tacos_unicast_match(topology, collective, links, rng), COPY)]
    else:   # allreduce: reduce-scatter, then all-gather
        rs, t_rs = _reversed(links, topology, collective, "allgather", rng, replacement)
        ag = _synth(links, topology, collective, "allgather", rng, replacement)
        parts = [tagged(rs, REDUCE), tagged(ag, COPY, t_rs)]
    sched = build_schedule(collective, links, parts,
                      dict(algorithm="tacos", link_model=links.link_model, seed=seed,
                           switch_degree=degree, replacement=bool(replacement)))
    return _physical_times(sched, topology)


def _physical_times(sched: Schedule, topology) -> Schedule:
    """Re-time a schedule under the physical store-and-forward link model.

    The greedy times two things more coarsely than docs/architecture.md section 5's link
    model: an unwound switch route NPU -> switch -> NPU is one logical link
    (``2 latency + chunk / bandwidth``, no store-and-forward at the switch, and
    with degree > 1 the ``1/d`` bandwidth share), and all-reduce starts its
    all-gather after the whole reduce-scatter (a barrier).  Here the
    transfers keep the greedy's choices and its per-link order but get the
    earliest times the congestion model allows (every hop one chunk at a
    time, forward after full arrival; the switch serves its output ports first
    come, first served), so the reported time is what the ``congestion``
    replay gives; ``metadata["logical_time_s"]`` keeps the
    greedy's own estimate.  Point-to-point spreading schedules already have
    exactly these times and are returned unchanged.
    """
    if not len(sched) or (sched.hop_start is not None and sched.collective.kind != "allreduce"):
        return sched
    from evaluators.netsim.schedule_replay import replay   # netsim is above algorithms
    # Per-hop times known (point-to-point): keep the greedy's per-link order.  Switch
    # routes: the switch forwards first come, first served (FIFO), as a switch does.
    order = "schedule" if sched.hop_start is not None else "fifo"
    timed = replay(sched, topology, model="congestion", order=order)
    meta = {k: v for k, v in timed.metadata.items() if k != "network_model"}
    meta["logical_time_s"] = float(sched.time_s)
    return timed.retimed(timed.start, timed.end, timed.hop_start, **meta)


@register_algorithm("tacos", kinds=("allgather", "reducescatter", "allreduce", "broadcast",
                                    "reduce", "scatter", "gather", "alltoall"),
                    options=("seed", "switch_degree", "instances", "workers", "replacement",
                             "exact", "time_limit_s"),
                    summary="TACOS-GREEDY link-chunk matching on the time-expanded network")
def tacos(topology, collective: Collective, *, seed: int = 0, switch_degree="max",
          instances: int = 1, workers: int = 1, replacement: bool = True,
          exact: bool = False, time_limit_s: float = 60.0) -> Schedule:
    """Synthesize ``collective`` on ``topology`` with TACOS-GREEDY.

    Parameters
    ----------
    topology : topologies.Topology
        The network; switches (one level) are unwound.
    collective : Collective
        allgather, reducescatter, allreduce, broadcast or reduce.
    seed : int, optional
        Seed of the random choices (same seed, same schedule).
    switch_degree : int or "max", optional
        Switch unwinding degree (Section IV-D); ``"max"`` (default) links
        every NPU to every other NPU on its switch at ``1/(k-1)`` bandwidth,
        ``1`` makes each switch a unidirectional ring at full bandwidth.
    instances : int, optional
        Independent searches with seeds ``seed, seed+1, ..., seed+instances-1``
        (Section VI-C); the fastest schedule is kept, ties to the lowest seed.
    workers : int, optional
        Processes running the instances: 1 (default) runs them in this
        process; more uses Ray tasks if Ray is initialised, else a process
        pool.  The result does not depend on ``workers``.
    replacement : bool, optional
        Section VI-B chunk replacement on heterogeneous links (default True).
    exact : bool, optional
        Solve the TACOS-ILP of Section V-A instead (small instances only;
        :func:`evaluators.algorithms.tacos_ilp.tacos_exact`): ``metadata``
        then has ``exact``, ``optimal`` and ``mip_gap``.  Not for scatter,
        gather and all-to-all.
    time_limit_s : float, optional
        Wall-clock limit of the ILP solver with ``exact=True``, seconds.

    Returns
    -------
    Schedule
        Times in seconds; ``metadata`` has ``algorithm="tacos"``,
        ``link_model``, ``seed`` (the first seed), ``best_seed`` (the seed
        of the kept instance), ``instances``, ``switch_degree`` and
        ``replacement``.  Schedules through switches and all-reduces are
        re-timed under the physical store-and-forward model
        (:func:`_physical_times`; ``logical_time_s`` keeps the greedy's own
        estimate), so the time is the ``congestion`` replay's.

    Raises
    ------
    InvalidSpecError
        For a bad option or a topology whose switches cannot be unwound.
    InfeasibleError
        If participants cannot reach each other through participants.

    Notes
    -----
    Time grows roughly with transfers x chunks / 64 (bitset words): an
    all-gather with one chunk per NPU takes about 0.3 s on ``torus:8x8x8``
    (261,632 transfers) and 1.5 s on ``torus:8x8x16`` (1,047,552 transfers)
    on one core, see ``experiments/benchmarks/bench_tacos.py``.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = tacos(from_spec("fc:4,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> round(s.time_s, 9)   # every NPU sends its 1 GB shard to the 3 others at once
    1.0
    """
    # numpy's generators take non-negative seeds only (as topology_finder's and the
    # expander's checks say); instances run seeds seed .. seed+instances-1.
    seed = check_int("seed", seed, 0)
    instances = check_int("instances", instances, 1, MAX_INSTANCES)
    if instances > 1:
        # Work bound: every instance is a whole synthesis of at least min_transfers.
        from evaluators.estimates import min_transfers

        one = min_transfers(collective.kind, collective.n, collective.chunks_per_npu)
        check_count(f"{instances} tacos instances ({one:.3g} transfers each or more)",
                    "instances", instances, float(instances) * one,
                    "use fewer instances (or one, seeded)", maximum=MAX_INSTANCE_TRANSFERS)
    workers = check_int("workers", workers, 1)
    if not isinstance(replacement, (bool, np.bool_)):
        raise invalid("replacement", replacement, "True or False")
    if not isinstance(exact, (bool, np.bool_)):
        raise invalid("exact", exact, "True or False")
    degree = parse_degree(switch_degree)
    if exact:
        # TACOS-ILP (Section V-A); imported here because tacos_ilp imports this module.
        from evaluators.algorithms.tacos_ilp import tacos_exact
        return _physical_times(tacos_exact(topology, collective, time_limit_s=time_limit_s,
                                           switch_degree=degree), topology)
    links = unwind(topology, degree)      # validates the topology before any worker starts
    seeds = [int(seed) + i for i in range(instances)]
    if instances == 1:
        best, best_seed = _one_instance(topology, collective, seeds[0], degree, replacement,
                                        links), seeds[0]
    else:
        from evaluators.algorithms.tacos_parallel import best_instance
        best, best_seed = best_instance(
            partial(_one_instance, topology, collective, degree=degree,
                    replacement=bool(replacement)), seeds, workers=workers)
    best.metadata.update(seed=int(seed), best_seed=best_seed, instances=instances)
    return best
