"""One communication *phase* under the ``flow`` model: messages that all start together.

The iteration model (:mod:`evaluators.iteration.model`) cuts an iteration into phases:
the model-parallel transfers and all-to-alls between two compute steps, or one level
of a collective schedule.  Every message of a phase is ready at time 0 and has no
dependencies; exact max-min timing (one rate computation per distinct finish time) is
too slow for the 16 k flows of an all-to-all over 128 servers.  This module runs the
fluid model (docs/architecture.md section 5: max-min fair sharing, finish = drain time + path
latency) in the one fluid loop :func:`evaluators.netsim.flow.fluid_loop` with two
speed-ups:

* routes of many pairs are built at once (:func:`topologies.routing.pair_paths`: the
  same path :meth:`topologies.model.Topology.route` returns, tables cached per topology);
* *event batching* (``rtol``): when the next flow drains at time ``t1`` (from the
  start of the phase), every flow that would drain by ``t1 (1 + rtol)`` at the current
  rates drains at its own time before rates are recomputed.  Capacity they free inside
  that window is not redistributed, so the result is never faster than exact max-min
  and the number of recomputations is at most about ``log(T / t_first) / rtol``;
* *coarse filling levels* (same ``rtol``): in progressive filling, every link whose
  fair share is within ``rtol`` x the current level of the smallest saturates at once
  (:func:`evaluators.netsim.flow.fair_rates`), leaving its small remainder unused.

``rtol = 0`` is exact (tested against :func:`evaluators.netsim.simulate`).  With the
default ``rtol = 0.05`` the makespan of random phases on 16-node expander, fat-tree,
torus and switch networks was 0-3.5 % above the exact one (never below); single
messages may finish up to about 1 % early.  A 16 k-flow all-to-all over 128 servers
(expander, d = 4) takes about 1 s instead of 55 s exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.errors import invalid
from evaluators.netsim.flow import StaticPaths, fluid_loop
from topologies.routing import pair_paths

__all__ = ["PhaseResult", "flow_phase", "DEFAULT_RTOL"]

#: Default event-batching tolerance (relative to the phase's elapsed time).
DEFAULT_RTOL = 0.05

@dataclass(frozen=True)
class PhaseResult:
    """Outcome of :func:`flow_phase`.

    Attributes
    ----------
    makespan_s : float
        When the last message has arrived, s from the phase start.
    finish_s : ndarray
        Arrival time of each message, s.
    link_bytes : ndarray
        Bytes carried by every link of the topology.
    hops : ndarray of int
        Links crossed by each message.
    forwards : ndarray of int
        Intermediate NPUs (host-based forwarding) on each message's path.
    """

    makespan_s: float
    finish_s: np.ndarray
    link_bytes: np.ndarray
    hops: np.ndarray
    forwards: np.ndarray


def flow_phase(topology, src, dst, size, *, rtol: float = DEFAULT_RTOL,
               paths: tuple[np.ndarray, np.ndarray] | None = None,
               routing: str = "shortest") -> PhaseResult:
    """Simulate messages that all start at time 0 under the ``flow`` model.

    Parameters
    ----------
    topology : topologies.Topology
        The network; messages follow minimum-hop routes (``Topology.route``).
    src, dst : array_like of int
        NPU ids of every message (``src != dst``).
    size : array_like of float
        Bytes of every message (> 0).
    rtol : float, optional
        Event-batching and filling-level tolerance (module docstring); 0 is exact
        max-min.
    paths : (ptr, links), optional
        Explicit paths in CSR form (as :class:`evaluators.netsim.Messages`); default
        the topology's minimum-hop routes.
    routing : str, optional
        Without ``paths``: a method of :func:`topologies.routing.pair_paths`
        (``"shortest"``: :meth:`Topology.route`; ``"ecmp"``: one hashed minimum-hop path
        per pair, as switches' per-flow ECMP; ``"dmodk"`` on Clos fabrics).

    Returns
    -------
    PhaseResult

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("ring:4,bw=1GB/s,lat=0")
    >>> flow_phase(t, [0, 0], [1, 1], [1e6, 1e6]).makespan_s   # two flows share a link
    0.002
    """
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 <= rtol < 1:
        raise invalid("flow phase rtol", rtol, "a number in [0, 1)")
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    size = np.asarray(size, dtype=np.float64)
    n = src.size
    if n == 0:
        z = np.zeros(0)
        return PhaseResult(0.0, z, np.zeros(topology.n_links), z.astype(np.int64),
                           z.astype(np.int64))
    if paths is None:
        ptr, links = pair_paths(topology, src, dst, method=routing)
    else:
        ptr, links = (np.asarray(a, dtype=np.int64) for a in paths)
    n_hops = np.diff(ptr)
    hop_msg = np.repeat(np.arange(n), n_hops)
    # Intermediate nodes of a path: the destination of every hop but the last.
    mids = topology.dst[links]
    last = np.zeros(links.size, dtype=bool)
    last[ptr[1:] - 1] = True
    forwards = np.bincount(hop_msg, weights=((mids < topology.npus) & ~last).astype(float),
                           minlength=n).astype(np.int64)
    link_bytes = np.bincount(links, weights=size[hop_msg], minlength=topology.n_links)
    net = StaticPaths(topology.bandwidth, topology.latency, ptr, links)
    finish = fluid_loop(size, net, rtol=rtol).finish_s
    return PhaseResult(float(finish.max()), finish, link_bytes, n_hops.astype(np.int64),
                       forwards)
