"""Per-GPU training memory of a strategy, and the check that it fits.

For every GPU: the model state of the layers it holds (weights, gradients, optimizer
state), the activations it keeps for the backward pass, and the embedding tables placed
on it.  The reported breakdown is the GPU that needs the most.  What one GPU holds and
keeps of each layer is the sharding rule of :mod:`codesign.workloads.sharding`; this
module adds the layers of a stage up, with the micro-batches in flight and the tables.

Model state (ZeRO, Rajbhandari et al. SC'20, Sec. 5.1 and Fig. 1), with ``W`` the
weight bytes a GPU holds after tensor, pipeline and expert parallelism (1 per
parameter of the 8-bit GEMMs with strategy ``fp8_params``, their FP32 master copy being
part of ``K``), ``G`` its gradient bytes (``grad_precision``), ``K`` the optimizer bytes
per parameter and ``N`` the ZeRO group (the
data-parallel group ``dp``, and :attr:`~codesign.workloads.strategy.Strategy.expert_dp`
for expert parameters, whose replicas are that many)::

    zero=0:  W + G + K psi          zero=2:  W + G / N + K psi / N
    zero=1:  W + G + K psi / N      zero=3:  W / N + G / N + K psi / N

Activations: each GPU keeps, per sample of each micro-batch in flight, what its stage's
layers save for the backward pass, sharded by the strategy (Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models"; for a GPT layer with
``s`` tokens, hidden ``h``, ``a`` heads, 2-byte activations):

* no recomputation, TP only (Eq. 2): ``s h (10 + 24 / t + 5 a s / (h t))`` -- the norm
  inputs, first-linear inputs and dropout masks (``Layer.sp_saved_bytes``, ``10 s h``)
  stay whole on every TP rank;
* with sequence parallelism (Eq. 4): ``s h (34 + 5 a s / h) / t``;
* selective recomputation (Sec. 5, Eq. 6): drops the attention core's ``5 a s^2``
  (``Layer.attn_core_saved_bytes``);
* full recomputation: only the layer input ``2 s h`` (``Layer.checkpoint_size``; split by
  ``t`` with SP), plus, for the micro-batch being recomputed, one transformer layer's
  full activations (the working set of the backward pass) less what the layers after
  it freed (the output layer, which is not recomputed; with ``recompute_layers`` the
  kept blocks, which free more than a rerun block builds: no working set);
* context parallelism divides everything by ``cp`` (each rank holds ``s / cp`` tokens);
* an 8-bit precision (Transformer Engine's recipes) keeps the weight GEMMs' saved inputs
  in one byte per element (``Layer.gemm_in_saved_bytes``; for a GPT layer with SP
  ``s h (34 - 7) / t``: the QKV, projection, first and second MLP inputs halve);
* offloading (strategy ``offload_layers``): the offloaded blocks' activations wait in
  host memory (``offloaded_bytes``, checked against the hardware's ``host_memory``);
  the GPU keeps one offloaded layer of one micro-batch on its way out or back in (its
  largest), as Megatron-core's offload handler copies a layer's tensors while the next
  one computes -- beside that micro-batch's first kept layer at most (the forward builds
  the later ones after the copy, the backward frees them before the reload), and beside
  the other micro-batches in flight.

Micro-batches in flight at stage ``s`` of ``p``: 1F1B ``min(m, p - s)`` (Narayanan et
al. SC'21, Sec. 2.2), GPipe ``m``, interleaved ``p (1 + (p - 1) / (p v))`` at stage 0
(:func:`~codesign.workloads.strategy.inflight_microbatches`); without pipelining one
micro-batch (gradient accumulation).

Embedding tables with ``embedding=model`` sit whole on their GPU (placement), with
their gradients and optimizer state (dense, as FlexFlow and Megatron keep them), and
the indices of the whole global batch (they serve every sample).

Not counted: framework workspace, communication buffers, fragmentation, and ZeRO-3's
temporary all-gathered layer (at most the largest layer's weights).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from codesign.errors import InfeasibleError
from codesign.workloads.compute import resolve_precision
from codesign.workloads.hardware import Hardware, get_hardware
from codesign.workloads.model import Workload
from codesign.workloads.placement import Placement
from codesign.workloads.sharding import activation_bytes_per_sample, shard_layer
from codesign.workloads.strategy import (
    Strategy, as_strategy, check_applicable, inflight_microbatches, is_table, layer_offload,
    layer_strategies, stage_bounds)

__all__ = ["MemoryBreakdown", "memory_per_gpu", "check_memory", "activation_bytes_per_sample"]

_GIB = float(2**30)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of the most loaded GPU, bytes.

    ``inflight_microbatches`` and ``microbatch_size`` (samples) explain the activations
    (``inflight_microbatches`` may be fractional with the interleaved schedule);
    ``recompute_workspace_bytes`` (part of the activations) is the full activations of
    the layer being recomputed with ``recompute=full``; ``capacity_bytes`` is the
    GPU's HBM.  ``offloaded_bytes`` are the activations kept in host memory instead
    (``offload_layers``; not part of :attr:`total_bytes`), ``host_capacity_bytes`` the
    host memory per GPU.
    """

    strategy: str
    hardware: str
    rank: int
    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    embedding_bytes: float
    inflight_microbatches: float
    microbatch_size: float
    capacity_bytes: float
    recompute_workspace_bytes: float = 0.0
    offloaded_bytes: float = 0.0
    host_capacity_bytes: float | None = None

    @property
    def total_bytes(self) -> float:
        """Everything on the GPU."""
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                + self.activations_bytes + self.embedding_bytes)

    @property
    def fits(self) -> bool:
        """Whether :attr:`total_bytes` fits in :attr:`capacity_bytes` (and the offloaded
        activations in the host memory)."""
        return self.total_bytes <= self.capacity_bytes and self.host_fits

    @property
    def host_fits(self) -> bool:
        """Whether the offloaded activations fit in the host memory per GPU (none: yes)."""
        return self.offloaded_bytes <= (self.host_capacity_bytes or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "hardware": self.hardware, "rank": self.rank,
                "stage": self.stage, "weights_bytes": self.weights_bytes,
                "gradients_bytes": self.gradients_bytes,
                "optimizer_bytes": self.optimizer_bytes,
                "activations_bytes": self.activations_bytes,
                "recompute_workspace_bytes": self.recompute_workspace_bytes,
                "embedding_bytes": self.embedding_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes,
                "offloaded_bytes": self.offloaded_bytes,
                "host_capacity_bytes": self.host_capacity_bytes,
                "inflight_microbatches": self.inflight_microbatches,
                "microbatch_size": self.microbatch_size, "fits": self.fits}

    def message(self) -> str:
        """One line: what the strategy needs and what the hardware has, in GiB."""
        if self.total_bytes <= self.capacity_bytes and not self.host_fits:
            host = ("no host memory in its catalog entry" if not self.host_capacity_bytes
                    else f"{self.host_capacity_bytes / _GIB:.1f} GiB of host memory per GPU")
            return (f"strategy {self.strategy} offloads {self.offloaded_bytes / _GIB:.1f} "
                    f"GiB of activations per GPU (rank {self.rank}, stage {self.stage}), "
                    f"hardware {self.hardware} has {host}")
        return (f"strategy {self.strategy} needs {self.total_bytes / _GIB:.1f} GiB per GPU "
                f"(rank {self.rank}, stage {self.stage}: weights "
                f"{self.weights_bytes / _GIB:.1f}, gradients {self.gradients_bytes / _GIB:.1f}, "
                f"optimizer {self.optimizer_bytes / _GIB:.1f}, activations "
                f"{self.activations_bytes / _GIB:.1f} for {self.inflight_microbatches:g} "
                f"micro-batches of {self.microbatch_size:g}, embedding tables "
                f"{self.embedding_bytes / _GIB:.1f}), hardware {self.hardware} has "
                f"{self.capacity_bytes / _GIB:.1f} GiB"
                + (f"; {self.offloaded_bytes / _GIB:.1f} GiB of activations offloaded to "
                   f"host memory (of {(self.host_capacity_bytes or 0.0) / _GIB:.1f})"
                   if self.offloaded_bytes > 0 else ""))


def _recompute_workspace(layers: Any) -> float:
    """Memory the backward pass adds per sample to rerun a recomputation unit (0 when no
    layer of the stage is fully recomputed).

    A unit starts at a layer that keeps a checkpoint and runs up to the next one (a
    transformer layer: attention and MLP); rerunning it rebuilds its full activations.
    The backward pass walks the stage's ``(layer, strategy)`` pairs in reverse and has
    freed what the layers after a unit kept by the time it reaches it, so a unit needs
    only its full activations beyond that: with full recomputation the last unit's
    whole activations, with ``recompute_layers`` (the first blocks of each chunk
    recomputed, the later ones kept) nothing, since the kept blocks free at least as
    much as a block rebuilds (the rebuilt activations: the layer's strategy without
    recomputation, :func:`~codesign.workloads.strategy.layer_strategies` giving every
    layer the same one but for its recomputation mode)."""
    full = None
    best = freed = unit = kept = 0.0
    for layer, ls in reversed(layers):
        if ls.recompute != "full":
            freed += activation_bytes_per_sample(layer, ls)
            continue
        if full is None:
            full = replace(ls, recompute="none", recompute_layers=None,
                           recompute_modules=None, offload_layers=None)
        unit += activation_bytes_per_sample(layer, full)
        kept += activation_bytes_per_sample(layer, ls)
        best = max(best, unit - freed)
        if layer.checkpoint_size > 0:       # the unit's first layer: it is done
            freed += kept
            unit = kept = 0.0
    return best


def memory_per_gpu(workload: Workload, strategy: Strategy | str, hardware: Hardware | str,
                   placement: Placement | None = None) -> MemoryBreakdown:
    """Per-GPU memory of ``workload`` under ``strategy`` (the most loaded GPU); no raise.

    Parameters
    ----------
    workload : Workload
    strategy : Strategy or str
    hardware : Hardware or str
        Supplies the capacity (``memory_bytes``) and, when ``placement`` is None,
        ``gpus_per_server`` for :meth:`Placement.for_strategy`.
    placement : Placement, optional
        Only matters for ``embedding=model`` (which GPU holds which table).

    Returns
    -------
    MemoryBreakdown

    Raises
    ------
    InvalidSpecError
        The strategy does not apply to the workload
        (:func:`~codesign.workloads.strategy.check_applicable`).
    """
    s = as_strategy(strategy)
    hw = get_hardware(hardware)
    check_applicable(workload, s)
    placed = s.embedding == "model"
    micro = workload.batch_size / (s.dp * s.m)
    opt = float(workload.optimizer_bytes_per_param)

    stages = stage_bounds(workload, s)
    names = [layer.name for layer in workload.layers]
    # The layers are sharded at the precision they run in (the workload's unless the
    # strategy names one): 8-bit GEMMs keep 8-bit inputs.
    layer_s = layer_strategies(names, s, stages,
                               precision=resolve_precision(workload, hw, s.precision))
    offloaded = layer_offload(names, s, stages)
    per_stage = []
    for p, (start, stop) in enumerate(stages):
        w = g = o = act = 0.0
        kept: list = []           # the stage's (layer, strategy) on its GPUs
        off = host = top = 0.0    # offloaded: total, largest layer; kept: largest layer
        for i in range(start, stop):
            layer, ls = workload.layers[i], layer_s[i]
            if placed and is_table(layer):
                continue
            kept.append((layer, ls))
            shard = shard_layer(layer, ls)
            for dw, dg, do in shard.model_state(opt):   # shared, then expert parameters
                w, g, o = w + dw, g + dg, o + do
            a = shard.activation_bytes_per_sample
            if offloaded[i]:
                host, off = host + a, max(off, a)
            else:
                act, top = act + a, max(top, a)
        inflight = inflight_microbatches(s, p) if s.pp > 1 else 1.0
        # Only full recomputation (of all blocks or the first of each chunk) reruns units.
        work = _recompute_workspace(kept) * micro if s.recompute == "full" else 0.0
        # An offloaded layer on its way out (or back in) meets the micro-batch's kept
        # layers only at the first of them (the forward builds them after it, the
        # backward frees them before it); the other micro-batches in flight hold theirs.
        mine = max(act, off + top) if off else act
        per_stage.append((w, g, o, (act * (inflight - 1) + mine) * micro + work, inflight,
                          work, host * micro * inflight))

    # Ranks' stages, and the tables each rank holds (embedding=model).
    if placement is None:
        placement = Placement.for_strategy(s, hw.gpus_per_server)
    grid = placement.rank_grid(s)
    stage_of = np.empty(s.gpus, dtype=np.int64)
    stage_of[grid.ravel()] = np.broadcast_to(np.arange(s.pp), grid.shape).ravel()
    tables = np.zeros(s.gpus)
    if placed:
        layers = [layer for layer in workload.layers if is_table(layer)]
        for layer, rank in zip(layers, placement.table_ranks(len(layers)), strict=True):
            tables[rank] += (layer.params * (2.0 * layer.dtype_bytes + opt)
                             + workload.batch_size * layer.saved_bytes)
    common = np.array([sum(x[:4]) for x in per_stage])
    totals = common[stage_of] + tables
    rank = int(np.argmax(totals))
    w, g, o, act, inflight, work, host = per_stage[int(stage_of[rank])]
    return MemoryBreakdown(
        strategy=str(s), hardware=hw.name, rank=rank, stage=int(stage_of[rank]),
        weights_bytes=w, gradients_bytes=g, optimizer_bytes=o, activations_bytes=act,
        embedding_bytes=float(tables[rank]), inflight_microbatches=inflight,
        microbatch_size=micro, capacity_bytes=hw.memory_bytes,
        recompute_workspace_bytes=work, offloaded_bytes=host,
        host_capacity_bytes=hw.host_memory_bytes)


def check_memory(workload: Workload, strategy: Strategy | str, hardware: Hardware | str,
                 placement: Placement | None = None) -> MemoryBreakdown:
    """:func:`memory_per_gpu`, raising when the most loaded GPU does not fit.

    Raises
    ------
    InfeasibleError
        ``"strategy dp=..,tp=.. needs X GiB per GPU (...), hardware H has Y GiB"``.
    InvalidSpecError
        The strategy does not apply to the workload.

    Examples
    --------
    >>> from codesign.workloads import get_workload
    >>> m = check_memory(get_workload("resnet50"), "dp=512", "A100-80")
    >>> m.fits
    True
    """
    breakdown = memory_per_gpu(workload, strategy, hardware, placement)
    if not breakdown.fits:
        raise InfeasibleError(breakdown.message(), reason="memory")
    return breakdown
