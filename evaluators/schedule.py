"""The schedule IR every synthesizer returns (docs/architecture.md section 3).

A :class:`Schedule` is a list of transfers held as parallel numpy arrays
(struct of arrays, so that schedules with millions of transfers stay cheap):

* ``chunk[i]`` - chunk id (see :mod:`evaluators.collectives` for numbering);
* ``src[i]``, ``dst[i]`` - NPUs that send and receive (switches never store);
* ``path`` - the link ids from ``src`` to ``dst``, stored CSR-style in
  ``path_links[path_ptr[i]:path_ptr[i+1]]`` (intermediate nodes only forward);
* ``start[i]``, ``end[i]`` - seconds from the start of the collective;
* ``op[i]`` - :data:`COPY` (the receiver now holds the sender's data) or
  :data:`REDUCE` (the receiver adds the sender's partial sum to its own).

Optionally ``hop_start`` (aligned with ``path_links``) gives the time each hop
of a multi-hop transfer starts on its link (store-and-forward timing, as the
``congestion`` simulator produces).  Without it, every link of a transfer's
path counts as occupied for the whole ``[start, end]`` interval.

``chunk_bytes`` is the size of one chunk (bytes); ``metadata`` holds the
algorithm name, the link model (``metadata["link_model"]``: ``"exclusive"``,
one chunk per link at a time, the default; ``"shared"``, fluid sharing of
link bandwidth; or ``"none"``, no contention, as the ``analytical`` network
model times transfers) and anything else the synthesizer wants to keep.  The
schedule's time is ``max(end)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from codesign.errors import invalid
from evaluators.collectives import Collective

__all__ = ["COPY", "REDUCE", "Transfer", "Schedule", "frozen_array"]

COPY = 0
REDUCE = 1
OP_NAMES = {COPY: "copy", REDUCE: "reduce"}


class Transfer(NamedTuple):
    """One transfer, as produced by iterating a :class:`Schedule`."""

    chunk: int
    src: int
    dst: int
    path: tuple[int, ...]
    start: float
    end: float
    op: int = COPY


def frozen_array(values: Any, dtype: Any) -> np.ndarray:
    """A read-only flat copy of ``values`` as ``dtype`` (the arrays of immutable objects)."""
    arr = np.array(values, dtype=dtype, copy=True).ravel()
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective schedule: transfers of chunks along link paths in time.

    Build one with :meth:`from_transfers` (a list of :class:`Transfer`) or
    directly from arrays.  Use :func:`evaluators.validate.validate_schedule` to
    check it against a topology and a collective.
    """

    collective: Collective
    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    start: np.ndarray
    end: np.ndarray
    op: np.ndarray
    metadata: Mapping[str, Any]
    hop_start: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = np.asarray(self.chunk).size
        for name, dtype in (("chunk", np.int64), ("src", np.int64), ("dst", np.int64),
                            ("start", np.float64), ("end", np.float64), ("op", np.int8)):
            arr = frozen_array(getattr(self, name), dtype)
            if arr.size != n:
                raise invalid(f"schedule {name} length", arr.size, f"{n} (one per transfer)")
            object.__setattr__(self, name, arr)
        ptr = frozen_array(self.path_ptr, np.int64)
        if ptr.size != n + 1 or (n and (ptr[0] != 0 or np.any(np.diff(ptr) < 0))):
            raise invalid("schedule path_ptr", ptr[:5].tolist(), "n+1 non-decreasing offsets from 0")
        object.__setattr__(self, "path_ptr", ptr)
        object.__setattr__(self, "path_links", frozen_array(self.path_links, np.int64))
        if self.path_links.size != (int(ptr[-1]) if n else 0):
            raise invalid("schedule path_links length", self.path_links.size,
                          "path_ptr[-1] (the total number of hops)")
        if self.hop_start is not None:
            hs = frozen_array(self.hop_start, np.float64)
            if hs.size != self.path_links.size:
                raise invalid("schedule hop_start length", hs.size,
                              f"{self.path_links.size} (one per hop)")
            object.__setattr__(self, "hop_start", hs)
        object.__setattr__(self, "metadata", dict(self.metadata))

    # ------------------------------------------------------------ construction
    @classmethod
    def from_transfers(cls, collective: Collective, transfers: Iterable[Transfer | Sequence],
                       **metadata: Any) -> "Schedule":
        """Build a schedule from transfers ``(chunk, src, dst, path, start, end[, op])``.

        Keyword arguments become ``metadata`` (``algorithm=``, ``link_model=``...).
        """
        rows = [t if isinstance(t, Transfer) else Transfer(*t) for t in transfers]
        lengths = np.array([len(t.path) for t in rows], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(lengths)]) if rows else np.zeros(1, np.int64)
        links = np.fromiter((l for t in rows for l in t.path), dtype=np.int64,
                            count=int(lengths.sum()))
        return cls(collective,
                   chunk=[t.chunk for t in rows], src=[t.src for t in rows],
                   dst=[t.dst for t in rows], path_ptr=ptr, path_links=links,
                   start=[t.start for t in rows], end=[t.end for t in rows],
                   op=[t.op for t in rows], metadata=metadata)

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return int(self.chunk.size)

    def path(self, i: int) -> tuple[int, ...]:
        """Link ids of transfer ``i``."""
        return tuple(int(x) for x in self.path_links[self.path_ptr[i]:self.path_ptr[i + 1]])

    def __iter__(self) -> Iterator[Transfer]:
        for i in range(len(self)):
            yield Transfer(int(self.chunk[i]), int(self.src[i]), int(self.dst[i]), self.path(i),
                           float(self.start[i]), float(self.end[i]), int(self.op[i]))

    def retimed(self, start: Any, end: Any, hop_start: Any = None, **metadata: Any) -> "Schedule":
        """A copy with new times (same transfers, same order) and extra metadata."""
        meta = {**self.metadata, **metadata}
        return Schedule(self.collective, self.chunk, self.src, self.dst, self.path_ptr,
                        self.path_links, start, end, self.op, meta, hop_start)

    def relabelled(self, node: Any, link: Any, collective: Collective) -> "Schedule":
        """This schedule moved by a node map and the link map it induces (an automorphism
        of the topology, :func:`topologies.symmetry.group_map`) onto ``collective``, whose
        participants are the images of this one's in rank order: the same chunks (their
        ids follow the ranks) at the same times over the mapped links.  A ring order in
        the metadata is mapped too."""
        node = np.asarray(node, dtype=np.int64)
        link = np.asarray(link, dtype=np.int64)
        meta = dict(self.metadata)
        if "order" in meta:
            meta["order"] = [int(node[x]) for x in meta["order"]]
        return Schedule(collective, self.chunk, node[self.src], node[self.dst], self.path_ptr,
                        link[self.path_links], self.start, self.end, self.op, meta,
                        self.hop_start)

    @property
    def link_model(self) -> str:
        """``"exclusive"`` (default), ``"shared"`` or ``"none"``."""
        return str(self.metadata.get("link_model", "exclusive"))

    @property
    def time_s(self) -> float:
        """Completion time of the collective, seconds (``max(end)``; 0 if empty)."""
        return float(self.end.max()) if len(self) else 0.0

    @property
    def chunk_bytes(self) -> float:
        """Bytes per chunk."""
        return self.collective.chunk_bytes

    @property
    def algorithm(self) -> str:
        """Name of the algorithm that produced the schedule (``metadata['algorithm']``)."""
        return str(self.metadata.get("algorithm", ""))
