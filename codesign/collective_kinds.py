"""The collective kinds, defined once for every layer (workloads, evaluators, search).

Size convention (nccl-tests, docs/architecture.md section 4): ``size`` is the output buffer of an
allgather, the input buffer of a reducescatter, one rank's buffer of an allreduce,
broadcast or reduce, one rank's send buffer of an alltoall (N blocks), the root's send
buffer of a scatter and its receive buffer of a gather.  algbw is ``size / time``; busbw
applies nccl-tests' factors (``doc/PERFORMANCE.md`` of nccl-tests: allreduce
``2(n-1)/n``; allgather, reducescatter, alltoall ``(n-1)/n``; the others 1).
"""

from __future__ import annotations

from codesign.specs import check_choice

__all__ = ["KINDS", "REDUCING_KINDS", "ROOTED_KINDS", "RING_KINDS", "busbw_factor",
           "ring_bytes_per_member"]

#: Every collective the evaluators synthesize and time.
KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce",
         "scatter", "gather")
#: Kinds whose chunks are partial sums combined by reduce transfers.
REDUCING_KINDS = frozenset({"reducescatter", "allreduce", "reduce"})
#: Kinds with a root NPU.
ROOTED_KINDS = frozenset({"broadcast", "reduce", "scatter", "gather"})
#: Collectives that TopoOpt treats as mutable AllReduce traffic (ring-permutable).
RING_KINDS = ("allreduce", "reducescatter", "allgather")


def busbw_factor(kind: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw * factor (module docstring)."""
    check_choice("collective", kind, KINDS)
    if n < 2:
        return 1.0
    if kind == "allreduce":
        return 2.0 * (n - 1) / n
    if kind in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def ring_bytes_per_member(kind: str, size: float, n: int) -> float:
    """Bytes each member sends its ring successor for a collective of ``size`` bytes.

    ``allreduce``: ``2 (n-1)/n size``; ``reducescatter`` / ``allgather``:
    ``(n-1)/n size`` (nccl-tests sizes: input buffer / output buffer): the bus-bandwidth
    factor times the size (:func:`busbw_factor`), nothing on one member.

    Examples
    --------
    >>> ring_bytes_per_member("allreduce", 8.0, 4)
    12.0
    """
    check_choice("ring collective kind", kind, RING_KINDS)
    if n <= 1:
        return 0.0
    return busbw_factor(kind, n) * size
