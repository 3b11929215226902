"""Shared by the Themis (ISCA'22) reproduction scripts: the three schedulers of the
paper's Table 3 on one network, timed by the Sec. 4.4 model.

* Baseline: static hierarchical order (RS dim1..dimD, AG back), FIFO intra-dimension;
* Themis+FIFO: Algorithm 1 orders, FIFO intra-dimension;
* Themis+SCF: Algorithm 1 orders, Smallest-Chunk-First intra-dimension.

All three come from :func:`evaluators.algorithms.themis.themis_model` (no per-NPU
transfers are materialised).  The Markdown helpers are the TACOS scripts' ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

from evaluators.algorithms.themis import themis_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tacos"))
from tacos_compare import command_line, markdown_table, write_report  # noqa: E402

__all__ = ["SCHEDULERS", "run_schedulers", "markdown_table", "publish", "pct", "RING_NOTE"]

#: Table 3's schedulers: label -> themis_model options.
SCHEDULERS = {"Baseline": {"baseline": True, "policy": "fifo"},
              "Themis+FIFO": {"policy": "fifo"},
              "Themis+SCF": {"policy": "scf"}}

RING_NOTE = (
    "Ring dimensions run in both directions (`ring_directions=2`): Table 2's aggregate "
    "bandwidth per NPU counts both directions of a ring's links (e.g. 4D-Ring_FC_Ring_SW "
    "dim1: 1500 Gb/s x 2 links = 3000 Gb/s), and ASTRA-sim, the paper's simulator (Sec. 5.1), "
    "sends half of a dimension's chunk streams each way round a ring. The ring pattern that "
    "`themis()` "
    "materialises uses one direction (`ring_directions=1`), which halves the ring "
    "dimensions' bandwidth; the summary also gives that variant.")


def run_schedulers(dims, kind: str, size_bytes: float, chunks: int,
                   ring_directions: int = 2) -> dict[str, dict]:
    """``themis_model`` results of Baseline, Themis+FIFO and Themis+SCF (keys as
    :data:`SCHEDULERS`)."""
    return {label: themis_model(dims, kind, size_bytes, chunks=chunks,
                                ring_directions=ring_directions, **opts)
            for label, opts in SCHEDULERS.items()}


def pct(x: float) -> str:
    """A fraction as a percentage with 1 decimal."""
    return f"{100 * x:.1f}%"


def publish(out: str, title: str, argv, sections: list[str]) -> None:
    """Write the sections (title, command, machine first) to ``out`` and print them."""
    print(write_report(Path(out), title, command_line(argv), "\n\n".join(sections)))
