"""Size estimates of schedules, LPs and simulations, checked before the work starts.

Every schedule in the IR (:class:`~evaluators.schedule.Schedule`) moves one
chunk over one path per transfer, so the number of transfers of *any* valid
schedule is at least the number of chunk deliveries the collective's
postcondition forces (:func:`min_transfers`): a lower bound that needs no
synthesis and is tight for the ring, direct and hierarchical algorithms on
one-hop networks.  Multiplied by the measured bytes one transfer costs while a
schedule is built, validated and reported it gives the estimate that
:func:`check_synthesis` compares with the memory limit
(:mod:`codesign.resources`), so ``ring:100000`` with ``tacos`` (2 x 10^10
transfers) is refused in milliseconds instead of exhausting the machine.

Calibration (this machine, ``/usr/bin/time -f %M``, ``codesign synth ...
--collective allreduce --size 1GB``): ring:512 ring 523,264 transfers, 333 MB
peak; themis:3d-sw-sw-sw-hetero hierarchical 2,095,104 transfers, 1.6 GB
peak; i.e. 450-750 B per transfer -> :data:`BYTES_PER_TRANSFER`.  The fluid
MCF LP (thesis Ch. 3-4, one time-expanded network per origin) measured
10.7 GB on ring:64 allreduce (64 origins x 128 links x 33+ steps x 2 phases,
~5.4e5 flow variables) -> :data:`BYTES_PER_LP_VARIABLE` (interior-point
fill-in dominates).
"""

from __future__ import annotations

import math
from typing import Any

from codesign.resources import check_count, check_memory
from evaluators.collectives import Collective

__all__ = ["BYTES_PER_TRANSFER", "BYTES_PER_LP_VARIABLE", "min_transfers", "schedule_chunks",
           "estimate_schedule_bytes", "estimate_mcf_bytes", "check_synthesis", "check_mcf",
           "check_simulation", "check_routed"]

#: Peak bytes per transfer while a schedule is synthesized, validated and reported
#: (a one-link path).
BYTES_PER_TRANSFER = 600
#: Peak bytes per further link of a transfer's path: ``direct`` on
#: themis:3d-sw-sw-sw-hetero (mean 5.38 hops) alltoall, 1 and 2 chunks: 1.52 and 2.77
#: GB peak, 1,190 B per transfer at the margin -> (1190 - 600) / 4.38.  The other two
#: calibrations agree: ring:512 (1 hop) 637 B, the Themis hierarchical schedule (2
#: hops through a switch) 764 B against 735.
BYTES_PER_HOP = 135
#: Algorithms whose transfers follow the fabric's shortest path between any two
#: participants (the others move between neighbours of the ring, tree or dimension).
_ANY_PAIR = frozenset({"direct"})
#: Peak bytes per flow variable of the fluid MCF LP (HiGHS interior point).
BYTES_PER_LP_VARIABLE = 20_000
#: Largest node count for which the MCF estimate uses the exact diameter.
_DIAMETER_NODES = 4096


def min_transfers(kind: str, n: int, chunks_per_npu: int) -> int:
    """Fewest transfers any schedule of the collective can have (chunk deliveries).

    ``n`` participants, ``c`` chunks per shard: allgather, reducescatter and
    alltoall need ``n (n-1) c`` (every chunk reaches, or is combined from,
    ``n - 1`` other NPUs); allreduce ``2 n (n-1) c`` (reduce then distribute
    each of the ``n c`` chunks); broadcast, reduce, scatter, gather ``(n-1) c``.
    """
    c = int(chunks_per_npu)
    if kind == "allreduce":
        return 2 * n * (n - 1) * c
    if kind in ("allgather", "reducescatter", "alltoall"):
        return n * (n - 1) * c
    return (n - 1) * c


def schedule_chunks(collective: Collective, method: str, options: dict[str, Any]) -> int:
    """Chunks per NPU the schedule of ``method`` will use (Themis re-chunks to ``chunks``)."""
    c = collective.chunks_per_npu
    if method == "themis":
        want = options.get("chunks", 64)
        if isinstance(want, int) and not isinstance(want, bool) and want >= 1:
            c = -(-want // c) * c
    return c


def estimate_schedule_bytes(collective: Collective, method: str,
                            options: dict[str, Any] | None = None,
                            topology=None) -> tuple[int, float]:
    """``(transfers, bytes)``: lower bound on transfers and the memory they take.

    With ``topology``, a ``direct`` schedule's transfers take the fabric's mean path
    length in links (:data:`BYTES_PER_HOP`; above 4,096 nodes one link, where the
    transfer count alone refuses anything that large)."""
    transfers = min_transfers(collective.kind, collective.n,
                              schedule_chunks(collective, method, options or {}))
    hops = 1.0
    if topology is not None and method in _ANY_PAIR and topology.n_nodes <= _DIAMETER_NODES:
        hops = max(1.0, float(topology.mean_path_length))
    return transfers, _schedule_bytes(transfers, transfers * hops)


def _schedule_bytes(transfers: float, links: float) -> float:
    """Peak bytes of a schedule of ``transfers`` transfers over ``links`` links in all:
    :data:`BYTES_PER_TRANSFER` each and :data:`BYTES_PER_HOP` per link beyond its first."""
    return float(transfers) * BYTES_PER_TRANSFER + max(0.0, float(links) - float(transfers)) \
        * BYTES_PER_HOP


def check_synthesis(topology, collective: Collective, method: str,
                    options: dict[str, Any] | None = None) -> None:
    """Refuse a synthesis whose schedule (or LP) would not fit the memory limit.

    Raises
    ------
    codesign.resources.ResourceLimitError
        One line naming the NPU count, the estimate, the limit and what to do.
    """
    if method == "mcf":
        check_mcf(topology, collective, decomposition=str((options or {}).get(
            "decomposition", "none")))
    transfers, nbytes = estimate_schedule_bytes(collective, method, options, topology)
    what = f"a {method} {collective.kind} schedule ({transfers:.3g} transfers or more)"
    instead = ("use fewer NPUs or chunks, `codesign bound` for a lower bound"
               + (", or no --out for the Themis model-only answer"
                  if method in ("themis", "hierarchical") else ""))
    check_count(what, "npus", collective.n, transfers, instead)
    check_memory(what, "npus", collective.n, nbytes, instead)


def check_routed(collective: Collective, method: str, transfers: int, hops: int) -> None:
    """Refuse a schedule once its routes are known, before its per-hop arrays exist.

    :func:`check_synthesis` counts one link per transfer for the algorithms that move
    between ring, tree or dimension neighbours, but on a sparse fabric those neighbours
    can be hundreds of links apart (a ring over 256 of 2,048 servers of a degree-2
    fabric: 130,560 transfers of ~540 links each, 10 GB), so the plan checks again with
    the actual ``hops`` (links over all transfers) at :data:`BYTES_PER_HOP` per further
    link.

    Raises
    ------
    codesign.resources.ResourceLimitError
        One line naming the NPU count, the estimate, the limit and what to do.
    """
    nbytes = _schedule_bytes(transfers, hops)
    what = (f"a {method} {collective.kind} schedule ({transfers:.3g} transfers over "
            f"{hops:.3g} links)")
    instead = "use fewer NPUs or a denser fabric, or `codesign bound` for a lower bound"
    check_count(what, "npus", collective.n, hops, instead)
    check_memory(what, "npus", collective.n, nbytes, instead)


def estimate_mcf_bytes(topology, collective: Collective, *,
                       decomposition: str = "none", steps: int | None = None
                       ) -> tuple[float, float]:
    """``(variables, bytes)`` of the fluid MCF LP: origins x links x steps x phases.

    Steps are at least the diameter (a chunk needs that many steps to reach
    the farthest NPU); for networks above 4096 nodes 1 is used, which still
    refuses them (the bound is then far above any limit).  With a
    Dantzig-Wolfe decomposition (``dw``, ``mirrored``: one origin's block is
    priced at a time, thesis Ch. 5) the memory is that of a few blocks, taken
    as 4 origins' share of the variables.  ``steps``: the time-expanded network's steps
    when the caller sets them (``bound --method mcf --option steps=T``), if more.
    """
    n_links = topology.n_links
    planned = steps
    steps = 1
    if topology.n_nodes <= _DIAMETER_NODES:
        steps = max(1, topology.diameter)
    if planned is not None:
        steps = max(steps, int(planned))
    phases = 2 if collective.kind == "allreduce" else 1
    variables = float(collective.n) * n_links * steps * phases
    alive = variables if decomposition in ("none", "") else variables * min(
        1.0, 4.0 / collective.n)
    return variables, alive * BYTES_PER_LP_VARIABLE


def check_mcf(topology, collective: Collective, *, decomposition: str = "none",
              steps: int | None = None) -> None:
    """Refuse a fluid MCF LP that would not fit (see :func:`estimate_mcf_bytes`); with
    ``steps`` the refusal names the steps, which then drive the size."""
    variables, nbytes = estimate_mcf_bytes(topology, collective, decomposition=decomposition,
                                           steps=steps)
    what = f"the fluid MCF LP ({variables:.3g} flow variables)"
    instead = ("use fewer NPUs, `codesign bound --method cut`, or --algorithm tacos/ring")
    field, value = ("npus", collective.n) if steps is None else ("steps", steps)
    if steps is not None:
        instead = "use fewer steps (the default searches them from the diameter up)"
    check_count(what, field, value, variables, instead)
    check_memory(what, field, value, nbytes, instead)


def check_simulation(n_transfers: int, n_links: int, *, field: str = "transfers") -> None:
    """Refuse a network simulation of ``n_transfers`` messages over ``n_links`` links.

    Each message holds a route, events and per-hop times (~the same
    :data:`BYTES_PER_TRANSFER` as a schedule transfer, times the hops, which
    are bounded here by ``log2`` of the links as a typical path length).
    """
    hops = max(1.0, math.log2(max(n_links, 2)))
    nbytes = float(n_transfers) * BYTES_PER_TRANSFER * hops
    what = f"simulating {n_transfers} transfers"
    check_count(what, field, n_transfers, n_transfers, "simulate fewer transfers")
    check_memory(what, field, n_transfers, nbytes, "simulate fewer transfers")
