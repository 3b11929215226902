"""Parallelization strategies: :class:`Strategy`, :func:`parse_strategy` and pipeline stages.

The strategy string is fixed by docs/architecture.md section 6::

    dp=D,tp=T,pp=P[,microbatches=M][,zero=Z][,ep=E][,etp=1|T][,embedding=data|model]
      [,cp=C][,sp=true|false][,recompute=none|selective|full][,recompute_layers=N]
      [,schedule=1f1b|interleaved|gpipe][,vpp=V][,split=balanced|layers]
      [,precision=fp32|tf32|bf16|fp16|fp8|fp8-cs|mxfp8][,grad_precision=fp32|bf16|fp16]
      [,cp_comm=ring|allgather][,recompute_modules=core_attn+layernorm+mlp+moe_act+mla_up_proj]
      [,offload_layers=N][,fp8_params=true|false]

* ``dp`` data-parallel replicas, ``tp`` Megatron tensor-parallel ranks (Shoeybi et al.
  2019), ``pp`` pipeline stages over ``microbatches`` micro-batches per iteration.  The
  job uses ``dp x tp x pp x cp`` GPUs.
* ``zero`` is the ZeRO stage (Rajbhandari et al. SC'20, Sec. 5): 0 none, 1 optimizer
  state sharded over the data-parallel group (Megatron-LM's distributed optimizer), 2
  also gradients, 3 also parameters.  With pipelining, stages 2 and 3 communicate every
  micro-batch (sharded gradients cannot accumulate locally; sharded parameters are
  gathered for each micro-batch's forward and backward), which the demand emits.
* ``ep`` expert-parallel ranks for mixture-of-experts layers.  As in Megatron-LM and
  DeepSpeed-MoE, the expert-parallel group is carved out of the data-parallel group
  (``ep`` divides ``dp``) while the experts keep the tensor parallelism of the dense
  layers.  With context parallelism the expert layers, which work token by token, see
  the ``dp x cp`` ranks of the data axis alike: ``ep`` divides ``dp x cp`` and an
  expert-parallel group may span context-parallel ranks (Megatron-core's expert rank
  order, ETP-EP-EDP over the ``tp x cp x dp`` ranks of a stage; Liu et al. 2025, arXiv
  2504.14960, Sec. 3).
* ``etp`` the experts' own tensor parallelism (Megatron-core's
  ``--expert-tensor-parallel-size``; "MoE parallel folding", Liu et al. 2025, arXiv
  2504.14960): ``tp`` (the default: experts split like the dense layers) or ``1``:
  the expert layers fold the ``tp x dp`` ranks of a stage (``tp x dp x cp`` with
  context parallelism, read so below) into ``ep`` expert-parallel ranks times ``tp x
  dp / ep`` expert-data-parallel replicas (``ep`` divides ``tp x dp``, so it may exceed
  ``dp``), every expert whole on its rank; tokens reach it by
  the all-to-all from the sequence-parallel split (so ``etp=1`` with ``tp > 1`` needs
  ``sp=true``, as Megatron-core requires), and the routed experts' output needs
  no tensor-parallel reduction (shared experts, split like the dense layers, keep it).
* ``embedding=data`` replicates embedding tables; ``embedding=model`` places each table
  whole on one server (TopoOpt Sec. 2.1, the DLRM hybrid).
* ``cp`` context parallelism (Megatron-LM's context parallel, ring attention; Liu et al.
  2023 "Ring Attention with Blockwise Transformers"): each sample's sequence is split
  over ``cp`` ranks (in ``2 cp`` chunks so that causal attention is load balanced), the
  ranks circulate their key/value blocks in a ring during attention, and they hold the
  same weights, so gradients synchronise over ``dp x cp`` ranks.
* ``cp_comm`` how the context-parallel ranks share keys and values: ``ring`` (the
  default, Megatron-LM's) passes K/V blocks round a ring under the attention blocks, one
  fused kernel per ``s / cp`` chunk of keys; ``allgather`` (Llama 3, Grattafiori et al.
  2024, Sec. 3.3.2, and PyTorch's all-gather pass-KV context parallel) first all-gathers
  K and V, then runs one kernel of the local queries over all keys -- "the all-gather
  communication latency is exposed in the critical path" (the paper), so nothing hides
  it.  Backward gathers K/V again and reduce-scatters their gradients either way.
* ``sp`` sequence parallelism with TP (Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", Sec. 4.2.2): the TP all-reduces become a
  reduce-scatter plus an all-gather and the norm / dropout activations are split by
  ``tp`` too.  Needs ``tp > 1``.
* ``recompute`` activation recomputation (Korthikanti et al. 2022, Sec. 5): ``full``
  keeps only each transformer layer's input and reruns the forward pass in the
  backward pass; ``selective`` recomputes only the attention core (``Q K^T``, softmax,
  dropout, ``softmax V``), whose ``s x s`` tensors dominate the activations.
  Recomputation covers the transformer blocks (the layers named ``block{i}.*``, see
  :func:`block_stages`); layers outside the block stack -- the input embedding, the
  final norm, the output layer and the loss -- keep their activations and are not
  rerun, as Megatron-LM checkpoints inside its transformer block only (and as its FLOP
  count, Narayanan et al. SC'21 Sec. 5.1, counts the output layer without a
  recomputed forward).  In a workload without named blocks every layer is a block.
* ``recompute_layers`` (only with ``recompute=full``): partial recomputation,
  Megatron-LM's ``--recompute-method block --recompute-num-layers N``: in each model
  chunk a GPU runs (its pipeline stage, or each of its ``vpp`` virtual stages) the
  first ``N`` transformer blocks are recomputed and the rest keep their activations
  (``megatron/core/transformer/transformer_config.py``: "the number of transformer
  layers to recompute within each pipeline stage"); omitted, every block is, and so is
  every block of a chunk with ``N`` at least its block count (Megatron-LM's block method
  loops over the chunk's layers with ``layer < N``; stages may hold different numbers
  of blocks, so a larger ``N`` is not an error).
  :func:`layer_recompute` gives every layer's mode.
* ``recompute_modules`` (only with ``recompute=selective``): fine-grained
  recomputation, Megatron-core's ``--recompute-granularity selective
  --recompute-modules`` (NVIDIA, *Scalable Training of Mixture-of-Experts Models with
  Megatron Core*, 2026, Sec. 4.1.4), ``+``-joined names of :data:`RECOMPUTE_MODULES`:
  ``core_attn`` (the default: the attention core as above), ``layernorm`` (the input
  norms' outputs dropped and rerun), ``mlp`` (each dense MLP block keeps only its input
  and reruns its forward), ``moe_act`` (the experts' activation output dropped and
  rerun) and ``mla_up_proj`` (multi-head latent attention's per-head queries, keys and
  values dropped and their up projections rerun from the saved latents: DeepSeek-V3's
  recomputation, technical report Sec. 3.2.3; nothing in a model without it).  The
  search does not try them; the sharding rule of :mod:`codesign.workloads.sharding`
  applies them.
* ``offload_layers``: activation offloading to host memory, Megatron-core's
  ``cpu_offloading_num_layers`` ("the number of transformer layers for which
  activations has to be offloaded", ``transformer_config.py``), which NVIDIA's
  performance recipes set on Grace-based GB200 / GB300 (Megatron-Bridge 25.11,
  ``scripts/performance/configs/llama``: Llama 3 70B FP8 on GB200 offloads 40 of its 80
  layers): in each model chunk the first ``N`` transformer blocks copy what they save
  for the backward pass to host memory after their forward and back before their
  backward, each copy under the next block's compute (:func:`layer_offload`; the time
  and memory rules are :mod:`codesign.workloads.demand` and
  :mod:`codesign.workloads.memory`).  Megatron-core refuses it with activation
  recomputation, and so does the strategy; at least one block of every chunk stays on
  the GPU (``N`` below the chunk's blocks, Megatron-core's ``num_layers - 1`` bound).
* ``fp8_params``: the weights of the 8-bit GEMMs kept in FP8 between optimizer steps
  and all-gathered in FP8 (Megatron-Bridge's ``MixedPrecisionConfig.fp8_param_gather``,
  which its FP8 recipes set; Megatron-core's ``--fp8-param-gather``; NeMo-1's
  ``fp8_params``): 1 byte per parameter of those layers in memory and in ZeRO's
  parameter all-gathers (the FP32 master copy stays in the optimizer state).  Only with
  precision (the strategy's, else the workload's) ``fp8`` or ``fp8-cs``
  (:func:`check_applicable`), whose FP8 weights are one byte each: Megatron-Bridge's
  guide names it "for per-tensor FP8 scaling recipes" (``docs/performance-guide.md``,
  "Communication Data Types", at commit 97ad8cc6f); its MXFP8 recipe sets it too, but
  block-scaled weights keep row- and column-wise copies whose gather the model does not
  know, so ``mxfp8`` refuses it.  The embedding and the output layer stay 16-bit.  The
  strategy search sets it wherever the precision allows (:func:`keeps_fp8_weights`).
* ``schedule``: ``1f1b`` (PipeDream-Flush, Narayanan et al. SC'21 Sec. 2.2.1),
  ``gpipe`` (all forwards, then all backwards: same bubble, every micro-batch in
  flight), ``interleaved`` with ``vpp`` virtual stages per GPU (Narayanan et al. SC'21
  Sec. 2.2.2: bubble ``(p - 1) / v`` stage-times, ``v`` times the stage crossings).
* ``precision``: the number format of the matrix math (whose peak the compute model
  uses); default the workload's (:attr:`Workload.precision`).  The 8-bit ones are
  Transformer Engine's recipes: ``fp8`` (delayed scaling), ``fp8-cs`` (per-tensor
  current scaling) and ``mxfp8`` (block scaling, Blackwell), which differ in the
  conversion kernels they run (:mod:`codesign.workloads.compute`, "FP8").
* ``grad_precision``: the number format gradients are accumulated, kept and reduced
  in; default the weights' (the workload's ``dtype_bytes``).  ``fp32`` is Megatron-LM's
  rule for bf16 training (``accumulate_allreduce_grads_in_fp32``, forced on with
  ``--bf16`` in ``megatron/training/arguments.py`` at commit f2e5db4; its distributed-
  optimizer guide counts 18 bytes per parameter for "float16 param, fp32 grads") and
  PyTorch FSDP's ``reduce_dtype=float32``.

Decisions where the string is silent (stated here, tested): ``dp``, ``tp``, ``pp`` and
``cp`` default to 1 when omitted (``"dp=64"`` is pure data parallelism); ``microbatches``
defaults to 1 without pipelining and to ``pp`` with it (the fewest that fill the
1F1B pipeline); ``sp`` defaults to false and ``recompute`` to none (Megatron-LM's
defaults); ``schedule`` to 1f1b; keys may appear in any order, at most once, lowercase,
with optional spaces around ``,`` and ``=``.  :func:`format_strategy` gives the
canonical string (non-default keys only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_int
from codesign.workloads.model import PRECISIONS

__all__ = ["Strategy", "parse_strategy", "as_strategy", "format_strategy", "STRATEGY_KEYS",
           "GRAD_PRECISIONS", "CP_COMMS", "MAX_GPUS",
           "pipeline_stages", "bubble_fraction", "is_table",
           "check_applicable", "stage_bounds", "RECOMPUTE", "RECOMPUTE_MODULES",
           "SCHEDULES", "PRECISIONS", "FP8_PARAM_PRECISIONS", "keeps_fp8_weights",
           "sequence_parallel_applies",
           "inflight_microbatches", "recompute_modes", "SPLITS", "block_stages",
           "layer_recompute", "layer_strategies", "partial_recompute_counts",
           "recompute_ladder", "with_expert_parallelism", "layer_offload",
           "chunk_blocks", "layer_chunks"]

#: Keys of the strategy string, in canonical order.
STRATEGY_KEYS = ("dp", "tp", "pp", "cp", "microbatches", "zero", "ep", "etp", "embedding", "sp",
                 "recompute", "recompute_layers", "schedule", "vpp", "split", "precision",
                 "grad_precision", "cp_comm", "recompute_modules", "offload_layers",
                 "fp8_params")
#: Activation recomputation modes (Korthikanti et al. 2022, Sec. 5).
RECOMPUTE = ("none", "selective", "full")
#: What ``recompute=selective`` may rerun (Megatron-core's ``--recompute-modules``, with
#: its names): the attention core, the norms' outputs, the dense MLP blocks, the experts'
#: activation function, latent attention's up projections.  Without
#: ``recompute_modules`` selective means ``core_attn``.
RECOMPUTE_MODULES = ("core_attn", "layernorm", "mlp", "moe_act", "mla_up_proj")
#: Pipeline schedules.
SCHEDULES = ("1f1b", "interleaved", "gpipe")
#: How layers are split into pipeline stages (:func:`stage_bounds`).
SPLITS = ("balanced", "layers")
#: Number formats of gradients, and their bytes per element.
GRAD_PRECISIONS = {"fp32": 4, "bf16": 2, "fp16": 2}
#: Precisions whose GEMM weights may be kept in FP8 (``fp8_params``): the per-tensor
#: scaling recipes.
FP8_PARAM_PRECISIONS = ("fp8", "fp8-cs")
_FP8_PARAMS_RULE = ("false unless the precision is fp8 or fp8-cs (per-tensor scaling: one "
                    "byte per weight; the layout of MXFP8 weights is not modelled")
#: How context-parallel ranks exchange keys and values (module docstring).
CP_COMMS = ("ring", "allgather")
_MAX_DEGREE = 10**7          # far above any cluster
#: Most GPUs a strategy may span (dp x tp x pp x cp).
MAX_GPUS = _MAX_DEGREE
_MAX_MICROBATCHES = 10**9
_EMBEDDING = ("data", "model")
_BOOL = {"true": True, "false": False}
_FORM = ("dp=D,tp=T,pp=P[,cp=C][,microbatches=M][,zero=Z][,ep=E][,etp=1|T]"
         "[,embedding=data|model]"
         "[,sp=true|false][,recompute=none|selective|full][,recompute_layers=N]"
         "[,schedule=1f1b|interleaved|gpipe]"
         "[,vpp=V][,split=balanced|layers][,precision=fp32|tf32|bf16|fp16|fp8|fp8-cs|mxfp8]"
         "[,grad_precision=fp32|bf16|fp16][,cp_comm=ring|allgather]"
         "[,recompute_modules=core_attn+layernorm+mlp+moe_act+mla_up_proj][,offload_layers=N]"
         "[,fp8_params=true|false]")
_CHOICES = {"embedding": _EMBEDDING, "recompute": RECOMPUTE, "schedule": SCHEDULES,
            "split": SPLITS, "precision": PRECISIONS,
            "grad_precision": tuple(GRAD_PRECISIONS), "cp_comm": CP_COMMS}


def _degree(name: str, value: Any, maximum: int = _MAX_DEGREE) -> int:
    return check_int(f"strategy {name}", value, 1, maximum)


@dataclass(frozen=True)
class Strategy:
    """A hybrid parallelization strategy with its execution knobs (module docstring).

    Parameters
    ----------
    dp, tp, pp, cp : int
        Data-, tensor-, pipeline- and context-parallel degrees (>= 1).
    microbatches : int or None
        Micro-batches per iteration; ``None`` = 1 without pipelining, ``pp`` with it
        (:attr:`m` gives the effective value).  With ``pp = 1``, ``m > 1`` is gradient
        accumulation.
    zero : int
        ZeRO stage, 0..3.
    ep : int
        Expert-parallel degree; divides ``dp x cp`` (``tp x dp x cp`` with ``etp=1``).
    etp : int or None
        Tensor parallelism of the expert layers: ``None`` (= ``tp``) or ``1`` (parallel
        folding, module docstring).
    embedding : str
        ``"data"`` (replicated tables) or ``"model"`` (tables placed on servers).
    sp : bool
        Sequence parallelism (needs ``tp > 1``).
    recompute : str
        ``"none"``, ``"selective"`` or ``"full"``.
    recompute_layers : int or None
        With ``recompute="full"``: transformer blocks recomputed at the start of each
        model chunk (Megatron-LM's block method); ``None`` = all of them.
    schedule : str
        ``"1f1b"``, ``"interleaved"`` (needs ``vpp >= 2``, ``pp >= 2`` and ``pp``
        dividing the micro-batches, as Megatron-LM requires) or ``"gpipe"``.
    vpp : int
        Virtual pipeline stages (model chunks) per GPU; > 1 only with ``interleaved``.
    split : str
        ``"balanced"``: pipeline stages of balanced compute (:func:`pipeline_stages`);
        ``"layers"``: the same number of transformer blocks on every pipeline rank, the
        input embedding with the first and the output layer with the last, as
        Megatron-LM and Megatron-DeepSpeed build them (:func:`block_stages`).
    precision : str or None
        Number format of the matrix math; ``None`` = the workload's.
    grad_precision : str or None
        Number format of the gradients (accumulation, memory, reduction); ``None`` =
        the weights'.
    cp_comm : str
        ``"ring"`` (K/V passed round a ring under the attention) or ``"allgather"``
        (K/V all-gathered first, exposed); only with ``cp > 1``.
    offload_layers : int or None
        Transformer blocks at the start of each model chunk whose saved activations
        wait in host memory for the backward pass; ``None``: none (module docstring).
    fp8_params : bool
        The 8-bit GEMMs' weights kept and all-gathered in FP8 (needs a per-tensor FP8
        precision, the strategy's or else the workload's: :func:`check_applicable`;
        module docstring).

    Raises
    ------
    InvalidSpecError
        A field out of range or a combination that does not exist; the message names it.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    microbatches: int | None = None
    zero: int = 0
    ep: int = 1
    etp: int | None = None
    embedding: str = "data"
    cp: int = 1
    sp: bool = False
    recompute: str = "none"
    recompute_layers: int | None = None
    schedule: str = "1f1b"
    vpp: int = 1
    split: str = "balanced"
    precision: str | None = None
    grad_precision: str | None = None
    cp_comm: str = "ring"
    recompute_modules: tuple[str, ...] | None = None
    offload_layers: int | None = None
    fp8_params: bool = False

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "ep", "cp", "vpp"):
            _degree(name, getattr(self, name))
        if self.microbatches is not None:
            _degree("microbatches", self.microbatches, _MAX_MICROBATCHES)
        if self.recompute_layers is not None:
            _degree("recompute_layers", self.recompute_layers)
        if self.offload_layers is not None:
            _degree("offload_layers", self.offload_layers)
            if self.recompute != "none":
                raise invalid("strategy offload_layers", self.offload_layers,
                              f"omitted with recompute={self.recompute}: Megatron-core "
                              "does not offload activations with recomputation")
        if self.etp is not None:
            _degree("etp", self.etp)
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise invalid("strategy zero", self.zero, "0, 1, 2 or 3 (the ZeRO stage)")
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if name in ("precision", "grad_precision") and value is None:
                continue
            if value not in choices:
                raise invalid(f"strategy {name}", value, " or ".join(choices))
        if not isinstance(self.sp, bool):
            raise invalid("strategy sp", self.sp, "true or false")
        if not isinstance(self.fp8_params, bool):
            raise invalid("strategy fp8_params", self.fp8_params, "true or false")
        if self.fp8_params and self.precision is not None \
                and self.precision not in FP8_PARAM_PRECISIONS:
            raise invalid("strategy fp8_params", "true", _FP8_PARAMS_RULE
                          + f"; precision={self.precision})")
        if self.etp is not None and self.etp not in (1, self.tp):
            raise invalid("strategy etp", self.etp,
                          f"1 or tp ({self.tp}): expert tensor parallelism between the two "
                          "is not modelled")
        if self.expert_tp < self.tp and not self.sp:
            raise invalid("strategy etp", self.etp,
                          f"tp ({self.tp}) unless sp=true: folded experts take the "
                          "sequence-parallel split of the tokens (Megatron-core's rule)")
        data = self.data_ranks
        if self.expert_tp == self.tp and data % self.ep:
            raise invalid("strategy ep", self.ep,
                          f"a divisor of dp x cp ({data}): expert-parallel groups are carved "
                          "out of the data-parallel group (or etp=1 to fold them out of "
                          "tp x dp x cp)")
        if (self.tp * data) % (self.ep * self.expert_tp):
            raise invalid("strategy ep", self.ep,
                          f"a divisor of tp x dp x cp ({self.tp * data}) with etp=1")
        if self.sp and self.tp == 1:
            raise invalid("strategy sp", "true", "false with tp=1 (sequence parallelism "
                          "splits the tensor-parallel group's activations)")
        if self.recompute_modules is not None:
            mods = self.recompute_modules
            if (isinstance(mods, str) or not isinstance(mods, (tuple, list)) or not mods
                    or len(set(mods)) != len(mods)
                    or any(m not in RECOMPUTE_MODULES for m in mods)):
                shown = "+".join(mods) if isinstance(mods, (tuple, list)) and all(
                    isinstance(m, str) for m in mods) else mods
                raise invalid("strategy recompute_modules", shown,
                              "distinct names from " + ", ".join(RECOMPUTE_MODULES)
                              + " joined by '+'")
            if self.recompute != "selective":
                raise invalid("strategy recompute_modules", "+".join(mods),
                              f"omitted unless recompute=selective (recompute="
                              f"{self.recompute}): the modules choose what selective "
                              "recomputation reruns")
            # One canonical order, so that equal strategies compare and print equal.
            object.__setattr__(self, "recompute_modules",
                               tuple(m for m in RECOMPUTE_MODULES if m in mods))
        if self.recompute_layers is not None and self.recompute != "full":
            raise invalid("strategy recompute_layers", self.recompute_layers,
                          f"omitted unless recompute=full (recompute={self.recompute}): "
                          "it chooses how many blocks are fully recomputed")
        if self.cp_comm != "ring" and self.cp == 1:
            raise invalid("strategy cp_comm", self.cp_comm,
                          "ring unless cp > 1 (no context parallelism to communicate)")
        if self.schedule == "interleaved":
            if self.pp < 2 or self.vpp < 2:
                raise invalid("strategy schedule", "interleaved",
                              f"1f1b or gpipe unless pp >= 2 and vpp >= 2 (pp={self.pp}, "
                              f"vpp={self.vpp})")
            if self.m % self.pp:
                raise invalid("strategy microbatches", self.m,
                              f"a multiple of pp ({self.pp}) with the interleaved schedule "
                              "(Megatron-LM's rule)")
        elif self.vpp != 1:
            raise invalid("strategy vpp", self.vpp, "1 unless schedule=interleaved")
        if self.gpus > _MAX_DEGREE:
            raise invalid("strategy dp*tp*pp*cp", self.gpus, f"at most {_MAX_DEGREE} GPUs")

    @property
    def selective_modules(self) -> frozenset[str]:
        """What selective recomputation reruns: ``recompute_modules``, by default the
        attention core; empty unless ``recompute=selective``."""
        if self.recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules or ("core_attn",))

    @property
    def gpus(self) -> int:
        """GPUs the strategy uses: ``dp x tp x pp x cp``."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel ranks of an expert: ``etp``, by default ``tp``."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_dp(self) -> int:
        """Replicas of each expert in a stage: ``tp x dp x cp / (ep x etp)`` (``dp x cp /
        ep`` without folding; context-parallel ranks hold the same experts)."""
        return self.tp * self.data_ranks // (self.ep * self.expert_tp)

    @property
    def data_ranks(self) -> int:
        """Ranks holding the same weights of a stage: ``dp x cp`` (the gradient group)."""
        return self.dp * self.cp

    @property
    def zero_groups(self) -> tuple[int, int]:
        """Ranks ZeRO shards over: ``(dense, expert)`` parameters; ``(1, 1)`` without ZeRO.

        Dense parameters over the ``dp x cp`` ranks holding the same weights (Megatron-LM's
        distributed optimizer uses the data-parallel group with context parallelism),
        expert parameters over their :attr:`expert_dp` replicas."""
        return (self.data_ranks, self.expert_dp) if self.zero else (1, 1)

    @property
    def m(self) -> int:
        """Effective micro-batches per iteration (see ``microbatches``)."""
        if self.microbatches is not None:
            return self.microbatches
        return self.pp

    def grad_bytes(self, weight_bytes: int) -> int:
        """Bytes per gradient element: ``grad_precision``'s, else the weights'
        ``weight_bytes``."""
        return GRAD_PRECISIONS[self.grad_precision] if self.grad_precision else weight_bytes

    @property
    def bubble_fraction(self) -> float:
        """Pipeline bubble over the iteration: :func:`bubble_fraction`."""
        return bubble_fraction(self.pp, self.m, self.vpp)

    def __str__(self) -> str:
        return format_strategy(self)

    def to_dict(self) -> dict[str, Any]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "cp": self.cp,
                "microbatches": self.m, "zero": self.zero, "ep": self.ep, "etp": self.etp,
                "embedding": self.embedding, "sp": self.sp, "recompute": self.recompute,
                "recompute_layers": self.recompute_layers,
                "schedule": self.schedule, "vpp": self.vpp, "split": self.split,
                "precision": self.precision, "grad_precision": self.grad_precision,
                "cp_comm": self.cp_comm,
                "recompute_modules": (list(self.recompute_modules)
                                      if self.recompute_modules else None),
                "offload_layers": self.offload_layers, "fp8_params": self.fp8_params,
                "gpus": self.gpus, "text": str(self)}


#: Field defaults of :class:`Strategy` (what :func:`format_strategy` leaves out).
_DEFAULTS = {f.name: f.default for f in fields(Strategy)}


def bubble_fraction(pp: int, microbatches: int, vpp: int = 1) -> float:
    """Idle fraction of a pipelined iteration: ``(p - 1) / (v m + p - 1)``.

    With ``m`` micro-batches of forward+backward time ``t`` per stage, 1F1B and GPipe take
    ``(m + p - 1) t`` of which ``(p - 1) t`` is bubble (Narayanan et al. SC'21, Sec. 2.2:
    bubble time over ideal time ``(p - 1) / m``); the interleaved schedule with ``v``
    model chunks per GPU cuts the bubble to ``(p - 1) t / v`` (Sec. 2.2.2: ``(p - 1) /
    (v m)`` of the ideal time).
    """
    _degree("pp", pp)
    _degree("microbatches", microbatches, _MAX_MICROBATCHES)
    _degree("vpp", vpp)
    return (pp - 1) / (vpp * microbatches + pp - 1)


def recompute_modes(workload: Any) -> tuple[str, ...]:
    """The recomputation modes that differ for ``workload``, cheapest first: selective
    recomputation only drops something where an attention core stores its ``s x s``
    tensors (no flash attention); elsewhere it equals ``none``."""
    if any(layer.attn_core_saved_bytes > 0 for layer in workload.layers):
        return RECOMPUTE
    return ("none", "full")


def inflight_microbatches(strategy: Strategy, stage: int) -> float:
    """Micro-batches whose activations stage ``stage`` holds at its peak.

    In units of "all of this stage's layers for one micro-batch":

    * 1F1B: ``min(m, p - s)`` (PipeDream-Flush warm-up, Narayanan et al. SC'21 Sec. 2.2.1);
    * GPipe: ``m`` (every forward before any backward; Huang et al. 2019);
    * interleaved with ``v`` chunks: Megatron-LM warms up ``2 (p - s - 1) + (v - 1) p``
      chunk forwards plus the first steady-state one, each ``1 / v`` of the stage's
      layers: ``(2 (p - s - 1) + (v - 1) p + 1) / v``, at most ``m`` -- for stage 0
      ``p (1 + (p - 1) / (p v))``, Korthikanti et al. 2022 Sec. 4.2.3.
    """
    s, p, m = strategy, strategy.pp, strategy.m
    if s.schedule == "gpipe":
        return float(m)
    if s.schedule == "interleaved":
        v = s.vpp
        return min(float(m), (2 * (p - stage - 1) + (v - 1) * p + 1) / v)
    return float(min(m, p - stage))


def format_strategy(strategy: Strategy) -> str:
    """Canonical string: ``dp,tp,pp`` always; the other keys (in :data:`STRATEGY_KEYS`
    order) only when not the default, booleans as ``true``."""
    parts = []
    for key in STRATEGY_KEYS:
        value = getattr(strategy, key)
        if key in ("dp", "tp", "pp") or value != _DEFAULTS[key]:
            if isinstance(value, tuple):
                value = "+".join(value)
            parts.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    return ",".join(parts)


def parse_strategy(text: str) -> Strategy:
    """Parse a strategy string (module docstring; docs/architecture.md section 6).

    Parameters
    ----------
    text : str
        The strategy string.

    Returns
    -------
    Strategy

    Raises
    ------
    InvalidSpecError
        Empty string, a part without ``=``, an unknown or repeated key, a value that is
        not a decimal integer in range (or not one of the key's words); one line naming
        the field.

    Examples
    --------
    >>> parse_strategy("dp=4,tp=8,pp=2,microbatches=16,zero=1")
    Strategy(dp=4, tp=8, pp=2, microbatches=16, zero=1, ep=1, etp=None, embedding='data', \
cp=1, sp=False, recompute='none', recompute_layers=None, schedule='1f1b', vpp=1, \
split='balanced', precision=None, grad_precision=None, cp_comm='ring', \
recompute_modules=None, offload_layers=None, fp8_params=False)
    >>> str(parse_strategy("dp=8,tp=8,pp=16,sp=true,recompute=selective"))
    'dp=8,tp=8,pp=16,sp=true,recompute=selective'
    """
    if not isinstance(text, str) or not text.strip():
        raise invalid("strategy", text, _FORM)
    values: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, raw = part.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise invalid("strategy part", part, f"key=value in {_FORM}")
        if key not in STRATEGY_KEYS:
            raise InvalidSpecError(f"invalid strategy key {key!r}: expected one of "
                                   f"{', '.join(STRATEGY_KEYS)}")
        if key in values:
            raise invalid(f"strategy {key}", raw, "each key at most once")
        if key in _CHOICES:
            if raw not in _CHOICES[key]:
                raise invalid(f"strategy {key}", raw, " or ".join(_CHOICES[key]))
            values[key] = raw
            continue
        if key == "recompute_modules":     # names checked by Strategy
            values[key] = tuple(m.strip() for m in raw.split("+"))
            continue
        if key in ("sp", "fp8_params"):
            if raw not in _BOOL:
                raise invalid(f"strategy {key}", raw, "true or false")
            values[key] = _BOOL[raw]
            continue
        # Plain decimal digits only: no signs, floats, underscores or other numerals.
        if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
            allowed = "0, 1, 2 or 3" if key == "zero" else "a positive integer"
            raise invalid(f"strategy {key}", raw, allowed)
        values[key] = int(raw)
    return Strategy(**values)


def as_strategy(value: Strategy | str) -> Strategy:
    """A :class:`Strategy` passes through; a string is parsed with :func:`parse_strategy`."""
    if isinstance(value, Strategy):
        return value
    if isinstance(value, str):
        return parse_strategy(value)
    raise invalid("strategy", value, f"a Strategy or a string {_FORM}")


def pipeline_stages(costs: Any, pp: int) -> tuple[tuple[int, int], ...]:
    """Split layers (in forward order) into ``pp`` contiguous stages of balanced cost.

    The partition minimises the largest stage cost (the pipeline's bottleneck, which
    sets the 1F1B step time), as PipeDream's partitioner does for compute; ties keep
    earlier stages as full as possible.  Every stage gets at least one layer.

    Parameters
    ----------
    costs : sequence of float
        Per-layer cost (the demand uses forward + backward FLOPs per sample).
    pp : int
        Stages, ``1 <= pp <= len(costs)``.

    Returns
    -------
    tuple of (start, stop)
        Half-open layer index ranges, one per stage.

    Notes
    -----
    Exact: binary search on the bottleneck over the O(L^2) candidate stage sums would
    be exact but slow, so the search runs on floats to a relative 1e-12 and then packs
    greedily; O(L log(1/eps)).
    """
    c = [float(x) for x in costs]
    n = len(c)
    _degree("pp", pp)
    if pp > n:
        raise invalid("strategy pp", pp, f"at most the number of layers ({n})")

    def pack(limit: float) -> list[tuple[int, int]] | None:
        # Greedy fill, but leave at least one layer for every remaining stage.
        out, start = [], 0
        for s in range(pp):
            remaining_stages = pp - s - 1
            stop, total = start, 0.0
            while stop < n - remaining_stages and (stop == start or total + c[stop] <= limit):
                total += c[stop]
                stop += 1
            if total > limit:
                return None
            out.append((start, stop))
            start = stop
        return out if start == n else None

    lo, hi = max(c) if c else 0.0, sum(c)
    if hi <= 0:
        # No cost information: equal layer counts.
        bounds = [round(i * n / pp) for i in range(pp + 1)]
        return tuple((bounds[i], bounds[i + 1]) for i in range(pp))
    best = pack(hi)
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = (lo + hi) / 2
        got = pack(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
    if best is None or not math.isfinite(hi):  # pragma: no cover - pack(sum) always fits
        raise InvalidSpecError("invalid layer costs: cannot partition into stages")
    return tuple(best)


# --------------------------------------------------------------------------------------
# A strategy applied to a workload: checks and stages (how it shards one layer:
# codesign.workloads.sharding)
# --------------------------------------------------------------------------------------
def is_table(layer: Any) -> bool:
    """Whether ``layer`` is an embedding table that ``embedding=model`` places whole."""
    return layer.kind == "embedding" and layer.lookups > 0 and layer.table_rows > 0


def keeps_fp8_weights(workload: Any, precision: str | None = None) -> bool:
    """Whether ``workload`` trained at ``precision`` (a strategy's; ``None``: the
    workload's own) may keep its GEMM weights in FP8 (strategy ``fp8_params``): a
    per-tensor FP8 recipe, :data:`FP8_PARAM_PRECISIONS`.  NVIDIA's FP8 recipes always
    do (module docstring), so the strategy search sets ``fp8_params`` where this holds."""
    return (precision or getattr(workload, "precision", None)) in FP8_PARAM_PRECISIONS


def sequence_parallel_applies(workload: Any, tp: int, cp: int = 1) -> bool:
    """Whether ``sp=true`` applies to ``workload`` at ``tp`` x ``cp``: sequence parallelism
    splits each context-parallel rank's tokens over the TP ranks (Korthikanti et al. 2022
    Sec. 4.2.2; Megatron-LM requires the sequence length to be a multiple of the TP size
    with ``--sequence-parallel``), so a model with attention needs ``tp x cp`` to divide
    its sequence length (the sequence of a model without attention is not checked)."""
    if not any(layer.kind == "attention" for layer in workload.layers):
        return True
    seq = workload.seq_len
    return not isinstance(seq, int) or seq % (tp * cp) == 0


def check_applicable(workload: Any, strategy: Strategy) -> None:
    """Raise unless ``strategy`` can run ``workload`` (divisibility and support rules).

    Rules: the global batch divides into ``dp x microbatches`` micro-batches of whole
    samples; ``pp x vpp`` is at most the layer count; ``tp`` divides the attention heads
    and the key/value heads when the workload gives them (Megatron-LM splits whole heads
    and query groups); ``ep > 1`` needs expert layers whose expert count it divides;
    ``cp > 1`` needs attention layers and a sequence that splits into ``2 cp`` equal
    chunks (causal load balancing); ``sp=true`` a sequence that splits over ``tp x cp``
    ranks; ``embedding=model`` needs tables and ``tp = pp = 1``
    (TopoOpt's hybrid: tables on servers, the rest data parallel); ``offload_layers``
    fewer than the blocks of every model chunk; ``fp8_params`` a per-tensor FP8
    precision (:func:`keeps_fp8_weights`).

    Raises
    ------
    InvalidSpecError
        The first rule broken, naming the field and what would work.
    """
    s = strategy
    if s.fp8_params and not keeps_fp8_weights(workload, s.precision):
        given = s.precision or getattr(workload, "precision", None) or "not given"
        raise invalid("strategy fp8_params", "true",
                      f"{_FP8_PARAMS_RULE}; precision {given})")
    # The layer count first: a pipeline deeper than the model also makes its default
    # micro-batch count (pp) miss the batch, which named the wrong field (pp=1000).
    if s.pp * s.vpp > len(workload.layers):
        what = "pp*vpp" if s.vpp > 1 else "pp"
        raise invalid(f"strategy {what}", s.pp * s.vpp,
                      f"at most the layer count of {workload.name} ({len(workload.layers)})")
    per = s.dp * s.m
    if workload.batch_size % per:
        raise invalid(f"strategy dp*microbatches for {workload.name} (batch_size "
                      f"{workload.batch_size})", per,
                      "a divisor of the global batch (whole samples per micro-batch)")
    hp = workload.hyperparameters
    heads = hp.get("heads")
    if isinstance(heads, int) and heads % s.tp:
        raise invalid("strategy tp", s.tp, f"a divisor of the attention heads ({heads})")
    kv_heads = hp.get("kv_heads")
    if isinstance(kv_heads, int) and kv_heads % s.tp:
        raise invalid("strategy tp", s.tp,
                      f"a divisor of the key/value heads ({kv_heads}, grouped-query attention)")
    if s.ep > 1:
        experts = {layer.experts for layer in workload.layers if layer.experts}
        if not experts:
            raise invalid("strategy ep", s.ep, f"1: {workload.name} has no expert layers")
        bad = sorted(e for e in experts if e % s.ep)
        if bad:
            raise invalid("strategy ep", s.ep, f"a divisor of the expert count ({bad[0]})")
    if s.cp > 1:
        if not any(layer.kind == "attention" for layer in workload.layers):
            raise invalid("strategy cp", s.cp, f"1: {workload.name} has no attention layers")
        seq = workload.seq_len
        if isinstance(seq, int) and any(layer.kind == "attention" and layer.attn_keys < seq
                                        for layer in workload.layers):
            raise invalid("strategy cp", s.cp, f"1: {workload.name} has sliding-window or "
                          "document-masked attention (context parallelism of a window or of "
                          "packed documents is not modelled)")
        if not isinstance(seq, int) or seq % (2 * s.cp):
            raise invalid("strategy cp", s.cp,
                          f"a value with 2*cp dividing the sequence length ({seq})")
    if s.sp and not sequence_parallel_applies(workload, s.tp, s.cp):
        raise invalid("strategy sp", "true",
                      f"false, or tp*cp ({s.tp * s.cp}) dividing the sequence length "
                      f"({workload.seq_len}): sequence parallelism splits it over the TP ranks")
    if s.embedding == "model":
        if not any(is_table(layer) for layer in workload.layers):
            raise invalid("strategy embedding", "model",
                          f"data: {workload.name} has no embedding tables")
        if s.tp != 1 or s.pp != 1 or s.cp != 1:
            raise invalid("strategy embedding", "model",
                          "only with tp=1, pp=1 and cp=1 (tables on servers, the rest data "
                          "parallel)")
    if s.offload_layers is not None:
        fewest = min(map(len, chunk_blocks([layer.name for layer in workload.layers], s,
                                           stage_bounds(workload, s))))
        if s.offload_layers >= fewest:
            raise invalid("strategy offload_layers", s.offload_layers,
                          f"fewer than the transformer blocks of every model chunk "
                          f"({fewest} in the smallest): one stays on the GPU, as "
                          "Megatron-core requires")


def stage_bounds(workload: Any, strategy: Strategy) -> tuple[tuple[int, int], ...]:
    """Pipeline stages of ``workload``: :func:`pipeline_stages` on training FLOPs per
    sample (``split=balanced``) or :func:`block_stages` (``split=layers``)."""
    if strategy.split == "layers":
        return block_stages([layer.name for layer in workload.layers], strategy.pp)
    return pipeline_stages([layer.flops for layer in workload.layers], strategy.pp)


def block_stages(names: Any, pp: int) -> tuple[tuple[int, int], ...]:
    """Split layers into ``pp`` stages of equal numbers of blocks, as Megatron-LM does.

    A block is a run of consecutive layers whose names share the part before the first
    ``"."`` (a transformer's ``block{i}.attn`` and ``block{i}.mlp``); a layer without a
    dot is a block of its own unless it comes before the first dotted block (it joins
    the first stage: the input embedding) or after the last one (it joins the last
    stage: the final norm, the output layer and the loss).  Megatron-LM builds
    ``num_layers // pp`` transformer layers on every pipeline rank, the embedding on the
    first and the output layer on the last (``get_num_layers_to_build``,
    ``megatron/core/transformer/transformer_block.py`` at commit f2e5db4), and
    Megatron-DeepSpeed partitions by ``type:transformer``; the stages then differ by the
    embedding and output layers, which a compute-balanced split would even out.  When
    ``pp`` does not divide the blocks the first stages take one more.

    Parameters
    ----------
    names : sequence of str
        Layer names in forward order.
    pp : int
        Stages, at most the number of blocks.

    Returns
    -------
    tuple of (start, stop)
        Half-open layer index ranges, one per stage.
    """
    names = list(names)
    _degree("pp", pp)
    starts, _ = _blocks(names)
    n = len(starts)
    if pp > n:
        raise invalid("strategy pp", pp, f"at most the number of blocks ({n}) with "
                                         "split=layers")
    q, r = divmod(n, pp)
    bounds, b = [], 0
    for p in range(pp):
        take = q + (1 if p < r else 0)
        lo = 0 if p == 0 else starts[b]
        b += take
        hi = len(names) if p == pp - 1 else starts[b]
        bounds.append((lo, hi))
    return tuple(bounds)


def _blocks(names: list[str]) -> tuple[list[int], list[bool]]:
    """Blocks of a layer list (the rule of :func:`block_stages`): the index of every
    block's first layer, and for every layer whether it belongs to a named block
    (``block{i}.attn``: True; the embedding before the first and the output layers
    after the last: False; without any dotted name every layer is its own block)."""
    keys = [n.split(".", 1)[0] if "." in n else None for n in names]
    dotted = [i for i, k in enumerate(keys) if k is not None]
    first, last = (dotted[0], dotted[-1]) if dotted else (0, len(names) - 1)
    starts = []             # index of the first layer of every block
    for i in range(first, last + 1):
        if i == first or keys[i] is None or keys[i] != keys[i - 1]:
            starts.append(i)
    inside = [first <= i <= last for i in range(len(names))]
    return starts, inside


def layer_recompute(names: Any, strategy: Strategy,
                    stages: Any) -> tuple[str, ...]:
    """The recomputation mode of every layer (module docstring, ``recompute`` and
    ``recompute_layers``).

    Parameters
    ----------
    names : sequence of str
        Layer names in forward order.
    strategy : Strategy
    stages : sequence of (start, stop)
        The pipeline stages (:func:`stage_bounds`).

    Returns
    -------
    tuple of str
        ``"none"``, ``"selective"`` or ``"full"`` per layer.  Full recomputation reruns
        the layers of named blocks only; with ``recompute_layers = N`` the first ``N``
        blocks of each of a stage's ``vpp`` model chunks (its blocks in ``vpp`` equal
        runs, the first runs one longer when they do not divide).
    """
    names = list(names)
    s = strategy
    if s.recompute != "full":
        return (s.recompute,) * len(names)
    _, inside = _blocks(names)
    if s.recompute_layers is None:
        return tuple("full" if x else "none" for x in inside)
    first = _first_blocks(names, s, stages, s.recompute_layers)
    return tuple("full" if x else "none" for x in first)


def chunk_blocks(names: Any, strategy: Strategy, stages: Any) -> list[list[range]]:
    """The transformer blocks of every model chunk, as layer index ranges: each stage's
    blocks in ``vpp`` equal runs, the first runs one longer when they do not divide
    (Megatron-LM's ``--recompute-method block`` and its activation offloading count the
    blocks of a chunk alike); ``vpp`` chunks per stage, in stage order."""
    names = list(names)
    starts, inside = _blocks(names)
    bounds = starts + [max((i for i in range(len(names)) if inside[i]), default=-1) + 1]
    out = []
    for start, stop in stages:
        blocks = [range(bounds[k], bounds[k + 1]) for k in range(len(starts))
                  if start <= starts[k] < stop]
        q, r = divmod(len(blocks), strategy.vpp)
        k0 = 0
        for c in range(strategy.vpp):
            size = q + (1 if c < r else 0)
            out.append(blocks[k0:k0 + size])
            k0 += size
    return out


def layer_chunks(names: Any, strategy: Strategy, stages: Any) -> list[int]:
    """The model chunk of every layer within its pipeline stage, ``0 .. vpp - 1``
    (:func:`chunk_blocks`): a block's layers its chunk's index; the stage's layers
    before its first block (the embedding) chunk 0, those after its last (the output
    layer) its last chunk.  All 0 without interleaving.

    >>> s = Strategy(dp=1, pp=2, schedule="interleaved", vpp=2)
    >>> names = ["embed"] + [f"block{i}.{k}" for i in range(4) for k in ("attn", "mlp")] + ["out"]
    >>> layer_chunks(names, s, [(0, 5), (5, 10)])
    [0, 0, 0, 1, 1, 0, 0, 1, 1, 1]
    """
    names = list(names)
    out = [0] * len(names)
    chunks = chunk_blocks(names, strategy, stages)
    for p, (_, stop) in enumerate(stages):
        last = -1
        for c in range(strategy.vpp):
            for block in chunks[p * strategy.vpp + c]:
                for i in block:
                    out[i] = c
                    last = max(last, i)
        if last >= 0:     # the layers after the stage's last block
            out[last + 1:stop] = [strategy.vpp - 1] * (stop - last - 1)
    return out


def _first_blocks(names: list[str], strategy: Strategy, stages: Any, n: int) -> list[bool]:
    """For every layer, whether it belongs to the first ``n`` blocks of its model chunk
    (:func:`chunk_blocks`)."""
    out = [False] * len(names)
    for chunk in chunk_blocks(names, strategy, stages):
        for block in chunk[:n]:
            for i in block:
                out[i] = True
    return out


def layer_offload(names: Any, strategy: Strategy, stages: Any) -> tuple[bool, ...]:
    """Whether each layer's saved activations wait in host memory (``offload_layers``:
    the first ``N`` transformer blocks of each model chunk; module docstring)."""
    names = list(names)
    if strategy.offload_layers is None:
        return (False,) * len(names)
    return tuple(_first_blocks(names, strategy, stages, strategy.offload_layers))


def partial_recompute_counts(workload: Any, strategy: Strategy) -> tuple[int, ...]:
    """``recompute_layers`` values a search tries (cheapest first): a quarter, half and
    three quarters of the blocks in one model chunk (``blocks / (pp x vpp)``), rounded
    up, distinct and fewer than the chunk's blocks (that many is full recomputation).

    Examples
    --------
    >>> from codesign.workloads import get_workload
    >>> partial_recompute_counts(get_workload("llama3-8b"), Strategy(dp=8))
    (8, 16, 24)
    >>> partial_recompute_counts(get_workload("llama3-8b"), Strategy(pp=16))
    (1,)
    """
    starts, _ = _blocks([layer.name for layer in workload.layers])
    per_chunk = len(starts) // (strategy.pp * strategy.vpp)
    return tuple(sorted({n for n in (math.ceil(per_chunk * f) for f in (0.25, 0.5, 0.75))
                         if 0 < n < per_chunk}))


def with_expert_parallelism(strategy: Strategy, ep: int) -> Strategy | None:
    """``strategy`` with ``ep`` expert-parallel ranks: carved out of the ``dp x cp`` data
    axis when ``ep`` divides it (``etp`` = ``tp``), else folded over ``tp x dp x cp``
    (``etp=1``, with the sequence-parallel split folded experts take); None when ``ep``
    divides neither.  The strategy search's expert knob and move place ``ep`` with it."""
    s = strategy
    if s.data_ranks % ep == 0:
        return replace(s, ep=ep, etp=None)
    if s.tp > 1 and (s.tp * s.data_ranks) % ep == 0:
        return replace(s, ep=ep, etp=1, sp=True)
    return None


def recompute_ladder(workload: Any, strategy: Strategy) -> tuple[Strategy, ...]:
    """``strategy``'s recomputation variants, cheapest in time first and least memory
    last: the modes that differ for the workload (:func:`recompute_modes`) with the
    partial recomputations of :func:`partial_recompute_counts` before ``full``.  The
    feasible start and the search's recomputation move walk it."""
    s = replace(strategy, recompute_layers=None, recompute_modules=None)
    # Offloading stays with "none" only (Megatron-core does not combine the two).
    modes = [replace(s, recompute=m, offload_layers=s.offload_layers if m == "none" else None)
             for m in recompute_modes(workload)]
    full = replace(s, offload_layers=None)
    return tuple(modes[:-1] + [replace(full, recompute="full", recompute_layers=n)
                               for n in partial_recompute_counts(workload, full)]
                 + modes[-1:])


def layer_strategies(names: Any, strategy: Strategy, stages: Any, *,
                     precision: str) -> tuple[Strategy, ...]:
    """The strategy every layer runs under: ``strategy`` with the layer's own
    recomputation mode (:func:`layer_recompute`) and the number format the layers run
    in, which is what the sharding rule of :mod:`codesign.workloads.sharding` reads.

    ``precision`` is required because the strategy's own may be ``None`` (the
    workload's format applies, :func:`codesign.workloads.compute.resolve_precision`),
    and 8-bit GEMMs keep 8-bit inputs: a caller passing the unresolved strategy would
    size an FP8 workload's activations in 16 bits."""
    s = replace(strategy, precision=precision)
    other = {mode: replace(s, recompute=mode, recompute_layers=None, recompute_modules=None,
                           offload_layers=None)
             for mode in RECOMPUTE if mode != s.recompute}
    return tuple(s if mode == s.recompute else other[mode]
                 for mode in layer_recompute(names, s, stages))
