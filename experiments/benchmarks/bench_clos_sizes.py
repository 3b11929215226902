"""Benchmark: sized Clos families for any server count, 2 .. 100,000 (issue 19).

Targets: every Clos family (``fattree:servers=N,radix=64``, ``leafspine:N``,
``railopt:N,gpus=1``, ``multiplane:N,planes=4,radix=128``) builds for N = 2 .. 100,000
in under 5 s and 1 GiB of peak Python allocations, prices from the 2026 parts catalog,
summarises (diameter from the closed form where the family has one) and routes N
D-mod-k pairs, with no all-pairs table.  Each row: build s, peak MiB (tracemalloc),
switches, links, tiers; parts-cost s; routing s for N random pairs.

Usage::

    python experiments/benchmarks/bench_clos_sizes.py [--sizes 2 35 1000 10000 100000]
        [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from topologies.cost import load_catalog, topology_cost
from topologies.registry import from_spec
from topologies.routing import clos_paths

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

FAMILIES = ("fattree:servers={n},radix=64", "leafspine:{n}", "railopt:{n},gpus=1",
            "multiplane:{n},planes=4,radix=128,bw=200Gbps", "railopt:{m},gpus=8")
TIME_S, MEMORY_MIB = 5.0, 1024.0


def run(template: str, n: int) -> tuple[str, str, bool]:
    m = max(1, n // 8)
    spec = template.format(n=n, m=m)
    tracemalloc.start()
    t0 = time.perf_counter()
    topo = from_spec(spec)
    build = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    t0 = time.perf_counter()
    cost = topology_cost(topo, catalog=load_catalog("parts-2026"))
    t_cost = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    src = rng.integers(0, topo.npus, topo.npus)
    dst = rng.integers(0, topo.npus, topo.npus)
    t0 = time.perf_counter()
    clos_paths(topo, src, dst)
    t_route = time.perf_counter() - t0
    diam = topo.params.get("diameter", "-")
    ok = build < TIME_S and peak < MEMORY_MIB and t_cost < TIME_S and t_route < TIME_S
    value = (f"build {build:.3f} s, peak {peak:.0f} MiB, {topo.switches} switches, "
             f"{topo.n_links} links, {topo.params.get('tiers', 2)} tiers, diameter {diam}; "
             f"cost {t_cost:.3f} s (${cost.total_usd / 1e6:,.1f}M, {cost.power_w / 1e3:,.0f} kW); "
             f"route {topo.npus} pairs {t_route:.3f} s" + ("" if ok else " MISSED"))
    return spec, value, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 35, 1000, 10000, 100000])
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    rows: list[tuple[str, str]] = []
    all_ok = True
    run(FAMILIES[0], 1000)                     # warm-up: imports, catalog, numpy kernels
    for template in FAMILIES:
        for n in args.sizes:
            if template.startswith("railopt:{m}") and n < 16:
                continue
            spec, value, ok = run(template, n)
            all_ok &= ok
            rows.append((f"`{spec}`", value))
            print_rows(rows[-1:])
    rows.append(("targets", f"build, cost and routing < {TIME_S:g} s each, peak < "
                 f"{MEMORY_MIB:g} MiB: {'met' if all_ok else 'MISSED'}"))
    if not args.no_append:
        cmd = "python experiments/benchmarks/bench_clos_sizes.py " + " ".join(argv or sys.argv[1:])
        append_result("Sized Clos families, 2 .. 100,000 servers", cmd.strip(),
                      markdown_table(rows))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
