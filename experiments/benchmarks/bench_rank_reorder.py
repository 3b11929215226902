"""Benchmark: cloud-aware ring rank reordering of 512 nodes (planted racks).

Builds a planted instance -- 64 racks of 8 nodes, one-way cost 10 us inside a rack
and 100 us across racks, node labels shuffled with a fixed seed -- whose optimal
ring cost is known in closed form, ``R * b + (n - R) * a`` (every rack must be
entered once; the other hops can stay in a rack).  Runs
``search.rank_order.reorder(matrix, "ring", time_limit_s=10)``, prints a table
(nodes, racks, wall time, identity cost, found cost, optimum, gap) and appends it
with date and machine information to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_rank_reorder.py [--racks 64] [--rack-size 8]
        [--seed 0] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from search.rank_order import reorder

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

IN_RACK_S = 10e-6
CROSS_RACK_S = 100e-6
TIME_LIMIT_S = 10.0


def planted_racks(racks: int, size: int, seed: int) -> np.ndarray:
    """Cost matrix (s) of ``racks`` racks of ``size`` nodes with shuffled node labels."""
    n = racks * size
    rack = np.repeat(np.arange(racks), size)[np.random.default_rng(seed).permutation(n)]
    costs = np.where(rack[:, None] == rack[None, :], IN_RACK_S, CROSS_RACK_S)
    np.fill_diagonal(costs, 0.0)
    return costs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=64)
    ap.add_argument("--rack-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    n = args.racks * args.rack_size
    costs = planted_racks(args.racks, args.rack_size, args.seed)
    optimum = args.racks * CROSS_RACK_S + (n - args.racks) * IN_RACK_S
    t0 = time.perf_counter()
    result = reorder(costs, "ring", seed=args.seed, time_limit_s=TIME_LIMIT_S)
    wall = time.perf_counter() - t0
    rows = [
        ("nodes", str(n)),
        ("racks x rack size", f"{args.racks} x {args.rack_size}"),
        ("in-rack / cross-rack cost s", f"{IN_RACK_S:g} / {CROSS_RACK_S:g}"),
        ("method", result.method),
        (f"wall time s (limit {TIME_LIMIT_S:g})", f"{wall:.2f}"),
        ("identity ring cost s", f"{result.baseline_cost_s:.6g}"),
        ("found ring cost s", f"{result.cost_s:.6g}"),
        ("optimal ring cost s (closed form)", f"{optimum:.6g}"),
        ("gap to optimum", f"{result.cost_s / optimum - 1:.2%}"),
        ("speed-up vs identity", f"{result.baseline_cost_s / result.cost_s:.2f}x"),
    ]
    print_rows(rows)
    if not args.no_append:
        append_result("ring rank reordering (planted racks)",
                      "python experiments/benchmarks/bench_rank_reorder.py", markdown_table(rows))
    return 0 if wall <= TIME_LIMIT_S + 0.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
