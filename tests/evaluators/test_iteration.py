"""The training-iteration model (evaluators.iteration): hand-derived oracles."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from codesign.workloads import Layer, Placement, Workload, demand_for, get_hardware
from evaluators.iteration import closed_form_estimate, evaluate
from evaluators.iteration.comm import CommTimer, System
from evaluators.iteration.phase import flow_phase
from evaluators.netsim import model_names, simulate
from topologies.registry import from_spec

GBPS = 1e9 / 8


def toy(params=(50_000_000, 50_000_000), batch=64, flops=2e9) -> Workload:
    """Two dense layers (fp32 gradients): layer i has ``params[i]`` parameters."""
    layers = tuple(Layer(f"l{i}", "dense", p, flops, 2 * flops, 4096.0, dtype_bytes=4)
                   for i, p in enumerate(params))
    return Workload("toy", layers, batch, dtype_bytes=4)


def per_layer_seconds(w, strategy, n, **kw):
    d = demand_for(w, strategy, "A100-80", Placement(servers=n, gpus_per_server=1), **kw)
    out = {}
    for op in d.compute():
        out[(op.name, op.phase)] = op.seconds
    return d, out


# ---------------------------------------------------------------- pure DP on a switch
@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_dp_ring_allreduce_on_ideal_switch_matches_closed_form(model):
    n, bw = 8, 100 * GBPS                         # ideal:8,degree=1 -> one 100 Gbps link
    w = toy()
    G = sum(layer.params for layer in w.layers) * 4.0
    bucket = 25 * 2**20
    r = evaluate(f"ideal:{n},degree=1,bw=100Gbps,lat=1us", w, f"dp={n}",
                 placement=Placement(servers=n, gpus_per_server=1), overlap=False,
                 network_model=model, bucket_bytes=bucket)
    buckets = int(np.ceil(G / bucket))
    # ring: 2(n-1) steps of S/n bytes over server->switch->server (2 links of latency a)
    expected = 2 * (n - 1) / n * G / bw + buckets * 2 * (n - 1) * 2 * 1e-6
    assert r.exposed_communication_s == pytest.approx(expected, rel=1e-9)
    assert r.dp_s == pytest.approx(expected, rel=1e-9)
    assert r.iteration_time_s == pytest.approx(r.compute_time_s + expected, rel=1e-12)
    assert r.bandwidth_tax == 1.0
    assert r.mean_path_length == 2.0


def test_dp_congestion_model_is_store_and_forward_at_the_switch():
    n = 4
    w = toy((1_000_000, 1_000_000))
    G = 8e6
    r = evaluate(f"ideal:{n},degree=1,bw=100Gbps,lat=0", w, f"dp={n}",
                 placement=Placement(servers=n, gpus_per_server=1), overlap=False,
                 network_model="congestion", bucket_bytes=G)
    # docs/architecture.md section 5: each hop costs size / bandwidth: 2 hops per ring step
    assert r.exposed_communication_s == pytest.approx(2 * (n - 1) * 2 * (G / n) / (100 * GBPS),
                                                      rel=1e-9)


# ---------------------------------------------------------------- overlap of buckets
def test_gradient_buckets_overlap_backward_by_hand():
    n, bw = 4, 100 * GBPS
    w = toy((200_000_000, 200_000_000), batch=32)
    size = 200_000_000 * 4.0                      # one bucket per layer
    d, sec = per_layer_seconds(w, f"dp={n}", n, bucket_bytes=size)
    f = sec[("l0", "forward")] + sec[("l1", "forward")]
    b0, b1 = sec[("l0", "backward")], sec[("l1", "backward")]
    t_c = 2 * (n - 1) / n * size / bw             # lat=0: ring closed form per bucket
    # backward runs l1 then l0; bucket 0 (l1's gradients) ready after b1, bucket 1 at the end
    end0 = f + b1 + t_c
    end1 = max(f + b1 + b0, end0) + t_c
    r = evaluate(f"ideal:{n},degree=1,bw=100Gbps,lat=0", w, f"dp={n}",
                 placement=Placement(servers=n, gpus_per_server=1), bucket_bytes=size)
    assert r.compute_time_s == pytest.approx(f + b0 + b1 + r.optimizer_time_s, rel=1e-12)
    assert r.exposed_communication_s == pytest.approx(end1 - (f + b0 + b1), rel=1e-9)
    # = max(0, comm - overlap window): both buckets (2 t_c) against the window b0
    assert r.exposed_communication_s == pytest.approx(max(0.0, 2 * t_c - b0), rel=1e-9)
    assert r.communication_time_s == pytest.approx(2 * t_c, rel=1e-9)
    no = evaluate(f"ideal:{n},degree=1,bw=100Gbps,lat=0", w, f"dp={n}",
                  placement=Placement(servers=n, gpus_per_server=1), bucket_bytes=size,
                  overlap=False)
    assert no.exposed_communication_s == pytest.approx(2 * t_c, rel=1e-9)


@pytest.mark.parametrize("workload,strategy", [("dlrm", "dp=16,embedding=model"),
                                               ("ncf", "dp=16,embedding=model")])
def test_overlap_never_slower(workload, strategy):
    # table owners' lookups run side by side: they must not push bucket ready times
    # past the end of the backward pass
    kw = dict(placement=Placement(servers=16, gpus_per_server=1))
    on = evaluate("torus:4x4", workload, strategy, **kw)
    off = evaluate("torus:4x4", workload, strategy, overlap=False, **kw)
    assert on.iteration_time_s <= off.iteration_time_s
    assert off.iteration_time_s == pytest.approx(off.compute_time_s
                                                 + off.communication_time_s, rel=1e-9)


# ---------------------------------------------------------------- pipeline bubble
def test_pipeline_compute_and_bubble():
    w = toy((1_000_000,) * 4, batch=64)
    m, p = 8, 2
    strat = f"dp=1,pp={p},microbatches={m}"
    d, _ = per_layer_seconds(w, strat, 2)
    stage = np.zeros(p)
    for op in d.compute():
        if op.kind == "compute":
            stage[op.stage] += op.seconds
    r = evaluate("ring:2,lat=0", w, strat, placement=Placement(servers=2, gpus_per_server=1))
    assert r.compute_time_s == pytest.approx((m + p - 1) * stage.max() + r.optimizer_time_s,
                                             rel=1e-12)
    assert r.optimizer_time_s > 0
    assert r.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
    assert r.pp_s > 0 and r.iteration_time_s > r.compute_time_s


@pytest.mark.parametrize("dp", [1, 2])
def test_pipeline_sends_of_replicas_run_concurrently(dp):
    # one micro-batch of b samples crosses the stage boundary forward and backward
    m, b, bw = 2, 16, 100 * GBPS
    w = toy((1_000_000,) * 4, batch=b * m * dp)
    r = evaluate(f"ideal:{2 * dp},degree=1,bw=100Gbps,lat=0", w,
                 f"dp={dp},pp=2,microbatches={m}",
                 placement=Placement(servers=2 * dp, gpus_per_server=1))
    assert r.pp_s == pytest.approx(2 * m * b * 4096.0 / bw, rel=1e-9)


# ---------------------------------------------------------------- bandwidth tax
def _alltoall_cost(spec, n):
    topo = from_spec(spec)
    timer = CommTimer(System(topo, n, 1, True, 1e12), "ring", "flow")
    s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    off = s != d
    return topo, timer.mp_phase(s[off], d[off], np.full(int(off.sum()), 1e6))


def test_bandwidth_tax_is_mean_hops_on_a_ring_for_uniform_alltoall():
    n = 8
    topo, cost = _alltoall_cost(f"ring:{n}", n)
    # ring of n (even): mean distance n^2 / (4 (n-1)); f = h - 1 forwards per message
    assert cost.carried_bytes / cost.net_bytes == pytest.approx(n * n / (4 * (n - 1)))
    assert cost.carried_bytes / cost.net_bytes == pytest.approx(topo.mean_path_length)


@pytest.mark.parametrize("spec", ["fattree:k=4", "ideal:16,degree=2"])
def test_bandwidth_tax_is_one_on_switch_fabrics(spec):
    _, cost = _alltoall_cost(spec, 16)
    assert cost.carried_bytes == pytest.approx(cost.net_bytes)


def test_dlrm_tax_on_direct_connect_and_switch():
    args = dict(placement=Placement(servers=16, gpus_per_server=1))
    w = "dlrm"
    sw = evaluate("fattree:k=4", w, "dp=16,embedding=model", **args)
    dc = evaluate("torus:4x4", w, "dp=16,embedding=model", **args)
    assert sw.bandwidth_tax == 1.0
    assert dc.bandwidth_tax > 1.0
    assert 0 < dc.max_link_utilisation <= 1.0 + 1e-9
    assert dc.mean_link_utilisation <= dc.max_link_utilisation


def test_uniform_alltoall_on_ideal_switch_closed_form():
    n, S = 8, 8e6
    topo = from_spec(f"ideal:{n},degree=1,bw=100Gbps,lat=0")
    timer = CommTimer(System(topo, n, 1, True, 1e12), "ring", "flow", rtol=0.0)
    s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    off = s != d
    cost = timer.mp_phase(s[off], d[off], np.full(int(off.sum()), S / n))
    # every uplink carries (n-1) S/n; max-min gives each flow B/(n-1)
    assert cost.time_s == pytest.approx((n - 1) / n * S / (100 * GBPS), rel=1e-12)


def test_zero1_moves_the_same_bytes_as_dp_allreduce():
    # ZeRO-1: reduce-scatter of the buckets + all-gather after the step = 2 (n-1)/n G
    n = 8
    w = toy()
    kw = dict(placement=Placement(servers=n, gpus_per_server=1), overlap=False)
    spec = f"ideal:{n},degree=1,bw=100Gbps,lat=0"
    dp = evaluate(spec, w, f"dp={n}", **kw)
    z1 = evaluate(spec, w, f"dp={n},zero=1", **kw)
    assert z1.exposed_communication_s == pytest.approx(dp.exposed_communication_s, rel=1e-9)
    assert z1.zero_s == pytest.approx(z1.dp_s, rel=1e-9)


def test_ecmp_paths_are_minimum_hop_walks_and_spread_load():
    from topologies.routing import pair_paths

    topo = from_spec("fattree:k=4")
    n = topo.npus
    s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    off = s != d
    s, d = s[off], d[off]
    ptr, links = pair_paths(topo, s, d, method="ecmp")
    np.testing.assert_array_equal(np.diff(ptr), topo.hop_matrix[s, d])
    first, last = links[ptr[:-1]], links[ptr[1:] - 1]
    np.testing.assert_array_equal(topo.src[first], s)
    np.testing.assert_array_equal(topo.dst[last], d)
    inner = np.ones(links.size - 1, dtype=bool)
    inner[ptr[1:-1] - 1] = False
    assert np.all(topo.dst[links[:-1]][inner] == topo.src[links[1:]][inner])
    size = np.full(s.size, 1e6)
    one = flow_phase(topo, s, d, size, routing="shortest")
    many = flow_phase(topo, s, d, size, routing="ecmp")
    assert many.link_bytes.max() < one.link_bytes.max()
    assert many.makespan_s < one.makespan_s
    with pytest.raises(InvalidSpecError, match="routing"):
        pair_paths(topo, s, d, method="spray")


# ---------------------------------------------------------------- flow phase oracle
@pytest.mark.parametrize("spec", ["expander:16,degree=4", "fattree:k=4", "torus:4x4"])
def test_flow_phase_exact_matches_netsim_and_batched_is_close(spec):
    topo = from_spec(spec)
    rng = np.random.default_rng(1)
    n = topo.npus
    src = rng.integers(0, n, 50)
    dst = (src + rng.integers(1, n, 50)) % n
    size = rng.uniform(1e5, 1e7, 50)
    ref = simulate(topo, [(int(a), int(b), float(c)) for a, b, c in zip(src, dst, size)],
                   model="flow")
    exact = flow_phase(topo, src, dst, size, rtol=0)
    np.testing.assert_allclose(exact.finish_s, ref.finish_s, rtol=1e-9)
    np.testing.assert_allclose(exact.link_bytes, ref.link_bytes)
    fast = flow_phase(topo, src, dst, size, rtol=0.05)
    assert ref.makespan_s * (1 - 1e-9) <= fast.makespan_s <= ref.makespan_s * 1.06


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5), st.floats(1e3, 1e7)),
                min_size=1, max_size=25),
       st.sampled_from(["ring:6", "switch:6", "fc:6"]))
def test_flow_phase_property(msgs, spec):
    topo = from_spec(spec)
    src = np.array([a for a, _, _ in msgs])
    dst = (src + np.array([b for _, b, _ in msgs])) % 6
    size = np.array([c for _, _, c in msgs])
    ref = simulate(topo, [(int(a), int(b), float(c)) for a, b, c in zip(src, dst, size)],
                   model="flow")
    np.testing.assert_allclose(flow_phase(topo, src, dst, size, rtol=0).finish_s,
                               ref.finish_s, rtol=1e-9)
    fast = flow_phase(topo, src, dst, size, rtol=0.05).makespan_s
    assert ref.makespan_s * (1 - 1e-9) <= fast <= ref.makespan_s * 1.06


@pytest.mark.parametrize("method", ["ring", "rhd", "direct"])
def test_level_synchronous_flow_replay_is_never_faster(method):
    from evaluators.collectives import Collective
    from evaluators.netsim import replay_time
    from evaluators.registry import synthesize

    topo = from_spec("torus:2x4")
    timer = CommTimer(System(topo, 8, 1, True, 1e12), method, "flow", rtol=0.0)
    cost = timer.inter_collective("allreduce", tuple(range(8)), 8e6)
    # The iteration model's rings sweep the grid (topologies.routing.grid_ring_order).
    from topologies.routing import grid_ring_order

    opts = {"order": grid_ring_order(topo, range(8))} if method == "ring" else {}
    exact = replay_time(synthesize(topo, Collective.on("allreduce", 8, 8e6), method, **opts),
                        topo, model="flow")
    assert cost.time_s >= exact * (1 - 1e-9)
    assert cost.time_s <= exact * 2


# ---------------------------------------------------------------- closed form (Eq. 1)
@pytest.mark.parametrize("spec,method", [("ideal:8,degree=2,bw=100Gbps,lat=0", "ring"),
                                         ("uniring:8,lat=0", "ring")])
def test_closed_form_agrees_when_assumptions_hold(spec, method):
    # B is the whole injection bandwidth: the all-reduce must use every server link
    w = toy()
    pl = Placement(servers=8, gpus_per_server=1)
    r = evaluate(spec, w, "dp=8", placement=pl, overlap=False, collective_method=method)
    e = closed_form_estimate(spec, demand_for(w, "dp=8", "A100-80", pl))
    assert e.iteration_time_s == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert e.compute_time_s == pytest.approx(r.compute_time_s, rel=1e-12)


def test_closed_form_direction_otherwise():
    w = toy()
    pl = Placement(servers=8, gpus_per_server=1)
    d = demand_for(w, "dp=8", "A100-80", pl)
    e = closed_form_estimate("ring:8", d)
    # one ring on a bidirectional ring uses half of B; latency 1 us: slower than Eq. (1)
    slow = evaluate("ring:8", w, "dp=8", placement=pl, overlap=False)
    fast = evaluate("ring:8", w, "dp=8", placement=pl)                  # overlap
    assert slow.iteration_time_s > e.iteration_time_s
    assert fast.iteration_time_s < slow.iteration_time_s


def test_closed_form_alpha_is_mean_path_length_on_direct_connect():
    pl = Placement(servers=16, gpus_per_server=1)
    from codesign.workloads import get_workload
    d = demand_for(get_workload("dlrm"), "dp=16,embedding=model", "A100-80", pl)
    assert closed_form_estimate("torus:4x4", d).alpha == pytest.approx(
        from_spec("torus:4x4").mean_path_length)
    assert closed_form_estimate("fattree:k=4", d).alpha == 1.0


# ---------------------------------------------------------------- hierarchical, intra
def test_tp_inside_a_server_uses_the_fabric_closed_form():
    w = Workload("tp", (Layer("a", "dense", 1000, 1e9, 2e9, 4096.0, tp_shardable=True,
                              tp_allreduce_bytes=1e6, tp_bwd_allreduce_bytes=1e6),), 8)
    hw = get_hardware("A100-80")
    r = evaluate("ring:2", w, "dp=2,tp=8", placement=Placement(servers=2, gpus_per_server=8))
    b = w.batch_size / 2
    per = 2 * 7 / 8 * b * 1e6 / hw.fabric_bandwidth_Bps     # one all-reduce on 8 GPUs
    assert r.tp_s == pytest.approx(2 * per, rel=1e-9)       # forward and backward


def test_hierarchical_dp_across_servers():
    # 2 servers x 4 GPUs, pure DP: intra RS + inter AR of the whole bucket + intra AG
    w = toy((1_000_000, 1_000_000))
    G = 8e6
    hw = get_hardware("A100-80")
    r = evaluate("ideal:2,degree=1,bw=100Gbps,lat=0", w, "dp=8",
                 placement=Placement(servers=2, gpus_per_server=4), overlap=False,
                 bucket_bytes=G)
    intra = 2 * 3 / 4 * G / hw.fabric_bandwidth_Bps
    inter = 2 * 1 / 2 * G / (100 * GBPS)
    assert r.dp_s == pytest.approx(intra + inter, rel=1e-9)


# ---------------------------------------------------------------- errors, contract
def test_memory_infeasible_raises():
    with pytest.raises(InfeasibleError, match="GiB"):
        evaluate("fattree:k=4,bw=400Gbps", "llama3-8b", "dp=4,tp=8,pp=4")


@pytest.mark.parametrize("kwargs,match", [
    (dict(system="ring:5"), "topology NPUs"),
    (dict(collective_method="nope"), "collective_method"),
    (dict(network_model="nope"), "network model"),
    (dict(collective_method="themis"), "themis"),
    (dict(workload=3), "workload"),
    (dict(strategy="dp=x"), "dp"),
    (dict(overlap="yes"), "overlap"),
    (dict(rtol=1.5), "rtol"),
    (dict(routing="spray"), "routing"),
])
def test_bad_inputs_raise(kwargs, match):
    args = dict(system="expander:16,degree=4", workload=toy(), strategy="dp=16")
    opts = {k: v for k, v in kwargs.items() if k not in args}
    args.update({k: v for k, v in kwargs.items() if k in args})
    with pytest.raises(InvalidSpecError, match=match):
        evaluate(args["system"], args["workload"], args["strategy"],
                 placement=Placement(servers=16, gpus_per_server=1), **opts)


@pytest.mark.parametrize("model", model_names())
def test_contract_every_network_model(model):
    r = evaluate("torus:4x4", "dlrm", "dp=16,embedding=model", network_model=model,
                 placement=Placement(servers=16, gpus_per_server=1))
    assert r.iteration_time_s >= r.compute_time_s > 0
    assert r.network_model == model
    assert r.exposed_communication_s == pytest.approx(r.iteration_time_s - r.compute_time_s)
    json.dumps(r.to_dict())


def test_gpu_level_topology():
    # 16 GPUs as NPUs: every transfer on the topology
    r = evaluate("torus:4x4", toy(), "dp=16", placement=Placement(servers=2, gpus_per_server=8))
    assert r.gpus == 16 and r.dp_s > 0


# ---------------------------------------------------------------- CLI
def test_cli_evaluate_json(capsys):
    from codesign.app.cli import main

    rc = main(["evaluate", "--topology", "ideal:16,degree=4,bw=100Gbps", "--workload",
               "resnet50", "--option", "batch_size=512", "--strategy", "dp=16", "--gpus-per-server",
               "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    for key in ("iteration_time_s", "compute_time_s", "exposed_communication_s",
                "communication_time_s", "bubble_fraction", "bandwidth_tax",
                "mean_path_length", "max_link_utilisation", "mean_link_utilisation",
                "by_purpose_s", "collective_method", "network_model", "strategy"):
        assert key in out
    rc = main(["evaluate", "--topology", "ideal:16,degree=4,bw=100Gbps", "--workload",
               "resnet50", "--option", "batch_size=512", "--strategy", "dp=16", "--gpus-per-server",
               "1", "--closed-form", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["alpha"] == 1.0 and out["iteration_time_s"] > 0


@pytest.mark.parametrize("argv,code", [
    (["--topology", "ring:5", "--workload", "resnet50"], 2),
    (["--topology", "ring:2", "--workload", "nope"], 2),
    (["--topology", "ring:4", "--workload", "llama3-8b", "--strategy", "dp=4,tp=8"], 1),
])
def test_cli_evaluate_errors(capsys, argv, code):
    from codesign.app.cli import main

    assert main(["evaluate", *argv]) == code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cached_structure_is_retimed_with_its_own_chunking():
    """A size-free method's cached schedule keeps its chunking when re-timed for another
    size: multiring over 4 rings must not be re-timed as one ring (4x slower)."""
    from evaluators.iteration.comm import CommTimer, System
    from topologies.registry import from_spec

    topo = from_spec("perms:16,p=1:3:5:7,bw=100Gbps")
    nodes = tuple(range(16))
    warm = CommTimer(System(topo, 64, 4, True, 1e11), "multiring", "flow")
    warm.inter_collective("allgather", nodes, 1e8)
    retimed = warm.inter_collective("allgather", nodes, 1e9).time_s
    topo2 = from_spec("perms:16,p=1:3:5:7,bw=100Gbps")   # fresh caches
    fresh = CommTimer(System(topo2, 64, 4, True, 1e11), "multiring", "flow")
    assert retimed == pytest.approx(fresh.inter_collective("allgather", nodes, 1e9).time_s,
                                    rel=1e-9)
