"""Concurrent communication that shares links in the iteration model.

Collectives and pipeline sends that run side by side were each timed as if they had the
network alone; where their paths meet, the shared link carries the bytes of all of them.
Three places: the groups of one concurrent set (:meth:`CommTimer._share_links`), the
stages of the pipeline's steady state, and the stages' last gradient sets.  The oracles
are the fluid simulation of the same transfers run together (``mp_phase``) and closed
forms on a two-switch network whose one inter-switch link every crossing shares.
"""

from __future__ import annotations

import numpy as np
import pytest

from codesign.workloads import get_workload
from codesign.workloads.demand import Transfer, demand_for
from codesign.workloads.placement import Placement
from evaluators.iteration import evaluate
from evaluators.iteration.comm import CommTimer, System
from topologies.registry import from_spec
from topologies.yaml_io import topology_from_dict

BW = 1e9      # B/s of every link of the two-switch networks


def two_switches(a: tuple[int, ...], b: tuple[int, ...]):
    """Servers ``a`` on switch A, ``b`` on switch B, one A-B link; every link ``BW``,
    no latency (so that times are bytes over bandwidth exactly)."""
    n = len(a) + len(b)
    links = [{"src": s, "dst": n} for s in a] + [{"src": s, "dst": n + 1} for s in b]
    links.append({"src": n, "dst": n + 1})
    return topology_from_dict({"npus": n, "switches": 2, "bandwidth": BW, "latency": 0,
                               "links": links}, name="two-switches")


def test_groups_of_one_set_share_the_uplink_they_cross() -> None:
    # Two 2-server all-reduces across the one uplink of an oversubscribed leaf pair: run
    # together, each ring step's two transfers share the uplink -- the oracle is the fluid
    # simulation of exactly those transfers, step by step (a 2-node ring all-reduce is two
    # steps of half the buffer each way).
    topo = from_spec("leafspine:8,hosts_per_leaf=4,oversub=4,bw=100Gbps,lat=0")
    t = CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "flow", 0.0, "shortest")
    size = 64e6
    groups = [(0, 4), (1, 5)]
    joint = t.collective_set("allreduce", groups, size)
    alone = t.collective_set("allreduce", [groups[0]], size)
    src, dst = np.array([0, 4, 1, 5]), np.array([4, 0, 5, 1])
    step = t.mp_phase(src, dst, np.full(4, size / 2)).time_s
    assert joint.time_s == pytest.approx(2 * step, rel=1e-9)
    assert joint.time_s == pytest.approx(2 * alone.time_s, rel=1e-9)
    # Groups inside their own leaves share nothing: the set takes its slowest group.
    apart = t.collective_set("allreduce", [(0, 1), (4, 5)], size)
    assert apart.time_s == pytest.approx(t.collective_set("allreduce", [(0, 1)], size).time_s,
                                         rel=1e-12)
    # The analytical model has no link sharing (ASTRA-sim's congestion-unaware model).
    flat = CommTimer(System(topo, topo.npus, 1, False, 450e9), "ring", "analytical", 0.0,
                     "shortest")
    assert flat.collective_set("allreduce", groups, size).time_s == pytest.approx(
        flat.collective_set("allreduce", [groups[0]], size).time_s, rel=1e-12)


def _small_gpt(batch: int):
    return get_workload("gpt3-175b", layers=4, hidden=1024, heads=8, ffn=4096, vocab=1000,
                        seq_len=2048, positions=2048, batch_size=batch)


def test_steady_pipeline_slots_share_the_links_of_all_stages_sends() -> None:
    # Four stages, one per server; servers 0 and 2 on switch A, 1 and 3 on B.  Every
    # pipeline send crosses the A-B link, and in each slot of the steady state the link
    # carries three sends each way (A->B: forward 0->1 and 2->3, backward 2->1), while a
    # stage alone sends at most two per slot.  Apart (0 and 1 on A, 2 and 3 on B) only one
    # send each way crosses.  Closed form: the steady slots take 3 b / BW, b the bytes
    # of one send.
    w = _small_gpt(batch=32)
    s = "dp=1,tp=8,pp=4,microbatches=32"
    m, P = 32, 4
    d = demand_for(w, s, "H100", Placement(servers=4, gpus_per_server=8), check=False)
    sends = [op for op in d.op_sets if isinstance(op, Transfer)]
    b = sum(op.bytes for op in sends if op.stage == 1 and op.phase == "forward")
    assert b > 0
    shared = evaluate(two_switches((0, 2), (1, 3)), w, s, hardware="H100",
                      check_memory=False)
    apart = evaluate(two_switches((0, 1), (2, 3)), w, s, hardware="H100", check_memory=False)
    slots, steady = m + P - 1, m - P + 1
    t_apart = (apart.iteration_time_s - apart.breakdown["optimizer_s"]) / slots
    # Apart: the busiest stage pays its two sends alone, and nothing shares (no floor).
    assert t_apart > 2 * b / BW
    assert 3 * b / BW > t_apart
    expected = apart.iteration_time_s + steady * (3 * b / BW - t_apart)
    assert shared.iteration_time_s == pytest.approx(expected, rel=1e-9)
    # The wait is pipeline communication in the breakdown, which still adds up.
    assert shared.breakdown["pp_s"] - apart.breakdown["pp_s"] == pytest.approx(
        steady * (3 * b / BW - t_apart), rel=1e-9)
    assert sum(shared.breakdown.values()) == pytest.approx(shared.iteration_time_s, rel=1e-12)
    # A congestion-unaware model keeps timing each stage alone.
    flat = [evaluate(topo, w, s, hardware="H100", check_memory=False,
                     network_model="analytical").iteration_time_s
            for topo in (two_switches((0, 2), (1, 3)), two_switches((0, 1), (2, 3)))]
    assert flat[0] == pytest.approx(flat[1], rel=1e-12)


def test_the_stages_last_gradient_sets_share_the_links_they_cross() -> None:
    # Two stages of two servers each, gradients reduced after the pipeline (overlap off):
    # with each stage's data-parallel pair split over the two switches, both stages'
    # all-reduces cross the A-B link at once; with each pair on its own switch they share
    # nothing.  Closed form (every link BW, no latency): a 2-server ring all-reduce of S
    # bytes moves S each way over every link of its path, and a stage's eight TP ranks
    # reduce side by side through the same server links, so a stage alone takes
    # 8 sum(S) / BW over its buckets; apart the slower stage's, split both stages'.
    w = _small_gpt(batch=8)
    s = "dp=2,tp=8,pp=2,microbatches=2"
    d = demand_for(w, s, "H100", Placement(servers=4, gpus_per_server=8), check=False)
    grads = [op for op in d.op_sets if op.phase == "gradient"]
    assert {len(op.all_groups) for op in grads} == {8}     # one pair per TP rank
    alone = [sum(8 * op.bytes * op.repeat for op in grads if op.stage == p) / BW
             for p in (0, 1)]
    split = evaluate(two_switches((0, 2), (1, 3)), w, s, hardware="H100",
                     check_memory=False, overlap=False)
    apart = evaluate(two_switches((0, 1), (2, 3)), w, s, hardware="H100",
                     check_memory=False, overlap=False)
    assert alone[0] != pytest.approx(alone[1])        # (the stages' gradients differ)
    assert apart.breakdown["dp_s"] == pytest.approx(max(alone), rel=1e-9)
    assert split.breakdown["dp_s"] == pytest.approx(sum(alone), rel=1e-9)
    # (the pipeline sends cross A-B in the other layout, so only the gradient part
    # compares; the breakdown still adds up to the iteration)
    assert sum(split.breakdown.values()) == pytest.approx(split.iteration_time_s, rel=1e-12)
