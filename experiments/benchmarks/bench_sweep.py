"""Benchmark: sweep throughput (trials per minute) on a 128-server design space, 1 vs 2 Ray workers.

Runs :func:`search.sweeps.driver.run_sweep` three times on the same specification in
fresh temporary folders: a local Ray of 1 CPU with 1 trial in flight, 1 CPU with
``--in-flight`` trials in flight (default 4), and 2 CPUs with ``--in-flight``.
The headline speed-up is the first against the third (a sequential sweep
against the parallel one); the second isolates the worker count (the driver's
own work overlaps evaluations in both).  Ray start-up is
excluded (Ray is started before the clock and reused); the journal, the
sampler and the Parquet writes are included.  The space: 128 servers, the six
quickstart families, degree 2-8, 25-400 Gbps links, ResNet-50 with pure data
parallelism (``time_model`` of the records says which performance model ran).

``--pad-s S`` adds S seconds of busy CPU work to every evaluation (a stand-in
for a heavier performance model, e.g. flow simulation), to show how the
speed-up depends on the ratio of evaluation to driver time: the driver's own
work per trial (Optuna ask/tell with an fsynced journal, about ten appends per
trial, and Parquet batches) is serial and shares the 2 cores.

Prints a table and appends it to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_sweep.py [--trials 40] [--in-flight 4] [--pad-s 0]
                                                 [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from results_file import append_result, markdown_table, print_rows  # noqa: E402

from search.sweeps.driver import run_sweep, time_model_name  # noqa: E402
from search.sweeps.spec import parse_sweep_spec  # noqa: E402

SPACE = {"families": ["fattree", "leafspine", "ideal", "expander", "torus", "perms"],
         "servers": 128, "degree": {"low": 2, "high": 8},
         "link_rate": ["25Gbps", "100Gbps", "200Gbps", "400Gbps"]}


def _padded(pad_s: float):
    def evaluate(point):
        from search.sweeps.driver import evaluate_trial

        out = evaluate_trial(point)
        end = time.perf_counter() + pad_s
        x = 0
        while time.perf_counter() < end:  # busy: occupies a core like a real model
            x += 1
        return out

    return evaluate


def _run(trials: int, cpus: int, in_flight: int, pad_s: float) -> tuple[float, float, dict]:
    import ray

    spec = parse_sweep_spec({"study": "bench", "workloads": "resnet50", "space": SPACE,
                             "trials": trials, "max_in_flight": in_flight, "seed": 0,
                             "population_size": 8, "batch_size": 8})
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    try:
        # Warm the workers (imports) so that both runs measure the steady state.
        ray.get([ray.remote(lambda: __import__("search.sweeps.driver")).remote() for _ in range(cpus)])
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = run_sweep(spec, results_dir=tmp, evaluate=_padded(pad_s) if pad_s else None)
            wall = time.perf_counter() - t0
            import pandas as pd

            df = pd.read_parquet(Path(tmp) / "bench" / "records")
            eval_s = float(df["duration_s"].dropna().mean())
    finally:
        ray.shutdown()
    return wall, eval_s, res.to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--pad-s", type=float, default=0.0,
                    help="busy seconds added to every evaluation (default 0)")
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    args = ap.parse_args()
    import os

    load0 = os.getloadavg()[0]
    one, eval1, r1 = _run(args.trials, 1, 1, args.pad_s)
    one_k, _, _ = _run(args.trials, 1, args.in_flight, args.pad_s)
    two, eval2, r2 = _run(args.trials, 2, args.in_flight, args.pad_s)
    rows = [
        ("space", "128 servers x 6 families x degree 2-8 x 4 link rates, resnet50"),
        ("time model", time_model_name() + (f" + {args.pad_s:g} s busy pad per trial"
                                            if args.pad_s else "")),
        ("trials (complete / pruned / failed)",
         f"{args.trials} ({r1['complete']} / {r1['pruned']} / {r1['failed']})"),
        ("mean evaluate_trial s, excl. pad (1 / 2 workers)", f"{eval1:.3f} / {eval2:.3f}"),
        ("1 worker, 1 in flight: s, trials/min", f"{one:.1f}, {60 * args.trials / one:.0f}"),
        (f"1 worker, {args.in_flight} in flight: s, trials/min",
         f"{one_k:.1f}, {60 * args.trials / one_k:.0f}"),
        (f"2 workers, {args.in_flight} in flight: s, trials/min",
         f"{two:.1f}, {60 * args.trials / two:.0f}"),
        ("speed-up 1 -> 2 workers (target >= 1.7)", f"{one / two:.2f}"),
        (f"speed-up 1 -> 2 workers, both {args.in_flight} in flight", f"{one_k / two:.2f}"),
        ("load average at start / end (2 cores shared)",
         f"{load0:.1f} / {os.getloadavg()[0]:.1f}"),
    ]
    print_rows(rows)
    if not args.no_append:
        append_result("sweep throughput, 128-server space",
                      f"python experiments/benchmarks/bench_sweep.py --trials {args.trials} "
                      f"--in-flight {args.in_flight} --pad-s {args.pad_s:g}", markdown_table(rows))


if __name__ == "__main__":
    main()
