"""Collective operations and their chunk-level pre- and postconditions.

Size convention (docs/architecture.md section 4, as nccl-tests): ``size_bytes`` is

* allgather: the output buffer (N shards);
* reducescatter: the input buffer (N shards);
* allreduce, broadcast, reduce: one rank's buffer;
* alltoall: one rank's send buffer (N blocks, one per destination);
* scatter: the root's send buffer (N shards); gather: the root's receive buffer.

A collective on ``n`` participants with ``c`` chunks per NPU expands into
chunks of equal size.  Every chunk has the set of *holders* before the
collective (precondition) and the set of nodes that must hold it afterwards
(postcondition).  For reductions a held chunk is a partial sum: the set of
participants whose contribution it contains (a Python int used as a bitset
over participant *positions*); the postcondition asks for the full set.

Chunk numbering (``chunk id -> meaning``):

* allgather, broadcast, scatter, gather, reducescatter, allreduce, reduce:
  ``chunk = shard * c + k`` for shard ``0..S-1`` and piece ``k < c`` where
  ``S`` is ``n`` (sharded kinds) or ``1`` (broadcast, reduce);
* alltoall: ``chunk = (src_pos * n + dst_pos) * c + k``.

The kinds and nccl-tests' bus-bandwidth factors are defined in
:mod:`codesign.collective_kinds` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from codesign.collective_kinds import KINDS, REDUCING_KINDS, ROOTED_KINDS, busbw_factor
from codesign.errors import invalid
from codesign.specs import check_choice

__all__ = ["KINDS", "REDUCING_KINDS", "ROOTED_KINDS", "Collective", "busbw_factor"]

@dataclass(frozen=True)
class Collective:
    """A collective operation on a set of NPUs.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`.
    npus : sequence of int
        Participating NPU ids (distinct); their order is the rank order.
    size_bytes : float
        Buffer size in bytes, nccl-tests convention (module docstring).
    chunks_per_npu : int, optional
        Pieces each NPU's shard (or the root's buffer) is split into, for
        pipelining (default 1).
    root : int, optional
        Root NPU id for broadcast, reduce, scatter and gather (default: the
        first participant).

    Examples
    --------
    >>> c = Collective("allgather", range(4), 4096)
    >>> c.n_chunks, c.chunk_bytes
    (4, 1024.0)
    """

    kind: str
    npus: tuple[int, ...]
    size_bytes: float
    chunks_per_npu: int = 1
    root: int | None = None
    _pos: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        check_choice("collective", self.kind, KINDS)
        npus = tuple(int(x) for x in self.npus)
        if len(npus) < 2:
            raise invalid("collective participants", list(npus), "at least 2 NPUs")
        if len(set(npus)) != len(npus) or min(npus) < 0:
            raise invalid("collective participants", list(npus), "distinct NPU ids >= 0")
        object.__setattr__(self, "npus", npus)
        size = float(self.size_bytes)
        if not np.isfinite(size) or size <= 0:
            raise invalid("collective size", self.size_bytes, "a finite number of bytes > 0")
        object.__setattr__(self, "size_bytes", size)
        if isinstance(self.chunks_per_npu, bool) or int(self.chunks_per_npu) != self.chunks_per_npu \
                or self.chunks_per_npu < 1:
            raise invalid("chunks per NPU", self.chunks_per_npu, "an integer >= 1")
        object.__setattr__(self, "chunks_per_npu", int(self.chunks_per_npu))
        if self.kind in ROOTED_KINDS:
            root = npus[0] if self.root is None else int(self.root)
            if root not in npus:
                raise invalid("collective root", self.root, "one of the participating NPUs")
            object.__setattr__(self, "root", root)
        elif self.root is not None:
            raise invalid("collective root", self.root, f"no root for {self.kind}")
        object.__setattr__(self, "_pos", {p: i for i, p in enumerate(npus)})

    # ----------------------------------------------------------------- sizes
    @property
    def n(self) -> int:
        """Number of participants."""
        return len(self.npus)

    @property
    def n_shards(self) -> int:
        """Number of distinct shards (before splitting into chunks)."""
        if self.kind in ("broadcast", "reduce"):
            return 1
        if self.kind == "alltoall":
            return self.n * self.n
        return self.n

    @property
    def n_chunks(self) -> int:
        """Total number of chunks."""
        return self.n_shards * self.chunks_per_npu

    @property
    def chunk_bytes(self) -> float:
        """Size of one chunk, bytes (all chunks are equal)."""
        if self.kind == "alltoall":
            return self.size_bytes / (self.n * self.chunks_per_npu)
        return self.size_bytes / self.n_chunks

    def position(self, npu: int) -> int:
        """Rank position of NPU ``npu`` among the participants."""
        try:
            return self._pos[npu]
        except KeyError:
            raise invalid("NPU", npu, "a participant of the collective") from None

    @property
    def full_mask(self) -> int:
        """Bitset with every participant position set (a fully reduced chunk)."""
        return (1 << self.n) - 1

    def algbw(self, time_s: float) -> float:
        """Algorithm bandwidth, bytes/s: ``size / time``."""
        return self.size_bytes / time_s if time_s > 0 else float("inf")

    def busbw(self, time_s: float) -> float:
        """Bus bandwidth, bytes/s (nccl-tests factors)."""
        return self.algbw(time_s) * busbw_factor(self.kind, self.n)

    # ------------------------------------------------------- pre/postconditions
    def _shard(self, chunk: int) -> int:
        return chunk // self.chunks_per_npu

    def precondition(self) -> dict[int, dict[int, int]]:
        """Initial holdings: ``{chunk: {npu: contribution bitset}}``.

        For non-reducing kinds the bitset is :attr:`full_mask` (complete data).
        """
        full = self.full_mask
        pre: dict[int, dict[int, int]] = {}
        for chunk in range(self.n_chunks):
            s = self._shard(chunk)
            if self.kind in ("allgather",):
                pre[chunk] = {self.npus[s]: full}
            elif self.kind in ("broadcast", "scatter"):
                pre[chunk] = {self.root: full}
            elif self.kind == "gather":
                pre[chunk] = {self.npus[s]: full}
            elif self.kind == "alltoall":
                pre[chunk] = {self.npus[s // self.n]: full}
            else:  # reducing kinds: every participant holds its own contribution
                pre[chunk] = {p: 1 << i for i, p in enumerate(self.npus)}
        return pre

    def postcondition(self) -> dict[int, frozenset[int]]:
        """Required holders at the end: ``{chunk: NPUs that must hold it complete}``."""
        everyone = frozenset(self.npus)
        post: dict[int, frozenset[int]] = {}
        for chunk in range(self.n_chunks):
            s = self._shard(chunk)
            if self.kind in ("allgather", "allreduce", "broadcast"):
                post[chunk] = everyone
            elif self.kind in ("reducescatter", "scatter"):
                post[chunk] = frozenset({self.npus[s]})
            elif self.kind in ("reduce", "gather"):
                post[chunk] = frozenset({self.root})
            else:  # alltoall
                post[chunk] = frozenset({self.npus[s % self.n]})
        return post

    def with_chunks(self, chunks_per_npu: int) -> "Collective":
        """The same collective split into ``chunks_per_npu`` pieces per shard."""
        return Collective(self.kind, self.npus, self.size_bytes, chunks_per_npu, self.root)

    @classmethod
    def on(cls, kind: str, npus: int | Iterable[int], size_bytes: float, *,
           chunks_per_npu: int = 1, root: int | None = None) -> "Collective":
        """Convenience: ``Collective.on("allreduce", 8, 1e9)`` uses NPUs ``0..7``."""
        members: Sequence[int] = range(npus) if isinstance(npus, int) else tuple(npus)
        return cls(kind, tuple(members), size_bytes, chunks_per_npu, root)
