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
    python experiments/benchmarks/bench_symmetry.py --compare <old tree> [--rounds 3]

(the old tree had ``evaluators.cuts.participant_orbits`` and
``evaluators.mcf.symmetry.npu_classes``; the script finds either.)  ``--compare``
alternates child processes of the old tree and this one (``--rounds`` times, so a
shared machine's load falls on both alike) and tabulates the best times side by side
with the bound values, which must be equal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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


def compare(old: str, rounds: int, append: bool) -> None:
    """Alternate child processes of ``old`` and this tree; best times side by side."""
    here = str(Path(__file__).resolve().parents[2])
    best: dict[str, dict[str, list]] = {"old": {}, "new": {}}
    for _ in range(rounds):
        for tag, tree in (("old", old), ("new", here)):
            out = subprocess.run([sys.executable, __file__, "--json", "--repeat", "1"],
                                 env={**os.environ, "PYTHONPATH": tree}, check=True,
                                 capture_output=True, text=True).stdout
            for label, (seconds, value) in json.loads(out).items():
                prev = best[tag].get(label)
                best[tag][label] = [min(seconds, prev[0]) if prev else seconds, value]
    rows = []
    for label, (t_old, v_old) in best["old"].items():
        t_new, v_new = best["new"][label]
        same = "same result" if v_old == v_new else f"DIFFERENT: {v_old} / {v_new}"
        rows.append((label, f"old {t_old:.3f} s, new {t_new:.3f} s ({t_new / t_old:.2f}x); {same}"))
    print_rows(rows)
    if append:
        append_result(f"Graph symmetry: old tree vs issue 22's topologies.symmetry, best of "
                      f"{rounds} alternating rounds",
                      "python experiments/benchmarks/bench_symmetry.py --compare <old tree>",
                      markdown_table(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-append", action="store_true")
    ap.add_argument("--compare", metavar="OLD_TREE", help="alternate with an old tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.rounds, not args.no_append)
        return

    from evaluators.bounds import lower_bound
    from evaluators.collectives import Collective
    from topologies.registry import from_spec

    participant_orbits, classes, where = finders()
    rows, timed = [], {}
    for spec, kind in BOUNDS:
        topo = from_spec(spec)
        members = list(range(topo.npus))
        t_orb, orbits = best_of(args.repeat, lambda: participant_orbits(topo, members))
        coll = Collective.on(kind, topo.npus, 1e9)
        t_bound, b = best_of(args.repeat, lambda: lower_bound(topo, coll))
        label = f"bound {spec} {kind} ({topo.n_nodes} nodes)"
        rows.append((label, f"orbits {len(orbits)} in {t_orb:.3f} s; lower_bound "
                            f"{t_bound:.2f} s: {b.time_s:.9g} s, exact={b.exact}"))
        timed[f"orbits {spec}"] = (t_orb, len(orbits))
        timed[label] = (t_bound, [b.time_s, sorted(b.components.items()), b.exact])
    for spec in MCF:
        topo = from_spec(spec)
        labels = [(v < topo.npus,) for v in range(topo.n_nodes)]
        t, sc = best_of(args.repeat, lambda: classes(topo, list(range(topo.npus)), labels))
        rows.append((f"mcf classes {spec} ({topo.npus} NPUs, {topo.n_nodes} nodes)",
                     f"{sc.n_classes} classes in {t:.3f} s"))
        timed[f"mcf classes {spec}"] = (t, sc.n_classes)
    if args.json:
        print(json.dumps(timed))
        return
    print_rows(rows)
    if not args.no_append:
        append_result(f"Graph symmetry: bounds orbits and MCF classes ({where})",
                      "python experiments/benchmarks/bench_symmetry.py",
                      markdown_table(rows))


if __name__ == "__main__":
    main()
