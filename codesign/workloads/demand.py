"""Traffic demand of one training iteration: :class:`Demand` and :func:`demand_for`.

A demand lists, in order, what one iteration does: compute on GPU ranks, collectives on
groups of ranks and point-to-point model-parallel transfers.  It is the input of the
iteration model (``evaluators``) and, reduced to servers, of TopoOpt's TopologyFinder
(NSDI'23, Algorithm 1 takes ``T_AllReduce`` and ``T_MP``).

Order and repetition
--------------------
``Demand.ops`` is one micro-batch's forward pass (stage by stage, layer by layer), then
its backward pass (reverse order), each op with ``repeat = m`` (it happens once per
micro-batch); then the once-per-iteration gradient synchronisation (``phase="gradient"``;
``ready_after`` names the layer whose backward completes the bucket, so it can overlap
the last micro-batch's backward -- with the interleaved schedule, the backward passes
after its model chunk's last one: ``evaluators.iteration.model``); then ZeRO's
parameter all-gather after the optimizer
step (``phase="optimizer"``).  How the 1F1B schedule interleaves micro-batches is the
iteration model's business; :attr:`Demand.bubble_fraction` gives ``(p-1)/(m+p-1)``.

Concurrent groups
-----------------
The same collective on every group of a stage -- the TP groups (one per data-parallel
replica), the DP groups (one per TP rank), the CP groups -- is stored once
(:attr:`Demand.op_sets`): one :class:`CollectiveOp` whose ``groups`` lists them all
(a :class:`GroupSet`), where one op per group made a 32k-GPU job's demand about a million
ops.  :attr:`Demand.ops` expands the sets to one op per group for readers that want
that view; the matrices and totals below read the sets directly.

What each strategy emits (``b`` = micro-batch samples, ``T`` = tp, sizes follow the
nccl-tests convention of docs/architecture.md section 4)
--------------------------------------------------------------------------------------
The per-layer numbers (parameters, FLOPs, activations, bytes of each collective) come
from the sharding rule, :mod:`codesign.workloads.sharding`; this module orders them.

* Data parallel: gradients, in backward order, cut into buckets of ``bucket_bytes``
  (PyTorch DDP's default 25 MiB); one ``allreduce`` of each bucket per DP group
  (ranks with the same TP index and stage).  A ring all-reduce of ``G`` bytes moves
  ``2 (n-1)/n G`` out of every member.
* ZeRO-1/2 (Rajbhandari et al. SC'20, Sec. 5-7): ``reducescatter`` of each bucket
  (size ``G``, ``(n-1)/n G`` per member) instead of the all-reduce, and after the
  optimizer step an ``allgather`` of the updated parameters (size ``W``, ``(n-1)/n W``
  per member): the same ``2 (n-1)/n`` volume as DP.  ZeRO-2 reduce-scatters every
  micro-batch (gradients are sharded, so they cannot accumulate): ``repeat = m``.
* ZeRO-3: parameters all-gathered before each layer's forward and again before its
  backward (size ``W`` each, ``repeat = m``), gradients reduce-scattered in buckets:
  ``3 (n-1)/n`` per member, 1.5 x DP (Sec. 7.2.2).  ``W`` counts the weights in the
  format the GPU keeps them (strategy ``fp8_params``: 1 byte for the 8-bit GEMMs').
* Tensor parallel (Megatron-LM, Shoeybi et al. 2019, Sec. 3): after each layer's
  forward an ``allreduce`` of ``b x tp_allreduce_bytes`` on its TP group, after its
  backward one of ``b x tp_bwd_allreduce_bytes`` (two each way per transformer block).
  With sequence parallelism each becomes a ``reducescatter`` and an ``allgather`` of
  that size, and the backward of a sub-layer with a forward all-gather gathers its
  sequence-split input once more for the weight gradient (Korthikanti et al. 2022, Sec.
  4.2.2: only the split input is kept).
* Pipeline parallel (1F1B): at each stage boundary, each TP rank sends ``b x
  activation_bytes / T`` of the boundary layer's output to the same TP rank of the next
  stage in the forward pass, and the same gradient back in the backward pass; with
  ``T > 1`` the receiving TP group all-gathers the pieces (Megatron's scatter/gather
  optimisation, Narayanan et al. SC'21, Sec. 4.1).
* Expert parallel: around each expert layer an ``alltoall`` on the EP group before
  (dispatch) and after (combine) the experts, each ``b x ep_alltoall_bytes / T`` per
  rank, forward and backward; with ``ep_dispatch="hierarchical"`` each becomes a rail
  all-to-all over the network and an NVLink one per server
  (:mod:`codesign.workloads.dispatch`).  Expert gradients synchronise over the ranks holding
  the same experts (:attr:`Strategy.expert_dp`: ``dp x cp / ep``, or ``tp x dp x cp /
  ep`` with folded experts), the rest over the whole DP group.
* Embedding tables, ``embedding=model`` (TopoOpt Sec. 2.1): table ``i`` lives on GPU
  ``o``; forward, every other rank sends ``o`` its samples' indices (``b x lookups x
  index_bytes``, many-to-one) and ``o`` returns the pooled rows (``b x table_dim x
  dtype``, one-to-many); backward, every rank sends ``o`` the gradient of its pooled
  rows.  When every rank holds tables of the same total size (tables spread over all
  GPUs), the three exchanges are ``alltoall`` collectives instead.  ``embedding=data``:
  tables are replicated and their gradients join the DP buckets.

Server matrix and split
-----------------------
:meth:`Demand.server_matrix` sums bytes per iteration between servers (diagonal zero:
traffic inside a server is on its fabric, :meth:`Demand.gpu_matrix`'s diagonal blocks).  A ring
collective is a ring over its members in the order given (rank order = placement
order): every member sends the next ``2 (n-1)/n x size`` (allreduce) or ``(n-1)/n x
size`` (reducescatter, allgather); an ``alltoall`` sends ``size / n`` to every other
member.  :meth:`Demand.split` gives TopoOpt's mutable AllReduce traffic (ring
collectives: their order can be permuted, Sec. 4.3) as server groups with bytes, and
its immutable MP traffic (transfers and all-to-alls) as a server matrix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any, Union

import numpy as np

from codesign.collective_kinds import RING_KINDS, ring_bytes_per_member
from codesign.errors import invalid
from codesign.specs import check_number
from codesign.workloads.compute import layer_time, recompute_time, resolve_precision
from codesign.workloads.dispatch import check_dispatch, dispatch_legs, overlap_sm_share
from codesign.workloads.hardware import Hardware, get_hardware
from codesign.workloads.memory import MemoryBreakdown, check_memory, memory_per_gpu
from codesign.workloads.model import Layer, Workload
from codesign.workloads.placement import Placement
from codesign.workloads.sharding import LayerShard, reruns_forward, shard_layer
from codesign.workloads.strategy import (
    Strategy, as_strategy, check_applicable, is_table, layer_offload, layer_strategies,
    stage_bounds)

__all__ = ["Compute", "CollectiveOp", "Transfer", "Demand", "demand_for",
           "DEFAULT_BUCKET_BYTES", "RING_KINDS", "ring_bytes_per_member",
           "optimizer_step_bytes", "offload_exposed_s"]

#: PyTorch DDP's ``bucket_cap_mb=25`` (MiB).
DEFAULT_BUCKET_BYTES = 25.0 * 2**20


@dataclass(frozen=True)
class Compute:
    """Work on GPUs: every rank of ``ranks`` runs it for ``seconds`` (per occurrence).

    ``name`` is the layer (or ``tables`` for the placed embeddings, ``optimizer`` for
    the optimizer step), ``flops`` the FLOPs per GPU per occurrence, ``repeat`` the
    occurrences per iteration; ``kind`` is ``compute`` (the model's own forward and
    backward), ``recompute`` (activation recomputation) or ``optimizer``.
    """

    name: str
    phase: str
    ranks: tuple[int, ...]
    seconds: float
    flops: float
    stage: int = 0
    repeat: int = 1
    kind: str = "compute"


@dataclass(frozen=True)
class CollectiveOp:
    """A collective on ``members`` (GPU ranks, ring order) of ``bytes`` (nccl-tests size).

    ``purpose`` is ``dp``, ``dp-expert``, ``zero``, ``tp``, ``pp``, ``ep``, ``cp`` or
    ``embedding``; ``bucket`` numbers gradient buckets per stage and purpose;
    ``ready_after`` names the layer whose backward completes the bucket;
    ``hidden_s`` is compute time the collective runs under (context parallelism's ring
    exchange overlaps the attention blocks it feeds), so only its excess is exposed;
    ``sm_share`` is the fraction of the GPU's SMs the collective's kernels take from that
    compute while they run (DeepEP's all-to-alls:
    :func:`codesign.workloads.dispatch.overlap_sm_share`), so a hidden collective still
    costs that share of its time.  ``groups`` (when not empty) lists every group the op
    runs on at the same time, ``members`` being the first (:attr:`all_groups`,
    :meth:`expand`).
    """

    kind: str
    members: tuple[int, ...]
    bytes: float
    phase: str
    purpose: str
    overlappable_with_backward: bool = False
    bucket: int | None = None
    ready_after: str = ""
    layer: str = ""
    stage: int = 0
    repeat: int = 1
    hidden_s: float = 0.0
    sm_share: float = 0.0
    groups: tuple[tuple[int, ...], ...] = ()

    @property
    def all_groups(self) -> tuple[tuple[int, ...], ...]:
        """Every group the op runs on at once: ``groups``, or ``(members,)`` alone."""
        return self.groups or (self.members,)

    def expand(self) -> list[CollectiveOp]:
        """One op per group (``groups`` empty): the per-group view of :attr:`Demand.ops`."""
        if not self.groups:
            return [self]
        return [replace(self, members=g, groups=()) for g in self.groups]


class GroupSet(tuple):
    """A tuple of rank groups that computes its hash once.

    The iteration model looks the same set of groups (a stage's TP groups, ...) up in
    its caches once per layer and pass; hashing thousands of member tuples each time
    cost more than timing them.  Equal to (and hashed as) the plain tuple."""

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = h = tuple.__hash__(self)
            return h


@lru_cache(maxsize=64)
def _interned(groups: GroupSet) -> GroupSet:
    """The first-seen equal group set: lookups of a later evaluation's set in the iteration
    model's caches then find their own key object (identity) instead of comparing
    thousands of members (64 sets: a 32k-GPU stage's set is about 1 MB)."""
    return groups


def _on(groups, kind: str, nbytes: float, phase: str, purpose: str,
        *args: Any, **fields: Any) -> list[CollectiveOp]:
    """One op of ``kind`` on every group of ``groups`` at once (none without groups).

    The same collective on the TP groups of a stage (one per data-parallel replica), its
    DP groups (one per TP rank), ... is one :class:`CollectiveOp` whose ``groups`` lists
    them, ``members`` the first: thousands of groups at 10k+ GPUs would otherwise be
    thousands of identical ops per layer, which building and walking dominated the
    iteration model's time (``Demand.ops`` expands them again for readers that want one
    op per group)."""
    groups = groups if isinstance(groups, GroupSet) else GroupSet(groups)
    if not groups:
        return []
    return [CollectiveOp(kind, groups[0], nbytes, phase, purpose, *args,
                         groups=groups if len(groups) > 1 else (), **fields)]


@dataclass(frozen=True)
class Transfer:
    """A point-to-point model-parallel transfer of ``bytes`` from rank ``src`` to ``dst``.

    ``hidden_s`` is compute time the transfer runs under (pipeline sends overlapped with
    the next model chunk, ``pp_comm_overlap``), so only its excess is exposed.
    """

    src: int
    dst: int
    bytes: float
    phase: str
    purpose: str
    layer: str = ""
    stage: int = 0
    repeat: int = 1
    hidden_s: float = 0.0


Op = Union[Compute, CollectiveOp, Transfer]


@dataclass(frozen=True)
class Demand:
    """Compute and communication of one training iteration (module docstring).

    Attributes
    ----------
    workload, hardware : str
        Names.
    strategy : Strategy
    placement : Placement
    op_sets : tuple of Compute, CollectiveOp, Transfer
        In order; a collective on several groups at once is one op (its ``groups``).
        :attr:`ops` is the same list with one op per group.
    stages : tuple of (start, stop)
        Layer index range of each pipeline stage.
    microbatch_size : float
        Samples per micro-batch per data-parallel replica.
    bucket_bytes : float
        Gradient bucket size used.
    memory : MemoryBreakdown
        Per-GPU memory of the most loaded GPU.
    """

    workload: str
    hardware: str
    strategy: Strategy
    placement: Placement
    op_sets: tuple[Op, ...]
    stages: tuple[tuple[int, int], ...]
    microbatch_size: float
    bucket_bytes: float
    memory: MemoryBreakdown
    precision: str = ""

    # ------------------------------------------------------------------ views
    @cached_property
    def ops(self) -> tuple[Op, ...]:
        """The ops in order with one :class:`CollectiveOp` per group (:attr:`op_sets`
        expanded; built on first use)."""
        out: list[Op] = []
        for op in self.op_sets:
            if isinstance(op, CollectiveOp) and op.groups:
                out += op.expand()
            else:
                out.append(op)
        return tuple(out)

    def _collective_groups(self) -> Iterator[tuple[CollectiveOp, tuple[int, ...]]]:
        """(op, group) for every group of every collective, in order."""
        for op in self.op_sets:
            if isinstance(op, CollectiveOp):
                for grp in op.all_groups:
                    yield op, grp

    @property
    def microbatches(self) -> int:
        return self.strategy.m

    @property
    def bubble_fraction(self) -> float:
        """Pipeline bubble ``(p - 1) / (v m + p - 1)`` (``v = 1`` unless interleaved)."""
        return self.strategy.bubble_fraction

    def compute(self) -> list[Compute]:
        return [op for op in self.op_sets if isinstance(op, Compute)]

    def collectives(self) -> list[CollectiveOp]:
        return [op for op in self.ops if isinstance(op, CollectiveOp)]

    def transfers(self) -> list[Transfer]:
        return [op for op in self.op_sets if isinstance(op, Transfer)]

    # ------------------------------------------------------------------ matrices
    def _pairs(self, *, mutable: bool | None = None) -> Iterator[tuple[np.ndarray, np.ndarray,
                                                                        np.ndarray]]:
        """(src ranks, dst ranks, bytes) per op, per iteration; ``mutable`` filters."""
        for op in self.op_sets:
            if isinstance(op, Transfer):
                if mutable is not True:
                    yield (np.array([op.src]), np.array([op.dst]),
                           np.array([op.bytes * op.repeat]))
            elif isinstance(op, CollectiveOp):
                ring = op.kind in RING_KINDS
                if mutable is not None and ring != mutable:
                    continue
                n = len(op.members)
                if n < 2:
                    continue
                m = np.asarray(op.all_groups, dtype=np.int64)   # groups x members
                if ring:
                    per = ring_bytes_per_member(op.kind, op.bytes, n) * op.repeat
                    yield m.ravel(), np.roll(m, -1, axis=1).ravel(), np.full(m.size, per)
                else:  # alltoall: size / n to every other member
                    off = ~np.eye(n, dtype=bool)
                    src = np.repeat(m, n, axis=1).reshape(-1, n, n)[:, off]
                    dst = np.tile(m, (1, n)).reshape(-1, n, n)[:, off]
                    yield src.ravel(), dst.ravel(), np.full(src.size, op.bytes / n * op.repeat)

    def _accumulate(self, index: np.ndarray, size: int, *, mutable: bool | None = None
                    ) -> np.ndarray:
        out = np.zeros((size, size))
        for src, dst, b in self._pairs(mutable=mutable):
            np.add.at(out, (index[src], index[dst]), b)
        return out

    def gpu_matrix(self, *, mutable: bool | None = None) -> np.ndarray:
        """GPU x GPU bytes per iteration (``mutable``: only ring / only MP traffic).

        Dense ``gpus x gpus``: for very large jobs prefer :meth:`server_matrix`.
        """
        n = self.placement.gpus
        return self._accumulate(np.arange(n), n, mutable=mutable)

    def _server_full(self, *, mutable: bool | None = None) -> np.ndarray:
        return self._accumulate(self.placement.server_array(), self.placement.servers,
                                mutable=mutable)

    def server_matrix(self) -> np.ndarray:
        """Servers x servers bytes per iteration, all traffic (diagonal zero).

        Rows are sources, columns destinations, as TopoOpt's Fig. 1 heatmaps.
        """
        out = self._server_full()
        np.fill_diagonal(out, 0.0)
        return out

    def split(self) -> tuple[list[tuple[tuple[int, ...], float]], np.ndarray]:
        """TopologyFinder's inputs: AllReduce groups and the MP server matrix.

        Returns
        -------
        groups : list of (servers, bytes)
            One entry per distinct server group of the ring collectives (allreduce,
            reducescatter, allgather), servers in ring order (first appearance in the
            members' order), ``bytes`` = what each server sends its successor per
            iteration in a ring over the group (summed over the group's collectives).
            Groups inside one server are left out (no network traffic).
        mp : numpy.ndarray
            Servers x servers bytes per iteration of the point-to-point transfers and
            all-to-alls (immutable: fixed by strategy and placement).
        """
        groups: dict[tuple[int, ...], float] = {}
        g = self.placement.gpus_per_server
        for op, members in self._collective_groups():
            if op.kind not in RING_KINDS:
                continue
            servers = tuple(dict.fromkeys(r // g for r in members))
            if len(servers) < 2:
                continue
            groups[servers] = groups.get(servers, 0.0) + op.repeat * ring_bytes_per_member(
                op.kind, op.bytes, len(members))
        mp = self._server_full(mutable=False)
        np.fill_diagonal(mp, 0.0)
        return list(groups.items()), mp

    def split_totals(self) -> tuple[float, float]:
        """Totals of :meth:`split` without building matrices: ``(R, A)`` bytes per iteration.

        ``R`` = sum over AllReduce groups of ``bytes x group size`` (what all servers of the
        rings send), ``A`` = the MP server matrix's sum.  Per op arithmetic, O(members):
        the inputs of TopoOpt's Eq. (1) in microseconds, where :meth:`split` builds the
        servers x servers matrix.
        """
        g = self.placement.gpus_per_server
        R = A = 0.0
        for op in self.op_sets:
            if isinstance(op, Transfer):
                if op.src // g != op.dst // g:
                    A += op.bytes * op.repeat
                continue
            if not isinstance(op, CollectiveOp) or len(op.members) < 2:
                continue
            n = len(op.members)
            for members in op.all_groups:
                servers = np.asarray(members, dtype=np.int64) // g
                if op.kind in RING_KINDS:
                    k = np.unique(servers).size
                    if k >= 2:
                        R += op.repeat * ring_bytes_per_member(op.kind, op.bytes, n) * k
                else:  # alltoall: size / n between every ordered pair on two servers
                    counts = np.unique(servers, return_counts=True)[1]
                    pairs = n * n - int((counts.astype(np.int64) ** 2).sum())
                    A += pairs * op.bytes / n * op.repeat
        return R, A

    # ------------------------------------------------------------------ summaries
    def bytes_by_purpose(self) -> dict[str, float]:
        """Bytes per iteration sent between GPUs, by purpose (all GPUs summed)."""
        out: dict[str, float] = {}
        for op in self.op_sets:
            if isinstance(op, Transfer):
                out[op.purpose] = out.get(op.purpose, 0.0) + op.bytes * op.repeat
            elif isinstance(op, CollectiveOp):
                n = len(op.members)
                if op.kind in RING_KINDS:
                    b = n * ring_bytes_per_member(op.kind, op.bytes, n)
                else:
                    b = (n - 1) * op.bytes  # n members x (n-1)/n of the buffer
                for _ in op.all_groups:   # added per group: the sums of the per-group ops
                    out[op.purpose] = out.get(op.purpose, 0.0) + b * op.repeat
        return out

    def summary(self) -> dict[str, Any]:
        """Totals for people and ``--json`` (no per-op list)."""
        matrix = self.server_matrix()
        groups, mp = self.split()
        return {
            "workload": self.workload, "hardware": self.hardware,
            "strategy": self.strategy.to_dict(), "placement": self.placement.to_dict(),
            "microbatch_size": self.microbatch_size, "microbatches": self.microbatches,
            "bubble_fraction": self.bubble_fraction,
            "stages": [list(s) for s in self.stages],
            "ops": {"compute": len(self.compute()),
                    "collectives": sum(1 for _ in self._collective_groups()),
                    "transfers": len(self.transfers())},
            "compute_s_per_gpu_max": _max_compute(self),
            "bytes_by_purpose": self.bytes_by_purpose(),
            "inter_server_bytes": float(matrix.sum()),
            "allreduce_groups": len(groups), "allreduce_bytes": float(sum(b for _, b in groups)),
            "mp_bytes": float(mp.sum()),
            "memory": self.memory.to_dict(),
        }


def _max_compute(d: Demand) -> float:
    per = np.zeros(d.placement.gpus)
    for op in d.compute():
        per[list(op.ranks)] += op.seconds * op.repeat
    return float(per.max())


# ---------------------------------------------------------------------------- builder
#: Most gradient buckets of one stream: PyTorch's 25 MB buckets cut a 1T-parameter
#: model's gradients into 80,000; a bucket_bytes of 1 byte cut ResNet-50's into 10^8 ops
#: (MemoryError).
MAX_BUCKETS = 100_000


def _buckets(sizes: list[tuple[str, float]], cap: float) -> list[tuple[float, str]]:
    """Cut a stream of (layer, bytes) in backward order into buckets of ``cap`` bytes.

    Returns (bucket bytes, layer whose backward completes it); the last may be smaller.

    Raises
    ------
    InvalidSpecError
        ``bucket_bytes`` (``cap``) so small that the stream would take more than
        :data:`MAX_BUCKETS` buckets.
    """
    total = sum(b for _, b in sizes)
    if total / cap > MAX_BUCKETS:
        raise invalid("bucket_bytes", cap, f"at least {total / MAX_BUCKETS:,.0f} bytes for "
                      f"these {total:,.0f} bytes of gradients (at most {MAX_BUCKETS:,} "
                      "buckets)")
    out: list[tuple[float, str]] = []
    fill = 0.0
    for name, b in sizes:
        while b > 0:
            take = min(b, cap - fill)
            fill += take
            b -= take
            if fill >= cap * (1 - 1e-12):
                out.append((cap, name))
                fill = 0.0
        last = name
    if fill > 0:
        out.append((fill, last))
    return out


def optimizer_step_bytes(params: float, optimizer_bytes_per_param: float,
                         dtype_bytes: int, grad_bytes: float) -> float:
    """HBM bytes the optimizer step moves for ``params`` parameters on one GPU.

    The step is memory bound (an element-wise pass): it reads and writes the optimizer
    state (``K`` bytes each way: Adam's fp32 master weights, momentum and variance in
    mixed precision, Rajbhandari et al. SC'20 Sec. 3.1), reads the gradient (``g`` =
    ``grad_bytes``, :meth:`Strategy.grad_bytes`) and reads and writes the weights
    (``d`` each): ``(2 K + 2 d + g)`` bytes per parameter (``3 d`` for plain SGD with
    gradients in the weights' format).
    """
    return params * (2.0 * optimizer_bytes_per_param + 2.0 * dtype_bytes + grad_bytes)


def demand_for(workload: Workload, strategy: Strategy | str, hardware: Hardware | str,
               placement: Placement | None = None, *,
               bucket_bytes: float = DEFAULT_BUCKET_BYTES,
               efficiency: float | None = None, index_bytes: int = 8,
               check: bool = True, tp_comm_overlap: bool | str = False,
               pp_comm_overlap: bool = False, ep_comm_overlap: bool = False,
               ep_dispatch: str = "alltoall") -> Demand:
    """The demand of one training iteration of ``workload`` under ``strategy``.

    Parameters
    ----------
    workload : Workload
    strategy : Strategy or str
        A strategy string (:mod:`codesign.workloads.strategy`).
    hardware : Hardware or str
        GPU for compute times (roofline, :func:`~codesign.workloads.compute.layer_time`,
        at the peak of :func:`~codesign.workloads.compute.resolve_precision`) and memory
        capacity.
    placement : Placement, optional
        Default :meth:`Placement.for_strategy` with the hardware's GPUs per server.
    bucket_bytes : float, optional
        Gradient bucket size, bytes (default 25 MiB).
    efficiency : float, optional
        Fraction of peak FLOP/s: forces the constant roofline.  Default: the kernel
        model of :mod:`codesign.workloads.efficiency` where it applies, else the
        roofline at ``DEFAULT_EFFICIENCY``.
    index_bytes : int, optional
        Bytes per embedding index sent to a table's owner (int64: 8).
    check : bool, optional
        Raise :class:`~codesign.errors.InfeasibleError` when memory does not fit.
    tp_comm_overlap : bool or "backward", optional
        Tensor-parallel collectives run under the GEMMs of their layer (Megatron-LM's
        ``--tp-comm-overlap``, Transformer Engine userbuffers, Wang et al. ASPLOS'23):
        each TP collective of a layer's pass gets ``hidden_s`` = that pass's compute time
        over the number of its TP collectives, so only the excess is exposed.
        ``"backward"``: only the backward pass's collectives, under the layer's
        weight-gradient GEMMs (half of its backward time): Megatron-LM's asynchronous
        tensor-parallel all-reduce, the input gradient's all-reduce launched before the
        weight gradient is computed (Korthikanti et al. 2022, Sec. 6.2: "we overlap
        all-reduce communication with the linear weight's gradient computation"; with
        sequence parallelism the all-gather of the input and the reduce-scatter of its
        gradient, Sec. 4.2.2).  Forward and recomputed-forward collectives stay exposed,
        and so does sequence parallelism's backward re-gather of a sub-layer's input,
        which the weight-gradient GEMM needs before it can start (their Table 4: the 22B
        layer's backward is 11.8 ms with sequence parallelism and 11.9 without, although
        its norms and dropouts then move an eighth of the bytes).
    pp_comm_overlap : bool, optional
        With the interleaved schedule, every pipeline send and receive runs under the
        compute of one model chunk's pass (the stage's pass over ``vpp``), so only its
        excess is exposed: Megatron-LM's ``overlap_p2p_comm``, on by default and only
        implemented for the interleaved schedule (``megatron/training/arguments.py`` at
        commit f2e5db4 turns it off otherwise; ignored here likewise for ``vpp = 1``).
    ep_comm_overlap : bool, optional
        A micro-batch's expert all-to-alls run under another micro-batch's compute of the
        same layer: DeepSeek-V3's DualPipe (technical report Sec. 3.2.1: forward and
        backward chunks of two micro-batches paired so that "both all-to-all and PP
        communication can be fully hidden") and Megatron-core's
        ``overlap_moe_expert_parallel_comm``.  Each of a layer's four all-to-alls
        (dispatch and combine, forward and backward) gets a quarter of the layer's
        forward + backward compute as ``hidden_s``, so only the excess is exposed --
        and, with the hierarchical dispatchers (DeepEP's kernels on 20 SMs), at least
        ``sm_share`` of the exchange, the compute it hides under having lost those SMs
        meanwhile.  Ignored with one micro-batch (nothing to pair with).
    ep_dispatch : str, optional
        How expert layers send tokens to their experts (:mod:`codesign.workloads.dispatch`):
        ``"alltoall"`` (default; Megatron-core's all-to-all dispatcher, every routed copy
        to its expert's rank), ``"hierarchical"`` (DeepSeek-V3 Sec. 3.2.2, DeepEP: once
        per destination server over the network, then NVLink) or ``"hierarchical-fp8"``
        (the same with FP8 dispatch, Sec. 3.3.4; needs an fp8 precision).

    Returns
    -------
    Demand

    Raises
    ------
    InvalidSpecError
        The strategy does not apply to the workload, or the placement does not match.
    InfeasibleError
        With ``check``, the most loaded GPU needs more memory than the hardware has.

    Examples
    --------
    >>> from codesign.workloads import get_workload
    >>> w = get_workload("resnet50").with_batch(2048)
    >>> d = demand_for(w, "dp=16", "A100-80", Placement(servers=16, gpus_per_server=1))
    >>> d.server_matrix().shape
    (16, 16)
    >>> round(float(d.server_matrix()[0, 1]) / (2 * 15 / 16 * 4 * w.parameters), 6)
    1.0
    """
    s = as_strategy(strategy)
    hw = get_hardware(hardware)
    check_applicable(workload, s)
    check_number("bucket_bytes", bucket_bytes)
    if not isinstance(check, bool):   # ('x' was read as True)
        raise invalid("check", check, "True or False (the memory check)")
    if isinstance(index_bytes, bool) or index_bytes not in (1, 2, 4, 8):
        raise invalid("index_bytes", index_bytes, "1, 2, 4 or 8")
    if placement is None:
        placement = Placement.for_strategy(s, hw.gpus_per_server)
    placement.check(s)
    precision = resolve_precision(workload, hw, s.precision)
    memory = (check_memory if check else memory_per_gpu)(workload, s, hw, placement)
    b = workload.batch_size / (s.dp * s.m)
    m, T, C = s.m, s.tp, s.cp
    grid = placement.rank_grid(s)
    stages = stage_bounds(workload, s)
    layers = workload.layers
    # Each layer's recomputation (full recomputation covers the transformer blocks;
    # recompute_layers only the first blocks of each model chunk).
    # sharded at the precision they run in (8-bit GEMMs keep 8-bit inputs: sharding)
    names = [layer.name for layer in layers]
    layer_s = layer_strategies(names, s, stages, precision=precision)
    offloaded = layer_offload(names, s, stages)
    if s.offload_layers is not None and not hw.host_link_Bps:
        raise invalid("strategy offload_layers", s.offload_layers,
                      f"omitted on {hw.name}: its catalog entry has no host_bandwidth (the "
                      "link activations are offloaded over)")
    placed = s.embedding == "model"
    tables = [layer for layer in layers if is_table(layer)] if placed else []
    owners = placement.table_ranks(len(tables)) if placed else ()
    # ZeRO-3 gathers parameters for every micro-batch's forward and backward; ZeRO-2
    # reduce-scatters every micro-batch's gradients (sharded gradients cannot be
    # accumulated locally), with or without pipelining.
    zero_rep = m if s.zero >= 3 else 1
    opt_K = float(workload.optimizer_bytes_per_param)
    dtype = workload.dtype_bytes
    grad_b = s.grad_bytes(dtype)
    weight_per_grad = dtype / grad_b

    def seconds(shard: LayerShard, batch: float) -> tuple[float, float]:
        t = layer_time(shard.local, hw, batch, efficiency=efficiency, dtype=precision)
        return t.fwd_s, t.bwd_s

    if not (isinstance(tp_comm_overlap, bool) or tp_comm_overlap == "backward"):
        raise invalid("tp_comm_overlap", tp_comm_overlap, "true, false or backward")
    if not isinstance(pp_comm_overlap, bool):
        raise invalid("pp_comm_overlap", pp_comm_overlap, "true or false")
    if not isinstance(ep_comm_overlap, bool):
        raise invalid("ep_comm_overlap", ep_comm_overlap, "true or false")
    check_dispatch(ep_dispatch, precision)
    ep_hide = ep_comm_overlap and m > 1
    ep_share = overlap_sm_share(ep_dispatch, hw.compute.sms if hw.compute else None) \
        if ep_hide else 0.0
    # Pipeline sends overlap one model chunk's pass (interleaved schedule only).
    chunk_share = 1.0 / s.vpp if pp_comm_overlap and s.vpp > 1 else 0.0

    def tp_ops(nbytes: float, phase: str, layer: Layer, p: int, groups,
               under: float = 0.0, regather: float = 0.0) -> list[Op]:
        """Megatron's TP all-reduce of ``nbytes`` per rank, or with sequence parallelism
        a reduce-scatter and an all-gather of the same size (Korthikanti Sec. 4.2.2)
        and, in a backward pass, the all-gather of the ``regather`` bytes of the
        sub-layer's sequence-split input again; with ``tp_comm_overlap`` they share
        ``under`` seconds of the layer's compute (``"backward"``: the backward pass's
        weight-gradient half only, which the re-gather precedes)."""
        if not nbytes or not groups:
            return []
        kinds = ("reducescatter", "allgather") if s.sp else ("allreduce",)
        regather = regather if s.sp else 0.0
        if tp_comm_overlap == "backward":
            under = under / 2.0 if phase == "backward" else 0.0
        shared = len(kinds) + (regather > 0 and tp_comm_overlap is True)
        hidden = under / shared if tp_comm_overlap else 0.0
        ops = [op for kind in kinds for op in _on(groups, kind, nbytes, phase, "tp",
                                                  layer=layer.name, stage=p, repeat=m,
                                                  hidden_s=hidden)]
        if regather:
            again = hidden if tp_comm_overlap is True else 0.0
            ops += _on(groups, "allgather", regather, phase, "tp", layer=layer.name, stage=p,
                       repeat=m, hidden_s=again)
        return ops

    fwd: list[Op] = []
    bwd_by_stage: list[list[Op]] = []
    grad_ops: list[Op] = []
    opt_ops: list[Op] = []

    for p, (start, stop) in enumerate(stages):
        ranks_p = placement.stage_ranks(s, p)
        # (one GroupSet per stage, shared by the ops on it: :func:`_on`)
        tp_groups = _interned(GroupSet(placement.tp_groups(s, p))) if T > 1 else ()
        ep_groups = placement.ep_groups(s, p) if s.ep > 1 else []
        cp_groups = _interned(GroupSet(placement.cp_groups(s, p))) if C > 1 else ()
        dp_groups = _interned(GroupSet(placement.dp_groups(s, p))) if s.data_ranks > 1 else ()
        xdp_groups = _interned(GroupSet(placement.expert_dp_groups(s, p))) \
            if s.expert_dp > 1 else ()
        blocks: list[list[Op]] = []
        dense_stream: list[tuple[str, float]] = []
        expert_stream: list[tuple[str, float]] = []
        gathered = [0.0, 0.0]     # the trained weights' bytes ZeRO gathers (dense, expert)
        fwd_stage: list[Op] = []
        emitted_tables = False
        step_params = 0.0
        pass_s = [0.0, 0.0]    # this stage's forward and backward compute per micro-batch
        for i in range(start, stop):
            layer, ls = layers[i], layer_s[i]
            if placed and is_table(layer):
                if not emitted_tables:  # all tables run together, at the first one
                    f, bw = _embedding_ops(tables, owners, placement, s, hw, b, index_bytes,
                                           efficiency, precision)
                    fwd_stage += f
                    blocks.append(bw)
                    emitted_tables = True
                continue
            # The sharding rule (codesign.workloads.sharding): what one GPU holds,
            # computes and sends of this layer.
            shard = shard_layer(layer, ls)
            sh = shard.local
            f_s, b_s = seconds(shard, b)
            pass_s[0] += f_s
            pass_s[1] += b_s
            f_ops: list[Op] = []
            b_ops: list[Op] = []
            shared, expert = shard.params
            step_params += shard.step_params()
            a2a = shard.ep_alltoall_bytes(b)
            # The dispatcher's all-to-alls (codesign.workloads.dispatch): per leg, the
            # dispatch-direction and the combine-direction buffer.
            legs = [leg for grp in ep_groups for leg in dispatch_legs(
                grp, a2a, experts=layer.experts, top_k=layer.top_k,
                gpus_per_server=placement.gpus_per_server, dispatcher=ep_dispatch,
                groups=layer.expert_groups, group_top_k=layer.group_top_k)] \
                if layer.experts and a2a else []
            ep_ops = [CollectiveOp("alltoall", grp, size, "forward", "ep", layer=layer.name,
                                   stage=p, repeat=m) for grp, size, _ in legs]
            ep_back = [CollectiveOp("alltoall", grp, size, "forward", "ep", layer=layer.name,
                                    stage=p, repeat=m) for grp, _, size in legs]
            # Context parallelism: the ring exchange of key/value blocks (an all-gather
            # of the CP group's K/V) overlaps the attention blocks; backward circulates
            # K/V again and reduce-scatters their gradients (Megatron-LM's CP).  The
            # all-gather variant (cp_comm=allgather, Llama 3 Sec. 3.3.2) gathers before
            # the attention starts: nothing hides it.
            core = (sh.attn_core_fwd_flops / sh.fwd_flops) \
                if sh.fwd_flops and s.cp_comm == "ring" else 0.0
            kv = shard.cp_kv_bytes(b) if cp_groups else 0.0
            cp_f = _on(cp_groups, "allgather", kv, "forward", "cp", layer=layer.name,
                       stage=p, repeat=m, hidden_s=core * f_s) if kv else []
            cp_b = [op for kind in ("allgather", "reducescatter")
                    for op in _on(cp_groups, kind, kv, "backward", "cp", layer=layer.name,
                                  stage=p, repeat=m, hidden_s=core * b_s / 2)] if kv else []
            # Folded experts (etp=1) take their tokens from the all-to-all and return
            # them whole: no TP collective unless shared experts (split like the dense
            # layers) need theirs.
            layer_tp = [] if shard.folded_experts_only else tp_groups
            tp_f = tp_ops(shard.tp_bytes(b, "forward"), "forward", layer, p, layer_tp, f_s)
            tp_b = tp_ops(shard.tp_bytes(b, "backward"), "backward", layer, p, layer_tp, b_s,
                          regather=shard.tp_bytes(b, "forward"))
            # Activation recomputation reruns (part of) the forward before the backward;
            # full recomputation repeats the forward's communication too.
            rflops = shard.recompute_flops
            pass_b = b_s
            # Full, or a dense MLP block under recompute_modules=mlp: the layer's forward
            # again (its time as timed above); otherwise the chosen modules' own kernels
            # (compute.recompute_time: the attention core's, not its FLOP share; the
            # norms' and activations' at HBM bandwidth).
            if reruns_forward(layer, ls):
                r_s = f_s if rflops else 0.0
            else:
                r_s = recompute_time(sh, hw, b, ls.selective_modules,
                                     efficiency=efficiency, dtype=precision)
            if r_s > 0:
                r_ops: list[Op] = []
                if ls.recompute == "full":
                    r_ops += [replace(op, phase="backward") for op in ep_ops + cp_f]
                r_ops.append(Compute(layer.name, "backward", ranks_p, r_s, b * rflops, p, m,
                                     kind="recompute"))
                pass_s[1] += r_s
                pass_b += r_s
                if ls.recompute == "full":
                    r_ops += [replace(op, phase="backward") for op in ep_back]
                if reruns_forward(layer, ls):
                    # A whole forward again repeats its communication too.
                    r_ops += [replace(op, phase="backward") for op in tp_f]
                b_ops += r_ops
            if offloaded[i]:   # activation offloading: the copies' excess over the passes
                exposed = offload_exposed_s(shard, b, hw, f_s, pass_b)
                for k, (phase, ops) in enumerate((("forward", f_ops), ("backward", b_ops))):
                    if exposed[k] > 0:
                        ops.append(Compute(layer.name, phase, ranks_p, exposed[k], 0.0, p,
                                           m, kind="offload"))
                        pass_s[k] += exposed[k]
            if s.zero >= 3:
                # ZeRO-3 gathers the layer's weights before each pass and prefetches:
                # the gather runs on its own stream while the layer before it computes
                # (PyTorch FSDP's backward prefetch and its issue-ahead forward, Zhao et
                # al., VLDB 2023, Sec. 3.3 and 4.2; DeepSpeed's stage-3 prefetch bucket;
                # Megatron-core's FSDP), so only its excess over that compute is exposed.
                # The layer's own pass time stands for its neighbour's (equal in a
                # uniform stack); the backward one includes its recomputation.
                gathers: list[Op] = []
                for w, nbytes, groups in ((shared, shard.shared_bytes, dp_groups),
                                          (expert, shard.expert_bytes, xdp_groups)):
                    for phase, under in (("forward", f_s), ("backward", pass_b)) if w else ():
                        gathers += _on(groups, "allgather", nbytes, phase, "zero",
                                       layer=layer.name, stage=p, repeat=zero_rep,
                                       hidden_s=under)
                f_ops[:0] = [op for op in gathers if op.phase == "forward"]
                b_ops[:0] = [op for op in gathers if op.phase == "backward"]
            # Each pass: dispatch (or its gradient), the layer, combine, then the TP
            # all-reduce of the output (forward, the g operator) or of the input gradient
            # (backward, the f operator).
            for phase, target, sec, flops, tps, cps in (
                    ("forward", f_ops, f_s, sh.fwd_flops, tp_f, cp_f),
                    ("backward", b_ops, b_s, sh.bwd_flops, tp_b, cp_b)):
                # Before the experts, the dispatch direction (forward: the tokens;
                # backward: their output gradients); after, the combine direction.
                into, back = ([replace(op, phase=phase,
                                       hidden_s=(f_s + b_s) / 4.0 if ep_hide else 0.0,
                                       sm_share=ep_share)
                               for op in ops] for ops in (ep_ops, ep_back))
                target += into + cps
                target.append(Compute(layer.name, phase, ranks_p, sec, b * flops, p, m))
                target += back
                target += tps
            fwd_stage += f_ops
            blocks.append(b_ops)
            # gradient bytes (grad_precision) of the trained parameters (a LoRA-frozen
            # layer's adapters only), which the buckets hold
            trained_shared, trained_expert = shard.trainable
            dense_stream.append((layer.name, trained_shared * shard.grad_dtype_bytes))
            expert_stream.append((layer.name, trained_expert * shard.grad_dtype_bytes))
            gathered[0] += trained_shared * shard.weight_dtype_bytes
            gathered[1] += trained_expert * shard.weight_dtype_bytes
        fwd += fwd_stage
        hide_f, hide_b = pass_s[0] * chunk_share, pass_s[1] * chunk_share
        if p < s.pp - 1:
            fwd += _boundary(grid, s, p, p + 1, layers[stop - 1], b, "forward", hide_f)
        elif s.vpp > 1:   # the last stage's chunk feeds stage 0's next chunk: a chunk's
            # output (what stage 0 sends on), not the output layer's logits
            fwd += _wrap(grid, s, p, layers[stages[0][1] - 1], b, "forward", hide_f)
        # Backward: the gradient of this stage's output arrives from the next stage,
        # then the layers run in reverse order (each block keeps its internal order).
        bwd_head = (_boundary(grid, s, p + 1, p, layers[stop - 1], b, "backward", hide_b)
                    if p < s.pp - 1 else [])
        if p == 0 and s.vpp > 1:   # the last chunk's gradient wraps round to stage 0
            bwd_head = _wrap(grid, s, 0, layers[stop - 1], b, "backward", hide_b) + bwd_head
        ordered = list(bwd_head)
        for blk in reversed(blocks):
            ordered += blk
        bwd_by_stage.append(ordered)

        # Gradient synchronisation of this stage (backward order), then ZeRO's gather of
        # the updated weights (the same buckets, in the weights' format).
        kind = "allreduce" if s.zero == 0 else "reducescatter"
        grad_rep = m if s.zero >= 2 else 1
        for stream, groups, purpose, weights in ((dense_stream, dp_groups, "dp", gathered[0]),
                                                 (expert_stream, xdp_groups, "dp-expert",
                                                  gathered[1])):
            cuts = _buckets(list(reversed(stream)), float(bucket_bytes))
            # The weights gathered per gradient byte: the formats' ratio, or with
            # fp8_params (FP8 and 16-bit layers in one stream) the stream's own, which
            # keeps its total exact.
            grads = sum(b for _, b in stream)
            per_grad = weights / grads if s.fp8_params and grads > 0 else weight_per_grad
            for k, (size, after) in enumerate(cuts):
                grad_ops += _on(groups, kind, size, "gradient", purpose, True, k, after,
                                stage=p, repeat=grad_rep)
                if s.zero in (1, 2):
                    opt_ops += _on(groups, "allgather", size * per_grad, "optimizer",
                                   "zero", False, k, after, stage=p)
        # The optimizer step over this stage's (ZeRO-sharded) parameters: memory bound.
        step_bytes = optimizer_step_bytes(step_params, opt_K, dtype, grad_b)
        if step_bytes > 0:
            opt_ops.append(Compute("optimizer", "optimizer", ranks_p,
                                   step_bytes / hw.memory_bandwidth_Bps, 0.0, p, 1,
                                   kind="optimizer"))

    bwd_all: list[Op] = []
    for ops in reversed(bwd_by_stage):
        bwd_all += ops
    ops = tuple(fwd + bwd_all + grad_ops + opt_ops)
    return Demand(workload=workload.name, hardware=hw.name, strategy=s, placement=placement,
                  op_sets=ops, stages=stages, microbatch_size=b, bucket_bytes=float(bucket_bytes),
                  memory=memory, precision=precision)


def offload_exposed_s(shard: LayerShard, batch: float, hw: Hardware, fwd_s: float,
                      bwd_s: float) -> tuple[float, float]:
    """Exposed seconds of an offloaded layer's two copies (strategy ``offload_layers``),
    forward and backward: its saved activations of a ``batch``-sample micro-batch go to
    host memory after its forward and come back before its backward over the GPU's host
    link, each copy on its own stream under the next layer's pass (Megatron-core's
    offload handler); the layer's own ``fwd_s`` / ``bwd_s`` stand for its neighbour's,
    as for ZeRO-3's gathers.  Only the excess is exposed."""
    copy_s = shard.activation_bytes_per_sample * batch / hw.host_link_Bps
    return max(0.0, copy_s - fwd_s), max(0.0, copy_s - bwd_s)


def _boundary(grid: np.ndarray, s: Strategy, src_stage: int, dst_stage: int, layer: Layer,
              b: float, phase: str, hidden_s: float = 0.0, repeat: int | None = None
              ) -> list[Op]:
    """Stage-boundary transfers (and the receiving TP all-gather) of one micro-batch.

    Each (TP, data) position sends its ``1 / (tp x cp)`` share of the boundary
    activation.  Without sequence parallelism the receiving TP group all-gathers the
    shares (the scatter/gather optimisation, Narayanan et al. SC'21 Sec. 4.1); with it
    the shares are already the sequence split the next stage's first operator takes
    (Megatron-LM's pipeline tensor shape is ``seq / tp`` under sequence parallelism,
    ``get_tensor_shapes`` in ``megatron/core/pipeline_parallel/schedules.py`` at
    commit f2e5db4), so nothing is gathered.  With ``vpp`` model chunks per GPU every
    micro-batch crosses each boundary ``vpp`` times (Narayanan et al. SC'21
    Sec. 2.2.2).  ``hidden_s``: compute the transfers run under (``pp_comm_overlap``)."""
    size = shard_layer(layer, s).boundary_bytes(b)
    stage = min(src_stage, dst_stage)
    rep = s.m * s.vpp if repeat is None else repeat
    ops: list[Op] = []
    for d in range(s.data_ranks):
        for t in range(s.tp):
            ops.append(Transfer(int(grid[t, d, src_stage]), int(grid[t, d, dst_stage]),
                                size / s.tp, phase, "pp", layer=layer.name, stage=stage,
                                repeat=rep, hidden_s=hidden_s))
        if s.tp > 1 and not s.sp:
            grp = tuple(sorted(int(r) for r in grid[:, d, dst_stage]))
            ops.append(CollectiveOp("allgather", grp, size, phase, "pp", layer=layer.name,
                                    stage=stage, repeat=rep, hidden_s=hidden_s))
    return ops


def _wrap(grid: np.ndarray, s: Strategy, stage: int, layer: Layer, b: float, phase: str,
          hidden_s: float = 0.0) -> list[Op]:
    """Interleaved schedule: ``vpp - 1`` crossings per micro-batch from the last stage back
    to the first (forward) or from the first to the last (backward), attributed to
    ``stage`` (the sender's)."""
    last = s.pp - 1
    src, dst = (last, 0) if phase == "forward" else (0, last)
    ops = _boundary(grid, s, src, dst, layer, b, phase, hidden_s, repeat=s.m * (s.vpp - 1))
    return [replace(op, stage=stage) for op in ops]


def _embedding_ops(tables: list[Layer], owners: tuple[int, ...], placement: Placement,
                   s: Strategy, hw: Hardware, b: float, index_bytes: int,
                   efficiency: float | None, precision: str) -> tuple[list[Op], list[Op]]:
    """Forward and backward ops of tables placed on servers (``embedding=model``).

    Every rank is a data-parallel replica with ``b`` samples per micro-batch; the owner
    of a table serves all ``b x dp`` samples.
    """
    world = placement.gpus
    ranks = tuple(range(world))
    m = s.m
    idx_per = np.zeros(world)   # index bytes per sample each owner receives
    row_per = np.zeros(world)   # pooled-row bytes per sample each owner returns
    for layer, o in zip(tables, owners, strict=True):
        idx_per[o] += layer.lookups * index_bytes
        row_per[o] += layer.table_dim * layer.dtype_bytes
    fwd: list[Op] = []
    bwd: list[Op] = []
    samples = b * s.dp
    comp_f: dict[int, list[float]] = {}
    for layer, o in zip(tables, owners, strict=True):
        t = layer_time(layer, hw, samples, efficiency=efficiency, dtype=precision)
        acc = comp_f.setdefault(o, [0.0, 0.0, 0.0, 0.0])
        acc[0] += t.fwd_s
        acc[1] += t.bwd_s
        acc[2] += samples * layer.fwd_flops
        acc[3] += samples * layer.bwd_flops
    compute_f = [Compute("tables", "forward", (o,), v[0], v[2], 0, m)
                 for o, v in sorted(comp_f.items())]
    compute_b = [Compute("tables", "backward", (o,), v[1], v[3], 0, m)
                 for o, v in sorted(comp_f.items())]
    uniform = world > 1 and np.all(idx_per == idx_per[0]) and np.all(row_per == row_per[0]) \
        and idx_per[0] > 0
    if uniform:
        # Tables spread evenly over all ranks: the exchanges are all-to-alls whose send
        # buffer per rank holds its b samples' data for every table.
        idx, rows = b * float(idx_per.sum()), b * float(row_per.sum())
        a2a = [CollectiveOp("alltoall", ranks, idx, "forward", "embedding", layer="tables",
                            repeat=m)]
        fwd += a2a + compute_f
        fwd.append(CollectiveOp("alltoall", ranks, rows, "forward", "embedding",
                                layer="tables", repeat=m))
        bwd.append(CollectiveOp("alltoall", ranks, rows, "backward", "embedding",
                                layer="tables", repeat=m))
        bwd += compute_b
        return fwd, bwd
    for layer, o in zip(tables, owners, strict=True):
        for r in ranks:
            if r != o:
                fwd.append(Transfer(r, o, b * layer.lookups * index_bytes, "forward",
                                    "embedding", layer=layer.name, repeat=m))
    fwd += compute_f
    for layer, o in zip(tables, owners, strict=True):
        row = b * layer.table_dim * layer.dtype_bytes
        for r in ranks:
            if r != o:
                fwd.append(Transfer(o, r, row, "forward", "embedding", layer=layer.name,
                                    repeat=m))
                bwd.append(Transfer(r, o, row, "backward", "embedding", layer=layer.name,
                                    repeat=m))
    bwd += compute_b
    return fwd, bwd
