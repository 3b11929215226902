"""Themis: bandwidth-aware chunk scheduling on multi-dimensional networks (``--algorithm themis``).

Rashidi et al., "Themis: A Network Bandwidth-Aware Collective Scheduling
Policy for Distributed Training of DL Models", ISCA'22, Sections 4-5.

* Per dimension the contention-free algorithm of Table 1 (Ring -> ring,
  FullyConnected -> direct, Switch -> halving-doubling), with the latency
  model of Sec. 4.4: a reduce-scatter / all-gather stage on ``dimK`` costs
  ``A_K + n_K * B_K`` with ``A_K = number_of_steps * step_latency`` and
  ``n_K = (P_K - 1) / P_K * bytes`` (footnote 7), ``B_K = 1 / bandwidth``
  (:func:`dimension_cost`).
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

:func:`themis_model` is the model-only entry point: Algorithm 1 (or the
baseline) plus the event model, with per-dimension busy time, utilisation and
the paper's bandwidth-weighted average utilisation (Sec. 3 definition, Figs.
10-11), without materialising transfers - what the Fig. 8/10/11
reproductions in ``experiments/themis/`` use at 1024 NPUs.  Its
``ring_directions=2`` runs ring dimensions in both directions as ASTRA-sim
does (Table 2's aggregate bandwidth counts both; :func:`bidirectional_rings`).

:func:`themis` turns the model's per-chunk dimension orders into a real
:class:`Schedule`: every chunk (piece ``p`` of every shard) runs the stages
of the static hierarchical algorithm (:mod:`evaluators.algorithms.hierarchical`,
same per-line patterns and block layout) in its own order; chunks with the
same order share the pattern calls, different orders run concurrently
(disjoint chunk ids).  The schedule is timed by ``replay(...,
model="congestion")``.  With ``link_order="fifo"`` (default) each link serves
by arrival time, so the policy only decides the listing order of
simultaneous sends; with ``link_order="model"`` each link serves the stages
in the order the event model starts them, which is how Themis enforces its
simulated intra-dimension order at run time (Sec. 4.6.2); the replay then
follows the model within 10% at 1 GB on 32-64 NPU versions of the Table 2
presets with one link per NPU pair (tests/evaluators/test_themis_model.py).
The routed schedule uses one of several parallel links per NPU pair
(``Topology.route``), so on dimensions with ``links > 1`` it is slower than
the model, which counts every link.

Model conventions: the bandwidth a dimension offers one NPU is the link
bandwidth times ``Dimension.links`` times the neighbours the pattern sends to
at once - 1 for ring (the pattern is unidirectional) and switch (the uplink),
``P - 1`` for fully connected (direct sends to all peers over their own
links) (:func:`dimension_bandwidth`).  Steps: ring ``P - 1``, direct 1,
halving-doubling ``log2 P`` (a non-power of two ``P`` adds the fold and the
copy back: 2 steps and ``bytes`` each, Thakur et al. 2005).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from codesign.errors import invalid
from codesign.resources import check_count
from codesign.specs import check_int
from evaluators.algorithms.hierarchical import (
    DIMENSION_ALGORITHMS, line_groups, npu_coordinates, stage_steps)
from evaluators.algorithms.plan import Plan, concurrent, sequence
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule
from topologies.model import Dimension

__all__ = ["themis", "themis_model", "dimension_cost", "dimension_bandwidth", "bidirectional_rings",
           "themis_orders", "baseline_orders", "model_time", "POLICIES"]

POLICIES = ("fifo", "scf")
#: Most chunk-stages (chunks x stages per chunk) the Sec. 4.4 model schedules and times:
#: 2^18 take ~3.5 s on one core (~13 us each); 64 chunks of an 8-stage all-reduce on
#: 1024 NPUs (the README's ~1 s case) are 512, so this is 500 times that.
MAX_MODEL_STAGES = 2 ** 18
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
    alg = _algorithm(dim)
    bw = dimension_bandwidth(dim)
    sent = (p - 1) / p * nbytes            # footnote 7
    if alg == "ring":
        steps = p - 1
    elif alg == "direct":
        steps = 1
    else:  # halving-doubling
        q = 1 << (p.bit_length() - 1)
        steps = int(math.log2(q))
        if q != p:                          # fold in, copy back
            steps += 2
            sent = (q - 1) / q * nbytes + nbytes + nbytes / p
    return steps * dim.latency_s, sent / bw


def _algorithm(dim) -> str:
    alg = DIMENSION_ALGORITHMS.get(dim.kind)
    if alg is None:
        raise invalid("dimension kind", dim.kind, f"one of {', '.join(DIMENSION_ALGORITHMS)}")
    return alg


def dimension_bandwidth(dim) -> float:
    """Bandwidth (B/s) one NPU drives on ``dim`` with the dimension's Table 1 algorithm.

    Link bandwidth times ``Dimension.links`` times the neighbours the pattern
    sends to at once: ``P - 1`` for direct on a fully-connected dimension, 1
    for ring (unidirectional pattern) and halving-doubling (the switch
    uplink).  This is the rate ``1 / B_K`` of Sec. 4.4 and the dimension's
    bandwidth budget in the average utilisation (:func:`themis_model`).  A
    size-1 dimension carries nothing: 0.

    Examples
    --------
    >>> from topologies.model import Dimension
    >>> dimension_bandwidth(Dimension("fc", 8, 25e9, 7e-7, 1))   # 7 peers x 25 GB/s
    175000000000.0
    """
    if dim.size <= 1:
        return 0.0
    bw = dim.bandwidth_Bps * dim.links
    return bw * (dim.size - 1) if _algorithm(dim) == "direct" else bw


def bidirectional_rings(dims) -> tuple:
    """``dims`` with every ring dimension (size > 2) run in both directions.

    The ring pattern of :func:`dimension_cost` drives one direction of a ring.
    ASTRA-sim, which the paper uses (Sec. 5.1), gives half of a dimension's
    queues (and so half of the chunk streams) the clockwise and half the
    anticlockwise direction, using all the links of a ring dimension; Table
    2's "Aggr BW/NPU" of a ring dimension counts both directions too (e.g.
    4D-Ring_FC_Ring_SW dim1: 1500 Gb/s x 2 links = 3000 Gb/s).  In the
    Sec. 4.4 model both directions amount to one ring with twice the parallel
    links: same ``P - 1`` steps, half the bandwidth time.  A ring of
    2 already uses its one cable both ways and is left alone, as are
    ``uniring`` (one direction only) and ``mesh`` (no wrap-around link).

    Returns
    -------
    tuple of Dimension
    """
    return tuple(replace(d, links=2 * d.links) if d.kind == "ring" and d.size > 2 else d
                 for d in dims)


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
    consecutive chunks overlap: while a stage's steps wait out their latency
    the dimension already carries the next chunk's bytes, the "multiple chunks
    per dimension when one chunk cannot saturate it" of Sec. 4.3/4.4.  A free
    dimension picks among its waiting stages the earliest arrival (``fifo``)
    or the smallest chunk (``scf``, Sec. 4.3; a stage's chunk size is the
    larger of its input and output, i.e. the bytes an RS starts from or an AG
    ends with), ties by arrival, then chunk index.  Events closer than a
    relative 1e-12 are taken as simultaneous, so that a dimension chooses
    among stages that arrive "at the same time" up to rounding.

    Parameters
    ----------
    dims : sequence of Dimension
        The network's dimensions.
    orders : list of list of (str, int)
        Per chunk its stages ``(phase, dimension index)``
        (:func:`themis_orders`, :func:`baseline_orders`).
    size_bytes : float
        Collective size per NPU, B (split evenly over the chunks).
    policy : {"fifo", "scf"}
        Intra-dimension order.

    Returns
    -------
    dict
        ``time_s`` (makespan), ``busy_s`` (per dimension bandwidth time),
        ``utilization`` (``busy_s / time_s``), ``load_s`` (``A_K + N_K B_K``
        summed over the stages served), ``stage_start_s`` and ``stage_end_s``
        (ndarray ``(chunks, stages)``: when the dimension starts serving a
        stage, and when the stage completes, s).

    Notes
    -----
    O(S log S) for S stages (chunks x stages per chunk), one heap event per
    stage arrival and per dimension release.
    """
    if policy not in POLICIES:
        raise invalid("themis policy", policy, "fifo or scf")
    n_dims = len(dims)
    chunk = size_bytes / max(len(orders), 1)
    stage_b = _stage_sizes(dims, orders, chunk)
    costs = [[dimension_cost(dims[k], ph, b) for (ph, k), b in zip(st, sb)]
             for st, sb in zip(orders, stage_b)]
    width = max((len(st) for st in orders), default=0)
    t_start = np.full((len(orders), width), np.nan)
    t_end = np.full((len(orders), width), np.nan)
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
        # Take every event of this instant before dispatching, so that a free
        # dimension chooses among all the stages that are ready now.
        t = events[0][0]
        horizon = t + 1e-12 * abs(t)
        while events and events[0][0] <= horizon:
            t, _, typ, payload = heapq.heappop(events)
            if typ == 0:                # chunk i ready for stage s
                i, s = payload
                k = orders[i][s][1]
                key = (t, i) if policy == "fifo" else (stage_b[i][s], t, i)
                heapq.heappush(waiting[k], (key, i, s))
        for k in range(n_dims):
            if free_at[k] <= horizon and waiting[k]:
                _, i, s = heapq.heappop(waiting[k])
                a, b = costs[i][s]
                busy[k] += b
                fixed[k] += a
                free_at[k] = t + b
                push(t + b, 1, k)       # dimension free again
                done = t + b + a
                t_start[i, s], t_end[i, s] = t, done
                end = max(end, done)
                if s + 1 < len(orders[i]):
                    push(done, 0, (i, s + 1))
    util = busy / end if end > 0 else np.zeros(n_dims)
    return {"time_s": float(end), "busy_s": busy.tolist(), "utilization": util.tolist(),
            "load_s": (busy + fixed).tolist(), "stage_start_s": t_start, "stage_end_s": t_end}


def _model_dims(topology_or_dims) -> tuple:
    dims = getattr(topology_or_dims, "dims", topology_or_dims)
    try:
        dims = tuple(dims)
    except TypeError:
        dims = ()
    if not dims or not all(isinstance(d, Dimension) for d in dims):
        name = getattr(topology_or_dims, "name", topology_or_dims)
        raise invalid("network for the Themis model", name,
                      "a multi-dimensional topology (topology.dims) or a sequence of Dimension")
    return dims


def themis_model(topology_or_dims, kind: str, size_bytes: float, *, chunks: int = 64,
                 policy: str = "scf", baseline: bool = False,
                 ring_directions: int = 1) -> dict:
    """Themis without a schedule: Algorithm 1 plus the Sec. 4.4 event model.

    Runs the per-chunk dimension scheduling (:func:`themis_orders`, or the
    static baseline of Sec. 2.3) and times the chunk pipeline with
    :func:`model_time`, without materialising per-NPU transfers (a 1 GB
    all-reduce on 1024 NPUs with 64 chunks is ~1.3e8 transfers; this is a few
    hundred stage events).

    Parameters
    ----------
    topology_or_dims : Topology or sequence of Dimension
        The multi-dimensional network (``topology.dims``; fastest-varying first).
    kind : str
        ``allreduce``, ``reducescatter`` or ``allgather``.
    size_bytes : float
        Collective size per NPU, B (nccl-tests convention: the all-reduce
        buffer, the reduce-scatter input, the all-gather output).
    chunks : int, optional
        Chunks per collective (CPC; 64 as in Sec. 5 "Themis Parameter Values").
    policy : {"scf", "fifo"}, optional
        Intra-dimension chunk scheduling (Sec. 4.3).  The paper's baseline
        uses ``fifo`` (Table 3); with identical orders both give the same time.
    baseline : bool, optional
        Static baseline order (RS dim1..dimD, AG back) instead of Algorithm 1.
    ring_directions : {1, 2}, optional
        Directions a ring dimension's collective uses: 1 (the ring pattern
        :func:`themis` materialises) or 2 (both directions, as ASTRA-sim and
        Table 2's aggregate bandwidth; :func:`bidirectional_rings`).

    Returns
    -------
    dict
        ``time_s`` (s); per dimension ``busy_s`` (bandwidth time ``N_K B_K``,
        s), ``utilization`` (``busy_s / time_s``), ``bandwidth_Bps`` (the
        dimension's budget, :func:`dimension_bandwidth`), ``load_s``;
        ``mean_utilization``: the paper's "average BW utilization" (Sec. 3
        definition, Figs. 10-11): the utilisations averaged with the
        dimensions' bandwidths as weights, i.e. bytes sent per NPU over
        ``time_s * sum(bandwidth_Bps)``; ``orders`` (per chunk its stages
        ``(phase, dimension)``); ``tracker_s`` (final Dim Load Tracker of
        Algorithm 1, None for the baseline); ``stage_start_s``,
        ``stage_end_s`` (``(chunks, stages)`` arrays, s); ``chunks``,
        ``policy``, ``baseline``, ``ring_directions``.

    Raises
    ------
    InvalidSpecError
        For a network without dimensions, an unknown kind or policy, a size
        that is not a finite positive number, or chunks < 1.

    Examples
    --------
    >>> from topologies.model import Dimension
    >>> dims = (Dimension("ring", 4, 48e6, 0.0), Dimension("ring", 4, 24e6, 0.0))
    >>> r = themis_model(dims, "allreduce", 256e6, chunks=4)      # Figs. 5 and 7
    >>> r["time_s"], themis_model(dims, "allreduce", 256e6, chunks=4, baseline=True)["time_s"]
    (7.0, 8.0)
    """
    dims = _model_dims(topology_or_dims)
    _check_kind(kind)
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, (int, float, np.number)) \
            or not math.isfinite(size_bytes) or size_bytes <= 0:
        raise invalid("themis collective size", size_bytes, "a finite number of bytes > 0")
    chunks = check_int("themis chunks", chunks, 1)
    if policy not in POLICIES:
        raise invalid("themis policy", policy, "fifo or scf")
    if not isinstance(baseline, (bool, np.bool_)):
        raise invalid("themis baseline", baseline, "True or False")
    if ring_directions not in (1, 2) or isinstance(ring_directions, bool):
        raise invalid("themis ring_directions", ring_directions, "1 or 2")
    if ring_directions == 2:
        dims = bidirectional_rings(dims)
    # Work bound: one scheduling and one timing event per chunk and stage (at most two
    # stages, RS and AG, per dimension), ~13 us each on one core.
    check_count("the Themis model (an event per chunk and stage)", "chunks", chunks,
                chunks * 2 * len(dims),
                "use fewer chunks (Themis's evaluation uses 64 per collective)",
                maximum=MAX_MODEL_STAGES)
    if baseline:
        orders, tracker = baseline_orders(dims, kind, chunks), None
    else:
        orders, loads = themis_orders(dims, kind, size_bytes, chunks)
        tracker = loads.tolist()
    ev = model_time(dims, orders, size_bytes, policy)
    bw = np.array([dimension_bandwidth(d) for d in dims])
    busy = np.asarray(ev["busy_s"])
    # Sec. 3: bandwidth-weighted average; busy_K * BW_K are the bytes one NPU
    # sends on dimK, so this is bytes sent / (time * total bandwidth).
    mean = float(busy @ bw / (ev["time_s"] * bw.sum())) if ev["time_s"] > 0 else 0.0
    return {**ev, "bandwidth_Bps": bw.tolist(), "mean_utilization": mean, "orders": orders,
            "tracker_s": tracker, "chunks": chunks, "policy": policy,
            "baseline": bool(baseline), "ring_directions": ring_directions}


LINK_ORDERS = ("fifo", "model")


def _tagged(steps: list, stage: int) -> list:
    """Append the stage index to every send of ``steps``."""
    return [[(*send, stage) for send in step] for step in steps]


@register_algorithm("themis", kinds=("allreduce", "reducescatter", "allgather"),
                    options=("chunks", "policy", "baseline", "link_order"),
                    summary="Themis (ISCA'22): per-chunk dimension orders balancing dimension load")
def themis(topology, collective: Collective, *, chunks: int = 64, policy: str = "scf",
           baseline: bool = False, link_order: str = "fifo") -> Schedule:
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
    link_order : {"fifo", "model"}, optional
        How the ``congestion`` replay orders each link's queue.  ``"fifo"``
        (default): by arrival, so the policy only decides the listing order of
        simultaneous sends.  ``"model"``: Sec. 4.6.2 - Themis simulates the
        chunk pipeline and enforces the resulting intra-dimension order at
        run time; every link serves the transfers of the stages in the order
        the Sec. 4.4 model starts them (``stage_start_s`` of
        :func:`themis_model`), the transfers of one stage in schedule order.

    Returns
    -------
    Schedule
        Timed by the ``congestion`` model.  ``metadata`` holds ``orders``
        (per chunk, e.g. ``["rs:1", "rs:0", "ag:0", "ag:1"]``), ``model_time_s``,
        ``dim_busy_s``, ``dim_utilization``, ``dim_load_s``,
        ``mean_utilization`` (Sec. 4.4 event model, :func:`themis_model`),
        ``policy``, ``baseline``, ``link_order``.

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
    chunks = check_int("themis chunks", chunks, 1)
    if link_order not in LINK_ORDERS:
        raise invalid("themis link_order", link_order, "fifo or model")
    c0 = collective.chunks_per_npu
    c = -(-chunks // c0) * c0
    coll = collective.with_chunks(c)
    dims = topology.dims
    # Orders and the Sec. 4.4 timing come from the model; this function only
    # turns the orders into per-NPU transfers.
    model = themis_model(dims, coll.kind, coll.size_bytes, chunks=c, policy=policy,
                         baseline=baseline)
    orders = model["orders"]

    coords = npu_coordinates(topology)
    shard_xy = coords[np.asarray(coll.npus)]
    lines = {k: line_groups(coords, k) for k in range(len(dims)) if dims[k].size > 1}
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
        # Stage j of ``st`` is steps[j]: the RS stages, then the AG stages.
        for j, k in enumerate(rs):
            steps.append(_tagged(stage_steps(lines[k], coords, shard_xy, c, pieces, k, sizes[k],
                                             rs[:j], DIMENSION_ALGORITHMS[dims[k].kind], "rs"),
                                 len(steps)))
        for j, k in enumerate(ag):
            steps.append(_tagged(stage_steps(lines[k], coords, shard_xy, c, pieces, k, sizes[k],
                                             ag[j + 1:], DIMENSION_ALGORITHMS[dims[k].kind], "ag"),
                                 len(steps)))
        # Bytes of the first stage: scf lists the group with the smaller stages first.
        first = _stage_sizes(dims, [list(st)], 1.0)[0]
        per_group.append((first, members[0], sequence(*steps)))
    if policy == "scf":
        per_group.sort(key=lambda g: (g[0], g[1]))
    else:
        per_group.sort(key=lambda g: g[1])
    plan = Plan(topology, coll)
    stage_of: list[np.ndarray] = []          # per send: its stage index, one per transfer
    for step in concurrent(*(g[2] for g in per_group)):
        for ids, src, dst, op, stage in step:
            n = np.size(ids)
            if n:
                plan.send(ids, src, dst, op)
                stage_of.append(np.full(n, stage, dtype=np.int64))
    meta = dict(orders=[[f"{ph}:{k}" for ph, k in st] for st in orders],
                model_time_s=model["time_s"], dim_busy_s=model["busy_s"],
                dim_utilization=model["utilization"], dim_load_s=model["load_s"],
                mean_utilization=model["mean_utilization"], policy=policy,
                baseline=bool(baseline), chunks=c, link_order=link_order)
    if link_order == "fifo":
        return plan.finish("themis", **meta)
    return _replay_in_model_order(plan.schedule(algorithm="themis", link_model="exclusive",
                                                network_model="congestion", **meta),
                                  topology, model["stage_start_s"], c,
                                  np.concatenate(stage_of) if stage_of else np.zeros(0, np.int64))


def _replay_in_model_order(sched: Schedule, topology, stage_start: np.ndarray, c: int,
                           stage: np.ndarray) -> Schedule:
    """Time ``sched`` with every link serving stages in the model's start order.

    Transfer ``i`` carries piece ``chunk[i] % c`` (chunk ids are ``shard * c +
    piece``) in stage ``stage[i]`` of that piece; its hops get the key
    ``stage_start[piece, stage]``.  Keys never contradict the data
    dependencies: a transfer only forwards data of the same piece from an
    earlier stage (a strictly earlier start) or from earlier in the same
    stage (same key, earlier index, which the simulator breaks ties by).
    """
    from evaluators.netsim import replay   # sibling package, as in plan.py

    key = stage_start[sched.chunk % c, stage]
    timed = replay(sched, topology, model="congestion",
                   order=np.repeat(key, np.diff(sched.path_ptr)))
    return timed.retimed(timed.start, timed.end, timed.hop_start, algorithm="themis",
                         link_model="exclusive")

