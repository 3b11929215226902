"""A ring collective timed from its distinct steps equals the materialised schedule.

Oracle: the ring synthesizer's full schedule (validated), re-timed level by level under
the flow model and its footprint counted transfer by transfer, as the iteration model
did before it timed rings from their steps (evaluators/iteration/comm.py,
``CommTimer._ring_steps_cost``).
"""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.collectives import Collective
from evaluators.iteration.comm import (BEST, CommTimer, System, _forwards, _ring_options,
                                       best_candidates)
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule
from topologies.registry import from_spec
from topologies.routing import pair_paths, spray_paths


def _materialised(spec, kind, nodes, size, routing="shortest", method="ring"):
    """(time, link bytes, net bytes, carried bytes, pairs) of the full ring schedule."""
    topo = from_spec(spec)            # its own object: no cache shared with the timer
    timer = CommTimer(System(topo, topo.npus, 1, True, 4.5e11), method, "flow",
                      routing=routing)
    sched = synthesize(topo, Collective(kind, nodes, size), method=method,
                       **_ring_options(topo, method, nodes))
    assert validate_schedule(sched, topo).valid
    ptr, links, chunk = sched.path_ptr, sched.path_links, sched.chunk_bytes
    moving = np.diff(ptr) > 0
    if routing == "spray":
        sptr, slinks, _, share = spray_paths(topo, sched.src[moving], sched.dst[moving])
        link_bytes = np.bincount(slinks, weights=np.repeat(share * chunk, np.diff(sptr)),
                                 minlength=topo.n_links)
    elif routing in ("ecmp", "dmodk"):
        # timed on its own paths, its bytes where the fabric's routing puts each transfer
        rptr, rlinks = pair_paths(topo, sched.src[moving], sched.dst[moving], method=routing)
        link_bytes = np.bincount(rlinks, minlength=topo.n_links) * chunk
    else:
        link_bytes = np.bincount(links, minlength=topo.n_links) * chunk
    fw = _forwards(topo, ptr, links)
    pairs = frozenset(zip(sched.src[moving].tolist(), sched.dst[moving].tolist()))
    return (timer._flow_levels(sched), link_bytes.astype(float), int(moving.sum()) * chunk,
            float((1 + fw[moving]).sum()) * chunk, pairs)


CASES = [
    # (spec, routing, groups): switched, direct-connect, parallel-link bundles (period 2
    # and 6), multi-plane spray, groups in and out of the fabric's ring order.
    ("leafspine:8,oversub=2,hosts_per_leaf=4,bw=100Gbps", "ecmp",
     [tuple(range(8)), (6, 1, 4, 3), (0, 7)]),
    ("fattree:k=4", "shortest", [tuple(range(16)), (0, 5, 10, 15, 2)]),
    ("fattree:k=4", "dmodk", [tuple(range(16)), (0, 5, 10, 15, 2)]),
    ("torus:4x4,bw=100Gbps", "shortest", [tuple(range(16)), (0, 5, 10, 15)]),
    ("hier:ring4_switch3,bw=200GB/s:50GB/s,links=2:3", "shortest",
     [tuple(range(12)), (0, 1, 2, 3), (0, 4, 8)]),
    ("dgx1", "shortest", [tuple(range(8)), (0, 3, 5)]),
    ("multiplane:8,planes=2,radix=4", "spray", [tuple(range(8)), (1, 2, 7)]),
]


MULTIRING_CASES = [
    # (spec, groups): rings the fabric provides link by link (perms, its two generators),
    # a ring topology (generators 1 and n-1), parallel-link bundles, a switched fabric
    # and a group whose rings are routed over several links (the default rings=2).
    ("perms:12,p=1:5", [tuple(range(12)), (0, 3, 6, 9, 1)]),
    ("ring:8", [tuple(range(8))]),
    ("hier:ring4_switch3,bw=200GB/s:50GB/s,links=2:3", [tuple(range(12)), (0, 4, 8)]),
    ("fattree:k=4", [tuple(range(16))]),
    ("expander:16,degree=4", [(0, 3, 5, 9, 12, 15)]),
]


@pytest.mark.parametrize("spec,groups", MULTIRING_CASES)
@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_multiring_from_its_steps_equals_the_materialised_schedule(spec, groups, kind):
    topo = from_spec(spec)
    timer = CommTimer(System(topo, topo.npus, 1, True, 4.5e11), "multiring", "flow")
    for nodes in groups:
        for size in (3e6, 2.0 ** 27):
            got = timer.inter_collective(kind, nodes, size)
            t, link_bytes, net, carried, pairs = _materialised(spec, kind, nodes, size,
                                                               method="multiring")
            assert got.time_s == pytest.approx(t, rel=1e-12)
            np.testing.assert_array_equal(got.link_bytes, link_bytes)
            assert (got.net_bytes, got.carried_bytes, got.pairs) == (net, carried, pairs)


@pytest.mark.parametrize("spec,routing,groups", CASES)
@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_ring_from_its_steps_equals_the_materialised_schedule(spec, routing, groups, kind):
    topo = from_spec(spec)
    timer = CommTimer(System(topo, topo.npus, 1, True, 4.5e11), "ring", "flow",
                      routing=routing)
    for nodes in groups:
        for size in (3e6, 2.0 ** 27):
            got = timer.inter_collective(kind, nodes, size)
            t, link_bytes, net, carried, pairs = _materialised(spec, kind, nodes, size, routing)
            assert got.time_s == t     # the same flow phases added in the same order
            if routing == "spray":    # plane shares summed in another order
                np.testing.assert_allclose(got.link_bytes, link_bytes, rtol=1e-12)
            else:
                np.testing.assert_array_equal(got.link_bytes, link_bytes)
            assert (got.net_bytes, got.carried_bytes, got.pairs) == (net, carried, pairs)


def test_best_on_a_large_group_is_ring_timed_from_its_steps():
    # 200 servers: every synthesizer but ring is over best's cost estimate, so best is
    # ring without materialising its 80k transfers; its decision is recorded as before.
    spec = "leafspine:200,bw=400Gbps"
    topo = from_spec(spec)
    nodes = tuple(range(200))
    names, skipped = best_candidates(topo, "allreduce", 200)
    assert names == ["ring"] and skipped
    timer = CommTimer(System(topo, 1600, 8, True, 4.5e11), BEST, "flow", routing="ecmp")
    got = timer.inter_collective("allreduce", nodes, 1e9)
    assert got.time_s == _materialised(spec, "allreduce", nodes, 1e9, "ecmp")[0]
    (choice,) = timer.decisions()
    assert choice.algorithm == "ring" and choice.skipped == skipped
    rep = choice.size_bytes
    assert choice.time_s == choice.ring_time_s == _materialised(spec, "allreduce", nodes, rep,
                                                                "ecmp")[0]
    # Bandwidth-bound ring all-reduce on a non-blocking fabric: 2 (n-1)/n S / B plus
    # the flow model's per-step latency, so within a few per cent of the closed form.
    closed = 2 * 199 / 200 * 1e9 / (400e9 / 8)
    assert closed <= got.time_s <= 1.05 * closed


def test_a_2048_server_ring_is_timed_without_its_schedule():
    # 8.4 million transfers if materialised; from its steps a few thousand.
    topo = from_spec("leafspine:2048,bw=400Gbps")
    timer = CommTimer(System(topo, 2048 * 8, 8, True, 4.5e11), BEST, "flow", routing="ecmp")
    got = timer.inter_collective("allreduce", tuple(range(2048)), 8e9)
    # Closed form: 2 (n-1) steps, each a shard of S/n at the link rate after the latency
    # of the longest neighbour path (server-leaf-spine-leaf-server, 4 links of 1 us).
    steps = 2 * 2047
    assert got.time_s == pytest.approx(steps * (8e9 / 2048 / (400e9 / 8) + 4e-6), rel=1e-9)
    assert got.net_bytes == pytest.approx(2 * 2047 * 8e9)
    held = max(sched.path_links.nbytes for sched, _ in timer._structure.values())
    assert held < 2 ** 20
