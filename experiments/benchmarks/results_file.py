"""Shared by the benchmark scripts: machine description and appending to RESULTS.md."""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Sequence
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = ("# Benchmark results\n\n"
          "Appended by the scripts in `experiments/benchmarks/` (newest last); "
          "never edit past entries.\n")


def machine() -> str:
    """One line describing the machine the benchmark ran on."""
    return (f"{platform.node() or 'unknown host'}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}")


def markdown_table(rows: Sequence[tuple[str, str]]) -> str:
    """A two-column metric/value Markdown table."""
    return "\n".join(["| metric | value |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in rows])


def print_rows(rows: Sequence[tuple[str, str]]) -> None:
    """Print metric/value rows aligned, for the terminal."""
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def append_result(title: str, command: str, table: str) -> None:
    """Append one dated entry to RESULTS.md (never rewrites earlier entries)."""
    stamp = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    entry = f"\n## {title} ({stamp})\n\nMachine: {machine()}.\nCommand: `{command}`\n\n{table}\n"
    if not RESULTS.exists():
        RESULTS.write_text(HEADER)
    with RESULTS.open("a") as fh:
        fh.write(entry)
    print(f"appended to {RESULTS}")
