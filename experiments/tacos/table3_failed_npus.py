"""TACOS paper (Won et al., MICRO 2024) Table III: All-Reduce on a 4x4 mesh with two failed
NPUs (Fig. 22(a)), TACOS-GREEDY against Ring and Direct.

The system is the spec ``mesh:4x4,bw=100GB/s,lat=0.5us,fail=7+9`` (the generic ``fail=``
key, :meth:`topologies.model.Topology.without_npus`): the 4x4 mesh (NPU ``x + 4 y``)
without NPUs 7 and 9 and their cables, the 14 survivors renumbered 0..13 in id order.  Fig. 22(a) says "failures at NPU 7 and 9"; we read the ids
0-based, row by row (the figure itself is not in the text we have).  Links 100 GB/s (the
paper's mesh bandwidth), latency 0.5 us (Fig. 6's alpha).  The collective is an
all-reduce over the 14 NPUs with one 128 KiB chunk per NPU (the chunk size of Section
VIII-C; the paper does not give Table III's size); 2 and 4 chunks per NPU are added for
reference.

Prints the table and writes it to ``table3_failed_npus.md`` next to this script::

    python experiments/tacos/table3_failed_npus.py [--quick] [--seed 0] [--out FILE]
"""

from __future__ import annotations

import argparse
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

SIDE = 4
FAILED = (7, 9)
#: Table III: normalised all-reduce runtime (synthesis time in brackets).
PAPER = {"TACOS-ILP": "1.00 (4.92s)", "TACOS-Greedy": "1.00 (3.53ms)", "TACCL-like": "1.00",
         "Ring": "5.38", "Direct": "5.08"}


def failed_mesh(side: int = SIDE, failed=FAILED, bandwidth: str = "100GB/s",
                latency: str = PAPER_LATENCY):
    """The ``side x side`` mesh without the ``failed`` NPUs, survivors renumbered in order.

    Returns the topology and the map old id -> new id.
    """
    topo = from_spec(f"mesh:{side}x{side},bw={bandwidth},lat={latency},"
                     f"fail={'+'.join(map(str, failed))}")
    return topo, {v: i for i, v in enumerate(topo.params["npu_ids"])}


def grid_picture(side: int, failed, new) -> str:
    """The mesh as text: new ids, ``X`` for failed NPUs (row y = 0 first)."""
    rows = []
    for y in range(side):
        rows.append(" ".join(" X" if (v := x + side * y) in failed else f"{new[v]:2d}"
                             for x in range(side)))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one chunk per NPU only")
    ap.add_argument("--seed", type=int, default=0, help="TACOS seed (default 0)")
    ap.add_argument("--out", default=str(HERE / "table3_failed_npus.md"), help="Markdown file")
    args = ap.parse_args(argv)
    topo, new = failed_mesh()
    headers = ["chunks / NPU", "buffer", "TACOS us", "TACOS replay us", "synthesis", "Ring us",
               "Direct us", "Ring / TACOS", "Direct / TACOS"]
    rows = []
    for k in (1,) if args.quick else (1, 2, 4):
        coll = Collective.on("allreduce", topo.npus, topo.npus * k * PAPER_CHUNK_BYTES,
                             chunks_per_npu=k)
        r = compare(topo, coll, seed=args.seed)
        row = [str(k), f"{coll.size_bytes / 2**20:g} MiB", fmt_us(r.tacos_s),
               fmt_us(r.tacos_replay_s), fmt_s(r.synthesis_s), fmt_us(r.ring_s),
               fmt_us(r.direct_s), f"{r.ring_ratio:.2f}", f"{r.direct_ratio:.2f}"]
        rows.append(row)
        print(" | ".join(row), flush=True)
    paper = markdown_table(list(PAPER), [list(PAPER.values())])
    body = f"""\
All-reduce on the 4x4 mesh with NPUs {FAILED[0]} and {FAILED[1]} failed (14 NPUs), links
100 GB/s, latency {PAPER_LATENCY}, {PAPER_CHUNK_BYTES // 1024} KiB chunks, TACOS seed {args.seed}.
NPU ids after renumbering (X = failed; the old id of column x, row y is x + 4 y):

```
{grid_picture(SIDE, FAILED, new)}
```

{markdown_table(headers, rows)}

Paper, Table III (normalised to TACOS-Greedy; synthesis time in brackets):

{paper}

*TACOS* is the time TACOS-GREEDY synthesized, *TACOS replay* the same schedule replayed
in the `congestion` network model with `order="schedule"`; Ring (over the 14 NPUs in id
order, shortest routes between non-adjacent neighbours) and Direct are
`synthesize(..., method="ring" | "direct")`, timed by the `congestion` model.  Ratios are
baseline time over TACOS time.  The paper's TACOS-ILP and TACCL-like are not run here.
Every TACOS schedule passed `validate_schedule`.
"""
    text = write_report(Path(args.out), "TACOS Table III: All-Reduce on a 4x4 mesh with 2 failed "
                        "NPUs", command_line(argv), body)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
