"""The workload data model: :class:`Layer`, :class:`Workload` and :class:`MemorySummary`.

A workload is an ordered tuple of layers (forward order) plus the training settings
that the papers fix (batch size, sequence length, number format, optimizer).  Every
per-layer quantity is **per sample**: one image, one recommendation query, one
sequence of ``seq_len`` tokens.  Strategies, demand and the iteration model (in
``evaluators``) multiply by the batch a device processes.

Conventions (stated once, used by every builder in this package)
----------------------------------------------------------------
* **FLOPs** count 2 floating-point operations per multiply-accumulate (MAC) of the
  matrix products and convolutions, including the two attention matmuls (scores
  ``Q K^T`` and context ``softmax(.) V``) over the *full* ``seq x seq`` matrix (no
  causal halving: the Megatron-LM / PaLM convention).  Element-wise work (norms,
  activations, softmax, residual adds, pooling, bias adds) is not counted; its cost
  appears in the roofline through ``io_bytes`` and, in the kernel model, through the
  layer's listed memory-bound operators (``memory_ops``).  So ResNet-50 is 4.09 G MACs =
  8.2 GFLOP per image forward.
* **Backward** = 2 x forward for layers with weights and for the attention matmuls
  (one product for the input gradient, one for the weight / other-operand gradient).
  The first layer's unneeded input gradient is still counted.  Embedding bags:
  backward = forward (the gradient is scattered back to the same rows).
* **activation_bytes**: the layer's output per sample, i.e. what a pipeline-stage
  boundary after this layer would send forward (and receive as gradient backward).
* **io_bytes**: activation bytes read plus written per sample in the forward pass
  (HBM traffic model of the roofline, see :mod:`codesign.workloads.compute`).
* **saved_bytes**: activations kept per sample for the backward pass (for
  transformer blocks this reproduces Korthikanti et al. 2022, "Reducing activation
  recomputation in large transformer models", Eq. 1: ``s h (34 + 5 a s / h)`` bytes
  per layer with 16-bit activations and dropout).
* Weights are ``params x dtype_bytes`` bytes; gradients have the same size (of the
  trainable parameters only, ``Layer.trainable_params``: with LoRA fine-tuning the
  adapters', :mod:`codesign.workloads.lora`).
  ``Workload.optimizer_bytes_per_param`` counts the optimizer *state only*: 12 for
  Adam in mixed precision (fp32 master copy, momentum and variance; ZeRO, Rajbhandari
  et al. SC'20 Sec. 3.1), so weights + gradients + state = 2 + 2 + 12 = 16 bytes per
  parameter; 0 for plain SGD (FlexFlow's ``SGDOptimizer`` in TopoOpt's runs).
* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, Sec. 3): a layer with
  ``tp_shardable`` splits its parameters and FLOPs evenly over the TP group;
  ``tp_allreduce_bytes`` is the all-reduce a TP group runs per sample in the forward
  pass after the layer (the ``g`` operator), ``tp_bwd_allreduce_bytes`` the one in the
  backward pass (the ``f`` operator).  For an attention or MLP block both equal
  ``seq x hidden x dtype_bytes``.
* Expert parallelism: ``ep_alltoall_bytes`` is the per-sample dispatch all-to-all of
  an expert layer in the forward pass (``seq x hidden x top_k x dtype_bytes``); the
  combine all-to-all has the same size, and the backward pass repeats both.
* Execution knobs (Korthikanti et al. 2022; see :mod:`codesign.workloads.strategy`):
  ``attn_core_fwd_flops`` and ``attn_core_saved_bytes`` are the forward FLOPs and the
  saved ``s x s`` tensors of the attention core (what selective recomputation reruns
  and drops: ``4 s^2 h`` FLOPs and ``5 a s^2`` bytes for 2-byte activations with
  dropout); ``sp_saved_bytes`` is the part of ``saved_bytes`` that tensor parallelism
  alone leaves replicated on every TP rank and sequence parallelism splits (norm
  inputs, the inputs of the first linear layers, dropout masks: ``10 s h`` per GPT
  layer, Eq. 2 vs Eq. 4); ``checkpoint_bytes`` is what full recomputation keeps (the
  transformer layer's input, ``2 s h`` with 2-byte activations, Sec. 5; ``None`` = the
  layer's output); ``kv_bytes`` the keys and values one sample's attention produces
  (what context parallelism circulates in its ring).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_choice, check_int, check_number

__all__ = ["KINDS", "PRECISIONS", "FP8_FORMATS", "MAX_BATCH_SIZE", "Layer", "Workload",
           "MemorySummary"]

#: Layer kinds.  ``dense`` also covers recurrent cells (LSTM), whose cost is matmuls.
KINDS = ("dense", "embedding", "attention", "expert", "convolution", "norm", "other")

_MAX_COUNT = 10**16  # sanity bound on counts; far above any real model
#: Largest global batch, samples.  Published batches reach ~10^6 samples (recommendation
#: models; LLMs train on a few thousand sequences); the strategy search enumerates the
#: divisors of a replica's batch, O(batch) each time, so 2^24 keeps `optimize` to
#: seconds (2.5-7.4 s measured on 2 servers) where 10^9 ran for hours.
MAX_BATCH_SIZE = 2 ** 24
#: Number formats of the matrix math: ``fp8`` is Transformer Engine's delayed scaling,
#: ``fp8-cs`` its per-tensor current scaling, ``mxfp8`` the 32-element block scaling of
#: Blackwell (codesign.workloads.compute, "FP8").
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp8-cs", "mxfp8")
#: The 8-bit recipes (Transformer Engine's; :mod:`codesign.workloads.compute`, "FP8"):
#: weight GEMMs at the fp8 peak, their inputs saved for the backward pass in 8 bits.
FP8_FORMATS = ("fp8", "fp8-cs", "mxfp8")


def _nonneg_int(where: str, value: Any) -> int:
    if isinstance(value, bool):
        raise invalid(where, value, "an integer >= 0")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 0 or value > _MAX_COUNT:
        raise invalid(where, value, f"an integer in 0..{_MAX_COUNT}")
    return value


_SHARDS = ("", "n", "k", "count", "en", "ek")
#: What splits a memory-bound operator's bytes (see ``Layer.memory_ops``).
MEMORY_OP_SHARDS = ("", "tp", "sp")


def _check_memory_ops(where: str, ops: Any) -> tuple:
    out = []
    try:
        items = list(ops)
    except TypeError:
        raise invalid(f"{where} memory_ops", ops,
                      "a list of (name, fwd_bytes, bwd_bytes, shard)") from None
    for op in items:
        if not isinstance(op, (tuple, list)) or len(op) != 4 or not isinstance(op[0], str):
            raise invalid(f"{where} memory_ops entry", op, "(name, fwd_bytes, bwd_bytes, shard)")
        f = check_number(f"{where} memory_ops {op[0]} fwd_bytes", op[1], inclusive=True)
        b = check_number(f"{where} memory_ops {op[0]} bwd_bytes", op[2], inclusive=True)
        if op[3] not in MEMORY_OP_SHARDS:
            raise invalid(f"{where} memory_ops {op[0]} shard", op[3], "'', 'tp' or 'sp'")
        out.append((op[0], f, b, op[3]))
    return tuple(out)


def _check_gemms(where: str, gemms: Any) -> tuple:
    out = []
    try:
        items = list(gemms)
    except TypeError:
        raise invalid(f"{where} gemms", gemms, "a list of (M, N, K, count, shard)") from None
    for g in items:
        if not isinstance(g, (tuple, list)) or len(g) != 5:
            raise invalid(f"{where} gemms entry", g, "(M, N, K, count, shard)")
        vals = [check_number(f"{where} gemms {name}", v, inclusive=True)
                for name, v in zip(("M", "N", "K", "count"), g[:4])]
        if g[4] not in _SHARDS:
            raise invalid(f"{where} gemms shard", g[4], "'', 'n', 'k', 'count', 'en' or 'ek'")
        out.append((*vals, g[4]))
    return tuple(out)


@dataclass(frozen=True)
class Layer:
    """One layer (or a fused block such as attention with its norm), per sample.

    Parameters
    ----------
    name : str
        Unique within its workload (``"block3.attn"``, ``"conv2_1.b"``).
    kind : str
        One of :data:`KINDS`.
    params : int
        Trainable parameters (count), including folded norms and biases.
    fwd_flops, bwd_flops : float
        FLOPs per sample (2 per MAC; see the module docstring).
    activation_bytes : float
        Output activation per sample, bytes.
    dtype_bytes : int
        Bytes per parameter and per activation element (2 for fp16/bf16, 4 for fp32).
    io_bytes : float
        Activation bytes read + written per sample in the forward pass.
    saved_bytes : float
        Activation bytes kept per sample for the backward pass.
    table_rows, table_dim, lookups : int
        Embedding tables: rows, row width (elements) and rows gathered per sample.
    experts, top_k, expert_params : int
        Expert (mixture-of-experts) layers: experts, experts used per token, and how
        many of ``params`` sit in the experts (the rest, e.g. the router, is shared).
    expert_groups, group_top_k : int
        Group-limited routing of an expert layer: its experts form ``expert_groups``
        equal groups and each token picks its experts from ``group_top_k`` of them
        (DeepSeek-V3's node-limited routing; 0: no limit;
        :mod:`codesign.workloads.dispatch`).
    tp_shardable : bool
        Megatron tensor parallelism splits params and FLOPs evenly.
    tp_allreduce_bytes, tp_bwd_allreduce_bytes : float
        TP all-reduce per sample in the forward / backward pass, bytes.
    ep_alltoall_bytes : float
        Expert dispatch all-to-all per sample in the forward pass, bytes.
    signature : str
        Operator signature used to match measured profiles (FlexFlow names such as
        ``Dense_2048_2048`` or ``Embed_10000000x128``); empty if none.
    attn_core_fwd_flops, attn_core_saved_bytes : float
        Attention core forward FLOPs and saved ``s x s`` bytes per sample.
    sp_saved_bytes : float
        Saved bytes per sample that sequence parallelism (not TP alone) splits.
    norm_saved_bytes, act_saved_bytes : float
        Saved bytes per sample that fine-grained recomputation frees
        (``recompute_modules``): the input norm's output (rerun from its saved input;
        part of ``sp_saved_bytes``) and the experts' activation output (rerun from the
        first expert GEMM's saved output).
    up_proj_saved_bytes : float
        Multi-head latent attention: the per-head queries, keys and values its up
        projections materialise from the latents, saved bytes per sample, which
        ``recompute_modules=mla_up_proj`` frees and reruns (``up_proj_gemms``).
    up_proj_gemms : tuple of (M, N, K, count, shard)
        Those up projections (format of ``gemms``, and among them): the products that
        ``mla_up_proj`` recomputation reruns before the backward pass.
    gemm_in_saved_bytes, gemm_in_sp_bytes : float
        Saved bytes per sample that are the inputs of the layer's weight GEMMs (kept for
        their weight gradient), and the part of them in ``sp_saved_bytes``.  Under an
        8-bit precision Transformer Engine keeps them in FP8 (one byte per element) when
        ``fp8_gemms``: its ``Linear`` saves the quantized input, column-wise only
        ("Discard row-wise data since it is not needed in backward pass",
        ``transformer_engine/pytorch/module/linear.py``), as ``LayerNormLinear`` does its
        norm output and ``GroupedLinear`` the experts' inputs.
    checkpoint_bytes : float or None
        Bytes per sample full recomputation keeps; ``None`` = ``activation_bytes``.
    kv_bytes : float
        Key and value bytes per sample (context-parallel ring exchange).
    gemms : tuple of (M, N, K, count, shard)
        The layer's matrix products per sample, forward pass (``C[M,N] = A[M,K] B[K,N]``,
        ``count`` of them, e.g. one per attention head), for the kernel model of
        :mod:`codesign.workloads.efficiency`; ``M`` counts the sample's tokens.  ``shard``
        says what tensor parallelism splits: ``"n"`` (column-parallel), ``"k"``
        (row-parallel), ``"count"`` (heads) or ``""`` (nothing); context parallelism
        splits ``M``.  ``"en"`` / ``"ek"`` are the grouped GEMMs of mixture-of-experts
        layers (``count`` experts, ``M`` tokens per expert per sample): tensor
        parallelism splits ``N`` / ``K``, expert parallelism ``ep`` keeps ``count / ep``
        experts per GPU, each fed by the tokens of ``ep`` ranks (``M x ep``).  Empty: the
        layer is timed by the roofline.
    memory_ops : tuple of (name, fwd_bytes, bwd_bytes, shard)
        The layer's memory-bound operators (normalisation, softmax, dropout, activation,
        residual adds, the loss over the vocabulary), HBM bytes read + written per sample
        in the forward and the backward pass; the kernel model times them at HBM
        bandwidth.  ``shard``: ``"tp"`` split by tensor parallelism, ``"sp"`` split by it
        only with sequence parallelism (replicated on every TP rank otherwise,
        Korthikanti et al. 2022 Sec. 4.2.2), ``""`` never split by it; context
        parallelism splits all.  Empty: the kernel model approximates them by
        ``io_bytes`` (forward) and twice that (backward).
    attention_kernel : str
        ``"flash"`` (fused attention, Dao et al.; its FLOPs are ``attn_core_fwd_flops``
        and not in ``gemms``), ``"unfused"`` (scores and context are in ``gemms``) or
        ``""`` (no attention core).
    causal : bool
        Causal attention mask (a fused kernel skips the masked half).
    attn_keys : float
        Keys each query attends to in one fused attention kernel (the sequence length;
        context parallelism's chunk of it): the length of the kernel's inner loop, which
        sets its per-tile overhead (:func:`codesign.workloads.efficiency.flash_attention_time`);
        0 = not known (no tile overhead).
    fp8_gemms : bool
        Whether its weight GEMMs run in fp8 when the precision is ``fp8`` (the
        Transformer Engine modules of Megatron-LM and NeMo); ``False`` for a layer the
        frameworks keep in 16 bit, such as Megatron-LM's output layer (module docstring
        of :mod:`codesign.workloads.compute`).
    frozen : bool
        The layer's own weights are not trained (parameter-efficient fine-tuning,
        :mod:`codesign.workloads.lora`): the backward pass computes only the data
        gradient of its weight GEMMs (not ``count`` ones, whose operands are both
        activations), and only ``adapter_params`` have gradients and optimizer state.
    adapter_params : int
        Trainable adapter parameters (LoRA's low-rank matrices) included in ``params``;
        the only trainable ones of a ``frozen`` layer.  Split by tensor parallelism like
        the rest of a shardable layer's parameters.
    adapter_gemms : tuple of (M, N, K, count, shard)
        The adapters' matrix products (format of ``gemms``): trained (both backward
        products) and in 16 bit under every precision (NeMo's LoRA adapters are
        Megatron ``ColumnParallelLinear`` / ``RowParallelLinear`` modules, not
        Transformer Engine ones).
    """

    name: str
    kind: str
    params: int
    fwd_flops: float
    bwd_flops: float
    activation_bytes: float
    dtype_bytes: int = 2
    io_bytes: float = 0.0
    saved_bytes: float = 0.0
    table_rows: int = 0
    table_dim: int = 0
    lookups: int = 0
    experts: int = 0
    top_k: int = 0
    expert_params: int = 0
    tp_shardable: bool = False
    tp_allreduce_bytes: float = 0.0
    tp_bwd_allreduce_bytes: float = 0.0
    ep_alltoall_bytes: float = 0.0
    signature: str = ""
    attn_core_fwd_flops: float = 0.0
    attn_core_saved_bytes: float = 0.0
    sp_saved_bytes: float = 0.0
    checkpoint_bytes: float | None = None
    kv_bytes: float = 0.0
    gemms: tuple[tuple[float, float, float, float, str], ...] = ()
    attention_kernel: str = ""
    causal: bool = False
    memory_ops: tuple[tuple[str, float, float, str], ...] = ()
    attn_keys: float = 0.0
    fp8_gemms: bool = True
    expert_groups: int = 0
    group_top_k: int = 0
    norm_saved_bytes: float = 0.0
    act_saved_bytes: float = 0.0
    up_proj_saved_bytes: float = 0.0
    up_proj_gemms: tuple[tuple[float, float, float, float, str], ...] = ()
    gemm_in_saved_bytes: float = 0.0
    gemm_in_sp_bytes: float = 0.0
    frozen: bool = False
    adapter_params: int = 0
    adapter_gemms: tuple[tuple[float, float, float, float, str], ...] = ()

    def __post_init__(self) -> None:
        where = f"layer {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise invalid("layer name", self.name, "a non-empty string")
        check_choice(f"{where} kind", self.kind, KINDS)
        for name in ("params", "table_rows", "table_dim", "lookups", "experts", "top_k",
                     "expert_params", "expert_groups", "group_top_k", "adapter_params"):
            object.__setattr__(self, name, _nonneg_int(f"{where} {name}", getattr(self, name)))
        for name in ("fwd_flops", "bwd_flops", "activation_bytes", "io_bytes", "saved_bytes",
                     "tp_allreduce_bytes", "tp_bwd_allreduce_bytes", "ep_alltoall_bytes",
                     "attn_core_fwd_flops", "attn_core_saved_bytes", "sp_saved_bytes",
                     "kv_bytes", "attn_keys", "norm_saved_bytes", "act_saved_bytes",
                     "up_proj_saved_bytes", "gemm_in_saved_bytes", "gemm_in_sp_bytes"):
            object.__setattr__(self, name, check_number(f"{where} {name}", getattr(self, name),
                                                        inclusive=True))
        if isinstance(self.dtype_bytes, bool) or self.dtype_bytes not in (1, 2, 4, 8):
            raise invalid(f"{where} dtype_bytes", self.dtype_bytes, "1, 2, 4 or 8")
        if not isinstance(self.tp_shardable, bool):
            raise invalid(f"{where} tp_shardable", self.tp_shardable, "true or false")
        if not isinstance(self.signature, str):
            raise invalid(f"{where} signature", self.signature, "a string")
        if self.checkpoint_bytes is not None:
            object.__setattr__(self, "checkpoint_bytes", check_number(
                f"{where} checkpoint_bytes", self.checkpoint_bytes, inclusive=True))
        for name in ("attn_core_saved_bytes", "sp_saved_bytes", "norm_saved_bytes",
                     "act_saved_bytes", "up_proj_saved_bytes", "gemm_in_saved_bytes"):
            if getattr(self, name) > self.saved_bytes * (1 + 1e-12):
                raise invalid(f"{where} {name}", getattr(self, name),
                              f"at most saved_bytes ({self.saved_bytes:g})")
        if self.gemm_in_sp_bytes > min(self.gemm_in_saved_bytes, self.sp_saved_bytes) \
                * (1 + 1e-12):
            raise invalid(f"{where} gemm_in_sp_bytes", self.gemm_in_sp_bytes,
                          "at most gemm_in_saved_bytes and sp_saved_bytes "
                          f"({min(self.gemm_in_saved_bytes, self.sp_saved_bytes):g})")
        if self.attn_core_fwd_flops > self.fwd_flops * (1 + 1e-12):
            raise invalid(f"{where} attn_core_fwd_flops", self.attn_core_fwd_flops,
                          f"at most fwd_flops ({self.fwd_flops:g})")
        for name in ("gemms", "adapter_gemms", "up_proj_gemms"):
            if getattr(self, name):
                object.__setattr__(self, name, _check_gemms(f"{where} {name}",
                                                             getattr(self, name)))
        if any(g not in self.gemms for g in self.up_proj_gemms):
            raise invalid(f"{where} up_proj_gemms", self.up_proj_gemms,
                          "products listed in gemms (the ones recomputation reruns)")
        if self.memory_ops:
            object.__setattr__(self, "memory_ops", _check_memory_ops(where, self.memory_ops))
        if self.attention_kernel not in ("", "flash", "unfused"):
            raise invalid(f"{where} attention_kernel", self.attention_kernel,
                          "'', 'flash' or 'unfused'")
        for name in ("causal", "fp8_gemms", "frozen"):
            if not isinstance(getattr(self, name), bool):
                raise invalid(f"{where} {name}", getattr(self, name), "true or false")
        if self.adapter_params + self.expert_params > self.params:
            raise invalid(f"{where} adapter_params", self.adapter_params,
                          f"at most params - expert_params "
                          f"({self.params - min(self.expert_params, self.params)})")
        if self.expert_params > self.params:
            raise invalid(f"{where} expert_params", self.expert_params,
                          f"at most params ({self.params})")
        if self.top_k > self.experts:
            raise invalid(f"{where} top_k", self.top_k, f"at most experts ({self.experts})")
        if self.expert_params and not self.experts:
            raise invalid(f"{where} experts", self.experts,
                          "an integer >= 1 when expert_params is set")
        if self.expert_groups or self.group_top_k:
            g, m = self.expert_groups, self.group_top_k
            if not self.experts or g < 1 or self.experts % g:
                raise invalid(f"{where} expert_groups", g,
                              f"a divisor of experts ({self.experts})")
            if not 1 <= m <= g or self.top_k > m * (self.experts // g):
                raise invalid(f"{where} group_top_k", m,
                              f"in 1..expert_groups ({g}), its groups holding at least "
                              f"top_k ({self.top_k}) experts")

    # ------------------------------------------------------------------ derived
    @property
    def weight_bytes(self) -> float:
        """Bytes of the weights: ``params x dtype_bytes``."""
        return float(self.params) * self.dtype_bytes

    @property
    def flops(self) -> float:
        """Forward + backward FLOPs per sample."""
        return self.fwd_flops + self.bwd_flops

    @property
    def trainable_params(self) -> int:
        """Parameters with gradients and optimizer state: ``params``, or only the
        adapters' of a ``frozen`` layer."""
        return self.adapter_params if self.frozen else self.params

    @property
    def active_params(self) -> float:
        """Parameters one token uses: experts count ``top_k / experts`` of theirs."""
        if not self.experts:
            return float(self.params)
        shared = self.params - self.expert_params
        return shared + self.expert_params * self.top_k / self.experts

    @property
    def is_mlp_block(self) -> bool:
        """A transformer's dense MLP block (a dense layer with an activation function):
        what ``recompute_modules=mlp`` reruns; the output layer is not one."""
        return self.kind == "dense" and any(op[0] == "activation" for op in self.memory_ops)

    @property
    def checkpoint_size(self) -> float:
        """Bytes per sample full recomputation keeps (``checkpoint_bytes`` or the output)."""
        if self.checkpoint_bytes is not None:
            return self.checkpoint_bytes
        return min(self.activation_bytes, self.saved_bytes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready), with ``weight_bytes`` added."""
        d = asdict(self)
        d["weight_bytes"] = self.weight_bytes
        return d


@dataclass(frozen=True)
class MemorySummary:
    """Training memory of the whole (unsharded) model, bytes.

    ``activation_bytes_per_sample`` is what the backward pass keeps per sample
    (sum of the layers' ``saved_bytes``, no recomputation).
    """

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activation_bytes_per_sample: float

    @property
    def state_bytes(self) -> float:
        """Weights + gradients + optimizer state."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    def total_bytes(self, batch: float) -> float:
        """Model state plus the activations of ``batch`` samples."""
        return self.state_bytes + batch * self.activation_bytes_per_sample

    def to_dict(self) -> dict[str, float]:
        return {"weights_bytes": self.weights_bytes, "gradients_bytes": self.gradients_bytes,
                "optimizer_bytes": self.optimizer_bytes, "state_bytes": self.state_bytes,
                "activation_bytes_per_sample": self.activation_bytes_per_sample}


@dataclass(frozen=True)
class Workload:
    """A training workload: layers in forward order and the training settings.

    Parameters
    ----------
    name : str
        Zoo name (``"resnet50"``) or the user's.
    layers : tuple of Layer
        Forward order; names unique.
    batch_size : int
        Global batch (samples per iteration) by default; strategies may override.
    dtype_bytes : int
        Bytes per weight / activation element.
    optimizer_bytes_per_param : float
        Optimizer state per parameter, bytes (12 = Adam mixed precision; 0 = SGD).
    seq_len : int or None
        Tokens per sample for sequence models.
    batch_per_gpu : int or None
        The per-GPU batch the source paper gives, when it gives one.
    reference_gpus : int or None
        GPUs of the paper's setup the global batch was derived from.
    config : str
        Which configuration of the zoo entry (``"simulation"`` = TopoOpt Sec. 5.3).
    builder : str
        The builder that made the layers (``"transformer"``), or ``"layers"``.
    description, source : str
        What it is and where the numbers come from.
    precision : str or None
        Number format of the matrix math the source trained with (``bf16``, ``tf32``,
        ...); ``None`` = by storage: 2-byte ``bf16``, 1-byte ``fp8``, 4-byte ``tf32``
        on GPUs with TF32 tensor cores (Ampere and later; PyTorch's default for cuDNN
        convolutions) else ``fp32``.  A strategy's ``precision`` overrides it.
    lora_rank : int
        LoRA fine-tuning (:mod:`codesign.workloads.lora`): the adapters' rank; 0 = all
        parameters trained (pre-training or full fine-tuning).
    lora_modules : tuple of str
        The linear modules that carry adapters (:data:`codesign.workloads.lora.LORA_MODULES`).
    """

    name: str
    layers: tuple[Layer, ...]
    batch_size: int
    dtype_bytes: int = 2
    optimizer_bytes_per_param: float = 12.0
    seq_len: int | None = None
    batch_per_gpu: int | None = None
    reference_gpus: int | None = None
    config: str = ""
    builder: str = ""
    description: str = ""
    source: str = ""
    hyperparameters: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    precision: str | None = None
    lora_rank: int = 0
    lora_modules: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        if self.precision is not None and self.precision not in PRECISIONS:
            raise invalid(f"workload {self.name!r} precision", self.precision,
                          " or ".join(PRECISIONS))
        if not self.layers:
            raise invalid(f"workload {self.name!r} layers", [], "at least one layer")
        seen: set[str] = set()
        for layer in self.layers:
            if not isinstance(layer, Layer):
                raise invalid(f"workload {self.name!r} layer", layer, "a Layer")
            if layer.name in seen:
                raise invalid(f"workload {self.name!r} layer name", layer.name, "unique names")
            seen.add(layer.name)
        object.__setattr__(self, "batch_size",
                           check_int(f"workload {self.name!r} batch_size", self.batch_size, 1,
                                     MAX_BATCH_SIZE))
        check_number(f"workload {self.name!r} optimizer_bytes_per_param",
                     self.optimizer_bytes_per_param, inclusive=True)
        check_int(f"workload {self.name!r} lora_rank", self.lora_rank, 0)
        object.__setattr__(self, "lora_modules", tuple(self.lora_modules))

    # ------------------------------------------------------------------ totals
    @property
    def parameters(self) -> int:
        """Total parameters (with LoRA adapters: the frozen model's and the adapters')."""
        return sum(layer.params for layer in self.layers)

    @property
    def trainable_parameters(self) -> int:
        """Parameters with gradients and optimizer state (:attr:`Layer.trainable_params`;
        all of them unless the workload is fine-tuned with LoRA)."""
        return sum(layer.trainable_params for layer in self.layers)

    @property
    def active_parameters(self) -> float:
        """Parameters used per token (differs from :attr:`parameters` for MoE)."""
        return sum(layer.active_params for layer in self.layers)

    @property
    def fwd_flops_per_sample(self) -> float:
        """Forward FLOPs per sample."""
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def flops_per_sample(self) -> float:
        """Training FLOPs per sample (forward + backward)."""
        return sum(layer.flops for layer in self.layers)

    @property
    def flops_per_iteration(self) -> float:
        """Training FLOPs of one iteration at the global :attr:`batch_size`."""
        return self.flops_per_sample * self.batch_size

    @property
    def memory(self) -> MemorySummary:
        """Weights, gradients, optimizer state and activations per sample."""
        weights = sum(layer.weight_bytes for layer in self.layers)
        return MemorySummary(
            weights_bytes=weights,
            gradients_bytes=sum(float(layer.trainable_params) * layer.dtype_bytes
                                for layer in self.layers),
            optimizer_bytes=self.trainable_parameters * float(self.optimizer_bytes_per_param),
            activation_bytes_per_sample=sum(layer.saved_bytes for layer in self.layers),
        )

    def layer(self, name: str) -> Layer:
        """The layer called ``name``."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise InvalidSpecError(f"invalid layer name {name!r}: workload {self.name!r} has no "
                               f"such layer (first ones: "
                               f"{', '.join(x.name for x in self.layers[:5])})")

    def with_batch(self, batch_size: int) -> Workload:
        """The same workload with another global batch."""
        return replace(self, batch_size=batch_size)

    def summary(self) -> dict[str, Any]:
        """Totals without the per-layer list (what ``workload show`` prints first)."""
        return {
            "name": self.name, "config": self.config, "builder": self.builder,
            "description": self.description, "source": self.source,
            "batch_size": self.batch_size, "batch_per_gpu": self.batch_per_gpu,
            "reference_gpus": self.reference_gpus, "seq_len": self.seq_len,
            "dtype_bytes": self.dtype_bytes, "precision": self.precision,
            "optimizer_bytes_per_param": self.optimizer_bytes_per_param,
            "lora_rank": self.lora_rank, "lora_modules": "+".join(self.lora_modules),
            "layer_count": len(self.layers),
            "parameters": self.parameters, "trainable_parameters": self.trainable_parameters,
            "active_parameters": self.active_parameters,
            "fwd_flops_per_sample": self.fwd_flops_per_sample,
            "flops_per_sample": self.flops_per_sample,
            "flops_per_iteration": self.flops_per_iteration,
            "memory": self.memory.to_dict(),
            "hyperparameters": dict(self.hyperparameters),
        }

    def to_dict(self) -> dict[str, Any]:
        """:meth:`summary` plus ``layers`` (a list of :meth:`Layer.to_dict`)."""
        return {**self.summary(), "layers": [layer.to_dict() for layer in self.layers]}
