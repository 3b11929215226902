"""Benchmark: wall time of the quickstart study (issue 2 target: under two minutes on 2 cores).

Runs ``run_quickstart`` (the embedded ``experiments/sweeps/small.yaml`` sweep) in a fresh temporary results
folder (so nothing is resumed), including the start of local Ray, and writes
the report as ``codesign quickstart`` does.  Prints a table and appends it to
``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_quickstart.py [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from results_file import append_result, markdown_table, print_rows  # noqa: E402

from codesign.app.report import write_report  # noqa: E402
from search.sweeps.quickstart import QuickstartConfig, run_quickstart  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = QuickstartConfig(results_dir=str(Path(tmp) / "results"))
        t0 = time.perf_counter()
        result = run_quickstart(config)
        t1 = time.perf_counter()
        write_report(result.results_dir)
        t2 = time.perf_counter()
    spec = config.spec()
    rows = [
        ("servers", f"{spec.space.servers[0]}"),
        ("time model", result.time_model),
        ("trials (complete / pruned / failed)",
         f"{result.trials_run} ({result.complete} / {result.pruned} / {result.failed})"),
        ("trials in flight", f"{spec.max_in_flight}"),
        ("study incl. Ray start s", f"{t1 - t0:.1f}"),
        ("report s", f"{t2 - t1:.1f}"),
        ("total s (target < 120)", f"{t2 - t0:.1f}"),
    ]
    print_rows(rows)
    if not args.no_append:
        append_result("quickstart study wall time", "python experiments/benchmarks/bench_quickstart.py",
                      markdown_table(rows))


if __name__ == "__main__":
    main()
