"""TACOS-GREEDY collective synthesis (``--algorithm tacos``).

Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for
Distributed Machine Learning" (MICRO 2024):

* Section IV: the network is a time-expanded network (TEN); switches are
  first unwound into point-to-point links (:mod:`evaluators.algorithms.unwind`,
  option ``switch_degree``).
* Section VI: link-chunk matching.  The synthesis is event driven: at each
  event time (time 0 and every chunk arrival) the unsatisfied requests
  ``(destination, chunk)`` are visited in a random order (``seed``) and each
  is matched to a free incoming link whose source already holds the chunk;
  every link carries one chunk at a time for ``latency + chunk_bytes /
  bandwidth`` and a chunk can be forwarded only after it has fully arrived.
* Section VI-B (heterogeneous links): among the free candidate links the one
  that delivers the chunk earliest wins (a slow link spans several TEN steps);
  a chunk already in flight to a node is not requested again.

Collectives: all-gather and broadcast natively; reduce-scatter and reduce as
the time reversal of an all-gather (broadcast) synthesized on the transposed
logical network (each copy ``v -> u`` during ``[s, e]`` on the transposed
link becomes a REDUCE ``u -> v`` during ``[T-e, T-s]`` on the original link,
Section III's reduce-scatter/all-gather duality); all-reduce is reduce-scatter
followed by all-gather.

Link model: without switches (or with ``switch_degree=1``) every physical link
carries one chunk at a time, ``metadata["link_model"] == "exclusive"``; with
switch degree > 1 the unwound links share switch ports at ``1/d`` bandwidth
and the schedule declares ``"shared"`` (see :mod:`~evaluators.algorithms.unwind`).
Single-hop schedules also carry ``hop_start == start``.

Participants must be able to reach each other through participants (and
switches): non-participating NPUs never store chunks; otherwise the synthesis
stalls and raises :class:`~codesign.errors.InfeasibleError`.
"""

from __future__ import annotations

import heapq

import numpy as np

from codesign.errors import InfeasibleError, invalid
from evaluators.algorithms.unwind import LogicalLinks, parse_degree, unwind
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import COPY, REDUCE, Schedule

__all__ = ["tacos", "greedy_match"]


def greedy_match(links: LogicalLinks, n_nodes: int, holders: np.ndarray, need: np.ndarray,
                 chunk_bytes: float, rng: np.random.Generator):
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
        Source of the random request order.

    Returns
    -------
    tuple of ndarray
        ``(chunk, link, start, end)`` per transfer, in start-time order
        (seconds).

    Raises
    ------
    InfeasibleError
        If some request can never be satisfied (no path through holders).
    """
    have = holders.copy()
    want = need & ~have
    dur = links.latency + chunk_bytes / links.bandwidth
    lsrc, ldst = links.src, links.dst
    busy = np.zeros(len(links))    # time each logical link becomes free, s
    pending: list = []     # heap of (end, seq, dst, chunk)
    out_chunk, out_link, out_start, out_end = [], [], [], []
    remaining = int(want.sum())
    t = 0.0
    seq = 0
    while remaining:
        while pending and pending[0][0] <= t:
            _, _, v, c = heapq.heappop(pending)
            have[v, c] = True
        free = np.flatnonzero(busy <= t)
        if free.size:
            cand = have[lsrc[free]] & want[ldst[free]]
            useful = cand.any(axis=1)
            free, cand = free[useful], cand[useful]
        if free.size:
            dests = np.unique(ldst[free])
            for v in rng.permutation(dests).tolist():
                rows = np.flatnonzero(ldst[free] == v)
                rows = rows[rng.permutation(rows.size)]
                lids = free[rows]
                sub = cand[rows]
                deliver = t + dur[lids]
                open_ = np.ones(rows.size, dtype=bool)
                chunks = np.flatnonzero(sub.any(axis=0))
                for c in chunks[rng.permutation(chunks.size)].tolist():
                    ok = open_ & sub[:, c]
                    if not ok.any():
                        continue
                    # Section VI-B: the candidate link that delivers earliest
                    # (first in the shuffled order among equals).
                    k = int(np.flatnonzero(ok)[np.argmin(deliver[ok])])
                    open_[k] = False
                    l = int(lids[k])
                    end = float(deliver[k])
                    busy[l] = end
                    want[v, c] = False     # in flight: not requested again
                    remaining -= 1
                    heapq.heappush(pending, (end, seq, v, c))
                    seq += 1
                    out_chunk.append(c)
                    out_link.append(l)
                    out_start.append(t)
                    out_end.append(end)
                    if not open_.any():
                        break
        if not remaining:
            break
        if not pending:
            v, c = np.argwhere(want)[0]
            raise InfeasibleError(f"tacos: chunk {int(c)} cannot reach node {int(v)} through "
                                  "participants (relay NPUs are not used)")
        t = pending[0][0]
    order = np.lexsort((np.asarray(out_end), np.asarray(out_start)))
    return (np.asarray(out_chunk, np.int64)[order], np.asarray(out_link, np.int64)[order],
            np.asarray(out_start, np.float64)[order], np.asarray(out_end, np.float64)[order])


def _holders_need(collective: Collective, n_nodes: int, spread: str):
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


def _synth(links: LogicalLinks, topology, collective: Collective, spread: str, rng):
    holders, need = _holders_need(collective, topology.n_nodes, spread)
    return greedy_match(links, topology.n_nodes, holders, need, collective.chunk_bytes, rng)


def _rows(links: LogicalLinks, chunk, lid, start, end, op, reverse: bool):
    """Transfers ``(chunk, src, dst, path, start, end, op)`` on the original links."""
    src = links.dst[lid] if reverse else links.src[lid]
    dst = links.src[lid] if reverse else links.dst[lid]
    return [(int(c), int(s), int(d), links.paths[int(l)], float(a), float(b), op)
            for c, s, d, l, a, b in zip(chunk, src, dst, lid, start, end)]


def _reversed(links: LogicalLinks, topology, collective, spread, rng, offset=0.0):
    """Reduce-scatter (reduce) as the time reversal of an all-gather (broadcast)
    synthesized on the transposed logical network."""
    chunk, lid, start, end = _synth(links.transposed(), topology, collective, spread, rng)
    total = float(end.max()) if end.size else 0.0
    # Transposed link l copies dst[l] -> src[l]; reversed it reduces src[l] -> dst[l].
    new_start, new_end = total - end, total - start
    order = np.lexsort((new_end, new_start))
    rows = _rows(links, chunk[order], lid[order], new_start[order] + offset,
                 new_end[order] + offset, REDUCE, reverse=False)
    return rows, total


@register_algorithm("tacos", kinds=("allgather", "reducescatter", "allreduce", "broadcast",
                                    "reduce"),
                    options=("seed", "switch_degree"),
                    summary="TACOS-GREEDY link-chunk matching on the time-expanded network")
def tacos(topology, collective: Collective, *, seed: int = 0, switch_degree="max") -> Schedule:
    """Synthesize ``collective`` on ``topology`` with TACOS-GREEDY.

    Parameters
    ----------
    topology : topologies.Topology
        The network; switches (one level) are unwound.
    collective : Collective
        allgather, reducescatter, allreduce, broadcast or reduce.
    seed : int, optional
        Seed of the random request order (same seed, same schedule).
    switch_degree : int or "max", optional
        Switch unwinding degree (Section IV-D); ``"max"`` (default) links
        every NPU to every other NPU on its switch at ``1/(k-1)`` bandwidth,
        ``1`` makes each switch a unidirectional ring at full bandwidth.

    Returns
    -------
    Schedule
        Times in seconds; ``metadata`` has ``algorithm="tacos"``,
        ``link_model`` (``"exclusive"``, or ``"shared"`` for unwinding degree
        > 1), ``seed`` and ``switch_degree``.

    Raises
    ------
    InvalidSpecError
        For a bad option or a topology whose switches cannot be unwound.
    InfeasibleError
        If participants cannot reach each other through participants.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = tacos(from_spec("fc:4,bw=1GB/s,lat=0"), Collective.on("allgather", 4, 4e9))
    >>> round(s.time_s, 9)   # every NPU sends its 1 GB shard to the 3 others at once
    1.0
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise invalid("seed", seed, "an integer")
    degree = parse_degree(switch_degree)
    links = unwind(topology, degree)
    rng = np.random.default_rng(int(seed))
    kind = collective.kind
    if kind in ("allgather", "broadcast"):
        chunk, lid, start, end = _synth(links, topology, collective, kind, rng)
        rows = _rows(links, chunk, lid, start, end, COPY, reverse=False)
    elif kind in ("reducescatter", "reduce"):
        spread = "allgather" if kind == "reducescatter" else "broadcast"
        rows, _ = _reversed(links, topology, collective, spread, rng)
    elif kind == "allreduce":
        rows, t_rs = _reversed(links, topology, collective, "allgather", rng)
        chunk, lid, start, end = _synth(links, topology, collective, "allgather", rng)
        rows += _rows(links, chunk, lid, start + t_rs, end + t_rs, COPY, reverse=False)
    else:  # pragma: no cover - the registry rejects other kinds
        raise invalid("collective for algorithm 'tacos'", kind,
                      "one of allgather, reducescatter, allreduce, broadcast, reduce")
    sched = Schedule.from_transfers(collective, rows, algorithm="tacos",
                                    link_model=links.link_model, seed=int(seed),
                                    switch_degree=degree)
    if len(sched) and int(sched.path_ptr[-1]) == len(sched):
        sched = sched.retimed(sched.start, sched.end, sched.start)
    return sched
