"""Benchmark: TopoOpt's OCS-reconfig baseline (reconfigurable-fabric flow simulation).

Replays the strategies that ``experiments/topoopt/sec5_3_iteration_times.py`` found
(cached in ``experiments/topoopt/sec5_3_results.json``: 128 servers of 4 A100, d = 4)
on the reconfigurable circuit fabric of TopoOpt Sec. 5.1 / App. E.4 (Algorithm 5 every
50 ms, 10 ms pauses, host forwarding) through
:func:`evaluators.iteration.reconfig.evaluate_reconfigurable`, at the default
event-batching tolerance (``rtol = 0.05``) and, with ``--exact``, also at ``rtol = 0``
(exact max-min events, the oracle the batched run must stay within ``rtol`` of).
Prints one row per point (iteration time, reconfigurations, bandwidth tax, seconds) and
appends the table to ``experiments/benchmarks/RESULTS.md``.  ``--json PATH`` also writes
the numbers (after every point), and ``--compare PATH`` prints the relative change
against such a file (used to measure how much a change of the simulation loop moves the
results).  Seconds per point range from 0.1 s (VGG16) to minutes (CANDLE and NCF at
10 Gbps; exact runs 5-10x longer).

Usage::

    python experiments/benchmarks/bench_reconfig.py [--models bert dlrm ...]
        [--rates 10 40 100 200] [--exact] [--json out.json] [--compare before.json
        [--compared-only]] [--no-append]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from codesign.workloads import demand_for, parse_strategy
from evaluators.iteration.reconfig import evaluate_reconfigurable
from search.topoopt.alternating import OptimizeSpec
from search.strategy.space import Candidate
from topologies.topoopt import ocs_reconfig

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

CACHE = Path(__file__).parents[1] / "topoopt" / "sec5_3_results.json"
MODELS = ("candle", "vgg16", "bert", "dlrm", "ncf", "resnet50")


def _candidate(rec: dict) -> Candidate:
    p = rec["placement"]
    tables = tuple(p["table_servers"]) if p.get("table_servers") else None
    return Candidate(parse_strategy(p["strategy"]), tuple(p["order"]), tables)


def run_point(rec: dict, rtol: float) -> dict:
    """OCS-reconfig on one cached sec5_3 point at event-batching tolerance ``rtol``."""
    spec = OptimizeSpec(rec["model"], 128, rec["degree"], f"{rec['gbps']:g}Gbps",
                        config="simulation", seed=rec["seed"], collective_method="auto")
    c = _candidate(rec)
    demand = demand_for(spec.load_workload(), c.strategy, spec.hw,
                        c.placement(spec.gpus_per_server), check=True)
    t0 = time.perf_counter()
    # As search.topoopt.alternating.ocs_reconfig_baseline, with the tolerance exposed.
    r = evaluate_reconfigurable(
        demand, degree=spec.degree, bandwidth_Bps=spec.bandwidth_Bps,
        fabric_Bps=spec.hw.fabric_bandwidth_Bps, delay_s=spec.reconfig_delay_s,
        policy=lambda matrix, d: ocs_reconfig(matrix, d, seed=spec.seed).circuits, rtol=rtol)
    return {"iteration_time_s": r.iteration_time_s, "seconds": time.perf_counter() - t0,
            "notes": f"{r.reconfigurations} reconf., tax {r.bandwidth_tax:.4f}",
            "bandwidth_tax": r.bandwidth_tax, "reconfigurations": r.reconfigurations}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--rates", nargs="+", type=float, default=[10, 40, 100, 200])
    ap.add_argument("--exact", action="store_true", help="also run at rtol = 0")
    ap.add_argument("--json", help="write the numbers to this file")
    ap.add_argument("--compare", help="a --json file of an earlier run to compare with")
    ap.add_argument("--compared-only", action="store_true",
                    help="only the points the --compare file has")
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    args = ap.parse_args()

    cache = json.loads(CACHE.read_text())
    before = json.loads(Path(args.compare).read_text()) if args.compare else {}
    out, rows, worst = {}, [], 0.0
    for m in args.models:
        for r in args.rates:
            key = f"{m}|d=4|B={r:g}Gbps|rounds=2|budget=8|seed=0|baselines=topoopt-strategy"
            if key not in cache or (args.compared_only and key not in before):
                continue
            rec = cache[key]
            runs = {"0.05": run_point(rec, 0.05)}
            if args.exact:
                runs["0"] = run_point(rec, 0.0)
            out[key] = runs
            cells = []
            for tol, res in runs.items():
                cell = (f"rtol {tol}: {res['iteration_time_s'] * 1e3:.4f} ms "
                        f"({res['notes']}; {res['seconds']:.1f} s)")
                old = before.get(key, {}).get(tol)
                if old:
                    rel = res["iteration_time_s"] / old["iteration_time_s"] - 1
                    worst = max(worst, abs(rel))
                    cell += f", vs before {rel:+.2e}"
                cells.append(cell)
            exact = runs.get("0") or before.get(key, {}).get("0")
            if exact:
                dev = runs["0.05"]["iteration_time_s"] / exact["iteration_time_s"] - 1
                cells.append(f"batched vs exact{'' if '0' in runs else ' (--compare)'} "
                             f"{dev:+.2e}")
            rows.append((f"{m} {r:g} Gbps", "; ".join(cells)))
            print_rows(rows[-1:])
            if args.json:
                Path(args.json).write_text(json.dumps(out, indent=1))
    if before:
        rows.append(("largest change vs --compare", f"{worst:.2e} (relative)"))
    table = markdown_table(rows)
    print(table)
    if not args.no_append:
        append_result("OCS-reconfig baseline on the sec5_3 strategies (128 servers, d = 4)",
                      "python " + " ".join(sys.argv), table)


if __name__ == "__main__":
    main()
