"""Writing measured-run CSVs (``evaluators.iteration.runs``) for the calibration tests."""

from __future__ import annotations

import csv
from pathlib import Path

#: The columns the tests write (README of experiments/validation, "Columns").
COLS = ["id", "source", "gpu", "gpus", "workload", "options", "strategy", "system",
        "evaluate", "measured", "value", "flops_formula"]


def write_runs(path: Path, rows: list[dict]) -> Path:
    """Write ``rows`` (dicts of some of :data:`COLS`; the rest empty) to ``path``."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLS)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLS})
    return path
