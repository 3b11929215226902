"""Constructors of common layers: parameters, FLOPs and bytes per sample.

The counting conventions are those of :mod:`codesign.workloads.model` (2 FLOPs per
MAC, backward = 2 x forward for weight layers, element-wise work not counted).
``tokens`` is the number of positions one sample feeds through the layer (1 for an
image classifier's fully connected layer, ``seq_len`` for a transformer).
Normalisation layers are folded into the weight layer that follows them (pre-norm)
or precedes them (conv + batch norm), so a transformer block is two layers
(attention, MLP) and a bottleneck convolution with its batch norm is one.
"""

from __future__ import annotations

from codesign.errors import invalid
from codesign.workloads.model import Layer

__all__ = [
    "dense", "conv2d", "pool2d", "embedding_bag", "token_embedding", "attention",
    "latent_attention", "mlp",
    "moe", "lstm", "concat", "norm_params", "norm_ops", "residual_ops",
    "activation_ops", "cross_entropy_ops",
]


# ------------------------------------------------------------- memory-bound operators
# HBM traffic of the element-wise kernels a layer runs (``Layer.memory_ops``): each
# kernel reads its inputs once and writes its outputs once (no reuse across kernels),
# forward and backward, counted from the operators of Megatron-LM's GPT layer
# (megatron/model/transformer.py and fused_bias_gelu.py, 2021; the same operators in
# megatron/core at commit f2e5db4, 2024).  ``d`` is the activation element size.

def norm_ops(norm: str, elements: float, d: int) -> tuple:
    """A LayerNorm / RMSNorm over ``elements`` per sample (split by sequence parallelism).

    Forward reads the input and writes the output (``2 d``); backward reads the output
    gradient and the saved input and writes the input gradient (``3 d``; the per-row
    statistics are negligible).
    """
    if norm == "none":
        return ()
    return (("norm", 2.0 * d * elements, 3.0 * d * elements, "sp"),)


def residual_ops(elements: float, d: int, *, dropout: bool) -> tuple:
    """Megatron's fused bias-dropout-add after a sub-layer, and the residual gradient sum.

    Forward reads the sub-layer output and the residual, writes the sum (``3 d``) and,
    with dropout, a 1-byte mask; backward applies the mask to the gradient (read the
    gradient and the mask, write: ``2 d + 1``) and adds the two gradients of the residual
    stream (``3 d``).  Split by sequence parallelism like the norms.
    """
    mask = 1.0 if dropout else 0.0
    return (("residual", (3.0 * d + mask) * elements,
             ((2.0 * d + 1.0) if dropout else 0.0) * elements + 3.0 * d * elements, "sp"),)


def activation_ops(elements: float, d: int, *, gated: bool, activation: bool = True) -> tuple:
    """The MLP's activation on ``elements`` (tokens x ffn) per sample, split by TP.

    GeLU with its bias (Megatron's fused ``bias_gelu``): read and write forward
    (``2 d``); backward reads the gradient and the saved input, writes the input
    gradient (``3 d``).  SwiGLU reads two inputs and writes one forward (``3 d``);
    backward reads the gradient and both inputs and writes two gradients (``5 d``).
    """
    if gated:
        return (("activation", 3.0 * d * elements, 5.0 * d * elements, "tp"),)
    if not activation:
        return ()
    return (("activation", 2.0 * d * elements, 3.0 * d * elements, "tp"),)


def cross_entropy_ops(vocab: int, tokens: int, d: int) -> tuple:
    """The loss over the vocabulary: Megatron-LM's ``vocab_parallel_cross_entropy``.

    Per logit (``tokens x vocab`` per sample, split by the vocabulary-parallel output
    layer): the logits are converted to fp32 (read ``d``, write 4), the maximum is read
    (4), subtracted in place (8), exponentiated in place (8), summed (4) and divided in
    place into the softmax kept for backward (8): ``d + 36`` bytes forward.  Backward
    scales the softmax by the loss gradient in place (8) and converts it back (read 4,
    write ``d``): ``d + 12`` bytes (megatron/mpu/cross_entropy.py, 2021;
    megatron/core/tensor_parallel/cross_entropy.py at commit f2e5db4, 2024).
    """
    n = float(vocab) * tokens
    return (("cross_entropy", (d + 36.0) * n, (d + 12.0) * n, "tp"),)


def norm_params(kind: str, width: int) -> int:
    """Parameters of a normalisation over ``width`` features.

    ``layernorm`` has a gain and a bias (2 per feature), ``rmsnorm`` only a gain
    (Zhang & Sennrich 2019), ``batchnorm`` a gain and a bias (running statistics are
    buffers, not parameters), ``none`` nothing.
    """
    return {"layernorm": 2, "batchnorm": 2, "rmsnorm": 1, "none": 0}[kind] * width


def dense(name: str, in_features: int, out_features: int, *, dtype_bytes: int,
          tokens: int = 1, bias: bool = True, kind: str = "dense") -> Layer:
    """A fully connected layer ``y = x W (+ b)`` applied at ``tokens`` positions.

    Forward FLOPs ``2 in out tokens``; output ``out tokens`` elements; saved for
    backward: the input.
    """
    d = dtype_bytes
    return Layer(
        name=name, kind=kind,
        params=in_features * out_features + (out_features if bias else 0),
        fwd_flops=2.0 * in_features * out_features * tokens,
        bwd_flops=4.0 * in_features * out_features * tokens,
        activation_bytes=float(out_features) * tokens * d, dtype_bytes=d,
        io_bytes=float(in_features + out_features) * tokens * d,
        saved_bytes=float(in_features) * tokens * d,
        signature=f"Dense_{in_features}_{out_features}",
        gemms=((float(tokens), float(out_features), float(in_features), 1.0, "n"),),
    )


def conv2d(name: str, in_channels: int, out_channels: int, kernel: int, *, height: int,
           width: int, stride: int = 1, padding: int = 0, bias: bool = False,
           batchnorm: bool = True, dtype_bytes: int) -> tuple[Layer, int, int]:
    """A 2-D convolution (square kernel), optionally followed by batch norm and ReLU.

    Returns ``(layer, out_height, out_width)``.  MACs ``k^2 c_in c_out h_out w_out``;
    saved: the input, plus the convolution output when batch norm follows.

    Kernel model: the convolution is an implicit GEMM (cuDNN / CUTLASS "implicit GEMM"
    convolution; NVIDIA *Convolutional Layers User's Guide*, Deep Learning Performance
    documentation, section "Convolution algorithms"): ``M = h_out w_out`` output
    pixels per sample, ``N = c_out``, ``K = c_in k^2``.  Its memory-bound operators:
    batch norm (two-pass: statistics then normalisation, Ioffe & Szegedy 2015) reads the
    output twice and writes it once forward (``3 d``), and backward reads the gradient
    and the saved output twice for the two reductions and the input gradient, writing
    once (``5 d``); the ReLU reads and writes (``2 d``) forward, and reads the gradient
    and the output and writes the input gradient backward (``3 d``).  The bias add
    without batch norm is fused into the GEMM epilogue.
    """
    h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    macs = float(kernel * kernel * in_channels * out_channels) * h_out * w_out
    d = dtype_bytes
    x_in = float(in_channels) * height * width
    y_out = float(out_channels) * h_out * w_out
    params = kernel * kernel * in_channels * out_channels + (out_channels if bias else 0) \
        + (norm_params("batchnorm", out_channels) if batchnorm else 0)
    layer = Layer(
        name=name, kind="convolution", params=params,
        fwd_flops=2.0 * macs, bwd_flops=4.0 * macs,
        activation_bytes=y_out * d, dtype_bytes=d,
        io_bytes=(x_in + y_out) * d,
        saved_bytes=(x_in + (2.0 if batchnorm else 1.0) * y_out) * d,
        signature=f"Conv2D_{in_channels}_{out_channels}_{kernel}x{kernel}_s{stride}",
        gemms=((float(h_out * w_out), float(out_channels), float(in_channels * kernel * kernel),
                1.0, ""),),
        memory_ops=((("batchnorm", 3.0 * d * y_out, 5.0 * d * y_out, ""),
                     ("relu", 2.0 * d * y_out, 3.0 * d * y_out, "")) if batchnorm
                    else (("relu", 2.0 * d * y_out, 3.0 * d * y_out, ""),)),
    )
    return layer, h_out, w_out


def pool2d(name: str, channels: int, *, height: int, width: int, kernel: int, stride: int,
           padding: int = 0, dtype_bytes: int) -> tuple[Layer, int, int]:
    """Max or average pooling: no parameters, no counted FLOPs.  Returns the output size."""
    h_out = (height + 2 * padding - kernel) // stride + 1
    w_out = (width + 2 * padding - kernel) // stride + 1
    d = dtype_bytes
    x_in = float(channels) * height * width
    y_out = float(channels) * h_out * w_out
    layer = Layer(name=name, kind="other", params=0, fwd_flops=0.0, bwd_flops=0.0,
                  activation_bytes=y_out * d, dtype_bytes=d, io_bytes=(x_in + y_out) * d,
                  saved_bytes=x_in * d)
    return layer, h_out, w_out


def embedding_bag(name: str, rows: int, dim: int, *, lookups: int, dtype_bytes: int) -> Layer:
    """A sum-pooled embedding table (DLRM / NCF sparse feature).

    ``lookups`` rows are gathered and summed per sample; the output is one row.
    FLOPs are the pooling adds (``lookups x dim``), backward the same (scatter-add).
    Bytes moved per sample: the gathered rows plus the output.  Saved for backward:
    the indices (8-byte integers).
    """
    d = dtype_bytes
    return Layer(
        name=name, kind="embedding", params=rows * dim,
        fwd_flops=float(lookups) * dim, bwd_flops=float(lookups) * dim,
        activation_bytes=float(dim) * d, dtype_bytes=d,
        io_bytes=float(lookups + 1) * dim * d, saved_bytes=8.0 * lookups,
        table_rows=rows, table_dim=dim, lookups=lookups,
        signature=f"Embed_{rows}x{dim}",
    )


def token_embedding(name: str, vocab: int, dim: int, *, tokens: int, dtype_bytes: int,
                    extra_params: int = 0, tp_allreduce: bool = True) -> Layer:
    """A token embedding: one row per token, no pooling, no FLOPs.

    ``extra_params`` adds learned position / segment embeddings and a folded norm.
    With Megatron's vocabulary-parallel embedding the TP group all-reduces the output
    in the forward pass (``tokens x dim x dtype_bytes`` per sample).
    """
    d = dtype_bytes
    out = float(tokens) * dim * d
    return Layer(
        name=name, kind="embedding", params=vocab * dim + extra_params,
        fwd_flops=0.0, bwd_flops=0.0, activation_bytes=out, dtype_bytes=d,
        io_bytes=2.0 * out, saved_bytes=8.0 * tokens,
        table_rows=vocab, table_dim=dim, lookups=tokens,
        tp_shardable=tp_allreduce, tp_allreduce_bytes=out if tp_allreduce else 0.0,
        signature=f"Embed_{vocab}x{dim}",
    )


def _block(name: str, kind: str, params: int, fwd: float, out: float, d: int, io: float,
           saved: float, tp: bool, **extra) -> Layer:
    """A transformer sub-layer: backward 2 x forward, Megatron TP all-reduces of its output
    (``g`` forward after the row-parallel matmul, ``f`` backward before the
    column-parallel one), each ``out`` bytes per sample."""
    return Layer(name=name, kind=kind, params=params, fwd_flops=fwd, bwd_flops=2.0 * fwd,
                 activation_bytes=out, dtype_bytes=d, io_bytes=io, saved_bytes=saved,
                 tp_shardable=tp, tp_allreduce_bytes=out if tp else 0.0,
                 tp_bwd_allreduce_bytes=out if tp else 0.0, **extra)


def _attention_span(seq: int, window: int, doc: int, *, maskable: bool,
                    rule: str) -> tuple[float, float]:
    """``(keys per query, s_eff)`` of causal attention over ``seq`` tokens with a
    ``window`` (0 or at least the span: full attention) inside documents of ``doc``
    tokens (0 or at least ``seq``: one document, the whole sequence).

    The fused kernel loops over ``min(window, doc)`` keys, and the scores count
    ``s x s_eff``: full attention over ``L = min(doc, seq)`` tokens counts ``s_eff = L``
    (the no-causal-halving convention of :func:`attention`, ``s x s`` for one document),
    a window ``w < L`` twice the band's ``P = L w - w (w - 1) / 2`` pairs per ``L``
    tokens, ``s_eff = 2 P / L``.

    ``doc`` is the token-weighted mean document length ``sum L_i^2 / sum L_i`` of the
    documents packed into a sequence: causal attention within documents has
    ``sum L_i (L_i + 1) / 2`` pairs, which with ``sum L_i = s`` is ``s (doc + 1) / 2``
    exactly, whatever the spread of the lengths.

    A window or documents shorter than ``seq`` need an attention that can be ``maskable``
    (else ``InvalidSpecError`` naming the field, with ``rule``).
    """
    for key, value in (("window", window), ("doc_len", doc)):
        if value and value < seq and not maskable:
            raise invalid(f"attention {key}", value, rule)
    span = float(doc) if doc and doc < seq else float(seq)
    if not window or window >= span:
        return span, span
    w = float(window)
    return w, 2.0 * (span * w - w * (w - 1.0) / 2.0) / span


def attention(name: str, *, hidden: int, heads: int, kv_heads: int, seq: int,
              dtype_bytes: int, bias: bool = True, norm: str = "layernorm",
              dropout: bool = True, flash: bool = False, tp: bool = True,
              causal: bool = False, head_dim: int | None = None, window: int = 0,
              doc_len: int = 0) -> Layer:
    """Multi-head (or grouped-query) self-attention with its pre-norm, as one layer.

    Weights: ``Q`` ``hidden x heads*head_dim`` and the output projection back;
    ``K`` and ``V`` ``hidden x kv_heads*head_dim`` (GQA, Ainslie et al. 2023;
    ``kv_heads = heads`` is plain MHA).  ``head_dim`` defaults to ``hidden / heads``;
    models such as Qwen3 set it wider (its 30B-A3B: 32 heads of 128 on a 2048-wide
    residual stream, the released ``config.json``), so the query width ``q = heads x
    head_dim`` differs from ``hidden``.  Forward FLOPs per sample: the four projections
    plus ``2 s^2 q`` for the scores and ``2 s^2 q`` for the context.  Saved bytes follow
    Korthikanti et al. 2022 Sec. 4.1 (norm input, QKV input, Q, K, V, softmax output, dropout mask
    and output, projection input, output dropout mask); with ``flash`` the
    ``s x s`` tensors are recomputed (Dao et al. 2022) and not saved or moved.
    GEMMs (kernel model): the fused QKV projection (column-parallel), the output
    projection (row-parallel) and, without ``flash``, per head the scores
    ``(s, s, head_dim)`` and the context ``(s, head_dim, s)``; ``causal`` marks a
    decoder's mask.

    ``window`` (tokens, 0 = full attention): causal sliding-window attention (Mistral
    7B, Jiang et al. 2023, Sec. 2; Gemma 2/3's local layers; GPT-OSS's banded layers):
    query ``i`` attends the ``min(i, window)`` latest keys, ``P = s w - w (w - 1) / 2``
    pairs instead of ``s (s + 1) / 2``.  The scores and context count ``2 P`` where full
    attention counts ``s^2`` (the same no-causal-halving convention), and the fused
    kernel loops over ``window`` keys per query (``attn_keys``).  Needs ``flash`` (an
    unfused kernel computes the full ``s x s`` scores and masks them) and ``causal``.

    ``doc_len`` (tokens, 0 = one document per sequence): packed sequences whose
    attention is masked to each document -- the block-diagonal causal mask of Llama 3's
    pre-training (Grattafiori et al. 2024, Sec. 3.2: "an attention mask that prevents
    self-attention between different documents within the same sequence") and of
    packed fine-tuning data (NeMo's packed sequences, Transformer Engine's ``thd``
    layout with per-document offsets).  The scores count ``s x doc_len`` and the fused
    kernel loops over ``doc_len`` keys per query, paying its tile cost per document
    (:func:`_attention_span`; with a window, the band inside each document).  The GEMMs
    and every per-token cost still see all ``s`` tokens.  Needs ``flash`` and
    ``causal``, as a window does.
    """
    d = dtype_bytes
    head_dim = hidden // heads if head_dim is None else head_dim
    q_dim = heads * head_dim
    kv_dim = kv_heads * head_dim
    proj_macs = float(hidden * q_dim * 2 + hidden * kv_dim * 2)  # Q, O, K, V per token
    params = hidden * q_dim * 2 + hidden * kv_dim * 2 + norm_params(norm, hidden)
    if bias:
        params += q_dim + hidden + kv_dim * 2
    s, h, a = float(seq), float(hidden), float(heads)
    keys, s_eff = _attention_span(
        seq, window, doc_len, maskable=flash and causal,
        rule="0 unless the attention is causal and fused (flash_attention)")
    score_macs = 2.0 * s * s_eff * q_dim  # Q K^T and softmax(.) V (no causal halving)
    fwd = 2.0 * (proj_macs * s + score_macs)
    sh = s * h
    sq = s * q_dim
    skv = s * kv_dim
    # Saved for backward (Korthikanti et al. 2022, Sec. 4.1), in elements then bytes:
    # the norm input, the QKV input, Q, K, V and the output projection's input.
    n_norm = 1 if norm != "none" else 0
    saved = (sh * (1 + n_norm) + sq + 2 * skv + sq) * d
    saved += (sh * 1.0 if dropout else 0.0)  # output dropout mask, 1 byte per element
    # Replicated on every TP rank unless sequence parallel (Korthikanti et al. Sec. 4.2):
    # the norm input, the QKV input and the output dropout mask.
    sp_part = sh * (1 + n_norm) * d + (sh if dropout else 0.0)
    io = (sh * (2 if norm != "none" else 0) + sh + (sq + 2 * skv) + (sq + 2 * skv) + sq
          + sq + sh) * d
    core_saved = 0.0
    if not flash:
        ss = a * s * s
        core_saved = ss * d + (ss * (1.0 + d) if dropout else 0.0)
        saved += core_saved
        io += 4.0 * ss * d  # scores written, read by softmax, written, read by context
    gemms = [(s, q_dim + 2.0 * kv_dim, h, 1.0, "n"), (s, h, float(q_dim), 1.0, "k")]
    # Memory-bound operators: the norm, then (unfused attention) Megatron's fused
    # scale-mask-softmax on the a s^2 scores (read + write forward; read the gradient
    # and the saved probabilities, write backward) and the attention dropout (a 1-byte
    # mask), then the bias-dropout-add.  Flash attention keeps all s x s work on chip.
    ops = list(norm_ops(norm, sh, d))
    if not flash:
        gemms += [(s, s, float(head_dim), a, "count"), (s, float(head_dim), s, a, "count")]
        ss = a * s * s
        ops.append(("softmax", 2.0 * d * ss, 3.0 * d * ss, "tp"))
        if dropout:
            ops.append(("attention_dropout", (2.0 * d + 1) * ss, (2.0 * d + 1) * ss, "tp"))
    ops += residual_ops(sh, d, dropout=dropout)
    return _block(name, "attention", params, fwd, sh * d, d, io, saved, tp,
                  attn_core_fwd_flops=2.0 * score_macs, attn_core_saved_bytes=core_saved,
                  sp_saved_bytes=sp_part, norm_saved_bytes=n_norm * sh * d,
                  checkpoint_bytes=sh * d, kv_bytes=2.0 * skv * d,
                  gemm_in_saved_bytes=(sh + sq) * d, gemm_in_sp_bytes=sh * d,
                  gemms=tuple(gemms), attention_kernel="flash" if flash else "unfused",
                  causal=causal, memory_ops=tuple(ops), attn_keys=keys)


def latent_attention(name: str, *, hidden: int, heads: int, seq: int, dtype_bytes: int,
                     kv_rank: int, q_rank: int, head_dim: int, rope_dim: int,
                     v_head_dim: int, norm: str = "rmsnorm", causal: bool = True,
                     window: int = 0, doc_len: int = 0) -> Layer:
    """Multi-head latent attention (MLA; DeepSeek-V2, DeepSeek-AI 2024, Sec. 2.1; the
    DeepSeek-V3 technical report, Sec. 2.1.1), with its pre-norm, as one layer.

    Keys and values come from a compressed latent: ``kv_down`` (``hidden x (kv_rank +
    rope_dim)``: the latent and one decoupled rotary key shared by the heads), a norm on
    the latent, ``kv_up`` (``kv_rank x heads (head_dim + v_head_dim)``: per-head keys
    without rotary and values).  Queries likewise through ``q_rank`` (``q_down``, norm,
    ``q_up`` to ``heads (head_dim + rope_dim)``), or with ``q_rank = 0`` directly
    (``hidden x heads (head_dim + rope_dim)``); the output projection maps ``heads x
    v_head_dim`` back.  Training materialises the per-head keys and values, so the
    attention core is a fused kernel over ``d_qk = head_dim + rope_dim`` for the scores
    and ``v_head_dim`` for the context: ``2 s^2 heads (d_qk + v_head_dim)`` forward FLOPs
    (full ``s x s``, no causal halving, as :func:`attention` counts).  Tensor
    parallelism (Megatron-core's MLA): the down projections are replicated on every TP
    rank (``""`` GEMMs, timed whole on each), the up projections column-parallel, the
    output row-parallel; the layer's parameters and FLOP count are split by TP as a
    whole (the replicated down projections, 8 % of DeepSeek-V3's attention weights,
    are not counted again per rank).
    Saved for backward: the norm input, the down projections' input, the two latents
    (and their norms' inputs), Q, K, V and the output projection's input.  Q, K and V
    are what the up projections make from the latents (``up_proj_saved_bytes``, with
    those products as ``up_proj_gemms``): DeepSeek-V3 drops and recomputes them in the
    backward pass (technical report Sec. 3.2.3, "Recomputation of RMSNorm and MLA
    Up-Projection"), Megatron-core's ``--recompute-modules mla_up_proj``.  Always a
    fused (flash) kernel; ``window`` and ``doc_len`` as in :func:`attention`.
    """
    d = dtype_bytes
    s, h, a = float(seq), float(hidden), float(heads)
    d_qk = head_dim + rope_dim
    q_w, k_w, v_w = a * d_qk, a * d_qk, a * v_head_dim
    q_proj = (h * q_rank + q_rank * q_w) if q_rank else h * q_w
    kv_down = h * (kv_rank + rope_dim)
    kv_up = kv_rank * a * (head_dim + v_head_dim)
    out_proj = v_w * h
    macs = q_proj + kv_down + kv_up + out_proj
    params = int(macs) + norm_params(norm, hidden) + norm_params(norm, kv_rank) \
        + (norm_params(norm, q_rank) if q_rank else 0)
    keys, s_eff = _attention_span(seq, window, doc_len, maskable=causal,
                                  rule="0 unless the attention is causal")
    core_macs = s * s_eff * (q_w + v_w)      # Q K^T over d_qk, softmax(.) V over v_head_dim
    fwd = 2.0 * (macs * s + core_macs)
    sh = s * h
    n_norm = 1 if norm != "none" else 0
    latents = s * ((q_rank if q_rank else 0) + kv_rank + rope_dim)
    saved = (sh * (1 + n_norm) + latents * (1 + n_norm) + s * (q_w + k_w + v_w) + s * v_w) * d
    sp_part = sh * (1 + n_norm) * d
    io = (sh * (2 * n_norm + 1) + 2 * latents + 2 * s * (q_w + k_w + v_w) + 2 * s * v_w
          + sh) * d
    kv_up_gemm = (s, a * (head_dim + v_head_dim), float(kv_rank), 1.0, "n")
    q_up_gemm = (s, q_w, float(q_rank), 1.0, "n") if q_rank else (s, q_w, h, 1.0, "n")
    gemms = [(s, kv_rank + float(rope_dim), h, 1.0, ""), kv_up_gemm, (s, h, v_w, 1.0, "k")]
    gemms += [(s, float(q_rank), h, 1.0, ""), q_up_gemm] if q_rank else [q_up_gemm]
    ops = list(norm_ops(norm, sh, d)) + list(norm_ops(norm, latents, d))
    ops += residual_ops(sh, d, dropout=False)
    return _block(name, "attention", params, fwd, sh * d, d, io, saved, True,
                  attn_core_fwd_flops=2.0 * core_macs, attn_core_saved_bytes=0.0,
                  sp_saved_bytes=sp_part, norm_saved_bytes=n_norm * sh * d,
                  checkpoint_bytes=sh * d,
                  kv_bytes=s * (k_w + v_w) * d, gemms=tuple(gemms),
                  up_proj_saved_bytes=s * (q_w + k_w + v_w) * d,
                  up_proj_gemms=(kv_up_gemm, q_up_gemm),
                  # inputs of the down projections (the norm output), of the up
                  # projections (the normed latents) and of the output projection
                  gemm_in_saved_bytes=(sh + s * (q_rank + kv_rank) + s * v_w) * d,
                  gemm_in_sp_bytes=sh * d,
                  attention_kernel="flash", causal=causal, memory_ops=tuple(ops),
                  attn_keys=keys)


def mlp(name: str, *, hidden: int, ffn: int, seq: int, dtype_bytes: int, bias: bool = True,
        norm: str = "layernorm", gated: bool = False, dropout: bool = True,
        activation: bool = True, tp: bool = True) -> Layer:
    """A transformer feed-forward block with its pre-norm, as one layer.

    Two matrices ``hidden x ffn`` and ``ffn x hidden``; ``gated`` (SwiGLU, Shazeer
    2020) adds the gate matrix.  Saved bytes: norm input, first input, activation
    input(s), second input, dropout mask -- ``21 s h`` bytes for GPT (ffn = 4h, 2-byte).
    """
    d = dtype_bytes
    mats = 3 if gated else 2
    params = mats * hidden * ffn + norm_params(norm, hidden)
    if bias:
        params += (mats - 1) * ffn + hidden
    s = float(seq)
    sh, sf = s * hidden, s * ffn
    fwd = 2.0 * mats * hidden * ffn * s
    n_norm = 1 if norm != "none" else 0
    saved = (sh * n_norm + sh + (2 * sf if gated else (sf if activation else 0)) + sf) * d
    saved += sh if dropout else 0.0
    # Replicated without sequence parallelism: norm input, first input, dropout mask.
    sp_part = (sh * n_norm + sh) * d + (sh if dropout else 0.0)
    io = (2 * sh * n_norm + sh + (mats - 1) * sf + (3 * sf if gated else 2 * sf)
          + sf + sh) * d
    gemms = ((s, float((mats - 1) * ffn), float(hidden), 1.0, "n"),
             (s, float(hidden), float(ffn), 1.0, "k"))
    ops = norm_ops(norm, sh, d) + activation_ops(sf, d, gated=gated, activation=activation) \
        + residual_ops(sh, d, dropout=dropout)
    return _block(name, "dense", params, fwd, sh * d, d, io, saved, tp,
                  sp_saved_bytes=sp_part, norm_saved_bytes=n_norm * sh * d, gemms=gemms,
                  gemm_in_saved_bytes=(sh + sf) * d, gemm_in_sp_bytes=sh * d,
                  memory_ops=ops)


def moe(name: str, *, hidden: int, ffn: int, experts: int, top_k: int, seq: int,
        dtype_bytes: int, norm: str = "rmsnorm", gated: bool = True, bias: bool = False,
        tp: bool = True, capacity_factor: float = 1.0, shared_experts: int = 0,
        expert_groups: int = 0, group_top_k: int = 0) -> Layer:
    """A mixture-of-experts feed-forward block (router + ``experts`` MLPs), one layer.

    Each token goes to ``top_k`` experts (Shazeer et al. 2017; Mixtral, Jiang et al.
    2024).  FLOPs count the router and ``top_k`` expert MLPs per token; parameters
    count every expert.  The dispatch all-to-all sends each token's hidden vector to
    its ``top_k`` experts.

    ``capacity_factor`` (>= 1) is the load of the busiest expert relative to a perfect
    balance: the capacity factor of token-dropping routers, which pad every expert's
    buffer to ``capacity_factor x tokens x top_k / experts`` (GShard, Lepikhin et al.
    2021 Sec. 2.2; Switch Transformer, Fedus et al. 2022 Sec. 2.1), or the measured
    token imbalance of dropless ones.  It scales the routed experts' FLOPs, activations
    and all-to-all bytes (the busiest rank sets the pace).  ``shared_experts`` are
    always-active experts of the same width that every token passes (DeepSeekMoE, Dai et
    al. 2024 Sec. 3.2): dense parameters, replicated across expert parallelism.
    ``expert_groups`` / ``group_top_k`` limit each token's experts to that many groups
    (node-limited routing; only the hierarchical dispatch's bytes depend on it,
    :mod:`codesign.workloads.dispatch`).
    """
    d = dtype_bytes
    if not capacity_factor >= 1.0:
        from codesign.errors import invalid
        raise invalid("moe capacity_factor", capacity_factor, "a number >= 1")
    dense_block = mlp(name, hidden=hidden, ffn=ffn, seq=seq, dtype_bytes=d, bias=bias,
                      norm="none", gated=gated, dropout=False, tp=tp)
    expert_params = experts * dense_block.params
    router = hidden * experts
    s = float(seq)
    routed = top_k * capacity_factor
    fwd = 2.0 * router * s + (routed + shared_experts) * dense_block.fwd_flops
    sh = s * hidden
    saved = (2 * sh + s * experts) * d + (routed + shared_experts) * dense_block.saved_bytes
    io = (2 * sh + sh + s * experts) * d + (routed + shared_experts) * dense_block.io_bytes
    shared = shared_experts * dense_block.params
    # Grouped expert GEMMs (kernel model): each expert receives ``s top_k cf / experts``
    # tokens of a sample (a perfect balance, or the busiest expert's load with the
    # capacity factor), so an expert's GEMMs are skinny in M when experts are many and
    # micro-batches small; ``shard="en"/"ek"`` lets expert parallelism gather ``ep``
    # ranks' tokens onto ``experts / ep`` local experts (Megatron-LM's grouped GEMM /
    # TE GroupedLinear; GShard Sec. 2.2 for the capacity).  The router is a ``(s,
    # experts, hidden)`` product; shared experts see every token.
    mats = 3 if gated else 2
    per_expert = s * routed / experts
    gemms = [(s, float(experts), float(hidden), 1.0, ""),
             (per_expert, float((mats - 1) * ffn), float(hidden), float(experts), "en"),
             (per_expert, float(hidden), float(ffn), float(experts), "ek")]
    if shared_experts:
        gemms += [(s, float((mats - 1) * ffn), float(hidden), float(shared_experts), "n"),
                  (s, float(hidden), float(ffn), float(shared_experts), "k")]
    # Memory-bound operators: the norm; the token permutation into expert order and back
    # (read and write every routed copy of a token; the combine also writes the
    # weighted sum), the activation over every routed and shared token, the residual.
    routed_sh = routed * sh
    ops = norm_ops(norm, sh, d) + (
        ("permute", 2.0 * d * routed_sh, 2.0 * d * routed_sh, ""),
        ("unpermute", d * (routed_sh + sh), d * (routed_sh + sh), "")) \
        + activation_ops(s * (routed + shared_experts) * ffn, d, gated=gated) \
        + residual_ops(sh, d, dropout=False)
    return _block(name, "expert",
                  expert_params + shared + router + norm_params(norm, hidden), fwd,
                  sh * d, d, io, saved, tp, experts=experts, top_k=top_k,
                  expert_params=expert_params, expert_groups=expert_groups,
                  group_top_k=group_top_k,
                  ep_alltoall_bytes=sh * d * top_k * capacity_factor,
                  sp_saved_bytes=2 * sh * d,
                  norm_saved_bytes=(sh * d if norm != "none" else 0.0),
                  act_saved_bytes=routed * s * ffn * d, gemms=tuple(gemms), memory_ops=ops,
                  # every routed and shared copy's expert inputs (the router is a
                  # 16-bit product outside Transformer Engine)
                  gemm_in_saved_bytes=(routed + shared_experts)
                  * dense_block.gemm_in_saved_bytes)


def lstm(name: str, in_features: int, hidden: int, *, seq: int, dtype_bytes: int,
         bidirectional: bool = False) -> Layer:
    """An LSTM layer over ``seq`` steps (one bias vector per gate, as in TensorFlow).

    Per direction: ``4 h (in + h) + 4 h`` parameters and ``2 x 4 h (in + h)`` FLOPs
    per step.  Bidirectional layers concatenate both directions (output ``2 h``).
    Saved per step: the input, the previous hidden state and the four gates plus the
    cell state.
    """
    d = dtype_bytes
    dirs = 2 if bidirectional else 1
    per_dir = 4 * hidden * (in_features + hidden) + 4 * hidden
    s = float(seq)
    fwd = dirs * 2.0 * 4 * hidden * (in_features + hidden) * s
    out = dirs * hidden * s * d
    saved = dirs * s * (in_features + hidden + 5 * hidden) * d
    return Layer(name=name, kind="dense", params=dirs * per_dir, fwd_flops=fwd,
                 bwd_flops=2.0 * fwd, activation_bytes=out, dtype_bytes=d,
                 io_bytes=dirs * s * (in_features + 2 * hidden + 8 * hidden) * d,
                 saved_bytes=saved, signature=f"LSTM_{in_features}_{hidden}")


def concat(name: str, in_elements: float, out_elements: float, *, dtype_bytes: int,
           kind: str = "other") -> Layer:
    """A parameter-free joining layer (concatenation, element-wise product...)."""
    d = dtype_bytes
    return Layer(name=name, kind=kind, params=0, fwd_flops=0.0, bwd_flops=0.0,
                 activation_bytes=float(out_elements) * d, dtype_bytes=d,
                 io_bytes=float(in_elements + out_elements) * d, saved_bytes=0.0)
