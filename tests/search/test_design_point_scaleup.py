"""GPU-level designs (railopt, multiplane) carry their GPU's NVLink bandwidth.

Oracle: the hardware catalog's ``fabric_bandwidth`` of the GPU (NVIDIA datasheets, per
direction: B200 / GB200 900 GB/s, H100 / H200 450 GB/s, A100 300 GB/s), read from
``codesign/workloads/data/hardware.yaml``, not restated here.  Before the fix every
design of these families had NVLink 4's 450 GB/s whatever the GPU.
"""

from __future__ import annotations

import pytest

from codesign.workloads import get_hardware, hardware_names
from search.design_point import DesignPoint, topology_spec_for
from search.sweeps.spec import WorkloadItem
from search.sweeps.trial import SweepPoint, cached_topology, evaluate_trial
from topologies.registry import from_spec

G400 = 400e9 / 8


@pytest.mark.parametrize("family", ["railopt", "multiplane"])
@pytest.mark.parametrize("gpu", hardware_names())
def test_a_design_for_a_gpu_has_its_nvlink(family: str, gpu: str) -> None:
    hw = get_hardware(gpu)
    point = DesignPoint(family, 2, hw.gpus_per_server, G400)
    spec = topology_spec_for(point, hw)
    topo = from_spec(spec)
    assert topo.params["scaleup_bandwidth_Bps"] == pytest.approx(hw.fabric_bandwidth_Bps,
                                                                 rel=1e-12)
    # Every GPU's link to its domain's crossbar has that bandwidth.
    first, count = topo.params["scaleup_switches"]
    to_crossbar = (topo.dst >= first) & (topo.dst < first + count)
    assert int(to_crossbar.sum()) == topo.npus
    assert topo.bandwidth[to_crossbar] == pytest.approx(hw.fabric_bandwidth_Bps, rel=1e-12)
    # A catalog name works as the Hardware does; H100 / H200 specs are the ones without
    # a GPU (the families' default is their NVLink 4).
    assert topology_spec_for(point, gpu) == spec
    if gpu in ("H100", "H200"):
        assert spec == topology_spec_for(point)


def test_a_design_without_a_domain_is_unchanged() -> None:
    point = DesignPoint("railopt", 4, 1, G400)
    assert topology_spec_for(point, "B200") == topology_spec_for(point)
    for family in ("fattree", "leafspine", "ideal", "torus", "perms"):
        point = DesignPoint(family, 16, 4, G400)
        assert topology_spec_for(point, "B200") == topology_spec_for(point)


@pytest.mark.parametrize("family, spec", [
    ("railopt", "railopt:2,gpus=8,scaleup=8,bw=400Gbps,scaleup_bw=900GB/s"),
    ("multiplane", "multiplane:16,planes=2,scaleup=8,bw=200Gbps,scaleup_bw=900GB/s")])
def test_a_b200_sweep_trial_times_b200_nvlink(family: str, spec: str) -> None:
    """The sweep / what-if path (evaluate_trial, which what-if answers are timed and
    priced with): a B200 design records and times 900 GB/s NVLink, and is faster than
    the same design at H100 NVLink (tensor parallelism inside the server)."""
    b200 = get_hardware("B200")
    mix = (WorkloadItem("llama3-8b", 1.0, strategy="dp=2,tp=8,microbatches=8",
                        options=(("batch_size", 64),)),)
    kw = dict(workloads=mix, collective_method="ring", search_evaluations=0,
              comm_overlap="none")
    out = evaluate_trial(SweepPoint(family, 2, 8, G400, gpu="B200", **kw))
    assert out.status == "complete", out.reason
    assert out.metrics["topology_spec"] == spec
    topo = cached_topology(spec)
    assert topo.params["scaleup_bandwidth_Bps"] == b200.fabric_bandwidth_Bps
    from evaluators.iteration import evaluate

    slow = evaluate(from_spec(spec.replace("scaleup_bw=900GB/s", "scaleup_bw=450GB/s")),
                    mix[0].load(), "dp=2,tp=8,microbatches=8", hardware=b200,
                    collective_method="ring", tp_comm_overlap=False,
                    param_gather_overlap=False, pp_comm_overlap=False)
    assert out.metrics["iteration_time_s"] < slow.iteration_time_s
