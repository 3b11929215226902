"""Demand of one iteration: per-strategy byte counts by hand, server matrices, TopoOpt Fig. 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.errors import InfeasibleError, InvalidSpecError
from codesign.workloads import get_workload, workload_from_dict
from codesign.workloads.demand import (
    DEFAULT_BUCKET_BYTES, CollectiveOp, Compute, Transfer, demand_for, ring_bytes_per_member)
from codesign.workloads.placement import Placement

MIB = 2.0**20


def dense_model(layers: int = 3, params: int = 10_000_000, batch: int = 64,
                act: float = 4096.0):
    """fp16 dense layers of ``params`` each: 20 MB of gradients per layer."""
    return workload_from_dict({
        "name": "dense", "batch_size": batch, "dtype_bytes": 2,
        "layers": [{"name": f"fc{i}", "kind": "dense", "params": params, "fwd_flops": 1e6,
                    "activation_bytes": act, "saved_bytes": 10.0} for i in range(layers)]})


def tiny_transformer(**extra):
    params = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 128, "seq_len": 16, **extra}
    return workload_from_dict({"name": "tt", "builder": "transformer", "params": params,
                               "batch_size": 32})


def per_member_sent(d, purpose: str | None = None) -> np.ndarray:
    """Bytes each GPU sends per iteration (optionally of one purpose), from the ops."""
    out = np.zeros(d.placement.gpus)
    for op in d.ops:
        if isinstance(op, CollectiveOp) and (purpose is None or op.purpose == purpose):
            n = len(op.members)
            per = (ring_bytes_per_member(op.kind, op.bytes, n) if op.kind != "alltoall"
                   else op.bytes * (n - 1) / n)
            out[list(op.members)] += per * op.repeat
    return out


# ---------------------------------------------------------------------------- data parallel
def test_data_parallel_buckets_and_ring() -> None:
    w = dense_model()
    G = 3 * 10_000_000 * 2.0
    d = demand_for(w, "dp=4", "A100-80", Placement(servers=4, gpus_per_server=1))
    grads = [op for op in d.collectives() if op.purpose == "dp"]
    assert {op.kind for op in grads} == {"allreduce"}
    assert all(op.members == (0, 1, 2, 3) and op.overlappable_with_backward for op in grads)
    assert sum(op.bytes for op in grads) == pytest.approx(G)
    assert len(grads) == math.ceil(G / DEFAULT_BUCKET_BYTES)
    assert all(op.bytes == DEFAULT_BUCKET_BYTES for op in grads[:-1])
    # Buckets fill in backward order: the first completes inside fc2, the last at fc0.
    assert grads[0].ready_after == "fc1" and grads[-1].ready_after == "fc0"
    # Ring over the members in placement order: 2 (n-1)/n G to the next server.
    ring = 2 * 3 / 4 * G
    expected = np.zeros((4, 4))
    for i in range(4):
        expected[i, (i + 1) % 4] = ring
    assert np.allclose(d.server_matrix(), expected)
    groups, mp = d.split()
    assert groups == [((0, 1, 2, 3), pytest.approx(ring))]
    assert not mp.any()
    assert d.bubble_fraction == 0.0


def test_bucket_size_option() -> None:
    d = demand_for(dense_model(), "dp=2", "A100-80", bucket_bytes=7 * MIB)
    sizes = [op.bytes for op in d.collectives()]
    assert sizes[:-1] == [7 * MIB] * (len(sizes) - 1)
    assert sum(sizes) == pytest.approx(60e6)
    with pytest.raises(InvalidSpecError, match="bucket_bytes"):
        demand_for(dense_model(), "dp=2", "A100-80", bucket_bytes=0)


def test_hierarchical_placement_two_servers() -> None:
    # 8 replicas on 2 servers of 4 GPUs: the ring crosses servers twice (3 -> 4, 7 -> 0).
    w = dense_model(layers=1, params=1000, batch=64)
    d = demand_for(w, "dp=8", "A100-80", Placement(servers=2, gpus_per_server=4))
    per = 2 * 7 / 8 * 2000.0
    assert np.allclose(d.server_matrix(), [[0, per], [per, 0]])
    g = d.gpu_matrix()          # bytes inside each server: 3 ring hops of `per` each
    assert np.allclose([g[:4, :4].sum(), g[4:, 4:].sum()], [3 * per, 3 * per])


def test_zero_volumes() -> None:
    w = dense_model(layers=2, params=1_000_000)
    psi_bytes = 2 * 1_000_000 * 2.0
    n = 4
    pl = Placement(servers=4, gpus_per_server=1)
    dp = per_member_sent(demand_for(w, "dp=4", "A100-80", pl))
    assert np.allclose(dp, 2 * (n - 1) / n * psi_bytes)
    for zero in (1, 2):
        d = demand_for(w, f"dp=4,zero={zero}", "A100-80", pl)
        kinds = {(op.kind, op.purpose, op.phase) for op in d.collectives()}
        assert kinds == {("reducescatter", "dp", "gradient"), ("allgather", "zero", "optimizer")}
        # Reduce-scatter + all-gather = the all-reduce's 2 (n-1)/n.
        assert np.allclose(per_member_sent(d), dp)
    d3 = demand_for(w, "dp=4,zero=3", "A100-80", pl)
    # Parameters all-gathered twice (forward and backward) + gradients reduce-scattered.
    assert np.allclose(per_member_sent(d3), 3 * (n - 1) / n * psi_bytes)
    assert np.allclose(per_member_sent(d3, "zero"), 2 * (n - 1) / n * psi_bytes)
    gathers = [op for op in d3.collectives() if op.purpose == "zero"]
    assert [op.phase for op in gathers] == ["forward"] * 2 + ["backward"] * 2
    assert [op.layer for op in gathers] == ["fc0", "fc1", "fc1", "fc0"]


def test_zero2_reduce_scatters_every_microbatch() -> None:
    w = dense_model(layers=1, params=1000, batch=64)
    d = demand_for(w, "dp=2,microbatches=4,zero=2", "A100-80")
    rs = [op for op in d.collectives() if op.kind == "reducescatter"]
    assert [op.repeat for op in rs] == [4]
    d1 = demand_for(w, "dp=2,microbatches=4,zero=1", "A100-80")
    assert [op.repeat for op in d1.collectives() if op.kind == "reducescatter"] == [1]


# ---------------------------------------------------------------------------- tensor parallel
def test_tensor_parallel_megatron_allreduces() -> None:
    w = tiny_transformer()
    d = demand_for(w, "dp=1,tp=4,microbatches=2", "A100-80",
                   Placement(servers=1, gpus_per_server=4))
    b, s, h = 32 / 2, 16, 64
    tp = [op for op in d.collectives() if op.purpose == "tp"]
    for i in range(2):  # per transformer block: 2 forward + 2 backward all-reduces of s h b
        block = [op for op in tp if op.layer.startswith(f"block{i}.")]
        assert sorted(op.phase for op in block) == ["backward"] * 2 + ["forward"] * 2
        assert all(op.kind == "allreduce" and op.members == (0, 1, 2, 3) for op in block)
        assert all(op.bytes == b * s * h * 2 and op.repeat == 2 for op in block)
    # Vocabulary-parallel embedding (forward) and LM head (backward) add one each.
    assert len(tp) == 2 * 4 + 2
    assert not d.server_matrix().any()  # one server: all on its fabric
    compute = [op for op in d.compute() if op.name == "block0.mlp" and op.phase == "forward"]
    assert compute[0].flops == pytest.approx(b * w.layer("block0.mlp").fwd_flops / 4)


# ---------------------------------------------------------------------------- pipeline
def test_pipeline_transfers_and_bubble() -> None:
    w = dense_model(layers=4, params=1000, batch=64, act=4096.0)
    d = demand_for(w, "dp=2,tp=1,pp=4,microbatches=8", "A100-80",
                   Placement(servers=8, gpus_per_server=1))
    assert d.bubble_fraction == pytest.approx(3 / 11)
    assert d.stages == ((0, 1), (1, 2), (2, 3), (3, 4))  # fc0 | fc1 | fc2 | fc3
    tr = d.transfers()
    b = 64 / (2 * 8)
    assert len(tr) == 2 * 3 * 2  # directions x boundaries x replicas
    assert all(t.bytes == b * 4096.0 and t.repeat == 8 for t in tr)
    fwd = {(t.src, t.dst) for t in tr if t.phase == "forward"}
    bwd = {(t.src, t.dst) for t in tr if t.phase == "backward"}
    # rank = d + 2 p: stage p of replica d sends to stage p + 1.
    assert fwd == {(dd + 2 * p, dd + 2 * (p + 1)) for dd in range(2) for p in range(3)}
    assert bwd == {(y, x) for x, y in fwd}
    groups, mp = d.split()
    expected = np.zeros((8, 8))
    for x, y in fwd:
        expected[x, y] = expected[y, x] = 8 * b * 4096.0
    assert np.allclose(mp, expected)
    # Gradient sync per stage over the two replicas.
    assert sorted(g for g, _ in groups) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    # Order: forward of stages 0..3, then backward 3..0, then gradients.
    phases = [op.phase for op in d.ops]
    assert phases == sorted(phases, key=["forward", "backward", "gradient", "optimizer"].index)
    stages = [op.stage for op in d.ops if isinstance(op, Compute) and op.kind == "compute"]
    assert stages == [0, 1, 2, 3, 3, 2, 1, 0]
    # then one optimizer step per stage
    assert [op.stage for op in d.ops if isinstance(op, Compute) and op.kind == "optimizer"] \
        == [0, 1, 2, 3]


def test_pipeline_with_tensor_parallel_scatter_gather() -> None:
    w = dense_model(layers=2, params=1000, batch=8, act=1000.0)
    d = demand_for(w, "dp=1,tp=2,pp=2,microbatches=4", "A100-80",
                   Placement(servers=2, gpus_per_server=2))
    tr = [t for t in d.transfers() if t.phase == "forward"]
    assert {(t.src, t.dst) for t in tr} == {(0, 2), (1, 3)}
    assert all(t.bytes == 2 * 1000.0 / 2 for t in tr)  # b = 2 samples, split over tp
    ag = [op for op in d.collectives() if op.purpose == "pp"]
    assert {(op.members, op.phase) for op in ag} == {((2, 3), "forward"), ((0, 1), "backward")}


# ---------------------------------------------------------------------------- experts
def test_expert_parallel_alltoalls() -> None:
    w = tiny_transformer(experts=4, top_k=2, vocab=0, head="none", norm="rmsnorm",
                         gated=True, bias=False)
    d = demand_for(w, "dp=4,ep=2", "A100-80", Placement(servers=4, gpus_per_server=1))
    b, s, h = 32 / 4, 16, 64
    a2a = [op for op in d.collectives() if op.purpose == "ep"]
    assert len(a2a) == 2 * 4 * 2  # expert layers x (2 fwd + 2 bwd) x EP groups
    assert {op.members for op in a2a} == {(0, 1), (2, 3)}
    assert all(op.kind == "alltoall" and op.bytes == b * s * h * 2 * 2 for op in a2a)
    # Expert gradients over the replicas of the same experts, the rest over all of DP.
    xg = {op.members for op in d.collectives() if op.purpose == "dp-expert"}
    assert xg == {(0, 2), (1, 3)}
    layer = w.layer("block0.mlp")
    xbytes = sum(op.bytes for op in d.collectives()
                 if op.purpose == "dp-expert" and op.members == (0, 2))
    assert xbytes == pytest.approx(2 * layer.expert_params / 2 * 2)  # 2 layers, ep=2, fp16
    _, mp = d.split()
    # Each all-to-all sends half its buffer to the other member of the pair.
    assert mp[0, 1] == pytest.approx(4 * 2 * b * s * h * 2 * 2 / 2)
    assert mp[0, 2] == 0


# ---------------------------------------------------------------------------- DLRM, TopoOpt Fig. 1
def dlrm_fig1():
    """TopoOpt Sec. 2.1: four tables E0..E3 of 10^7 rows x 512 columns, 22 GB in all.

    The paper's sizes count one byte per parameter (4 x 512 x 10^7 = 20.5e9 table
    parameters of a "22 GB" model), so the example uses ``dtype_bytes=1`` and a top MLP
    of ~1.9e9 parameters (22.4e9 in all).  A batch of 65536 samples per server makes the
    pooled-row MP transfer 65536 x 512 B = 32 MiB, the paper's "32 MB".
    """
    return get_workload("dlrm", tables=4, rows=10**7, dim=512, lookups=1, dtype_bytes=1,
                        top_mlp=[16384] * 8 + [1], batch_size=16 * 65536)


def test_dlrm_data_parallel_is_a_uniform_ring() -> None:
    w = dlrm_fig1()
    d = demand_for(w, "dp=16", "H100", Placement(servers=16, gpus_per_server=1),
                   check=False)
    m = d.server_matrix()
    assert 22e9 < w.parameters < 23e9
    ring = 2 * 15 / 16 * w.parameters  # 1-byte gradients of the whole model
    expected = np.zeros((16, 16))
    for i in range(16):
        expected[i, (i + 1) % 16] = ring
    assert np.allclose(m, expected)
    # The paper's "44 GB of AllReduce transfers" is 2 x 22 GB; the ring's 2 (n-1)/n gives
    # 42 GB to each successor.
    assert 41e9 < ring < 44e9
    assert not d.split()[1].any()


def test_dlrm_hybrid_tables_on_s0_s3_s8_s13() -> None:
    w = dlrm_fig1()
    owners = (0, 3, 8, 13)
    pl = Placement(servers=16, gpus_per_server=1, table_servers=owners)
    d = demand_for(w, "dp=16,embedding=model", "H100", pl, check=False)
    groups, mp = d.split()
    b = 65536
    # MP traffic only in the rows and columns of the table servers (Fig. 1b's lines).
    others = [s for s in range(16) if s not in owners]
    assert not mp[np.ix_(others, others)].any()
    for o in owners:
        for r in range(16):
            if r == o:
                continue
            out = b * 512.0                          # pooled rows, one-to-many (32 MiB)
            back = b * 512.0 + b * 1 * 8.0           # row gradients + indices, many-to-one
            if r in owners:  # another owner: both roles
                assert mp[o, r] == pytest.approx(out + back)
            else:
                assert mp[o, r] == pytest.approx(out)
                assert mp[r, o] == pytest.approx(back)
    # AllReduce: one ring of the 16 servers carrying only the replicated (dense) part.
    dense = w.parameters - 4 * 10**7 * 512
    # The paper's "4 GB" AllReduce transfers are 2 x 2 GB of replicated parameters.
    assert 3.4e9 < 2 * 15 / 16 * dense < 4e9
    assert groups == [(tuple(range(16)), pytest.approx(2 * 15 / 16 * dense))]
    ring = d.server_matrix() - mp
    expected = np.zeros((16, 16))
    for i in range(16):
        expected[i, (i + 1) % 16] = 2 * 15 / 16 * dense
    assert np.allclose(ring, expected)
    # "reduces the maximum transfer size from 44 GB to 4 GB".
    assert d.server_matrix().max() < 0.1 * 2 * 15 / 16 * w.parameters
    kinds = {(type(op).__name__, op.phase) for op in d.ops if getattr(op, "purpose", "")
             == "embedding"}
    assert kinds == {("Transfer", "forward"), ("Transfer", "backward")}


def test_tables_on_every_gpu_give_alltoalls() -> None:
    w = get_workload("dlrm", tables=8, rows=1000, dim=16, lookups=2, batch_size=64)
    d = demand_for(w, "dp=8,embedding=model", "A100-80", Placement(servers=8, gpus_per_server=1))
    a2a = [op for op in d.collectives() if op.purpose == "embedding"]
    assert [(op.kind, op.phase) for op in a2a] == [
        ("alltoall", "forward"), ("alltoall", "forward"), ("alltoall", "backward")]
    b = 64 / 8
    assert [op.bytes for op in a2a] == [b * 8 * 2 * 8, b * 8 * 16 * 4, b * 8 * 16 * 4]
    _, mp = d.split()
    off = ~np.eye(8, dtype=bool)
    assert np.allclose(mp[off], mp[0, 1])  # uniform all-to-all
    assert mp[0, 1] == pytest.approx((b * 2 * 8 + 2 * b * 16 * 4))
    assert not d.transfers()


# ---------------------------------------------------------------------------- errors, summary
def test_infeasible_memory_raises_with_numbers() -> None:
    with pytest.raises(InfeasibleError,
                       match=r"^strategy dp=8,tp=1,pp=1 needs .* GiB per GPU \(.*\), "
                             r"hardware H100 has 80.0 GiB$"):
        demand_for(get_workload("gpt3-175b"), "dp=8", "H100")


def test_placement_mismatch_and_index_bytes() -> None:
    with pytest.raises(InvalidSpecError, match="uses dp\\*tp\\*pp\\*cp = 4 GPUs"):
        demand_for(dense_model(), "dp=4", "A100-80", Placement(servers=2, gpus_per_server=1))
    with pytest.raises(InvalidSpecError, match="index_bytes"):
        demand_for(dense_model(), "dp=4", "A100-80", index_bytes=3)


def test_summary_totals_match_matrices() -> None:
    w = tiny_transformer()
    d = demand_for(w, "dp=2,tp=2,pp=2,microbatches=4,zero=1", "A100-80",
                   Placement(servers=4, gpus_per_server=2))
    s = d.summary()
    gpu = d.gpu_matrix()
    assert s["inter_server_bytes"] == pytest.approx(d.server_matrix().sum())
    assert gpu.sum() == pytest.approx(sum(s["bytes_by_purpose"].values()))
    assert np.allclose(gpu, d.gpu_matrix(mutable=True) + d.gpu_matrix(mutable=False))
    assert s["bubble_fraction"] == pytest.approx(1 / 5)
    ops = [op for op in d.ops if isinstance(op, Transfer)]
    assert s["ops"]["transfers"] == len(ops)


@pytest.mark.parametrize("name, strategy, gpus_per_server", [
    ("dlrm", "dp=64,embedding=model", 8), ("dlrm", "dp=32,embedding=model", 4),
    ("mixtral-8x7b", "dp=16,tp=2,ep=8", 8), ("gpt3-175b", "dp=4,tp=8,pp=8,microbatches=8", 8),
    ("resnet50", "dp=64", 4), ("ncf", "dp=32,embedding=model", 4)])
def test_split_totals_equal_the_split_matrices(name, strategy, gpus_per_server):
    from codesign.workloads import get_workload
    from codesign.workloads.demand import demand_for
    from codesign.workloads.placement import Placement
    from codesign.workloads.strategy import as_strategy

    s = as_strategy(strategy)
    d = demand_for(get_workload(name), s, "A100-80",
                   Placement.for_strategy(s, gpus_per_server), check=False)
    groups, mp = d.split()
    R, A = d.split_totals()
    assert R == pytest.approx(sum(b * len(g) for g, b in groups), rel=1e-12)
    assert A == pytest.approx(float(mp.sum()), rel=1e-12)
