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
from numbers import Integral

from codesign.collective_kinds import KINDS, REDUCING_KINDS, ROOTED_KINDS, busbw_factor
from codesign.errors import invalid
from codesign.specs import check_choice, check_int, check_number
from topologies.families.clos import MAX_NODES

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

    Raises
    ------
    InvalidSpecError
        An unknown kind; participants that are not at least 2 distinct integer NPU ids
        (Python or numpy integers) in ``0..MAX_NODES - 1``
        (:data:`topologies.families.clos.MAX_NODES`, the largest network a builder
        makes); a size that is not a finite number of bytes > 0; ``chunks_per_npu``
        not an integer >= 1; a root that is not one of the participants, or a root
        for a kind without one.

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
        npus = _npu_ids(self.npus)
        if len(npus) < 2:
            raise invalid("collective participants", list(npus), "at least 2 NPUs")
        if len(set(npus)) != len(npus):
            raise invalid("collective participants", list(npus), "distinct NPU ids")
        object.__setattr__(self, "npus", npus)
        object.__setattr__(self, "size_bytes", check_number("collective size", self.size_bytes))
        object.__setattr__(self, "chunks_per_npu",
                           check_int("chunks per NPU", self.chunks_per_npu, 1))
        if self.kind in ROOTED_KINDS:
            if self.root is None:
                root = npus[0]
            elif isinstance(self.root, bool) or not isinstance(self.root, Integral) \
                    or self.root not in npus:
                raise invalid("collective root", self.root, "one of the participating NPUs")
            else:
                root = int(self.root)
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
        """Convenience: ``Collective.on("allreduce", 8, 1e9)`` uses NPUs ``0..7``.

        ``npus`` is a count (an integer, Python or numpy, in ``2..MAX_NODES``) or the
        participant ids; anything else raises :class:`~codesign.errors.InvalidSpecError`
        (as do the other arguments, see :class:`Collective`).
        """
        if isinstance(npus, Integral) and not isinstance(npus, bool):
            # Checked before range(): a count of 10**12 would build a 10**12-id tuple.
            npus = range(check_int("collective NPU count", npus, 2, MAX_NODES))
        elif isinstance(npus, (str, bytes)) or not isinstance(npus, Iterable):
            raise invalid("collective NPUs", npus, f"an NPU count (an integer in "
                          f"2..{MAX_NODES}) or a sequence of NPU ids")
        return cls(kind, npus, size_bytes, chunks_per_npu, root)   # ids checked there


def _npu_ids(npus: object) -> tuple[int, ...]:
    """``npus`` as a tuple of ints if it is an iterable of integer ids in
    ``0..MAX_NODES - 1`` (at most MAX_NODES of them), else InvalidSpecError: ``int()``
    would truncate 0.5 to 0 and a generator of 10**12 ids would fill the memory."""
    allowed = f"a sequence of integer NPU ids in 0..{MAX_NODES - 1}"
    if isinstance(npus, (str, bytes)) or not isinstance(npus, Iterable):
        raise invalid("collective participants", npus, allowed)
    ids: list[int] = []
    for x in npus:
        # type(x) is int: the common case without the slower ABC check.
        if not (type(x) is int or (isinstance(x, Integral) and not isinstance(x, bool))) \
                or not 0 <= x < MAX_NODES or len(ids) >= MAX_NODES:
            raise invalid("collective participants", npus if isinstance(npus, Sequence)
                          else x, allowed)
        ids.append(int(x))
    return tuple(ids)
