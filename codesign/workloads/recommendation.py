"""Recommendation and tabular models: DLRM, NCF and CANDLE Uno, as TopoOpt simulated them.

TopoOpt (NSDI'23, List 1) gives these models by the command-line arguments of
FlexFlow's examples, which its simulator (FlexNet) ran; the layer structure below is
that of those examples, with the List 1 values filled in (the authors' run scripts,
github.com/hipersys-team/TopoOpt ``simulation/scripts``, pass exactly these values).

DLRM (Naumov et al. 2019; FlexFlow ``examples/cpp/DLRM``)
    ``bottom_mlp`` uses DLRM's ``--arch-mlp-bot`` convention: the first entry is the
    width of the dense-feature input, each further entry one fully connected layer.
    ``tables`` sum-pooled embedding bags of ``rows x dim`` gather ``lookups`` rows per
    sample each (``--embedding-bag-size``).  The interaction concatenates the bottom
    output with every pooled embedding (``cat``, FlexFlow's only one) or takes their
    pairwise dot products (``dot``, DLRM's default, which needs the bottom output
    width to equal ``dim``).  ``top_mlp`` lists the output width of each top layer.
    List 1's "#Dense layer / Dense layer size" is the bottom list (entries, including
    the input width) and "#Dense feat. layer / Feat. layer size" the top list, whose
    last layer outputs the click probability (width 1).

NCF (He et al., WWW'17, NeuMF; TopoOpt's FlexFlow ``ncf`` example)
    GMF: the concatenated user and item MF embeddings are multiplied element-wise and
    projected to 1; MLP: the concatenated user and item MLP embeddings go through
    ``mlp`` (output widths); the prediction layer joins both.  Every table is an
    embedding bag of ``lookups`` rows.

CANDLE Uno (ECP-CANDLE Pilot1 Uno; FlexFlow ``examples/cpp/candle_uno``)
    Seven inputs: two drug doses (1 feature each, passed through), the cell RNA-seq
    profile (942), and for each of the two drugs its descriptors (5270) and
    fingerprints (2048).  Each of the five non-dose inputs has its own feature model
    (``feature_layers`` widths); their outputs and the doses are concatenated and go
    through ``dense_layers`` and a final 1-wide regression layer.  FlexFlow's layers
    have no bias.
"""

from __future__ import annotations

from dataclasses import replace

from codesign.errors import invalid
from codesign.workloads.layers import concat, dense, embedding_bag
from codesign.workloads.model import Layer
from codesign.workloads.params import Param

__all__ = ["build_dlrm", "build_ncf", "build_candle", "DLRM_PARAMS", "NCF_PARAMS",
           "CANDLE_PARAMS"]

_WIDTH = 10**6       # widest accepted fully connected layer
_TABLES = 10**4      # most embedding tables

DLRM_PARAMS = {
    "bottom_mlp": Param("int_list", (13, 512, 256, 64), minimum=1, maximum=_WIDTH,
                        max_len=256, doc="dense input width, then bottom layer widths"),
    "top_mlp": Param("int_list", (512, 256, 1), minimum=1, maximum=_WIDTH, max_len=256,
                     doc="top layer output widths"),
    "tables": Param("int", 26, minimum=1, maximum=_TABLES, doc="embedding tables"),
    "rows": Param("int", 10**6, minimum=1, doc="rows per table"),
    "dim": Param("int", 64, minimum=1, maximum=_WIDTH, doc="embedding width"),
    "lookups": Param("int", 1, minimum=1, maximum=10**6, doc="rows pooled per sample"),
    "interaction": Param("choice", "cat", choices=("cat", "dot")),
    "bias": Param("bool", False, doc="fully connected layers have a bias"),
    "dtype_bytes": Param("int", 4, minimum=1, maximum=8),
}

NCF_PARAMS = {
    "user_tables_mf": Param("int", 1, minimum=1, maximum=_TABLES),
    "item_tables_mf": Param("int", 1, minimum=1, maximum=_TABLES),
    "user_tables_mlp": Param("int", 1, minimum=1, maximum=_TABLES),
    "item_tables_mlp": Param("int", 1, minimum=1, maximum=_TABLES),
    "users_per_table": Param("int", 138493, minimum=1),
    "items_per_table": Param("int", 26744, minimum=1),
    "mf_dim": Param("int", 64, minimum=1, maximum=_WIDTH),
    "mlp_dim": Param("int", 128, minimum=1, maximum=_WIDTH),
    "mlp": Param("int_list", (256, 128, 64), minimum=1, maximum=_WIDTH, max_len=256,
                 doc="MLP tower output widths"),
    "lookups": Param("int", 1, minimum=1, maximum=10**6),
    "dtype_bytes": Param("int", 4, minimum=1, maximum=8),
}

CANDLE_PARAMS = {
    "feature_layers": Param("int_list", (1000, 1000, 1000), minimum=1, maximum=_WIDTH,
                            max_len=256, doc="widths of each input's feature model"),
    "dense_layers": Param("int_list", (1000, 1000, 1000), minimum=1, maximum=_WIDTH,
                          max_len=256, doc="widths of the joint layers (before the output)"),
    "cell_features": Param("int", 942, minimum=1, maximum=_WIDTH),
    "drug_descriptors": Param("int", 5270, minimum=1, maximum=_WIDTH),
    "drug_fingerprints": Param("int", 2048, minimum=1, maximum=_WIDTH),
    "drugs": Param("int", 2, minimum=1, maximum=16),
    "dtype_bytes": Param("int", 4, minimum=1, maximum=8),
}


def _mlp(prefix: str, in_width: int, widths, *, bias: bool, d: int) -> tuple[list[Layer], int]:
    layers = []
    for i, width in enumerate(widths):
        layers.append(dense(f"{prefix}{i}", in_width, width, bias=bias, dtype_bytes=d))
        in_width = width
    return layers, in_width


def build_dlrm(*, bottom_mlp, top_mlp, tables: int, rows: int, dim: int, lookups: int,
               interaction: str, bias: bool, dtype_bytes: int) -> list[Layer]:
    """Layers of a DLRM (see the module docstring)."""
    d = dtype_bytes
    layers, bottom_out = _mlp("bottom", bottom_mlp[0], bottom_mlp[1:], bias=bias, d=d)
    layers += [embedding_bag(f"table{t}", rows, dim, lookups=lookups, dtype_bytes=d)
               for t in range(tables)]
    if interaction == "cat":
        width = bottom_out + tables * dim
        layers.append(concat("interaction", width, width, dtype_bytes=d))
    else:
        if bottom_out != dim:
            raise invalid("dlrm bottom_mlp", list(bottom_mlp),
                          f"a last width equal to dim ({dim}) for the dot interaction")
        n = tables + 1
        pairs = n * (n - 1) // 2
        width = bottom_out + pairs
        inter = concat("interaction", n * dim, width, dtype_bytes=d)
        # Z Z^T over the n feature vectors: n^2 dim MACs.
        layers.append(replace(inter, fwd_flops=2.0 * n * n * dim, bwd_flops=4.0 * n * n * dim,
                              saved_bytes=float(n * dim * d)))
    top, _ = _mlp("top", width, top_mlp, bias=bias, d=d)
    return layers + top


def build_ncf(*, user_tables_mf: int, item_tables_mf: int, user_tables_mlp: int,
              item_tables_mlp: int, users_per_table: int, items_per_table: int, mf_dim: int,
              mlp_dim: int, mlp, lookups: int, dtype_bytes: int) -> list[Layer]:
    """Layers of NeuMF (see the module docstring)."""
    d = dtype_bytes
    if user_tables_mf != item_tables_mf:
        raise invalid("ncf item_tables_mf", item_tables_mf,
                      f"the same as user_tables_mf ({user_tables_mf}): GMF multiplies the "
                      "user and item vectors element-wise")
    layers: list[Layer] = []
    for prefix, count, rows, dim in (("user_mf", user_tables_mf, users_per_table, mf_dim),
                                     ("item_mf", item_tables_mf, items_per_table, mf_dim),
                                     ("user_mlp", user_tables_mlp, users_per_table, mlp_dim),
                                     ("item_mlp", item_tables_mlp, items_per_table, mlp_dim)):
        layers += [embedding_bag(f"{prefix}{t}", rows, dim, lookups=lookups, dtype_bytes=d)
                   for t in range(count)]
    gmf_width = user_tables_mf * mf_dim
    gmf = concat("gmf", 2 * gmf_width, gmf_width, dtype_bytes=d)
    layers.append(replace(gmf, saved_bytes=2.0 * gmf_width * d))
    layers.append(dense("gmf_out", gmf_width, 1, bias=False, dtype_bytes=d))
    mlp_in = (user_tables_mlp + item_tables_mlp) * mlp_dim
    layers.append(concat("mlp_concat", mlp_in, mlp_in, dtype_bytes=d))
    tower, out = _mlp("mlp", mlp_in, mlp, bias=True, d=d)
    layers += tower
    layers.append(dense("predict", out + 1, 1, bias=True, dtype_bytes=d))
    return layers


def build_candle(*, feature_layers, dense_layers, cell_features: int, drug_descriptors: int,
                 drug_fingerprints: int, drugs: int, dtype_bytes: int) -> list[Layer]:
    """Layers of CANDLE Uno (see the module docstring)."""
    d = dtype_bytes
    inputs = [("cell.rnaseq", cell_features)]
    for k in range(1, drugs + 1):
        inputs += [(f"drug{k}.descriptors", drug_descriptors),
                   (f"drug{k}.fingerprints", drug_fingerprints)]
    layers: list[Layer] = []
    joined = drugs  # one dose feature per drug passes straight through
    for name, width in inputs:
        model, out = _mlp(f"{name}.fc", width, feature_layers, bias=False, d=d)
        layers += model
        joined += out
    layers.append(concat("concat", joined, joined, dtype_bytes=d))
    tower, out = _mlp("dense", joined, dense_layers, bias=False, d=d)
    layers += tower
    layers.append(dense("output", out, 1, bias=False, dtype_bytes=d))
    return layers
