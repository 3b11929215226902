"""Shared types of the network simulator: messages in, results out.

A simulation takes point-to-point *messages* (docs/architecture.md section 6,
``codesign simulate SPEC --send SRC:DST:SIZE``): a message is ``size_bytes``
sent from NPU ``src`` to NPU ``dst`` along ``path`` (link ids; by default
``topology.route(src, dst)``), no earlier than ``ready_s`` and only after every
message listed in ``deps`` has finished.  Its *ready time* is therefore
``max(ready_s, finish of each dep)``.

Internally a batch of messages is held as parallel numpy arrays
(:class:`Messages`), like :class:`~evaluators.schedule.Schedule`, so that
replaying a schedule of hundreds of thousands of transfers never builds one
Python object per transfer.  Every model (``analytical``, ``congestion``,
``flow``) reads a :class:`Messages` and returns a :class:`SimResult`.

Times are seconds from the start of the simulation (time 0); sizes are bytes;
bandwidths bytes per second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.errors import invalid
from evaluators.schedule import frozen_array
from topologies.model import Topology
from topologies.routing import shortest_paths

__all__ = ["Message", "Messages", "SimResult", "check_topology"]


def check_topology(topology: Any) -> Topology:
    """``topology`` if it is a :class:`~topologies.model.Topology`, else the one-line
    InvalidSpecError (a spec string such as ``"ring:4"`` is not built here: the
    simulator's callers build it once and reuse it)."""
    if not isinstance(topology, Topology):
        raise invalid("topology", topology, "a Topology; build one with "
                      "topologies.registry.from_spec (or load_topology for a file)")
    return topology


@dataclass(frozen=True)
class Message:
    """One point-to-point send.

    Parameters
    ----------
    src, dst : int
        Sending and receiving NPU ids.
    size_bytes : float
        Bytes to send (>= 0).
    ready_s : float, optional
        Earliest time the message may start, seconds (default 0).
    path : sequence of int, optional
        Link ids from ``src`` to ``dst``; default ``topology.route(src, dst)``
        (minimum hops).
    deps : sequence of int, optional
        Indices (in the list given to :func:`~evaluators.netsim.simulate`) of
        messages that must finish before this one becomes ready.
    """

    src: int
    dst: int
    size_bytes: float
    ready_s: float = 0.0
    path: Sequence[int] | None = None
    deps: Sequence[int] = ()


def _int(value: Any, field: str, allowed: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise invalid(field, value, allowed)
    return int(value)


@dataclass(frozen=True, eq=False)
class Messages:
    """A batch of messages as parallel arrays (what the models consume).

    Attributes
    ----------
    src, dst : ndarray of int64
        Endpoints (NPU ids), one per message.
    size : ndarray of float64
        Bytes per message.
    ready : ndarray of float64
        Earliest start per message, seconds (before dependencies).
    path_ptr, path_links : ndarray of int64
        Paths in CSR form: message ``i`` crosses links
        ``path_links[path_ptr[i]:path_ptr[i+1]]`` in order.
    dep_ptr, dep_idx : ndarray of int64
        Dependencies in CSR form: message ``i`` waits for the messages
        ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``.

    Build with :meth:`from_list` (validates everything) or :meth:`from_arrays`.
    """

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    ready: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray

    def __len__(self) -> int:
        return int(self.src.size)

    @property
    def n_hops(self) -> int:
        """Total number of hops (link traversals) over all messages."""
        return int(self.path_links.size)

    @property
    def hop_msg(self) -> np.ndarray:
        """Message index of every hop, aligned with ``path_links``."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.path_ptr))

    # ---------------------------------------------------------- construction
    @classmethod
    def from_arrays(cls, topology, src: Any, dst: Any, size: Any, *, ready: Any = 0.0,
                    path_ptr: Any, path_links: Any, dep_ptr: Any = None,
                    dep_idx: Any = None) -> "Messages":
        """Build and validate a batch from arrays (paths and deps in CSR form).

        Parameters
        ----------
        topology : topologies.Topology
            The network the paths refer to.
        src, dst : array_like of int
            NPU ids, one per message.
        size : array_like of float or float
            Bytes per message (one value for all or one per message).
        ready : array_like of float or float, optional
            Earliest start, seconds (default 0).
        path_ptr, path_links : array_like of int
            Paths in CSR form (``len(src) + 1`` offsets, link ids).
        dep_ptr, dep_idx : array_like of int, optional
            Dependencies in CSR form (default: none).

        Returns
        -------
        Messages

        Raises
        ------
        InvalidSpecError
            On a ``topology`` that is not a Topology, endpoints that are not NPUs,
            negative or non-finite sizes or ready times, paths that are not connected walks from ``src`` to
            ``dst`` over existing links, or dependency indices out of range.
        """
        check_topology(topology)
        src_a = frozen_array(src, np.int64)
        n = src_a.size
        dst_a = frozen_array(dst, np.int64)
        size_a = frozen_array(np.broadcast_to(np.asarray(size, dtype=np.float64), (n,)), np.float64)
        ready_a = frozen_array(np.broadcast_to(np.asarray(ready, dtype=np.float64), (n,)), np.float64)
        ptr = frozen_array(path_ptr, np.int64)
        links = frozen_array(path_links, np.int64)
        if dep_ptr is None:
            dptr = frozen_array(np.zeros(n + 1), np.int64)
            didx = frozen_array(np.zeros(0), np.int64)
        else:
            dptr = frozen_array(dep_ptr, np.int64)
            didx = frozen_array(dep_idx, np.int64)
        batch = cls(src_a, dst_a, size_a, ready_a, ptr, links, dptr, didx)
        batch._validate(topology)
        return batch

    @classmethod
    def from_list(cls, topology, messages: Iterable[Message | Sequence[Any]]) -> "Messages":
        """Build a batch from :class:`Message` objects or tuples
        ``(src, dst, size_bytes[, ready_s[, path[, deps]]])``.

        Missing paths are routed as ``topology.route`` does
        (:func:`topologies.routing.shortest_paths`, once per distinct pair).

        Raises
        ------
        InvalidSpecError
            A ``topology`` that is not a Topology, ``messages`` that are not a sequence
            (a string, a number, None), or a bad message (:meth:`from_arrays`).
        """
        check_topology(topology)
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
            raise invalid("messages", messages, "a sequence of Message or tuples (src, dst, "
                          "size_bytes[, ready_s, path, deps])")
        rows = []
        for i, m in enumerate(messages):
            if not isinstance(m, Message):
                if isinstance(m, (str, bytes)) or not isinstance(m, Sequence) \
                        or not 3 <= len(m) <= 6:
                    raise invalid(f"message {i}", m, "a Message or a tuple (src, dst, "
                                  "size_bytes[, ready_s, path, deps])")
                m = Message(*m)
            rows.append(m)
        n = len(rows)
        src = [_int(m.src, f"message {i} src", f"an NPU id in 0..{topology.npus - 1}")
               for i, m in enumerate(rows)]
        dst = [_int(m.dst, f"message {i} dst", f"an NPU id in 0..{topology.npus - 1}")
               for i, m in enumerate(rows)]
        for i, (s, d) in enumerate(zip(src, dst)):
            for name, node in (("src", s), ("dst", d)):
                if not 0 <= node < topology.npus:
                    raise invalid(f"message {i} {name}", node,
                                  f"an NPU id in 0..{topology.npus - 1}")
        sizes, readies = [], []
        for i, m in enumerate(rows):
            for name, value, out in (("size_bytes", m.size_bytes, sizes),
                                     ("ready_s", m.ready_s, readies)):
                try:
                    x = float(value)
                except (TypeError, ValueError):
                    raise invalid(f"message {i} {name}", value, "a finite number >= 0") from None
                if isinstance(value, bool) or not np.isfinite(x) or x < 0:
                    raise invalid(f"message {i} {name}", value, "a finite number >= 0")
                out.append(x)
        # Missing paths: one batch of distinct pairs (topologies.routing, as topology.route).
        unrouted = sorted({(src[i], dst[i]) for i, m in enumerate(rows) if m.path is None})
        routes: dict[tuple[int, int], list[int]] = {}
        if unrouted:
            r_ptr, r_links = shortest_paths(topology, [p[0] for p in unrouted],
                                            [p[1] for p in unrouted])
            r_links = r_links.tolist()
            routes = {p: r_links[r_ptr[j]:r_ptr[j + 1]] for j, p in enumerate(unrouted)}
        lengths = np.zeros(n, dtype=np.int64)
        hop_list: list[int] = []
        dep_lengths = np.zeros(n, dtype=np.int64)
        dep_list: list[int] = []
        for i, m in enumerate(rows):
            if m.path is None:
                path = routes[(src[i], dst[i])]
            else:
                if isinstance(m.path, (str, bytes)) or not isinstance(m.path, Iterable):
                    raise invalid(f"message {i} path", m.path, "a sequence of link ids")
                path = tuple(_int(l, f"message {i} path link", "an integer link id")
                             for l in m.path)
            lengths[i] = len(path)
            hop_list.extend(path)
            if isinstance(m.deps, (str, bytes)) or not isinstance(m.deps, Iterable):
                raise invalid(f"message {i} deps", m.deps, "a sequence of message indices")
            deps = [_int(d, f"message {i} dep", f"a message index in 0..{n - 1}") for d in m.deps]
            dep_lengths[i] = len(deps)
            dep_list.extend(deps)
        ptr = np.concatenate([[0], np.cumsum(lengths)])
        dptr = np.concatenate([[0], np.cumsum(dep_lengths)])
        return cls.from_arrays(topology, src, dst, sizes, ready=readies, path_ptr=ptr,
                               path_links=np.array(hop_list, dtype=np.int64), dep_ptr=dptr,
                               dep_idx=np.array(dep_list, dtype=np.int64))

    def _validate(self, topology) -> None:
        n = len(self)
        for name in ("dst", "size", "ready"):
            if getattr(self, name).size != n:
                raise invalid(f"messages {name} length", getattr(self, name).size,
                              f"{n} (one per message)")
        for name, arr in (("src", self.src), ("dst", self.dst)):
            bad = np.flatnonzero((arr < 0) | (arr >= topology.npus))
            if bad.size:
                raise invalid(f"message {bad[0]} {name}", int(arr[bad[0]]),
                              f"an NPU id in 0..{topology.npus - 1}")
        for name, arr in (("size_bytes", self.size), ("ready_s", self.ready)):
            bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
            if bad.size:
                raise invalid(f"message {bad[0]} {name}", float(arr[bad[0]]),
                              "a finite number >= 0")
        self._validate_csr("path", self.path_ptr, self.path_links)
        self._validate_csr("deps", self.dep_ptr, self.dep_idx)
        links = self.path_links
        if links.size:
            bad = np.flatnonzero((links < 0) | (links >= topology.n_links))
            if bad.size:
                raise invalid("message path link", int(links[bad[0]]),
                              f"a link id in 0..{topology.n_links - 1}")
        lengths = np.diff(self.path_ptr)
        # A path must be a walk src -> ... -> dst: first link leaves src, last link
        # enters dst and consecutive links meet (checked for all hops at once).
        empty = lengths == 0
        bad = np.flatnonzero(empty & (self.src != self.dst))
        if bad.size:
            raise invalid(f"message {bad[0]} path", (), f"links from {self.src[bad[0]]} to "
                          f"{self.dst[bad[0]]} (only a message to itself has no hops)")
        has = np.flatnonzero(~empty)
        if has.size:
            first = links[self.path_ptr[has]]
            last = links[self.path_ptr[has + 1] - 1]
            bad = has[(topology.src[first] != self.src[has]) | (topology.dst[last] != self.dst[has])]
            if bad.size:
                i = int(bad[0])
                raise invalid(f"message {i} path", self._path(i),
                              f"links leading from NPU {self.src[i]} to NPU {self.dst[i]}")
            if links.size > 1:
                # consecutive hops of one message: hop p+1 must leave where hop p arrives
                same = np.ones(links.size - 1, dtype=bool)
                same[self.path_ptr[1:-1][(self.path_ptr[1:-1] > 0)
                                         & (self.path_ptr[1:-1] < links.size)] - 1] = False
                broken = np.flatnonzero(same & (topology.dst[links[:-1]] != topology.src[links[1:]]))
                if broken.size:
                    i = int(np.searchsorted(self.path_ptr, broken[0], side="right") - 1)
                    raise invalid(f"message {i} path", self._path(i),
                                  "consecutive links (each starts where the previous ends)")
        deps = self.dep_idx
        if deps.size:
            bad = np.flatnonzero((deps < 0) | (deps >= n))
            if bad.size:
                raise invalid("message dep", int(deps[bad[0]]), f"a message index in 0..{n - 1}")
            owner = np.repeat(np.arange(n), np.diff(self.dep_ptr))
            bad = np.flatnonzero(owner == deps)
            if bad.size:
                raise invalid(f"message {owner[bad[0]]} deps", int(deps[bad[0]]),
                              "indices of other messages (a message cannot wait for itself)")

    def _validate_csr(self, name: str, ptr: np.ndarray, idx: np.ndarray) -> None:
        n = len(self)
        if ptr.size != n + 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != idx.size:
            raise invalid(f"messages {name} offsets", ptr[:5].tolist(),
                          f"{n + 1} non-decreasing offsets from 0 to {idx.size}")

    def _path(self, i: int) -> tuple[int, ...]:
        return tuple(self.path_links[self.path_ptr[i]:self.path_ptr[i + 1]].tolist())

    # -------------------------------------------------------- dependencies
    def dependents(self) -> tuple[np.ndarray, np.ndarray]:
        """Reverse of the dependency CSR: ``(ptr, idx)`` listing who waits for each message."""
        n = len(self)
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.dep_ptr))
        order = np.argsort(self.dep_idx, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(self.dep_idx, minlength=n))])
        return ptr.astype(np.int64), owner[order]


@dataclass(frozen=True, eq=False)
class SimResult:
    """Outcome of a simulation.

    Attributes
    ----------
    model : str
        Network model used.
    src, dst : ndarray of int64
        Endpoints of each message.
    size_bytes : ndarray of float64
        Bytes of each message.
    ready_s : ndarray of float64
        When each message became ready (``max(ready_s, finish of deps)``), s.
    start_s : ndarray of float64
        When each message started moving, s (first hop start for
        ``congestion``; the ready time for ``analytical`` and ``flow``).
    finish_s : ndarray of float64
        When each message has fully arrived at ``dst``, s.
    path_ptr, path_links : ndarray of int64
        The paths used (CSR, as in :class:`Messages`).
    hop_start : ndarray of float64 or None
        Start of each hop on its link, aligned with ``path_links``
        (``congestion`` only; None for models without per-hop timing).
    link_busy_s : ndarray of float64
        Per link, seconds it was busy (model-specific, see the model modules).
    link_bytes : ndarray of float64
        Per link, bytes carried.
    makespan_s : float
        ``max(finish_s)`` (0 without messages), measured from time 0.
    """

    model: str
    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    ready_s: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    hop_start: np.ndarray | None
    link_busy_s: np.ndarray
    link_bytes: np.ndarray
    makespan_s: float

    @classmethod
    def build(cls, model: str, batch: Messages, ready: Any, start: Any, finish: Any,
              hop_start: Any, link_busy: Any, n_links: int) -> "SimResult":
        """Assemble a result (used by the model modules)."""
        finish_a = frozen_array(finish, np.float64)
        link_bytes = np.bincount(batch.path_links, weights=batch.size[batch.hop_msg],
                                 minlength=n_links).astype(np.float64)
        return cls(model, batch.src, batch.dst, batch.size, frozen_array(ready, np.float64),
                   frozen_array(start, np.float64), finish_a, batch.path_ptr, batch.path_links,
                   None if hop_start is None else frozen_array(hop_start, np.float64),
                   frozen_array(link_busy, np.float64), frozen_array(link_bytes, np.float64),
                   float(finish_a.max()) if finish_a.size else 0.0)

    def __len__(self) -> int:
        return int(self.src.size)

    @property
    def link_utilization(self) -> np.ndarray:
        """Per link, ``link_busy_s / makespan_s`` (zeros when the makespan is 0)."""
        if self.makespan_s <= 0:
            return np.zeros_like(self.link_busy_s)
        return self.link_busy_s / self.makespan_s

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary, as ``codesign simulate --json`` prints it.

        Keys: ``model``, ``transfers`` (``[{src, dst, size_bytes, start_s,
        finish_s}]``), ``makespan_s``, ``max_link_utilization``.
        """
        util = self.link_utilization
        return {
            "model": self.model,
            "transfers": [
                {"src": s, "dst": d, "size_bytes": b, "start_s": t0, "finish_s": t1}
                for s, d, b, t0, t1 in zip(self.src.tolist(), self.dst.tolist(),
                                           self.size_bytes.tolist(), self.start_s.tolist(),
                                           self.finish_s.tolist())
            ],
            "makespan_s": self.makespan_s,
            "max_link_utilization": float(util.max()) if util.size else 0.0,
        }


def unfinished_error(done: np.ndarray):
    """The error raised when dependencies leave messages that never become ready (a cycle)."""
    stuck = np.flatnonzero(~done)
    return invalid("message deps", f"cycle through message {int(stuck[0])} "
                   f"({stuck.size} messages never ready)", "an acyclic dependency graph")


def release_dependents(dependents: list[int], t: float, ready: list[float], waiting: list[int],
                       out: list[int]) -> None:
    """A message finished at ``t``: its ``dependents`` become ready no earlier than
    ``t``; append those that now wait for nothing to ``out`` (one step of Kahn's
    topological order, shared by the network models)."""
    for d in dependents:
        if t > ready[d]:
            ready[d] = t
        waiting[d] -= 1
        if waiting[d] == 0:
            out.append(d)
