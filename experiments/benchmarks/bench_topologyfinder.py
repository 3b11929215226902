"""Benchmark: TopoOpt TopologyFinder (Algorithm 1) for 128 and 1024 servers, degree 8.

Targets (issue 8): 128 servers in under 0.5 s, 1024 servers in under 10 s.

Demand (DLRM-like, seeded): one AllReduce group of all servers in id order, each
member sending ``AR_BYTES`` to its successor per iteration (the dense layers'
ring all-reduce), plus an MP matrix with an all-to-all of ``A2A_BYTES`` per server
spread evenly over the other servers (embedding exchange) and ``HOT_PAIRS`` hot
pairs of ``HOT_BYTES`` (large tables).  With these sizes the degree split gives
``d_A = 4`` and ``d_MP = 4``.

Routing cost: CoinChangeMod for the ``n`` AllReduce successor pairs and 4 shortest
paths for the heaviest 4096 MP pairs (the default ``max_routed_pairs``); with an
all-to-all every one of the ``n (n - 1)`` pairs has MP demand, and routing all of
them up front (1M pairs at 1024 servers) is not done -- the rest are routed on
demand by ``TopoOptResult.paths``.  The table also gives OCS-reconfig (Algorithm 5)
on the same MP matrix.  Times are the median of ``--repeat`` runs with seeds
``0..repeat-1`` after one warm-up run (imports, caches).

Usage::

    python experiments/benchmarks/bench_topologyfinder.py [--servers 128 1024]
        [--degree 8] [--repeat 3] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from topologies.topoopt import ocs_reconfig, topology_finder

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

AR_BYTES = 2e9
A2A_BYTES = 2.4e9
HOT_PAIRS = 8
HOT_BYTES = 4e9
TARGET_S = {128: 0.5, 1024: 10.0}


def dlrm_like(n: int, seed: int = 0):
    """``(groups, mp)`` of the DLRM-like demand (module docstring)."""
    rng = np.random.default_rng(seed)
    mp = np.full((n, n), A2A_BYTES / (n - 1))
    np.fill_diagonal(mp, 0.0)
    for _ in range(HOT_PAIRS):
        a, b = rng.choice(n, 2, replace=False)
        mp[a, b] += HOT_BYTES
    return [(tuple(range(n)), AR_BYTES)], mp


def run(n: int, degree: int, repeat: int) -> list[tuple[str, str]]:
    groups, mp = dlrm_like(n)
    topology_finder(n, degree, groups, mp, seed=99)      # warm-up
    times, result = [], None
    for seed in range(repeat):
        t0 = time.perf_counter()
        result = topology_finder(n, degree, groups, mp, seed=seed)
        times.append(time.perf_counter() - t0)
    t_ocs = []
    for seed in range(repeat):
        t0 = time.perf_counter()
        ocs = ocs_reconfig(mp, degree, seed=seed)
        t_ocs.append(time.perf_counter() - t0)
    s = result.summary()
    med = float(np.median(times))
    target = TARGET_S.get(n)
    verdict = "" if target is None else (f" (target < {target:g} s: "
                                         f"{'met' if med < target else 'MISSED'})")
    return [
        (f"n={n} d={degree} TopologyFinder median s", f"{med:.3f}{verdict}"),
        (f"n={n} runs s", ", ".join(f"{t:.3f}" for t in times)),
        (f"n={n} degree split d_A/d_MP", f"{s['degree_allreduce']}/{s['degree_mp']}"),
        (f"n={n} generators", str(s["groups"][0]["generators"])),
        (f"n={n} diameter / mean path length", f"{s['diameter']} / {s['mean_path_length']:.3f}"),
        (f"n={n} links by kind", str(s["links"])),
        (f"n={n} routed pairs / matching exact", f"{s['routed_pairs']} / {s['matching_exact']}"),
        (f"n={n} OCS-reconfig median s / diameter",
         f"{float(np.median(t_ocs)):.3f} / {ocs.topology.diameter}"),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    rows: list[tuple[str, str]] = []
    missed = False
    for n in args.servers:
        part = run(n, args.degree, args.repeat)
        missed |= "MISSED" in part[0][1]
        rows += part
        print_rows(part)
    if not args.no_append:
        cmd = ("python experiments/benchmarks/bench_topologyfinder.py "
               + " ".join(argv or sys.argv[1:]))
        append_result("TopoOpt TopologyFinder (DLRM-like demand)", cmd.strip(),
                      markdown_table(rows))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
