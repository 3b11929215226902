"""Pairwise latency probe (cloud-collectives-rank-reordering, Section 4.2).

The paper measures ``c_{i,j}`` end to end with small UDP echo probes: "Probing of N
nodes can finish in N rounds, with each round probing for N/2 pairs of VMs", each
probe a UDP packet whose payload "encodes sequence number and round id", the RTT
taken at the 10th percentile, and finally ``c_{i,j} <- MAX(c_{i,j}, c_{j,i})`` to
make the matrix symmetric.  We follow that with Ray actors instead of DPDK:

* one actor per node (one per alive Ray node, pinned with a
  ``NodeAffinitySchedulingStrategy``; or ``nodes`` actors on this machine over
  loopback), each running a UDP echo server on its node IP, ephemeral port, in a
  background thread;
* rounds from the circle method (:func:`round_robin_schedule`): every round is a
  matching, so no node answers two probers at once.  The paper's own round ``r``
  pairs ``i -> (i + r + 1) mod N`` (a shift, where every node both sends and
  answers in each round); the circle method keeps each node busy with a single peer
  and still measures both directions: inside a round the lower position of a pair
  probes first, then the other way round, sequentially;
* each direction sends ``rounds`` probes one at a time (per-packet timeout, lost
  probes are re-sent a few times); the one-way cost is the 10th percentile of
  ``RTT / 2`` and the matrix is symmetrised with the maximum, as in the paper.

:func:`save_cost_matrix` writes the CSV read by
:func:`search.reorder.rank_order.load_cost_matrix` (``codesign reorder``).
"""

from __future__ import annotations

import csv
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_int, check_number
from search.ray_session import ray_session
from search.reorder.rank_order import is_header

__all__ = ["ProbeResult", "probe_latencies", "round_robin_schedule", "save_cost_matrix",
           "PERCENTILE", "PACKET_TIMEOUT_S", "MAX_RETRIES"]

#: Percentile of the RTT samples used as the latency (Section 4.2: "RTT of 10th percentile").
PERCENTILE = 10.0
#: How long a prober waits for one echo before re-sending it (seconds).
PACKET_TIMEOUT_S = 0.2
#: How many times a lost probe is re-sent before it counts as lost.
MAX_RETRIES = 3
#: Header of every probe: round id and sequence number, both unsigned 32-bit (Section 4.2).
_HEADER = struct.Struct("!II")
#: Largest UDP payload over IPv4 (65535 - 8 byte UDP header - 20 byte IP header).
_MAX_PAYLOAD = 65507


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of :func:`probe_latencies`.

    Attributes
    ----------
    matrix_s : numpy.ndarray
        ``n x n`` symmetric one-way cost in seconds, zero diagonal:
        ``max(c_ij, c_ji)`` with ``c_ij`` the 10th percentile of ``RTT / 2`` of the
        probes sent by ``i`` and echoed by ``j``.
    names : tuple of str
        Node names, in matrix order (the node IP on a cluster, ``local-k`` locally).
    samples : dict
        ``(i, j) -> numpy.ndarray`` of the round-trip times in seconds of the probes
        ``i`` sent to ``j`` that came back (lost probes are absent).
    """

    matrix_s: np.ndarray
    names: tuple[str, ...]
    samples: dict[tuple[int, int], np.ndarray]


# ------------------------------------------------------------------------ schedule


def round_robin_schedule(n: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair of ``n`` nodes once (circle method).

    Position ``0`` stays put while the others rotate one step per round; pair ``k``
    of a round joins the ``k``-th position from the front with the ``k``-th from the
    back.  With odd ``n`` a dummy position is added and its partner sits the round
    out (a bye).

    Parameters
    ----------
    n : int
        Number of nodes (``>= 2``).

    Returns
    -------
    list of list of (int, int)
        ``n - 1`` rounds for even ``n`` (``n`` for odd ``n``), each a list of pairs
        ``(a, b)`` with ``a < b``; within a round no node appears twice, and every
        unordered pair appears in exactly one round.
    """
    n = check_int("node count", n, 2)
    m = n + (n % 2)  # position n (odd n) is the bye
    ring = list(range(m))
    rounds = []
    for _ in range(m - 1):
        pairs = [(ring[k], ring[m - 1 - k]) for k in range(m // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a < n and b < n])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


# -------------------------------------------------------------------------- actor


class _EchoNode:
    """One node of the probe: a UDP echo server plus a prober (runs as a Ray actor)."""

    def __init__(self, host: str):
        self.host = host
        self._echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._echo.bind((host, 0))
        # A short timeout lets the thread notice close() without a wake-up packet.
        self._echo.settimeout(0.2)
        self._probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._probe.bind((host, 0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self._echo.recvfrom(_MAX_PAYLOAD)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                self._echo.sendto(data, peer)
            except OSError:
                continue  # the prober sees a lost packet and re-sends

    def address(self) -> tuple[str, int]:
        return self._echo.getsockname()[:2]

    def probe(self, target: tuple[str, int], count: int, payload_bytes: int, round_id: int,
              seq0: int, packet_timeout_s: float, max_retries: int) -> list[float]:
        """Send ``count`` probes one at a time to ``target``; return their RTTs (s)."""
        padding = os.urandom(payload_bytes - _HEADER.size)
        sock = self._probe
        sock.settimeout(packet_timeout_s)
        rtts = []
        seq = seq0
        for _ in range(count):
            for _attempt in range(max_retries + 1):
                # A fresh sequence number per attempt: a late echo of an earlier attempt
                # is recognised as stale and skipped instead of being timed.
                seq = (seq + 1) & 0xFFFFFFFF
                message = _HEADER.pack(round_id & 0xFFFFFFFF, seq) + padding
                t0 = time.perf_counter_ns()
                sock.sendto(message, target)
                deadline = t0 + int(packet_timeout_s * 1e9)
                got = False
                while True:
                    left = (deadline - time.perf_counter_ns()) / 1e9
                    if left <= 0:
                        break
                    sock.settimeout(left)
                    try:
                        data = sock.recv(_MAX_PAYLOAD)
                    except socket.timeout:
                        break
                    t1 = time.perf_counter_ns()
                    if data[:_HEADER.size] == message[:_HEADER.size]:
                        rtts.append((t1 - t0) / 1e9)
                        got = True
                        break
                if got:
                    break
        return rtts

    def close(self) -> None:
        self._stop.set()
        self._echo.close()
        self._probe.close()


# ------------------------------------------------------------------------- driver


def _targets(ray, nodes: int | None, local: bool) -> tuple[list[str], list[dict]]:
    """Names and actor options: ``nodes`` loopback actors, or one pinned actor per Ray node."""
    if local:
        n = 4 if nodes is None else check_int("nodes", nodes, 2)
        return [f"local-{k}" for k in range(n)], [{"host": "127.0.0.1"}] * n
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = sorted((nd for nd in ray.nodes() if nd.get("Alive")),
                   key=lambda nd: (nd["NodeManagerAddress"], nd["NodeID"]))
    if nodes is not None:
        n = check_int("nodes", nodes, 2, max(2, len(alive)))
        alive = alive[:n]
    if len(alive) < 2:
        raise InfeasibleError(f"latency probe needs at least 2 alive Ray nodes, found {len(alive)}")
    names, seen = [], {}
    for nd in alive:
        ip = nd["NodeManagerAddress"]
        seen[ip] = seen.get(ip, 0) + 1
        names.append(ip if seen[ip] == 1 else f"{ip}#{seen[ip]}")  # header names must differ
    opts = [{"host": nd["NodeManagerAddress"],
             "strategy": NodeAffinitySchedulingStrategy(node_id=nd["NodeID"], soft=False)}
            for nd in alive]
    return names, opts


def probe_latencies(*, nodes: int | None = None, rounds: int = 20, payload_bytes: int = 64,
                    ray_address: str | None = None, seed: int = 0,
                    timeout_s: float = 60.0) -> ProbeResult:
    """Measure the pairwise one-way latency matrix of a set of nodes (Section 4.2).

    Parameters
    ----------
    nodes : int, optional
        Locally (``ray_address`` is ``None``): number of actors on this machine, all
        over loopback (default 4).  On a cluster: probe only the first ``nodes``
        alive Ray nodes (sorted by IP); default all of them.
    rounds : int
        Probes (round trips) per direction of each pair (``>= 1``).
    payload_bytes : int
        UDP payload of a probe in bytes (8 .. 65507); the first 8 bytes carry the
        round id and the sequence number.
    ray_address : str, optional
        Join this Ray cluster (one actor per alive node); ``None`` starts (or reuses)
        a local Ray instance.
    seed : int
        Seeds the assignment of nodes to positions of the round-robin schedule (which
        pairs share a round); the same seed gives the same schedule.
    timeout_s : float
        Wall-clock limit of the whole probe in seconds (after the actors are up).

    Returns
    -------
    ProbeResult
        Symmetric ``matrix_s`` (seconds, zero diagonal), ``names`` and raw ``samples``.

    Raises
    ------
    InvalidSpecError
        A bad argument.
    InfeasibleError
        Fewer than two nodes, every probe of some direction lost, or the time limit
        reached.
    """
    rounds = check_int("rounds", rounds, 1)
    payload_bytes = check_int("payload_bytes", payload_bytes, _HEADER.size, _MAX_PAYLOAD)
    seed = check_int("seed", seed, 0)
    check_number("timeout_s", timeout_s)
    local = not ray_address
    if local and nodes is not None:
        check_int("nodes", nodes, 2)

    import ray

    with ray_session(ray_address):
        names, options = _targets(ray, nodes, local)
        n = len(names)
        remote_cls = ray.remote(num_cpus=0)(_EchoNode)
        actors = []
        try:
            for opt in options:
                extra = {"scheduling_strategy": opt["strategy"]} if "strategy" in opt else {}
                actors.append(remote_cls.options(**extra).remote(opt["host"]))
            addresses = ray.get([a.address.remote() for a in actors])
            samples = _run_schedule(ray, actors, addresses, rounds, payload_bytes, seed,
                                    time.monotonic() + float(timeout_s))
        finally:
            for a in actors:
                ray.kill(a)
    directed = np.zeros((n, n))
    for (i, j), rtt in samples.items():
        if rtt.size == 0:
            raise InfeasibleError(f"latency probe: every probe from {names[i]} to {names[j]} "
                                  f"was lost ({rounds} probes, {MAX_RETRIES} retries each)")
        directed[i, j] = np.percentile(rtt / 2.0, PERCENTILE)
    # Section 4.2: c_ij <- MAX(c_ij, c_ji).
    return ProbeResult(np.maximum(directed, directed.T), tuple(names), samples)


def _run_schedule(ray, actors, addresses, rounds, payload_bytes, seed, deadline):
    """Both directions of every pair, one matching (half-round) at a time."""
    n = len(actors)
    position = np.random.default_rng(seed).permutation(n)  # position -> node
    samples: dict[tuple[int, int], np.ndarray] = {}
    seq = 0
    late = "latency probe: time limit reached (raise timeout_s)"
    for r, pairs in enumerate(round_robin_schedule(n)):
        nodes_pairs = [(int(position[a]), int(position[b])) for a, b in pairs]
        for phase in (nodes_pairs, [(b, a) for a, b in nodes_pairs]):
            refs = []
            for i, j in phase:
                refs.append(actors[i].probe.remote(addresses[j], rounds, payload_bytes, r, seq,
                                                   PACKET_TIMEOUT_S, MAX_RETRIES))
                seq += rounds * (MAX_RETRIES + 1)
            left = deadline - time.monotonic()
            if left <= 0:
                raise InfeasibleError(late, reason="time")
            try:
                results = ray.get(refs, timeout=left)
            except ray.exceptions.GetTimeoutError as exc:
                raise InfeasibleError(late, reason="time") from exc
            for (i, j), rtt in zip(phase, results):
                samples[(i, j)] = np.asarray(rtt, dtype=float)
    return samples


# ---------------------------------------------------------------------------- CSV


def save_cost_matrix(path: str | Path, matrix: np.ndarray, names) -> Path:
    """Write a square cost matrix (seconds) as CSV with a header row of node names.

    The file is what :func:`search.reorder.rank_order.load_cost_matrix` (and ``codesign
    reorder``) reads; values are written with ``repr`` so they round-trip exactly.

    Parameters
    ----------
    path : str or Path
        Output file (parent directories must exist).
    matrix : array_like
        ``n x n`` finite non-negative costs in seconds, ``n >= 2``.
    names : sequence of str
        ``n`` distinct node names; each must contain a non-digit character or all
        be plain integers, so the loader recognises the header.

    Returns
    -------
    Path
        The path written.
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise invalid("cost matrix shape", m.shape, "a square n x n matrix with n >= 2")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise invalid("cost matrix", "a non-finite or negative cell",
                      "finite non-negative seconds")
    names = [str(s) for s in names]
    if len(names) != m.shape[0] or len(set(names)) != len(names):
        raise invalid("cost matrix names", ",".join(names), f"{m.shape[0]} distinct names")
    for s in names:
        if not s or s != s.strip() or any(c in s for c in ",\"\r\n"):
            raise invalid("cost matrix name", s, "a non-empty name without commas, quotes, "
                          "newlines or surrounding spaces")
    if not is_header(names):  # the loader would read the names as data
        raise invalid("cost matrix names", ",".join(names),
                      "names with a non-numeric one among them, or all plain integers")
    p = Path(path)
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows([repr(float(v)) for v in row] for row in m)
    return p
