"""Benchmark: cost of a failure what-if sample at 128 servers (no target; issue 20).

Llama 3 70B on 128 servers of 8 H100 (its feasible start, collectives ``auto``): seconds
per sample of :func:`search.failure_whatif.fabric_failures` on the four fabrics of
``experiments/failures/`` for link failures (same servers: the job is re-timed on
rebuilt routes) and one lost server (re-planned: the resized strategy plus a
4-evaluation search), and the one-off baseline (incl. its search).  The planned work
:func:`search.failure_whatif.check_failure_work` bounds is printed beside it.

Prints a table and appends it to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_failures.py [--samples 2] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "failures"))
from results_file import append_result, markdown_table, print_rows  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()

    from codesign.workloads import get_hardware, get_workload
    from fabric_failures import fabrics
    from search.failure_whatif import (DEFAULT_FAILURE_SEARCH, MAX_FAILURE_WORK, FailureStudy,
                                       fabric_failures)
    from search.strategy.feasible import feasible_start
    from topologies.failures import parse_failure_spec

    hw, wl = get_hardware("H100"), get_workload("llama3-70b")
    start = feasible_start(wl, 128 * hw.gpus_per_server, hw)
    rows = []
    for name, topo in fabrics(hw, wl, start).items():
        label = name.split(" (")[0]
        for kind in ("links=10%", "servers=1"):
            study = FailureStudy(parse_failure_spec(f"{kind},seed=0"), args.samples)
            t0 = time.perf_counter()
            r = fabric_failures(topo, [(wl, 1.0, start)], hw, study)
            total = time.perf_counter() - t0
            evals = 1 + DEFAULT_FAILURE_SEARCH.evaluations
            rows.append((f"{label} {kind}: s per sample (incl. baseline once)",
                         f"{total / args.samples:.1f} (total {total:.1f} s, {args.samples} "
                         f"samples, mean slowdown "
                         f"{'-' if r.mean is None else f'{r.mean:.3f}x'})"))
        n = topo.n_nodes
        rows.append((f"{label}: planned work per sample (nodes^2 x evaluations)",
                     f"{n * n * evals:.3g} (bound {MAX_FAILURE_WORK:.0e} per study)"))
    print_rows(rows)
    if not args.no_append:
        append_result("Failure what-if samples, 128 servers (issue 20)",
                      f"python experiments/benchmarks/bench_failures.py --samples "
                      f"{args.samples}", markdown_table(rows))


if __name__ == "__main__":
    main()
