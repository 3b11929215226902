"""Failure what-ifs: slowdown distributions (search.failure_whatif)."""

import pytest

from codesign.errors import InvalidSpecError

from codesign.workloads import get_hardware, get_workload
from search.failure_whatif import FailureStudy, fabric_failures, format_failure_summary
from search.strategy.feasible import feasible_start
from topologies.failures import parse_failure_spec
from topologies.registry import from_spec

HW = get_hardware("A100-80")
WL = get_workload("resnet50")


def _mix(servers):
    return [(WL, 1.0, feasible_start(WL, servers * HW.gpus_per_server, HW))]


def _study(text, samples=3):
    return FailureStudy(parse_failure_spec(text), samples)


@pytest.mark.parametrize("spec", ["fattree:servers=16,radix=8", "torus:4x4",
                                  "perms:16,p=1:3:5"])
def test_removing_nothing_gives_no_slowdown(spec):
    r = fabric_failures(from_spec(spec), _mix(16), HW, _study("links=0%,seed=1"))
    assert r.slowdowns == (1.0, 1.0, 1.0)
    assert (r.partitioned, r.cannot_fit, r.replanned) == (0, 0, 0)


def test_partitioned_fabric_is_reported_as_such():
    # One switch joins every server: failing it leaves 16 isolated servers.
    r = fabric_failures(from_spec("switch:16"), _mix(16), HW, _study("switches=1,seed=0"))
    assert r.partitioned == 3 and r.slowdowns == () and r.stopped_fraction == 1.0
    assert "no sample could continue" in format_failure_summary(r.to_dict())


def test_lost_server_replans_with_the_batch_rounded_to_the_survivors():
    # 1 of 16 servers lost: data parallelism over 120 GPUs, the batch of 65,536 rounded to
    # 65,520 -- time per sample grows by about 16/15 (compute-bound ResNet-50).
    r = fabric_failures(from_spec("torus:4x4"), _mix(16), HW, _study("servers=1,seed=2", 2))
    assert r.replanned == 2
    for s in r.slowdowns:
        assert s == pytest.approx(16 / 15, rel=0.03)


def test_cut_off_server_is_lost_not_a_partition():
    # A fat-tree server has one link: failing it cuts that server off; the other 15 go on
    # (a switch-to-switch cable has a detour: no server lost).
    r = fabric_failures(from_spec("fattree:servers=16,radix=8"), _mix(16), HW,
                        _study("links=3,seed=3", 4))
    assert r.partitioned == 0 and r.replanned >= 1 and min(r.slowdowns) >= 1.0 - 1e-12
    assert max(r.slowdowns) <= 16 / 13 * 1.03     # at most 3 of 16 servers lost


def test_link_failures_on_a_torus_slow_down_a_little_and_are_seeded():
    t = from_spec("torus:4x4")
    a = fabric_failures(t, _mix(16), HW, _study("links=10%,seed=1"))
    b = fabric_failures(t, _mix(16), HW, _study("links=10%,seed=1"))
    assert a.slowdowns == b.slowdowns
    assert all(1.0 <= s < 1.5 for s in a.slowdowns) and a.replanned == 0


def test_samples_are_checked():
    with pytest.raises(InvalidSpecError, match="--samples"):
        FailureStudy(parse_failure_spec("links=1"), 0)


def test_direct_connect_fabric_keeps_its_rings_after_a_link_failure():
    # The multiring default keeps the rings a degraded TopoOpt fabric still provides for
    # >= 90 % of their hops (and forwards around the failed hop), not new rings.
    from evaluators.algorithms.multiring import MOSTLY_PROVIDED, direct_generators

    npus = tuple(range(16))
    assert direct_generators(from_spec("perms:16,p=1:3:5"), npus) == [1, 3, 5]
    left = from_spec("perms:16,p=1:3:5,fail=link:0-1")
    assert direct_generators(left, npus) == [3, 5]
    assert direct_generators(left, npus, min_fraction=MOSTLY_PROVIDED) == [1, 3, 5]
    r = fabric_failures(from_spec("perms:16,p=1:3:5"), _mix(16), HW, _study("links=1,seed=0"))
    assert all(1.0 <= s < 1.2 for s in r.slowdowns)


def test_work_is_bounded_before_sampling():
    from codesign.resources import ResourceLimitError

    # 208 nodes: 1000 samples x 5 timings x 208^2 = 2.2e8 > MAX_FAILURE_WORK, refused
    # before the baseline is timed.
    with pytest.raises(ResourceLimitError, match="--samples"):
        fabric_failures(from_spec("fattree:k=8"), _mix(128), HW, _study("links=1", 1000))


@pytest.mark.parametrize("fail", ["foo=1", "links=200%", "links=nan", "samples=0", "seed=-1"])
def test_evaluate_checks_fail_before_the_memory_check(capsys, fail):
    # Fuzzing: a strategy that does not fit answered "infeasible ... memory" (exit 1)
    # before --fail was read; a bad --fail is the caller's error (exit 2) first.
    from codesign.app.cli import main

    code = main(["evaluate", "--topology", "ideal:16,bw=400Gbps", "--workload", "llama3-8b",
                 "--hardware", "H100", "--strategy", "dp=16,tp=8,sp=true,recompute=selective",
                 "--fail", fail])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "invalid --fail" in err


def test_gpu_level_fabrics_lose_whole_servers():
    # railopt / multiplane NPUs are GPUs, 8 to a server: the failure what-if refused them
    # ("a strategy on every GPU of a server-level fabric (128 servers x 8 GPUs)") after
    # the whole what-if had run.  A lost server takes its 8 GPUs: 15 of 16 servers left,
    # time per sample about 16/15 (compute-bound ResNet-50), as on a server-level fabric.
    from search.failure_whatif import _gpus_per_npu, _whole_servers

    topo = from_spec("railopt:16,gpus=8,bw=400Gbps,scaleup_bw=300GB/s")   # A100 NVLink
    assert topo.npus == 128
    assert _whole_servers(topo, [3, 17]) == list(range(8)) + list(range(16, 24))
    assert _whole_servers(from_spec("torus:4x4"), [3]) == [3]
    mix = [(WL, 1.0, feasible_start(WL, 128, HW))]
    assert _gpus_per_npu(topo, mix, HW) == 1 and _gpus_per_npu(from_spec("torus:4x4"),
                                                               mix, HW) == 8
    r = fabric_failures(topo, mix, HW, _study("servers=1,seed=2", 2))
    assert r.replanned == 2 and r.partitioned == r.cannot_fit == 0
    for s in r.slowdowns:
        assert s == pytest.approx(16 / 15, rel=0.03)
    # A failed GPU link leaves the GPU reachable over its NVLink domain: nobody is lost.
    r = fabric_failures(topo, mix, HW, _study("links=2,seed=1", 2))
    assert r.replanned == 0 and all(s >= 1.0 - 1e-12 for s in r.slowdowns)
    with pytest.raises(InvalidSpecError, match="GPU-level"):
        fabric_failures(topo, [(WL, 1.0, feasible_start(WL, 64, HW))], HW,
                        _study("servers=1", 1))
