"""Switch unwinding for TACOS (Won et al., "TACOS: Topology-Aware Collective
Algorithm Synthesizer for Distributed Machine Learning", Section IV-D).

The time-expanded network needs fixed point-to-point connectivity, so every
switch is *unwound*: with degree ``d`` the ``k`` NPUs attached to a switch (in
ascending id order ``n_0..n_{k-1}``) get logical links ``n_i -> n_{i+j mod k}``
for ``j = 1..d``.  Each logical link keeps the alpha cost of its route (uplink
plus downlink latency) and, because the ``d`` links leaving an NPU share its
uplink, gets ``1/d`` of the bandwidth (the smaller of uplink and downlink).

Every logical link remembers its physical route (``NPU -> switch -> NPU``) so
that schedules are expressed, and validated, on the original topology.

Consistency with the link models of :mod:`evaluators.validate`:

* ``d == 1`` (a unidirectional ring through each switch): each uplink and each
  downlink carries exactly one logical link, so one chunk per logical link at
  a time means one chunk per physical link: the ``"exclusive"`` model holds
  with every physical link of the route busy for the whole transfer.
* ``d > 1``: ``d`` logical links share an uplink at ``1/d`` of its bandwidth
  each.  The physical link carries up to ``d`` chunks at once, which the
  ``"exclusive"`` model forbids but the ``"shared"`` (fluid) model accepts:
  the rates sum to at most the link bandwidth.  :func:`unwind` reports which
  model the logical network needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.errors import invalid

__all__ = ["LogicalLinks", "unwind", "parse_degree"]


@dataclass(frozen=True)
class LogicalLinks:
    """Point-to-point links among NPUs after unwinding switches.

    Attributes
    ----------
    src, dst : ndarray of int64
        Endpoints (NPU ids) of each logical link.
    bandwidth : ndarray of float64
        Bytes/s available to one chunk on the logical link.
    latency : ndarray of float64
        Seconds (sum of the route's link latencies).
    paths : list of tuple of int
        Physical link ids of each logical link's route in the original topology.
    link_model : str
        ``"exclusive"`` when no physical link carries two logical links,
        ``"shared"`` otherwise (switch degree > 1).
    """

    src: np.ndarray
    dst: np.ndarray
    bandwidth: np.ndarray
    latency: np.ndarray
    paths: list
    link_model: str

    def __len__(self) -> int:
        return int(self.src.size)

    def transposed(self) -> "LogicalLinks":
        """The same links with ``src`` and ``dst`` swapped (paths unchanged).

        Used for time-reversed synthesis: an all-gather on the transposed
        network, reversed in time, is a reduce-scatter on the original links.
        """
        return LogicalLinks(self.dst, self.src, self.bandwidth, self.latency, self.paths,
                            self.link_model)


def parse_degree(value) -> int | str:
    """Validate the ``switch_degree`` option: ``"max"`` or an integer >= 1."""
    if isinstance(value, str) and value == "max":
        return "max"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise invalid("switch_degree", value, '"max" or an integer >= 1')
    return int(value)


def unwind(topology, degree="max") -> LogicalLinks:
    """Replace every switch of ``topology`` by point-to-point logical links.

    Parameters
    ----------
    topology : topologies.Topology
        The network; switches must connect only NPUs (one level of switching).
    degree : int or "max", optional
        Outgoing logical links per NPU and switch (``"max"``: to every other
        NPU on the switch).  Values above ``k-1`` for a ``k``-port switch are
        clipped to ``k-1``.

    Returns
    -------
    LogicalLinks
        NPU-to-NPU links of the topology first, in link-id order, then the
        unwound links of each switch in switch-id order.

    Raises
    ------
    InvalidSpecError
        If ``degree`` is bad or a switch is attached to another switch or
        lacks an uplink or downlink to one of its NPUs.
    """
    degree = parse_degree(degree)
    npu = np.array([topology.is_npu(v) for v in range(topology.n_nodes)], dtype=bool)
    src = np.asarray(topology.src, dtype=np.int64)
    dst = np.asarray(topology.dst, dtype=np.int64)
    bw = np.asarray(topology.bandwidth, dtype=np.float64)
    lat = np.asarray(topology.latency, dtype=np.float64)
    direct = np.flatnonzero(npu[src] & npu[dst])
    out_src = src[direct].tolist()
    out_dst = dst[direct].tolist()
    out_bw = bw[direct].tolist()
    out_lat = lat[direct].tolist()
    paths = [(int(l),) for l in direct]
    shared = False
    for s in np.flatnonzero(~npu):
        s = int(s)
        nbrs = sorted(set(src[topology.in_links(s)].tolist())
                      | set(dst[topology.out_links(s)].tolist()))
        for v in nbrs:
            if not npu[v]:
                raise invalid("topology for tacos switch unwinding", f"switch {s} -> switch {v}",
                              "switches attached only to NPUs (one switching level)")
        k = len(nbrs)
        if k < 2:
            continue
        up, down = {}, {}
        for v in nbrs:
            lu, ld = topology.links_between(v, s), topology.links_between(s, v)
            if len(lu) == 0 or len(ld) == 0:
                raise invalid("topology for tacos switch unwinding", f"NPU {v} - switch {s}",
                              "an uplink and a downlink between each NPU and its switch")
            # Parallel cables: use the fastest one (the unwound link is one logical channel).
            up[v] = int(lu[np.argmax(bw[lu])])
            down[v] = int(ld[np.argmax(bw[ld])])
        d = k - 1 if degree == "max" else min(int(degree), k - 1)
        shared = shared or d > 1
        for i, u in enumerate(nbrs):
            for j in range(1, d + 1):
                v = nbrs[(i + j) % k]
                out_src.append(u)
                out_dst.append(v)
                out_bw.append(min(bw[up[u]], bw[down[v]]) / d)
                out_lat.append(lat[up[u]] + lat[down[v]])
                paths.append((up[u], down[v]))
    return LogicalLinks(np.asarray(out_src, np.int64), np.asarray(out_dst, np.int64),
                        np.asarray(out_bw, np.float64), np.asarray(out_lat, np.float64),
                        paths, "shared" if shared else "exclusive")
