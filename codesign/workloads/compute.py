"""Compute time of layers on a GPU: a roofline with a stated efficiency, or a profile.

Roofline (Williams et al., CACM 2009), per layer and pass, for a batch of ``B`` samples
on one GPU::

    forward  = max(B fwd_flops / (peak x efficiency),
                   (W + B io_bytes) / (memory_bandwidth x memory_efficiency))
    backward = max(B bwd_flops / (peak x efficiency),
                   (W + G + 2 B io_bytes) / (memory_bandwidth x memory_efficiency))

*Bytes moved* are HBM traffic: ``W`` the layer's weights read once per pass
(``weight_bytes``; backward reads the weights and writes their gradients, ``G = W``,
or only the adapters' of a LoRA-frozen layer, :mod:`codesign.workloads.lora`), and
the activations read and written (``io_bytes`` per sample; backward reads the saved
inputs and output gradients and writes input gradients, about twice the forward
traffic).  Embedding tables are not read whole: only the gathered rows, already in
their ``io_bytes``, so ``W = 0`` for them.  Caches are ignored (no reuse across layers).

``peak`` is the GPU's dense peak for the layer's number format: 1-byte layers use
``fp8``, 2-byte ``fp16``/``bf16``, 4-byte ``fp32`` (pass ``dtype="tf32"`` for tensor
cores on 4-byte data).  ``efficiency`` (default :data:`DEFAULT_EFFICIENCY` = 0.5) is the
fraction of peak large matmuls reach in training; Megatron-LM reports 44-52 % of A100
peak end to end for GPT models (Narayanan et al. SC'21, Table 1), and Themis assumes
roofline peak (efficiency 1).  A measured :class:`~codesign.workloads.profile.Profile`
replaces the roofline for every layer it names.

Kernel model
------------
When no ``efficiency`` is given, a layer that lists its GEMMs (``Layer.gemms``:
transformer attention, MLP, mixture-of-experts and output layers, dense layers,
convolutions as implicit GEMMs), on a GPU whose catalog entry has a
:class:`~codesign.workloads.efficiency.ComputeProfile`, in a tensor-core 16- or 8-bit
format, is timed by the kernel model of :mod:`codesign.workloads.efficiency` (GEMM tile
and wave quantisation, fused attention, and the layer's memory-bound operators
``Layer.memory_ops`` at HBM bandwidth -- or, where a layer lists none, its forward
``io_bytes`` and twice that backward; ``bound = "kernels"``).  Everything else -- other
layers, other formats, GPUs without a profile, or an explicit ``efficiency`` -- uses
the roofline above.

FP8 (Transformer Engine)
------------------------
In ``fp8`` only the layers' weight GEMMs run at the fp8 peak, as Megatron-LM and NeMo
train in FP8 with Transformer Engine (TE):

* The attention core (the fused kernel, or the per-head score and context products)
  keeps the 16-bit peak: TE runs it in 16 bit unless a recipe sets ``fp8_dpa`` (default
  ``False`` in its recipes, TE Common API).
* The output layer (``Layer.fp8_gemms`` false) keeps the 16-bit peak: Megatron-LM builds
  it as its own ``tensor_parallel.ColumnParallelLinear``, not a TE module
  (``megatron/core/models/gpt/gpt_model.py``, 2024 and later; only an MXFP8 recipe with
  an FP8 output projection changes that).
* Those GEMMs reach a little less of the fp8 peak than 16-bit ones of the 16-bit
  peak (``ComputeProfile.fp8_gemm_speed`` / ``mxfp8_gemm_speed``, measured by
  Transformer Engine's GEMM profiling guide; :mod:`codesign.workloads.efficiency`).
* Each fp8 weight GEMM pays its conversions, memory-bound kernels at HBM bandwidth:
  forward, of the GEMM's input (``M x K``); backward, of the gradient of its output
  (``M x N``); :func:`fp8_cast_bytes` per element, by recipe (the ``precision``):

  - ``fp8``, delayed scaling (TE's ``DelayedScaling``, the default recipe of NeMo 24.x):
    the scale comes from past iterations' amax history, so one kernel converts.
    Hopper's FP8 tensor cores take only the "TN" layout (cuBLASLt documentation), so
    the backward pass needs the transposes as well: TE's ``cast_transpose`` reads the
    16-bit tensor once and writes its 1-byte cast and the cast's transpose (TE C API,
    ``transpose.h``: ``nvte_cast_transpose``, ``nvte_cast_transpose_dbias`` for
    gradients): ``dtype_bytes + 2``.  Blackwell's take any layout and TE makes no
    transpose there (``nvte_is_non_tn_fp8_gemm_supported``; the profile's
    ``fp8_transpose``): ``dtype_bytes + 1``.
  - ``fp8-cs``, per-tensor current scaling (``Float8CurrentScaling``, Megatron-Bridge's
    FP8-CS): the scale is the tensor's own amax, taken by a reduction kernel that reads
    the tensor before the conversion reads it again (TE's current-scaling quantizer
    calls ``nvte_compute_amax``, then ``nvte_quantize``): ``dtype_bytes`` more.
  - ``mxfp8``, 1 x 32 block scaling (``MXFP8BlockScaling``, Blackwell only): one fused
    kernel reads the tensor and writes a row-wise and a column-wise scaled copy (the
    blocks of the backward GEMMs run along the other dimension), each 1 byte per
    element plus a 1-byte E8M0 scale per 32 elements (TE's ``cast_mxfp8_2D_kernel``,
    OCP Microscaling Formats specification v1.0): ``dtype_bytes + 2 + 2 / 32``.

  The weights' own casts are not counted: TE casts a weight once per optimizer step
  and reuses it for the step's other micro-batches (``is_first_microbatch``, "FP8
  weight caching" in TE's performance guide), a per-step cost under 1 % of any
  pipeline with a few micro-batches; neither are the scaling factors' amax reductions
  across ranks (a few numbers per tensor).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from codesign.specs import check_choice, check_number
from codesign.workloads.efficiency import (PROFILE_FORMATS, flash_attention_time,
                                          gemm_backward_shapes, gemm_time)
from codesign.workloads.hardware import Hardware, get_hardware
from codesign.workloads.model import FP8_FORMATS, MAX_BATCH_SIZE, PRECISIONS, Layer, Workload

__all__ = ["DEFAULT_EFFICIENCY", "LayerTime", "layer_time", "layer_times", "dtype_name",
           "resolve_precision", "uses_kernel_model", "attention_core_time", "ATTENTION_CORE_OPS",
           "recompute_time",
           "FP8_FORMATS", "fp8_cast_bytes"]

#: Fraction of peak FLOP/s assumed for compute-bound layers (see the module docstring).
DEFAULT_EFFICIENCY = 0.5

_DTYPE_BY_BYTES = {1: "fp8", 2: "fp16", 4: "fp32", 8: "fp64"}

#: Memory-bound operators of an unfused attention core (``Layer.memory_ops`` names): with
#: the per-head products (GEMMs of shard ``"count"``), what selective recomputation
#: reruns (Korthikanti et al. 2022, Sec. 5: the softmax, its dropout and the attention
#: over the values).
ATTENTION_CORE_OPS = ("softmax", "attention_dropout")

#: An MXFP8 scale: one 1-byte E8M0 exponent per block of 32 elements (OCP MX v1.0).
_MX_SCALE_BYTES = 1.0 / 32


def fp8_cast_bytes(precision: str, dtype_bytes: int, transpose: bool = True) -> float:
    """HBM bytes the conversion of one ``dtype_bytes`` element to fp8 moves under
    recipe ``precision`` (module docstring, "FP8"); ``transpose``: the GPU's fp8 GEMMs
    take only the TN layout (``ComputeProfile.fp8_transpose``).

    >>> fp8_cast_bytes("fp8", 2), fp8_cast_bytes("fp8", 2, transpose=False)
    (4.0, 3.0)
    >>> fp8_cast_bytes("fp8-cs", 2), fp8_cast_bytes("mxfp8", 2)
    (6.0, 4.0625)
    """
    check_choice("fp8 recipe", precision, FP8_FORMATS)
    if precision == "mxfp8":        # row-wise and column-wise copies, each with scales
        return dtype_bytes + 2.0 * (1.0 + _MX_SCALE_BYTES)
    reads = 2.0 * dtype_bytes if precision == "fp8-cs" else float(dtype_bytes)
    return reads + (2.0 if transpose else 1.0)


@dataclass(frozen=True)
class LayerTime:
    """Forward and backward time of one layer on one GPU for a batch.

    ``bound`` says what set each time: ``"compute"`` or ``"memory"`` (roofline),
    ``"kernels"`` (the kernel model) or ``"profile"`` (measured).
    """

    name: str
    batch: float
    fwd_s: float
    bwd_s: float
    fwd_bound: str
    bwd_bound: str

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dtype_name(dtype_bytes: int) -> str:
    """The number format the roofline assumes for ``dtype_bytes``-byte data."""
    return _DTYPE_BY_BYTES[dtype_bytes]


def resolve_precision(workload: Workload, hardware: Hardware | str,
                      precision: str | None = None) -> str:
    """The number format whose peak the roofline uses for ``workload`` on ``hardware``.

    ``precision`` (a strategy's) wins, then ``workload.precision``, then the rule of
    :class:`~codesign.workloads.model.Workload`: 2-byte models ``bf16``, 1-byte ``fp8``,
    4-byte models ``tf32`` where the GPU has TF32 tensor cores (Ampere and later; the
    default math of cuDNN convolutions in PyTorch and of NVIDIA's NGC containers) and
    ``fp32`` otherwise.  ``tf32`` asked on a GPU without it (V100) falls back to
    ``fp32``, what the hardware would run; ``bf16`` reads the ``fp16`` peak.

    Raises
    ------
    InvalidSpecError
        ``fp8`` (or another format) on a GPU whose catalog entry has no peak for it.
    """
    hw = get_hardware(hardware)
    peaks = dict(hw.peak)
    p = precision or workload.precision
    if p is None:
        p = {1: "fp8", 2: "bf16"}.get(workload.dtype_bytes, "tf32")
        if p == "fp8" and "fp8" not in peaks:
            p = "bf16"
    if p == "tf32" and "tf32" not in peaks:
        p = "fp32"
    # The formats this GPU has a peak for (bf16 and fp8-cs run on the fp16 and fp8
    # tensor cores, Hardware.peak_flops).
    usable = [q for q in PRECISIONS if hw.runs_format(q)]
    check_choice("precision", p, usable, f"on {hw.name}")
    return p


def uses_kernel_model(layer: Layer, hardware: Hardware, dtype: str) -> bool:
    """Whether :func:`layer_time` (without ``efficiency``) times ``layer`` by the kernel
    model: it lists GEMMs or a fused attention core, ``hardware`` has a compute profile,
    and ``dtype`` is a tensor-core 16- or 8-bit format."""
    return (hardware.compute is not None and dtype in PROFILE_FORMATS
            and (bool(layer.gemms) or layer.attention_kernel == "flash"))


def _gemms_time(layer: Layer, hw: Hardware, b: float, dtype: str, gemms: tuple, *,
                adapters: tuple = (), core: bool = False) -> tuple[float, float]:
    """Forward and backward seconds of ``gemms`` (products of ``layer``, format of
    ``Layer.gemms``) and of the LoRA ``adapters``' products by the kernel model, for
    ``b`` samples; with ``core`` only the per-head (``count``) products."""
    prof = hw.compute
    peak = hw.peak_flops(dtype)
    # FP8 covers the weight GEMMs of TE layers; attention and the output layer stay
    # 16-bit (module docstring).
    eight_bit = dtype in FP8_FORMATS
    attn_peak = hw.peak_flops("bf16") if eight_bit else peak
    fp8 = eight_bit and layer.fp8_gemms
    # The 8-bit weight GEMMs at their kernels' measured speed (ComputeProfile.gemm_speed).
    fp8_peak = peak * prof.gemm_speed(dtype)
    bw = hw.memory_bandwidth_Bps
    d = layer.dtype_bytes
    cast = fp8_cast_bytes(dtype, d, prof.fp8_transpose) / (bw * prof.memory_efficiency) \
        if fp8 else 0.0
    fwd = bwd = 0.0
    # The layer's GEMMs, then its LoRA adapters' (16 bit, trained: lora module docstring).
    listed = [(g, g[4] != "count" and fp8, g[4] == "count" or not layer.frozen)
              for g in gemms] + [(g, False, True) for g in adapters]
    for (m, n, k, count, shard), eight, weight_grad in listed:
        if core and shard != "count":
            continue
        # Per-head products are batched over the samples; the others stack the samples'
        # tokens into M.
        if shard == "count":
            mm, cc = m, count * b
        else:
            mm, cc = m * b, count
        kw = {"peak_flops": fp8_peak if eight else attn_peak,
              "bandwidth_Bps": bw, "dtype_bytes": d, "profile": prof, "count": cc}
        fwd += gemm_time(mm, n, k, **kw)
        # A frozen weight's backward is the data gradient alone (the first product).
        for shape in gemm_backward_shapes(mm, n, k)[:2 if weight_grad else 1]:
            bwd += gemm_time(*shape, **kw)
        if eight:
            # conversion of the input (forward) and of the output's gradient (backward)
            fwd += cast * cc * mm * k
            bwd += cast * cc * mm * n
    return fwd, bwd


def _kernel_time(layer: Layer, hw: Hardware, b: float, dtype: str, *,
                 core: bool = False) -> tuple[float, float]:
    """Forward and backward seconds of ``layer`` by the kernel model (module docstring);
    with ``core`` only its attention core's kernels (:func:`attention_core_time`)."""
    prof = hw.compute
    attn_peak = hw.peak_flops("bf16" if dtype in FP8_FORMATS else dtype)
    hbm = hw.memory_bandwidth_Bps * prof.memory_efficiency
    fwd, bwd = _gemms_time(layer, hw, b, dtype, layer.gemms, adapters=layer.adapter_gemms,
                           core=core)
    if layer.attention_kernel == "flash" and layer.attn_core_fwd_flops:
        # FlashAttention: tiles over the keys, a causal mask skips half the blocks,
        # backward does 5 matmuls to the forward's 2 (efficiency.flash_attention_time).
        f, bk = flash_attention_time(b * layer.attn_core_fwd_flops, layer.attn_keys,
                                     causal=layer.causal, peak_flops=attn_peak, profile=prof)
        fwd += f
        bwd += bk
    if layer.memory_ops or core:
        # The layer's memory-bound operators, each at HBM bandwidth (Layer.memory_ops).
        ops = [op for op in layer.memory_ops if not core or op[0] in ATTENTION_CORE_OPS]
        fwd += b * sum(op[1] for op in ops) / hbm
        bwd += b * sum(op[2] for op in ops) / hbm
        return fwd, bwd
    # Not listed: the forward activation traffic, and twice that backward.
    elementwise = b * layer.io_bytes / hbm
    return fwd + elementwise, bwd + 2.0 * elementwise


#: Least efficiency (of peak FLOP/s or HBM bandwidth) a caller may give: below 0.1 % no
#: kernel runs on a GPU (1e-300 timed an iteration at 8e298 s with overflow warnings).
MIN_EFFICIENCY = 1e-3


def layer_time(layer: Layer, hardware: Hardware | str, batch: float, *,
               efficiency: float | None = None, memory_efficiency: float = 1.0,
               dtype: str | None = None) -> LayerTime:
    """Forward and backward time of ``layer`` for ``batch`` samples.

    Parameters
    ----------
    layer : Layer
    hardware : Hardware or str
        A catalog entry or its name (``"A100-80"``).
    batch : float
        Samples this GPU processes (may be fractional after tensor splitting).
    efficiency : float, optional
        Fraction of peak FLOP/s reached, in (0, 1]: forces the roofline.  Default: the
        kernel model where it applies (:func:`uses_kernel_model`), else the roofline at
        :data:`DEFAULT_EFFICIENCY`.
    memory_efficiency : float, optional
        Fraction of HBM bandwidth reached by the roofline, in (0, 1].
    dtype : str, optional
        Number format whose peak applies; default from ``layer.dtype_bytes``.

    Returns
    -------
    LayerTime
        Seconds, and what bounds each pass.

    Examples
    --------
    A 4096 x 4096 fp16 dense layer, 1024 samples, on an A100 at 50 %:
    ``2 * 4096**2 * 1024 / (312e12 * 0.5)`` = 0.22 ms forward.
    """
    hw = get_hardware(hardware)
    # (a batch of 1e300 samples overflowed to an infinite time)
    b = check_number("batch", batch, maximum=MAX_BATCH_SIZE)
    fmt = dtype or dtype_name(layer.dtype_bytes)
    mem_eff = check_number("memory_efficiency", memory_efficiency, minimum=MIN_EFFICIENCY,
                           inclusive=True, maximum=1)
    if efficiency is None and uses_kernel_model(layer, hw, fmt):
        fwd, bwd = _kernel_time(layer, hw, b, fmt)
        return LayerTime(layer.name, b, fwd, bwd, "kernels", "kernels")
    eff = DEFAULT_EFFICIENCY if efficiency is None else efficiency
    peak = hw.peak_flops(fmt) * check_number("efficiency", eff, minimum=MIN_EFFICIENCY,
                                             inclusive=True, maximum=1)
    bandwidth = hw.memory_bandwidth_Bps * mem_eff
    weights = 0.0 if layer.kind == "embedding" else layer.weight_bytes
    # Backward reads the weights and writes the trained parameters' gradients.
    grads = 0.0 if layer.kind == "embedding" else layer.trainable_params * layer.dtype_bytes
    times = []
    for flops, moved in ((layer.fwd_flops, weights + b * layer.io_bytes),
                         (layer.bwd_flops, weights + grads + 2.0 * b * layer.io_bytes)):
        compute, memory = b * flops / peak, moved / bandwidth
        times.append((compute, "compute") if compute >= memory else (memory, "memory"))
    (fwd, fb), (bwd, bb) = times
    return LayerTime(layer.name, b, fwd, bwd, fb, bb)


def attention_core_time(layer: Layer, hardware: Hardware | str, batch: float, *,
                        efficiency: float | None = None, dtype: str | None = None) -> float:
    """Forward seconds of ``layer``'s attention core for ``batch`` samples: what
    selective recomputation reruns before the backward (Korthikanti et al. 2022, Sec. 5).

    By the kernel model (where :func:`layer_time` uses it) the core's own kernels: the
    per-head score and context products, the softmax and the attention dropout
    (:data:`ATTENTION_CORE_OPS`), so the memory-bound part is not priced at the GEMMs'
    rate -- their Table 4 measures 1.3 ms per layer of the 22B model for this rerun (13.2
    against 11.9 ms backward), a FLOP share of the forward gives a third of that.  By the
    roofline: the core's share of the forward FLOPs of the forward time.  Seconds; 0 for
    a layer without an attention core.
    """
    if not layer.attn_core_fwd_flops:
        return 0.0
    hw = get_hardware(hardware)
    b = check_number("batch", batch)
    fmt = dtype or dtype_name(layer.dtype_bytes)
    if efficiency is None and uses_kernel_model(layer, hw, fmt):
        return _kernel_time(layer, hw, b, fmt, core=True)[0]
    full = layer_time(layer, hw, b, efficiency=efficiency, dtype=dtype)
    return full.fwd_s * layer.attn_core_fwd_flops / layer.fwd_flops


def recompute_time(layer: Layer, hardware: Hardware | str, batch: float,
                   modules: Any, *, efficiency: float | None = None,
                   dtype: str | None = None) -> float:
    """Forward seconds that selective recomputation with ``modules`` (names of
    :data:`~codesign.workloads.strategy.RECOMPUTE_MODULES`) reruns in ``layer`` for
    ``batch`` samples before its backward pass.

    ``core_attn``: :func:`attention_core_time`, where the core's ``s x s`` tensors were
    dropped; ``mlp``: a dense MLP block's whole forward; ``layernorm``: the norm kernels
    (``norm`` memory operators); ``moe_act``: an expert layer's activation kernels
    (``activation`` operators); ``mla_up_proj``: latent attention's up projections
    (``Layer.up_proj_gemms``), by the kernel model where :func:`layer_time` uses it,
    else their FLOP share of the forward.  The memory-bound kernels run at HBM bandwidth
    times the profile's ``memory_efficiency`` (1 without a profile, as
    :func:`layer_time`'s roofline).  Seconds; 0 when nothing of ``layer`` is rerun.
    """
    hw = get_hardware(hardware)
    b = check_number("batch", batch)
    if "mlp" in modules and layer.is_mlp_block:
        return layer_time(layer, hw, b, efficiency=efficiency, dtype=dtype).fwd_s
    seconds = 0.0
    if "core_attn" in modules and layer.attn_core_saved_bytes > 0:
        seconds += attention_core_time(layer, hw, b, efficiency=efficiency, dtype=dtype)
    if "mla_up_proj" in modules and layer.up_proj_gemms:
        fmt = dtype or dtype_name(layer.dtype_bytes)
        if efficiency is None and uses_kernel_model(layer, hw, fmt):
            seconds += _gemms_time(layer, hw, b, fmt, layer.up_proj_gemms)[0]
        else:
            flops = sum(2.0 * m * n * k * c for m, n, k, c, _ in layer.up_proj_gemms)
            full = layer_time(layer, hw, b, efficiency=efficiency, dtype=dtype)
            seconds += full.fwd_s * flops / layer.fwd_flops
    names = (("norm",) if "layernorm" in modules else ()) + (
        ("activation",) if "moe_act" in modules and layer.kind == "expert" else ())
    if names:
        eff = hw.compute.memory_efficiency if hw.compute is not None else 1.0
        moved = sum(op[1] for op in layer.memory_ops if op[0] in names)
        seconds += b * moved / (hw.memory_bandwidth_Bps * eff)
    return seconds


def layer_times(workload: Workload, hardware: Hardware | str, batch: float, *,
                efficiency: float | None = None, memory_efficiency: float = 1.0,
                dtype: str | None = None, profile: Any = None) -> tuple[LayerTime, ...]:
    """Per-layer times of ``workload`` for ``batch`` samples per GPU.

    Layers named in ``profile`` (a :class:`~codesign.workloads.profile.Profile`) take
    its measured times, scaled to ``batch`` as the profile documents; the rest use
    :func:`layer_time`.
    """
    hw = get_hardware(hardware)
    b = check_number("batch", batch)
    out = []
    for layer in workload.layers:
        measured = profile.time(layer, b) if profile is not None else None
        if measured is not None:
            out.append(LayerTime(layer.name, b, measured[0], measured[1],
                                 "profile", "profile"))
        else:
            out.append(layer_time(layer, hw, b, efficiency=efficiency,
                                  memory_efficiency=memory_efficiency, dtype=dtype))
    return tuple(out)
