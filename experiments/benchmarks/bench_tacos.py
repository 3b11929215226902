"""Benchmark: TACOS-GREEDY synthesis time and peak memory.

All-gather, one chunk per NPU unless stated, on 3-D tori with 50 GiB/s,
0.5 us links (the speed targets of the TACOS-GREEDY issue):

* ``torus:8x8x8`` (512 NPUs, 261,632 transfers) under 2 s and
  ``torus:8x8x16`` (1024 NPUs, 1,047,552 transfers) under 10 s; the issue
  quotes the C++ reference implementation at about 4 s and 40 s;
* growth of the synthesis time from 64 to 4096 NPUs (4x4x4, 8x8x8, 8x8x16,
  16x16x16) and with the chunks per NPU (1, 2, 4, 8 on 8x8x8);
* peak memory: ``ru_maxrss`` of a fresh child process per case (the 4096-NPU
  case must stay under 8 GiB), and the same after imports and topology
  construction, so that the difference is what the synthesis needs.

The time is the wall time of ``synthesize(topology, collective, "tacos")``
(unwinding, matching and building the :class:`~evaluators.schedule.Schedule`),
best of 3 runs in the child (1 run for 16x16x16), so that other work on the
machine inflates it as little as possible.  Prints a table and appends it with
date and machine information to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_tacos.py [--no-append] [--skip-4096]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

LINKS = "bw=50GiB/s,lat=0.5us"
TARGETS = {"torus:8x8x8": (2.0, 4.0), "torus:8x8x16": (10.0, 40.0)}   # ours, C++ (s)
SIZES = ["torus:4x4x4", "torus:8x8x8", "torus:8x8x16", "torus:16x16x16"]
CHUNKS = [1, 2, 4, 8]
CHUNK_TOPOLOGY = "torus:8x8x8"
MAX_RSS_4096_GIB = 8.0


def child(shape: str, chunks: int, repeat: int) -> None:
    """Run one case in this (fresh) process and print its measurements as JSON."""
    from evaluators.collectives import Collective
    from evaluators.registry import synthesize
    from topologies.registry import from_spec

    topo = from_spec(f"{shape},{LINKS}")
    coll = Collective.on("allgather", topo.npus, topo.npus * chunks * 2**20,
                         chunks_per_npu=chunks)
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times, sched = [], None
    for _ in range(repeat):
        sched = None                 # free the previous schedule before the next run
        t0 = time.perf_counter()
        sched = synthesize(topo, coll, "tacos", seed=0)
        times.append(time.perf_counter() - t0)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(dict(npus=topo.npus, transfers=len(sched), best_s=min(times), runs=repeat,
                          collective_s=sched.time_s, base_mib=base_kib / 1024,
                          peak_mib=peak_kib / 1024)))


def run_case(shape: str, chunks: int, repeat: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", shape, str(chunks), str(repeat)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    ap.add_argument("--skip-4096", action="store_true", help="leave out torus:16x16x16")
    ap.add_argument("--child", nargs=3, metavar=("SHAPE", "CHUNKS", "REPEAT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return

    sizes = [s for s in SIZES if not (args.skip_4096 and s == "torus:16x16x16")]
    cases = [(s, 1) for s in sizes] + [(CHUNK_TOPOLOGY, c) for c in CHUNKS if c != 1]
    results = {}
    for shape, chunks in cases:
        repeat = 1 if shape == "torus:16x16x16" else 3
        results[shape, chunks] = r = run_case(shape, chunks, repeat)
        print(f"{shape} x{chunks}: {r['best_s']:.3f} s, peak {r['peak_mib']:.0f} MiB",
              flush=True)

    header = ["topology", "NPUs", "chunks/NPU", "transfers", "synthesis s", "runs",
              "us/transfer", "target s", "C++ ref. s", "peak RSS MiB", "RSS - baseline MiB",
              "collective s"]
    rows, failed = [], []
    for (shape, chunks), r in results.items():
        target, ref = TARGETS.get(shape, (None, None)) if chunks == 1 else (None, None)
        verdict = ""
        if target is not None:
            ok = r["best_s"] < target
            verdict = f"{target:g} ({'met' if ok else 'MISSED'})"
            if not ok:
                failed.append(shape)
        if shape == "torus:16x16x16":
            ok = r["peak_mib"] < MAX_RSS_4096_GIB * 1024
            verdict = f"< {MAX_RSS_4096_GIB:g} GiB RSS ({'met' if ok else 'MISSED'})"
            if not ok:
                failed.append(shape)
        rows.append([f"`{shape}`", str(r["npus"]), str(chunks), f"{r['transfers']:,}",
                     f"{r['best_s']:.3f}", str(r["runs"]),
                     f"{1e6 * r['best_s'] / r['transfers']:.2f}", verdict or "-",
                     f"~{ref:g}" if ref else "-", f"{r['peak_mib']:.0f}",
                     f"{r['peak_mib'] - r['base_mib']:.0f}", f"{r['collective_s']:.6g}"])
    table = markdown(header, rows)
    print(table)
    print("targets:", "all met" if not failed else "MISSED for " + ", ".join(failed))
    if not args.no_append:
        sys.path.insert(0, str(Path(__file__).parent))
        from results_file import append_result
        flags = " --skip-4096" if args.skip_4096 else ""
        note = (f"All-gather, `{LINKS}`, 1 MiB chunks, seed 0; synthesis = wall time of "
                "`synthesize(..., \"tacos\")`, best of the runs in a fresh child process; "
                "peak RSS = `ru_maxrss` of that child.\n\n")
        append_result("TACOS-GREEDY synthesis time and memory",
                      f"python experiments/benchmarks/bench_tacos.py{flags}", note + table)


if __name__ == "__main__":
    main()
