"""TACOS paper (Won et al., MICRO 2024) Fig. 21: All-Reduce on a 10x10 mesh with 1 to 64
chunks per NPU, TACOS-GREEDY against Ring and Direct.

Setup (paper Sections VII-B and VIII-C): 10x10 mesh, 100 GB/s links; "TACOS-GREEDY
synthesized All-Reduce algorithm with 1-64 chunks of size 128KB (i.e., All-Reduce of
25MB-1600MB)".  We use 128 KiB chunks, so the all-reduce buffer (nccl-tests convention:
one rank's buffer, split into ``100 x chunks`` chunks) is ``100 x chunks x 128 KiB``:
12.5 MiB for one chunk per NPU.  The paper's size labels are twice that (25 MB per chunk
per NPU; they seem to count the reduce-scatter and the all-gather halves), given in the
table for reference.  Link latency 0.5 us (Fig. 6's alpha).

Prints the table and writes it to ``fig21_mesh_chunks.md`` next to this script::

    python experiments/tacos/fig21_mesh_chunks.py [--quick] [--max-chunks 64] [--seed 0]
        [--out FILE]

The full run (64 chunks: 6,400 chunks, about 1.3 million Direct transfers) takes several
minutes; ``--max-chunks`` stops earlier.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evaluators.collectives import Collective  # noqa: E402
from tacos_compare import (  # noqa: E402
    PAPER_CHUNK_BYTES, PAPER_LATENCY, command_line, compare, fmt_s, fmt_us, markdown_table,
    write_report,
)
from topologies.registry import from_spec  # noqa: E402

SPEC = f"mesh:10x10,bw=100GB/s,lat={PAPER_LATENCY}"
CHUNKS = (1, 2, 4, 8, 16, 32, 64)
#: The paper's stated averages over its Fig. 21 points and its 64-chunk synthesis time.
PAPER_RING_OVER_TACOS = 4.51
PAPER_DIRECT_OVER_TACOS = 11.00
PAPER_SYNTHESIS_64_S = 57.87


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 and 2 chunks only")
    ap.add_argument("--max-chunks", type=int, default=64, help="largest chunks per NPU (64)")
    ap.add_argument("--seed", type=int, default=0, help="TACOS seed (default 0)")
    ap.add_argument("--out", default=str(HERE / "fig21_mesh_chunks.md"), help="Markdown file")
    args = ap.parse_args(argv)
    limit = 2 if args.quick else args.max_chunks
    topo = from_spec(SPEC)
    headers = ["chunks / NPU", "buffer", "paper size", "TACOS us", "TACOS replay us",
               "synthesis", "Ring us", "Direct us", "Ring / TACOS", "Direct / TACOS"]
    rows, ring_ratios, direct_ratios = [], [], []
    for k in (c for c in CHUNKS if c <= limit):
        coll = Collective.on("allreduce", topo.npus, topo.npus * k * PAPER_CHUNK_BYTES,
                             chunks_per_npu=k)
        r = compare(topo, coll, seed=args.seed)
        ring_ratios.append(r.ring_ratio)
        direct_ratios.append(r.direct_ratio)
        row = [str(k), f"{coll.size_bytes / 2**20:g} MiB", f"{25 * k} MB", fmt_us(r.tacos_s),
               fmt_us(r.tacos_replay_s), fmt_s(r.synthesis_s), fmt_us(r.ring_s),
               fmt_us(r.direct_s), f"{r.ring_ratio:.2f}", f"{r.direct_ratio:.2f}"]
        rows.append(row)
        print(" | ".join(row), flush=True)
    rows.append(["mean", "", "", "", "", "", "", "",
                 f"{statistics.mean(ring_ratios):.2f}", f"{statistics.mean(direct_ratios):.2f}"])
    rows.append(["paper (mean)", "", "25-1600 MB", "", "", f"{PAPER_SYNTHESIS_64_S} s at 64",
                 "", "", f"{PAPER_RING_OVER_TACOS:.2f}", f"{PAPER_DIRECT_OVER_TACOS:.2f}"])
    body = f"""\
All-reduce on `{SPEC}`, {PAPER_CHUNK_BYTES // 1024} KiB chunks, TACOS seed {args.seed}.

{markdown_table(headers, rows)}

*TACOS* is the time TACOS-GREEDY synthesized, *TACOS replay* the same schedule replayed
in the `congestion` network model with `order="schedule"` (equal on a mesh: no switches);
Ring and Direct are `synthesize(..., method="ring" | "direct")`, timed by the `congestion`
model (FIFO links, store-and-forward).  Ratios are baseline time over TACOS time.
*synthesis* is wall-clock for TACOS on this machine.  Every TACOS schedule passed
`validate_schedule`.  *paper size* is the paper's label for the same number of 128 KB
chunks (twice our nccl-tests buffer, see the module docstring).
"""
    text = write_report(Path(args.out), "TACOS Fig. 21: All-Reduce on a 10x10 mesh, 1-64 chunks",
                        command_line(argv), body)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
