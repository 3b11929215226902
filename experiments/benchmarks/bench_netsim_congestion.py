"""Benchmark: throughput of the ``congestion`` network simulator.

Replays a ring allgather on 512 NPUs (n-1 steps; at step s NPU r forwards the
chunk it received at step s-1, i.e. chunk ``(r - s + 1) mod n``, to NPU
``r + 1``: 512 * 511 = 261,632 transfers, each waiting for the transfer that
delivered its chunk) under the FIFO store-and-forward model, prints a table
(NPUs, transfers, hop events, seconds, transfers/s, hop events/s) and appends
it with date and machine information to ``experiments/benchmarks/RESULTS.md``.

The replayed time is checked against the closed form ``(n-1) * h * (latency +
chunk / bandwidth)`` for a ring order whose neighbours are ``h`` hops apart
(h = 1 on ``ring:512``).

Usage::

    python experiments/benchmarks/bench_netsim_congestion.py [--topology ring:512]
        [--size 512MiB] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from codesign.units import parse_size
from evaluators.collectives import Collective
from evaluators.netsim import replay, schedule_messages, simulate
from evaluators.schedule import COPY, Schedule
from topologies.registry import from_spec

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

def ring_allgather(topology, size_bytes: float) -> Schedule:
    """Ring allgather over NPUs 0..n-1 in id order (transfers listed step by step)."""
    n = topology.npus
    coll = Collective.on("allgather", n, size_bytes)
    steps = np.repeat(np.arange(1, n), n)              # step s = 1 .. n-1
    r = np.tile(np.arange(n), n - 1)                   # sender
    chunk = (r - steps + 1) % n
    dst = (r + 1) % n
    # Paths: the route from each NPU to its ring successor (n routes, reused per step).
    routes = [topology.route(int(u), int((u + 1) % n)) for u in range(n)]
    lengths = np.array([len(p) for p in routes], dtype=np.int64)
    flat = np.array([l for p in routes for l in p], dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per = lengths[r]
    ptr = np.concatenate([[0], np.cumsum(per)])
    links = flat[np.repeat(first[r], per) + np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], per)]
    zeros = np.zeros(r.size)
    return Schedule(coll, chunk=chunk, src=r, dst=dst, path_ptr=ptr, path_links=links,
                    start=zeros, end=zeros, op=np.full(r.size, COPY), metadata={"algorithm": "ring"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="ring:512")
    ap.add_argument("--size", default="512MiB", help="allgather output buffer")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    args = ap.parse_args()

    topo = from_spec(args.topology)
    t0 = time.perf_counter()
    sched = ring_allgather(topo, parse_size(args.size))
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    batch = schedule_messages(sched, topo)             # dependencies + validation
    deps_s = time.perf_counter() - t0
    sim_s = np.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        result = simulate(topo, batch, model="congestion")
        sim_s = min(sim_s, time.perf_counter() - t0)
    t0 = time.perf_counter()
    replayed = replay(sched, topo, model="congestion")
    replay_s = time.perf_counter() - t0

    n, m, hops = topo.npus, len(sched), batch.n_hops
    per = np.diff(sched.path_ptr)
    uniform = per.min() == per.max() and topo.latency.min() == topo.latency.max() \
        and topo.bandwidth.min() == topo.bandwidth.max()
    if uniform:
        h = int(per[0])
        lat, bw = float(topo.latency[0]), float(topo.bandwidth[0])
        expected = (n - 1) * h * (lat + sched.chunk_bytes / bw)
        check = "= closed form" if abs(replayed.time_s - expected) <= 1e-9 * expected else \
            f"MISMATCH with closed form {expected:.6g} s"
    else:
        check = "no closed form: neighbours at different hop counts"

    rows = [
        ("topology", args.topology),
        ("NPUs", f"{n}"),
        ("transfers", f"{m}"),
        ("hop events", f"{hops}"),
        ("schedule build s", f"{build_s:.3f}"),
        ("dependencies + validation s", f"{deps_s:.3f}"),
        ("simulation s (best of %d)" % args.repeat, f"{sim_s:.3f}"),
        ("full replay s", f"{replay_s:.3f}"),
        ("transfers/s (simulation)", f"{m / sim_s:,.0f}"),
        ("hop events/s (simulation)", f"{hops / sim_s:,.0f}"),
        ("transfers/s (full replay)", f"{m / replay_s:,.0f}"),
        ("replayed time s", f"{replayed.time_s:.6g} ({check})"),
        ("max link utilisation", f"{result.link_utilization.max():.4f}"),
    ]
    print_rows(rows)
    if not args.no_append:
        append_result(f"netsim congestion replay: ring allgather, {args.topology}",
                      f"python experiments/benchmarks/bench_netsim_congestion.py "
                      f"--topology {args.topology} --size {args.size}", markdown_table(rows))

if __name__ == "__main__":
    main()
