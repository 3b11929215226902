"""Benchmark: ``best`` on large fabrics, with and without sharing decisions by automorphism.

``collective_method="best"`` runs a tournament of synthesizers per (kind, group, size
class) (evaluators/iteration/comm.py).  A group that a verified automorphism of the
fabric maps onto a decided one member by member takes that group's winner relabelled
(:func:`topologies.symmetry.group_map`), when the tournament is estimated to cost more
than the look-up.  Each case is one cold :func:`evaluators.iteration.evaluate` (a fresh
topology object, so no cache is shared) with the look-up off (its per-element cost set
to infinity) and on, in that order; the iteration times must be equal.  Appends to
``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_best_groups.py [--large] [--no-append]

``--large`` adds Llama 3 405B on 16,384 GPUs (``railopt:2048,gpus=8``), timed with the
look-up on only (off, it ran past 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

CASES = [("railopt:512,gpus=8,bw=400Gbps", "llama3-405b",
          "dp=128,tp=8,pp=4,microbatches=16,sp=true,zero=1")]
LARGE = [("railopt:2048,gpus=8,bw=400Gbps", "llama3-405b",
          "dp=128,tp=8,pp=16,microbatches=16,sp=true,zero=1")]


def timed(spec: str, workload: str, strategy: str, share: bool) -> tuple[float, float]:
    """(wall seconds, iteration seconds) of one cold evaluation."""
    import evaluators.iteration.comm as comm
    from evaluators.iteration import evaluate
    from topologies.registry import from_spec

    saved = comm.MAP_S_PER_ELEMENT
    if not share:
        comm.MAP_S_PER_ELEMENT = float("inf")
    try:
        topo = from_spec(spec)
        t0 = time.perf_counter()
        r = evaluate(topo, workload, strategy, hardware="H100", collective_method="best",
                     routing="auto", check_memory=False)
        wall = time.perf_counter() - t0
    finally:
        comm.MAP_S_PER_ELEMENT = saved
    return wall, r.iteration_time_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()
    rows = []
    for spec, workload, strategy in CASES + (LARGE if args.large else []):
        label = f"{workload} `{strategy}` on `{spec}`"
        on = timed(spec, workload, strategy, True)
        if (spec, workload, strategy) in LARGE:
            rows.append((label, f"off: not run; on: {on[0]:.1f} s (iteration {on[1]:.4f} s)"))
            continue
        off = timed(spec, workload, strategy, False)
        same = "equal" if off[1] == on[1] else f"DIFFERENT ({off[1]!r} vs {on[1]!r})"
        rows.append((label, f"off: {off[0]:.1f} s; on: {on[0]:.1f} s; iteration "
                            f"{on[1]:.4f} s ({same})"))
    print_rows(rows)
    if not args.no_append:
        append_result("best on large fabrics: decisions shared by automorphism (cold "
                      "evaluate, look-up off / on)",
                      "python experiments/benchmarks/bench_best_groups.py"
                      + (" --large" if args.large else ""), markdown_table(rows))


if __name__ == "__main__":
    main()
