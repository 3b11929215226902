"""Failure what-ifs on four 128-server fabrics (issue 20): slowdown distributions.

Llama 3 70B on 128 servers of 8 H100 (1,024 GPUs), each fabric with d = 8 links of
400 Gbps per server (the server-level fabrics of ``codesign whatif``):

* ``fattree``: the full-bisection fat-tree (``search.design_point``'s spec),
* ``leafspine``: the 2:1 oversubscribed leaf-spine,
* ``torus``: a 3D torus 4x4x8 (degree 6, the torus of ``whatif``'s grid at d = 6),
* ``topoopt``: TopologyFinder (TopoOpt Algorithm 1) on the workload's demand.

The strategy on each intact fabric is the best of the same strategy search that
re-plans a job on fewer servers (:data:`search.failure_whatif.DEFAULT_FAILURE_SEARCH`,
from the feasible start), so a re-planned job is not compared against a weaker
baseline; collectives ``auto``.  Per
fabric and failure kind, ``SAMPLES`` seeded draws (:mod:`search.failure_whatif`):
mean / p50 / p99 slowdown of the time per sample and the fraction of draws in which
training cannot continue.  Racks on the switchless fabrics are 8 consecutive servers
(an assumption; on the switched ones a rack is a leaf and its servers).

Run: ``python experiments/failures/fabric_failures.py [SAMPLES]``; writes
``experiments/failures/fabric_failures.md``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from codesign.workloads import get_hardware, get_workload
from search.design_point import DesignPoint, topology_spec_for
from search.failure_whatif import DEFAULT_FAILURE_SEARCH, FailureStudy, fabric_failures
from search.strategy.feasible import feasible_start
from search.per_fabric import WorkloadPlan, best_strategies, topoopt_fabric
from search.sweeps.spec import WorkloadItem
from search.sweeps.trial import SweepPoint, plan_workloads
from topologies.failures import parse_failure_spec
from topologies.registry import from_spec

SERVERS, DEGREE, RATE = 128, 8, 400e9 / 8
KINDS = ("links=1%", "links=10%", "switches=1", "servers=1", "racks=1")


def fabrics(hw, wl, start):
    out = {}
    for fam, degree in (("fattree", DEGREE), ("leafspine", DEGREE), ("torus", 6)):
        spec = topology_spec_for(DesignPoint(fam, SERVERS, degree, RATE))
        out[f"{fam} ({spec})"] = from_spec(spec)
    point = SweepPoint("topoopt", SERVERS, DEGREE, RATE, gpu=hw.name,
                       workloads=(WorkloadItem(wl.name),), search_evaluations=0)
    plans = plan_workloads(point, hw)
    out[f"topoopt (d={DEGREE}, 400Gbps)"] = topoopt_fabric(SERVERS, DEGREE, RATE, plans,
                                                           [start], hw, 0)
    return out


def main(samples: int = 10) -> str:
    hw, wl = get_hardware("H100"), get_workload("llama3-70b")
    start = feasible_start(wl, SERVERS * hw.gpus_per_server, hw)
    lines = [f"# Failure what-ifs: Llama 3 70B on 128 x 8 H100, {samples} samples per cell",
             "", f"Feasible start `{start.strategy}`, then the strategy search "
             f"({DEFAULT_FAILURE_SEARCH.evaluations} evaluations) on every intact fabric; "
             "collectives `auto`; slowdown = time per sample after / before.", "",
             "| fabric | intact strategy | failures | mean | p50 | p99 | cannot continue | "
             "re-planned | s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, topo in fabrics(hw, wl, start).items():
        best = best_strategies(topo, [WorkloadPlan(wl.name, 1.0, None, wl, start)], hw,
                               collective_method="auto", budget=DEFAULT_FAILURE_SEARCH)[0]
        intact = best.candidate
        for i, kind in enumerate(KINDS):
            text = f"{kind},seed={i}" + (",rack_size=8" if topo.switches == 0 else "")
            if kind.startswith("switches") and topo.switches == 0:
                lines.append(f"| {name} | | {kind} | (no switches) | | | | | |")
                continue
            r = fabric_failures(topo, [(wl, 1.0, intact)], hw,
                                FailureStudy(parse_failure_spec(text), samples))
            f = lambda v: "-" if v is None else f"{v:.3f}x"
            lines.append(f"| {name} | `{intact.strategy}` | {kind} | {f(r.mean)} | {f(r.p50)} | {f(r.p99)} | "
                         f"{r.stopped_fraction:.0%} (partitioned {r.partitioned}) | "
                         f"{r.replanned} | {r.seconds:.0f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    t0 = time.perf_counter()
    text = main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    text += f"\nTotal {time.perf_counter() - t0:.0f} s (`python experiments/failures/" \
            f"fabric_failures.py {sys.argv[1] if len(sys.argv) > 1 else 10}`).\n"
    Path(__file__).with_suffix(".md").write_text(text, encoding="utf-8")
    print(text)
