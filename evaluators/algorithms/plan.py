"""Building the logical transfers of a baseline algorithm and timing them.

Every baseline (ring, direct, rhd, dbt, hierarchical, multiring...) is written
the same way:

1. a *pattern* (see :mod:`evaluators.algorithms.patterns`) produces **steps**:
   a step is a list of :data:`Send` ``(chunks, src, dst, op)`` - one transfer
   per chunk id in ``chunks`` from NPU ``src`` to NPU ``dst``;
2. patterns that run at the same time are merged step by step with
   :func:`concurrent`, patterns that run one after the other are joined with
   :func:`sequence`;
3. a :class:`Plan` collects the steps in that order, routes every transfer over
   ``topology.route(src, dst)`` (minimum hop; neighbours that are not adjacent
   are reached over shortest paths) and :meth:`Plan.finish` re-times the
   schedule with the ``congestion`` network model (docs/architecture.md section 5).

The order of the transfers is their causal order: the simulator makes
transfer ``i`` wait for every earlier transfer ``j`` that delivered the same
chunk to ``src[i]`` (``evaluators.netsim.replay``), so a pattern must list a
transfer after the arrivals whose data it forwards.  Times start as
placeholders (0) and are filled by the replay.

The replay only orders a send after the arrivals it forwards (read after
write).  The patterns never deliver a new value of a chunk to a node that
still has to send its old value of that chunk, except along a causal chain
that passes through that send (e.g. a ring all-gather returns to a node only
after its reduce-scatter send), so every send carries exactly the data the
pattern means; :func:`evaluators.validate.validate_schedule` checks it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from codesign.errors import CodesignError, invalid
from evaluators.collectives import Collective
from evaluators.estimates import check_routed
from evaluators.schedule import COPY, REDUCE, Schedule
from topologies.routing import shortest_paths

__all__ = ["Send", "Step", "Plan", "concurrent", "sequence", "as_chunks", "shard_chunks",
           "ordered_members", "prune_above", "Pruned", "busiest_link_s", "link_bundles", "COPY",
           "REDUCE"]

#: One send of a step: ``(chunk ids, src NPU, dst NPU, op)`` - one transfer per chunk.
Send = tuple[np.ndarray, int, int, int]
#: A step: sends that are logically simultaneous (listed in this order).
Step = list[Send]


#: A time the caller already has (``collective_method="best"``): a plan whose busiest
#: link needs at least this long is not re-timed (see :func:`prune_above`).
_PRUNE_ABOVE: ContextVar[float | None] = ContextVar("plan_prune_above", default=None)


class Pruned(CodesignError):
    """A plan cannot beat the caller's time (:func:`prune_above`); ``load_s`` is its
    busiest link's bytes / bandwidth, seconds."""

    def __init__(self, load_s: float, bound_s: float) -> None:
        super().__init__(f"its busiest link needs {load_s:.3g} s >= {bound_s:.3g} s")
        self.load_s = load_s


def busiest_link_s(schedule: Schedule, topology) -> float:
    """Seconds the schedule's most loaded link needs to carry its bytes at its rate (0 for
    a schedule that moves nothing): no network model can finish the schedule sooner."""
    if not schedule.path_links.size:
        return 0.0
    return float((np.bincount(schedule.path_links, minlength=topology.n_links)
                  * schedule.chunk_bytes / topology.bandwidth).max())


@contextmanager
def prune_above(seconds: float | None) -> Iterator[None]:
    """Within the block, :meth:`Plan.finish` raises :class:`Pruned` instead of timing a
    schedule whose busiest link alone needs ``seconds`` or more.

    Why: ``best`` keeps the fastest of several synthesizers, and every network model
    serves a link's bytes at most at its rate, so such a schedule cannot be faster than
    the time already found; the congestion replay it skips is most of a synthesizer's
    cost (a losing recursive halving-doubling on a 128-node ring: 1.9 s).  ``None``
    turns pruning off.
    """
    token = _PRUNE_ABOVE.set(seconds)
    try:
        yield
    finally:
        _PRUNE_ABOVE.reset(token)


def as_chunks(values: Any) -> np.ndarray:
    """Chunk ids as a 1-D ``int64`` array."""
    return np.atleast_1d(np.asarray(values, dtype=np.int64)).ravel()


def concurrent(*step_lists: Sequence[Step]) -> list[Step]:
    """Merge patterns that run at the same time: step ``s`` of the result is
    step ``s`` of each input, in argument order.

    The inputs must not depend on each other (disjoint chunks or disjoint
    NPUs); each stays in causal order, so the merge is causal too.
    """
    length = max((len(s) for s in step_lists), default=0)
    merged: list[Step] = []
    for s in range(length):
        step: Step = []
        for steps in step_lists:
            if s < len(steps):
                step.extend(steps[s])
        merged.append(step)
    return merged


def sequence(*step_lists: Sequence[Step]) -> list[Step]:
    """Join patterns that run one after the other (later ones may use the
    data earlier ones delivered)."""
    out: list[Step] = []
    for steps in step_lists:
        out.extend(steps)
    return out


class Plan:
    """Accumulates the logical transfers of one schedule.

    Parameters
    ----------
    topology : topologies.Topology
        The network; paths come from ``topology.route``.
    collective : Collective
        The collective the schedule implements (possibly with more chunks per
        NPU than the user asked for, e.g. ``with_chunks(2*c)`` for two
        directions).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> plan = Plan(from_spec("ring:4"), Collective.on("allgather", 4, 4e6))
    >>> plan.add_steps([[(as_chunks([0]), 0, 1, COPY)]])
    >>> len(plan)
    1
    """

    def __init__(self, topology, collective: Collective) -> None:
        self.topology = topology
        self.collective = collective
        # One entry per send (not per transfer): plain lists are cheapest to append to.
        self._chunks: list[np.ndarray] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._op: list[int] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def send(self, chunks: Any, src: int, dst: int, op: int = COPY) -> None:
        """Append one transfer per chunk id in ``chunks`` from ``src`` to ``dst``."""
        ids = chunks if isinstance(chunks, np.ndarray) and chunks.ndim == 1 \
            and chunks.dtype == np.int64 else as_chunks(chunks)
        if ids.size == 0:
            return
        if src == dst:
            raise invalid("transfer", f"{src}->{dst}", "two different NPUs")
        self._chunks.append(ids)
        self._src.append(src)
        self._dst.append(dst)
        self._op.append(op)
        self._count += ids.size

    def add_steps(self, steps: Iterable[Step]) -> None:
        """Append every send of every step, in order."""
        for step in steps:
            for chunks, src, dst, op in step:
                self.send(chunks, src, dst, op)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if not self._chunks:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                    np.zeros(0, np.int8))
        counts = np.fromiter((a.size for a in self._chunks), dtype=np.int64,
                             count=len(self._chunks))
        return (np.concatenate(self._chunks),
                np.repeat(np.asarray(self._src, dtype=np.int64), counts),
                np.repeat(np.asarray(self._dst, dtype=np.int64), counts),
                np.repeat(np.asarray(self._op, dtype=np.int8), counts))

    def _paths(self, src: np.ndarray, dst: np.ndarray,
               algorithm: str = "plan") -> tuple[np.ndarray, np.ndarray]:
        """CSR paths (``path_ptr``, ``path_links``) from one route per distinct NPU pair
        (:func:`topologies.routing.shortest_paths`, the path of ``topology.route``),
        refused (:func:`evaluators.estimates.check_routed`) before the per-hop arrays
        are built when they would not fit."""
        if src.size == 0:
            return np.zeros(1, np.int64), np.zeros(0, np.int64)
        n_nodes = self.topology.n_nodes
        keys = src * n_nodes + dst
        pairs, inverse = np.unique(keys, return_inverse=True)
        pair_ptr, flat = shortest_paths(self.topology, pairs // n_nodes, pairs % n_nodes)
        pair_len = np.diff(pair_ptr)
        pair_off = pair_ptr[:-1]
        lengths = pair_len[inverse]
        check_routed(self.collective, algorithm, int(src.size), int(lengths.sum()))
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        # Gather each transfer's route: offset of its pair plus the position in the route.
        within = np.arange(int(ptr[-1]), dtype=np.int64) - np.repeat(ptr[:-1], lengths)
        links = flat[np.repeat(pair_off[inverse], lengths) + within]
        self._spread_parallel(pairs, inverse, ptr, links)
        return ptr, links

    def _spread_parallel(self, pairs, inverse, ptr, links) -> None:
        """Deal transfers round-robin over equal parallel links (in place).

        ``topology.route`` names one link per hop; when a hop's two nodes are
        joined by several links of the same bandwidth and latency
        (``Dimension.links`` > 1, Themis Table 2's links per NPU, DGX-1's doubled
        NVLinks) the k-th transfer of an NPU pair, in the order transfers were
        added, takes the ``k mod m``-th of those ``m`` links on that hop, as
        NCCL-style channels do, so concurrent chunks use the whole bundle.
        """
        bundle, size = link_bundles(self.topology)
        if size.max(initial=1) < 2:
            return
        members = np.lexsort((np.arange(bundle.size), bundle))   # link ids by bundle, then id
        offset = np.concatenate([[0], np.cumsum(size)[:-1]])
        # k: index of each transfer among the transfers of its NPU pair, in add order.
        order = np.argsort(inverse, kind="stable")
        start = np.searchsorted(inverse[order], np.arange(pairs.size))
        k = np.empty(inverse.size, np.int64)
        k[order] = np.arange(inverse.size) - start[inverse[order]]
        hop_k = np.repeat(k, np.diff(ptr))
        b = bundle[links]
        links[:] = members[offset[b] + hop_k % size[b]]

    def schedule(self, **metadata: Any) -> Schedule:
        """The untimed schedule (all times 0), in the order the transfers were added."""
        chunk, src, dst, op = self._arrays()
        ptr, links = self._paths(src, dst, str(metadata.get("algorithm", "plan")))
        zeros = np.zeros(chunk.size)
        return Schedule(self.collective, chunk, src, dst, ptr, links, zeros, zeros, op,
                        metadata)

    def finish(self, algorithm: str, **metadata: Any) -> Schedule:
        """Route, time under the ``congestion`` model and return the schedule.

        Raises :class:`Pruned` inside :func:`prune_above` when the schedule cannot beat
        the caller's time.

        ``metadata`` gets ``algorithm``, ``link_model="exclusive"`` (one chunk
        per link at a time), ``network_model="congestion"`` and the extra
        keyword arguments.
        """
        sched = self.schedule(algorithm=algorithm, link_model="exclusive",
                              network_model="congestion", **metadata)
        bound = _PRUNE_ABOVE.get()
        if bound is not None and sched.path_links.size:
            load = busiest_link_s(sched, self.topology)
            if load >= bound:
                raise Pruned(load, bound)
        timed = _replay(sched, self.topology)
        return timed.retimed(timed.start, timed.end, timed.hop_start, algorithm=algorithm,
                             link_model="exclusive")


def link_bundles(topology) -> tuple[np.ndarray, np.ndarray]:
    """Bundles of equal parallel links: ``(bundle id per link, links per bundle)``.

    A bundle is the links with the same ends, bandwidth and latency; :class:`Plan` deals
    the transfers of an NPU pair round-robin over its bundles' links.  Cached per
    (immutable) topology: every schedule asks, and on a 4,096-server fabric the row-wise
    ``unique`` takes a quarter of a second.
    """
    hit = _BUNDLES.get(topology)
    if hit is None:
        topo = topology
        _, bundle = np.unique(np.stack([topo.src, topo.dst, topo.bandwidth.view(np.int64),
                                        topo.latency.view(np.int64)], axis=1),
                              axis=0, return_inverse=True)
        bundle = bundle.ravel()
        hit = _BUNDLES[topology] = (bundle, np.bincount(bundle))
    return hit


#: :func:`link_bundles` per topology (weakly held).
_BUNDLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _replay(schedule: Schedule, topology) -> Schedule:
    # Imported lazily: the simulator is a sibling package of the algorithms.
    from evaluators.netsim import replay

    return replay(schedule, topology, model="congestion")


def shard_chunks(collective: Collective, shard: int, pieces: Any = None) -> np.ndarray:
    """Chunk ids of ``shard`` (``shard * c + k`` for ``k`` in ``pieces``, default all ``c``)."""
    c = collective.chunks_per_npu
    ks = np.arange(c) if pieces is None else as_chunks(pieces)
    return shard * c + ks


def ordered_members(collective: Collective, order: Any, field: str) -> list[int]:
    """Validate an ``order`` option: a permutation of the participating NPU ids.

    ``None`` gives the participants in rank order.
    """
    if order is None:
        return list(collective.npus)
    if isinstance(order, (str, bytes)):
        raise invalid(field, order, "a list of the participating NPU ids")
    try:
        members = [int(x) for x in order]
    except (TypeError, ValueError):
        raise invalid(field, order, "a list of the participating NPU ids") from None
    if sorted(members) != sorted(collective.npus) or any(
            isinstance(x, bool) for x in order):
        raise invalid(field, order, f"a permutation of the participants {list(collective.npus)}")
    return members
