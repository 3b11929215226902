"""TACOS paper (Won et al., MICRO 2024) Table I: All-Reduce on Ring_FullyConnected_Switch
systems of 1 to 64 nodes (8 to 512 NPUs), TACOS-GREEDY against Ring and Direct.

Setup (paper Section VII-B): a node is 2x4 NPUs (a ring of 2 times a fully-connected
group of 4) and the nodes hang off one switch per NPU position, so the system is
``hier:ring2_fc4_switchN`` with per-dimension bandwidths 200 / 100 / 50 GB/s.  The
paper unwinds scale-up switches with degree max and scale-out switches with degree 1;
here the only switches are the scale-out ones, so ``switch_degree=1`` is exactly the
paper's choice (the unwinder takes one degree for all switches, which is enough).

Sizes: the paper does not give Table I's collective size.  We use one chunk per NPU of
the 128 KB chunk of Section VIII-C (read as 128 KiB), so the all-reduce buffer is
``NPUs x 128 KiB`` (1 MiB on 8 NPUs, 64 MiB on 512).  Link latency 0.5 us (Fig. 6's
alpha; the setup gives none).

Prints the table and writes it to ``table1_rfs.md`` next to this script::

    python experiments/tacos/table1_rfs.py [--quick] [--max-nodes 64] [--seed 0]
        [--ilp-max-npus 16] [--ilp-time-limit 60] [--out FILE]

TACOS-ILP (``evaluators.algorithms.tacos_ilp.tacos_exact``, when it exists) is run on the
systems of at most ``--ilp-max-npus`` NPUs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evaluators.collectives import Collective  # noqa: E402
from tacos_compare import (  # noqa: E402
    PAPER_CHUNK_BYTES, PAPER_LATENCY, command_line, compare, fmt_s, fmt_us, markdown_table,
    write_report,
)
from evaluators.validate import validate_schedule  # noqa: E402
from topologies.registry import from_spec  # noqa: E402

BANDWIDTHS = "200GB/s:100GB/s:50GB/s"
NODES = (1, 2, 4, 8, 16, 32, 64)

#: Table I as printed (normalised runtimes, synthesis times in brackets).  The text
#: extraction of the paper repeats each row with a second, noisier reading; where the
#: two differ the second is given after a slash.  Rows 4 and 8 nodes print TACOS-Greedy
#: as 1.45 / 1.58 (so they seem normalised to TACOS-ILP there, despite the caption).
PAPER = {
    1: ("1.00 (70ms)", "1.00 (0.29ms)", "1.00", "1.44 / 1.77", "3.74"),
    2: ("1.00 (0.79s)", "1.00 (0.63ms)", "2.00 / 2.89", "2.70 / 3.78", "7.44"),
    4: ("1.00 (20.01s)", "1.45 (8.90ms)", "4.10", "11.28 / 11.20", "7.48 / 7.40"),
    8: ("1.00 (70.16s)", "1.58 (97.92ms)", "4.27", "26.47 / 20.47", "7.54 / 1.54"),
    16: ("-", "1.00 (1.08s)", "2.60 / 2.00", "36.00 / 30.00", "4.79"),
    32: ("-", "1.00 (16.50s)", "-", "72.24", "4.66"),
    64: ("-", "1.00 (6.09m)", "-", "146.21", "4.64"),
}


def system(nodes: int):
    """The Ring_FullyConnected_Switch system with ``nodes`` nodes of 2x4 NPUs."""
    return from_spec(f"hier:ring2_fc4_switch{nodes},bw={BANDWIDTHS},lat={PAPER_LATENCY}")


def tacos_ilp():
    """``tacos_exact`` of :mod:`evaluators.algorithms.tacos_ilp`, or None if not available."""
    try:
        from evaluators.algorithms.tacos_ilp import tacos_exact
    except ImportError:
        return None
    return tacos_exact


def ilp_cell(topo, coll, greedy_s: float, time_limit_s: float) -> str:
    """TACOS-ILP time over TACOS-GREEDY's synthesized time, with its synthesis time."""
    solve = tacos_ilp()
    t0 = time.perf_counter()
    sched = solve(topo, coll, time_limit_s=time_limit_s, switch_degree=1)
    wall = time.perf_counter() - t0
    if not validate_schedule(sched, topo, coll).valid:
        raise RuntimeError(f"invalid TACOS-ILP schedule on {topo.name}")
    proof = "optimal" if sched.metadata.get("optimal") else \
        f"gap {sched.metadata.get('mip_gap', float('nan')):.2f}"
    return f"{sched.time_s / greedy_s:.2f} ({fmt_s(wall)}, {proof})"


def build_table(nodes_list, seed: int, ilp_max_npus: int, ilp_time_limit_s: float
                ) -> tuple[str, list[tuple[int, object]]]:
    """Run every system; return the Markdown table and the raw comparisons."""
    with_ilp = tacos_ilp() is not None and ilp_max_npus > 0
    headers = ["nodes (NPUs)", "buffer", "TACOS synth us", "TACOS replay us", "synthesis",
               "Ring us", "Direct us", "Ring / TACOS", "Direct / TACOS",
               "Ring / TACOS synth", "Direct / TACOS synth"]
    headers += ["TACOS-ILP / TACOS synth"] if with_ilp else []
    headers += ["paper ILP", "paper Greedy", "paper TACCL-like", "paper Ring", "paper Direct"]
    rows, raw = [], []
    for nodes in nodes_list:
        topo = system(nodes)
        coll = Collective.on("allreduce", topo.npus, topo.npus * PAPER_CHUNK_BYTES)
        r = compare(topo, coll, seed=seed, switch_degree=1)
        raw.append((nodes, r))
        row = [f"{nodes} ({topo.npus})", f"{coll.size_bytes / 2**20:g} MiB", fmt_us(r.tacos_s),
               fmt_us(r.tacos_replay_s), fmt_s(r.synthesis_s), fmt_us(r.ring_s),
               fmt_us(r.direct_s), f"{r.ring_ratio:.2f}", f"{r.direct_ratio:.2f}",
               f"{r.ring_s / r.tacos_s:.2f}", f"{r.direct_s / r.tacos_s:.2f}"]
        if with_ilp:
            row.append(ilp_cell(topo, coll, r.tacos_s, ilp_time_limit_s)
                       if topo.npus <= ilp_max_npus else "-")
        rows.append(row + list(PAPER[nodes]))
        print(" | ".join(rows[-1]), flush=True)
    return markdown_table(headers, rows), raw


NOTES = """\
Columns: *TACOS synth* is the all-reduce time TACOS-GREEDY computes while synthesizing
(its link model: an unwound switch route NPU -> switch -> NPU is one logical link costing
`2 alpha + chunk / bandwidth`); *TACOS replay* is that schedule replayed in the `congestion`
network model with `order="schedule"` (every link keeps TACOS's order), which crosses a
switch store-and-forward (each hop `alpha + chunk / bandwidth`) and has no barrier between
the reduce-scatter and the all-gather - the time `tacos` reports for the schedule, and the
model that times Ring and Direct (`synthesize(..., method="ring" | "direct")`).  *Ring / TACOS* and
*Direct / TACOS* divide by the replayed time (same network model on both sides);
the *... / TACOS synth* columns divide by the synthesized time, as the paper's table
normalises to TACOS-GREEDY's runtime.  On 1 node there is no switch and both TACOS
times agree.  *synthesis* is wall-clock on this machine (the paper's in brackets).
Every TACOS schedule passed `validate_schedule`.

Paper columns: Table I as printed; the text extraction repeats each row with a second,
noisier reading, given after a slash where it differs.  Rows 4 and 8 nodes print
TACOS-Greedy as 1.45 and 1.58, so there the table seems normalised to TACOS-ILP.
TACCL-like (TACOS-ILP without congestion) is not implemented here.

Ring here is the topology-unaware ring over NPUs in id order (neighbours that are not
adjacent are reached over the shortest route), Direct sends every shard straight to its
destination over the shortest route; both are timed with FIFO links.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 to 4 nodes only")
    ap.add_argument("--max-nodes", type=int, default=64, help="largest node count (default 64)")
    ap.add_argument("--seed", type=int, default=0, help="TACOS seed (default 0)")
    ap.add_argument("--ilp-max-npus", type=int, default=16,
                    help="run TACOS-ILP up to this many NPUs (default 16; 0: never)")
    ap.add_argument("--ilp-time-limit", type=float, default=60.0,
                    help="TACOS-ILP time limit per phase, seconds (default 60)")
    ap.add_argument("--out", default=str(HERE / "table1_rfs.md"), help="Markdown file to write")
    args = ap.parse_args(argv)
    limit = 4 if args.quick else args.max_nodes
    nodes_list = [n for n in NODES if n <= limit]
    table, _ = build_table(nodes_list, args.seed, args.ilp_max_npus, args.ilp_time_limit)
    if tacos_ilp() is None or args.ilp_max_npus <= 0:
        ilp_note = "TACOS-ILP was not run (`evaluators.algorithms.tacos_ilp` not available or " \
                   "`--ilp-max-npus 0`)."
    else:
        ilp_note = (f"*TACOS-ILP / TACOS synth*: `evaluators.algorithms.tacos_ilp.tacos_exact` "
                    f"(same link model and unwinding as TACOS-GREEDY, time limit "
                    f"{args.ilp_time_limit:g} s per phase, up to {args.ilp_max_npus} NPUs) "
                    "over TACOS-GREEDY's synthesized time, with its wall-clock synthesis time "
                    "and whether each phase was proven optimal on the time-expanded network "
                    "(otherwise the MIP gap).")
    body = (f"All-reduce, one {PAPER_CHUNK_BYTES // 1024} KiB chunk per NPU, system "
            f"`hier:ring2_fc4_switchN,bw={BANDWIDTHS},lat={PAPER_LATENCY}`, TACOS "
            f"`switch_degree=1`, seed {args.seed}.\n\n{table}\n\n{NOTES}\n{ilp_note}\n")
    text = write_report(Path(args.out), "TACOS Table I: All-Reduce on Ring_FC_Switch systems",
                        command_line(argv), body)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
