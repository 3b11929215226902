"""1024 H100 GPUs (128 DGX-class servers), 400 Gb/s of scale-out per GPU: which fabric?

Fabrics (same 400 Gb/s per GPU, NVSwitch 450 GB/s inside each 8-GPU server, priced from
the 2026 parts catalog, topologies/data/parts-2026.yaml):

* ``railopt``  rail-optimised 2-tier Clos, 64 x 400G switches (DGX SuperPOD 4 SU);
* ``multiplane`` 2 planes of 200G ports on 51.2T switches as 256 x 200G (one tier less
  per plane at this size: a single switch per plane-leaf group);
* ``leafspine 2:1`` 2-tier Clos of 48-port leaves (32 down, 16 up), server GPUs on one leaf;
* ``fattree`` non-blocking 2-tier Clos of 64-port switches, server GPUs on one leaf;
* ``topoopt (perms)`` direct-connect of the 128 servers through an OCS, 8 x 400G
  interfaces per server in TotientPerms rings i -> i + p (p = 1, 3, ..., 15), TopoOpt's
  all-reduce permutations (server-level NPUs, multiring collectives, host forwarding).

Workloads: Llama-3 70B (tp=8 in the server, pp=4, dp=32), Mixtral 8x7B with expert
parallelism (ep=8 across servers), DLRM (pure data parallel + model-parallel embedding
all-to-all).  Clos fabrics are routed by D-mod-k (``--routing dmodk``), the multi-plane
one by spraying every pair over its two planes (``--routing spray``, D-mod-k inside a
plane; the ``auto`` default on multi-plane fabrics).  Every (fabric, workload) is timed
with the communication overlap today's Megatron-core stacks switch on, the co-design
commands' default policy (``comm_overlap_options("framework", strategy)``, passed to
``evaluate``): for these strategies the distributed optimizer's parameter all-gather
overlaps the next forward (Llama and Mixtral run ZeRO-1; DLRM has no ZeRO); TP overlap
needs sequence parallelism and pipeline-send overlap the interleaved schedule, neither of
which these strategies use.

Run: ``python experiments/topologies/whatif_1024_h100.py`` (a minute or so on 2 cores);
writes ``experiments/topologies/whatif_1024_h100.md``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from codesign.workloads import Placement
from evaluators.iteration import comm_overlap_options, evaluate
from topologies.cost import load_catalog, topology_cost
from topologies.registry import from_spec

FABRICS = {
    "railopt": ("railopt:128,gpus=8,bw=400Gbps", "gpu"),
    "multiplane": ("multiplane:1024,planes=2,radix=256,bw=200Gbps,scaleup=8", "gpu"),
    "leafspine 2:1": ("fattree:servers=1024,radix=48,oversub=2,scaleup=8,bw=400Gbps", "gpu"),
    "fattree": ("fattree:servers=1024,radix=64,scaleup=8,bw=400Gbps", "gpu"),
    "topoopt (perms)": ("perms:128,p=1:3:5:7:9:11:13:15,bw=400Gbps", "server"),
}
WORKLOADS = {
    "llama3-70b": "dp=32,tp=8,pp=4,microbatches=64,zero=1",
    "mixtral-8x7b": "dp=32,tp=8,pp=4,ep=8,microbatches=4,zero=1",
    "dlrm": "dp=1024,embedding=model",
}


READING = """## Reading the ranking

* **The communication overlap changes no ranking.** Every row is timed with the
  co-design commands' default policy (`comm_overlap: framework`). For these strategies
  it hides one thing, the ZeRO-1 parameter all-gather under the next forward: Llama 3
  70B's iteration is 91 ms shorter on every fabric (21,342.4 -> 21,251.4 ms on the
  rail-optimised fabric, 23,418.2 -> 23,327.2 ms on the direct connect, 0.4 %), Mixtral's
  7.9-13.4 ms on the Clos fabrics and 82.6 ms on the direct connect; DLRM (no ZeRO) is
  unchanged. The gain shows in the iteration and exposed-communication columns only:
  the tp / ep / dp / pp columns are communication times before any overlap (Llama's
  dp column, 99.6 ms on the rail-optimised fabric, is the same under both policies).
  TP overlap stays off because these strategies run tensor parallelism without
  sequence parallelism, so Llama's 2.9 s of TP all-reduces inside the server stay
  exposed, and pipeline-send overlap needs the interleaved schedule, which they do not
  use. (The `none` numbers are from the same script run with
  `comm_overlap_options("none", strategy)`: both rankings above, by summed time and by
  time x cost, come out the same under it, the 2:1 leaf-spine first on time x cost with
  124.15 s x $M against 123.61 with the overlap.)
* **Among the Clos fabrics the network hardly moves the iteration time** of these
  strategies: tensor parallelism stays inside the NVSwitch domain (identical `tp`),
  pipeline sends are small, and D-mod-k routes the data-parallel rings without
  contention on every non-blocking Clos. The rail-optimised and the server-on-one-leaf
  fat tree are the same size (32 leaves and 16 spines of 64 x 400G, 48 switches) and
  time within 0.1 %; the 2:1 leaf-spine loses a little on the expert all-to-all (`ep`
  183.0 against 156.0 ms, cross-leaf traffic through half the uplinks) and on pipeline
  sends (121.6 against 78.7 ms), and its concurrent expert-replica gradient rings share
  the halved uplinks (Mixtral's `dp` 13.5 against 8.3 ms: the groups of one concurrent
  set take at least their busiest shared link's time), 0.43 % on the sum of the three
  iterations, and costs
  9 % less ($5.19M against $5.71M), so it wins time x cost for this mix (123.61 against
  135.41 s x $M for the rail-optimised fabric). Rails pay off for traffic that crosses
  servers between same-rank GPUs, which is all of it here, so the two non-blocking
  fabrics tie.
* **Multi-plane times as the non-blocking fat tree and loses on price**: its NICs spray
  every pair over the two 200G planes (`--routing spray`, `topologies.routing.
  spray_paths`, for MP transfers and collective transfers alike), so a GPU pair gets the
  GPU's full 400G and the 2-plane fabric is non-blocking like the fat tree (iteration
  times equal to 0.02 %). It is the most expensive here ($6.01M): a single tier per
  plane halves the switches (24 against 48) but every GPU has two 200G ports, so it
  needs twice the transceivers and fibres (8,192 against 4,096 transceivers, $2.46M
  against $2.05M); it draws 6 % less power (88.5 against 94.4 kW). The one tier saves
  latency, which these bandwidth-bound iterations hardly see. (Pinning each pair to one
  plane, `--routing dmodk`, halves its bandwidth: DLRM 70.0 ms instead of 62.8 ms.)
* **Direct connect vs Clos, with hierarchical collectives on both.** The Clos fabrics
  are GPU-level topologies with 8-GPU NVSwitch domains; the iteration model runs a
  collective that spans domains as NCCL does on rail-optimised clusters (reduce-scatter
  inside the server, one collective of 1/8 of the data per rail, all-gather inside;
  `evaluators.iteration.comm`), the direct connect runs server-level hierarchical
  collectives over its TotientPerms rings. (With flat 1024-rank rings on the Clos
  fabrics DLRM's data-parallel all-reduce took 434 ms, as commit a49ee8d records; not
  rerun here.) DLRM's all-reduce takes 58.6 ms on the Clos fabrics against 22.8 ms on
  the direct connect, whose ring steps are one direct link instead of two to four
  switch hops (DLRM's 25 MiB buckets are latency bound over 128-rank rings), so DLRM
  runs twice as fast there (31.4 against 62.8 ms). The direct connect loses on Mixtral's
  expert all-to-all (2.4 s against 0.16 s: 8 static permutation rings with host
  forwarding) and on Llama's pipeline sends (1,408.6 against 78.7 ms), so it is last on
  this mix: 30.119 s summed, 27 % more than the rail-optimised fabric's 23.711 s, and
  155.90 s x $M although it is the cheapest network ($5.18M); Mixtral's concurrent
  data-parallel rings also share the permutation links (`dp` 82.6 ms, each ring alone
  61.8)."""


def main() -> int:
    catalog = load_catalog("parts-2026")
    rows = []
    for fabric, (spec, level) in FABRICS.items():
        topo = from_spec(spec)
        cost = topology_cost(topo, catalog=catalog)
        direct = topo.switches == 0
        for workload, strategy in WORKLOADS.items():
            t0 = time.perf_counter()
            r = evaluate(topo, workload, strategy, hardware="H100",
                         placement=Placement(128, 8),
                         collective_method="multiring" if direct else "ring",
                         routing="shortest" if direct else
                         "spray" if spec.startswith("multiplane") else "dmodk",
                         **comm_overlap_options("framework", strategy))
            rows.append((fabric, spec, workload, r, cost, time.perf_counter() - t0))
            print(f"{fabric:16} {workload:14} {r.iteration_time_s * 1e3:10.1f} ms  "
                  f"${cost.total_usd / 1e6:6.2f}M  {cost.power_w / 1e3:6.1f} kW",
                  file=sys.stderr)
    out = ["# 1024 H100: rail-optimised vs multi-plane vs 2:1 leaf-spine vs fat tree vs "
           "TopoOpt-style direct connect", "",
           "Generated by `python experiments/topologies/whatif_1024_h100.py` (module "
           "docstring: fabrics, workloads, routing). Every row is timed with the "
           "communication overlap of the co-design commands' default policy "
           "(`comm_overlap: framework`, `evaluators.iteration.comm_overlap_options`). "
           "Network cost and power from "
           "`--catalog parts-2026` (estimates, 2026-11; GPUs and servers not included).", "",
           "| fabric | spec | network $M | network kW | workload | iteration ms | "
           "exposed comm ms | tp / ep / dp / pp ms |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for fabric, spec, workload, r, cost, _ in rows:
        out.append(f"| {fabric} | `{spec}` | {cost.total_usd / 1e6:.2f} | "
                   f"{cost.power_w / 1e3:.1f} | {workload} | {r.iteration_time_s * 1e3:.1f} | "
                   f"{r.exposed_communication_s * 1e3:.1f} | {r.tp_s * 1e3:.1f} / "
                   f"{(r.ep_s + r.embedding_s) * 1e3:.1f} / {r.dp_s * 1e3:.1f} / "
                   f"{r.pp_s * 1e3:.1f} |")
    out += ["", "Per fabric, iteration time summed over the three workloads x network cost "
            "(lower is better):", "", "| fabric | sum of iteration s | $M | s x $M |",
            "| --- | --- | --- | --- |"]
    for fabric in FABRICS:
        mine = [row for row in rows if row[0] == fabric]
        total = sum(row[3].iteration_time_s for row in mine)
        usd = mine[0][4].total_usd / 1e6
        out.append(f"| {fabric} | {total:.3f} | {usd:.2f} | {total * usd:.2f} |")
    out += ["", READING]
    path = Path(__file__).with_suffix(".md")
    path.write_text("\n".join(out) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
