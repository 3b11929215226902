"""Static hierarchical multi-dimensional baseline (``--algorithm hierarchical``).

Themis (ISCA'22) Sec. 2.3, "baseline collective scheduling" of multi-rail
hierarchical algorithms: on a network of dimensions ``dim_0 .. dim_{D-1}``
(``topology.dims``, fastest-varying first) an all-reduce is

1. a reduce-scatter along ``dim_0``, then along ``dim_1``, ..., ``dim_{D-1}``
   (each stage shrinks the data a node handles by the dimension's size), then
2. an all-gather along ``dim_{D-1}``, ..., back to ``dim_0``,

every stage running among the NPUs of one *line* of the dimension (the NPUs
that share all other coordinates) with the dimension's topology-aware
algorithm (Themis Table 1): ``ring`` -> ring, ``fc`` -> direct, ``switch`` ->
halving-doubling (recursive halving/doubling, folded for non-powers of two);
``uniring`` -> ring; ``mesh`` -> ring over the line (its wrap-around hop is
routed back along the line).  Dimensions of size 1 are skipped.
A reduce-scatter collective runs stage 1 only, an all-gather stage 2 only.

Data layout: shard ``s`` belongs to the NPU ``npus[s]`` with coordinates
``x(s)``.  In the stage on ``dim_k`` the line's member with coordinate ``x``
owns the block of shards whose coordinate ``k`` is ``x`` among the shards the
line still handles (those whose coordinates on the dimensions already reduced
equal the line's).  Blocks are listed piece by piece (piece 0 of every shard,
then piece 1, ...), so each of the ``c`` pieces flows through the stages as
one of Themis' pipelined chunks; the congestion model lets a piece enter the
next stage as soon as it has left the previous one.

The collective must involve every NPU of the topology (in any rank order),
and the topology must describe its dimensions: other networks raise
:class:`~codesign.errors.InvalidSpecError` (use ring, direct or rhd there).
"""

from __future__ import annotations

import numpy as np

from codesign.errors import invalid
from evaluators.algorithms.patterns import (
    direct_all_gather, direct_reduce_scatter, hd_all_gather, hd_reduce_scatter,
    ring_all_gather, ring_reduce_scatter,
)
from evaluators.algorithms.closed_form import HIERARCHICAL
from evaluators.algorithms.plan import Plan, concurrent, sequence
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["hierarchical", "DIMENSION_ALGORITHMS", "line_groups", "stage_steps"]

#: Per-dimension algorithm (Themis Table 1), by ``Dimension.kind``.
DIMENSION_ALGORITHMS = {"ring": "ring", "uniring": "ring", "mesh": "ring", "fc": "direct",
                        "switch": "rhd"}
#: Per-dimension reduce-scatter and all-gather step builders by algorithm (also Themis's).
REDUCE_SCATTER_PHASES = {"ring": ring_reduce_scatter, "direct": direct_reduce_scatter,
                         "rhd": hd_reduce_scatter}
ALL_GATHER_PHASES = {"ring": ring_all_gather, "direct": direct_all_gather, "rhd": hd_all_gather}


def npu_coordinates(topology) -> np.ndarray:
    """Coordinates of every NPU, shape ``(npus, len(dims))`` (fastest-varying first)."""
    coords = topology.node_attrs.get("coords")
    if coords is not None and coords.shape == (topology.npus, len(topology.dims)):
        return np.asarray(coords, dtype=np.int64)
    sizes = np.array([d.size for d in topology.dims], dtype=np.int64)
    strides = np.concatenate([[1], np.cumprod(sizes)[:-1]])
    ids = np.arange(topology.npus, dtype=np.int64)
    return (ids[:, None] // strides[None, :]) % sizes[None, :]


def line_groups(coords: np.ndarray, k: int) -> list[list[int]]:
    """NPUs of every line of dimension ``k`` (equal other coordinates), by coordinate ``k``."""
    others = [j for j in range(coords.shape[1]) if j != k]
    key = coords[:, others] if others else np.zeros((coords.shape[0], 0), np.int64)
    lines: dict[tuple, list[int]] = {}
    for npu in np.lexsort(np.column_stack([coords[:, k], key]).T[::-1]):
        lines.setdefault(tuple(key[npu].tolist()), []).append(int(npu))
    return list(lines.values())


def stage_steps(lines, coords, shard_xy, c: int, pieces: np.ndarray, k: int, size: int,
                done: list[int], algorithm: str, phase: str) -> list:
    """Steps of one stage (``phase`` ``"rs"`` or ``"ag"``) on dimension ``k``, all ``lines``
    at once, for the chunk pieces ``pieces`` of each shard (of ``c``); ``done`` are the
    dimensions already reduced (still to be gathered).  Also used by Themis."""
    fn = (REDUCE_SCATTER_PHASES if phase == "rs" else ALL_GATHER_PHASES)[algorithm]
    per_line = []
    for members in lines:
        ref = coords[members[0]]
        in_scope = np.all(shard_xy[:, done] == ref[done], axis=1) if done else \
            np.ones(shard_xy.shape[0], dtype=bool)
        blocks = []
        for x in range(size):
            shards = np.flatnonzero(in_scope & (shard_xy[:, k] == x))
            # Piece-major: piece 0 of every shard of the block, then piece 1...
            blocks.append((pieces[:, None] + (shards * c)[None, :]).ravel())
        per_line.append(fn(members, blocks))
    return concurrent(*per_line)


@register_algorithm("hierarchical", kinds=("allreduce", "reducescatter", "allgather"),
                    summary="Themis' static multi-dimensional baseline (RS up the dims, AG down)",
                    closed_form=HIERARCHICAL)
def hierarchical(topology, collective: Collective) -> Schedule:
    """Static hierarchical schedule on a multi-dimensional network.

    Parameters
    ----------
    topology : topologies.Topology
        A network with ``topology.dims`` (torus, mesh, hypercube, ``hier:...``,
        ASTRA-sim network files).
    collective : Collective
        allreduce, reducescatter or allgather over every NPU of the topology.

    Returns
    -------
    Schedule
        Timed by the ``congestion`` model; ``metadata["stages"]`` lists the
        stages as ``"rs:dim0:ring"``, ... ``"ag:dim0:ring"``.

    Raises
    ------
    InvalidSpecError
        If the topology has no dimensions or the participants are not all NPUs.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = hierarchical(from_spec("torus:2x2,bw=1GB/s,lat=0"),
    ...                  Collective.on("allreduce", 4, 4e9))
    >>> s.metadata["stages"]
    ['rs:dim0:ring', 'rs:dim1:ring', 'ag:dim1:ring', 'ag:dim0:ring']
    """
    if not topology.dims:
        raise invalid(f"topology {topology.name!r} for algorithm 'hierarchical'",
                      topology.family,
                      "a multi-dimensional network with topology.dims (torus, mesh, hypercube, "
                      "hier:...); use ring, direct or rhd on other networks")
    if sorted(collective.npus) != list(range(topology.npus)):
        raise invalid("participants for algorithm 'hierarchical'", list(collective.npus),
                      f"every NPU 0..{topology.npus - 1} of {topology.name!r} (any order)")
    coords = npu_coordinates(topology)
    shard_xy = coords[np.asarray(collective.npus)]
    dims = [(k, d.size, DIMENSION_ALGORITHMS[d.kind]) for k, d in enumerate(topology.dims)
            if d.size > 1]
    rs = [(k, size, alg, "rs") for k, size, alg in dims]
    ag = [(k, size, alg, "ag") for k, size, alg in reversed(dims)]
    stages = {"reducescatter": rs, "allgather": ag, "allreduce": rs + ag}[collective.kind]
    c = collective.chunks_per_npu
    plan = Plan(topology, collective)
    plan.add_steps(sequence(*(stage_steps(line_groups(coords, k), coords, shard_xy, c,
                                          np.arange(c), k, size, list(range(k)), alg, phase)
                              for k, size, alg, phase in stages)))
    return plan.finish("hierarchical",
                       stages=[f"{phase}:dim{k}:{alg}" for k, _, alg, phase in stages])
