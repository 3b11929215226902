"""Shared by the TACOS reproduction scripts: run TACOS-GREEDY and the baselines on one
system and write the Markdown report.

Every script compares the same things (TACOS paper, Section VIII):

* TACOS-GREEDY (``synthesize(..., method="tacos")``): its synthesized time (the
  paper's link model: one chunk per link at a time, ``alpha + chunk / bandwidth``
  per link; an unwound switch route is one logical link) and the wall-clock
  synthesis time;
* the same schedule replayed in the ``congestion`` network model with
  ``order="schedule"`` (each link keeps TACOS's order; a switch is crossed
  store-and-forward, each hop paying ``alpha + chunk / bandwidth``), i.e. in the
  model that times the baselines;
* the Ring and Direct baselines, ``synthesize(..., method="ring" | "direct")``,
  timed by the ``congestion`` model.

Every TACOS schedule is checked with :func:`evaluators.validate.validate_schedule`.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluators.collectives import Collective
from evaluators.netsim import replay_time
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from results_file import machine  # noqa: E402

__all__ = ["Comparison", "compare", "markdown_table", "command_line", "write_report", "machine",
           "fmt_us", "fmt_s", "PAPER_CHUNK_BYTES", "PAPER_LATENCY"]

#: The chunk size of the paper's Section VIII-C ("1-64 chunks of size 128KB"), read as KiB.
PAPER_CHUNK_BYTES = 128 * 1024
#: Link latency (alpha) of the paper's Fig. 6 (the setup paragraph gives no latency).
PAPER_LATENCY = "0.5us"


@dataclass(frozen=True)
class Comparison:
    """Times (s) of TACOS-GREEDY and the baselines on one system."""

    tacos_s: float           # synthesized (TACOS link model)
    tacos_replay_s: float    # replayed: congestion model, schedule order
    synthesis_s: float       # wall clock of synthesize(method="tacos")
    ring_s: float
    direct_s: float
    transfers: int

    @property
    def ring_ratio(self) -> float:
        """Ring time over the TACOS replay (both in the congestion model)."""
        return self.ring_s / self.tacos_replay_s

    @property
    def direct_ratio(self) -> float:
        """Direct time over the TACOS replay (both in the congestion model)."""
        return self.direct_s / self.tacos_replay_s


def compare(topology, collective: Collective, *, baselines: bool = True,
            **tacos_options) -> Comparison:
    """Synthesize ``collective`` with TACOS and the baselines and time them.

    Parameters
    ----------
    topology : topologies.Topology
        The system.
    collective : Collective
        The collective (all-reduce in the paper's tables).
    baselines : bool, optional
        Also run Ring and Direct (NaN times otherwise).
    **tacos_options
        Options of the ``tacos`` algorithm (``seed``, ``switch_degree``).

    Returns
    -------
    Comparison

    Raises
    ------
    RuntimeError
        If the TACOS schedule fails validation (a bug, not a measurement).
    """
    t0 = time.perf_counter()
    sched = synthesize(topology, collective, "tacos", **tacos_options)
    synthesis_s = time.perf_counter() - t0
    report = validate_schedule(sched, topology, collective)
    if not report.valid:
        raise RuntimeError(f"invalid TACOS schedule on {topology.name}: {report.errors[:3]}")
    replayed = replay_time(sched, topology, model="congestion", order="schedule")
    nan = float("nan")
    ring = synthesize(topology, collective, "ring").time_s if baselines else nan
    direct = synthesize(topology, collective, "direct").time_s if baselines else nan
    # The greedy's own estimate (its time-expanded model: logical switch links, a barrier
    # between reduce-scatter and all-gather); ``sched.time_s`` is already the physical
    # store-and-forward time, equal to the replay.
    logical = float(sched.metadata.get("logical_time_s", sched.time_s))
    return Comparison(logical, replayed, synthesis_s, ring, direct, len(sched))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, first column left-aligned, the others right-aligned."""
    align = [":---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that ran the script, as typed from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(Path(__file__).resolve().parents[2])
    except ValueError:
        pass
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", str(script), *(shlex.quote(a) for a in args)])


def write_report(path: Path, title: str, command: str, body: str) -> str:
    """Write ``# title``, the command and the machine, then ``body``; return the text."""
    text = (f"# {title}\n\nGenerated by `{command}`\n\nMachine: {machine()}.\n\n{body.rstrip()}\n")
    Path(path).write_text(text, encoding="utf-8")
    return text


def fmt_us(seconds: float) -> str:
    """Seconds as microseconds with 2 decimals."""
    return f"{seconds * 1e6:.2f}"


def fmt_s(seconds: float) -> str:
    """A wall-clock duration: ms below one second, else seconds."""
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
