"""Benchmark: what a sweep's small strategy-search budget finds, plain vs guided.

The sweeps and the what-if give every fabric a strategy search of 12-16 evaluations per
workload (``strategy_search``).  This times Llama 3 70B on 64 and 128 servers of 8 H100
(the LLM/MoE sweep's fabrics: 2D torus and 2:1 leaf-spine, 100 and 400 Gb/s) from the
feasible start with

* ``plain``: FlexFlow's MCMC, proposals drawn uniformly over the moves and timed as
  drawn (``codesign optimize`` keeps it);
* ``guided``: the same chain with every proposal made to fit in memory
  (:func:`search.strategy.feasible.fit_to_memory`) and half of them drawn from the moves
  acting on the current strategy's largest cost
  (:func:`search.strategy.space.guided_moves`);
* ``shapes``: one strategy per model-parallel shape timed first
  (:func:`search.strategy.feasible.shape_candidates`, at most ``--shapes``, default 32),
  then the guided chain from the fastest (:func:`search.per_fabric.best_strategies`) --
  what sweeps and what-ifs run;

at ``--budget`` chain evaluations (default 12) over ``--seeds`` seeds, and a plain search
of ``--reference`` evaluations (default 64, one seed) as the yardstick.  Reports the best
iteration time each finds (mean over the seeds), the evaluations and the wall time.

``--long-context`` times Llama 3 70B with 128 sequences of 128k tokens instead (the
400 Gb/s fabrics only), where tensor parallelism alone fits only with full
recomputation and context parallelism is the alternative the shapes screen
(:func:`search.strategy.feasible.shape_candidates`, "Long sequences").

Prints a table and appends it to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_strategy_search.py [--budget 12] [--seeds 3]
        [--reference 64] [--shapes 32] [--long-context] [--no-append]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

CASES = (("torus:8x8,bw=100Gbps", 64), ("torus:8x16,bw=100Gbps", 128),
         ("leafspine:64,oversub=2,hosts_per_leaf=32,bw=100Gbps", 64),
         ("leafspine:128,oversub=2,hosts_per_leaf=64,bw=100Gbps", 128),
         ("torus:8x16,bw=400Gbps", 128),
         ("leafspine:128,oversub=2,hosts_per_leaf=64,bw=400Gbps", 128))


def search(topo, workload, start, timing, budget: int, seed: int, guided: bool):
    """Best time (s) and wall time (s) of one chain."""
    from search.strategy.chains import chain_jobs, merge, run_chains

    t0 = time.perf_counter()
    r = merge(run_chains(chain_jobs(topo, workload, start, timing, budget=budget,
                                    restarts=1, batch=4, seed=(seed, 0), guided=guided)))
    return r.search.best_time_s, r.search.initial_time_s, time.perf_counter() - t0


def screened(topo, workload, start, hw, budget: int, shapes: int, seed: int):
    """Best time (s), evaluations and wall time (s) of the sweeps' search: the shapes,
    then a guided chain (:func:`search.per_fabric.best_strategies`)."""
    from search.per_fabric import SearchBudget, WorkloadPlan, best_strategies

    t0 = time.perf_counter()
    (c,) = best_strategies(topo, [WorkloadPlan(workload.name, 1.0, None, workload, start)],
                           hw, budget=SearchBudget(budget, shapes=shapes), seed=seed)
    return c.time_s, c.evaluations, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--reference", type=int, default=64)
    ap.add_argument("--shapes", type=int, default=32)
    ap.add_argument("--long-context", action="store_true",
                    help="128 sequences of 128k tokens, 400 Gb/s fabrics only")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()

    from codesign.workloads import get_hardware, get_workload
    from search.strategy.chains import Timing
    from search.strategy.feasible import feasible_start
    from topologies.registry import from_spec

    hw = get_hardware("H100")
    w = (get_workload("llama3-70b", seq_len=131072, batch_size=128) if args.long_context
         else get_workload("llama3-70b"))
    cases = [c for c in CASES if "400Gbps" in c[0]] if args.long_context else CASES
    timing = Timing(hw, "best")
    rows = []
    for spec, servers in cases:
        topo = from_spec(spec)
        start = feasible_start(w, servers * 8, hw, gpus_per_server=8)
        cells = {}
        for guided in (False, True):
            got = [search(topo, w, start, timing, args.budget, s, guided)
                   for s in range(args.seeds)]
            cells[guided] = (statistics.mean(g[0] for g in got), [g[0] for g in got],
                             sum(g[2] for g in got))
            t_start = got[0][1]
        sh = [screened(topo, w, start, hw, args.budget, args.shapes, s)
              for s in range(args.seeds)]
        ref, _, ref_wall = search(topo, w, start, timing, args.reference, 0, False)
        text = (f"start {t_start:.2f} s; {args.budget} evaluations: plain "
                f"{cells[False][0]:.2f} s (seeds {', '.join(f'{x:.2f}' for x in cells[False][1])};"
                f" {cells[False][2]:.0f} s), guided {cells[True][0]:.2f} s (seeds "
                f"{', '.join(f'{x:.2f}' for x in cells[True][1])}; {cells[True][2]:.0f} s); "
                f"{args.shapes} shapes + guided {statistics.mean(x[0] for x in sh):.2f} s "
                f"(seeds {', '.join(f'{x[0]:.2f}' for x in sh)}; evaluations "
                f"{max(x[1] for x in sh)} at most; {sum(x[2] for x in sh):.0f} s); "
                f"plain {args.reference} evaluations {ref:.2f} s ({ref_wall:.0f} s)")
        what = "llama3-70b (128 x 128k tokens)" if args.long_context else "llama3-70b"
        rows.append((f"{what} on {servers} x 8 H100, `{spec}`", text))
        print(rows[-1][0], text, flush=True)
    print()
    print_rows(rows)
    if not args.no_append:
        cmd = "python experiments/benchmarks/bench_strategy_search.py " + " ".join(sys.argv[1:])
        append_result("Strategy search at a sweep's budget: plain, guided, shapes + guided",
                      cmd.strip(), markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
