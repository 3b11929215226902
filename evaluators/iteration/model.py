"""The training-iteration model: :func:`evaluate` and :class:`IterationResult`.

A pure function of (system, workload, strategy, options), Calculon-style (docs/architecture.md
sections 3 and 9): the :class:`~codesign.workloads.demand.Demand` of one iteration is
laid on the topology and timed.

System
------
``system`` is a :class:`~topologies.model.Topology` (or a spec string).  Its NPUs are
either the job's **servers** (``topology.npus == placement.servers``; each server has
``placement.gpus_per_server`` GPUs, by default the hardware's ``gpus_per_server``,
joined by the intra-server fabric of ``Hardware.fabric_bandwidth_Bps``) or its
**GPUs** (``topology.npus == dp x tp x pp``; everything travels on the topology).
Anything else is an :class:`~codesign.errors.InvalidSpecError` naming both numbers.
How collectives and transfers are timed on it: :mod:`evaluators.iteration.comm`.

Timeline
--------
* **Per micro-batch, per pipeline stage** ``p``: forward then backward.  Compute is the
  most loaded GPU of the stage (the demand's :class:`Compute` ops; table owners add
  their lookups); communication steps on the critical path follow the demand's order:
  tensor-parallel all-reduces, expert all-to-alls, ZeRO-3 gathers, pipeline
  send/receive (and the receiving TP all-gather), embedding transfers.  The
  communication between two compute ops is one *block*: its transfers and all-to-alls
  (e.g. of every DP replica) form one MP phase, and each ring op on several groups is one
  concurrent set; the items of a block run one after another in order of first
  appearance.  ``t_p = C_p + K_p`` (compute plus
  critical communication).
* **1F1B pipeline**: ``T_pipe = (m + P - 1) max_p t_p`` (the slowest stage paces the
  pipeline, Narayanan et al. SC'21, Sec. 2.2); the compute part is ``compute_time_s =
  (m + P - 1) max_p C_p`` and the bubble fraction is ``(P-1)/(m+P-1)`` (exactly the
  demand's).  Each of the ``m - (P - 1) / V`` steady-state slots, in which every stage
  runs a micro-batch at once, takes at least the busiest link's bytes of all stages'
  micro-batches over its bandwidth (flow and congestion models: stages whose groups
  cross the same links share them).
* **Gradient synchronisation** (``phase="gradient"``): stage ``p``'s last backward
  ends at ``E_p = T_pipe - p max_q b_q`` (``b_q`` its per-micro-batch backward time);
  bucket ``k`` is ready when the backward of its ``ready_after`` layer in that last
  micro-batch is done; buckets go one after another on the network (``start_k =
  max(ready_k, end_{k-1})``).  With the interleaved schedule (``V`` chunks per stage)
  a chunk's gradients are final at its own last backward, which Megatron-core's
  schedule runs ``c P`` chunk-backwards before the stage's last for chunk ``c``
  (micro-batches in groups of ``P`` per chunk), so its buckets are handed over then,
  ``p`` chunk-backwards later (:func:`_chunk_grad_ready`).  ZeRO-2's earlier
  per-micro-batch reduce-scatters keep the network busy from the iteration start.
  With ``overlap=False`` the buckets start after ``T_pipe``.  Stages synchronise in
  parallel on their own GPUs, and from the first set's start their last gradient sets
  take at least the busiest link's bytes of them all (shared links, as above).  The
  iteration as a whole takes at least its busiest link's bytes over that link's
  bandwidth.
* **Optimizer** (``phase="optimizer"``, ZeRO-1/2 parameter all-gather): after all
  gradients; with ``param_gather_overlap`` under the next forward passes, the first
  micro-batch's without interleaving, ``P`` micro-batches of the previous chunk for
  every chunk after the first with it (:func:`_exposed_param_gather`).

``iteration_time_s = max(T_pipe, gradient end) + optimizer``; ``exposed_communication_s
= iteration_time_s - compute_time_s``.  ``communication_time_s`` is the busiest stage's
total communication time (critical and overlapped), the per-purpose seconds the same per
purpose (``dp`` includes the expert-replica ``dp-expert`` groups).  With pipelining the
exposed time can exceed ``communication_time_s``: the slowest stage's critical
communication paces every one of the ``m + P - 1`` pipeline steps, the ``P - 1`` of the
fill and drain included, while a stage itself communicates in ``m`` of them.  The
``breakdown`` splits the same iteration differently (``compute_s`` without the bubble,
``bubble_s`` apart), so its ``compute_s`` is not ``compute_time_s``.

Network metrics
---------------
* ``bandwidth_tax`` (TopoOpt Sec. 5.4/5.5): traffic volume in the network including
  forwarded traffic / logical demand volume, over all inter-node traffic.  Forwarding
  is counted at NPUs only (host-based forwarding): a message whose path passes through
  ``f`` intermediate NPUs is carried ``1 + f`` times; switches do not count, so switch
  fabrics (fat-tree, ideal switch) have tax 1 and a direct-connect path of ``h`` links
  has ``f = h - 1``.
* ``mean_path_length``: mean minimum hop count (switch hops included) over the
  distinct node pairs that carry traffic.
* ``max_link_utilisation`` / ``mean_link_utilisation``: bytes per link per iteration /
  (capacity x iteration time), over all links.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from codesign.errors import CodesignError, invalid
from codesign.specs import check_number
from evaluators.iteration.comm import BEST, CommCost, CommTimer, System
from evaluators.iteration.inputs import as_cluster, as_execution
from evaluators.iteration.phase import DEFAULT_RTOL
from evaluators.netsim.simulator import get_model
from topologies.routing import hop_counts

__all__ = ["IterationResult", "evaluate", "AboveBound", "resolve_system", "resolve_auto",
           "PURPOSES", "BREAKDOWN"]

#: Per-purpose communication keys of :class:`IterationResult`.
PURPOSES = ("dp", "tp", "pp", "ep", "cp", "embedding", "zero")
#: Keys of :attr:`IterationResult.breakdown`, which add up to the iteration time.
BREAKDOWN = ("compute_s", "recompute_s", "offload_s", "bubble_s", "tp_s", "dp_s", "pp_s",
             "ep_s", "cp_s", "embedding_s", "zero_s", "optimizer_s")
_RING = ("allreduce", "reducescatter", "allgather")


@dataclass(frozen=True)
class IterationResult:
    """Timing of one training iteration (module docstring for definitions; seconds)."""

    workload: str
    strategy: str
    topology: str
    hardware: str
    collective_method: str
    network_model: str
    routing: str
    iteration_time_s: float
    compute_time_s: float
    exposed_communication_s: float
    communication_time_s: float
    bubble_fraction: float
    bandwidth_tax: float
    mean_path_length: float
    max_link_utilisation: float
    mean_link_utilisation: float
    dp_s: float
    tp_s: float
    pp_s: float
    ep_s: float
    embedding_s: float
    zero_s: float
    servers: int
    gpus: int
    cp_s: float = 0.0
    recompute_time_s: float = 0.0
    offload_time_s: float = 0.0
    optimizer_time_s: float = 0.0
    mfu: float = 0.0
    flops_per_gpu_s: float = 0.0
    precision: str = ""
    peak_flops: float = 0.0
    breakdown: dict[str, float] | None = None
    memory: dict[str, Any] | None = None
    model_error: float | None = None
    #: The validated error of comparing this result with another design's on the same
    #: GPU and workload (:func:`evaluators.iteration.uncertainty.comparison_error`).
    comparison_error: float | None = None
    #: With ``collective_method="best"``: the decisions the timed collectives use
    #: (:meth:`BestChoice.to_dict`: winner per kind, group size and size class, every
    #: candidate's time, the gain over ring), sorted; ``None`` otherwise.
    collectives: tuple[dict[str, Any], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (every field; per-purpose seconds also under ``by_purpose_s``)."""
        d = asdict(self)
        d["by_purpose_s"] = {p: d[f"{p}_s"] for p in PURPOSES}
        return d


def resolve_auto(topology, collective_method: str, routing: str) -> tuple[str, str]:
    """Resolve ``"auto"``: on direct-connect fabrics (no switches) ``multiring`` collectives
    (ring all-reduce load-balanced over the fabric's rings, as TopoOpt's TotientPerms NCCL
    integration does, Sec. 6) -- ``hierarchical`` (dimension-wise rings) on tori and meshes
    of several dimensions -- and ``shortest`` routes (host forwarding); on switched
    fabrics ``ring`` (one link per server) and ``ecmp`` routes (per-flow ECMP), except on
    multi-plane Clos fabrics (endpoints with a port on each of several planes), where
    ``spray`` splits every pair over the planes as multi-plane NICs do (a flow pinned to
    one plane would get ``1/planes`` of the endpoint's bandwidth)."""
    direct = topology.switches == 0
    if collective_method == "auto":
        # Tori and meshes of several dimensions: dimension-wise rings (``hierarchical``,
        # the torus all-reduce of Themis Sec. 2 / TPU pods; groups of part of the grid: one
        # ring in the grid's sweep order).  Circulant rings i -> i + p are not links of a
        # grid, and TotientPerms' fallback rings then cross several links per hop: 3.5x
        # slower than dimension-wise rings for BERT on a 4x4x8 torus.
        from topologies.routing import grid_coordinates, is_grid

        if not direct:
            collective_method = "ring"
        elif is_grid(topology):
            collective_method = "hierarchical"
        elif grid_coordinates(topology)[0] is not None:
            collective_method = "ring"   # what is left of a grid: its sweep-ordered ring
        else:
            collective_method = "multiring"
    if routing == "auto":
        routing = "shortest" if direct else ("spray" if _multi_plane(topology) else "ecmp")
    return collective_method, routing


def _multi_plane(topology) -> bool:
    """Whether ``topology`` is a Clos whose endpoints have several uplinks (planes)."""
    from topologies.routing import clos_structure, is_clos

    if not is_clos(topology) or int(topology.params.get("planes", 1) or 1) <= 1:
        return False
    cs = clos_structure(topology)
    return bool(np.diff(cs.up_ptr)[:topology.npus].max(initial=1) > 1)


def resolve_system(topology, placement, hardware) -> System:
    """Map the placement's GPU ranks onto ``topology`` (module docstring rule)."""
    gpus = placement.gpus
    if topology.npus == placement.servers:
        return System(topology, gpus, placement.gpus_per_server, True,
                      float(hardware.fabric_bandwidth_Bps))
    if topology.npus == gpus:
        return System(topology, gpus, 1, False, float(hardware.fabric_bandwidth_Bps))
    raise invalid("topology NPUs", topology.npus,
                  f"the job's servers ({placement.servers}, {placement.gpus_per_server} GPUs "
                  f"each) or its GPUs ({gpus})")


def _occurrence_factor(op, m: int) -> float:
    return op.repeat / m


class AboveBound(CodesignError):
    """:func:`evaluate` with ``time_bound``: the iteration cannot be faster than it."""


def _compute_floor(per: list[dict[str, list]], m: int, V: int, gpus: int) -> float:
    """A lower bound of the iteration time from the compute alone, seconds.

    The pipeline formula of :func:`evaluate` with no communication: ``(m + (P - 1) / V)``
    times the slowest stage's compute per micro-batch, each pass on its busiest GPU
    (recomputation included) -- :func:`evaluate`'s ``T_pipe`` with every stage's critical
    communication at zero, and the iteration is ``max(T_pipe, ...)`` plus the optimizer."""
    from codesign.workloads.demand import Compute

    worst = 0.0
    for stage in per:
        c = 0.0
        for phase in ("forward", "backward"):
            ranks = np.zeros(gpus)
            for op in stage[phase]:
                if isinstance(op, Compute):
                    ranks[list(op.ranks)] += op.seconds * _occurrence_factor(op, m)
            c += float(ranks.max()) if gpus else 0.0
        worst = max(worst, c)
    return (m + (len(per) - 1) / V) * worst


class _Step:
    """A communication step: cost, occurrences per micro-batch, purposes."""

    __slots__ = ("cost", "factor", "purpose")

    def __init__(self, cost: CommCost, factor: float, purpose: str) -> None:
        self.cost, self.factor, self.purpose = cost, factor, purpose


def _purpose(p: str) -> str:
    return "dp" if p == "dp-expert" else p


class _Pass:
    """One stage's pass of one micro-batch: compute and critical communication (s)."""

    __slots__ = ("compute", "recompute", "offload", "steps", "critical", "by_purpose")

    def __init__(self) -> None:
        self.compute = self.recompute = self.offload = self.critical = 0.0
        self.steps: list[_Step] = []
        self.by_purpose: dict[str, float] = {}


def _exposed(seconds: float, hidden_s: float, sm_share: float) -> float:
    """Critical seconds of a communication of ``seconds`` that runs under ``hidden_s``
    seconds of compute while its kernels hold ``sm_share`` of the GPU's SMs.

    That compute runs at ``1 - sm_share`` of its speed while the communication lasts, so
    the pair takes ``max(hidden_s + sm_share * seconds, seconds)``: exposed
    ``max(sm_share * seconds, seconds - hidden_s)``, and all of it without overlap.

    Examples
    --------
    >>> _exposed(1.0, 4.0, 0.25), _exposed(3.0, 1.0, 0.25), _exposed(2.0, 0.0, 0.25)
    (0.25, 2.0, 2.0)
    """
    if hidden_s <= 0.0:
        return seconds
    return max(sm_share * seconds, seconds - hidden_s, 0.0)


def _chunk_of_layers(workload: Any, strategy: Any, stages: Any) -> dict[str, int]:
    """Every layer's model chunk within its stage (interleaved schedule), by name;
    ``stages`` the demand's stage bounds."""
    from codesign.workloads.strategy import layer_chunks

    names = [layer.name for layer in workload.layers]
    return dict(zip(names, layer_chunks(names, strategy, stages)))


def _chunk_grad_ready(end: float, chunk: int, pp: int, stage: int, chunk_bwd: float) -> float:
    """When stage ``stage``'s gradients of model ``chunk`` are handed to the network
    under the interleaved schedule (seconds; the stage's backward ends at ``end``, one
    micro-batch's backward of one chunk takes ``chunk_bwd``).

    Megatron-core's interleaved schedule runs micro-batches in groups of ``pp`` per
    chunk (``get_schedule_table``, ``microbatch_group_size_per_vp_stage`` defaulting to
    the pipeline size), so the last group's backward passes go through the chunks
    from the last to the first, ``pp`` micro-batches each: chunk ``c``'s last backward
    ends ``c pp`` chunk-backwards before the stage's last.  Its gradient reduction is
    launched then, ``stage`` backward steps later (``grad_sync_func`` launched "at the
    same time across the pipeline-parallel group", the default ``align_grad_reduce``),
    and the chunks still pending when the schedule ends, at its end
    (``megatron/core/pipeline_parallel/schedules.py``,
    ``forward_backward_pipelining_with_interleaving``, Megatron-LM commit d98e8a64).

    >>> _chunk_grad_ready(10.0, 0, 8, 3, 0.1), round(_chunk_grad_ready(10.0, 2, 8, 3, 0.1), 9)
    (10.0, 8.7)
    """
    return min(end, end - chunk * pp * chunk_bwd + stage * chunk_bwd)


def _exposed_param_gather(gather_s: float, forward_s: float, pp: int, vpp: int) -> float:
    """Seconds of a stage's ZeRO-1/2 parameter all-gather (``gather_s`` in all) left
    exposed when it overlaps the next forward passes (``forward_s``: one micro-batch's
    forward through the stage).

    Without interleaving the buckets gather one after another under the first
    micro-batch's forward: ``max(0, gather - forward)``.  With ``vpp`` chunks each
    chunk's gather (``gather / vpp``) is launched when the previous chunk's first
    micro-batch starts and must be done before its own first micro-batch, which
    follows ``pp`` micro-batches of the previous chunk (``param_sync_func`` for chunk
    ``c + 1`` at chunk ``c``'s first micro-batch, chunks 0 and 1 at the start; the
    schedule of :func:`_chunk_grad_ready`): chunk 0 hides under its own first forward
    as without interleaving, every later one under ``pp`` forwards of a chunk.

    >>> _exposed_param_gather(1.0, 0.5, 1, 1), round(_exposed_param_gather(1.2, 0.3, 4, 3), 9)
    (0.5, 0.3)
    """
    if vpp <= 1:
        return max(0.0, gather_s - forward_s)
    g, f = gather_s / vpp, forward_s / vpp
    return max(0.0, g - f) + (vpp - 1) * max(0.0, g - pp * f)


def _busiest(steps: list[_Step], bandwidth: np.ndarray, n_links: int) -> tuple[float, str]:
    """Seconds the busiest link needs for the bytes of ``steps`` run side by side (each
    ``factor`` times), and the purpose that puts the most bytes on it."""
    load: dict[str, np.ndarray] = {}
    for st in steps:
        if st.cost.links.size:
            st.cost.add_link_bytes(load.setdefault(st.purpose, np.zeros(n_links)), st.factor)
    if not load:
        return 0.0, "dp"
    seconds = sum(load.values()) / bandwidth
    link = int(np.argmax(seconds))
    return float(seconds[link]), max(load, key=lambda k: load[k][link])


def _extend(entry: list, groups) -> None:
    """Add ``groups`` to a ring set ``[first op, groups]`` (its own list from then on)."""
    if not isinstance(entry[1], list):
        entry[1] = list(entry[1])
    entry[1].extend(groups)


def _bucket_sets(ops: list) -> list[list]:
    """Consecutive collectives of one bucket, purpose, size and kind (a gradient bucket or
    ZeRO's gather of it on every group) as sets ``[first op, groups]``, in order."""
    sets: list[list] = []
    for op in ops:
        if sets and (sets[-1][0].bucket, sets[-1][0].purpose, sets[-1][0].bytes,
                     sets[-1][0].kind) == (op.bucket, op.purpose, op.bytes, op.kind):
            _extend(sets[-1], op.all_groups)
        else:
            sets.append([op, op.all_groups])
    return sets


def _steps(ops: list, timer: CommTimer, m: int, rank_compute: np.ndarray,
           marks: dict[str, float] | None = None) -> _Pass:
    """Walk one stage's ops of one pass (module docstring).

    ``rank_compute`` accumulates per-GPU compute seconds of this pass (recomputation
    included; :attr:`_Pass.recompute` is the recomputation part on the busiest GPU).
    With ``marks``, records for every layer the time (from the pass start) its compute
    has finished.  A ring collective with ``hidden_s`` runs under that much compute and
    only its excess is critical (context parallelism's ring exchange); so does a phase of
    point-to-point transfers, by the least ``hidden_s`` of its ops (overlapped pipeline
    sends).
    """
    from codesign.workloads.demand import CollectiveOp, Compute, Transfer

    out = _Pass()
    steps = out.steps
    rank_re = np.zeros_like(rank_compute)
    rank_off = np.zeros_like(rank_compute)
    mp_src: list[int] = []         # point-to-point transfers
    mp_dst: list[int] = []
    mp_size: list[float] = []
    mp_arrays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # all-to-alls
    mp_purpose: dict[str, int] = {}
    mp_factor = [1.0]
    mp_hidden: list[float] = []    # compute each MP op runs under (the phase: the least)

    mp_share: list[float] = []     # SM share of each MP op's kernels (the phase: the most)

    def critical(seconds: float, purpose: str) -> None:
        out.critical += seconds
        out.by_purpose[purpose] = out.by_purpose.get(purpose, 0.0) + seconds

    def flush_mp() -> None:
        if not mp_src and not mp_arrays:
            return
        parts = [(np.array(mp_src, dtype=np.int64), np.array(mp_dst, dtype=np.int64),
                  np.array(mp_size, dtype=np.float64)), *mp_arrays]
        cost = timer.mp_phase(np.concatenate([a for a, _, _ in parts]),
                              np.concatenate([b for _, b, _ in parts]),
                              np.concatenate([c for _, _, c in parts]))
        purpose = max(mp_purpose, key=mp_purpose.get)
        steps.append(_Step(cost, mp_factor[0], purpose))
        critical(_exposed(cost.time_s, min(mp_hidden, default=0.0),
                          max(mp_share, default=0.0)) * mp_factor[0], purpose)
        mp_src.clear(), mp_dst.clear(), mp_size.clear(), mp_arrays.clear(), mp_purpose.clear()
        mp_hidden.clear(), mp_share.clear()

    def flush_ring(group: list) -> None:
        op = group[0]
        cost = timer.collective_set(op.kind, group[1], op.bytes)
        f = _occurrence_factor(op, m)
        steps.append(_Step(cost, f, _purpose(op.purpose)))
        critical(_exposed(cost.time_s, op.hidden_s, op.sm_share) * f, _purpose(op.purpose))

    def ring_key(op) -> tuple:
        return (op.kind, op.bytes, op.layer, op.purpose, op.phase, op.repeat, op.bucket,
                op.hidden_s, op.sm_share)

    # A *block* is the communication between two compute ops.  All its transfers and
    # all-to-alls form one MP phase; its ring collectives form concurrent sets (same
    # op on several groups, e.g. one per DP replica: one op's ``all_groups`` and those
    # of equal ops); items run in order of first appearance (pipeline sends before the
    # receiving TP group's all-gather).  A set is [its first op, its groups].
    rings: dict[tuple, list] = {}
    order: list = []

    def flush_block() -> None:
        for item in order:
            if item == "mp":
                flush_mp()
            else:
                flush_ring(rings[item])
        rings.clear()
        order.clear()

    for op in ops:
        if isinstance(op, CollectiveOp) and op.kind in _RING:
            key = ring_key(op)
            if key not in rings:
                rings[key] = [op, op.all_groups]
                order.append(key)
            else:   # (a list once two ops share the set; one op's groups stay its own)
                _extend(rings[key], op.all_groups)
            continue
        if not isinstance(op, Compute) and "mp" not in order:
            order.append("mp")
        if isinstance(op, Transfer):
            mp_src.append(op.src)
            mp_dst.append(op.dst)
            mp_size.append(op.bytes)
            pp = _purpose(op.purpose)
            mp_purpose[pp] = mp_purpose.get(pp, 0) + 1
            mp_factor[0] = op.repeat / m
            mp_hidden.append(op.hidden_s)
            mp_share.append(0.0)
        elif isinstance(op, CollectiveOp):   # alltoall: size / n to every other member
            for members in op.all_groups:
                mem = np.asarray(members, dtype=np.int64)
                n = mem.size
                if n >= 2 and op.bytes > 0:
                    s, d = np.meshgrid(mem, mem, indexing="ij")
                    off = s != d
                    mp_arrays.append((s[off], d[off], np.full(int(off.sum()), op.bytes / n)))
                    pp = _purpose(op.purpose)
                    mp_purpose[pp] = mp_purpose.get(pp, 0) + int(off.sum())
                    mp_factor[0] = _occurrence_factor(op, m)
                    mp_hidden.append(op.hidden_s)
                    mp_share.append(op.sm_share)
        elif isinstance(op, Compute):
            flush_block()
            f = _occurrence_factor(op, m)
            idx = list(op.ranks)
            rank_compute[idx] += op.seconds * f
            if op.kind == "recompute":
                rank_re[idx] += op.seconds * f
            elif op.kind == "offload":
                rank_off[idx] += op.seconds * f
            if marks is not None:
                # Compute ops on different ranks (e.g. each table owner's lookups) run
                # side by side; communication blocks synchronise: elapsed = critical
                # communication so far + the most loaded rank's compute so far.
                marks[op.name] = out.critical + float(rank_compute.max())
    flush_block()
    if rank_compute.size:
        busiest = int(np.argmax(rank_compute))
        out.compute = float(rank_compute[busiest])
        out.recompute = float(rank_re[busiest])
        out.offload = float(rank_off[busiest])
    return out


def evaluate(system, workload, execution, *, hardware: Any = None, placement=None,
             collective_method: str | None = None, network_model: str = "flow",
             efficiency: float | None = None, bucket_bytes: float | None = None,
             overlap: bool | None = None, rtol: float = DEFAULT_RTOL,
             routing: str | None = None, check_memory: bool = True,
             tp_comm_overlap: bool | str | None = None,
             param_gather_overlap: bool | None = None,
             pp_comm_overlap: bool | None = None,
             ep_comm_overlap: bool | None = None,
             ep_dispatch: str | None = None,
             attention_kernel: str | None = None,
             time_bound: float | None = None) -> IterationResult:
    """Time one training iteration of ``workload`` run as ``execution`` on ``system``.

    The three inputs are Calculon's (:mod:`evaluators.iteration.inputs`): what is built,
    what is trained, how it runs.  The short form passes a topology and a strategy and
    the rest as keywords (``hardware`` for the system; ``placement``,
    ``collective_method``, ``routing``, ``overlap``, ``bucket_bytes``,
    ``tp_comm_overlap``, ``param_gather_overlap``, ``pp_comm_overlap`` for the
    execution); a keyword that a :class:`Cluster` or :class:`Execution` argument already
    fixes is an error.

    Parameters
    ----------
    system : Cluster, topologies.Topology or str
        The network and GPU type; a topology or spec string (parsed with
        :func:`topologies.registry.load_topology`) takes ``hardware``.  The network's NPUs
        are the job's servers or its GPUs (module docstring).
    workload : codesign.workloads.Workload or str
        A zoo name (its default configuration) or a workload.
    execution : Execution, codesign.workloads.Strategy or str
        How it runs; a strategy
        ``"dp=D,tp=T,pp=P[,microbatches=M][,zero=Z][,ep=E][,embedding=data|model]"``
        takes the execution keywords below.
    hardware : Hardware or str, optional
        GPU (compute roofline, memory, GPUs per server, fabric); default A100-80.
    placement : Placement, optional
        Default :meth:`Placement.for_strategy` with the hardware's GPUs per server.
    collective_method : str, optional
        Registered algorithm for inter-node ring collectives (default ``ring``), or
        ``"auto"`` (:func:`resolve_auto`: ``multiring`` without switches, else ``ring``).
    network_model : str, optional
        ``flow`` (default), ``congestion`` or ``analytical``.
    efficiency : float, optional
        Fraction of peak FLOP/s: forces the constant roofline for every layer.  Default:
        the kernel model of :mod:`codesign.workloads.efficiency` for layers and GPUs it
        covers, the roofline at ``DEFAULT_EFFICIENCY`` for the rest.
    bucket_bytes : float, optional
        Gradient bucket size, bytes (default 25 MiB).
    overlap : bool, optional
        Overlap gradient buckets with the backward pass (default True).
    rtol : float, optional
        Event-batching tolerance of flow phases (0 = exact max-min).
    routing : str, optional
        Paths of transfers and all-to-alls: ``"auto"`` (default, as the command line and
        the searches; :func:`resolve_auto`: ``spray`` on multi-plane Clos fabrics,
        ``ecmp`` on other switched fabrics, ``shortest`` on direct-connect ones),
        ``shortest`` (one minimum-hop path per pair, :meth:`Topology.route`: on a Clos
        every pair between two leaves takes the same uplink, which no ECMP switch does),
        ``ecmp`` (per server pair one of the minimum-hop paths by hash, as switches'
        per-flow ECMP spreads flows), ``dmodk`` or ``spray`` on Clos fabrics
        (:data:`evaluators.iteration.comm.ROUTINGS`).
    tp_comm_overlap : bool or "backward", optional
        Tensor-parallel collectives overlap their layer's GEMMs (Megatron-LM's
        ``--tp-comm-overlap``); ``"backward"``: only the backward pass's, under the
        weight-gradient GEMMs (Megatron-LM's asynchronous TP all-reduce, Korthikanti et
        al. 2022 Sec. 6.2; :func:`~codesign.workloads.demand.demand_for`).
    param_gather_overlap : bool, optional
        ZeRO-1/2's parameter all-gather after the optimizer step overlaps the next
        iteration's first forward micro-batch (Megatron-LM's ``--overlap-param-gather``):
        only its excess over that stage's forward compute is exposed.
    pp_comm_overlap : bool, optional
        With the interleaved schedule, pipeline sends and receives run under one model
        chunk's compute (Megatron-LM's ``overlap_p2p_comm``; ignored for ``vpp = 1``,
        as there): only their excess is exposed.
    ep_comm_overlap : bool, optional
        Expert all-to-alls hide under another micro-batch's compute of their layer
        (DeepSeek-V3's DualPipe; :func:`codesign.workloads.demand.demand_for`).
    ep_dispatch : str, optional
        ``alltoall`` (default), ``hierarchical`` or ``hierarchical-fp8``: how expert
        layers reach their experts (:mod:`codesign.workloads.dispatch`).
    attention_kernel : str, optional
        ``cudnn`` or ``flash2``: the fused attention kernel the framework runs (default
        the GPU's: :meth:`~codesign.workloads.hardware.Hardware.with_attention_kernel`).
    check_memory : bool, optional
        Raise :class:`~codesign.errors.InfeasibleError` when the strategy does not fit
        in GPU memory (default); ``False`` times it anyway (validation against published
        runs whose memory savings the memory model does not know).

    time_bound : float, optional
        Seconds: when the iteration's compute alone already takes at least this long
        (:func:`_compute_floor`, a lower bound of the iteration time), raise
        :class:`AboveBound` instead of timing the communication -- a search asking
        whether a candidate can beat its best so far.

    Returns
    -------
    IterationResult

    Raises
    ------
    InvalidSpecError
        Bad workload, strategy, hardware, method, model, or a topology whose NPU count
        is neither the servers nor the GPUs of the job.
    InfeasibleError
        The strategy does not fit in GPU memory.
    AboveBound
        With ``time_bound``: the iteration cannot be faster than it.

    Examples
    --------
    >>> r = evaluate("ideal:16,degree=4,bw=100Gbps", "resnet50", "dp=128")
    >>> r.iteration_time_s >= r.compute_time_s
    True
    """
    from codesign.workloads import get_workload
    from codesign.workloads.demand import DEFAULT_BUCKET_BYTES, demand_for
    from codesign.workloads.model import Workload
    from codesign.workloads.placement import Placement

    cluster = as_cluster(system, hardware)
    run = as_execution(execution, placement=placement, collective_method=collective_method,
                       routing=routing, overlap=overlap, bucket_bytes=bucket_bytes,
                       tp_comm_overlap=tp_comm_overlap,
                       param_gather_overlap=param_gather_overlap,
                       pp_comm_overlap=pp_comm_overlap, ep_comm_overlap=ep_comm_overlap,
                       ep_dispatch=ep_dispatch, attention_kernel=attention_kernel)
    topo, s = cluster.topology, run.strategy
    hw = cluster.hardware.with_attention_kernel(run.attention_kernel)
    placement, collective_method, routing = run.placement, run.collective_method, run.routing
    overlap, bucket_bytes = run.overlap, run.bucket_bytes
    tp_comm_overlap, param_gather_overlap = run.tp_comm_overlap, run.param_gather_overlap
    pp_comm_overlap, ep_comm_overlap = run.pp_comm_overlap, run.ep_comm_overlap
    if isinstance(workload, str):
        workload = get_workload(workload)
    elif not isinstance(workload, Workload):
        raise invalid("workload", type(workload).__name__, "a zoo name or a Workload")
    if not isinstance(overlap, bool):
        raise invalid("overlap", overlap, "True or False")
    if not isinstance(check_memory, bool):   # ('no' was read as True)
        raise invalid("check_memory", check_memory, "True or False")
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 <= rtol < 1:
        raise invalid("rtol", rtol, "a number in [0, 1) (0 = exact max-min flow phases)")
    if time_bound is not None:   # seconds (nan was ignored, -1 raised AboveBound)
        check_number("time_bound", time_bound)
    if placement is None:
        placement = Placement.for_strategy(s, hw.gpus_per_server)
    sysm = resolve_system(topo, placement, hw)
    collective_method, routing = resolve_auto(topo, collective_method, routing)
    timer = CommTimer(sysm, collective_method, network_model, rtol, routing)
    demand = demand_for(workload, s, hw, placement,
                        bucket_bytes=DEFAULT_BUCKET_BYTES if bucket_bytes is None else bucket_bytes,
                        efficiency=efficiency, check=check_memory,
                        tp_comm_overlap=tp_comm_overlap, pp_comm_overlap=pp_comm_overlap,
                        ep_comm_overlap=ep_comm_overlap, ep_dispatch=run.ep_dispatch)
    if not isinstance(param_gather_overlap, bool):
        raise invalid("param_gather_overlap", param_gather_overlap, "true or false")
    m, P, V = s.m, s.pp, s.vpp

    # Split ops: per stage, forward / backward / gradient / optimizer, in order.
    per: list[dict[str, list]] = [{"forward": [], "backward": [], "gradient": [],
                                   "optimizer": []} for _ in range(P)]
    for op in demand.op_sets:
        per[op.stage][op.phase].append(op)
    if time_bound is not None:
        floor = _compute_floor(per, m, V, placement.gpus)
        if floor >= time_bound:
            raise AboveBound(f"compute alone takes {floor:.6g} s >= {time_bound:.6g} s")

    gpus = placement.gpus
    link_bytes = np.zeros(topo.n_links)
    net = [0.0, 0.0]
    pairs: set = set()
    purpose_s = np.zeros((P, len(PURPOSES)))

    accounted: dict[int, Any] = {}   # the distinct costs accounted (their pairs: once each)

    def account(step: _Step, occurrences: float, stage: int) -> None:
        c = step.cost
        c.add_link_bytes(link_bytes, occurrences)
        net[0] += c.net_bytes * occurrences
        net[1] += c.carried_bytes * occurrences
        accounted[id(c)] = c
        if step.purpose in PURPOSES:
            purpose_s[stage, PURPOSES.index(step.purpose)] += c.time_s * occurrences

    F = np.zeros(P)      # forward compute per micro-batch
    C = np.zeros(P)      # compute per micro-batch (recomputation included)
    R = np.zeros(P)      # of which recomputation
    O = np.zeros(P)      # and exposed activation offloading
    K = np.zeros(P)      # critical communication per micro-batch
    B = np.zeros(P)      # backward pass per micro-batch
    G = np.zeros(P)      # ZeRO-3 gathers of one micro-batch's backward (link time)
    crit: list[dict[str, float]] = []
    marks: list[dict[str, float]] = []
    stage_steps: list[list[_Step]] = []   # one micro-batch's steps of each stage
    zero_bw: list[list[_Step]] = []       # of which its backward pass's ZeRO-3 gathers
    for p in range(P):
        fw = _steps(per[p]["forward"], timer, m, np.zeros(gpus))
        mk: dict[str, float] = {}
        bw = _steps(per[p]["backward"], timer, m, np.zeros(gpus), mk)
        marks.append(mk)
        F[p] = fw.compute
        C[p] = fw.compute + bw.compute
        R[p] = fw.recompute + bw.recompute
        O[p] = fw.offload + bw.offload
        K[p] = fw.critical + bw.critical
        B[p] = bw.compute + bw.critical
        zero_bw.append([st for st in bw.steps if st.purpose == "zero"])
        G[p] = sum(st.cost.time_s * st.factor for st in zero_bw[p])
        crit.append({k: fw.by_purpose.get(k, 0.0) + bw.by_purpose.get(k, 0.0)
                     for k in set(fw.by_purpose) | set(bw.by_purpose)})
        stage_steps.append(fw.steps + bw.steps)
        for st in fw.steps + bw.steps:
            account(st, st.factor * m, p)
    t_stage = C + K
    # 1F1B / GPipe: (m + P - 1) stage-times; interleaved with V chunks: the bubble is
    # (P - 1) / V stage-times (Narayanan et al. SC'21 Sec. 2.2.2).
    slots = m + (P - 1) / V
    T_pipe = slots * float(t_stage.max())
    compute = slots * float(C.max())
    # In the steady state of the pipeline -- its slots between the fill and the drain,
    # m - (P - 1) / V of them -- every stage runs one micro-batch's forward and backward
    # per slot at the same time: their communication, critical and hidden alike, shares
    # the links, so such a slot takes at least the busiest link's bytes of all stages'
    # micro-batches (flow and congestion models).  Each stage's steps were timed as if
    # alone; this binds where stages' groups cross the same links (pipeline sends over
    # multi-hop paths, ZeRO-3 gathers, expert all-to-alls through a shared spine).
    # ZeRO-2/3 reduce-scatter every micro-batch's gradients: all but the last
    # micro-batch's run during the pipeline, one per slot on average, beside the slot's
    # own communication (ZeRO-3's gathers on the same data-parallel links).
    grad_sets = [[(op, timer.collective_set(op.kind, groups, op.bytes))
                  for op, groups in _bucket_sets(per[p]["gradient"])] for p in range(P)]
    shares = bool(topo.n_links) and get_model(network_model).link_model != "none"
    steady = m - (P - 1) / V
    slot_wait, slot_purpose = 0.0, "dp"
    if shares and steady > 0:
        early_sets = [_Step(c, (op.repeat - 1) / m, _purpose(op.purpose))
                      for sets in grad_sets for op, c in sets if op.repeat > 1]
        slot_floor, slot_purpose = _busiest(
            [st for p in range(P) for st in stage_steps[p]] + early_sets, topo.bandwidth,
            topo.n_links)
        slot_wait = max(0.0, slot_floor - float(t_stage.max()))
        T_pipe += steady * slot_wait

    # Gradient buckets, overlapped with the last micro-batch's backward -- or, with the
    # interleaved schedule, with the backward passes after each model chunk's last one
    # (module docstring, "Gradient synchronisation").
    grad_end = T_pipe
    b_max = float(B.max())
    chunk_of = _chunk_of_layers(workload, s, demand.stages) if V > 1 else {}
    last: list[_Step] = []     # the last micro-batch's gradient sets of every stage
    first_start = math.inf     # and when the first of them starts
    for p in range(P):
        costs = grad_sets[p]
        if not costs:
            continue
        E = T_pipe - p * b_max / V
        start_bwd = E - B[p]
        for op, cost in costs:
            last.append(_Step(cost, 1.0, _purpose(op.purpose)))
            account(last[-1], op.repeat, p)
        early = sum((op.repeat - 1) * c.time_s for op, c in costs)
        free = early if overlap else max(T_pipe, early)
        if overlap and G[p]:
            # ZeRO-3's backward gathers (hidden under compute, demand_for) use the same
            # links as these reduce-scatters: in the last backward the links carry both.
            free = max(free, start_bwd) + float(G[p])
            first_start = min(first_start, start_bwd)
            last.extend(zero_bw[p])
        for op, c in costs:
            if not overlap:
                ready = T_pipe
            elif V > 1:
                ready = _chunk_grad_ready(E, chunk_of.get(op.ready_after, 0), P, p,
                                          float(B[p]) / V)
            else:
                ready = start_bwd + marks[p].get(op.ready_after, B[p])
            start = max(ready, free)
            first_start = min(first_start, start)
            free = start + c.time_s
        grad_end = max(grad_end, free)
    # The stages' last gradient sets run side by side (each stage's on its own GPUs, but
    # through shared links where their groups cross the same switches): from the first
    # one's start they take at least the busiest link's bytes of them all (flow and
    # congestion models), however each was timed alone.
    if shares and last:
        grad_end = max(grad_end, first_start + _busiest(last, topo.bandwidth,
                                                        topo.n_links)[0])

    # After the gradients: ZeRO-1/2's parameter all-gather and the optimizer step (a
    # memory-bound pass over the local shard), per stage; the slowest stage counts.
    from codesign.workloads.demand import Compute

    opt = opt_zero = opt_step = 0.0
    for p in range(P):
        t_zero = t_step = 0.0
        ops = [op for op in per[p]["optimizer"] if not isinstance(op, Compute)]
        steps = [op for op in per[p]["optimizer"] if isinstance(op, Compute)]
        for op, groups in _bucket_sets(ops):
            cost = timer.collective_set(op.kind, groups, op.bytes)
            account(_Step(cost, 1.0, _purpose(op.purpose)), op.repeat, p)
            t_zero += cost.time_s * op.repeat
        if param_gather_overlap:
            t_zero = _exposed_param_gather(t_zero, float(F[p]), P, V)
        t_step = max((op.seconds * op.repeat for op in steps), default=0.0)
        if t_zero + t_step > opt:
            opt, opt_zero, opt_step = t_zero + t_step, t_zero, t_step

    for c in accounted.values():
        pairs.update(c.pairs)
    iteration = float(max(T_pipe, grad_end) + opt)
    # Physical floor where the network model has links (flow, congestion): no link
    # carries more bytes than its bandwidth moves in the iteration.  The steps above book
    # the collectives of groups that share links as if each had them alone where they
    # overlap -- ZeRO-3's reduce-scatters of the earlier micro-batches beside the
    # micro-batches' gathers (utilisation 1.4: 1.52 s where ZeRO-2 alone took 0.80),
    # concurrent groups of several stages or of experts and dense layers (up to 2.8) --
    # so the busiest link's bytes bound the iteration from below; the excess is exposed
    # gradient communication in the breakdown.  (The analytical model has no link
    # sharing by definition: ASTRA-sim's congestion-unaware model.)
    excess = 0.0
    if link_bytes.size and shares:
        excess = max(0.0, float(np.max(link_bytes / topo.bandwidth)) - iteration)
    iteration += excess
    cap = topo.bandwidth * iteration
    util = link_bytes / cap if iteration > 0 else np.zeros_like(link_bytes)
    if pairs:
        pa = np.array(sorted(pairs), dtype=np.int64)
        mpl = float(hop_counts(topo, pa[:, 0], pa[:, 1]).mean())
    else:
        mpl = 0.0
    per_purpose = purpose_s.max(axis=0)

    # Breakdown of the iteration (parts add up to it): the slowest stage's micro-batches
    # (compute, recomputation, critical communication by purpose), the pipeline bubble
    # (P - 1) / V of its stage time, the gradient synchronisation left after the pipeline
    # (dp), ZeRO's gather and the optimizer step.
    q = int(np.argmax(t_stage))
    parts: dict[str, float] = dict.fromkeys(BREAKDOWN, 0.0)
    parts["compute_s"] = m * float(C[q] - R[q] - O[q])
    parts["recompute_s"] = m * float(R[q])
    parts["offload_s"] = m * float(O[q])
    for purpose, sec in crit[q].items():
        key = f"{purpose}_s"
        parts[key if key in parts else "dp_s"] += m * sec
    # (the steady slots' wait for shared links: the purpose that loads the busiest link
    # most)
    key = f"{slot_purpose}_s"
    parts[key if key in parts else "dp_s"] += steady * slot_wait
    parts["bubble_s"] = T_pipe - m * float(t_stage[q]) - steady * slot_wait
    parts["dp_s"] += max(0.0, float(grad_end) - T_pipe) + excess
    parts["zero_s"] += opt_zero
    parts["optimizer_s"] = opt_step
    peak = hw.peak_flops(demand.precision)
    model_flops = workload.flops_per_iteration
    flops_per_gpu_s = model_flops / gpus / iteration if iteration > 0 else 0.0
    return IterationResult(
        workload=workload.name, strategy=str(s), topology=topo.name, hardware=hw.name,
        collective_method=collective_method, network_model=network_model, routing=routing,
        iteration_time_s=iteration, compute_time_s=compute + opt_step,
        exposed_communication_s=max(0.0, iteration - compute - opt_step),
        communication_time_s=float(purpose_s.sum(axis=1).max()),
        bubble_fraction=demand.bubble_fraction,
        bandwidth_tax=net[1] / net[0] if net[0] > 0 else 1.0,
        mean_path_length=mpl,
        max_link_utilisation=float(util.max()) if util.size else 0.0,
        mean_link_utilisation=float(util.mean()) if util.size else 0.0,
        **{f"{k}_s": float(v) for k, v in zip(PURPOSES, per_purpose)},
        servers=placement.servers, gpus=gpus,
        recompute_time_s=slots * float(R[q]), offload_time_s=slots * float(O[q]),
        optimizer_time_s=opt_step,
        mfu=flops_per_gpu_s / peak, flops_per_gpu_s=flops_per_gpu_s,
        precision=demand.precision, peak_flops=peak, breakdown=parts,
        memory=demand.memory.to_dict(),
        model_error=_model_error(hw, efficiency, demand.precision, workload),
        comparison_error=_model_error(hw, efficiency, demand.precision, workload,
                                      comparison=True),
        collectives=tuple(c.to_dict() for c in timer.decisions()) if timer.method == BEST
        else None)


def _model_error(hw, efficiency, precision: str, workload, *,
                 comparison: bool = False) -> float | None:
    """The validated relative error of the compute model behind this result, when the
    calibrated kernel model timed it (:func:`~evaluators.iteration.uncertainty.validated_error`:
    ``None`` for a workload outside the validation, such as mixture-of-experts); with
    ``comparison`` the error of comparing it with another design on this GPU and
    workload (:func:`~evaluators.iteration.uncertainty.comparison_error`)."""
    from codesign.workloads.efficiency import PROFILE_FORMATS
    from evaluators.iteration.uncertainty import comparison_error, validated_error

    if efficiency is not None or precision not in PROFILE_FORMATS:
        return None
    return (comparison_error if comparison else validated_error)(hw, (workload,))
