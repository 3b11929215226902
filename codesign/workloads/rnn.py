"""GNMT: Google's neural machine translation model (Wu et al. 2016, arXiv:1609.08144).

Section 3 of the paper: an encoder of ``layers`` LSTM layers whose bottom layer is
bi-directional (its two directions are concatenated, so the second layer reads
``2 hidden`` features), a decoder of ``layers`` LSTM layers, and an additive attention
computed from the bottom decoder layer's output whose context vector is fed to every
decoder layer (so each decoder layer reads ``2 hidden`` features: its input plus the
context).  A softmax layer over the wordpiece vocabulary closes the decoder.  Source
and target embeddings are separate tables of ``vocab x hidden``.  All LSTMs have
``hidden`` = 1024 units; the shared wordpiece vocabulary has 32K entries.

The attention layer is the normalised Bahdanau form (query and memory projections,
a scoring vector and bias); its FLOPs count the two projections and ``2 s_t s_s h``
each for scoring and for the context sum.  Residual connections add no parameters.
"""

from __future__ import annotations

from codesign.workloads.layers import dense, lstm, token_embedding
from codesign.workloads.model import Layer
from codesign.workloads.params import Param

__all__ = ["build_gnmt", "GNMT_PARAMS"]

GNMT_PARAMS = {
    "layers": Param("int", 8, minimum=2, maximum=256, doc="LSTM layers in each of encoder "
                                                          "and decoder"),
    "hidden": Param("int", 1024, minimum=1, maximum=10**5),
    "vocab": Param("int", 32000, minimum=1, maximum=10**7),
    "seq_len": Param("int", 50, minimum=1, maximum=10**5,
                     doc="tokens per sentence (source and target)"),
    "dtype_bytes": Param("int", 2, minimum=1, maximum=8),
}


def build_gnmt(*, layers: int, hidden: int, vocab: int, seq_len: int,
               dtype_bytes: int) -> list[Layer]:
    """Layers of GNMT (see the module docstring)."""
    d, h, s = dtype_bytes, hidden, seq_len
    out: list[Layer] = [token_embedding("src_embed", vocab, h, tokens=s, dtype_bytes=d,
                                        tp_allreduce=False)]
    out.append(lstm("enc0", h, h, seq=s, dtype_bytes=d, bidirectional=True))
    out.append(lstm("enc1", 2 * h, h, seq=s, dtype_bytes=d))
    out += [lstm(f"enc{i}", h, h, seq=s, dtype_bytes=d) for i in range(2, layers)]
    out.append(token_embedding("tgt_embed", vocab, h, tokens=s, dtype_bytes=d,
                               tp_allreduce=False))
    out.append(lstm("dec0", 2 * h, h, seq=s, dtype_bytes=d))
    sf = float(s)
    att_fwd = 2.0 * (2 * sf * h * h) + 2.0 * (2 * sf * sf * h)
    out.append(Layer(
        name="attention", kind="attention", params=2 * h * h + 2 * h + 1,
        fwd_flops=att_fwd, bwd_flops=2 * att_fwd, activation_bytes=sf * h * d,
        dtype_bytes=d, io_bytes=(4 * sf * h + 2 * sf * sf) * d,
        saved_bytes=(3 * sf * h + sf * sf) * d))
    out += [lstm(f"dec{i}", 2 * h, h, seq=s, dtype_bytes=d) for i in range(1, layers)]
    out.append(dense("softmax", h, vocab, tokens=s, dtype_bytes=d))
    return out
