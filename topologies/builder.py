"""A small accumulator of links used by every family builder.

Builders add cables (two directed links) or single directed links and then
call :meth:`LinkBuilder.build`; the arrays are made once, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from codesign.resources import check_count, check_memory
from topologies.model import Dimension, Topology

__all__ = ["LinkBuilder", "check_topology_size", "BYTES_PER_LINK", "BYTES_PER_NODE"]

#: Peak bytes per directed link while a topology is built: the four link arrays
#: (32 B), their concatenation copy (32 B), the two CSR orders and pointers
#: (~24 B), the sparse adjacency of the connectivity check (~24 B) and slack.
BYTES_PER_LINK = 160
#: Peak bytes per node: CSR pointers (16 B), coordinates, component labels, slack.
BYTES_PER_NODE = 96


def check_topology_size(npus: int, switches: int, links: int, *, field: str,
                        value: object) -> None:
    """Refuse to build a topology whose arrays would not fit the memory limit.

    Called with the counts a spec implies *before* any array is made, so a
    spec such as ``torus:1000x1000x1000`` or ``npus: 1000000000`` fails in
    milliseconds with one line instead of exhausting memory.

    Raises
    ------
    codesign.resources.ResourceLimitError
        Above :data:`codesign.resources.MAX_ELEMENTS` links or nodes, or above the
        memory limit.
    """
    instead = "use a smaller network (fewer NPUs, switches or parallel links)"
    what = "building the topology"
    check_count(what, field, value, npus + switches, instead)
    check_count(what, field, value, links, instead)
    check_memory(what, field, value,
                 float(links) * BYTES_PER_LINK + float(npus + switches) * BYTES_PER_NODE,
                 instead)


class LinkBuilder:
    """Collect links, then build a :class:`~topologies.model.Topology`.

    Parameters
    ----------
    npus, switches : int
        Node counts (NPUs are ``0..npus-1``, switches follow).

    Examples
    --------
    >>> b = LinkBuilder(2)
    >>> b.cable(0, 1, 25e9, 1e-6)
    >>> b.build(name="pair").n_links
    2
    """

    def __init__(self, npus: int, switches: int = 0) -> None:
        # (the larger count is the one to name: switches: 10^8 with npus: 2 blamed npus)
        field, value = ("switches", switches) if switches > npus else ("npus", npus)
        check_topology_size(npus, switches, 0, field=field, value=value)
        self.npus = npus
        self.switches = switches
        self._n_links = 0
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._bw: list[np.ndarray] = []
        self._lat: list[np.ndarray] = []

    def links(self, src: Any, dst: Any, bandwidth: float | Any, latency: float | Any,
              *, count: int = 1) -> None:
        """Add directed links ``src[i] -> dst[i]`` (arrays or scalars), ``count`` of each."""
        s = np.atleast_1d(np.asarray(src, dtype=np.int64))
        d = np.atleast_1d(np.asarray(dst, dtype=np.int64))
        s, d = np.broadcast_arrays(s, d)
        b = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), s.shape)
        l = np.broadcast_to(np.asarray(latency, dtype=np.float64), s.shape)
        total = self._n_links + s.size * count
        check_topology_size(self.npus, self.switches, total, field="links",
                            value=total if count == 1 else f"{total} (count={count})")
        self._n_links = total
        for _ in range(count):
            self._src.append(s.ravel())
            self._dst.append(d.ravel())
            self._bw.append(b.ravel())
            self._lat.append(l.ravel())

    def cable(self, u: Any, v: Any, bandwidth: float | Any, latency: float | Any,
              *, count: int = 1) -> None:
        """Add bidirectional cables ``u[i] <-> v[i]`` (two directed links each)."""
        self.links(u, v, bandwidth, latency, count=count)
        self.links(v, u, bandwidth, latency, count=count)

    def build(self, *, name: str = "", family: str = "custom",
              params: Mapping[str, Any] | None = None, dims: Sequence[Dimension] = (),
              node_attrs: Mapping[str, Any] | None = None,
              require_connected: bool = True) -> Topology:
        """Create the immutable topology from the links added so far."""
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
        return Topology(self.npus, self.switches, cat(self._src, np.int64),
                        cat(self._dst, np.int64), cat(self._bw, np.float64),
                        cat(self._lat, np.float64), name=name, family=family, params=params,
                        dims=dims, node_attrs=node_attrs, require_connected=require_connected)
