"""OCS-reconfig heuristic (TopoOpt NSDI'23, Appendix E.4, Algorithm 5) and its driver.

:func:`ocs_reconfig` builds one topology for a demand matrix: while some server has a
free transmit and some other a free receive interface, give a new circuit to the
pair with the highest remaining demand (line 7), count it (``L += 1``, line 10) and
scale that pair's demand by the Discount's marginal factor (line 11: ``x 1/2``; here
``T0 x discount(L)`` as in :mod:`topologies.topoopt.matching`); a server with no free
transmit (receive) interface leaves the rows (columns) of ``T`` (lines 15-20).  Line
13-14's loop decrements the transmit count of ``v1`` and the receive count of ``v2``
once per circuit.  When no positive demand is left the remaining interfaces are
paired at random (the "highest demand" is then a tie), and the OWAN two-edge
replacement (line 21) makes the graph strongly connected for host-based forwarding.
Circuits are one-way (an OCS port pairs one transmit with one receive fibre).

The reconfigurable-fabric loop of App. E.4 (every 50 ms Algorithm 5 on the unsatisfied
demand, 10 ms pauses, flows at max-min rates with host forwarding) is
:class:`evaluators.netsim.reconfigurable.ReconfigurableFabric`, with this function as
its circuit policy.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from codesign.errors import InfeasibleError, invalid
from topologies.families.options import DEFAULT_BW, DEFAULT_LAT
from topologies.model import Topology
from topologies.topoopt.matching import discount_function
from topologies.topoopt.repair import MP, LinkSet, connect_pieces, fill_interfaces

__all__ = ["OCSResult", "ocs_reconfig"]


@dataclass(frozen=True)
class OCSResult:
    """One Algorithm 5 run: ``topology`` and ``circuits[i, j]``, the links ``i -> j``."""

    topology: Topology
    circuits: np.ndarray
    repairs: int


def _demand(demand, n_field: str = "ocs_reconfig demand") -> np.ndarray:
    t = np.array(demand, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.shape[0] < 2:
        raise invalid(f"{n_field} shape", t.shape, "a square matrix of at least 2 x 2 servers")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise invalid(n_field, "negative or non-finite entries", "bytes >= 0")
    np.fill_diagonal(t, 0.0)
    return t


def ocs_reconfig(demand, degree: int, *, discount="halve", link_bandwidth: float = DEFAULT_BW,
                 latency: float = DEFAULT_LAT, seed: int = 0, name: str = "") -> OCSResult:
    """Algorithm 5: circuits for a demand matrix under a degree limit.

    Parameters
    ----------
    demand : array_like
        ``n x n`` unsatisfied demand, bytes (rows send).
    degree : int
        Transmit and receive interfaces per server (``d``).
    discount : {"halve", "none", "harmonic"} or callable, optional
        ``"halve"`` is line 11; ``"none"`` is App. F's SiP-ML variant (Discount = 1).
    link_bandwidth, latency : float, optional
        Bytes/s and seconds of each circuit.
    seed : int, optional
        Random fill and repair choices.
    name : str, optional

    Returns
    -------
    OCSResult
        Every server has exactly ``degree`` outgoing and incoming circuits and the
        topology is strongly connected.

    Complexity: O(n^2 log n) to sort the positive demand entries, then a linear scan.

    Examples
    --------
    >>> t = np.zeros((4, 4)); t[0, 1] = 10.0
    >>> r = ocs_reconfig(t, 2)
    >>> int(r.circuits[0, 1])        # the hot pair gets both of 0's transmit interfaces
    2
    """
    t = _demand(demand)
    n = t.shape[0]
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise invalid("ocs_reconfig degree", degree, "an integer >= 1")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise invalid("ocs_reconfig seed", seed, "an integer >= 0")
    d = int(degree)
    disc = discount_function(discount)
    rng = np.random.default_rng(int(seed))
    tx = np.full(n, d, dtype=np.int64)
    rx = np.full(n, d, dtype=np.int64)
    circuits = np.zeros((n, n), dtype=np.int64)
    # Pairs in decreasing demand, equal demands in seeded random order (the "highest
    # demand pair" of line 7 is then a tie); a pair whose demand was discounted goes
    # to a small heap and competes with the sorted list's head.
    ii, jj = np.nonzero(t > 0)
    vals = t[ii, jj]
    tie = rng.random(ii.size)
    order = np.lexsort((tie, -vals))
    ii, jj, vals, tie = (ii[order].tolist(), jj[order].tolist(), vals[order].tolist(),
                         tie[order].tolist())
    heap: list[tuple[float, float, int, int]] = []
    pos = 0
    src, dst = [], []
    free_tx = n * d
    while free_tx and (pos < len(ii) or heap):
        if heap and (pos >= len(ii) or (heap[0][0], heap[0][1]) < (-vals[pos], tie[pos])):
            _, r, i, j = heapq.heappop(heap)
        else:
            r, i, j = tie[pos], ii[pos], jj[pos]
            pos += 1
        if tx[i] == 0 or rx[j] == 0:          # lines 15-20: entry removed
            continue
        src.append(i)
        dst.append(j)
        circuits[i, j] += 1
        tx[i] -= 1
        rx[j] -= 1
        free_tx -= 1
        w = float(t[i, j] * disc(np.array(circuits[i, j])))
        if w > 0:
            heapq.heappush(heap, (-w, r, i, j))
    links = LinkSet(n)
    links.add(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), MP)
    fill_interfaces(links, tx, rx, rng)
    repairs = connect_pieces(links, rng)
    s, dd, _ = links.arrays()
    if not (np.all(np.bincount(s, minlength=n) == d) and np.all(np.bincount(dd, minlength=n)
                                                                == d)):
        raise InfeasibleError(f"OCS-reconfig could not give every server degree {d}")
    order = np.lexsort((dd, s))
    topo = Topology(n, 0, s[order], dd[order], link_bandwidth, latency,
                    name=name or f"ocs-reconfig:{n},degree={d}", family="topoopt",
                    params={"servers": n, "degree": d,
                            "link_bandwidth_Bps": float(link_bandwidth),
                            "technology": "ocs", "seed": int(seed)})
    final = np.zeros((n, n), dtype=np.int64)
    np.add.at(final, (s, dd), 1)
    return OCSResult(topo, final, repairs)
