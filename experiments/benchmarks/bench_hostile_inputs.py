"""Benchmark: issue 18's oversized inputs and the six 1024-NPU Themis platforms from the CLI.

Every case runs ``python -m codesign ...`` in its own process under a 2 GiB
address-space limit (``RLIMIT_AS``), as the issue's "done when" asks; the table
gives the exit status, the wall time, the peak resident memory (``wait4``) and
the first 90 characters of the one-line answer.  Targets: exit 2 (or 0 with a
correct answer), < 10 s and < 2 GiB each.

The Themis rows run ``synth themis:NAME --collective allreduce --size 1GB
--algorithm themis --json`` (Sec. 4.4 model, 64 chunks, SCF) and report the
model time, the static hierarchical baseline's time and the speed-up; the
platforms are also written as ASTRA-sim network files (bandwidth per link in
2^30 B/s with the parallel links folded in, latency in ns) and answered from
those.

Usage::

    python experiments/benchmarks/bench_hostile_inputs.py [--no-append]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

from topologies.families.themis_presets import THEMIS_TABLE2, preset_dimensions  # noqa: E402

LIMIT = 2 << 30
SYNTH = ["--collective", "allreduce", "--size", "1GB"]
KINDS = {"fc": "FullyConnected", "ring": "Ring", "switch": "Switch"}


def run(argv: list[str]) -> tuple[int, float, float, str, str]:
    """``(exit, wall s, peak RSS MiB, stdout, stderr)`` of ``codesign argv`` under 2 GiB."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    env.pop("CODESIGN_MAX_MEMORY", None)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "codesign", *argv], stdout=out,
                                stderr=err, preexec_fn=limit, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return (proc.returncode, wall, usage.ru_maxrss / 1024, out.read().decode(),
                err.read().decode())


def astra_file(name: str, folder: Path) -> Path:
    dims = preset_dimensions(name)
    path = folder / f"{name}.yaml"
    path.write_text(
        f"topology: [{', '.join(KINDS[d.kind] for d in dims)}]\n"
        f"npus_count: [{', '.join(str(d.size) for d in dims)}]\n"
        f"bandwidth: [{', '.join(repr(d.bandwidth_Bps * d.links / 2 ** 30) for d in dims)}]\n"
        f"latency: [{', '.join(repr(d.latency_s * 1e9) for d in dims)}]\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp())
    files = {
        "npus": "npus: 1000000000\nbandwidth: 25GB/s\nlatency: 1us\nlinks:\n  - {src: 0, dst: 1}\n",
        "count": "npus: 2\nbandwidth: 25GB/s\nlatency: 1us\nlinks:\n"
                 "  - {src: 0, dst: 1, count: 1000000000}\n",
        "astra": "topology: [Ring]\nnpus_count: [1000000000]\nbandwidth: [50]\nlatency: [500]\n",
    }
    for k, text in files.items():
        (folder / f"{k}.yaml").write_text(text)
    cases = [
        ["synth", "ring:100000", *SYNTH, "--algorithm", "tacos"],
        ["synth", "ring:100000", *SYNTH, "--algorithm", "mcf"],
        ["synth", "ring:10000", *SYNTH, "--algorithm", "tacos"],
        ["topology", "show", "ring:100000"],
        ["topology", "show", str(folder / "npus.yaml")],
        ["topology", "show", str(folder / "count.yaml")],
        ["topology", "show", str(folder / "astra.yaml")],
        ["topology", "show", "torus:1000x1000x1000"],
        ["topology", "show", "switch:10000000"],
        ["topology", "show", "ring:99999999999999999999999"],
        ["whatif", "--servers", "1000000", "--budget", "1e6"],
        ["synth", "ring:8", "--collective", "allreduce", "--size", "1e30TiB"],
        ["bound", "ring:8,bw=1e-300", *SYNTH, "--json"],
        ["topology", "topoopt", "--servers", "20000", "--degree", "8", "--bandwidth", "100Gbps"],
        ["synth", "ring:100000", *SYNTH, "--algorithm", "ring", "--json"],  # closed form
    ]
    rows: list[tuple[str, str]] = []
    worst_s = worst_mb = 0.0
    for argv in cases:
        code, wall, mb, out, err = run(argv)
        worst_s, worst_mb = max(worst_s, wall), max(worst_mb, mb)
        line = (err or out).strip().splitlines()[0] if (err or out).strip() else ""
        rows.append((" ".join(a if len(a) < 40 else "FILE" for a in argv[:4]) + " ...",
                     f"exit {code}, {wall:.1f} s, {mb:.0f} MiB: {line[:90]}"))
    speedups = []
    for name in THEMIS_TABLE2:
        for label, spec in (("spec", f"themis:{name}"), ("astra", str(astra_file(name, folder)))):
            code, wall, mb, out, err = run(["synth", spec, *SYNTH, "--algorithm", "themis",
                                            "--json"])
            worst_s, worst_mb = max(worst_s, wall), max(worst_mb, mb)
            if code != 0:
                rows.append((f"themis {name} ({label})", f"exit {code}: {err.strip()[:90]}"))
                continue
            d = json.loads(out)
            if label == "spec":
                speedups.append(d["speedup_over_baseline"])
            rows.append((f"themis {name} ({label})",
                         f"exit 0, {wall:.1f} s, {mb:.0f} MiB: themis {d['time_s'] * 1e3:.3f} ms,"
                         f" baseline {d['baseline_time_s'] * 1e3:.3f} ms, speed-up "
                         f"{d['speedup_over_baseline']:.3f}x, model_only={d['model_only']}"))
    rows.append(("Themis mean speed-up over baseline (6 platforms, 1 GB all-reduce)",
                 f"{sum(speedups) / len(speedups):.3f}x (min {min(speedups):.3f}x, "
                 f"max {max(speedups):.3f}x)"))
    rows.append(("worst wall s / peak MiB (targets 10 s / 2048 MiB)",
                 f"{worst_s:.1f} / {worst_mb:.0f}"))
    print_rows(rows)
    if not args.no_append:
        append_result("Oversized and hostile inputs, Themis at 1024 NPUs (issue 18)",
                      "python experiments/benchmarks/bench_hostile_inputs.py",
                      markdown_table(rows))


if __name__ == "__main__":
    main()
