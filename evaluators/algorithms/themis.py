"""Themis: bandwidth-aware chunk scheduling on multi-dimensional networks (``--algorithm themis``).

Rashidi et al., "Themis: A Network Bandwidth-Aware Collective Scheduling
Policy for Distributed Training of DL Models", ISCA'22, Sections 4-5.

* Per dimension the contention-free algorithm of Table 1 (Ring -> ring,
  FullyConnected -> direct, Switch -> halving-doubling), with the latency
  model of Sec. 4.4: a reduce-scatter / all-gather stage on ``dimK`` costs
  ``A_K + n_K * B_K`` with ``A_K = number_of_steps * step_latency`` and
  ``n_K = (P_K - 1) / P_K * bytes`` (footnote 7), ``B_K = 1 / bandwidth``
  (:func:`dimension_time`).
* Algorithm 1: the collective is split into ``chunks`` chunks (64 by
  default, Sec. 5 "Themis Parameter Values"); the Dim Load Tracker starts at
  ``A_K`` (Sec. 4.4) and, chunk by chunk, the reduce-scatter order of the
  chunk is the dimensions sorted by ascending load (all-gather: descending),
  unless the spread ``max - min`` of the loads is below the threshold, the
  model time of a ``chunkSize / 16`` RS/AG on the least loaded dimension
  (Sec. 5), in which case the baseline order (dim1..dimD for RS, back for AG)
  is used.  An all-reduce chunk runs its all-gather in the reverse order of
  its reduce-scatter (line 8).  The tracker adds ``n_K * B_K`` per stage
  (lines 28-30).
* Intra-dimension scheduling (Sec. 4.3): ``policy="fifo"`` or ``"scf"``
  (Smallest-Chunk-First), and several chunks may share a dimension when one
  cannot fill it: in the Sec. 4.4 event model (:func:`model_time`) a stage
  occupies its dimension's bandwidth for ``n_K * B_K`` only, so the ``A_K``
  of consecutive chunks overlap.

The per-chunk dimension orders become a real :class:`Schedule`: every chunk
(piece ``p`` of every shard) runs the stages of the static hierarchical
algorithm (:mod:`evaluators.algorithms.hierarchical`, same per-line
patterns and block layout) in its own order; chunks with the same order share
the pattern calls, different orders run concurrently (disjoint chunk ids).
The schedule is timed by ``replay(..., model="congestion")``.  That model
serves each link FIFO by arrival time, so the policy only decides the listing
order of simultaneous sends there (smallest stage first for ``scf``); its
full effect is in the event model recorded in the metadata.

Model conventions: the bandwidth a dimension offers one NPU is the link
bandwidth times ``Dimension.links`` times the neighbours the pattern sends to
at once - 1 for ring (the pattern is unidirectional) and switch (the uplink),
``P - 1`` for fully connected (direct sends to all peers over their own
links).  Steps: ring ``P - 1``, direct 1, halving-doubling ``log2 P`` (a
non-power of two ``P`` adds the fold and the copy back: 2 steps and
``bytes`` each, Thakur et al. 2005).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from codesign.errors import invalid
from evaluators.algorithms.hierarchical import DIMENSION_ALGORITHMS, _AG, _RS, npu_coordinates
from evaluators.algorithms.plan import Plan, concurrent, sequence
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["themis", "dimension_time", "dimension_cost", "themis_orders", "baseline_orders",
           "model_time", "POLICIES"]

POLICIES = ("fifo", "scf")
_PHASES = {"rs": "rs", "reducescatter": "rs", "ag": "ag", "allgather": "ag"}


def dimension_cost(dim, kind: str, nbytes: float) -> tuple[float, float]:
    """Sec. 4.4 cost ``(A_K, n_K * B_K)`` of one RS/AG stage on a dimension.

    Parameters
    ----------
    dim : topologies.model.Dimension
        The dimension (kind, size, bandwidth B/s per link, latency s, links).
    kind : str
        ``"rs"``/``"reducescatter"`` or ``"ag"``/``"allgather"``.
    nbytes : float
        Bytes per NPU entering a reduce-scatter (leaving an all-gather), B.

    Returns
    -------
    (float, float)
        Fixed delay ``steps * step_latency`` and bandwidth time, seconds.
    """
    if kind not in _PHASES:
        raise invalid("dimension stage kind", kind, "rs, ag, reducescatter or allgather")
    if nbytes < 0 or not math.isfinite(nbytes):
        raise invalid("stage bytes", nbytes, "a finite number of bytes >= 0")
    p = dim.size
    if p <= 1:
        return 0.0, 0.0
    alg = DIMENSION_ALGORITHMS.get(dim.kind)
    if alg is None:
        raise invalid("dimension kind", dim.kind, f"one of {', '.join(DIMENSION_ALGORITHMS)}")
    bw = dim.bandwidth_Bps * dim.links
    sent = (p - 1) / p * nbytes            # footnote 7
    if alg == "ring":
        steps = p - 1
    elif alg == "direct":
        steps, bw = 1, bw * (p - 1)
    else:  # halving-doubling
        q = 1 << (p.bit_length() - 1)
        steps = int(math.log2(q))
        if q != p:                          # fold in, copy back
            steps += 2
            sent = (q - 1) / q * nbytes + nbytes + nbytes / p
    return steps * dim.latency_s, sent / bw


def dimension_time(dim, kind: str, nbytes: float) -> float:
    """Sec. 4.4 latency ``A_K + n_K * B_K`` (s) of an RS/AG of ``nbytes`` (B/NPU) on ``dim``.

    Examples
    --------
    >>> from topologies.model import Dimension
    >>> dimension_time(Dimension("ring", 4, 1e9, 1e-6), "rs", 4e9)   # 3 us + 3 GB / 1 GB/s
    3.000003
    """
    a, b = dimension_cost(dim, kind, nbytes)
    return a + b


def _stage_bytes(sizes: Sequence[int], order: Sequence[int], chunk_bytes: float) -> list[float]:
    """Bytes per NPU on each dimension of ``order`` (RS input; an RS shrinks by ``P_K``)."""
    out, b = [], chunk_bytes
    for k in order:
        out.append(b)
        b /= sizes[k]
    return out


def _phases(kind: str) -> list[str]:
    return {"allreduce": ["rs", "ag"], "reducescatter": ["rs"], "allgather": ["ag"]}[kind]


def _check_kind(kind: str) -> None:
    if kind not in ("allreduce", "reducescatter", "allgather"):
        raise invalid("collective for algorithm 'themis'", kind,
                      "one of allgather, allreduce, reducescatter")


def baseline_orders(dims, kind: str, chunks: int) -> list[list[tuple[str, int]]]:
    """Static baseline (Sec. 2.3): RS over dims 1..D, AG back, for every chunk.

    Returns per chunk a list of ``(phase, dimension index)`` stages; size-1
    dimensions are skipped.
    """
    _check_kind(kind)
    active = [k for k, d in enumerate(dims) if d.size > 1]
    stages = []
    if "rs" in _phases(kind):
        stages += [("rs", k) for k in active]
    if "ag" in _phases(kind):
        stages += [("ag", k) for k in reversed(active)]
    return [list(stages) for _ in range(chunks)]


def themis_orders(dims, kind: str, size_bytes: float, chunks: int,
                  ) -> tuple[list[list[tuple[str, int]]], np.ndarray]:
    """Algorithm 1: per-chunk dimension orders and the final Dim Load Tracker.

    Parameters
    ----------
    dims : sequence of Dimension
        The network's dimensions (fastest-varying first).
    kind : str
        allreduce, reducescatter or allgather.
    size_bytes : float
        Collective size per NPU, B (the whole buffer of an all-reduce).
    chunks : int
        Chunks per collective (CPC).

    Returns
    -------
    orders : list of list of (str, int)
        ``orders[i]`` are chunk ``i``'s stages ``(phase, dim index)``.
    loads : ndarray
        Dim Load Tracker at the end (s), one entry per dimension.
    """
    _check_kind(kind)
    sizes = [d.size for d in dims]
    active = [k for k, d in enumerate(dims) if d.size > 1]
    phases = _phases(kind)
    chunk = size_bytes / chunks
    loads = np.zeros(len(dims))
    # Line 2: the tracker starts at each dimension's fixed delay A_K (Sec. 4.4).
    for k in active:
        for ph in phases:
            loads[k] += dimension_cost(dims[k], ph, 0.0)[0]
    # The scheduled phase: RS for RS and AR (AG is its reverse), AG for AG.
    ct = "ag" if kind == "allgather" else "rs"
    orders = []
    for _ in range(chunks):
        act = loads[active]
        least = active[int(np.argmin(act))]
        threshold = dimension_cost(dims[least], ct, chunk / 16)[1]      # Sec. 5
        if act.max() - act.min() < threshold:                              # line 19
            sched = list(active) if ct == "rs" else list(reversed(active))
        elif ct == "rs":                                                    # line 23
            sched = [active[j] for j in np.argsort(act, kind="stable")]
        else:                                                               # line 25
            sched = [active[j] for j in np.argsort(-act, kind="stable")]
        rs_order = sched if ct == "rs" else sched[::-1]
        nbytes = _stage_bytes(sizes, rs_order, chunk)
        for ph in phases:                                                   # lines 28-30
            for k, b in zip(rs_order, nbytes):
                loads[k] += dimension_cost(dims[k], ph, b)[1]
        stages = []
        if "rs" in phases:
            stages += [("rs", k) for k in rs_order]
        if "ag" in phases:
            stages += [("ag", k) for k in reversed(rs_order)]
        orders.append(stages)
    return orders, loads


def _stage_sizes(dims, orders, chunk: float) -> list[list[float]]:
    """Bytes per NPU of every stage of every chunk (RS input / AG output)."""
    sizes = [d.size for d in dims]
    out = []
    for stages in orders:
        rs = [k for ph, k in stages if ph == "rs"] or [k for ph, k in stages][::-1]
        by_dim = dict(zip(rs, _stage_bytes(sizes, rs, chunk)))
        out.append([by_dim[k] for _, k in stages])
    return out


def model_time(dims, orders, size_bytes: float, policy: str = "fifo") -> dict:
    """Event-driven Sec. 4.4 model of the chunk pipeline.

    Every dimension serves one stage at a time for its bandwidth time
    ``n_K * B_K``; the stage completes ``A_K`` later, so the fixed delays of
    consecutive chunks overlap (several chunks in flight on a dimension,
    Sec. 4.3).  A free dimension picks among its waiting stages the earliest
    arrival (``fifo``) or the smallest bytes (``scf``), ties by chunk index.

    Returns
    -------
    dict
        ``time_s`` (makespan), ``busy_s`` (per dimension bandwidth time),
        ``utilization`` (``busy_s / time_s``), ``load_s`` (``A_K + N_K B_K``).
    """
    if policy not in POLICIES:
        raise invalid("themis policy", policy, "fifo or scf")
    n_dims = len(dims)
    chunk = size_bytes / max(len(orders), 1)
    stage_b = _stage_sizes(dims, orders, chunk)
    costs = [[dimension_cost(dims[k], ph, b) for (ph, k), b in zip(st, sb)]
             for st, sb in zip(orders, stage_b)]
    busy = np.zeros(n_dims)
    fixed = np.zeros(n_dims)
    waiting: list[list[tuple]] = [[] for _ in range(n_dims)]
    free_at = np.zeros(n_dims)
    events: list[tuple] = []           # (time, seq, type, payload)
    seq = 0

    def push(t, typ, payload):
        nonlocal seq
        heapq.heappush(events, (t, seq, typ, payload))
        seq += 1

    for i, st in enumerate(orders):
        if st:
            push(0.0, 0, (i, 0))
    end = 0.0
    while events:
        t = events[0][0]
        # Take every event of this instant before dispatching, so that a free
        # dimension chooses among all the stages that are ready now.
        while events and events[0][0] == t:
            _, _, typ, payload = heapq.heappop(events)
            if typ == 0:                # chunk i ready for stage s
                i, s = payload
                k = orders[i][s][1]
                key = (t, i) if policy == "fifo" else (stage_b[i][s], t, i)
                heapq.heappush(waiting[k], (key, i, s))
        for k in range(n_dims):
            if free_at[k] <= t and waiting[k]:
                _, i, s = heapq.heappop(waiting[k])
                a, b = costs[i][s]
                busy[k] += b
                fixed[k] += a
                free_at[k] = t + b
                push(t + b, 1, k)       # dimension free again
                done = t + b + a
                end = max(end, done)
                if s + 1 < len(orders[i]):
                    push(done, 0, (i, s + 1))
    util = busy / end if end > 0 else np.zeros(n_dims)
    return {"time_s": float(end), "busy_s": busy.tolist(), "utilization": util.tolist(),
            "load_s": (busy + fixed).tolist()}


def _lines(coords: np.ndarray, k: int) -> list[list[int]]:
    """NPUs of every line of dimension ``k``, ordered by coordinate ``k``."""
    others = [j for j in range(coords.shape[1]) if j != k]
    key = coords[:, others] if others else np.zeros((coords.shape[0], 0), np.int64)
    lines: dict[tuple, list[int]] = {}
    for npu in np.lexsort(np.column_stack([coords[:, k], key]).T[::-1]):
        lines.setdefault(tuple(key[npu].tolist()), []).append(int(npu))
    return list(lines.values())


def _stage_steps(lines, coords, shard_xy, c: int, pieces: np.ndarray, k: int, size: int,
                 done: list[int], alg: str, phase: str) -> list:
    """One RS/AG stage on dimension ``k`` for the chunks ``pieces``, every line at once.

    As :func:`hierarchical._stage`, with the dimensions already reduced
    (still to be gathered) given by ``done`` instead of ``0..k-1``.
    """
    fn = (_RS if phase == "rs" else _AG)[alg]
    per_line = []
    for members in lines:
        ref = coords[members[0]]
        in_scope = np.all(shard_xy[:, done] == ref[done], axis=1) if done else \
            np.ones(shard_xy.shape[0], dtype=bool)
        blocks = []
        for x in range(size):
            shards = np.flatnonzero(in_scope & (shard_xy[:, k] == x))
            blocks.append((pieces[:, None] + (shards * c)[None, :]).ravel())
        per_line.append(fn(members, blocks))
    return concurrent(*per_line)


def _check_int(value, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise invalid(field, value, f"an integer >= {minimum}")
    return int(value)


@register_algorithm("themis", kinds=("allreduce", "reducescatter", "allgather"),
                    options=("chunks", "policy", "baseline"),
                    summary="Themis (ISCA'22): per-chunk dimension orders balancing dimension load")
def themis(topology, collective: Collective, *, chunks: int = 64, policy: str = "scf",
           baseline: bool = False) -> Schedule:
    """Themis schedule (Algorithm 1) on a multi-dimensional network.

    Parameters
    ----------
    topology : topologies.Topology
        A network with ``topology.dims``.
    collective : Collective
        allreduce, reducescatter or allgather over every NPU (any rank order).
    chunks : int, optional
        Chunks per collective (CPC, default 64); rounded up to a multiple of
        ``collective.chunks_per_npu``.  The schedule's collective is
        ``collective.with_chunks(chunks)``.
    policy : {"scf", "fifo"}, optional
        Intra-dimension chunk scheduling (Sec. 4.3); default Smallest-Chunk-First.
    baseline : bool, optional
        Use the static baseline order for every chunk instead of Algorithm 1.

    Returns
    -------
    Schedule
        Timed by the ``congestion`` model.  ``metadata`` holds ``orders``
        (per chunk, e.g. ``["rs:1", "rs:0", "ag:0", "ag:1"]``), ``model_time_s``,
        ``dim_busy_s``, ``dim_utilization``, ``dim_load_s`` (Sec. 4.4 event
        model), ``policy``, ``baseline``.

    Raises
    ------
    InvalidSpecError
        If the topology has no dimensions, the participants are not all NPUs,
        or an option is out of range.
    """
    if not topology.dims:
        raise invalid(f"topology {topology.name!r} for algorithm 'themis'", topology.family,
                      "a multi-dimensional network with topology.dims (torus, mesh, hypercube, "
                      "hier:..., themis:...)")
    if sorted(collective.npus) != list(range(topology.npus)):
        raise invalid("participants for algorithm 'themis'", list(collective.npus),
                      f"every NPU 0..{topology.npus - 1} of {topology.name!r} (any order)")
    _check_kind(collective.kind)
    chunks = _check_int(chunks, "themis chunks", 1)
    if policy not in POLICIES:
        raise invalid("themis policy", policy, "fifo or scf")
    if not isinstance(baseline, (bool, np.bool_)):
        raise invalid("themis baseline", baseline, "True or False")
    c0 = collective.chunks_per_npu
    c = -(-chunks // c0) * c0
    coll = collective.with_chunks(c)
    dims = topology.dims
    if baseline:
        orders = baseline_orders(dims, coll.kind, c)
    else:
        orders, _ = themis_orders(dims, coll.kind, coll.size_bytes, c)
    model = model_time(dims, orders, coll.size_bytes, policy)

    coords = npu_coordinates(topology)
    shard_xy = coords[np.asarray(coll.npus)]
    lines = {k: _lines(coords, k) for k in range(len(dims)) if dims[k].size > 1}
    groups: dict[tuple, list[int]] = {}
    for i, st in enumerate(orders):
        groups.setdefault(tuple(st), []).append(i)
    sizes = [d.size for d in dims]
    per_group = []
    for st, members in groups.items():
        pieces = np.asarray(members, dtype=np.int64)
        rs = [k for ph, k in st if ph == "rs"]
        ag = [k for ph, k in st if ph == "ag"]
        steps = []
        for j, k in enumerate(rs):
            steps.append(_stage_steps(lines[k], coords, shard_xy, c, pieces, k, sizes[k],
                                      rs[:j], DIMENSION_ALGORITHMS[dims[k].kind], "rs"))
        for j, k in enumerate(ag):
            steps.append(_stage_steps(lines[k], coords, shard_xy, c, pieces, k, sizes[k],
                                      ag[j + 1:], DIMENSION_ALGORITHMS[dims[k].kind], "ag"))
        # Bytes of the first stage: scf lists the group with the smaller stages first.
        first = _stage_sizes(dims, [list(st)], 1.0)[0]
        per_group.append((first, members[0], sequence(*steps)))
    if policy == "scf":
        per_group.sort(key=lambda g: (g[0], g[1]))
    else:
        per_group.sort(key=lambda g: g[1])
    plan = Plan(topology, coll)
    plan.add_steps(concurrent(*(g[2] for g in per_group)))
    return plan.finish("themis",
                       orders=[[f"{ph}:{k}" for ph, k in st] for st in orders],
                       model_time_s=model["time_s"], dim_busy_s=model["busy_s"],
                       dim_utilization=model["utilization"], dim_load_s=model["load_s"],
                       policy=policy, baseline=bool(baseline), chunks=c)
