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

:func:`ocs_reconfig_schedule` is the reconfigurable-fabric loop of App. E.4: every
epoch (50 ms) it collects the unsatisfied demand, runs Algorithm 5, and when the
circuits change pauses all flows for the reconfiguration delay (10 ms).
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

__all__ = ["OCSResult", "OCSSchedule", "ocs_reconfig", "ocs_reconfig_schedule",
           "DEFAULT_EPOCH_S", "DEFAULT_RECONFIG_DELAY_S"]

#: App. E.4: demand is collected every 50 ms.
DEFAULT_EPOCH_S = 0.05
#: App. E.4: flows pause 10 ms while the OCS reconfigures.
DEFAULT_RECONFIG_DELAY_S = 0.01


@dataclass(frozen=True)
class OCSResult:
    """One Algorithm 5 run: ``topology`` and ``circuits[i, j]``, the links ``i -> j``."""

    topology: Topology
    circuits: np.ndarray
    repairs: int


@dataclass(frozen=True)
class OCSSchedule:
    """The epochs of :func:`ocs_reconfig_schedule`.

    Attributes
    ----------
    topologies : tuple of Topology
        The fabric during each epoch.
    reconfigured : tuple of bool
        Whether the circuits changed at the start of the epoch.
    time_lost_s : float
        Total pause, ``reconfigurations x reconfig_delay_s``.
    unsatisfied_bytes : tuple of float
        Demand left at the end of each epoch (carried to the next).
    epoch_s, reconfig_delay_s : float
    """

    topologies: tuple
    reconfigured: tuple
    time_lost_s: float
    unsatisfied_bytes: tuple
    epoch_s: float
    reconfig_delay_s: float

    @property
    def reconfigurations(self) -> int:
        return int(sum(self.reconfigured))


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


def ocs_reconfig_schedule(demands, degree: int, *, epoch_s: float = DEFAULT_EPOCH_S,
                          reconfig_delay_s: float = DEFAULT_RECONFIG_DELAY_S,
                          link_bandwidth: float = DEFAULT_BW, latency: float = DEFAULT_LAT,
                          discount="halve", seed: int = 0) -> OCSSchedule:
    """Run OCS-reconfig every epoch over a time series of demand (App. E.4).

    At the start of epoch ``e`` the pending demand is ``demands[e]`` plus what was
    left unsatisfied; :func:`ocs_reconfig` computes circuits for it.  If they differ
    from the current ones (always for the first epoch), flows pause for
    ``reconfig_delay_s``.  Then each circuit ``i -> j`` carries up to
    ``link_bandwidth x (epoch_s - pause)`` bytes of the pair's pending demand;
    the rest is carried over.  Only direct circuits count as service here (traffic
    relayed through other servers is left to the iteration model), so the
    unsatisfied bytes are an upper bound.

    Parameters
    ----------
    demands : sequence of array_like
        ``n x n`` bytes arriving in each epoch.
    degree : int
        Interfaces per server.
    epoch_s : float, optional
        Epoch length, seconds (50 ms).
    reconfig_delay_s : float, optional
        OCS reconfiguration pause, seconds (10 ms), less than ``epoch_s``.
    link_bandwidth, latency, discount, seed
        As :func:`ocs_reconfig`.

    Returns
    -------
    OCSSchedule

    Examples
    --------
    >>> hot = np.zeros((4, 4)); hot[0, 1] = 1e9
    >>> s = ocs_reconfig_schedule([hot, hot, hot], 1, link_bandwidth=1e9)
    >>> s.reconfigurations, round(s.time_lost_s, 3)
    (1, 0.01)
    """
    mats = [_demand(m, f"ocs_reconfig_schedule demands[{i}]") for i, m in enumerate(demands)]
    if not mats:
        raise invalid("ocs_reconfig_schedule demands", "[]", "at least one epoch")
    n = mats[0].shape[0]
    for i, m in enumerate(mats):
        if m.shape != (n, n):
            raise invalid(f"ocs_reconfig_schedule demands[{i}] shape", m.shape, f"({n}, {n})")
    for fname, v in (("epoch_s", epoch_s), ("reconfig_delay_s", reconfig_delay_s)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) \
                or v < 0:
            raise invalid(f"ocs_reconfig_schedule {fname}", v, "a finite number of seconds >= 0")
    if not reconfig_delay_s < epoch_s:
        raise invalid("ocs_reconfig_schedule reconfig_delay_s", reconfig_delay_s,
                      f"less than the epoch ({epoch_s} s)")
    pending = np.zeros((n, n))
    current: OCSResult | None = None
    topologies, changed, left = [], [], []
    for m in mats:
        pending = pending + m
        new = ocs_reconfig(pending, degree, discount=discount, link_bandwidth=link_bandwidth,
                           latency=latency, seed=seed) if pending.any() or current is None \
            else current
        moved = current is None or not np.array_equal(new.circuits, current.circuits)
        if moved:
            current = new
        usable = epoch_s - (reconfig_delay_s if moved else 0.0)
        served = np.minimum(pending, current.circuits * float(link_bandwidth) * usable)
        pending = pending - served
        topologies.append(current.topology)
        changed.append(bool(moved))
        left.append(float(pending.sum()))
    return OCSSchedule(tuple(topologies), tuple(changed), float(sum(changed) *
                                                               reconfig_delay_s),
                       tuple(left), float(epoch_s), float(reconfig_delay_s))
