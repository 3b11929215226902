"""LoRA fine-tuning: frozen weights with trainable low-rank adapters, :func:`apply_lora`.

LoRA (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", ICLR 2022,
Sec. 4.1) freezes a weight ``W0`` (``k`` inputs, ``n`` outputs) and trains an update
``A B`` of rank ``r`` beside it: ``h = x W0 + (x A) B`` (scaled by ``alpha / r``, which
costs nothing here).  A workload with the settings ``lora_rank`` and ``lora_modules``
(:data:`codesign.workloads.registry.SETTINGS`) is built with every layer passed through
this module.  What changes in one training iteration, per layer and per sample:

* **Frozen weights** (``Layer.frozen``).  The backward pass still computes the gradient
  of each weight GEMM's input -- the adapters of the layers before need it -- but not
  the weight gradient, so a weight GEMM's backward is one product instead of two
  (:func:`codesign.workloads.efficiency.gemm_backward_shapes`, the first of the two).
  The training FLOPs of the weight GEMMs fall from 3x to 2x their forward FLOPs; the
  attention core keeps its 2x backward (both of its operands are activations).  NVIDIA's
  DGX Cloud fine-tuning recipes count LoRA's model FLOPs as 2/3 of full fine-tuning's
  for this reason (``llama3/finetuning/README_70b.md``, tag v25.03).  A frozen embedding
  table gets no gradient at all (its backward FLOPs become 0).
* **Model state.**  Only the adapters have gradients, optimizer state, a data-parallel
  gradient reduction and an optimizer step (``Layer.trainable_params``); the frozen
  weights stay in their 16-bit copy, without the fp32 master copy the optimizer state
  of a trained parameter includes.
* **Adapters.**  Each targeted linear module gets ``A`` (``k x r``) and ``B`` (``r x
  n``): forward two thin products ``x A`` and ``(x A) B``, trained (both backward
  products) and in 16 bit under every precision (``Layer.adapter_gemms``); an element-
  wise add of the adapter's output into the module's (forward: read both, write one,
  ``3 d`` per output element; backward: the gradient is scaled by ``alpha / r``, read
  and write, ``2 d``); saved for the backward pass: ``x A`` (``r`` elements per token;
  ``x`` itself is already saved).
* **Tensor parallelism.**  The adapter of a column-parallel module (``linear_qkv``,
  ``linear_fc1``) keeps ``A`` whole and splits ``B`` by columns, so its output is split
  like the module's; that of a row-parallel module (``linear_proj``, ``linear_fc2``)
  splits ``A`` by rows, like the module's input, and keeps ``B`` whole.  The adapter
  parameters are counted as split by ``tp`` with the rest of the layer (the whole ``A``
  or ``B`` is at most ``r / min(k, n)`` of the module, under 1 % at ranks to 64).

:data:`LORA_MODULES` are Megatron-core's names of a transformer layer's four weight
GEMMs (``megatron/core/transformer``: ``linear_qkv``, ``linear_proj`` in the attention;
``linear_fc1``, ``linear_fc2`` in the MLP, the gated MLP's fc1 holding both input
projections), which NeMo's ``LoRA`` transform targets by name.  In a latent-attention
(MLA) block every query/key/value projection counts as ``linear_qkv``; in a mixture-
of-experts block the shared experts' projections are ``linear_fc1`` / ``linear_fc2``.

Not modelled: adapters on the routed experts' grouped GEMMs (the experts stay frozen
without adapters), dropout on the adapter's input, the reduction of the partial
``x A`` products of a row-parallel adapter across the TP group (``r`` elements per
token), and the first layer's data gradient, which nothing needs (counted, as the
model's conventions count it for pre-training).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from codesign.errors import invalid
from codesign.workloads.model import Layer

__all__ = ["LORA_MODULES", "DEFAULT_LORA_MODULES", "apply_lora", "lora_module"]

#: Megatron-core's names of the linear modules LoRA adapters can target (module docstring).
LORA_MODULES = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
#: Adapted when ``lora_modules`` is not given: all four, the default ``target_modules`` of
#: NeMo's ``LoRA`` transform (``nemo/collections/llm/peft/lora.py``, NVIDIA/NeMo v2.1.0 and
#: commit 25ec4e98; its performance recipes narrow it to ``linear_qkv``, which
#: ``experiments/validation/finetune_check.csv`` enters as ``lora_modules=linear_qkv``).
DEFAULT_LORA_MODULES = LORA_MODULES


def lora_module(layer: Layer, shard: str) -> str:
    """The Megatron-core module a weight GEMM of ``layer`` with TP ``shard`` is, or
    ``""`` when it cannot carry an adapter (the output layer, a router, routed experts,
    the attention core's products, layers outside a transformer block)."""
    if layer.kind == "attention":
        return {"n": "linear_qkv", "": "linear_qkv", "k": "linear_proj"}.get(shard, "")
    if layer.is_mlp_block or layer.kind == "expert":
        return {"n": "linear_fc1", "k": "linear_fc2"}.get(shard, "")
    return ""


def _weight_grad_flops(layer: Layer) -> float:
    """Backward FLOPs per sample of ``layer``'s weight gradients: its weight GEMMs'
    forward FLOPs (``2 M N K`` each; the attention core's ``count`` products have no
    weight), or for a layer without listed GEMMs its forward FLOPs less the attention
    core's; an embedding's whole backward (the scatter of its rows' gradients)."""
    if layer.kind == "embedding":
        return layer.bwd_flops
    if layer.gemms:
        return sum(2.0 * m * n * k * c for m, n, k, c, shard in layer.gemms
                   if shard != "count")
    return max(layer.fwd_flops - layer.attn_core_fwd_flops, 0.0)


def _adapt(layer: Layer, rank: int, modules: tuple[str, ...]) -> Layer:
    """``layer`` frozen, with rank-``rank`` adapters on its GEMMs of ``modules``."""
    d = layer.dtype_bytes
    gemms: list[tuple[float, float, float, float, str]] = []
    params = fwd = saved = 0.0
    ops = []
    for m, n, k, c, shard in layer.gemms:
        module = lora_module(layer, shard)      # "" (never in modules): no adapter
        if module not in modules:
            continue
        row = shard == "k"
        # A x B: column-parallel splits B's columns, row-parallel A's rows (docstring).
        gemms += [(m, float(rank), k, c, shard if row else ""),
                  (m, n, float(rank), c, "" if row else shard)]
        params += c * rank * (k + n)
        fwd += 2.0 * m * rank * (k + n) * c
        saved += m * rank * c * d
        # The add of the adapter's output into the module's: split like that output.
        ops.append((f"lora_add_{module}", 3.0 * d * m * n * c,
                    2.0 * d * m * n * c, "sp" if row else ("tp" if shard else "")))
    bwd = max(layer.bwd_flops - _weight_grad_flops(layer), 0.0) + 2.0 * fwd
    extra = sum(op[1] for op in ops)
    return replace(layer, frozen=True, params=layer.params + int(params),
                   adapter_params=int(params), adapter_gemms=tuple(gemms),
                   fwd_flops=layer.fwd_flops + fwd, bwd_flops=bwd,
                   saved_bytes=layer.saved_bytes + saved,
                   io_bytes=layer.io_bytes + extra,
                   # Layers without listed operators keep the io_bytes approximation.
                   memory_ops=layer.memory_ops + tuple(ops) if layer.memory_ops else ())


def apply_lora(layers: Iterable[Layer], rank: int, modules: tuple[str, ...], *,
               where: str = "workload") -> list[Layer]:
    """``layers`` fine-tuned with LoRA: all frozen, adapters of rank ``rank`` on the
    weight GEMMs of ``modules`` (module docstring).

    Parameters
    ----------
    layers : iterable of Layer
    rank : int
        The adapters' rank ``r`` (>= 1).
    modules : tuple of str
        Subset of :data:`LORA_MODULES`.
    where : str
        Names the workload in errors.

    Raises
    ------
    InvalidSpecError
        ``modules`` names none of the model's GEMMs (a model without transformer
        blocks, or modules it does not have): nothing would be trained.

    Examples
    --------
    One 4096-wide dense MLP block of 2048 tokens, adapters of rank 16 on both of its
    GEMMs: ``16 x (4096 + 16384) x 2`` adapter parameters, and a weight GEMM's backward
    is one product instead of two.

    >>> from codesign.workloads.layers import mlp
    >>> block = mlp("mlp", hidden=4096, ffn=16384, seq=2048, dtype_bytes=2, bias=False,
    ...             norm="rmsnorm", gated=False, dropout=False)
    >>> tuned = apply_lora([block], 16, ("linear_fc1", "linear_fc2"))[0]
    >>> tuned.trainable_params, tuned.adapter_params == 2 * 16 * (4096 + 16384)
    (655360, True)
    >>> round((tuned.bwd_flops - 2 * (tuned.fwd_flops - block.fwd_flops)) / block.fwd_flops, 6)
    1.0
    """
    out = [_adapt(layer, rank, modules) for layer in layers]
    if not any(layer.adapter_params for layer in out):
        found = sorted({lora_module(layer, g[4]) for layer in out for g in layer.gemms} - {""})
        has = ", ".join(found) if found else "none: LoRA adapts transformer blocks"
        raise invalid(f"{where} lora_modules", "+".join(modules),
                      f"modules the model has ({has})")
    return out
