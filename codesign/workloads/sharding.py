"""How a strategy shards one layer: :class:`LayerShard` and :func:`shard_layer`.

This is the one home of the per-layer sharding rule.  A strategy applied to a layer
gives what one GPU holds, computes, keeps and sends for that layer; the memory check
(:mod:`codesign.workloads.memory`) and the demand (:mod:`codesign.workloads.demand`,
which the iteration model :mod:`evaluators.iteration` times) both read it from here.

Rules (``T`` = tp, ``C`` = cp, ``E`` = ep, ``b`` = samples of one micro-batch):

* **Parameters** (Megatron-LM tensor parallelism, Shoeybi et al. 2019, Sec. 3; expert
  parallelism): a ``tp_shardable`` layer keeps ``1 / T`` of its parameters on each GPU;
  the experts are divided over the ``E`` ranks of the EP group (each GPU hosts
  ``experts / E`` of them), each still split by the experts' tensor parallelism
  (:attr:`Strategy.expert_tp`: ``T``, or 1 with folded experts) when the layer is
  shardable.
  ZeRO then shards the model state over :attr:`Strategy.zero_groups`
  (Rajbhandari et al. SC'20, Sec. 5.1): :meth:`LayerShard.model_state`.  Gradients,
  optimizer state, the gradient reduction and the optimizer step cover the trainable
  parameters only (:attr:`LayerShard.trainable`: all of them, or a LoRA-``frozen``
  layer's adapters, :mod:`codesign.workloads.lora`).
* **Work** (:attr:`LayerShard.local`): TP splits the FLOPs, the GEMMs (along the
  dimension each GEMM names) and the activation traffic of a shardable layer by ``T``;
  context parallelism splits the tokens by ``C`` (causal load balancing gives each CP
  rank the same attention work, Megatron-LM's ``2 C`` chunk assignment).
* **Recomputation** (Korthikanti et al. 2022, Sec. 5): ``full`` reruns the whole
  forward in the backward pass (the strategy a layer is sharded with carries the
  layer's own mode: :func:`~codesign.workloads.strategy.layer_strategies`, which keeps
  the output layer and, with ``recompute_layers``, the later blocks of each model
  chunk out of it); ``selective`` reruns the attention core when its
  ``s x s`` tensors were dropped (with flash attention nothing is stored and its
  backward kernel already recomputes the scores); ``recompute_modules`` chooses what
  selective reruns, Megatron-core's ``--recompute-modules`` (NVIDIA, *Scalable Training
  of Mixture-of-Experts Models with Megatron Core*, 2026, Sec. 4.1.4): ``core_attn``
  (the default), ``layernorm`` (the input norm's output is dropped and rerun from its
  saved input), ``mlp`` (a dense MLP block keeps only its input, like ``full``),
  ``moe_act`` (the experts' activation output is dropped and rerun) and
  ``mla_up_proj`` (multi-head latent attention's per-head queries, keys and values are
  dropped and their up projections rerun from the saved latents).
* **Activations kept** (Korthikanti et al. 2022, Eqs. 2, 4, 6):
  :attr:`LayerShard.activation_bytes_per_sample` (the memory module's docstring gives the
  per-flag formulas); under an 8-bit ``precision`` (the strategy's, which the memory and
  demand models resolve from the workload's before sharding) the weight GEMMs' saved
  inputs take one byte per element (``Layer.gemm_in_saved_bytes``).
* **Communication per micro-batch**: the TP all-reduce (or SP reduce-scatter +
  all-gather) of ``b x tp_allreduce_bytes / C`` after the forward and ``b x
  tp_bwd_allreduce_bytes / C`` after the backward; the expert all-to-all of ``b x
  ep_alltoall_bytes / (T C)`` per rank; the CP exchange of ``b x kv_bytes / T`` key/value
  bytes; the pipeline boundary activation ``b x activation_bytes / C`` (each TP rank
  sends ``1 / T`` of it).

Examples
--------
>>> from codesign.workloads import get_workload, parse_strategy
>>> w = get_workload("gpt3-175b")
>>> sh = shard_layer(w.layer("block0.mlp"), parse_strategy("dp=8,tp=8,pp=16,microbatches=64"))
>>> round(sh.shared_params * 8 / w.layer("block0.mlp").params, 6)
1.0
>>> round(sh.layer.fwd_flops / sh.local.fwd_flops)
8
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from codesign.workloads.model import FP8_FORMATS, Layer
from codesign.workloads.strategy import Strategy

__all__ = ["LayerShard", "shard_layer", "layer_params_per_gpu", "activation_bytes_per_sample",
           "reruns_forward", "tp_degrees"]


def tp_degrees(layer: Any, strategy: Strategy) -> tuple[int, int]:
    """``(tp, expert_tp)``: the tensor-parallel degrees that split ``layer``'s non-expert
    and expert weights (and its activations); ``(1, 1)`` for a layer TP does not shard
    (embeddings, convolutions)."""
    return (strategy.tp, strategy.expert_tp) if layer.tp_shardable else (1, 1)


def layer_params_per_gpu(layer: Any, strategy: Strategy) -> tuple[float, float]:
    """Parameters of ``layer`` one GPU holds before ZeRO: ``(shared, expert)`` (rule
    **Parameters** of the module docstring)."""
    t, et = tp_degrees(layer, strategy)
    expert = float(layer.expert_params)
    shared = float(layer.params) - expert
    return shared / t, expert / (et * strategy.ep)


def reruns_forward(layer: Any, strategy: Strategy) -> bool:
    """Whether recomputation reruns ``layer``'s whole forward (and its forward
    communication): ``full``, or a dense MLP block with ``recompute_modules=...mlp``;
    such a layer keeps only its input."""
    return strategy.recompute == "full" or (
        "mlp" in strategy.selective_modules and layer.is_mlp_block)


def activation_bytes_per_sample(layer: Any, strategy: Strategy) -> float:
    """Bytes ``layer`` keeps per sample of a micro-batch on one GPU for the backward pass
    (Korthikanti et al. 2022, Eqs. 2, 4, 6; the rules per flag are in the docstring of
    :mod:`codesign.workloads.memory`)."""
    s = strategy
    t = tp_degrees(layer, s)[0]
    tsp = t if s.sp else 1
    if reruns_forward(layer, s):
        return layer.checkpoint_size / tsp / s.cp
    mods = s.selective_modules
    core = layer.attn_core_saved_bytes if "core_attn" in mods else 0.0
    # Fine-grained recomputation frees the norm's output (in the sequence-parallel part
    # under TP) and the experts' activation output (split like the expert GEMMs).
    norm = layer.norm_saved_bytes if "layernorm" in mods else 0.0
    act = layer.act_saved_bytes if "moe_act" in mods and layer.kind == "expert" else 0.0
    up = layer.up_proj_saved_bytes if "mla_up_proj" in mods else 0.0
    # 8-bit GEMMs keep their inputs in 8 bits (Layer.gemm_in_saved_bytes): a saving on
    # the inputs still saved -- the norm output is the first GEMM's input, the experts'
    # activation output their second one's.
    shrink = 1.0 - 1.0 / layer.dtype_bytes if (
        s.precision in FP8_FORMATS and layer.fp8_gemms and layer.dtype_bytes > 1) else 0.0
    fp8_sp = shrink * max(layer.gemm_in_sp_bytes - norm, 0.0)
    fp8_rest = shrink * max(layer.gemm_in_saved_bytes - layer.gemm_in_sp_bytes - act, 0.0)
    sp_all = min(layer.sp_saved_bytes, layer.saved_bytes) if t > 1 else 0.0
    sp_part = sp_all - min(norm, sp_all) - (fp8_sp if t > 1 else 0.0)
    rest = layer.saved_bytes - sp_all - core - act - up - (0.0 if t > 1 else norm) \
        - fp8_rest - (0.0 if t > 1 else fp8_sp)
    return (max(rest, 0.0) / t + max(sp_part, 0.0) / tsp) / s.cp


@dataclass(frozen=True)
class LayerShard:
    """One layer as one GPU runs it under a strategy (module docstring for the rules).

    Attributes
    ----------
    layer : Layer
        The whole layer (per-sample numbers of the model).
    strategy : Strategy
        The strategy applied.
    """

    layer: Layer
    strategy: Strategy

    @cached_property
    def params(self) -> tuple[float, float]:
        """``(shared, expert)`` parameters on one GPU before ZeRO
        (:func:`layer_params_per_gpu`)."""
        return layer_params_per_gpu(self.layer, self.strategy)

    @cached_property
    def trainable(self) -> tuple[float, float]:
        """``(shared, expert)`` trainable parameters on one GPU before ZeRO: :attr:`params`,
        or for a ``frozen`` layer its adapters' (shared, split like the layer's)."""
        if not self.layer.frozen:
            return self.params
        return self.layer.adapter_params / tp_degrees(self.layer, self.strategy)[0], 0.0

    @property
    def shared_params(self) -> float:
        """Non-expert parameters on one GPU before ZeRO."""
        return self.params[0]

    @property
    def expert_params(self) -> float:
        """Expert parameters on one GPU before ZeRO."""
        return self.params[1]

    @property
    def weight_dtype_bytes(self) -> int:
        """Bytes per weight as the GPU keeps and all-gathers them: 1 for a layer with
        8-bit weight GEMMs under ``fp8_params`` (the strategy module's rule; not the
        embedding, whose lookups are no GEMM), else the layer's ``dtype_bytes``."""
        layer = self.layer
        if (self.strategy.fp8_params and layer.fp8_gemms and layer.gemms
                and layer.kind != "embedding"):
            return 1
        return layer.dtype_bytes

    @property
    def shared_bytes(self) -> float:
        """Bytes of the non-expert weights on one GPU, bytes (their gradients:
        the matching part of :attr:`trainable` x :attr:`grad_dtype_bytes`)."""
        return self.params[0] * self.weight_dtype_bytes

    @property
    def expert_bytes(self) -> float:
        """Bytes of the expert weights on one GPU, bytes (their gradients:
        the matching part of :attr:`trainable` x :attr:`grad_dtype_bytes`)."""
        return self.params[1] * self.weight_dtype_bytes

    @property
    def grad_dtype_bytes(self) -> int:
        """Bytes per gradient element (:meth:`Strategy.grad_bytes` of the layer's
        ``dtype_bytes``)."""
        return self.strategy.grad_bytes(self.layer.dtype_bytes)

    def step_params(self) -> float:
        """Parameters this GPU updates in the optimizer step: its parameters divided by
        the shard groups of :attr:`Strategy.zero_groups` (each group 1 without ZeRO)."""
        n_dense, n_expert = self.strategy.zero_groups
        shared, expert = self.trainable
        return shared / n_dense + expert / n_expert

    def model_state(self, optimizer_bytes_per_param: float
                    ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Weights, gradients and optimizer state on one GPU after ZeRO, bytes.

        Returns ``((w, g, o) of the shared parameters, (w, g, o) of the expert ones)``.
        ZeRO (Rajbhandari et al. SC'20, Sec. 5.1, Fig. 1) divides the optimizer state
        (stage >= 1), the gradients (>= 2) and the weights (3) by the shard group
        (:attr:`Strategy.zero_groups`: ``dp x cp`` for shared, :attr:`Strategy.expert_dp`
        for expert parameters).  Weights take :attr:`weight_dtype_bytes` per parameter,
        gradients :attr:`grad_dtype_bytes`
        (Megatron-LM's "float16 param, fp32 grads": 2 + 4 + 12 = 18 bytes with Adam,
        6 + 12 / d with its distributed optimizer, ``docs/source/distrib_optimizer.md`` at
        commit f2e5db4).  Gradients and optimizer state cover :attr:`trainable`.
        """
        s = self.strategy
        out = []
        for params, trained, group in zip(self.params, self.trainable, s.zero_groups):
            w, g = params * self.weight_dtype_bytes, trained * self.grad_dtype_bytes
            o = trained * optimizer_bytes_per_param
            if s.zero >= 1:
                o /= group
            if s.zero >= 2:
                g /= group
            if s.zero >= 3:
                w /= group
            out.append((w, g, o))
        return out[0], out[1]

    @cached_property
    def local(self) -> Layer:
        """The part of the layer one GPU computes, per sample.

        TP divides FLOPs, HBM traffic (``io_bytes``), the attention core and the GEMMs
        of a shardable layer; CP divides the tokens (every GEMM's ``M``, and with
        ``cp_comm=ring`` the keys one fused attention kernel loops over: ring attention
        runs one kernel per chunk of ``s / cp`` keys, the all-gather variant one over all
        ``s``); expert GEMMs
        (shard ``en``/``ek``) gather ``ep`` ranks' tokens on ``experts / ep`` local
        experts; memory-bound operators are split by TP (``tp`` ones, and ``sp`` ones with
        sequence parallelism) and CP; the adapters' GEMMs like the others.  Parameters are
        :attr:`params`' (experts folded in, ``experts = 0``)."""
        layer, s = self.layer, self.strategy
        shared, expert = self.params
        T, ET = tp_degrees(layer, s)
        t = T * s.cp
        E = s.ep if layer.experts else 1

        def split_gemms(gemms: tuple) -> tuple:
            # Expert GEMMs: split by the experts' own tensor parallelism ET, each GPU's
            # experts gathering E ranks' tokens, which are 1 / T of a sample's with
            # ET < T (the sequence-parallel split; ET = T: E x the tokens every TP rank
            # holds).
            if t * E == 1:
                return gemms
            return tuple((m / s.cp * (E * ET / T if shard in ("en", "ek") else 1),
                          n / (ET if shard == "en" else T) if shard in ("n", "en") else n,
                          k / (ET if shard == "ek" else T) if shard in ("k", "ek") else k,
                          c / T if shard == "count" else c / E if shard in ("en", "ek")
                          else c, shard)
                         for m, n, k, c, shard in gemms)
        ops = tuple((name, f / split, b / split, shard)
                    for name, f, b, shard in layer.memory_ops
                    for split in [s.cp * (T if shard == "tp" or (shard == "sp" and s.sp)
                                          else 1)])
        return replace(layer, params=int(round(shared + expert)), expert_params=0, experts=0,
                       top_k=0, expert_groups=0, group_top_k=0,
                       adapter_params=int(self.trainable[0]) if layer.frozen else 0,
                       fwd_flops=layer.fwd_flops / t, bwd_flops=layer.bwd_flops / t,
                       io_bytes=layer.io_bytes / t,
                       attn_core_fwd_flops=layer.attn_core_fwd_flops / t,
                       gemms=split_gemms(layer.gemms),
                       adapter_gemms=split_gemms(layer.adapter_gemms),
                       up_proj_gemms=split_gemms(layer.up_proj_gemms),
                       memory_ops=ops,
                       attn_keys=layer.attn_keys / (s.cp if s.cp_comm == "ring" else 1))

    @cached_property
    def recompute_flops(self) -> float:
        """Forward FLOPs per sample of :attr:`local` rerun in the backward pass.

        ``full``: the whole forward; ``selective``: the attention core, when its
        ``s x s`` tensors were dropped (``attn_core_saved_bytes > 0``), with
        ``recompute_modules=...mlp`` the whole forward of a dense MLP block, with
        ``...mla_up_proj`` the up projections of latent attention (norms and activations
        rerun memory-bound kernels, no FLOPs)."""
        s, local = self.strategy, self.local
        if reruns_forward(local, s):
            return local.fwd_flops
        flops = 0.0
        if "core_attn" in s.selective_modules and local.attn_core_saved_bytes > 0:
            flops += local.attn_core_fwd_flops
        if "mla_up_proj" in s.selective_modules:
            flops += sum(2.0 * m * n * k * c for m, n, k, c, _ in local.up_proj_gemms)
        return flops

    @cached_property
    def activation_bytes_per_sample(self) -> float:
        """Bytes kept per sample for the backward pass (:func:`activation_bytes_per_sample`)."""
        return activation_bytes_per_sample(self.layer, self.strategy)

    def tp_bytes(self, batch: float, phase: str) -> float:
        """Size of the TP collective after the ``forward`` or ``backward`` pass of
        ``batch`` samples (Megatron's ``g`` / ``f`` operators; with sequence parallelism
        the reduce-scatter and the all-gather each have this size), bytes."""
        per = (self.layer.tp_allreduce_bytes if phase == "forward"
               else self.layer.tp_bwd_allreduce_bytes)
        return batch * per / self.strategy.cp

    @property
    def folded_experts_only(self) -> bool:
        """Whether this expert layer runs without tensor-parallel collectives: its
        experts are folded (``etp = 1`` with ``tp > 1``) and it has no shared experts
        (no GEMM split like the dense layers')."""
        s, layer = self.strategy, self.layer
        return (bool(layer.experts) and s.expert_tp == 1 and s.tp > 1
                and not any(g[4] in ("n", "k") for g in layer.gemms))

    def ep_alltoall_bytes(self, batch: float) -> float:
        """Per-rank send buffer of the expert dispatch (and combine) all-to-all, bytes."""
        s = self.strategy
        return batch * self.layer.ep_alltoall_bytes / (s.tp * s.cp)

    def cp_kv_bytes(self, batch: float) -> float:
        """Key/value bytes of ``batch`` samples one TP rank exchanges in its CP ring
        (0 without context parallelism or attention), bytes."""
        s = self.strategy
        if s.cp <= 1 or not self.layer.kv_bytes:
            return 0.0
        return batch * self.layer.kv_bytes / s.tp

    def boundary_bytes(self, batch: float) -> float:
        """The layer's output activation of ``batch`` samples on one CP rank when it
        crosses a pipeline boundary (each TP rank sends ``1 / tp`` of it), bytes."""
        return batch * self.layer.activation_bytes / self.strategy.cp


def shard_layer(layer: Layer, strategy: Strategy) -> LayerShard:
    """``layer`` under ``strategy``: what one GPU holds, computes, keeps and sends."""
    return LayerShard(layer, strategy)
