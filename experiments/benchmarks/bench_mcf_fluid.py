"""Benchmark: the fluid multicommodity-flow LP (thesis LP 4.2) for allgather.

Goal (brief H, part 1): allgather on ``torus:4x4``, ``hypercube:4`` and
``dgx1`` in a few seconds each.  For every topology it runs
:func:`evaluators.mcf.fluid_optimum` (search of ``T``, switch check and
refinement, secondary cost), prints a table (LP size, ``T``, refinement
rounds, wall seconds, the LP time against the cut bound of
:mod:`evaluators.bounds`) and appends it with date and machine information to
``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_mcf_fluid.py [--topologies torus:4x4,hypercube:4,dgx1]
        [--size 1GB] [--goal 5] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from codesign.units import parse_size
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topologies.registry import from_spec

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, print_rows  # noqa: E402

DEFAULT = "torus:4x4,hypercube:4,dgx1,dgx-a100:2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default=DEFAULT, help="comma-separated topology specs")
    ap.add_argument("--size", default="1GB", help="allgather output buffer")
    ap.add_argument("--goal", type=float, default=5.0, help="seconds allowed per topology")
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    args = ap.parse_args()

    size = parse_size(args.size)
    header = ("| topology | LP rows x cols | T | rounds | wall s | LP time s | cut bound s "
              "| LP / bound | optimal |")
    lines = [header, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows = []
    slowest = 0.0
    for spec in args.topologies.split(","):
        topo = from_spec(spec)
        coll = Collective.on("allgather", topo.npus, size)
        t0 = time.perf_counter()
        r = fluid_optimum(topo, coll)
        wall = time.perf_counter() - t0
        slowest = max(slowest, wall)
        b = lower_bound(topo, coll)
        bound = max(v for k, v in b.components.items() if k != "latency")
        shape = f"{r.lp_shape[0]} x {r.lp_shape[1]}"
        lines.append(f"| {spec} | {shape} | {r.steps} | {r.refinement_rounds} | {wall:.2f} "
                     f"| {r.time_s:.6g} | {bound:.6g} | {r.time_s / bound:.9f} | {r.optimal} |")
        rows.append((spec, f"{wall:.2f} s, LP {shape}, T={r.steps}, R/bound "
                           f"{r.time_s / bound:.9f}, optimal {r.optimal}"))
    verdict = "met" if slowest <= args.goal else "NOT met"
    rows.append(("slowest vs goal", f"{slowest:.2f} s vs {args.goal:g} s: {verdict}"))
    print_rows(rows)
    table = "\n".join(lines) + (f"\n\nSlowest {slowest:.2f} s vs goal {args.goal:g} s: {verdict}. "
                                "Wall time includes the search of T, the phase-2 secondary "
                                "cost LP and the switch checks (HiGHS interior point via "
                                "scipy).")
    if not args.no_append:
        append_result(f"mcf fluid LP 4.2: allgather ({args.size})",
                      f"python experiments/benchmarks/bench_mcf_fluid.py --topologies "
                      f"{args.topologies} --size {args.size} --goal {args.goal:g}", table)


if __name__ == "__main__":
    main()
