"""Themis (ISCA'22) Fig. 10: BW utilisation of a single 100 MB All-Reduce as the number of
chunks per collective varies from 4 to 512, on 3D-SW_SW_SW_hetero and 4D-Ring_FC_Ring_SW.

Setup (Fig. 10 caption and Sec. 6.1): Baseline, Themis+FIFO and Themis+SCF, chunks per
collective 4, 8, ..., 512 (powers of two), All-Reduce of 100 MB (MB = 10^6 B) on the two
1024-NPU Table 2 platforms, utilisation as defined in Sec. 3 (bandwidth-weighted mean
over the dimensions).  Times from the Sec. 4.4 event model
(:func:`evaluators.algorithms.themis.themis_model`), not from a simulator.

Prints the tables and writes them to ``fig10_chunks.md`` next to this script::

    python experiments/themis/fig10_chunks.py [--size-mb 100] [--ring-directions 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fig8_fig11 import PAPER_NAMES  # noqa: E402
from themis_runs import (  # noqa: E402
    RING_NOTE, SCHEDULERS, markdown_table, pct, publish, run_schedulers,
)
from topologies.families.themis_presets import preset_dimensions  # noqa: E402

PLATFORMS = ("3d-sw-sw-sw-hetero", "4d-ring-fc-ring-sw")
CHUNKS = tuple(2 ** i for i in range(2, 10))          # 4 .. 512
#: Fig. 10's text (Sec. 6.1): mean over the two platforms, 4 -> 512 chunks.
PAPER = {("Themis+SCF", 4): 0.4858, ("Themis+SCF", 512): 0.9118,
         ("Themis+FIFO", 4): 0.4313, ("Themis+FIFO", 512): 0.8781}

TITLE = "Themis ISCA'22 Fig. 10: BW utilisation against chunks per collective"


def run(size_bytes: float, ring_directions: int) -> dict:
    """``{(platform, chunks): {scheduler: themis_model result}}``."""
    return {(name, c): run_schedulers(preset_dimensions(name), "allreduce", size_bytes, c,
                                      ring_directions)
            for name in PLATFORMS for c in CHUNKS}


def utilization_table(grid: dict) -> str:
    headers = ["chunks"] + [f"{PAPER_NAMES[n]} {label}" for n in PLATFORMS
                            for label in SCHEDULERS] + [f"mean {label}" for label in SCHEDULERS]
    rows = []
    for c in CHUNKS:
        row = [str(c)]
        row += [pct(grid[(n, c)][label]["mean_utilization"]) for n in PLATFORMS
                for label in SCHEDULERS]
        row += [pct(statistics.fmean(grid[(n, c)][label]["mean_utilization"]
                                     for n in PLATFORMS)) for label in SCHEDULERS]
        rows.append(row)
    return markdown_table(headers, rows)


def times_table(grid: dict) -> str:
    headers = ["chunks"] + [f"{PAPER_NAMES[n]} {label} us" for n in PLATFORMS
                            for label in SCHEDULERS]
    rows = [[str(c)] + [f"{grid[(n, c)][label]['time_s'] * 1e6:.1f}" for n in PLATFORMS
                        for label in SCHEDULERS] for c in CHUNKS]
    return markdown_table(headers, rows)


def paper_table(grid: dict, other: dict, ring_directions: int) -> str:
    headers = ["quantity", "paper", f"ours (ring_directions={ring_directions})",
               f"ours (ring_directions={3 - ring_directions})"]
    rows = []
    for (label, c), value in PAPER.items():
        ours = statistics.fmean(grid[(n, c)][label]["mean_utilization"] for n in PLATFORMS)
        alt = statistics.fmean(other[(n, c)][label]["mean_utilization"] for n in PLATFORMS)
        rows.append([f"{label}, {c} chunks, mean of the two platforms", f"{100 * value:.2f}%",
                     pct(ours), pct(alt)])
    return markdown_table(headers, rows)


NOTES = """\
Paper's statements (Sec. 6.1, Fig. 10 paragraphs): "When increasing the chunks from 4 to
512, BW utilization for Themis+SCF (Themis+FIFO) increases from 48.58% (43.13%) to 91.18%
(87.81%) on average across the two topologies"; for the baseline "dim1 is the bottleneck
(on both topologies) ... changing the chunk granularity does not significantly affect its
performance"; "at some points, increasing chunks modestly reduces the BW utilization for
Themis ... because of the starvation case"; "Themis+SCF shows stable behavior starting from
8 chunks"; and 64 chunks is the default.

## Why our curves differ

* **Model, not simulator.** The paper simulates with ASTRA-sim (Sec. 5.1); we run the
  Sec. 4.4 latency model as an event simulation (see `fig8_fig11.md` for its rules).  The
  model charges nothing per chunk beyond the overlapping `A_K`, so more chunks never cost
  goodput here, while in the paper small chunks eventually fall below the packet size and
  pay headers (the trade-off behind its choice of 64).
* **Few chunks.** With 4 or 8 chunks Algorithm 1 has too few chunks to balance the
  dimension loads and the pipeline fill and drain dominate; Themis can then be below the
  baseline (the paper's 48.58% at 4 chunks is also below its overall baseline mean of
  56.31%).  Our Themis+SCF reaches its plateau from 16 chunks rather than from 8.
* **Starvation dips.** Themis+FIFO drops at some chunk counts (3D-SW_SW_SW_hetero at 32
  chunks) and recovers at the next: the FIFO starvation of Sec. 4.3, which the paper also
  sees ("at some points, increasing chunks modestly reduces the BW utilization");
  Themis+SCF is much less sensitive.
* **Baseline.** Flat in both (dim1 bound), at the level set by the bandwidth mismatch of
  each platform.
* **Ring directions.** {ring_note}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="All-Reduce MB (default 100)")
    ap.add_argument("--ring-directions", type=int, choices=(1, 2), default=2,
                    help="directions a ring dimension uses (default 2, as Table 2 / ASTRA-sim)")
    ap.add_argument("--out", default=str(HERE / "fig10_chunks.md"), help="Markdown file to write")
    args = ap.parse_args(argv)
    size = args.size_mb * 1e6
    grid = run(size, args.ring_directions)
    other = run(size, 3 - args.ring_directions)
    publish(args.out, TITLE, argv, [
        f"All-Reduce of {args.size_mb:g} MB on {', '.join(PAPER_NAMES[n] for n in PLATFORMS)} "
        f"(1024 NPUs), `ring_directions={args.ring_directions}`, times from the Sec. 4.4 model "
        "(`evaluators.algorithms.themis.themis_model`).",
        "## Against the paper's text\n\n" + paper_table(grid, other, args.ring_directions),
        "## Fig. 10: average BW utilisation against chunks per collective\n\n"
        + utilization_table(grid),
        NOTES.format(ring_note=RING_NOTE),
        "## All-Reduce times (us)\n\n" + times_table(grid),
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
