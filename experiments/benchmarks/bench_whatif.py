"""Benchmark: the README's what-if with the co-design on, wall time (target < 60 s on 2 cores).

Runs ``codesign whatif --budget 50k,200k,1M --servers 128 --mix resnet50:2,bert:1`` as a
library call (:func:`search.whatif.run_whatif`, the CLI's defaults: collective method
``best``, strategy search with the default evaluations on the finalists, 2 worker
processes) and, with
``--llm``, the issue's LLM question ``--gpus 1024 --gpu H100 --workload llama3-70b
--budget 5e6,1e7,2e7``.  Reports the wall time, how many fabrics were priced, timed and
searched, and the answers.  The clock includes imports of the evaluators but not of
Python itself.

With ``--scale``, also the bounded-resources question at 32,768 GPUs: ``--gpus 32768 --gpu
H100 --workload llama3-405b --families leafspine --budget 3e8`` (4,096 servers; a
2,048-server data-parallel group's all-reduce is 8.4 million transfers as a schedule), with
the peak resident memory of this process and of its largest worker.  With ``--sparse``,
Llama 3 405B on 16,384 H100 over every default family at $200M (2,048 servers: the
low-degree direct-connect fabrics put ring neighbours hundreds of links apart; it did not
answer in 10 minutes and grew a worker past 18 GB before multiring was timed from its
steps).  With ``--nvl72``, Llama 3 405B on 256 GB200 NVL72 racks (18,432 GPUs) over every
default family at 2025-2026 part prices, $50M and $200M: the degree grid reaches one link
per GPU (72 per rack) and the racks' own NVLink trays are not priced as network.  With
``--huge``, Llama 3 405B on 98,304 H100 (12,288 servers, leaf-spine, $1B): no answer in 18
minutes before routing kept the predecessor rows it searched.

Prints a table and appends it to ``experiments/benchmarks/RESULTS.md``.

Usage::

    python experiments/benchmarks/bench_whatif.py [--llm] [--scale] [--sparse] [--nvl72]
        [--huge] [--finalists 3]
        [--evaluations 12] [--workers 2] [--exhaustive] [--mix-transfer] [--no-append]

``--exhaustive`` also answers each question with every affordable timed fabric searched
(the oracle of the what-if's rule for which fabrics get the search) and reports how much
slower the default answer is.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

TARGET_S = 60.0


def run(label, budgets, servers, mix, gpu, finalists, evaluations, workers,
        families=None, target_s=TARGET_S, exhaustive=False, catalog=None):
    import resource

    from search.per_fabric import SearchBudget
    from search.whatif import DEFAULT_FAMILIES, format_whatif, parse_mix, run_whatif

    def ask(finalists):
        return run_whatif(budgets, servers=servers, workloads=parse_mix(mix), gpu=gpu,
                          finalists=finalists, workers=workers,
                          families=families or DEFAULT_FAMILIES, catalog=catalog,
                          search=SearchBudget(evaluations) if evaluations else None)

    t0 = time.perf_counter()
    res = ask(finalists)
    wall = time.perf_counter() - t0
    print(format_whatif(res), flush=True)
    peak = [resource.getrusage(who).ru_maxrss / 2 ** 20   # KiB -> GiB
            for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    rows = [(f"{label}: wall s", f"{wall:.1f} (target < {target_s:g} s: "
                                 f"{'met' if wall < target_s else 'MISSED'})"),
            (f"{label}: peak RSS GiB (this process / largest worker so far)",
             f"{peak[0]:.2f} / {peak[1]:.2f}"),
            (f"{label}: worker processes", str(workers)),
            (f"{label}: fabrics priced / timed / searched",
             f"{res.evaluated} / {res.timed} / {res.searched}"),
            (f"{label}: not timed or not complete", ", ".join(
                f"{k}: {v}" for k, v in sorted(res.pruned_reasons.items())))]
    for c in res.choices:
        if c.family is None:
            rows.append((f"{label}: ${c.budget_usd:,.0f}", c.note))
            continue
        strat = c.strategy or "; ".join(f"{k}: {v}" for k, v in (c.strategies or {}).items())
        rows.append((f"{label}: ${c.budget_usd:,.0f}",
                     f"{c.topology_spec}, ${c.cost_usd:,.0f}, {c.iteration_time_s:.4g} s "
                     f"(fixed start {c.start_iteration_time_s:.4g} s), MFU {c.mfu:.1%}, "
                     f"{strat}"))
    if exhaustive:
        # The oracle of the what-if's search rule: every timed fabric that a budget
        # affords gets the strategy search (finalists = all of them).
        t0 = time.perf_counter()
        full = ask(10_000)
        rows.append((f"{label}: every affordable fabric searched (oracle): wall s / searched",
                     f"{time.perf_counter() - t0:.1f} / {full.searched}"))
        for c, f in zip(res.choices, full.choices):
            if f.family is None:
                continue
            rows.append((f"{label}: ${c.budget_usd:,.0f}, oracle",
                         f"{f.topology_spec}, ${f.cost_usd:,.0f}, {f.iteration_time_s:.4g} s; "
                         f"the answer above is {c.iteration_time_s / f.iteration_time_s - 1:+.2%}"
                         f" slower"))
    return rows


def run_mix_transfer(workers) -> list:
    """The transfer of strategies per workload (search.whatif, step 5) on a mix whose two
    workloads start far from their best strategies (BERT base tensor-parallel 8 ways,
    BERT large 4 ways; the test's ``TWO_SLOW``) on the tests' small grid of 10 timed
    fabrics, 16 servers, 4 evaluations: the rule (finalists 1) and the oracle (every
    fabric searched), seeds 0 and 1."""
    from search.per_fabric import SearchBudget
    from search.sweeps.spec import WorkloadItem
    from search.whatif import run_whatif

    mix = (WorkloadItem("bert", 1.0, strategy="dp=16,tp=8,pp=1"),
           WorkloadItem("bert", 1.0, config="large", strategy="dp=32,tp=4,pp=1"))
    grid = dict(families=("torus", "ideal", "perms"), degrees=(2, 4),
                link_rates_Bps=(12.5e9, 50e9))
    rows = []
    for seed in (0, 1):
        for label, finalists in (("rule", 1), ("every fabric searched", 99)):
            t0 = time.perf_counter()
            res = run_whatif((6e4, 1e9), servers=16, workloads=mix, search=SearchBudget(4),
                             finalists=finalists, seed=seed, workers=workers, **grid)
            rows.append((f"two slow starts, seed {seed}, {label}: wall s / searched",
                         f"{time.perf_counter() - t0:.1f} / {res.searched} of {res.timed}"))
            for c in res.choices:
                rows.append((f"two slow starts, seed {seed}, {label}: ${c.budget_usd:,.0f}",
                             f"{c.topology_spec}, {c.iteration_time_s * 1e3:.3f} ms"))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", action="store_true", help="also the llama3-70b question")
    ap.add_argument("--scale", action="store_true",
                    help="also Llama 3 405B on 32,768 H100 (leaf-spine; several minutes)")
    ap.add_argument("--sparse", action="store_true",
                    help="also Llama 3 405B on 16,384 H100 over every default family")
    ap.add_argument("--nvl72", action="store_true",
                    help="also Llama 3 405B on 256 GB200 NVL72 racks (parts-2026 prices)")
    ap.add_argument("--huge", action="store_true",
                    help="also Llama 3 405B on 98,304 H100 (leaf-spine; about 10 minutes)")
    ap.add_argument("--finalists", type=int, default=3)
    ap.add_argument("--evaluations", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2, help="the CLI's default")
    ap.add_argument("--exhaustive", action="store_true",
                    help="also search every affordable timed fabric (the oracle of the "
                         "search rule; minutes)")
    ap.add_argument("--mix-transfer", action="store_true",
                    help="also a two-workload mix on a small grid whose workloads' best "
                         "strategies are found on different fabrics (rule and oracle)")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    rows = run("README mix", (5e4, 2e5, 1e6), 128, "resnet50:2,bert:1", "A100-80",
               args.finalists, args.evaluations, args.workers, exhaustive=args.exhaustive)
    if args.mix_transfer:
        rows += run_mix_transfer(args.workers)
    if args.llm:
        rows += run("llama3-70b", (5e6, 1e7, 2e7), 128, "llama3-70b", "H100", args.finalists,
                    args.evaluations, args.workers, exhaustive=args.exhaustive)
    if args.scale:
        # 4,096 servers; no time target of its own: it must answer, in bounded memory.
        rows += run("llama3-405b 32k GPUs", (3e8,), 4096, "llama3-405b", "H100",
                    args.finalists, args.evaluations, args.workers, families=("leafspine",),
                    target_s=900.0)
    if args.sparse:
        rows += run("llama3-405b 16k GPUs, every family", (2e8,), 2048, "llama3-405b", "H100",
                    args.finalists, args.evaluations, args.workers, target_s=900.0)
    if args.nvl72:
        rows += run("llama3-405b 256 NVL72 racks, every family", (5e7, 2e8), 256,
                    "llama3-405b", "GB200-NVL72", args.finalists, args.evaluations,
                    args.workers, target_s=900.0, catalog="parts-2026")
    if args.huge:
        rows += run("llama3-405b 98k GPUs", (1e9,), 12288, "llama3-405b", "H100",
                    args.finalists, args.evaluations, args.workers, families=("leafspine",),
                    target_s=1800.0)
    print_rows(rows)
    if not args.no_append:
        cmd = "python experiments/benchmarks/bench_whatif.py " + " ".join(
            argv if argv is not None else sys.argv[1:])
        append_result("What-if with co-design (README example)", cmd.strip(),
                      markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
