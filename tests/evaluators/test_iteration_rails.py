"""Scale-up domains and rails in the iteration model (issue 19 item 3): on GPU-level
fabrics with scale-up domains, a collective spanning domains runs inside each domain first
(NVLink) and across domains on its rails, as NCCL does on rail-optimised clusters."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.iteration import evaluate
from evaluators.iteration.comm import CommTimer, System, intra_ring_time
from topologies.registry import from_spec

SPEC = "railopt:4,gpus=4,scaleup=4"      # 4 servers x 4 GPUs, each server one domain
S = 64e6


def timer(spec: str = SPEC) -> CommTimer:
    topo = from_spec(spec)
    return CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "flow", 0.0,
                     "shortest")


@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_a_group_spanning_domains_runs_inside_then_on_its_rails(kind: str) -> None:
    t = timer()
    bw = float(t.topology.params["scaleup_bandwidth_Bps"])
    everyone = tuple(range(16))
    cost = t.collective_set(kind, [everyone], S)
    rails = [tuple(range(j, 16, 4)) for j in range(4)]      # the j-th GPU of every server
    inter = max(t.inter_collective(kind, r, S / 4).time_s for r in rails)
    pre = intra_ring_time("reducescatter", 4, S, bw) if kind != "allgather" else 0.0
    post = intra_ring_time("allgather", 4, S, bw) if kind != "reducescatter" else 0.0
    assert cost.time_s == pytest.approx(pre + inter + post, rel=1e-12)
    # Inter-domain traffic stays on rails: every pair that communicates has the same
    # local rank, and nothing crosses an NVLink crossbar as a network link.
    assert all(a % 4 == b % 4 for a, b in cost.pairs)
    first, count = t.topology.params["scaleup_switches"]
    on_nvlink = (t.topology.src >= first) & (t.topology.src < first + count) | \
        (t.topology.dst >= first) & (t.topology.dst < first + count)
    assert float(cost.link_bytes[on_nvlink].sum()) == 0.0


def test_scale_up_first_beats_a_flat_ring_over_every_gpu() -> None:
    t = timer()
    everyone = tuple(range(16))
    hierarchical = t.collective_set("allreduce", [everyone], S).time_s
    flat = t.inter_collective("allreduce", everyone, S).time_s
    assert hierarchical < flat


def test_one_gpu_per_domain_is_a_plain_rail_collective() -> None:
    t = timer()
    rail = (1, 5, 9, 13)
    assert t.collective_set("allreduce", [rail], S).time_s == pytest.approx(
        t.inter_collective("allreduce", rail, S).time_s)


def test_fabrics_without_scale_up_domains_are_unchanged() -> None:
    t = timer("fattree:servers=16,radix=8")
    everyone = tuple(range(16))
    assert t.collective_set("allreduce", [everyone], S).time_s == pytest.approx(
        t.inter_collective("allreduce", everyone, S).time_s)


def test_data_parallel_training_on_a_rail_optimised_fabric() -> None:
    # ResNet-50 on 4 x 4 H100: the DP all-reduce uses NVLink inside each server and the
    # four rails between servers; it is faster than on the same fabric without domains.
    rails = evaluate(from_spec("railopt:16,gpus=8,scaleup=8"), "resnet50", "dp=128",
                     hardware="H100", collective_method="ring", routing="auto")
    flat = evaluate(from_spec("railopt:16,gpus=8,scaleup=1"), "resnet50", "dp=128",
                    hardware="H100", collective_method="ring", routing="auto")
    assert rails.dp_s < flat.dp_s
    assert np.isfinite(rails.iteration_time_s)


def test_rings_on_a_clos_follow_the_fabric_not_the_rank_order() -> None:
    """A flat ring over the GPUs of a rail-optimised fabric is built in
    topologies.routing.ring_order (rails joined between servers), as NCCL does, and is
    timed exactly as that ring synthesized alone; the rank-order ring, which joins GPU 3
    of one server to GPU 0 of the next (another rail: a spine hop), is not faster."""
    from evaluators.collectives import Collective
    from evaluators.registry import synthesize
    from topologies.routing import ring_order

    topo = from_spec("railopt:4,gpus=4,radix=8")        # no scale-up domain: flat rings
    nodes = tuple(range(topo.npus))
    order = ring_order(topo, nodes)
    assert order != list(nodes)
    t = CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "flow", 0.0, "shortest")
    got = t.inter_collective("allreduce", nodes, S).time_s
    coll = Collective("allreduce", nodes, S)
    alone = CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "flow", 0.0,
                      "shortest")._time(synthesize(topo, coll, method="ring", order=order))
    plain = CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "flow", 0.0,
                      "shortest")._time(synthesize(topo, coll, method="ring"))
    assert got == pytest.approx(alone, rel=1e-12)
    assert got <= plain * (1 + 1e-9)


@pytest.mark.parametrize("workload, strategy", [("bert", "dp=128,tp=1,pp=1"),
                                                ("dlrm", "dp=128,tp=1,pp=1,embedding=model")])
def test_multi_plane_pairs_are_sprayed_over_the_planes(workload: str, strategy: str) -> None:
    """On a multi-plane Clos every endpoint has a port on each plane: with spray routing
    (the default there) a 2 x 200 Gb/s multi-plane fabric trains exactly as a
    non-blocking fat-tree of 400 Gb/s ports (same injection bandwidth, both non-blocking,
    D-mod-k inside a plane and on the fat-tree), for the ring all-reduce and for
    all-to-all transfers; pinning each pair to one plane (dmodk or ecmp) gives a pair half
    of its endpoint's bandwidth and is slower."""
    from codesign.workloads import get_hardware, get_workload

    hw, w = get_hardware("H100"), get_workload(workload)
    mp = from_spec("multiplane:16,planes=2,radix=8,bw=200Gbps")
    ft = from_spec("fattree:servers=16,radix=8,bw=400Gbps")
    kw = dict(hardware=hw, collective_method="ring")
    fat = evaluate(ft, w, strategy, routing="dmodk", **kw)
    auto = evaluate(mp, w, strategy, routing="auto", **kw)
    spray = evaluate(mp, w, strategy, routing="spray", **kw)
    assert auto.iteration_time_s == spray.iteration_time_s
    assert spray.iteration_time_s == pytest.approx(fat.iteration_time_s, rel=1e-9)
    for pinned in ("dmodk", "ecmp"):
        assert evaluate(mp, w, strategy, routing=pinned, **kw).iteration_time_s > \
            spray.iteration_time_s * 1.05


def test_spray_needs_a_clos() -> None:
    from codesign.errors import InvalidSpecError
    from codesign.workloads import get_hardware, get_workload

    with pytest.raises(InvalidSpecError, match="spray needs a Clos"):
        evaluate(from_spec("torus:4x4"), get_workload("bert"), "dp=128,tp=1,pp=1",
                 hardware=get_hardware("H100"), routing="spray")


def test_auto_on_a_torus_uses_dimension_wise_rings_and_sweep_ordered_groups() -> None:
    """``auto`` on a multi-dimensional torus: the whole grid's all-reduce runs
    dimension-wise (``hierarchical``), a group of part of the grid one ring in the grid's
    sweep order (every hop one link); both are timed exactly as those synthesizers alone,
    and beat TotientPerms' circulant rings, whose hops cross several links of a grid."""
    from codesign.workloads import get_hardware, get_workload
    from evaluators.collectives import Collective
    from evaluators.registry import synthesize
    from topologies.routing import grid_ring_order

    hw, w = get_hardware("A100-80"), get_workload("bert")
    topo = from_spec("torus:4x4x4,bw=100Gbps")
    kw = dict(hardware=hw, routing="auto")
    auto = evaluate(topo, w, "dp=512,tp=1,pp=1", collective_method="auto", **kw)
    hier = evaluate(topo, w, "dp=512,tp=1,pp=1", collective_method="hierarchical", **kw)
    multi = evaluate(topo, w, "dp=512,tp=1,pp=1", collective_method="multiring", **kw)
    assert auto.iteration_time_s == hier.iteration_time_s
    assert auto.dp_s < 0.5 * multi.dp_s
    # Half the grid (a data-parallel group of one pipeline stage): one sweep-ordered ring.
    t = CommTimer(System(topo, topo.npus * 8, 8, True, 300e9), "hierarchical", "flow", 0.0,
                  "shortest")
    half = tuple(range(32))
    got = t.inter_collective("allreduce", half, S).time_s
    ring = synthesize(topo, Collective("allreduce", half, S), method="ring",
                      order=grid_ring_order(topo, half))
    assert got == pytest.approx(t._time(ring), rel=1e-12)


def test_pipeline_sends_between_two_leaves_are_spread_by_default() -> None:
    """Four sends from the four servers of one leaf to four servers of another (a
    pipeline boundary crossing leaves): ``shortest`` takes one minimum-hop path per pair,
    the same uplink for all four, so the phase lasts 4 S / bw (closed form); D-mod-k gives
    each destination its own uplink, S / bw (each NIC's own bound).  ECMP hashes pairs
    onto uplinks, between the two.  A library ``evaluate`` routes as the command line
    does (``auto``: ECMP on a Clos); with ``shortest`` as its default, a GB200 pipeline
    across racks exposed 9 s of sends that ECMP hides (MLPerf v5.0 Llama 3.1 405B)."""
    topo = from_spec("railopt:16,gpus=1,radix=8")        # leaf: 4 servers, 4 uplinks
    bw = float(topo.params["link_bandwidth_Bps"])
    src, dst = np.arange(4), np.arange(8, 12)
    size = np.full(4, S)

    def phase(routing: str) -> float:
        t = CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "flow", 0.0, routing)
        return t.mp_phase(src, dst, size).time_s

    lat = 4 * float(topo.latency[0])                   # NIC, leaf, spine, leaf: 4 links
    assert phase("shortest") == pytest.approx(4 * S / bw + lat, rel=1e-9)
    assert phase("dmodk") == pytest.approx(S / bw + lat, rel=1e-9)
    assert S / bw <= phase("ecmp") < phase("shortest")
    job = dict(hardware="H100", pp_comm_overlap=False)
    default = evaluate(topo, "bert", "dp=8,pp=2,microbatches=4", **job)
    ecmp = evaluate(topo, "bert", "dp=8,pp=2,microbatches=4", routing="ecmp", **job)
    pinned = evaluate(topo, "bert", "dp=8,pp=2,microbatches=4", routing="shortest", **job)
    assert default.to_dict() == ecmp.to_dict()
    assert default.pp_s < pinned.pp_s
