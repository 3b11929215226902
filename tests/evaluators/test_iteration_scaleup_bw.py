"""A scale-up domain whose spec leaves its bandwidth out runs at the GPU's NVLink.

Oracles: the hardware catalog's ``fabric_bandwidth`` (B200 900 GB/s per direction, H100
450, A100 300), and the Ideal Switch (``ideal:N``), whose servers join their GPUs with
that same catalog bandwidth: tensor parallelism inside a server takes the same time on
both.  Before the fix, ``railopt:2,gpus=8,bw=400Gbps`` with B200 gave tp_s 1.090 s
against the ideal switch's 0.543 s (H100's 450 GB/s NVLink).
"""

from __future__ import annotations

import json

import pytest

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from codesign.workloads import get_hardware, get_workload
from evaluators.iteration import Cluster, evaluate
from topologies.failures import Failures, degrade
from topologies.families.scaleup import with_gpu_scaleup
from topologies.registry import from_spec

STRATEGY = "dp=2,tp=8,microbatches=8"
#: What ``codesign evaluate --comm-overlap none`` runs (its other defaults: the fastest
#: synthesizer per collective, routing by fabric).
CLI = dict(collective_method="best", routing="auto", tp_comm_overlap=False,
           param_gather_overlap=False, pp_comm_overlap=False)


def _tp_s(spec: str, gpu: str) -> float:
    workload = get_workload("llama3-8b", batch_size=64)
    return evaluate(spec, workload, STRATEGY, hardware=gpu, **CLI).tp_s


def test_b200_on_a_rail_optimised_fabric_has_b200_nvlink() -> None:
    ideal = _tp_s("ideal:2,bw=400Gbps", "B200")
    assert _tp_s("railopt:2,gpus=8,bw=400Gbps", "B200") == pytest.approx(ideal, rel=0.01)
    assert _tp_s("multiplane:16,planes=2,scaleup=8,bw=200Gbps", "B200") == \
        pytest.approx(ideal, rel=0.01)
    assert _tp_s("fattree:servers=16,radix=8,scaleup=8,bw=400Gbps", "B200") == \
        pytest.approx(ideal, rel=0.01)


def test_the_cli_case_of_the_report(capsys) -> None:
    args = ["evaluate", "--workload", "llama3-8b", "--hardware", "B200", "--strategy", STRATEGY,
            "--option", "batch_size=64", "--comm-overlap", "none", "--json", "--topology"]
    out = {}
    for spec in ("railopt:2,gpus=8,bw=400Gbps", "ideal:2,bw=400Gbps"):
        assert main(args + [spec]) == 0
        out[spec] = json.loads(capsys.readouterr().out)
    rail, ideal = out["railopt:2,gpus=8,bw=400Gbps"], out["ideal:2,bw=400Gbps"]
    assert rail["tp_s"] == pytest.approx(ideal["tp_s"], rel=0.01)
    # The topology is named with the bandwidth it was given.
    assert rail["topology"] == "railopt:2,gpus=8,bw=400Gbps,scaleup_bw=900GB/s"


@pytest.mark.parametrize("spec", ["railopt:2,gpus=8,bw=400Gbps",
                                  "multiplane:16,planes=2,scaleup=8,bw=200Gbps",
                                  "fattree:servers=16,radix=8,scaleup=8,bw=400Gbps", "nvl:8",
                                  "railopt:2,gpus=8,bw=400Gbps,fail=link:0-16"])
@pytest.mark.parametrize("gpu", ["B200", "GB200-NVL72", "H100", "A100-80"])
def test_the_domain_takes_the_catalog_value(spec: str, gpu: str) -> None:
    hw = get_hardware(gpu)
    topo = Cluster(spec, gpu).topology
    assert topo.params["scaleup_bandwidth_Bps"] == hw.fabric_bandwidth_Bps
    key = "bw" if spec.startswith("nvl") else "scaleup_bw"
    intact = from_spec(spec)
    if intact.params["scaleup_bandwidth_Bps"] == hw.fabric_bandwidth_Bps:
        assert topo.name == spec                       # the default is this GPU's: kept
    else:
        assert topo.name == f"{spec},{key}={hw.fabric_bandwidth_Bps / 1e9:g}GB/s"
        assert not topo.params.get("scaleup_bandwidth_default")
    assert topo.n_links == intact.n_links and topo.npus == intact.npus
    assert {float(b) for b in topo.bandwidth} - {float(b) for b in intact.bandwidth} <= \
        {hw.fabric_bandwidth_Bps}


@pytest.mark.parametrize("spec", ["railopt:2,gpus=8,bw=400Gbps,scaleup_bw=450GB/s",
                                  "nvl:8,bw=900GB/s", "hgx-h100:2"])
def test_a_bandwidth_in_the_spec_is_kept(spec: str) -> None:
    intact = from_spec(spec)
    for gpu in ("B200", "H100", "A100-80"):
        assert Cluster(intact, gpu).topology is intact


def test_h100_results_do_not_move() -> None:
    """H100's NVLink is the Clos families' default: the same topology object, the same
    time as with the bandwidth written out."""
    spec = "railopt:2,gpus=8,bw=400Gbps"
    topo = from_spec(spec)
    assert Cluster(topo, "H100").topology is topo
    assert _tp_s(spec, "H100") == _tp_s(spec + ",scaleup_bw=450GB/s", "H100")


def test_a_degraded_copy_cannot_be_rebuilt() -> None:
    topo = from_spec("railopt:2,gpus=8,bw=400Gbps")
    left = degrade(topo, Failures(links=(0,)))
    with pytest.raises(InvalidSpecError, match="scaleup_bw=900GB/s"):
        with_gpu_scaleup(left, 900e9)
    assert with_gpu_scaleup(left, 450e9) is left
