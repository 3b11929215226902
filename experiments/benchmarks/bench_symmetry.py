"""Benchmark: graph symmetry (topologies.symmetry) for the cut bounds and the MCF.

Bounds: the orbits of all NPUs (:func:`participant_orbits`, candidate maps and
twins only) and the whole :func:`evaluators.bounds.lower_bound` on 20,000-node
networks, where the orbits decide how many max-flow sinks are needed.  MCF: the
Symmetry Partition with a verified map per NPU (:func:`npu_classes`, candidates,
twins, then colour refinement and search) as Mirrored Dantzig-Wolfe asks for it.
Each time is the best of ``--repeat`` runs; the bound values are printed so two
trees can be compared (issue 22: one symmetry finder, bounds identical and within
~10 % of the old speed).  Appends to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_symmetry.py [--repeat 3] [--no-append]
    PYTHONPATH=<old tree> python experiments/benchmarks/bench_symmetry.py --no-append

(the old tree had ``evaluators.cuts.participant_orbits`` and
``evaluators.mcf.symmetry.npu_classes``; the script finds either.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

BOUNDS = [("ring:20000", "allgather"), ("ring:20000", "allreduce"),
          ("torus:100x200", "allgather"), ("fattree:servers=20000,radix=64", "allgather")]
MCF = ["torus:4x4", "hypercube:5", "dgx-a100:8,links=all", "dgx-a100:16,links=all"]


def finders():
    """(participant_orbits, classes(topology, members, labels), where) of the imported tree."""
    try:
        from topologies.symmetry import npu_classes, participant_orbits

        def classes(topo, members, labels):
            return npu_classes(topo, members, link_cost=np.zeros(topo.n_links), labels=labels)
        where = "topologies.symmetry"
    except ImportError:  # the tree before issue 22's merge
        from evaluators.cuts import participant_orbits
        from evaluators.mcf.symmetry import npu_classes

        def classes(topo, members, labels):
            return npu_classes(topo.n_nodes, topo.src, topo.dst, topo.bandwidth,
                               np.zeros(topo.n_links), labels, members)
        where = "before issue 22: evaluators.cuts and evaluators.mcf.symmetry"
    return participant_orbits, classes, where


def best_of(repeat: int, fn):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()

    from evaluators.bounds import lower_bound
    from evaluators.collectives import Collective
    from topologies.registry import from_spec

    participant_orbits, classes, where = finders()
    rows = []
    for spec, kind in BOUNDS:
        topo = from_spec(spec)
        members = list(range(topo.npus))
        t_orb, orbits = best_of(args.repeat, lambda: participant_orbits(topo, members))
        coll = Collective.on(kind, topo.npus, 1e9)
        t_bound, b = best_of(args.repeat, lambda: lower_bound(topo, coll))
        rows.append((f"bound {spec} {kind} ({topo.n_nodes} nodes)",
                     f"orbits {len(orbits)} in {t_orb:.3f} s; lower_bound {t_bound:.2f} s: "
                     f"{b.time_s:.9g} s, exact={b.exact}"))
    for spec in MCF:
        topo = from_spec(spec)
        labels = [(v < topo.npus,) for v in range(topo.n_nodes)]
        t, sc = best_of(args.repeat, lambda: classes(topo, list(range(topo.npus)), labels))
        rows.append((f"mcf classes {spec} ({topo.npus} NPUs, {topo.n_nodes} nodes)",
                     f"{sc.n_classes} classes in {t:.3f} s"))
    print_rows(rows)
    if not args.no_append:
        append_result(f"Graph symmetry: bounds orbits and MCF classes ({where})",
                      "python experiments/benchmarks/bench_symmetry.py",
                      markdown_table(rows))


if __name__ == "__main__":
    main()
