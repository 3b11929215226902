"""Model zoo against published totals and closed forms written out independently here.

Published references: torchvision's parameter counts (ResNet, VGG), He et al. 2016
Table 1 (multiply-adds), Devlin et al. 2019 (BERT-large), Brown et al. 2020 (GPT-3),
the released Llama 3 / Mixtral checkpoints' parameter counts, Narayanan et al. 2021
Table 1 (1T), Korthikanti et al. 2022 Eq. 1 (activation memory), TopoOpt List 1 and
its Appendix D example, ASTRA-sim's DLRM workload (Themis).
"""

import pytest

from codesign.errors import InvalidSpecError
from codesign.workloads import get_workload, workload_configs, workload_names

DESIGN_NAMES = ["dlrm", "candle", "bert", "ncf", "resnet50", "vgg16", "resnet152", "gnmt",
                "transformer-1t", "gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b",
                "mixtral-8x7b", "nemotron4-340b", "deepseek-v3", "qwen3-235b-a22b",
                "gpt-oss-120b"]


def test_zoo_has_the_design_names():
    assert sorted(workload_names()) == sorted(DESIGN_NAMES)


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_every_config_builds_with_consistent_totals(name):
    for config in workload_configs(name):
        w = get_workload(name, config)
        assert w.parameters == sum(layer.params for layer in w.layers) > 0
        assert w.flops_per_sample == pytest.approx(
            sum(x.fwd_flops + x.bwd_flops for x in w.layers))
        assert w.batch_size >= 1 and w.config == config
        if w.batch_per_gpu and w.reference_gpus:
            assert w.batch_size == w.batch_per_gpu * w.reference_gpus


# ----------------------------------------------------------------------- vision
def test_resnet50_parameters_and_flops():
    w = get_workload("resnet50")
    assert w.parameters == 25_557_032                     # torchvision resnet50
    assert w.parameters == pytest.approx(25.6e6, rel=0.01)
    # 2 FLOPs per MAC: forward 4.09 G multiply-adds per 224x224 image (v1.5).
    assert w.fwd_flops_per_sample / 2 == pytest.approx(4.1e9, rel=0.01)
    assert w.flops_per_sample == pytest.approx(3 * w.fwd_flops_per_sample)


def test_resnet_v1_matches_he_et_al_table_1():
    # He et al. Table 1: 3.8e9 (ResNet-50) and 11.3e9 (ResNet-152) multiply-adds.
    assert get_workload("resnet50", variant="v1").fwd_flops_per_sample / 2 == \
        pytest.approx(3.8e9, rel=0.03)
    r152 = get_workload("resnet152")
    assert r152.hyperparameters["variant"] == "v1"
    assert r152.fwd_flops_per_sample / 2 == pytest.approx(11.3e9, rel=0.01)
    assert r152.parameters == 60_192_808                 # torchvision resnet152


def test_vgg16_parameters_and_flops():
    w = get_workload("vgg16")
    assert w.parameters == 138_357_544                   # torchvision vgg16
    assert w.fwd_flops_per_sample / 2 == pytest.approx(15.47e9, rel=0.01)
    # First convolution by hand: 3x3x3x64 MACs at 224x224.
    conv = w.layer("conv1_1")
    assert conv.fwd_flops == 2 * 3 * 3 * 3 * 64 * 224 * 224
    assert conv.activation_bytes == 64 * 224 * 224 * 4   # fp32 in TopoOpt's FlexFlow


# ------------------------------------------------------------------ transformers
def _gpt_params(L, h, V, s, ffn=None):
    ffn = ffn or 4 * h
    per_layer = 4 * h * h + 4 * h + 2 * h * ffn + ffn + h + 4 * h  # attn, mlp, 2 LayerNorms
    return L * per_layer + V * h + s * h + 2 * h                   # tied, positions, final LN


def test_bert_large_parameters():
    w = get_workload("bert", "large")
    h, L, V = 1024, 24, 30522
    closed = V * h + 512 * h + 2 * h + 2 * h + L * (12 * h * h + 13 * h)
    assert w.parameters == closed
    assert 334e6 <= w.parameters <= 336e6   # without pooler and pre-training heads
    assert get_workload("bert", "base").parameters == pytest.approx(108.9e6, rel=0.005)


def test_gpt3_parameters_and_training_flops():
    w = get_workload("gpt3-175b")
    L, h, V, s = 96, 12288, 50257, 2048
    assert w.parameters == _gpt_params(L, h, V, s)
    assert w.parameters == pytest.approx(175e9, rel=0.01)
    # Training FLOPs per token: 6 x matmul parameters (the tied output layer counts again,
    # the embedding lookups not) + 12 L s h for the full attention matrices.
    matmul = L * (12 * h * h) + V * h
    per_token = 6 * matmul + 12 * L * s * h
    assert w.flops_per_sample == pytest.approx(per_token * s, rel=1e-6)
    assert w.flops_per_sample == pytest.approx(6 * w.parameters * s, rel=0.10)


@pytest.mark.parametrize("name, exact, nominal, L, h, kv, ffn", [
    # Parameter counts of the released checkpoints (safetensors metadata).
    ("llama3-8b", 8_030_261_248, 8.03e9, 32, 4096, 8, 14336),
    ("llama3-70b", 70_553_706_496, 70.6e9, 80, 8192, 8, 28672),
    ("llama3-405b", 405_853_388_800, 405e9, 126, 16384, 8, 53248),
])
def test_llama3_parameters_and_flops(name, exact, nominal, L, h, kv, ffn):
    w = get_workload(name)
    assert w.parameters == exact
    assert w.parameters == pytest.approx(nominal, rel=0.02)
    V, s, head_dim = 128256, 8192, 128
    matmul = L * (2 * h * h + 2 * h * kv * head_dim + 3 * h * ffn) + V * h
    assert w.flops_per_sample == pytest.approx((6 * matmul + 12 * L * s * h) * s, rel=1e-9)
    # GQA: the K and V projections are kv_heads/heads of the Q projection.
    attn = w.layer("block0.attn")
    assert attn.params == 2 * h * h + 2 * h * kv * head_dim + h   # + RMSNorm gain


def test_llama3_405b_is_close_to_6nd():
    w = get_workload("llama3-405b")
    assert w.flops_per_sample == pytest.approx(6 * w.parameters * w.seq_len, rel=0.10)


def test_mixtral_total_and_active_parameters():
    w = get_workload("mixtral-8x7b")
    assert w.parameters == 46_702_792_704            # released checkpoint
    assert w.parameters == pytest.approx(46.7e9, rel=0.01)
    assert w.active_parameters == pytest.approx(12.9e9, rel=0.01)
    L, h, f, V, E, k = 32, 4096, 14336, 32000, 8, 2
    attn = 2 * h * h + 2 * h * 1024
    active = L * (attn + k * 3 * h * f + h * E + 2 * h) + 2 * V * h + h
    assert w.active_parameters == pytest.approx(active, rel=1e-12)
    s = w.seq_len
    matmul_active = L * (attn + k * 3 * h * f + h * E) + V * h
    assert w.flops_per_sample == pytest.approx((6 * matmul_active + 12 * L * s * h) * s,
                                               rel=1e-9)
    moe = w.layer("block0.mlp")
    assert (moe.kind, moe.experts, moe.top_k) == ("expert", 8, 2)
    assert moe.ep_alltoall_bytes == s * h * 2 * k


def test_head_dim_decouples_the_attention_width_qwen3_30b_a3b():
    # Qwen3-30B-A3B (released config.json): 48 layers, hidden 2048, 32 query heads and
    # 4 key/value heads of 128 (q = 4096 != hidden), 128 experts of 768, top-8, vocab
    # 151936, untied.  The checkpoint holds 30,532,122,624 parameters; the builder
    # omits the per-head QK RMSNorm gains (2 x 128 per layer = 12,288 in all).
    w = get_workload("mixtral-8x7b", layers=48, hidden=2048, heads=32, kv_heads=4,
                     head_dim=128, ffn=768, experts=128, top_k=8, vocab=151936,
                     seq_len=4096)
    L, h, q, kv = 48, 2048, 4096, 512
    attn = w.layer("block0.attn")
    assert attn.params == 2 * h * q + 2 * h * kv + h
    assert w.parameters == 30_532_122_624 - 2 * 128 * L
    s = 4096
    # Hand count: projections of width q, the scores and context over q per token.
    assert attn.fwd_flops == pytest.approx(2 * (2 * h * q + 2 * h * kv) * s
                                           + 2 * 2 * s * s * q, rel=1e-12)
    assert [g[:3] for g in attn.gemms] == [(s, q + 2 * kv, h), (s, h, q)]
    # Unset, head_dim is hidden / heads: the Llama 3 8B block is unchanged.
    assert get_workload("llama3-8b", head_dim=128).layer("block0.attn") \
        == get_workload("llama3-8b").layer("block0.attn")
    with pytest.raises(InvalidSpecError, match="head_dim"):
        get_workload("llama3-8b", heads=7)



GPT_OSS = dict(hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn=2880, top_k=4,
               vocab=201088, seq_len=4096, window=128, global_every=2, bias=True)


@pytest.mark.parametrize("layers, experts, total, active", [
    (36, 128, 116.83e9, 5.13e9), (24, 32, 20.91e9, 3.61e9)])
def test_gpt_oss_parameters_match_the_model_card(layers, experts, total, active):
    # OpenAI's gpt-oss-120b / gpt-oss-20b model card (2025), Table 1: total and active
    # parameters (active without the embedding); config.json: hidden 2880, 64 query
    # and 8 key/value heads of 64, experts of width 2880 with biases, top-4, vocabulary
    # 201088, untied, blocks alternating 128-token sliding windows and full attention.
    # Not modelled: the per-head attention-sink logits (64 per block).
    w = get_workload("mixtral-8x7b", layers=layers, experts=experts, **GPT_OSS)
    expert = sum(layer.expert_params for layer in w.layers)
    embedding = w.layer("embed").params
    assert w.parameters == pytest.approx(total, rel=5e-4)
    assert w.parameters - expert + expert * 4 / experts - embedding == pytest.approx(
        active, rel=5e-3)
    keys = [w.layer(f"block{i}.attn").attn_keys for i in range(4)]
    assert keys == [128, 4096, 128, 4096]


def test_sliding_window_attention_counts_the_band():
    # Causal window w over s tokens: query i attends min(i + 1, w) keys (brute force);
    # the scores and context count twice those pairs, as full attention counts s^2.
    s, w, h = 64, 10, 256
    kw = dict(layers=1, hidden=h, heads=4, ffn=4 * h, vocab=100, seq_len=s, positions=s,
              flash_attention=True)
    full = get_workload("gpt3-175b", **kw).layer("block0.attn")
    band = get_workload("gpt3-175b", window=w, **kw).layer("block0.attn")
    pairs = sum(1 for i in range(s) for j in range(s) if 0 <= i - j < w)
    core = band.attn_core_fwd_flops
    assert full.attn_core_fwd_flops == pytest.approx(4 * s * s * h)
    assert core == pytest.approx(4 * 2 * pairs * h)
    assert full.fwd_flops - band.fwd_flops == pytest.approx(
        full.attn_core_fwd_flops - core)
    assert (band.attn_keys, full.attn_keys) == (w, s)
    # A window at least the sequence is full attention.
    assert get_workload("gpt3-175b", window=s, **kw).layer("block0.attn") == full
    for bad in (dict(window=w, flash_attention=False), dict(global_every=2)):
        with pytest.raises(InvalidSpecError, match="window|global_every"):
            get_workload("gpt3-175b", **{**kw, **bad})


def _masked_pairs(lengths, window=0):
    """Brute force: (query, key) pairs of causal attention inside each document."""
    return sum(1 for n in lengths for i in range(n) for j in range(i + 1)
               if not window or i - j < window)


def test_packed_documents_count_the_block_diagonal_mask():
    # Documents of 8, 8 and 48 tokens packed into s = 64: their token-weighted mean
    # sum L^2 / sum L is 38, and causal attention inside the documents has
    # sum L (L + 1) / 2 pairs (brute force), whatever the spread of the lengths.  The
    # scores count them as full attention does: 2 P - s for a causal mask (s^2 for
    # one document), twice the pairs with a window.
    s, h = 64, 256
    kw = dict(layers=1, hidden=h, heads=4, ffn=4 * h, vocab=100, seq_len=s, positions=s,
              flash_attention=True)
    lengths = (8, 8, 48)
    doc = sum(n * n for n in lengths) // s
    assert doc * s == sum(n * n for n in lengths)
    full = get_workload("gpt3-175b", **kw).layer("block0.attn")
    packed = get_workload("gpt3-175b", doc_len=doc, **kw).layer("block0.attn")
    assert full.attn_core_fwd_flops == pytest.approx(4 * h * (2 * _masked_pairs([s]) - s))
    assert packed.attn_core_fwd_flops == pytest.approx(
        4 * h * (2 * _masked_pairs(lengths) - s))
    assert full.fwd_flops - packed.fwd_flops == pytest.approx(
        full.attn_core_fwd_flops - packed.attn_core_fwd_flops)
    assert (packed.attn_keys, full.attn_keys) == (doc, s)
    # A window inside documents of 16: the band of each document.
    band = get_workload("gpt3-175b", doc_len=16, window=5, **kw).layer("block0.attn")
    assert band.attn_core_fwd_flops == pytest.approx(
        4 * h * 2 * _masked_pairs([16] * 4, window=5))
    assert band.attn_keys == 5
    # One document of at least the sequence is no mask; the GEMMs never change.
    assert get_workload("gpt3-175b", doc_len=s, **kw).layer("block0.attn") == full
    assert packed.gemms == full.gemms and packed.params == full.params
    for bad in (dict(flash_attention=False), dict(head="none", tied=False)):
        with pytest.raises(InvalidSpecError, match="doc_len"):
            get_workload("gpt3-175b", **{**kw, "doc_len": 16, **bad})


def test_packed_documents_in_latent_attention():
    # MLA (DeepSeek-V3 shape, two blocks): the same block-diagonal count.
    kw = {**DEEPSEEK_V3, "layers": 2, "dense_layers": 1, "seq_len": 512}
    full = get_workload("mixtral-8x7b", **kw).layer("block0.attn")
    packed = get_workload("mixtral-8x7b", doc_len=64, **kw).layer("block0.attn")
    assert packed.attn_core_fwd_flops == pytest.approx(full.attn_core_fwd_flops * 64 / 512)
    assert packed.attn_keys == 64


DEEPSEEK_V3 = dict(layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=128, ffn=2048,
                   experts=256, top_k=8, shared_experts=1, vocab=129280, seq_len=4096,
                   kv_lora_rank=512, q_lora_rank=1536, rope_head_dim=64, v_head_dim=128,
                   dense_layers=3, dense_ffn=18432, bias=False)


def test_deepseek_v3_latent_attention_and_dense_first_blocks():
    # DeepSeek-V3 (technical report, Sec. 2.1.1 and Sec. 4.2; config.json): 61 blocks,
    # hidden 7168, 128 heads of 128 (+ 64 rotary) for keys and queries, values of 128,
    # KV latent 512, query latent 1536; 3 dense blocks (MLP 18432), then 58 MoE blocks
    # of 256 routed experts of 2048 and 1 shared, top-8; vocabulary 129280, untied.
    # "671B total parameters, of which 37B are activated for each token" (abstract;
    # the multi-token-prediction module is not counted).
    w = get_workload("mixtral-8x7b", **DEEPSEEK_V3)
    h, a, dn, dr, dv, rq, rkv, s = 7168, 128, 128, 64, 128, 1536, 512, 4096
    attn = w.layer("block0.attn")
    # Hand count: q_down, q_up, kv_down (latent + shared rotary key), kv_up, output, and
    # the RMSNorm gains of the input and the two latents.
    proj = h * rq + rq * a * (dn + dr) + h * (rkv + dr) + rkv * a * (dn + dv) + a * dv * h
    assert attn.params == proj + h + rq + rkv
    assert attn.fwd_flops == pytest.approx(2 * proj * s + 2 * s * s * a * (dn + dr + dv))
    # Megatron-core's MLA: the down projections replicated, up column-, output row-parallel.
    assert sorted(g[4] for g in attn.gemms) == ["", "", "k", "n", "n"]
    assert [w.layer(f"block{i}.mlp").kind for i in range(4)] == ["dense"] * 3 + ["expert"]
    assert w.layer("block0.mlp").params == 3 * h * 18432 + h
    expert = sum(layer.expert_params for layer in w.layers)
    assert w.parameters == pytest.approx(671e9, rel=1e-3)
    assert w.parameters - expert + expert * 8 / 256 == pytest.approx(37e9, rel=0.02)
    for bad in (dict(kv_lora_rank=0), dict(flash_attention=False)):
        with pytest.raises(InvalidSpecError, match="transformer"):
            get_workload("mixtral-8x7b", **{**DEEPSEEK_V3, **bad})

QWEN3_235B = dict(layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn=1536,
                  experts=128, top_k=8, vocab=151936, seq_len=4096)


@pytest.mark.parametrize("name, overrides, total, active, batch", [
    ("deepseek-v3", DEEPSEEK_V3, 671e9, 37e9, 15360),          # report abstract, Sec. 4.2
    ("qwen3-235b-a22b", QWEN3_235B, 235e9, 22e9, 8192),        # Qwen3 report Table 2
    ("gpt-oss-120b", dict(layers=36, experts=128, **GPT_OSS), 116.83e9, None, 1280),
])
def test_todays_moe_zoo_entries_are_the_published_models(name, overrides, total, active,
                                                         batch):
    # The zoo names build layer for layer what the validation's MoE rows build from
    # Mixtral with the papers' hyper-parameters (checked against the published totals
    # above and here), with the published or recipe batch.
    w = get_workload(name)
    ref = get_workload("mixtral-8x7b", **overrides)
    assert [(x.name, x.kind, x.params, x.fwd_flops, x.expert_params) for x in w.layers] == \
        [(x.name, x.kind, x.params, x.fwd_flops, x.expert_params) for x in ref.layers]
    assert w.parameters == pytest.approx(total, rel=2e-3) and w.batch_size == batch
    if active is not None:
        expert = sum(layer.expert_params for layer in w.layers)
        k, e = (8, 256) if name == "deepseek-v3" else (8, 128)
        assert w.parameters - expert + expert * k / e == pytest.approx(active, rel=0.03)
    assert w.optimizer_bytes_per_param == (8 if name == "deepseek-v3" else 12)


def test_nemotron4_340b_matches_the_report():
    # Nemotron-4 340B technical report Table 1: 96 blocks of hidden 18432, 96 heads with
    # 8 KV heads, squared-ReLU MLP of 4 x hidden (73728), vocabulary 256000, untied
    # embeddings, no biases: 340B parameters (the runs of validation/runs.csv).
    w = get_workload("nemotron4-340b")
    h, f, v, l, kv = 18432, 73728, 256000, 96, 8 * 192
    block = h * (h + 2 * kv) + h * h + 2 * h * f            # qkv, output, two MLP GEMMs
    assert w.parameters == pytest.approx(l * block + 2 * v * h, rel=1e-3)
    assert w.parameters == pytest.approx(340e9, rel=0.01)
    assert (w.seq_len, w.batch_size) == (4096, 2304)


def test_transformer_1t_matches_megatron_table():
    w = get_workload("transformer-1t")
    assert w.parameters == pytest.approx(1008e9, rel=0.001)   # Narayanan et al. Table 1
    assert w.parameters == _gpt_params(128, 25600, 51200, 2048)
    assert (w.batch_per_gpu, w.dtype_bytes) == (16, 2)          # Themis Sec. 5.2


def test_gpt3_activation_memory_matches_korthikanti():
    w = get_workload("gpt3-175b")
    s, h, a = 2048, 12288, 96
    per_layer = s * h * (34 + 5 * a * s / h)   # Eq. 1 per sample, 16-bit, with dropout
    block = w.layer("block0.attn").saved_bytes + w.layer("block0.mlp").saved_bytes
    assert block == pytest.approx(per_layer, rel=1e-12)


def test_tensor_parallel_sizes_of_a_block():
    w = get_workload("gpt3-175b")
    s, h = 2048, 12288
    for name in ("block5.attn", "block5.mlp"):
        layer = w.layer(name)
        assert layer.tp_shardable
        assert layer.tp_allreduce_bytes == layer.tp_bwd_allreduce_bytes == s * h * 2
    assert w.layer("block5.mlp").activation_bytes == s * h * 2


def test_adam_mixed_precision_state_is_16_bytes_per_parameter():
    w = get_workload("llama3-8b")
    mem = w.memory
    assert mem.state_bytes == 16 * w.parameters
    assert mem.total_bytes(4) == mem.state_bytes + 4 * mem.activation_bytes_per_sample


# -------------------------------------------------------------- TopoOpt List 1
def _emb(w):
    return sum(x.params for x in w.layers if x.kind == "embedding")


@pytest.mark.parametrize("config, tables, rows, dim, bpg", [
    ("simulation", 64, 10**7, 128, 128),   # 5.3
    ("alltoall", 128, 10**7, 128, 128),    # 5.4
    ("shared", 16, 10**7, 256, 256),       # 5.6
    ("testbed", 12, 10**5, 32768, 512),    # 6
])
def test_dlrm_list1_embeddings(config, tables, rows, dim, bpg):
    w = get_workload("dlrm", config)
    assert _emb(w) == tables * rows * dim
    assert w.batch_per_gpu == bpg
    table = w.layer("table0")
    assert (table.table_rows, table.table_dim, table.lookups) == (rows, dim, 100)
    assert table.dtype_bytes == 4  # fp32 rows of dim elements


def test_dlrm_simulation_dense_layers_by_hand():
    w = get_workload("dlrm", "5.3")   # section alias
    bottom = 7 * 2048 * 2048                       # 8-entry list, first = input width
    top = (2048 + 64 * 128) * 4096 + 14 * 4096 * 4096 + 4096 * 1
    assert w.parameters - _emb(w) == bottom + top
    assert w.layer("interaction").activation_bytes == (2048 + 64 * 128) * 4
    assert w.batch_size == 128 * 512


def test_dlrm_themis_allreduce_sizes_match_astra_sim():
    # ASTRA-sim DLRM_HybridParallel: FP16 all-reduce bytes per MLP layer.
    w = get_workload("dlrm", "themis")
    sizes = [w.layer(n).weight_bytes for n in
             ("bottom0", "bottom1", "bottom2", "bottom3", "top0", "top1", "top2")]
    assert sizes == [13312, 524288, 524288, 16384, 1064960, 524288, 524288]


def test_topoopt_appendix_d_mp_transfer_example():
    # "16 servers x 8192 samples/server x 512 activation per sample x 8 bytes / 16 servers
    # = 32 MB": one pooled embedding of width 512 in doubles, 8192 samples.
    w = get_workload("dlrm", tables=4, dim=512, rows=10**7, dtype_bytes=8)
    assert w.layer("table0").activation_bytes * 8192 == 32 * 2**20


def test_ncf_list1():
    w = get_workload("ncf")
    emb = 32 * 10**6 * 64 * 2 + 32 * 10**6 * 128 * 2
    assert _emb(w) == emb
    mlp = 64 * 128 * 4096 + 4096 + 6 * (4096 * 4096 + 4096)
    assert w.parameters == emb + 32 * 64 + mlp + (4096 + 1) + 1
    assert sum(1 for x in w.layers if x.kind == "embedding") == 128


def test_candle_list1():
    w = get_workload("candle")
    f = d = 16384
    inputs = 942 + 2 * 5270 + 2 * 2048
    feature = f * inputs + 5 * 15 * f * f
    joint = (5 * f + 2) * d + 7 * d * d + d
    assert w.parameters == feature + joint
    t = get_workload("candle", "testbed")
    assert t.parameters == 4096 * inputs + 5 * 7 * 4096 ** 2 + (5 * 4096 + 2) * 4096 \
        + 3 * 4096 ** 2 + 4096
    assert t.batch_size == 10 * 12


def test_bert_list1_configs_are_flexflow_transformers():
    w = get_workload("bert")
    h, L, s = 1024, 12, 64
    # attention 4 h^2 + two h x h dense layers per block, 512-row input embedding, h -> 1.
    assert w.parameters == L * 6 * h * h + 512 * h + h
    assert w.seq_len == s and w.batch_per_gpu == 16
    shared = get_workload("bert", "5.6")
    assert (shared.hyperparameters["layers"], shared.hyperparameters["hidden"],
            shared.hyperparameters["heads"], shared.seq_len) == (6, 768, 6, 256)


def test_gnmt_parameters_by_hand():
    w = get_workload("gnmt")
    h, V = 1024, 32000
    lstm = lambda i: 4 * h * (i + h) + 4 * h  # noqa: E731
    enc = 2 * lstm(h) + lstm(2 * h) + 6 * lstm(h)
    dec = 8 * lstm(2 * h)
    assert w.parameters == enc + dec + (2 * h * h + 2 * h + 1) + (h * V + V) + 2 * V * h


# ----------------------------------------------------------------------- registry
def test_overrides_and_errors():
    w = get_workload("llama3-8b", seq_len=4096, batch_size=64)
    assert (w.seq_len, w.batch_size) == (4096, 64)
    assert get_workload("vgg16", "testbed", batch_per_gpu=8).batch_size == 8 * 12
    with pytest.raises(InvalidSpecError, match="one of resnet50, vgg16"):
        get_workload("resnet51")
    with pytest.raises(InvalidSpecError, match="config 'nope'.*simulation"):
        get_workload("dlrm", "nope")
    with pytest.raises(InvalidSpecError, match="unknown parameter 'colour'.*allowed"):
        get_workload("gpt3-175b", colour="red")
    with pytest.raises(InvalidSpecError, match="heads"):
        get_workload("gpt3-175b", heads=7)
    with pytest.raises(InvalidSpecError, match="seq_len"):
        get_workload("gpt3-175b", seq_len=0)


def test_a_global_batch_beyond_the_bound_is_refused_naming_it():
    # Fuzzing: a 10^9-sample batch made the strategy search enumerate the replica batch's
    # divisors for hours; MAX_BATCH_SIZE (2^24) bounds every workload's batch.
    from codesign.workloads.model import MAX_BATCH_SIZE

    assert get_workload("dlrm", batch_size=MAX_BATCH_SIZE).batch_size == MAX_BATCH_SIZE
    with pytest.raises(InvalidSpecError, match=r"batch_size"):
        get_workload("dlrm", batch_size=10 ** 9)
    with pytest.raises(InvalidSpecError, match=r"batch_size 1000000000: expected an integer "
                                               r"in \[1, 16777216\]"):
        get_workload("dlrm").with_batch(10 ** 9)
    with pytest.raises(InvalidSpecError, match=r"batch_size"):
        get_workload("dlrm", batch_per_gpu=10 ** 6, reference_gpus=10 ** 6)
