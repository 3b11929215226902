"""Benchmark: TopoOpt's full alternating optimisation for DLRM on 128 servers, 1 vs 2 Ray workers.

Target (issue 8): a full alternating optimisation (TopoOpt Sec. 4.1: MCMC strategy
search on the current topology, then TopologyFinder on the best strategy's demand,
repeated; :func:`search.topoopt.alternating.optimize`) for DLRM on 128 servers in under
2 minutes on 2 cores, and its speed-up from 1 to 2 Ray evaluator workers.

Setup: DLRM at TopoOpt's Sec. 5.3 configuration (zoo config ``simulation``), 128 servers
x 4 A100-80, d = 4, B = 100 Gbps (Fig. 11d), ``OptimizeSpec``'s default search
(``rounds=3``, ``budget=24`` distinct evaluations per round, ``batch=4`` proposals per
step; ``--rounds/--budget/--batch/--tolerance`` override them for a heavier search), no
baselines.  Each worker count runs once, in a fresh process-level state: a
local Ray of 2 CPUs is started before the clock and reused (Ray start-up excluded;
actor start-up included); ``--workers 0`` adds an in-process run without Ray.  The
results must be identical for every worker count (strategy, iteration time, per-round
log): the table says whether they are.

``--profile`` runs the in-process loop once under cProfile and prints the 25 most
expensive functions (cumulative), to see where the time goes.

Prints a table and appends it to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_alternating.py [--workers 1 2] [--degree 4]
        [--bandwidth 100Gbps] [--profile] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

from search.topoopt.alternating import OptimizeSpec, optimize  # noqa: E402

TARGET_S = 120.0


def signature(result) -> dict:
    """What must not depend on the worker count (``to_dict`` minus timings)."""
    d = result.to_dict()
    rounds = [{k: v for k, v in r.items() if k != "seconds"} for r in d["rounds"]]
    return {"strategy": d["strategy"], "placement": d["placement"],
            "iteration_time_s": d["iteration_time_s"], "initial_time_s": d["initial_time_s"],
            "diameter": d["diameter"], "mean_path_length": d["mean_path_length"],
            "rounds": rounds}


def profile(spec: OptimizeSpec) -> None:
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    optimize(spec, workers=0)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--degree", type=int, default=4)
    ap.add_argument("--bandwidth", default="100Gbps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None, help="default: OptimizeSpec's")
    ap.add_argument("--budget", type=int, default=None, help="default: OptimizeSpec's")
    ap.add_argument("--batch", type=int, default=None, help="default: OptimizeSpec's")
    ap.add_argument("--tolerance", type=float, default=None, help="default: OptimizeSpec's")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    search = {k: getattr(args, k) for k in ("rounds", "budget", "batch", "tolerance")
              if getattr(args, k) is not None}
    spec = OptimizeSpec("dlrm", 128, args.degree, args.bandwidth, config="simulation",
                        baselines=(), seed=args.seed, collective_method="auto",
                        **search)   # "auto": comparable with the earlier rows
    if args.profile:
        profile(spec)
        return 0
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    walls, inner, sigs, res = {}, {}, {}, None
    try:
        for w in args.workers:
            t0 = time.perf_counter()
            res = optimize(spec, workers=w)
            walls[w] = time.perf_counter() - t0
            inner[w] = res.seconds
            sigs[w] = signature(res)
            print(f"workers={w}: {walls[w]:.1f} s wall ({res.seconds:.1f} s in the loop), "
                  f"{res.candidate.strategy} {res.iteration_time_s:.4g} s", flush=True)
    finally:
        ray.shutdown()
    base = args.workers[0]
    same = all(s == sigs[base] for s in sigs.values())
    evals = sum(r["evaluations"] for r in sigs[base]["rounds"])
    rows = [("workload / servers / d / B",
             f"dlrm (simulation) / 128 / {args.degree} / {args.bandwidth}"),
            ("search", f"rounds={spec.rounds}, budget={spec.budget}, batch={spec.batch}, "
                       f"restarts={spec.restarts}, tolerance={spec.tolerance:g}"
                       f"{' (defaults)' if not search else ''}; "
                       f"{len(sigs[base]['rounds'])} rounds run, "
                       f"{evals} distinct evaluations"),
            ("result", f"{sigs[base]['strategy']}, {sigs[base]['iteration_time_s']:.4g} s "
                       f"(start {sigs[base]['initial_time_s']:.4g} s)")]
    for w in args.workers:
        verdict = f" (target < {TARGET_S:g} s: {'met' if walls[w] < TARGET_S else 'MISSED'})"
        rows.append((f"workers={w} wall s", f"{walls[w]:.1f}{verdict}; loop {inner[w]:.1f}"))
    if 1 in walls and 2 in walls:
        rows.append(("speed-up 1 -> 2 workers", f"{walls[1] / walls[2]:.2f}x"))
    rows.append(("same result for every worker count", "yes" if same else "NO"))
    print_rows(rows)
    if not args.no_append:
        cmd = "python experiments/benchmarks/bench_alternating.py " + " ".join(
            argv if argv is not None else sys.argv[1:])
        append_result("TopoOpt alternating optimisation (DLRM, 128 servers)", cmd.strip(),
                      markdown_table(rows))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
