"""Transformer language models and encoders, dense or mixture-of-experts.

One builder covers every transformer of the zoo through its hyper-parameters:

* GPT-3 (Brown et al. 2020, Table 2.1) and Megatron-LM's GPT models (Narayanan et al.
  SC'21, Table 1): learned positions, LayerNorm, biases, tied input/output embedding,
  ``ffn = 4 hidden``.
* Llama 3 (Grattafiori et al. 2024, "The Llama 3 Herd of Models", Table 3): RMSNorm,
  no biases, SwiGLU MLP (``gated``), grouped-query attention (``kv_heads``), rotary
  positions (no position parameters), untied output layer.  ``head_dim`` decouples the
  attention width from ``hidden`` (Qwen3: 32 heads of 128 on a 2048-wide stream);
  ``window`` and ``global_every`` give sliding-window attention (Mistral 7B, Gemma,
  GPT-OSS; :func:`codesign.workloads.layers.attention`); ``doc_len`` masks the
  attention to the documents packed into a sequence (Llama 3, Sec. 3.2; packed
  fine-tuning data).
* DeepSeek-V3 (DeepSeek-AI 2024, technical report, Sec. 2.1 and Table 6 of its
  appendix; the released ``config.json``): multi-head latent attention
  (``kv_lora_rank``, ``q_lora_rank``, ``rope_head_dim``, ``v_head_dim``;
  :func:`codesign.workloads.layers.latent_attention`) and a MoE whose first
  ``dense_layers`` blocks keep a dense MLP of width ``dense_ffn``; node-limited routing
  (each token's 8 experts from at most 4 of 8 expert groups, Sec. 2.1.2) is
  ``expert_groups`` / ``group_top_k`` (:mod:`codesign.workloads.dispatch`).
* Mixtral 8x7B (Jiang et al. 2024, "Mixtral of Experts", Table 1): Llama-style blocks
  whose MLP is ``experts`` SwiGLU experts with ``top_k`` routing.
* BERT (Devlin et al. 2019): post-norm encoder with learned positions and token types,
  its embedding LayerNorm folded into the embedding layer; ``head="none"`` (no pooler
  or pre-training heads).
* FlexFlow's ``Transformer`` example, which TopoOpt simulated as "BERT" (List 1 values;
  the authors' scripts run ``transformersim --num-layers --hidden-size --num-heads
  --sequence-length``): each block is multi-head attention followed by two
  ``hidden x hidden`` dense layers (ReLU between), no norm, no residual, no dropout,
  no bias, and a 1-wide output per token (``head="regression"``).

Each block is two layers, ``block{i}.attn`` (kind ``attention``) and ``block{i}.mlp``
(kind ``dense``, or ``expert`` for MoE), so a pipeline stage boundary can fall between
them; both carry Megatron tensor-parallel all-reduce sizes.  The norm before a
sub-layer (pre-norm) or after it (post-norm) is folded into that sub-layer; the final
norm of pre-norm models is folded into the output layer.
"""

from __future__ import annotations

from dataclasses import replace

from codesign.errors import invalid
from codesign.workloads.layers import (attention, cross_entropy_ops, dense, latent_attention,
                                       mlp, moe, norm_ops, norm_params, token_embedding)
from codesign.workloads.model import Layer
from codesign.workloads.params import Param

__all__ = ["build_transformer", "TRANSFORMER_PARAMS"]

TRANSFORMER_PARAMS = {
    "layers": Param("int", 12, minimum=1, maximum=1000, doc="transformer blocks"),
    "hidden": Param("int", 768, minimum=1, maximum=10**6, doc="model width"),
    "heads": Param("int", 12, minimum=1, maximum=10**4, doc="attention heads"),
    "kv_heads": Param("int", None, minimum=1, maximum=10**4,
                      doc="key/value heads (grouped-query attention); default = heads"),
    "head_dim": Param("int", None, minimum=1, maximum=10**5,
                      doc="width of one attention head; default hidden / heads"),
    "ffn": Param("int", None, minimum=1, maximum=10**7, doc="MLP width; default 4 x hidden"),
    "vocab": Param("int", 50257, minimum=0, maximum=10**8,
                   doc="input embedding rows (0: the input is already vectors)"),
    "seq_len": Param("int", 1024, minimum=1, maximum=10**7, doc="tokens per sample"),
    "positions": Param("int", 0, minimum=0, maximum=10**7,
                       doc="learned position embedding rows (0: rotary or none)"),
    "token_types": Param("int", 0, minimum=0, maximum=1000, doc="segment embedding rows"),
    "tied": Param("bool", False, doc="output layer shares the input embedding"),
    "bias": Param("bool", True, doc="linear layers have biases"),
    "norm": Param("choice", "layernorm", choices=("layernorm", "rmsnorm", "none")),
    "prenorm": Param("bool", True, doc="norm before each sub-layer (False: after, BERT)"),
    "gated": Param("bool", False, doc="SwiGLU MLP (three matrices)"),
    "experts": Param("int", 0, minimum=0, maximum=4096, doc="MoE experts (0: dense MLP)"),
    "top_k": Param("int", 0, minimum=0, maximum=4096, doc="experts per token"),
    "capacity_factor": Param("float", 1.0, minimum=1.0, maximum=64.0,
                             doc="busiest expert's load over a perfect balance (MoE)"),
    "shared_experts": Param("int", 0, minimum=0, maximum=64,
                            doc="always-active experts per MoE layer (DeepSeekMoE)"),
    "expert_groups": Param("int", 0, minimum=0, maximum=4096,
                           doc="MoE group-limited routing: groups of experts (0: none)"),
    "group_top_k": Param("int", 0, minimum=0, maximum=4096,
                         doc="groups a token's experts come from (DeepSeek-V3: 4 of 8)"),
    "dropout": Param("bool", True, doc="dropout masks are kept for backward"),
    "flash_attention": Param("bool", False, doc="s x s attention tensors are not stored"),
    "window": Param("int", 0, minimum=0, maximum=10**7,
                    doc="sliding-window attention span in tokens (0: full attention)"),
    "global_every": Param("int", 0, minimum=0, maximum=1000,
                          doc="with window: every k-th block attends globally (0: none)"),
    "doc_len": Param("int", 0, minimum=0, maximum=10**7,
                     doc="packed sequences: attention masked to documents of this many "
                         "tokens, the token-weighted mean sum L^2 / sum L (0: one "
                         "document per sequence)"),
    "kv_lora_rank": Param("int", 0, minimum=0, maximum=10**5,
                          doc="multi-head latent attention's key/value latent (0: no MLA)"),
    "q_lora_rank": Param("int", 0, minimum=0, maximum=10**5,
                         doc="MLA query latent (0: full-rank queries)"),
    "rope_head_dim": Param("int", 0, minimum=0, maximum=10**4,
                           doc="MLA decoupled rotary key/query width per head"),
    "v_head_dim": Param("int", None, minimum=1, maximum=10**5,
                        doc="MLA value width per head; default head_dim"),
    "dense_layers": Param("int", 0, minimum=0, maximum=1000,
                          doc="MoE models: leading blocks with a dense MLP (DeepSeek)"),
    "dense_ffn": Param("int", None, minimum=1, maximum=10**7,
                       doc="width of those dense MLPs; default ffn"),
    "head": Param("choice", "lm", choices=("lm", "regression", "none"),
                  doc="lm: vocabulary logits; regression: 1 output per token; none"),
    "dtype_bytes": Param("int", 2, minimum=1, maximum=8),
}


def build_transformer(*, layers: int, hidden: int, heads: int, kv_heads: int | None,
                      head_dim: int | None, ffn: int | None, vocab: int, seq_len: int,
                      positions: int,
                      token_types: int, tied: bool, bias: bool, norm: str, prenorm: bool,
                      gated: bool, experts: int, top_k: int, capacity_factor: float,
                      shared_experts: int, dropout: bool,
                      flash_attention: bool, head: str, dtype_bytes: int, window: int = 0,
                      global_every: int = 0, doc_len: int = 0, kv_lora_rank: int = 0,
                      q_lora_rank: int = 0,
                      rope_head_dim: int = 0, v_head_dim: int | None = None,
                      dense_layers: int = 0, dense_ffn: int | None = None,
                      expert_groups: int = 0, group_top_k: int = 0) -> list[Layer]:
    """Layers of a transformer (see the module docstring)."""
    d = dtype_bytes
    kv_heads = heads if kv_heads is None else kv_heads
    ffn = 4 * hidden if ffn is None else ffn
    if head_dim is None and hidden % heads:
        raise invalid("transformer heads", heads,
                      f"a divisor of hidden ({hidden}), or set head_dim")
    if heads % kv_heads:
        raise invalid("transformer kv_heads", kv_heads, f"a divisor of heads ({heads})")
    if experts and not 1 <= top_k <= experts:
        raise invalid("transformer top_k", top_k, f"an integer in 1..experts ({experts})")
    if not experts and top_k:
        raise invalid("transformer top_k", top_k, "0 without experts")
    if not experts and (expert_groups or group_top_k):
        raise invalid("transformer expert_groups/group_top_k", (expert_groups, group_top_k),
                      "defaults (0, 0) without experts")
    if bool(expert_groups) != bool(group_top_k):
        raise invalid("transformer group_top_k", group_top_k,
                      "set together with expert_groups (both 0: no group limit)")
    if not experts and (shared_experts or capacity_factor != 1.0):
        raise invalid("transformer shared_experts/capacity_factor",
                      (shared_experts, capacity_factor), "defaults (0, 1.0) without experts")
    if tied and (head != "lm" or not vocab):
        raise invalid("transformer tied", tied, "false unless head is lm and vocab > 0")
    if head == "lm" and not vocab:
        raise invalid("transformer vocab", vocab, "an integer >= 1 for an lm head")
    for key, value, masked in (("window", window, "causal sliding-window"),
                               ("doc_len", doc_len, "document-masked causal")):
        if value and not (flash_attention and head == "lm"):
            raise invalid(f"transformer {key}", value, "0 unless flash_attention is true and "
                          f"the head is lm ({masked} attention in a fused kernel)")
    if global_every and not window:
        raise invalid("transformer global_every", global_every, "0 without a window")
    if not kv_lora_rank and (q_lora_rank or rope_head_dim or v_head_dim is not None):
        raise invalid("transformer q_lora_rank/rope_head_dim/v_head_dim",
                      (q_lora_rank, rope_head_dim, v_head_dim),
                      "defaults without kv_lora_rank (multi-head latent attention)")
    if kv_lora_rank and not (flash_attention and head == "lm"):
        raise invalid("transformer kv_lora_rank", kv_lora_rank, "0 unless flash_attention is "
                      "true and the head is lm (latent attention in a fused causal kernel)")
    if (dense_layers or dense_ffn is not None) and not experts:
        raise invalid("transformer dense_layers/dense_ffn", (dense_layers, dense_ffn),
                      "defaults without experts")
    if dense_layers > layers:
        raise invalid("transformer dense_layers", dense_layers, f"at most layers ({layers})")

    out: list[Layer] = []
    final_norm = norm_params(norm, hidden) if prenorm else 0
    if vocab:
        extra = (positions + token_types) * hidden
        if not prenorm:
            extra += norm_params(norm, hidden)  # BERT's embedding LayerNorm
        out.append(token_embedding("embed", vocab, hidden, tokens=seq_len, dtype_bytes=d,
                                   extra_params=extra))
    for i in range(layers):
        # Sliding-window blocks, every global_every-th one attending globally (GPT-OSS
        # alternates from a banded first block: window 128, global_every 2; Gemma 3
        # has five local blocks per global one: global_every 6).
        local = window and not (global_every and (i + 1) % global_every == 0)
        if kv_lora_rank:
            hd = hidden // heads if head_dim is None else head_dim
            out.append(latent_attention(
                f"block{i}.attn", hidden=hidden, heads=heads, seq=seq_len, dtype_bytes=d,
                kv_rank=kv_lora_rank, q_rank=q_lora_rank, head_dim=hd,
                rope_dim=rope_head_dim, v_head_dim=hd if v_head_dim is None else v_head_dim,
                norm=norm, window=window if local else 0, doc_len=doc_len))
        else:
            out.append(attention(f"block{i}.attn", hidden=hidden, heads=heads,
                                 kv_heads=kv_heads, head_dim=head_dim, seq=seq_len,
                                 dtype_bytes=d, bias=bias, norm=norm, dropout=dropout,
                                 flash=flash_attention,
                                 causal=head == "lm",  # decoders (lm head) mask causally
                                 window=window if local else 0, doc_len=doc_len))
        if i < dense_layers:
            block_mlp = mlp(f"block{i}.mlp", hidden=hidden,
                            ffn=ffn if dense_ffn is None else dense_ffn, seq=seq_len,
                            dtype_bytes=d, bias=bias, norm=norm, gated=gated, dropout=dropout)
        elif experts:
            block_mlp = moe(f"block{i}.mlp", hidden=hidden, ffn=ffn, experts=experts,
                            top_k=top_k, seq=seq_len, dtype_bytes=d, norm=norm, gated=gated,
                            bias=bias, capacity_factor=capacity_factor,
                            shared_experts=shared_experts, expert_groups=expert_groups,
                            group_top_k=group_top_k)
        else:
            block_mlp = mlp(f"block{i}.mlp", hidden=hidden, ffn=ffn, seq=seq_len,
                            dtype_bytes=d, bias=bias, norm=norm, gated=gated, dropout=dropout)
        # Full recomputation checkpoints the transformer layer's input only (kept by the
        # attention sub-layer; Korthikanti et al. Sec. 5): the MLP half keeps nothing.
        out.append(replace(block_mlp, checkpoint_bytes=0.0))
    if head == "lm":
        lm = dense("lm_head", hidden, vocab, tokens=seq_len, bias=False, dtype_bytes=d)
        # Megatron vocabulary-parallel output layer: identity forward, all-reduce of the
        # input gradient backward (the f operator).
        # Memory-bound work (kernel model): the final norm of pre-norm models and the
        # cross-entropy loss over the (vocabulary-parallel) logits.
        ops = (norm_ops(norm, float(seq_len) * hidden, d) if prenorm else ()) \
            + cross_entropy_ops(vocab, seq_len, d)
        # Megatron-LM keeps the output layer in 16 bit under FP8 (not a Transformer
        # Engine module: codesign.workloads.compute, "FP8").
        out.append(replace(lm, params=(0 if tied else lm.params) + final_norm,
                           tp_shardable=True, fp8_gemms=False,
                           tp_bwd_allreduce_bytes=float(seq_len) * hidden * d,
                           memory_ops=ops))
    elif head == "regression":
        reg = dense("head", hidden, 1, tokens=seq_len, bias=False, dtype_bytes=d)
        out.append(replace(reg, params=reg.params + final_norm))
    elif final_norm:
        s = float(seq_len) * hidden * d
        out.append(Layer(name="final_norm", kind="norm", params=final_norm, fwd_flops=0.0,
                         bwd_flops=0.0, activation_bytes=s, dtype_bytes=d, io_bytes=2 * s,
                         saved_bytes=s))
    return out
