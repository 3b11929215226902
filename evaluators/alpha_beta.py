"""Closed-form alpha-beta times of the ring collectives, and the ring stand-in metric.

Alpha-beta model (TACOS Sec. II-C): sending ``m`` bytes over a link costs
``alpha + m / B`` where ``alpha`` is the link latency (s) and ``B`` its
bandwidth (bytes/s).

Ring algorithms (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
clusters of workstations", JPDC 69(2), 2009 -- TACOS ref. [17], Themis ref. [50];
Themis Fig. 3 shows the steps).  On ``n`` NPUs the buffer is cut into ``n``
shards; in every step each NPU sends one shard of ``size / n`` bytes to its
successor, all NPUs at the same time:

* reduce-scatter: ``n - 1`` steps, ``T = (n-1) (alpha + size / (n B))``
  (``size`` is the input buffer, nccl-tests convention);
* all-gather: ``n - 1`` steps, same time (``size`` is the output buffer);
* all-reduce: reduce-scatter then all-gather,
  ``T = 2 (n-1) (alpha + size / (n B))`` (``size`` is one rank's buffer).

These are the times of a ring whose neighbours are joined by a dedicated link.
:func:`ring_allreduce_estimate` generalises them to an arbitrary topology; it is
the stand-in performance metric of the walking skeleton (``codesign
quickstart``), to be replaced by synthesised schedules and the training model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.errors import invalid

__all__ = [
    "ring_allreduce_time",
    "ring_allgather_time",
    "ring_reducescatter_time",
    "ring_neighbour_profile",
    "ring_allreduce_estimate",
]


def _check(n: int, size_bytes: float, bandwidth_Bps: float, latency_s: float) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise invalid("ring size n", n, "an integer >= 1 (number of NPUs)")
    if not np.isfinite(size_bytes) or size_bytes < 0:
        raise invalid("size_bytes", size_bytes, "a finite number of bytes >= 0")
    if not np.isfinite(bandwidth_Bps) or bandwidth_Bps <= 0:
        raise invalid("bandwidth_Bps", bandwidth_Bps, "a finite bandwidth > 0 bytes/s")
    if not np.isfinite(latency_s) or latency_s < 0:
        raise invalid("latency_s", latency_s, "a finite latency >= 0 s")


def _ring_steps_time(steps_per_shard: int, n: int, size_bytes: float, bandwidth_Bps: float,
                     latency_s: float) -> float:
    _check(n, size_bytes, bandwidth_Bps, latency_s)
    if n == 1:
        return 0.0
    return steps_per_shard * (n - 1) * (latency_s + size_bytes / (n * bandwidth_Bps))


def ring_allreduce_time(n: int, size_bytes: float, bandwidth_Bps: float,
                        latency_s: float) -> float:
    """Time of the ring all-reduce, ``2 (n-1) (latency + size / (n bandwidth))``.

    Parameters
    ----------
    n : int
        Number of NPUs in the ring (>= 1).
    size_bytes : float
        One rank's buffer, bytes (nccl-tests convention).
    bandwidth_Bps : float
        Bandwidth of the link from each NPU to its successor, bytes/s.
    latency_s : float
        Latency of that link, seconds.

    Returns
    -------
    float
        Seconds; ``0.0`` for ``n == 1``.

    Raises
    ------
    InvalidSpecError
        On ``n < 1``, a negative size, a non-positive bandwidth or a negative latency.

    Notes
    -----
    Patarasuk & Yuan (2009): reduce-scatter then all-gather, ``n - 1`` steps
    each, every step moving ``size / n`` bytes per NPU.  O(1).

    Examples
    --------
    >>> ring_allreduce_time(4, 4e9, 1e9, 0.0)   # 2*3 steps of 1 GB at 1 GB/s
    6.0
    """
    return _ring_steps_time(2, n, size_bytes, bandwidth_Bps, latency_s)


def ring_allgather_time(n: int, size_bytes: float, bandwidth_Bps: float,
                        latency_s: float) -> float:
    """Time of the ring all-gather, ``(n-1) (latency + size / (n bandwidth))``.

    ``size_bytes`` is the output buffer (``n`` shards, nccl-tests convention);
    the other parameters are those of :func:`ring_allreduce_time`.  Seconds.

    Examples
    --------
    >>> ring_allgather_time(4, 4e9, 1e9, 0.5)
    4.5
    """
    return _ring_steps_time(1, n, size_bytes, bandwidth_Bps, latency_s)


def ring_reducescatter_time(n: int, size_bytes: float, bandwidth_Bps: float,
                            latency_s: float) -> float:
    """Time of the ring reduce-scatter, ``(n-1) (latency + size / (n bandwidth))``.

    ``size_bytes`` is the input buffer (``n`` shards, nccl-tests convention);
    the other parameters are those of :func:`ring_allreduce_time`.  Seconds.
    """
    return _ring_steps_time(1, n, size_bytes, bandwidth_Bps, latency_s)


def _ring_order(topology, order: Sequence[int] | None) -> np.ndarray:
    n = topology.npus
    if order is None:
        return np.arange(n, dtype=np.int64)
    arr = np.asarray(order)
    if (arr.ndim != 1 or arr.size != n or not np.issubdtype(arr.dtype, np.integer)
            or not np.array_equal(np.sort(arr), np.arange(n))):
        raise invalid("ring order", list(np.ravel(arr))[:8],
                      f"a permutation of the NPU ids 0..{n - 1}")
    return arr.astype(np.int64)


def ring_neighbour_profile(topology, *, order: Sequence[int] | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Latency and effective bandwidth from each ring NPU to its successor.

    The ring visits the NPUs in ``order`` (default: id order ``0, 1, ..., N-1``)
    and NPU ``order[i]`` sends to ``order[i+1 mod N]`` along
    :meth:`Topology.route` (a minimum-hop path).  In a ring step all ``N``
    neighbour transfers run at once, so:

    * latency of neighbour ``i``: the sum of the latencies of the links on its
      route (``hops * link latency`` on uniform links, as in docs/architecture.md
      section 5's "analytical" model);
    * bandwidth of neighbour ``i``: the bottleneck, over the node pairs
      ``(u, v)`` its route crosses, of the pair's capacity divided by the
      number of neighbour routes crossing it.  The capacity of a pair is the
      summed bandwidth of all parallel links ``u -> v`` (a transfer may stripe
      over parallel links, e.g. the ``d`` links of an Ideal switch server).
      Pooling parallel links makes the first hop's capacity at most the
      sender's per-NPU injection bandwidth (the sum of its outgoing links),
      so ``bandwidth_i`` never exceeds it, nor the receiver's ejection
      bandwidth.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected topology.
    order : sequence of int, optional
        A permutation of the NPU ids: the ring order.

    Returns
    -------
    latency_s : numpy.ndarray
        Shape ``(N,)``: route latency of neighbour ``i``, seconds.
    bandwidth_Bps : numpy.ndarray
        Shape ``(N,)``: effective bandwidth of neighbour ``i``, bytes/s.

    Notes
    -----
    O(N * diameter) after the topology's cached all-pairs shortest paths.
    Congestion is counted on whole routes (fluid sharing), not per packet.
    """
    ring = _ring_order(topology, order)
    n = ring.size
    succ = np.roll(ring, -1)
    routes = [np.asarray(topology.route(int(u), int(v)), dtype=np.int64)
              for u, v in zip(ring, succ)]
    lengths = np.array([r.size for r in routes], dtype=np.int64)
    links = np.concatenate(routes) if routes else np.zeros(0, dtype=np.int64)
    latency = np.zeros(n)
    np.add.at(latency, np.repeat(np.arange(n), lengths), topology.latency[links])
    # Parallel links between the same ordered pair form one pipe of summed capacity.
    n_nodes = topology.n_nodes
    pair_of_link = topology.src * n_nodes + topology.dst
    pairs, pair_index = np.unique(pair_of_link, return_inverse=True)
    capacity = np.bincount(pair_index, weights=topology.bandwidth, minlength=pairs.size)
    used = pair_index[links]
    load = np.bincount(used, minlength=pairs.size)
    share = capacity[used] / load[used]
    bandwidth = np.full(n, np.inf)
    np.minimum.at(bandwidth, np.repeat(np.arange(n), lengths), share)
    return latency, bandwidth


def ring_allreduce_estimate(topology, size_bytes: float, *,
                            order: Sequence[int] | None = None) -> float:
    """Alpha-beta time of a ring all-reduce over the NPUs of an arbitrary topology.

    The stand-in performance metric of the walking skeleton.  The ring of
    Patarasuk & Yuan runs ``2 (N-1)`` synchronous steps; in each one every NPU
    sends ``size / N`` bytes to its successor, so a step lasts as long as the
    slowest neighbour transfer::

        T = 2 (N-1) * max_i ( latency_i + size / (N * bandwidth_i) )

    with ``latency_i`` and ``bandwidth_i`` from :func:`ring_neighbour_profile`
    (route latency = per-hop latency summed over the min-hop route; bandwidth =
    bottleneck share of the route's links, at most the per-NPU injection
    bandwidth).  On a
    ring or a switch with uniform links this equals :func:`ring_allreduce_time`
    with the per-route latency.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected topology; its NPUs take part.
    size_bytes : float
        One rank's buffer, bytes.
    order : sequence of int, optional
        Ring order (default: NPU id order).

    Returns
    -------
    float
        Seconds; ``0.0`` for a single NPU.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = ring_allreduce_estimate(from_spec("ring:4,bw=1GB/s,lat=0"), 4e9)
    >>> round(t, 9)
    6.0
    """
    if isinstance(size_bytes, bool) or not np.isfinite(size_bytes) or size_bytes < 0:
        raise invalid("size_bytes", size_bytes, "a finite number of bytes >= 0")
    n = topology.npus
    if n == 1:
        return 0.0
    latency, bandwidth = ring_neighbour_profile(topology, order=order)
    step = float(np.max(latency + size_bytes / (n * bandwidth)))
    return 2.0 * (n - 1) * step
