"""Per-GPU memory: ZeRO stages, 1F1B in-flight activations, tables, GPT-3 175B by hand."""

from __future__ import annotations

import pytest

from codesign.errors import InfeasibleError, InvalidSpecError
from codesign.workloads import get_hardware, get_workload, workload_from_dict
from codesign.workloads.memory import check_memory, memory_per_gpu
from codesign.workloads.placement import Placement

GIB = 2.0**30


def tiny(batch: int = 64, layers: int = 4, params: int = 1_000_000, saved: float = 1000.0,
         opt: float = 12.0, shardable: bool = False):
    return workload_from_dict({
        "name": "tiny", "batch_size": batch, "dtype_bytes": 2,
        "optimizer_bytes_per_param": opt,
        "layers": [{"name": f"fc{i}", "kind": "dense", "params": params, "fwd_flops": 1e6,
                    "activation_bytes": 100, "saved_bytes": saved, "tp_shardable": shardable}
                   for i in range(layers)]})


@pytest.mark.parametrize("zero, w, g, o", [
    # psi = 4e6 parameters per GPU, dp = 4: ZeRO paper Fig. 1 (2 + 2 + 12 bytes/param).
    (0, 2 * 4e6, 2 * 4e6, 12 * 4e6),
    (1, 2 * 4e6, 2 * 4e6, 12 * 4e6 / 4),
    (2, 2 * 4e6, 2 * 4e6 / 4, 12 * 4e6 / 4),
    (3, 2 * 4e6 / 4, 2 * 4e6 / 4, 12 * 4e6 / 4),
])
def test_zero_stages_by_hand(zero: int, w: float, g: float, o: float) -> None:
    m = memory_per_gpu(tiny(), f"dp=4,zero={zero}", "A100-80")
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == pytest.approx((w, g, o))
    # 64 samples / 4 replicas = 16 per GPU, 4 layers x 1000 saved bytes each.
    assert m.activations_bytes == pytest.approx(16 * 4 * 1000.0)
    assert m.total_bytes == pytest.approx(w + g + o + 64_000.0)


def test_tensor_parallel_divides_shardable_layers() -> None:
    m = memory_per_gpu(tiny(shardable=True), "dp=2,tp=4", "A100-80")
    assert m.weights_bytes == pytest.approx(2 * 4e6 / 4)
    assert m.activations_bytes == pytest.approx(32 * 4 * 1000.0 / 4)


def test_1f1b_inflight_microbatches() -> None:
    # 8 equal layers over 4 stages: 2 layers each; m = 8 micro-batches of 64/8 = 8 samples.
    w = tiny(layers=8, params=10, saved=1e6)
    m = memory_per_gpu(w, "dp=1,pp=4,microbatches=8", "A100-80")
    assert m.stage == 0 and m.inflight_microbatches == 4  # stage 0 holds p micro-batches
    assert m.microbatch_size == 8
    assert m.activations_bytes == pytest.approx(4 * 8 * 2 * 1e6)
    # Fewer micro-batches than stages: at most m in flight.
    m2 = memory_per_gpu(w, "dp=1,pp=4,microbatches=2", "A100-80")
    assert m2.inflight_microbatches == 2
    assert m2.activations_bytes == pytest.approx(2 * 32 * 2 * 1e6)


def test_gpt3_175b_tp8_pp16_by_hand() -> None:
    """GPT-3 175B, dp=1,tp=8,pp=16, micro-batch of 1 sequence, A100 80 GB.

    Stage 0 = embedding + 6 of the 96 blocks (FLOP-balanced stages; the last holds 6 blocks
    and the LM head).  Per block 12 h^2 + 13 h parameters; the embedding V h + 2048 h;
    all divided by tp = 8.  dp = 1, so ZeRO-1 shards nothing: 2 + 2 + 12 bytes/param.
    Activations with sequence parallelism: Korthikanti et al. Eq. 4, s h (34 + 5 a s / h)
    / t bytes per block per sequence, for p = 16 micro-batches in flight on stage 0, plus
    the 8-byte token ids of the embedding.  Without it (Eq. 2) the 10 s h of norm inputs,
    first-linear inputs and dropout masks stay whole on every TP rank.
    """
    h, V, s, a = 12288, 50257, 2048, 96
    psi = (V * h + 2048 * h + 6 * (12 * h * h + 13 * h)) / 8
    act = 16 * (6 * s * h * (34 + 5 * a * s / h) + 8 * s) / 8
    w = get_workload("gpt3-175b")
    no_sp = memory_per_gpu(w, "dp=1,tp=8,pp=16,microbatches=1536,zero=1", "A100-80")
    assert no_sp.activations_bytes == pytest.approx(
        16 * (6 * s * h * (10 + 24 / 8 + 5 * a * s / (h * 8)) + 8 * s / 8))
    m = check_memory(w, "dp=1,tp=8,pp=16,microbatches=1536,zero=1,sp=true", "A100-80")
    assert m.stage == 0 and m.inflight_microbatches == 16 and m.microbatch_size == 1
    assert m.weights_bytes == pytest.approx(2 * psi)
    assert m.gradients_bytes == pytest.approx(2 * psi)
    assert m.optimizer_bytes == pytest.approx(12 * psi)
    assert m.activations_bytes == pytest.approx(act)
    assert m.total_bytes == pytest.approx(16 * psi + act)
    assert 53 * GIB < m.total_bytes < 54 * GIB  # 21.4 GiB state + 32.1 GiB activations
    assert m.fits


def test_gpt3_175b_default_microbatches_does_not_fit() -> None:
    # Default m = pp = 16 micro-batches of 1536 / 16 = 96 sequences: 96x the activations.
    w = get_workload("gpt3-175b")
    with pytest.raises(InfeasibleError) as err:
        check_memory(w, "dp=1,tp=8,pp=16,zero=1", "A100-80")
    assert err.value.reason == "memory"
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("strategy dp=1,tp=8,pp=16,zero=1 needs ")
    need = float(msg.split(" needs ")[1].split(" GiB")[0])
    assert need > 3000  # ~3100 GiB: 16 x 96 sequences x 2.0 GiB each


def test_gpt3_pure_data_parallel_does_not_fit() -> None:
    # 175e9 params x 16 bytes = 2.6 TB on every GPU; ZeRO-3 over 512 GPUs shards it.
    w = get_workload("gpt3-175b")
    full = memory_per_gpu(w, "dp=512", "A100-80")
    assert full.weights_bytes + full.gradients_bytes + full.optimizer_bytes == \
        pytest.approx(16 * w.parameters)
    z3 = memory_per_gpu(w, "dp=512,zero=3", "A100-80")
    assert z3.weights_bytes + z3.gradients_bytes + z3.optimizer_bytes == \
        pytest.approx(16 * w.parameters / 512)


def test_embedding_tables_on_their_gpu() -> None:
    w = get_workload("dlrm", tables=4, rows=1000, dim=16, batch_size=64)
    table = 1000 * 16
    pl = Placement(servers=8, gpus_per_server=1, table_servers=(0, 0, 3, 5))
    m = memory_per_gpu(w, "dp=8,embedding=model", "A100-80", pl)
    assert m.rank == 0  # two tables
    # fp32 weights + gradients, SGD (0 optimizer bytes), and the global batch's 8-byte
    # indices (64 samples x lookups) each.
    lookups = w.layer("table0").lookups
    assert w.optimizer_bytes_per_param == 0
    assert m.embedding_bytes == pytest.approx(2 * (table * 8 + 64 * lookups * 8))
    dense = w.parameters - 4 * table
    assert m.weights_bytes == pytest.approx(4 * dense)
    data = memory_per_gpu(w, "dp=8", "A100-80")
    assert data.embedding_bytes == 0 and data.weights_bytes == pytest.approx(4 * w.parameters)


def test_capacity_comes_from_hardware() -> None:
    m = memory_per_gpu(tiny(), "dp=1", "V100")
    assert m.capacity_bytes == get_hardware("V100").memory_bytes
    assert m.to_dict()["fits"] is True


@pytest.mark.parametrize("strategy, field", [
    ("dp=3", "strategy dp\\*microbatches"),
    ("dp=1,pp=16", "strategy pp"),
    ("dp=2,ep=2", "strategy ep"),
    ("dp=2,embedding=model", "strategy embedding"),
])
def test_strategy_must_apply(strategy: str, field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        memory_per_gpu(tiny(layers=8), strategy, "A100-80")


def test_tp_must_divide_heads() -> None:
    with pytest.raises(InvalidSpecError, match="attention heads"):
        memory_per_gpu(get_workload("gpt3-175b"), "dp=1,tp=7", "A100-80")


def test_infeasible_reason_is_typed_and_survives_pickling() -> None:
    import pickle

    from codesign.errors import INFEASIBLE_REASONS

    with pytest.raises(InfeasibleError) as err:
        check_memory(get_workload("gpt3-175b"), "dp=8", "H100")
    back = pickle.loads(pickle.dumps(err.value))
    assert back.reason == "memory" and str(back) == str(err.value)
    assert InfeasibleError("x").reason == "other" and "memory" in INFEASIBLE_REASONS
    with pytest.raises(ValueError, match="reason"):
        InfeasibleError("x", reason="oom")
