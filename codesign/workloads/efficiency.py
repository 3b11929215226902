"""Kernel-level compute model: GEMM efficiency by shape, attention kernels, HBM-bound work.

Replaces the single efficiency constant of the roofline (:mod:`codesign.workloads.compute`)
for layers that list their matrix products (``Layer.gemms``) on GPUs whose catalog entry
carries a :class:`ComputeProfile`.  Three kinds of kernels, run one after another:

GEMMs (tile and wave quantisation)
    A GEMM ``C[M, N] = A[M, K] B[K, N]`` is cut into output tiles of ``tile_m x tile_n``;
    each streaming multiprocessor (SM) computes one tile at a time, so the kernel runs
    ``waves = ceil(tiles / SMs)`` rounds, each as long as one full tile.  Partial tiles
    (tile quantisation) and a last, partly filled wave (wave quantisation) are paid in
    full (NVIDIA, *Matrix Multiplication Background User's Guide*, Deep Learning
    Performance documentation, sections "Tile quantization" and "Wave quantization").
    Each tile also pays a fixed prologue, ``k_overhead`` in units of K (the software
    pipeline filling its stages), so a skinny-K product (attention scores,
    ``K = head_dim``) runs below peak, and an epilogue: after its main loop a tile's
    ``tile_m x tile_n`` outputs are converted and written to HBM, and the next wave of
    tiles starts when the SMs are free again -- the multistage kernels of CUTLASS 2 /
    cuBLAS on Ampere run one 256 x 128 tile per SM and their epilogue after the main
    loop (NVIDIA CUTLASS documentation, "Efficient GEMM in CUDA": the epilogue is the
    last phase of a threadblock's tile; only Hopper's "ping-pong" kernel overlaps one
    tile's epilogue with another's main loop).  The writes of a wave share the HBM
    bandwidth, so all epilogues together take ``tiles x tile_m x tile_n x dtype_bytes /
    (HBM bandwidth x memory_efficiency)`` -- a cost per output element that a long-K
    product amortises and a short one does not: the measured rise of efficiency with
    GEMM size (the Megatron-LM H100 README: "larger GEMMs have higher arithmetic
    intensity and are consequently more efficient to execute").  Hopper's GEMMs are
    persistent, warp-specialised kernels whose epilogue runs while the next tile's main
    loop loads (``epilogue_overlap``; NVIDIA CUTLASS 3 documentation, "Efficient GEMM
    in CUDA": the ping-pong and cooperative kernel schedules): no epilogue term.  A
    published H100 sweep checks this shape law: XLA's bf16 GEMM table for sm_90
    (``experiments/validation/gemm_sweep_h100.csv``, 27 shapes from 1024 to 4096 per
    dimension, 236 to 783 TFLOP/s) is reproduced within 2.3 % on average and 7.8 % at
    worst at ``gemm_efficiency`` 0.89 and ``k_overhead`` 192 once each timed call pays
    the benchmark's 5 us of launch and synchronisation (a cost kernels queued back to
    back in training do not pay); with the epilogue term the best setting (prologue
    32, plateau 0.94) is 3.3 % off on average but 17 % at worst
    (``tests/codesign/test_workloads_efficiency.py``).  With fewer
    tiles than SMs (weight gradients of narrow layers, whose K is every token or pixel
    of the batch) the kernel splits K over ``SMs // tiles`` CTAs per tile (split-K /
    stream-K of cuBLAS and CUTLASS, NVIDIA CUTLASS documentation "Efficient GEMM in
    CUDA", section "Parallelized Reductions"), when that is faster::

        t_compute = waves x 2 tile_m tile_n (K + k_overhead) / (peak x gemm_efficiency / SMs)
                    + tiles x tile_m tile_n dtype_bytes / (HBM bandwidth x memory_efficiency)
                    (split-K: min of that and 2 tile_m tile_n (K / split + k_overhead) / ...)
        t_memory  = (M K + K N + M N) x dtype_bytes / (HBM bandwidth x memory_efficiency)
        t_gemm    = max(t_compute, t_memory)

    ``gemm_efficiency`` is the fraction of the datasheet peak that large, well-shaped
    16-bit GEMMs reach.  The 8-bit kernels reach a slightly smaller fraction of the
    8-bit peak at the same shapes (``fp8_gemm_speed``, ``mxfp8_gemm_speed``: their
    efficiency over the 16-bit kernels'; a ratio, so a calibrated ``gemm_efficiency``
    carries it).  Transformer Engine's GEMM profiling guide measured it with every
    input already quantized, per transformer layer of a 5B model (hidden 4096, MLP
    16384, 15,872 tokens: 12 GEMMs forward and backward): on an H200 NVL the
    per-tensor-scaled FP8 kernels took 16.785 ms against BF16's 31.968 ms, 1.90 x for
    twice the peak (0.952); on a B300 (Blackwell) 6.812 against 13.102 ms (0.962) and
    the MXFP8 kernels 7.161 ms (0.915) (NVIDIA TransformerEngine,
    ``docs/examples/gemm_profiling/gemm_profiling.rst``, commit 1609c890e, June 2026).
    A batch of ``count`` identical GEMMs (per-head attention products)
    shares the waves: ``tiles = count x ceil(M/tile_m) x ceil(N/tile_n)``.  Backward runs
    the two products of each forward GEMM: the input gradient ``(M, K, N)`` and the
    weight gradient ``(K, N, M)``.

Fused (flash) attention
    Dao et al. 2022/2023 (FlashAttention, FlashAttention-2): one kernel computes
    ``softmax(Q K^T) V`` in tiles without writing the ``s x s`` matrix; with a causal
    mask it skips the masked half.  Backward does 2.5 x the forward's matmul work (five
    matmuls against two, the scores recomputed; FlashAttention-2 Sec. 3.1.2).  Each
    thread block owns one tile of 128 queries (forward) or 128 keys (backward) and loops
    over the ``n = keys / 128`` blocks of the other side; a tile also pays a fixed cost
    of ``c`` blocks (loading its Q or K/V, the final rescale, writing O or dK/dV), and a
    causal tile computes its diagonal block in full.  So a kernel takes
    ``(n + c) / n`` (no mask) or ``(n + 1 + 2c) / n`` (causal: ``n (n + 1) / 2 + c n``
    blocks for ``n^2 / 2`` useful ones) times the ideal::

        t_fwd = FLOPs (x 1/2 causal) / (peak x attention_efficiency) x stretch(c_fwd)
        t_bwd = 2.5 x FLOPs (x 1/2 causal) / (peak x attention_efficiency) x stretch(c_bwd)

    ``attention_efficiency`` is the long-sequence efficiency of the GPU's default kernel
    (``ComputeProfile.attention_kernel``; other kernels run at their measured speed
    relative to it, :meth:`ComputeProfile.with_attention_kernel`).  ``c_fwd = 1`` and
    ``c_bwd = 2`` (:data:`ATTENTION_TILE_OVERHEAD`) reproduce FlashAttention-2's
    measured speeds on an H100 SXM5 at head dim 128 (Shah et al. 2024, FlashAttention-3,
    Fig. 5 and 6): causal forward 191 / 260 / 298 / 319 / 333 / 335 TFLOP/s at 512 ...
    16k tokens is ``345 n / (n + 3)`` within 4 %, backward (no mask) 214 / 260 / 291 /
    310 / 318 / 322 is ``327 n / (n + 2)`` within 2 % -- the rise with sequence length
    is the per-tile cost, not a different efficiency (the unmasked forward, 309 ... 370,
    runs up to 10 % faster than this causal fit).  The tile costs are properties of the
    kernel's loop, used on every GPU.  cuDNN's fused attention, which Transformer Engine
    selects on Hopper and later GPUs (NVIDIA TransformerEngine, ``DotProductAttention``
    backend selection: "Select FusedAttention on sm90 ... for performance", since v1.2,
    commit 32db392 of Dec 2023), has the same loop and runs 1.6 x faster on the same
    benchmark: causal forward 315 / 410 / 484 / 518 / 529 / 539 TFLOP/s is
    ``552 n / (n + 3)`` within 4 %, backward 408 ... 516 from 1k tokens is
    ``525 n / (n + 2)`` within 3 % (FlashAttention-3 Fig. 5 and 6, head dim 128); the
    H100 profile's default kernel is cuDNN's (``attention_efficiency`` 552 / 989 =
    0.558), FlashAttention-2 runs at 345 / 552 = 0.625 of it (PyTorch SDPA, MosaicML's
    llm-foundry and other stacks without Transformer Engine).  On Blackwell the tile
    costs more: its tensor cores doubled while the exponential units and shared-memory
    bandwidth that a tile's softmax and loads use did not (Zadouri et al. 2026,
    FlashAttention-4, Sec. 2.2), so the per-tile cost ``c`` is scaled by the profile's
    ``attention_tile_cost``.  cuDNN 9.13's fused attention on a B200 (FlashAttention-4
    Fig. 4 and 6: causal, head dim 128, 1k ... 32k tokens, forward 717 / 929 / 1076 /
    1168 / 1285 / 1266 TFLOP/s, backward 543 / 732 / 893 / 1008 / 1085 / 1142) is
    fitted by ``attention_efficiency`` 0.554 of the 2,250 TFLOP/s peak with
    ``attention_tile_cost`` 2.46 within 8 % at every point (with the Hopper tile cost
    the best efficiency, 0.47, is 20 % off at one length).  The tile cost is the
    kernel's structure, its release moves the efficiency: cuDNN 9.19's bars in the same
    figures fit 0.663 with a tile cost of 2.48, and the same fit of the H100 cuDNN
    forward bars above gives 1.01.

Memory-bound work
    Normalisation, activation, dropout, residual adds, (unfused) softmax, batch norm and
    the cross-entropy loss over the vocabulary are listed per layer with the HBM bytes
    each kernel reads and writes (``Layer.memory_ops``, counted in
    :mod:`codesign.workloads.layers` from the operators Megatron-LM runs) and take
    ``bytes / (bandwidth x memory_efficiency)``.  ``memory_efficiency`` is a measured
    property of the memory system, not a fitted one: a streaming kernel sustains 88 %
    of the A100's datasheet HBM bandwidth and about 90 % is the most any kernel reaches;
    framework element-wise kernels run a little below a pure copy: 0.85 (sources in
    ``compute_profiles.yaml``).  Layers
    that list no operators fall back to their forward ``io_bytes`` and twice that
    backward.  Kernels of a layer run in sequence, so the times add.

Convolutions and mixture-of-experts
    A convolution is an implicit GEMM (``M = h_out w_out`` per sample, ``N = c_out``,
    ``K = c_in k^2``); a mixture-of-experts layer runs a grouped GEMM per expert with
    the tokens routed to it (``M = s top_k capacity / experts`` per sample, times the
    expert-parallel degree), so many experts and small micro-batches give skinny,
    weight-bound products (:func:`codesign.workloads.layers.moe`).

Parameters are per GPU in ``codesign/workloads/data/compute_profiles.yaml`` with their
sources; ``codesign calibrate`` fits any of ``gemm_efficiency``, ``attention_efficiency``
and ``memory_efficiency`` to measured runs, and, asked for, ``fp8_gemm_speed`` /
``mxfp8_gemm_speed`` (runs of one configuration in 16 and 8 bit constrain them); the
built-in profiles fit the GEMM efficiency only, the others are the kernels' measured
figures.  The model applies to 2-byte and 1-byte formats (bf16, fp16 and the fp8
recipes fp8, fp8-cs, mxfp8: the tensor-core formats the profiles were measured in);
other formats, layers without GEMM shapes (embeddings, pooling, LSTM cells) and GPUs
without a profile keep the constant roofline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_choice, check_int, check_number

__all__ = ["ComputeProfile", "FIT_PARAMETERS", "SPEED_PARAMETERS", "CALIBRATION_PARAMETERS",
           "MAX_GEMM_SPEED", "profile_from_dict", "gemm_time",
           "gemm_backward_shapes", "flash_attention_time", "carry_parameters",
           "PROFILE_FORMATS",
           "ATTENTION_BLOCK", "ATTENTION_TILE_OVERHEAD", "MAX_ATTENTION_TILE_COST",
           "ATTENTION_KERNELS"]

#: Parameters ``codesign calibrate`` fits by default (the rest come from datasheets).
FIT_PARAMETERS = ("gemm_efficiency", "attention_efficiency", "memory_efficiency")
#: The 8-bit GEMM kernels' speed relative to ``gemm_efficiency`` (measured; a cluster's
#: own BF16 and FP8 runs of one configuration can calibrate it).
SPEED_PARAMETERS = ("fp8_gemm_speed", "mxfp8_gemm_speed")
#: Every parameter ``codesign calibrate --parameters`` accepts.
CALIBRATION_PARAMETERS = FIT_PARAMETERS + SPEED_PARAMETERS
#: Largest value of a :data:`SPEED_PARAMETERS` entry.
MAX_GEMM_SPEED = 1.5
#: Number formats whose kernels the profiles describe: 16-bit and the 8-bit training
#: recipes (codesign.workloads.compute, "FP8").
PROFILE_FORMATS = ("fp16", "bf16", "fp8", "fp8-cs", "mxfp8")
#: Keys (or queries) per block of a fused attention kernel's inner loop: FlashAttention-2
#: tiles of 128 at head dim 128 (Dao 2023, Sec. 3.3 and its kernel launch parameters).
ATTENTION_BLOCK = 128
#: Fixed cost of one attention tile in blocks of :data:`ATTENTION_BLOCK` (forward,
#: backward), from FlashAttention-2's H100 benchmarks (module docstring); a profile's
#: ``attention_tile_cost`` scales it (Blackwell's cuDNN kernel: 2.46).
ATTENTION_TILE_OVERHEAD = (1.0, 2.0)
#: Largest ``attention_tile_cost``: 16 blocks of fixed cost per tile would make a
#: 2k-token causal kernel run at a fifth of its plateau, which no published kernel does.
MAX_ATTENTION_TILE_COST = 16.0
#: Fused attention kernels a profile can name (module docstring, "Fused attention"):
#: FlashAttention-2 (Dao 2023) and cuDNN's fused flash attention (Transformer Engine's
#: ``FusedAttention``, its choice on Hopper and later).
ATTENTION_KERNELS = ("flash2", "cudnn")


@dataclass(frozen=True)
class ComputeProfile:
    """Kernel-model parameters of one GPU (see the module docstring).

    Parameters
    ----------
    sms : int
        Streaming multiprocessors (datasheet / whitepaper).
    tile_m, tile_n : int
        Output tile of the GEMM kernels (elements).
    k_overhead : float
        Per-tile fixed cost in units of the K dimension.
    gemm_efficiency : float
        Fraction of dense peak that large GEMMs reach, in (0, 1].
    attention_efficiency : float
        Fraction of dense peak that the default fused attention kernel reaches, in (0, 1].
    attention_kernel : str
        Which kernel that is (:data:`ATTENTION_KERNELS`): the one frameworks run by
        default on this GPU (Transformer Engine: cuDNN's on Hopper and later,
        FlashAttention-2 before).
    other_attention_kernels : tuple of (str, float)
        Other kernels measured on this GPU, each with its speed relative to the default
        one (measured side by side, so a calibrated ``attention_efficiency`` carries them
        along); YAML: a mapping ``{flash2: 0.625}``.
    attention_tile_cost : float
        The default kernel's fixed cost per tile as a multiple of
        :data:`ATTENTION_TILE_OVERHEAD` (Hopper's, 1; Blackwell's cuDNN kernel 2.46:
        module docstring), in (0, :data:`MAX_ATTENTION_TILE_COST`].
    memory_efficiency : float
        Fraction of HBM bandwidth that element-wise kernels reach, in (0, 1].
    epilogue_overlap : bool
        The GEMM kernels overlap a tile's epilogue with the next tile's main loop
        (Hopper's persistent warp-specialised kernels): no epilogue term.
    fp8_gemm_speed, mxfp8_gemm_speed : float
        Efficiency of the 8-bit GEMM kernels -- per-tensor-scaled FP8 (recipes ``fp8``,
        ``fp8-cs``) and 1 x 32 block-scaled MXFP8 -- relative to ``gemm_efficiency``:
        their fraction of the 8-bit peak over the 16-bit kernels' fraction of the
        16-bit peak at the same shapes (module docstring).  1: the same fraction.
    fp8_transpose : bool
        Per-tensor-scaled fp8 GEMMs take only the "TN" layout, so training keeps a
        transposed copy of each fp8 operand for the backward pass (Hopper and Ada,
        cuBLASLt documentation); false where fp8 GEMMs take any layout (Blackwell:
        Transformer Engine then creates no transpose, ``nvte_is_non_tn_fp8_gemm_supported``).
    source : str
        Where the numbers come from.
    validated_error : float or None
        Mean absolute relative error of predicted iteration times on published runs
        held out of the fit (``experiments/validation/validation.md``, leave one source
        out); ``None``: not validated.  Iteration results carry it as ``model_error``.
    validated_comparison_error : float or None
        Mean relative error of the predicted ratio of two published runs of one source,
        model and number format that differ in GPUs, strategy or batch, held out of the
        fit the same way (:func:`evaluators.iteration.runs.comparison_errors`): how well
        the model tells two designs apart, which is what
        :func:`evaluators.iteration.uncertainty.compare` tests.  ``None``: not
        measured (comparisons then use ``validated_error``).  Results carry it as
        ``comparison_error``.
    """

    sms: int
    tile_m: int = 256
    tile_n: int = 128
    k_overhead: float = 128.0
    gemm_efficiency: float = 0.8
    attention_efficiency: float = 0.5
    attention_kernel: str = "flash2"
    other_attention_kernels: tuple[tuple[str, float], ...] = ()
    attention_tile_cost: float = 1.0
    memory_efficiency: float = 0.8
    fp8_gemm_speed: float = 1.0
    mxfp8_gemm_speed: float = 1.0
    epilogue_overlap: bool = False
    fp8_transpose: bool = True
    source: str = ""
    validated_error: float | None = None
    validated_comparison_error: float | None = None

    def __post_init__(self) -> None:
        # (B200: 148 SMs per die; 128 x 256 tiles: more than 4,096 of either is a typo,
        # and sms 1e21 timed an iteration at 2.5e303 s)
        for name in ("sms", "tile_m", "tile_n"):
            check_int(f"compute {name}", getattr(self, name), 1, 4096)
        check_number("compute k_overhead", self.k_overhead, inclusive=True)
        check_number("compute attention_tile_cost", self.attention_tile_cost,
                     maximum=MAX_ATTENTION_TILE_COST)
        for name in FIT_PARAMETERS:
            check_number(f"compute {name}", getattr(self, name), maximum=1)
        for name in SPEED_PARAMETERS:
            check_number(f"compute {name}", getattr(self, name), maximum=MAX_GEMM_SPEED)
        for name in ("epilogue_overlap", "fp8_transpose"):
            if not isinstance(getattr(self, name), bool):
                raise invalid(f"compute {name}", getattr(self, name), "true or false")
        if not isinstance(self.source, str):
            raise invalid("compute source", self.source, "a string")
        check_choice("compute attention_kernel", self.attention_kernel, ATTENTION_KERNELS)
        others = self.other_attention_kernels
        if isinstance(others, Mapping):
            others = tuple(sorted(others.items()))
        if not isinstance(others, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 for p in others):
            raise invalid("compute other_attention_kernels", self.other_attention_kernels,
                          "a mapping of kernel name to its speed relative to the default")
        for name, speed in others:
            check_choice("compute other_attention_kernels kernel", name, ATTENTION_KERNELS)
            if name == self.attention_kernel:
                raise invalid("compute other_attention_kernels kernel", name,
                              "a kernel other than the default attention_kernel")
            check_number(f"compute other_attention_kernels {name}", speed)
        object.__setattr__(self, "other_attention_kernels",
                           tuple((n, float(v)) for n, v in others))
        for name in ("validated_error", "validated_comparison_error"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or not 0 <= v < 1):
                raise invalid(f"compute {name}", v, "a fraction in [0, 1) or null")

    def with_parameters(self, **values: float) -> ComputeProfile:
        """A copy with some of :data:`CALIBRATION_PARAMETERS` replaced."""
        for k in values:
            check_choice("compute parameter", k, CALIBRATION_PARAMETERS)
        return replace(self, **{k: float(v) for k, v in values.items()})

    def with_attention_kernel(self, kernel: str) -> ComputeProfile:
        """A copy whose default attention kernel is ``kernel``: its efficiency is the
        default's times the measured relative speed (``other_attention_kernels``).

        Raises
        ------
        InvalidSpecError
            ``kernel`` is not a known kernel, or has no measured speed on this GPU.

        Examples
        --------
        >>> from codesign.workloads.hardware import get_hardware
        >>> h100 = get_hardware("H100").compute
        >>> round(h100.with_attention_kernel("flash2").attention_efficiency, 3)
        0.349
        """
        check_choice("attention_kernel", kernel, ATTENTION_KERNELS)
        if kernel == self.attention_kernel:
            return self
        speeds = dict(self.other_attention_kernels)
        if kernel not in speeds:
            measured = ", ".join([self.attention_kernel, *speeds])
            raise invalid("attention_kernel", kernel,
                          f"a kernel with a measured speed on this GPU ({measured})")
        rest = {self.attention_kernel: 1.0 / speeds[kernel],
                **{k: v / speeds[kernel] for k, v in speeds.items() if k != kernel}}
        return replace(self, attention_kernel=kernel,
                       attention_efficiency=self.attention_efficiency * speeds[kernel],
                       other_attention_kernels=tuple(sorted(rest.items())))

    def gemm_speed(self, dtype: str) -> float:
        """Efficiency of the GEMM kernels of format ``dtype`` relative to
        ``gemm_efficiency`` (``fp8_gemm_speed`` for the per-tensor FP8 recipes,
        ``mxfp8_gemm_speed`` for MXFP8, 1 for 16-bit formats).

        >>> ComputeProfile(sms=132, fp8_gemm_speed=0.95).gemm_speed("fp8-cs")
        0.95
        """
        if dtype == "mxfp8":
            return self.mxfp8_gemm_speed
        return self.fp8_gemm_speed if dtype in ("fp8", "fp8-cs") else 1.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["other_attention_kernels"] = dict(self.other_attention_kernels)
        return out


_PROFILE_KEYS = ("sms", "tile_m", "tile_n", "k_overhead", *CALIBRATION_PARAMETERS,
                 "attention_kernel", "other_attention_kernels", "attention_tile_cost",
                 "epilogue_overlap",
                 "fp8_transpose", "source", "validated_error",
                 "validated_comparison_error")


def profile_from_dict(spec: Any, *, where: str = "compute") -> ComputeProfile:
    """Build a :class:`ComputeProfile` from a YAML mapping (keys of the dataclass).

    Raises
    ------
    InvalidSpecError
        Not a mapping, an unknown key, a missing ``sms`` or a value out of range.
    """
    if not isinstance(spec, Mapping):
        raise invalid(where, spec, "a mapping with sms, gemm_efficiency, ...")
    for key in spec:
        check_choice(f"{where} key", key, _PROFILE_KEYS)
    if "sms" not in spec:
        raise invalid(f"{where} sms", None, "the GPU's number of SMs (required)")
    try:
        return ComputeProfile(**dict(spec))
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"{where}: {exc}") from None


def carry_parameters(values: Mapping[str, float], source: ComputeProfile,
                     target: ComputeProfile) -> dict[str, float]:
    """Parameters fitted on ``source``'s GPU, carried to ``target``'s as the catalog
    carries them: each scaled by the catalog's ``target / source`` ratio of it.

    A calibration captures what training adds to the kernels on the measured GPU; the
    catalog holds each GPU's kernels relative to that (the same value for the same
    silicon: H200 = H100; Blackwell's GEMMs at 0.90 of Hopper's efficiency, measured
    on the same GEMMs, ``compute_profiles.yaml``).  So a refit of the H100 moves the
    B200 by the same factor, and the measured ratio stays.

    Examples
    --------
    >>> from codesign.workloads.hardware import get_hardware
    >>> h100, b200 = get_hardware("H100").compute, get_hardware("B200").compute
    >>> fit = carry_parameters({"gemm_efficiency": h100.gemm_efficiency}, h100, b200)
    >>> round(fit["gemm_efficiency"], 3) == b200.gemm_efficiency
    True
    """
    for k in values:
        check_choice("compute parameter", k, CALIBRATION_PARAMETERS)
    return {k: float(v) * getattr(target, k) / getattr(source, k) for k, v in values.items()}


def gemm_time(m: float, n: float, k: float, *, peak_flops: float, bandwidth_Bps: float,
              dtype_bytes: int, profile: ComputeProfile, count: float = 1.0) -> float:
    """Seconds for ``count`` GEMMs of ``M x N x K`` (module docstring).

    ``m`` may be fractional (a fractional micro-batch after splitting); tiles round up.

    Examples
    --------
    A 4096^3 bf16 GEMM on an A100 profile (108 SMs, 256 x 128 tiles, k_overhead 0,
    efficiency 1): 16 x 32 = 512 tiles in ceil(512 / 108) = 5 waves, each
    ``2 x 256 x 128 x 4096 / (312e12 / 108)`` s = 92.9 us: 0.4646 ms, the ideal
    0.4405 ms over the wave efficiency 512 / 540; the epilogues write the 32 MiB output
    at 2.039 TB/s in 16.5 us more.
    """
    if m <= 0 or n <= 0 or k <= 0 or count <= 0:
        return 0.0
    p = profile
    tiles = count * math.ceil(m / p.tile_m - 1e-9) * math.ceil(n / p.tile_n - 1e-9)
    waves = math.ceil(tiles / p.sms - 1e-9)
    per_sm = peak_flops * p.gemm_efficiency / p.sms
    hbm = bandwidth_Bps * p.memory_efficiency
    tile_flops = 2.0 * p.tile_m * p.tile_n
    # Epilogue: each wave's output tiles are written to HBM after their main loop, the
    # next wave starting when they are done -- over all waves, every tile once (hidden
    # under the next tile's main loop by Hopper's persistent kernels).
    epi = 0.0 if p.epilogue_overlap else tiles * p.tile_m * p.tile_n * dtype_bytes / hbm
    t_compute = waves * tile_flops * (k + p.k_overhead) / per_sm + epi
    split = p.sms // tiles if tiles else 1
    if split > 1:
        # Split-K: fewer output tiles than SMs (a weight gradient of a narrow layer,
        # K = all the batch's tokens or pixels) -- the libraries cut K into ``split``
        # slices, one wave of ``tiles x split`` CTAs, each paying the prologue.  The
        # fix-up of the partial tiles is neglected (stream-K keeps it to the tiles that
        # straddle slices, Osama et al. PPoPP'23), which keeps the time monotone.
        t_compute = min(t_compute, tile_flops * (k / split + p.k_overhead) / per_sm + epi)
    t_memory = count * (m * k + k * n + m * n) * dtype_bytes / hbm
    return max(t_compute, t_memory)


def gemm_backward_shapes(m: float, n: float, k: float) -> tuple[tuple[float, float, float],
                                                                 tuple[float, float, float]]:
    """The two backward products of ``C[M,N] = A[M,K] B[K,N]``: ``dA = dC B^T`` is
    ``(M, K, N)`` and ``dB = A^T dC`` is ``(K, N, M)``."""
    return (m, k, n), (k, n, m)


def flash_attention_time(flops: float, keys: float, *, causal: bool, peak_flops: float,
                         profile: ComputeProfile) -> tuple[float, float]:
    """Forward and backward seconds of a fused attention kernel (module docstring).

    Parameters
    ----------
    flops : float
        Forward FLOPs of the full ``s x s`` products (``Q K^T`` and ``softmax(.) V``),
        before causal halving.
    keys : float
        Keys each query attends to in one kernel (the sequence length, or its context-
        parallel chunk); 0 = unknown: no tile cost.
    causal : bool
        Causal mask: half the work, plus the diagonal blocks.
    peak_flops : float
        Dense peak of the format, FLOP/s.
    profile : ComputeProfile

    Examples
    --------
    Causal, 4096 keys (``n = 32``): forward ``(32 + 1 + 2) / 32`` = 1.094 and backward
    ``(32 + 1 + 4) / 32`` = 1.156 times the ideal time at ``attention_efficiency``;
    with ``attention_tile_cost`` 2.5 ``(32 + 1 + 5) / 32`` = 1.188 and
    ``(32 + 1 + 10) / 32`` = 1.344.
    """
    if flops <= 0:
        return 0.0, 0.0
    ideal = flops * (0.5 if causal else 1.0) / (peak_flops * profile.attention_efficiency)
    n = max(keys / ATTENTION_BLOCK, 1.0) if keys > 0 else 0.0

    def stretch(c: float) -> float:
        if not n:
            return 1.0
        return (n + 1.0 + 2.0 * c) / n if causal else (n + c) / n

    c_fwd, c_bwd = (c * profile.attention_tile_cost for c in ATTENTION_TILE_OVERHEAD)
    return ideal * stretch(c_fwd), 2.5 * ideal * stretch(c_bwd)
