"""Benchmark: a co-design sweep (strategy search in every trial) with 1 and 2 Ray workers.

Targets (issue 16): the speed-up of a sweep with the per-trial strategy search from 1 to
2 workers on this machine (target >= 1.7x), the per-trial cost with the search on, and
the projected scaling to a 64-node cluster from the measured per-trial costs.

Setup: a grid sweep (the same trials for every worker count) of ``--trials`` designs
over torus / expander / ideal / leafspine / perms / topoopt fabrics of ``--servers``
servers x 8 A100-80, degree 2-4, 100/400 Gbps, for the mix ResNet-50 + BERT, with
``strategy_search: {evaluations: E}`` and ``collective_method: best``.  The specification
is the same for every worker count (``max_in_flight: --in-flight``, default 4: trials
queued on Ray beyond the workers keep every worker busy while the driver waits to tell
an earlier, slower trial in order); the local Ray instance gets ``workers`` CPUs
(started before the clock, so Ray start-up is excluded; worker start-up, i.e. imports,
is included).  The records of the runs must be identical apart from timings: the table
says whether they are.

Projection to ``N`` nodes of ``c`` cores: the sweep's wall time is the driver's serial
time per trial (ask/tell, records: measured as wall - sum(trial durations) / workers
with one worker) times the trials, plus the trials' compute spread over ``N x c``
workers in waves: ``ceil(trials / (N c)) x mean trial time`` (Amdahl with the measured
per-trial costs; network and scheduling overheads of a real cluster are not included).

Prints a table and appends it to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_codesign_sweep.py [--trials 12] [--servers 64]
        [--evaluations 16] [--no-append]
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

from codesign.records import load_records  # noqa: E402
from search.sweeps.driver import run_sweep  # noqa: E402
from search.sweeps.spec import parse_sweep_spec  # noqa: E402

TARGET_SPEEDUP = 1.7
COMPARED = ("trial", "status", "family", "degree", "link_bandwidth_Bps", "iteration_time_s",
            "start_iteration_time_s", "strategy", "search_evaluations", "cost_usd")


def spec(trials: int, servers: int, evaluations: int, workers: int, in_flight: int):
    return parse_sweep_spec({
        "study": f"bench-w{workers}",
        "workloads": [{"name": "resnet50", "weight": 1}, {"name": "bert", "weight": 1}],
        "space": {"families": ["torus", "expander", "ideal", "leafspine", "perms", "topoopt"],
                  "servers": servers, "degree": [2, 4], "link_rate": ["100Gbps", "400Gbps"],
                  "collective_method": "best",
                  "strategy_search": {"evaluations": evaluations, "restarts": 1}},
        "sampler": "grid", "trials": trials, "max_in_flight": in_flight, "seed": 0,
        "batch_size": 4, "trial_timeout_s": 3600})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--servers", type=int, default=64)
    ap.add_argument("--evaluations", type=int, default=16)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    import ray

    walls, frames = {}, {}
    root = Path(tempfile.mkdtemp(prefix="bench-codesign-"))
    try:
        for w in args.workers:
            ray.init(address="local", num_cpus=w, include_dashboard=False, log_to_driver=False,
                     logging_level="ERROR")
            try:
                t0 = time.perf_counter()
                res = run_sweep(spec(args.trials, args.servers, args.evaluations, w,
                                     args.in_flight), results_dir=root)
                walls[w] = time.perf_counter() - t0
            finally:
                ray.shutdown()
            frames[w] = load_records(root / f"bench-w{w}")
            print(f"workers={w}: {walls[w]:.1f} s, {res.complete} complete, {res.pruned} "
                  f"pruned, {res.failed} failed", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = args.workers[0]
    ref = frames[base][list(COMPARED)].astype(str).values.tolist()
    same = all(f[list(COMPARED)].astype(str).values.tolist() == ref for f in frames.values())
    f = frames[base]
    done = f[f["status"] == "complete"]
    durations = f["duration_s"].astype(float)
    mean_trial = float(durations.mean())
    per_complete = float(done["duration_s"].astype(float).mean()) if len(done) else math.nan
    serial = max(0.0, walls[base] - float(durations.sum()) / base) / len(f)
    rows = [("sweep", f"{args.trials} grid trials, {args.servers} servers x 8 A100-80, "
                      f"resnet50 + bert, collective_method best, strategy_search "
                      f"{{evaluations: {args.evaluations}}}, max_in_flight {args.in_flight}"),
            ("trials (complete / pruned / failed)",
             f"{len(f)} ({len(done)} / {int((f['status'] == 'pruned').sum())} / "
             f"{int((f['status'] == 'failed').sum())})"),
            ("per-trial cost, search on (mean over complete trials) s", f"{per_complete:.2f}"),
            ("per-trial cost, all trials (mean / max) s",
             f"{mean_trial:.2f} / {float(durations.max()):.2f}"),
            ("strategy evaluations per complete trial (mean)",
             f"{float(done['search_evaluations'].astype(float).mean()):.1f}" if len(done)
             else "-"),
            ("co-design gain (fixed / co-designed time, median)",
             f"{float((done['start_iteration_time_s'] / done['iteration_time_s']).median()):.3f}x"
             if len(done) else "-")]
    for w in args.workers:
        rows.append((f"workers={w} wall s", f"{walls[w]:.1f} "
                     f"({len(f) / walls[w] * 60:.1f} trials/min)"))
    if 1 in walls and 2 in walls:
        s = walls[1] / walls[2]
        rows.append(("speed-up 1 -> 2 workers", f"{s:.2f}x (target >= {TARGET_SPEEDUP}: "
                                                f"{'met' if s >= TARGET_SPEEDUP else 'MISSED'})"))
    rows.append(("driver serial time per trial s", f"{serial:.3f}"))
    for nodes, cores in ((1, 2), (8, 16), (64, 16)):
        for trials in (1000,):
            waves = math.ceil(trials / (nodes * cores))
            t = serial * trials + waves * mean_trial
            rows.append((f"projected {trials} trials on {nodes} node(s) x {cores} cores",
                         f"{t / 60:.1f} min ({trials / t * 60:.0f} trials/min)"))
    rows.append(("same records for every worker count", "yes" if same else "NO"))
    print_rows(rows)
    if not args.no_append:
        cmd = "python experiments/benchmarks/bench_codesign_sweep.py " + " ".join(
            argv if argv is not None else sys.argv[1:])
        append_result("Co-design sweep (strategy search per trial), 1 vs 2 workers",
                      cmd.strip(), markdown_table(rows))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
