"""Timing the communication of a training iteration on a system (GPUs mapped to nodes).

The iteration model hands this module two kinds of communication steps:

* a **concurrent set of ring collectives** (allreduce, reducescatter, allgather): the
  same operation on several disjoint groups of GPU ranks at once (e.g. one DP
  all-reduce per tensor-parallel index);
* an **MP phase**: point-to-point model-parallel transfers and all-to-all collectives
  that run together between two compute steps.

Mapping GPUs to the topology (:class:`System`): when the topology's NPUs are servers,
GPU rank ``r`` lives on node ``r // g`` (``g`` GPUs per server, joined by the
intra-server fabric of the hardware catalog, ``fabric_bandwidth_Bps`` per GPU per
direction, non-blocking like NVSwitch, no latency); when they are GPUs, rank ``r`` is
node ``r`` and everything travels on the topology.

Ring collectives
----------------
* All members in one server: the ring's closed form on the fabric (Patarasuk & Yuan
  2009): allreduce ``2 (g-1)/g S / B_f``, reducescatter / allgather ``(g-1)/g S / B_f``.
* Members on several servers, ``c`` of them per server: NCCL-like hierarchical
  decomposition -- intra-server reduce-scatter (``c`` GPUs), an inter-server collective
  on the servers, intra-server all-gather (allreduce: both; reducescatter: the first;
  allgather: the second).  The ``c`` GPUs of a server each run the inter-server
  collective on ``S / c`` bytes at the same time over the same server links, which is
  one server-level collective of ``S`` bytes; ``k`` groups of the set on the same
  servers (e.g. the DP groups of ``k`` TP ranks) make it ``k S`` bytes.
* The inter-server collective is the schedule of ``evaluators.synthesize(topology,
  Collective(kind, servers, bytes), method=collective_method)`` re-timed under the
  network model: ``analytical`` and ``congestion`` replay it with
  :func:`evaluators.netsim.replay_time`; ``flow`` replays it *level-synchronously*:
  transfers are grouped by dependency depth (a transfer's level is one more than the
  deepest transfer it waits for) and each level is one :func:`~.phase.flow_phase`
  (identical levels, as the steps of a ring, are simulated once).  Levels end at a
  barrier, so this is never faster than the dependency-driven replay; it is exact for
  the ring on symmetric networks and much faster.
* A ring (``ring``, ``multiring``'s rings taking their steps together, or ``best``
  where ring is its only candidate: groups above ~150 nodes) is not materialised under
  ``flow``: its steps are alike up to which link of a bundle of parallel links they
  take, so the distinct ones are routed and timed and the rest counted
  (:meth:`CommTimer._ring_steps_cost`; equal to the schedule's replay).  A 2,048-server
  data-parallel group's all-reduce is 8.4 million transfers as a schedule.
* Rings follow the fabric on Clos networks: ``ring`` and ``bidir-ring`` get the order
  of :func:`topologies.routing.ring_order` (scale-up domains together, then rails,
  members in tree order, as NCCL builds its rings from the topology it detects) instead
  of the rank order, which differs on fabrics that do not number NPUs in tree order
  (e.g. ``railopt``'s snake inside a server).
* Groups of a set on different servers run at the same time; the set takes as long
  as its slowest server group, and at least its busiest link's bytes over that link's
  bandwidth where the groups' paths share links (flow and congestion models,
  :meth:`CommTimer._share_links`; a bandwidth bound, not a simulated interleaving).

MP phases
---------
Messages between GPUs of one server use the fabric (each GPU sends and receives at
``B_f``: time = max over GPUs of max(bytes out, bytes in) / B_f).  Messages between
nodes are merged per node pair (one flow per server pair, as a server's NIC carries
them) and simulated together with the network model (``flow``: :func:`~.phase.flow_phase`;
``analytical`` / ``congestion``: :func:`evaluators.netsim.simulate`).  The phase takes
the longer of the two.  An all-to-all of ``S`` bytes on ``n`` members sends ``S / n``
from every member to every other.

``collective_method="best"``
---------------------------
The collective algorithm is a design axis too: with ``best`` every registered
synthesizer that supports the collective's kind is tried on the fabric
(:func:`best_candidates`: ring, bidir-ring, multiring, rhd, dbt, direct, hierarchical
and Themis on multi-dimensional fabrics, TACOS where it can unwind the switches, MCF),
each schedule is checked by :func:`evaluators.validate.validate_schedule` and re-timed
under the network model, and the fastest valid one is kept.  A synthesizer whose
estimated cost (transfers it will produce x a per-transfer cost measured on this
machine; the MCF LP's variables) exceeds :data:`BEST_TIME_LIMIT_S` is skipped, and
the reason recorded.  The choice is made once per (fabric, kind, participant group,
size class) -- size classes are factors of 16 of the buffer size, the candidates timed at
the class's geometric middle (:func:`best_size_class`) so that a decision does not depend
on which size asked first -- and the winner's schedule is re-timed for every size of its
class, as for the size-independent baselines.  Groups that a permutation of twin NPUs
(hosts under one leaf: :func:`topologies.symmetry.twin_key`) maps onto each other member
by member share the decision: the tournament runs for the first of them, every other
one synthesizes and times only the winner (its own schedule and paths, so its link
footprint is its own) -- a 32,768-GPU job's 4,096 two-server context-parallel groups
under two leaves are two tournaments.  Beyond twins, a group that a verified
automorphism of the fabric maps onto a decided group member by member
(:func:`topologies.symmetry.group_map`: the data-parallel groups of every rail and
pipeline stage of a rail-optimised fabric, the groups under another leaf or pod) takes
that group's winning schedule relabelled by the map (:meth:`Schedule.relabelled`),
validated and timed on its own links, with no synthesis; the look-up is tried when the
tournament is estimated to cost more than it (:func:`tournament_estimate_s` against
:data:`MAP_S_PER_ELEMENT` per node and link), against at most
:data:`MAX_GROUP_CLASSES` decided groups of the same kind, size and class.
:meth:`CommTimer.decisions` lists the decisions
an evaluation used (the winner per collective, every candidate's time and the gain over
ring); the :class:`~evaluators.iteration.IterationResult` carries them as ``collectives``.

Every result is cached by its content: the same collective repeats hundreds of times;
schedules of the size-independent baselines (:data:`SIZE_FREE`) are synthesized once per
(kind, nodes) and re-timed for each size (their start/end times are then stale: only
the re-timing under the network model is used).
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.errors import CodesignError, InvalidSpecError, invalid
from evaluators.iteration.phase import DEFAULT_RTOL, flow_phase
from topologies.routing import (grid_coordinates, grid_ring_order, is_clos, is_grid, pair_paths,
                                ring_order, spray_paths)

__all__ = ["System", "CommCost", "CommTimer", "intra_ring_time", "SIZE_FREE", "ROUTINGS",
           "BEST", "BEST_TIME_LIMIT_S", "BestChoice", "best_candidates", "best_size_class"]

#: Routing of MP phases (:func:`topologies.routing.pair_paths`: ``shortest``, ``ecmp`` =
#: one hashed minimum-hop path per pair, ``dmodk`` = deterministic up/down routing on Clos
#: fabrics; ``spray``: every pair split evenly over its endpoint's planes,
#: :func:`topologies.routing.spray_paths`, for collectives too).
ROUTINGS = ("shortest", "ecmp", "dmodk", "spray")

#: Algorithms whose transfers and paths do not depend on the buffer size: their schedule
#: is synthesized once per (kind, nodes) and re-timed for every size.
SIZE_FREE = frozenset({"ring", "bidir-ring", "direct", "rhd", "dbt", "hierarchical",
                       "multiring"})


#: ``collective_method`` that picks the fastest valid synthesizer per collective.
BEST = "best"
#: ``collective_method`` resolved per fabric (:func:`evaluators.iteration.model.resolve_auto`).
AUTO = "auto"


def collective_methods() -> tuple[str, ...]:
    """Every value of ``collective_method``: ``best``, ``auto`` and each registered
    synthesizer (:func:`evaluators.registry.algorithm_names`)."""
    from evaluators.registry import algorithm_names

    return (BEST, AUTO, *algorithm_names())


#: A synthesizer whose estimated synthesis + validation + timing cost exceeds this many
#: seconds is skipped by ``best`` (the reason is recorded).
BEST_TIME_LIMIT_S = 0.5
#: Seconds per produced transfer (synthesis, validation and flow re-timing together),
#: measured on 128-server fabrics (allreduce of 64 MB; 2 cores, 2026):
#: ring-like 0.7-1.2e-5, direct 6e-5 (all-pairs shortest paths), Themis 1.5e-5.
_SECONDS_PER_TRANSFER = {"direct": 6e-5}
_DEFAULT_SECONDS_PER_TRANSFER = 1.2e-5
#: TACOS unwinds every switch into point-to-point links before synthesis, whatever the
#: group: about 1e-6 s per (switch ports)^2 (measured: 0.065 s for a 256-port switch,
#: 1.0 s for 1024 ports, any group size).
_UNWIND_S_PER_PORT2 = 1e-6
#: Seconds per node and link of the fabric that looking for an automorphism between two
#: groups costs, rounded up (:func:`topologies.symmetry.group_map`, 2 cores, 2026:
#: railopt:512,gpus=8, 37,696 nodes and links, 0.04 s for a 32-GPU data-parallel group,
#: 0.07-0.13 s for an 8-GPU server; railopt:2048,gpus=8, 150,784, 0.30 s and 0.5-0.8 s).
MAP_S_PER_ELEMENT = 5e-6
#: Groups per (kind, size, size class) whose ``best`` tournament ran that a new group is
#: checked against for an automorphism before running its own (each check is a colour
#: refinement of the topology: bounded, so that a fabric without symmetry pays little).
MAX_GROUP_CLASSES = 4

#: Width of a ``best`` size class in octaves: one decision serves buffers within a
#: factor 2**4 = 16 (bandwidth-bound collectives rank the synthesizers the same way
#: across such a range; the winner is re-timed at every exact size).
BEST_SIZE_CLASS_OCTAVES = 4
#: MCF: LP variables (participants x links) above which it is skipped (16 NPUs x 64
#: links took 16 s on a 4x4 torus; 16 x 96 on a k=4 fat-tree 3 s).
_MCF_MAX_VARIABLES = 256
#: MCF: members further apart than this many hops are not tried either.  Its
#: discretization follows every chunk along its path, so its time grows about with the
#: cube of the path: a reduce-scatter of two servers of a one-permutation ring (perms
#: p=1) whose return path is 31 hops took 0.07 s, 63 hops 0.6 s, 127 hops 5.4 s -- per
#: pair, and a what-if's strategy search meets dozens of pairs.
_MCF_MAX_HOPS = 32


@dataclass(frozen=True)
class BestChoice:
    """One ``best`` decision: the fastest valid synthesizer for a collective class.

    Attributes
    ----------
    kind : str
        Collective kind.
    nodes : int
        Participants (topology nodes).
    size_class : int
        ``floor(log2(bytes) / BEST_SIZE_CLASS_OCTAVES)`` of the buffers it serves.
    size_bytes : float
        The buffer size at which the candidates were timed (the class's representative,
        :func:`best_size_class`).
    algorithm : str
        The winner.
    time_s : float
        Its time at ``size_bytes``, seconds.
    ring_time_s : float
        The ring schedule's time at ``size_bytes`` (``nan`` if ring does not apply).
    times_s : dict
        Every valid candidate's time, seconds.
    skipped : dict
        Candidate -> why it was not used (inapplicable, over its cost estimate,
        invalid schedule).
    """

    kind: str
    nodes: int
    size_class: int
    size_bytes: float
    algorithm: str
    time_s: float
    ring_time_s: float
    times_s: dict[str, float]
    skipped: dict[str, str]

    @property
    def gain_over_ring(self) -> float:
        """``ring_time_s / time_s`` (1 when ring wins; ``nan`` without ring)."""
        return self.ring_time_s / self.time_s if self.time_s > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "nodes": self.nodes, "size_class": self.size_class,
                "size_bytes": self.size_bytes, "algorithm": self.algorithm,
                "time_s": self.time_s, "ring_time_s": self.ring_time_s,
                "gain_over_ring": self.gain_over_ring, "times_s": dict(self.times_s),
                "skipped": dict(self.skipped)}


def best_size_class(size: float) -> tuple[int, float]:
    """``(class, representative bytes)`` of a ``best`` decision for a ``size``-byte buffer.

    Classes are :data:`BEST_SIZE_CLASS_OCTAVES` octaves wide; the representative is the
    class's geometric middle, ``2 ** (OCTAVES * (class + 1/2))``.  A non-positive size
    is class 0 at its own size.

    >>> best_size_class(2 ** 26)     # 64 MiB: class 6 = [16 MiB, 256 MiB), middle 64 MiB
    (6, 67108864.0)
    >>> best_size_class(3e5)[0], best_size_class(3e5)[1] == 2 ** 18
    (4, True)
    """
    if not size > 0:
        return 0, float(size)
    c = int(math.floor(math.log2(size) / BEST_SIZE_CLASS_OCTAVES))
    return c, float(2.0 ** (BEST_SIZE_CLASS_OCTAVES * (c + 0.5)))


def _estimated_transfers(name: str, kind: str, n: int) -> float:
    steps = {"allreduce": 2, "reducescatter": 1, "allgather": 1}.get(kind, 1)
    base = steps * n * (n - 1)
    if name in ("bidir-ring", "multiring", "dbt"):
        return 2 * base
    if name == "themis":
        return 64 * base  # 64 chunks per collective (its default)
    return base


def _estimated_seconds(name: str, kind: str, nodes: int) -> float:
    """Estimated seconds of one synthesizer's candidate (synthesis, validation, re-timing)
    from the transfers it produces and its measured cost per transfer."""
    return _estimated_transfers(name, kind, nodes) * _SECONDS_PER_TRANSFER.get(
        name, _DEFAULT_SECONDS_PER_TRANSFER)


def tournament_estimate_s(names: list[str], kind: str, nodes: int) -> float:
    """Estimated seconds of a ``best`` tournament over the synthesizers ``names`` on a
    group of ``nodes`` (the per-transfer costs of :func:`best_candidates`; MCF, whose
    solve time has no size estimate, at :data:`BEST_TIME_LIMIT_S`)."""
    return sum(BEST_TIME_LIMIT_S if name == "mcf" else _estimated_seconds(name, kind, nodes)
               for name in names)


def best_candidates(topology, kind: str, nodes: int, *,
                    time_limit_s: float = BEST_TIME_LIMIT_S,
                    members: tuple[int, ...] | None = None
                    ) -> tuple[list[str], dict[str, str]]:
    """Synthesizers ``best`` tries for a ``kind`` collective on ``nodes`` nodes.

    ``members`` (the nodes themselves, optional) also bounds MCF by how far apart they
    are (:data:`_MCF_MAX_HOPS`).

    Returns
    -------
    (names, skipped)
        Registered algorithms supporting ``kind`` whose estimated cost is within
        ``time_limit_s``, and the others with the reason (those whose schedule turns out
        inapplicable on the fabric are recorded when they refuse).
    """
    from evaluators.registry import ALGORITHMS, algorithm_names

    names, skipped = [], {}
    # ring first: it keeps ties (a gain over ring must be strict).
    for name in sorted(algorithm_names(), key=lambda a: (a != "ring", a)):
        alg = ALGORITHMS[name]
        if kind not in alg.kinds:
            continue
        if name in ("hierarchical", "themis") and not topology.dims:
            skipped[name] = "inapplicable: needs a multi-dimensional fabric"
            continue
        if name == "mcf":
            if topology.switches:
                # The switch models (thesis 3.13/3.14) refine the LP until it is
                # realisable: no size bound on their cost (170 s on an 8-server leaf-spine).
                skipped[name] = "size estimate: switched fabric (iterative switch model)"
                continue
            variables = nodes * topology.n_links
            if variables > _MCF_MAX_VARIABLES:
                skipped[name] = (f"size estimate: {variables} LP variables per step > "
                                 f"{_MCF_MAX_VARIABLES}")
                continue
            hops = _longest_hops(topology, members) if members is not None else 0
            if hops > _MCF_MAX_HOPS:
                skipped[name] = f"size estimate: members {hops} hops apart > {_MCF_MAX_HOPS}"
                continue
        else:
            est = _estimated_seconds(name, kind, nodes)
            if name == "tacos" and topology.switches:
                ports = np.bincount(topology.src, minlength=topology.n_nodes)[topology.npus:]
                est += _UNWIND_S_PER_PORT2 * float(ports.max()) ** 2
            if name != "ring" and est > time_limit_s:
                skipped[name] = f"time estimate: {est:.1f} s > {time_limit_s:g} s"
                continue
        names.append(name)
    return names, skipped


def _longest_hops(topology, nodes: tuple[int, ...]) -> int:
    """The most hops between two of ``nodes`` (shortest paths)."""
    from topologies.routing import hop_counts

    a = np.asarray(nodes, dtype=np.int64)
    src, dst = np.repeat(a, a.size), np.tile(a, a.size)
    off = src != dst
    return int(hop_counts(topology, src[off], dst[off]).max()) if off.any() else 0


#: Collective kinds whose ring schedule is timed from its distinct steps under the flow
#: model (:meth:`CommTimer._ring_steps_cost`).
_RING_STEP_KINDS = ("allreduce", "reducescatter", "allgather")

#: Synthesizers with an ``order`` option that follow the fabric's ring order on Clos.
_RING_ORDERED = ("ring", "bidir-ring")


def _ring_options(topology, method: str, nodes: tuple[int, ...]) -> dict[str, Any]:
    """``order=`` for the ring synthesizers on a Clos fabric or a multi-dimensional grid
    (module docstring), else none."""
    if method not in _RING_ORDERED:
        return {}
    if is_clos(topology):
        order = ring_order(topology, nodes)
    elif topology.switches == 0 and grid_coordinates(topology)[0] is not None:
        order = grid_ring_order(topology, nodes)
    else:
        return {}
    return {} if order == list(nodes) else {"order": order}


#: Per topology (weakly held), the caches of every CommTimer configuration.
_SHARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: Cached entries per topology before its caches are dropped (bounds memory).
_MAX_CACHED = 20_000
#: Bytes of schedules and step costs held by the caches of all topologies together, and
#: the share of the memory limit (codesign.resources) they may take before every cache
#: is dropped: a what-if keeps dozens of topologies alive, and an entry count alone let a
#: 32k-GPU what-if grow past 19 GB (costs then held their per-link bytes densely, 100 kB
#: each on a 4,096-server fabric; they are sparse now, :class:`CommCost`).
_SCHEDULE_BYTES = [0]
_SCHEDULE_SHARE = 0.25


def _schedule_bytes(sched: Any) -> int:
    """Bytes of a schedule's arrays (transfers, paths, times)."""
    return sum(int(getattr(getattr(sched, name, None), "nbytes", 0))
               for name in ("chunk", "src", "dst", "path_ptr", "path_links", "start", "end",
                            "op"))


def _hold(entry: Any) -> None:
    """Count a schedule or a :class:`CommCost` a cache is about to keep; past the budget,
    drop every cache (of all topologies) first, so the caches never hold more than their
    share of memory."""
    from codesign.resources import memory_limit

    if isinstance(entry, CommCost):
        nbytes = entry.nbytes()
    else:
        nbytes = _schedule_bytes(entry)
    if _SCHEDULE_BYTES[0] + nbytes > _SCHEDULE_SHARE * memory_limit():
        for per_topo in list(_SHARED.values()):
            per_topo.clear()
        _SCHEDULE_BYTES[0] = 0
    _SCHEDULE_BYTES[0] += nbytes


def intra_phases_time(kind: str, c: int, size: float, bandwidth_Bps: float) -> float:
    """The intra-node parts of a hierarchical collective with ``c`` members per node:
    a reduce-scatter before the inter-node phase (allreduce, reducescatter) and an
    all-gather after it (allreduce, allgather), ring closed forms, seconds."""
    pre = intra_ring_time("reducescatter", c, size, bandwidth_Bps) \
        if kind in ("allreduce", "reducescatter") else 0.0
    post = intra_ring_time("allgather", c, size, bandwidth_Bps) \
        if kind in ("allreduce", "allgather") else 0.0
    return pre + post


def intra_ring_time(kind: str, g: int, size: float, bandwidth_Bps: float) -> float:
    """Ring closed form on ``g`` GPUs of one server's fabric, seconds (no latency)."""
    if g <= 1 or size <= 0:
        return 0.0
    factor = {"allreduce": 2.0, "reducescatter": 1.0, "allgather": 1.0, "alltoall": 1.0}[kind]
    return factor * (g - 1) / g * size / bandwidth_Bps


@dataclass(frozen=True)
class System:
    """Where GPU ranks live: ``node[r]`` on the topology, ``g`` GPUs per node.

    ``server_level`` is True when topology NPUs are servers (intra-server traffic on
    the fabric of ``fabric_Bps`` per GPU per direction).
    """

    topology: Any
    gpus: int
    g: int
    server_level: bool
    fabric_Bps: float

    def node(self, ranks: np.ndarray) -> np.ndarray:
        r = np.asarray(ranks, dtype=np.int64)
        return r // self.g if self.server_level else r


class CommCost:
    """Time and network footprint of one communication step (one occurrence).

    ``link_bytes`` per topology link (given dense, kept sparse: the links that carry
    bytes, :attr:`links` and :attr:`load` -- a step touches a few of a 16,384-GPU
    fabric's 131,072 links, and an evaluation caches thousands of steps); ``net_bytes``
    logical bytes between nodes; ``carried_bytes`` the same counting every host-based
    forwarding again (bytes x (1 + intermediate NPUs)); ``pairs`` the node pairs that
    carry traffic; ``decisions`` the ``best`` decisions the step uses, as keys of the
    timer's decision cache.
    """

    __slots__ = ("time_s", "n_links", "links", "load", "net_bytes", "carried_bytes", "pairs",
                 "decisions")

    def __init__(self, time_s: float, link_bytes: np.ndarray, net_bytes: float = 0.0,
                 carried_bytes: float = 0.0, pairs: frozenset = frozenset(),
                 decisions: frozenset = frozenset()) -> None:
        self.time_s = time_s
        self.link_bytes = link_bytes
        self.net_bytes = net_bytes
        self.carried_bytes = carried_bytes
        self.pairs = pairs
        self.decisions = decisions

    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes per topology link (dense, built on each call)."""
        dense = np.zeros(self.n_links)
        dense[self.links] = self.load
        return dense

    @link_bytes.setter
    def link_bytes(self, dense: np.ndarray) -> None:
        dense = np.asarray(dense, dtype=float)
        self.n_links = dense.size
        self.links = np.flatnonzero(dense)
        self.load = dense[self.links]

    def add_link_bytes(self, into: np.ndarray, times: float = 1.0) -> None:
        """``into[link] += bytes x times`` for every link this step loads."""
        into[self.links] += self.load * times

    def nbytes(self) -> int:
        """Bytes this cost holds (its arrays and, at ~100 B each, its node pairs)."""
        return int(self.links.nbytes + self.load.nbytes) + 100 * len(self.pairs)

    def add_footprint(self, other: "CommCost") -> None:
        """Add ``other``'s network footprint (bytes, pairs) and the ``best`` decisions it
        uses to this step's; the time is the caller's (steps that run side by side take
        the longest)."""
        if other.links.size:
            # A link's bytes add in the same order as the dense sum (this step's, then
            # the other's), so the totals are bit for bit those of dense vectors.
            both = np.concatenate([self.links, other.links])
            self.links, at = np.unique(both, return_inverse=True)
            self.load = np.bincount(at, weights=np.concatenate([self.load, other.load]),
                                    minlength=self.links.size)
        self.net_bytes += other.net_bytes
        self.carried_bytes += other.carried_bytes
        self.pairs = self.pairs | other.pairs
        self.decisions = self.decisions | other.decisions


def _forwards(topology, ptr: np.ndarray, links: np.ndarray) -> np.ndarray:
    """Intermediate NPUs on every path (CSR)."""
    n = ptr.size - 1
    if links.size == 0:
        return np.zeros(n, dtype=np.int64)
    hop_msg = np.repeat(np.arange(n), np.diff(ptr))
    last = np.zeros(links.size, dtype=bool)
    last[ptr[1:][np.diff(ptr) > 0] - 1] = True
    mid = (topology.dst[links] < topology.npus) & ~last
    return np.bincount(hop_msg, weights=mid.astype(float), minlength=n).astype(np.int64)


class CommTimer:
    """Cached timing of collectives and MP phases on a :class:`System` (module docstring).

    Parameters
    ----------
    system : System
    collective_method : str
        Registered algorithm for inter-node ring collectives, or ``"best"`` (module
        docstring).
    network_model : str
        ``flow``, ``congestion`` or ``analytical``.
    rtol : float
        Event-batching tolerance of the flow phases (:func:`~.phase.flow_phase`).
    routing : str
        Paths of MP phases: ``shortest`` (:meth:`Topology.route`), ``ecmp`` (one hashed
        minimum-hop path per server pair), ``dmodk`` (Clos fabrics: deterministic
        up/down D-mod-k routing, :func:`topologies.routing.clos_paths`) or ``spray``
        (Clos fabrics whose endpoints have a port on each of several planes: every pair
        split evenly over the planes, D-mod-k inside each,
        :func:`topologies.routing.spray_paths`, as multi-plane NICs spray packets).
        Collective schedules are timed on their own paths, except under ``spray`` with
        the ``flow`` model, where every transfer is split over the planes the same way;
        under ``ecmp`` and ``dmodk`` the bytes they put on each link (utilisation and the
        shared-link bounds) follow that routing.
    """

    def __init__(self, system: System, collective_method: str, network_model: str,
                 rtol: float = DEFAULT_RTOL, routing: str = "shortest") -> None:
        from evaluators.netsim.simulator import get_model
        from evaluators.registry import ALGORITHMS, algorithm_names

        names = algorithm_names()
        if collective_method not in ALGORITHMS and collective_method != BEST:
            raise invalid("collective_method", collective_method,
                          f"one of {', '.join([BEST, *names])}")
        #: Whether the network model shares links (flow, congestion): then steps that
        #: run side by side cannot move more bytes over a link than it carries.
        self.shares_links = get_model(network_model).link_model != "none"
        if routing not in ROUTINGS:
            raise invalid("routing", routing, " or ".join(ROUTINGS))
        if routing == "spray":
            if not is_clos(system.topology):
                raise invalid("routing", routing, f"shortest or ecmp on "
                              f"{system.topology.name!r} (spray needs a Clos fabric)")
        self.routing = routing
        # Collectives sprayed over the planes (flow model): the schedule's own one-plane
        # paths do not bound its time, so best's load pruning is off.
        self._spray = routing == "spray" and network_model == "flow"
        self.system = system
        self.topology = system.topology
        self.method = collective_method
        self.model = network_model
        self.rtol = rtol
        # Caches live with the (immutable) topology, so that repeated evaluations on one
        # topology (search loops) reuse them; keyed by everything a result depends on.
        per_topo = _SHARED.setdefault(self.topology, {})
        if sum(len(d) for c in per_topo.values() for d in c.values()) > _MAX_CACHED:
            per_topo.clear()   # (its schedules' bytes stay counted until the next drop)
        caches = per_topo.setdefault(
            (collective_method, network_model, float(rtol), routing, system.g,
             system.server_level, system.fabric_Bps),
            {"inter": {}, "sets": {}, "phases": {}, "levels": {}, "structure": {}, "best": {},
             "twins": {}, "classes": {}})
        self._inter: dict[tuple, CommCost] = caches["inter"]
        self._sets: dict[tuple, CommCost] = caches["sets"]
        self._phases: dict[tuple, CommCost] = caches["phases"]
        self._levels: dict[tuple, float] = caches["levels"]
        self._structure: dict[tuple, Any] = caches["structure"]
        self._best: dict[tuple, tuple[BestChoice, Any]] = caches["best"]
        #: (kind, twin key, size class) -> the tournament's decision (module docstring).
        self._twins: dict[tuple, BestChoice] = caches["twins"]
        #: (kind, members, size class) -> groups whose tournament ran, in order: each new
        #: group is checked against them for an automorphism (module docstring).
        self._classes: dict[tuple, list[tuple[int, ...]]] = caches["classes"]
        #: Keys of the ``best`` decisions the collectives timed by this timer use (an
        #: evaluation's own, whatever the shared caches already held).
        self.used: set[tuple] = set()

    # ------------------------------------------------------------------ collectives
    def collective_set(self, kind: str, groups: list[tuple[int, ...]], size: float) -> CommCost:
        """A ring collective of ``size`` bytes on every group at once (one occurrence)."""
        # (a GroupSet of the demand keeps its hash: the same set is looked up per layer)
        key = (kind, groups if isinstance(groups, tuple) else tuple(groups), float(size))
        hit = self._sets.get(key)
        if hit is None:
            hit = self._sets[key] = self._collective_set(kind, groups, float(size))
            _hold(hit)
        self.used |= hit.decisions
        return hit

    def _collective_set(self, kind: str, groups: list[tuple[int, ...]], size: float) -> CommCost:
        sysm = self.system
        n_links = self.topology.n_links
        by_nodes: dict[tuple[int, ...], list[int]] = {}
        intra = 0.0
        domain = self._scaleup_domain()
        if domain:
            rails = [g for g in groups if self._rail_split(g, domain) is not None]
            if rails:
                flat = [g for g in groups if g not in rails]
                total = self._rail_set(kind, rails, size, domain)
                if flat:
                    rest = self._collective_set(kind, flat, size)
                    total.time_s = max(total.time_s, rest.time_s)
                    total.add_footprint(rest)
                return total
        for grp in groups:
            if len(grp) < 2 or size <= 0:
                continue
            nodes = sysm.node(np.array(grp)).tolist()
            per_server = Counter(nodes)   # (insertion order: the servers in group order)
            servers = tuple(per_server)
            c = max(per_server.values())
            if len(servers) == 1:
                intra = max(intra, intra_ring_time(kind, len(grp), size, sysm.fabric_Bps))
                continue
            entry = by_nodes.setdefault(servers, [0, 0])
            entry[0] += 1
            entry[1] = max(entry[1], c)
        total = CommCost(intra, np.zeros(n_links))
        intra_least = math.inf   # the least in-server phases of a group that leaves its server
        for servers, (k, c) in by_nodes.items():
            inter = self.inter_collective(kind, servers, k * size)
            phases = intra_phases_time(kind, c, size, sysm.fabric_Bps)
            total.time_s = max(total.time_s, inter.time_s + phases)
            intra_least = min(intra_least, phases)
            total.add_footprint(inter)
        if len(by_nodes) > 1:
            self._share_links(total, intra_least)
        return total

    def _share_links(self, total: CommCost, intra_s: float) -> None:
        """Concurrent collectives timed one by one (groups of a set on different
        servers, the rails of a group) share the links their paths have in common: their
        network part takes at least the busiest link's bytes over that link's bandwidth,
        and the set that plus ``intra_s``, the least of its groups' phases inside a
        server or scale-up domain (flow and congestion models; the analytical one has no
        link sharing).  Each collective alone already takes at least its own busiest
        link's time, so this binds only where their paths meet, e.g. the spine links of
        an oversubscribed Clos that several data-parallel groups cross at once."""
        if self.shares_links and total.links.size:
            bw = self.topology.bandwidth[total.links]
            total.time_s = max(total.time_s, float(np.max(total.load / bw)) + intra_s)

    # -------------------------------------------------------- scale-up domains, rails
    def _scaleup_domain(self) -> int:
        """GPUs per scale-up domain of a GPU-level topology (0: none or server level).

        Families with scale-up domains (``scaleup=G`` on the Clos families, ``nvl``,
        ``dgx-a100``, ``hgx-h100``) put each block of ``G`` consecutive GPUs on its own
        NVLink crossbar (``params["scaleup_size"]``)."""
        if self.system.server_level:
            return 0
        size = int(self.topology.params.get("scaleup_size", 0) or 0)
        return size if size >= 2 else 0

    @staticmethod
    def _rail_split(group: tuple[int, ...], domain: int) -> list[tuple[int, ...]] | None:
        """The rail groups of ``group`` (its ``j``-th member in every domain), when it
        spans several domains with the same ``c >= 2`` members in each; else None."""
        by_domain: dict[int, list[int]] = {}
        for r in group:
            by_domain.setdefault(int(r) // domain, []).append(int(r))
        counts = {len(v) for v in by_domain.values()}
        if len(by_domain) < 2 or len(counts) != 1 or counts.pop() < 2:
            return None
        members = list(by_domain.values())
        return [tuple(m[j] for m in members) for j in range(len(members[0]))]

    def _rail_set(self, kind: str, groups: list[tuple[int, ...]], size: float,
                  domain: int) -> CommCost:
        """Hierarchical collectives over scale-up domains and rails, as NCCL runs them on
        rail-optimised fabrics: a reduce-scatter inside each domain (NVLink), then ``c``
        concurrent collectives of ``size / c`` bytes, one per rail (the ``j``-th GPU of
        every domain: same-rank GPUs, one leaf hop apart), then an all-gather inside the
        domain (allreduce: all three; reducescatter: the first two; allgather: the last
        two).  Groups of the set run at the same time; the set takes its slowest group,
        and at least its busiest link's time where rails share links (:meth:`_share_links`).
        """
        bw = float(self.topology.params.get("scaleup_bandwidth_Bps", 0.0)) \
            or self.system.fabric_Bps
        total = CommCost(0.0, np.zeros(self.topology.n_links))
        intra_least = math.inf
        for grp in groups:
            rails = self._rail_split(grp, domain)
            c = len(rails)
            inter_s = 0.0
            for nodes in rails:
                inter = self.inter_collective(kind, nodes, size / c)
                inter_s = max(inter_s, inter.time_s)
                total.add_footprint(inter)
            phases = intra_phases_time(kind, c, size, bw)
            total.time_s = max(total.time_s, inter_s + phases)
            intra_least = min(intra_least, phases)
        self._share_links(total, intra_least)
        return total

    def inter_collective(self, kind: str, nodes: tuple[int, ...], size: float) -> CommCost:
        """A collective on topology nodes, synthesized and re-timed (cached)."""
        key = (kind, nodes, size)
        hit = self._inter.get(key)
        if hit is not None:
            self.used |= hit.decisions
            return hit
        if self._ring_by_steps(kind, len(nodes)):
            cost = self._ring_steps_cost(kind, nodes, size)
            if self.method == BEST:
                cost.decisions = frozenset([self._ring_decision(kind, nodes, size)])
            self._inter[key] = cost
            _hold(cost)
            self.used |= cost.decisions
            return cost
        from evaluators.collectives import Collective
        from evaluators.registry import synthesize

        from evaluators.schedule import Schedule

        topo = self.topology
        coll = Collective(kind, nodes, size)
        decisions: frozenset = frozenset()
        if self.method == BEST:
            decision, base = self._best_schedule(kind, nodes, size)
            decisions = frozenset([decision])
        else:
            base = self._structure.get((kind, nodes)) if self.method in SIZE_FREE else None
        method = self.method
        if method == "hierarchical" and len(nodes) != topo.npus and is_grid(topo):
            # Dimension-wise rings need the whole grid; a group of some of its nodes
            # (e.g. one pipeline stage's data-parallel replicas) runs one ring in the
            # grid's sweep order (single-link hops, _ring_options).
            method = "ring"
        if base is None:
            try:
                sched = synthesize(topo, coll, method=method,
                                   **_ring_options(topo, method, nodes))
            except InvalidSpecError as exc:
                raise InvalidSpecError(f"collective_method {self.method!r} cannot time a {kind} "
                                       f"on {len(nodes)} nodes of {topo.name!r}: {exc}") from None
            _hold(sched)
            self._structure[(kind, nodes)] = sched
        else:   # same transfers and paths, another buffer size: keep the base's chunking
            # (multiring splits every shard over its rings: chunks_per_npu = rings).
            coll = Collective(kind, nodes, size, chunks_per_npu=base.collective.chunks_per_npu,
                              root=base.collective.root)
            sched = Schedule(coll, base.chunk, base.src, base.dst, base.path_ptr,
                             base.path_links, base.start, base.end, base.op, base.metadata)
        cost = self._footprint(sched, sched.chunk_bytes, self._time(sched))
        cost.decisions = decisions
        self._inter[key] = cost
        _hold(cost)
        self.used |= decisions
        return cost

    # ------------------------------------------------- ring timed step by step
    def _ring_by_steps(self, kind: str, n: int) -> bool:
        """Whether a ring collective is timed from its steps instead of its schedule: under
        the flow model, for ``ring`` and ``multiring`` (its rings take their steps
        together), and for ``best`` when ring is its only candidate (every other
        synthesizer's estimated cost is over the limit: groups above ~150 nodes,
        :func:`best_candidates`)."""
        if self.model != "flow" or kind not in _RING_STEP_KINDS:
            return False
        if self.method in ("ring", "multiring"):
            return True
        return self.method == BEST and best_candidates(self.topology, kind, n)[0] == ["ring"]

    def _ring_steps_cost(self, kind: str, nodes: tuple[int, ...], size: float) -> CommCost:
        """A ring collective's cost from the distinct steps of its schedule.

        The ring schedule (:mod:`evaluators.algorithms.ring`) is ``n - 1`` steps
        (reduce-scatter, all-gather; all-reduce ``2 (n - 1)``), and at every step each
        member sends one shard of ``c`` chunks to its successor; a transfer waits for the
        one of the step before that delivered its chunk, so dependency level ``s`` is
        step ``s``, and the level-synchronous flow replay (module docstring) is the sum of
        the steps' flow phases.  Steps differ only in which link of a bundle of parallel
        links a transfer takes (:class:`~evaluators.algorithms.plan.Plan` deals the
        ``k``-th transfer of a pair to the ``k mod m``-th of ``m`` links), so they repeat
        with a period ``P`` (1 without parallel links): the first ``P`` steps are routed
        as the synthesizer routes them and timed, and step ``s`` counts as step
        ``s mod P``.  Time, link bytes and pairs equal those of the materialised schedule
        (tests/evaluators/test_iteration_ring_steps.py) without its ``2 n (n - 1) c``
        transfers -- 8.4 million for a 2,048-server data-parallel group (~0.5 GB, minutes
        to synthesize, replay and validate).

        ``multiring`` (TopoOpt Sec. 4.3) is ``k`` such rings, ring ``r`` carrying pieces
        ``r c .. (r + 1) c - 1`` of every shard of the collective split into ``k c``
        chunks, merged step by step (:func:`~evaluators.algorithms.plan.concurrent`): a
        step is every ring's sends, and no two rings share a pair (distinct
        generators), so the same period holds.  On a sparse fabric its schedule can be
        far larger than a ring's (neighbours hundreds of links apart).
        """
        from evaluators.algorithms.multiring import chosen_generators, ring_orders
        from evaluators.algorithms.plan import Plan, link_bundles, shard_chunks
        from evaluators.collectives import Collective

        topo = self.topology
        coll = Collective(kind, nodes, size)
        c = coll.chunks_per_npu
        n = len(nodes)
        steps = (2 if kind == "allreduce" else 1) * (n - 1)
        multi = self.method == "multiring"
        key = ("ring-steps", "multiring" if multi else "ring", nodes, c)
        mini = self._structure.get(key)
        if mini is None:
            period = 1
            for m in np.unique(link_bundles(topo)[1]).tolist():
                period = math.lcm(period, m // math.gcd(m, c))
            period = min(period, steps)
            if multi:
                orders = ring_orders(coll.npus, chosen_generators(topo, coll))
            else:
                orders = [_ring_options(topo, "ring", nodes).get("order", list(nodes))]
            split = coll.with_chunks(len(orders) * c)
            blocks = [[shard_chunks(split, split.position(x), range(r * c, (r + 1) * c))
                       for x in members] for r, members in enumerate(orders)]
            plan = Plan(topo, split)
            for s in range(period):   # the chunk ids do not change routing or timing
                for members, ring_blocks in zip(orders, blocks):
                    for i in range(n):
                        plan.send(ring_blocks[(i - s - 1) % n], members[i],
                                  members[(i + 1) % n])
            sched = plan.schedule(algorithm="multiring", rings=orders) if multi else \
                plan.schedule(algorithm="ring", order=orders[0])
            _hold(sched)
            self._structure[key] = mini = (sched, period)
        sched, period = mini
        chunk = coll.with_chunks(sched.collective.chunks_per_npu).chunk_bytes
        per_step = sched.src.size // period
        level = np.repeat(np.arange(period), per_step)
        times = self._level_times(sched, level, chunk)
        time_s = 0.0
        for s in range(steps):    # in step order, as the replay of the whole schedule adds
            time_s += times[s % period]
        # Step s of the P routed ones stands for every step s' = s mod P of the collective.
        reps = np.array([(steps - s + period - 1) // period for s in range(period)])
        return self._footprint(sched, chunk, time_s, np.repeat(reps, per_step))

    def _footprint(self, sched, chunk: float, time_s: float,
                   weight: np.ndarray | None = None) -> CommCost:
        """The :class:`CommCost` of ``sched``'s transfers of ``chunk`` bytes taking
        ``time_s``, transfer ``t`` counted ``weight[t]`` times (default once): bytes per
        link (on the schedule's paths, or split over the planes under ``spray``), net and
        carried bytes (each host forwarding again), node pairs."""
        topo = self.topology
        ptr, links = sched.path_ptr, sched.path_links
        moving = np.diff(ptr) > 0
        w = np.ones(moving.size, dtype=np.int64) if weight is None else weight
        if self._spray:
            sptr, slinks, owner, share = spray_paths(topo, sched.src[moving], sched.dst[moving])
            link_bytes = np.bincount(slinks, weights=np.repeat(w[moving][owner] * share * chunk,
                                                               np.diff(sptr)),
                                     minlength=topo.n_links)
        elif self.routing != "shortest":
            # Timed on the schedule's own paths, but the bytes of transfers between
            # scale-up domains land where the fabric's routing (D-mod-k, hashed ECMP) puts
            # them, as the MP phases' do: the shared-link bounds and utilisations would
            # otherwise stack every concurrent group on the first equal-cost path of the
            # BFS (one spine of a Clos).  Inside a domain the schedule's NVLink path stays
            # (an equal-hop path through a NIC is not one NCCL takes).
            n, domain = topo.npus, self._scaleup_domain()
            src, dst = sched.src.astype(np.int64), sched.dst.astype(np.int64)
            own = ~moving if not domain else ~moving | (src // domain == dst // domain)
            link_bytes = np.bincount(links, weights=np.repeat(np.where(own, w, 0), np.diff(ptr)),
                                     minlength=topo.n_links).astype(np.int64)
            far = ~own
            if far.any():
                uniq, inv = np.unique(src[far] * n + dst[far], return_inverse=True)
                per_pair = np.bincount(inv, weights=w[far]).astype(np.int64)
                pptr, plinks = pair_paths(topo, uniq // n, uniq % n, method=self.routing)
                link_bytes += np.bincount(plinks, weights=np.repeat(per_pair, np.diff(pptr)),
                                          minlength=topo.n_links).astype(np.int64)
            link_bytes = link_bytes * chunk
        else:   # whole transfers per link (exact integers), then bytes
            link_bytes = np.bincount(links, weights=np.repeat(w, np.diff(ptr)),
                                     minlength=topo.n_links).astype(np.int64) * chunk
        fw = _forwards(topo, ptr, links)
        pairs = frozenset(zip(sched.src[moving].tolist(), sched.dst[moving].tolist()))
        return CommCost(float(time_s), link_bytes.astype(float), int(w[moving].sum()) * chunk,
                        float(((1 + fw[moving]) * w[moving]).sum()) * chunk, pairs)

    def _ring_decision(self, kind: str, nodes: tuple[int, ...], size: float) -> tuple:
        """The ``best`` decision of a collective class where ring is the only candidate
        (:meth:`_ring_by_steps`): ring, timed at the class's representative size."""
        size_class, rep = best_size_class(size)
        key = (kind, nodes, size_class)
        if key not in self._best:
            _, skipped = best_candidates(self.topology, kind, len(nodes))
            t = self._ring_steps_cost(kind, nodes, rep).time_s
            self._best[key] = (BestChoice(kind, len(nodes), size_class, float(rep), "ring", t,
                                          t, {"ring": t}, skipped), None)
        return key

    def _time(self, sched) -> float:
        """The schedule's time under the network model, seconds."""
        if self.model == "flow":
            return self._flow_levels(sched)
        from evaluators.netsim import replay_time

        return float(replay_time(sched, self.topology, model=self.model))

    def decisions(self) -> list[BestChoice]:
        """The ``best`` decisions the collectives this timer timed use, sorted by
        collective kind, group and size class."""
        return [self._best[k][0] for k in sorted(self.used, key=repr)]

    def _best_schedule(self, kind: str, nodes: tuple[int, ...], size: float):
        """The fastest valid schedule of the size class (``best``; module docstring):
        ``(decision key, schedule)``.

        The candidates are timed at the class's representative size (its geometric
        middle, :func:`best_size_class`), not at the first size that happens to ask, so
        a decision depends only on the fabric, the collective, the group and the class:
        the same in every process and in any order of evaluation (chains on several
        Ray workers with warm caches agree with one process)."""
        size_class, size = best_size_class(size)
        key = (kind, nodes, size_class)
        hit = self._best.get(key)
        if hit is not None:
            return key, hit[1]
        from evaluators.algorithms.plan import Pruned, busiest_link_s, prune_above
        from evaluators.collectives import Collective
        from evaluators.registry import synthesize
        from evaluators.validate import validate_schedule
        from topologies.symmetry import twin_key

        coll = Collective(kind, nodes, size)
        twins = (kind, twin_key(self.topology, nodes), size_class)
        shared = self._twins.get(twins)
        if shared is not None:
            # A twin group's winner on these members: same time by symmetry, timed anyway.
            try:
                sched = synthesize(self.topology, coll, method=shared.algorithm,
                                   validate=False,
                                   **_ring_options(self.topology, shared.algorithm, nodes))
            except CodesignError:
                sched = None
            if sched is not None and validate_schedule(sched, self.topology).valid:
                t = self._time(sched)
                choice = dataclasses.replace(
                    shared, time_s=t, times_s={**shared.times_s, shared.algorithm: t},
                    ring_time_s=t if shared.algorithm == "ring" else shared.ring_time_s)
                _hold(sched)
                self._best[key] = (choice, sched)
                return key, sched
        names, skipped = best_candidates(self.topology, kind, len(nodes), members=nodes)
        # A group the tournament has decided may map onto this one (an automorphism): worth
        # looking for when the tournament is estimated to cost more than the look-up.
        topo = self.topology
        if tournament_estimate_s(names, kind, len(nodes)) > \
                MAP_S_PER_ELEMENT * (topo.n_nodes + topo.n_links):
            mapped = self._mapped_decision(kind, nodes, size_class, coll)
            if mapped is not None:
                self._best[key] = mapped
                return key, mapped[1]
        times: dict[str, float] = {}
        best = None
        for name in names:
            try:
                # Plan-based synthesizers stop before their replay when their busiest
                # link alone cannot beat the best so far (plan.prune_above).
                with prune_above(best[1] if best is not None and not self._spray
                                 else None):
                    sched = synthesize(self.topology, coll, method=name, validate=False,
                                       **_ring_options(self.topology, name, nodes))  # below
            except Pruned as exc:
                skipped[name] = f"slower: {exc} ({best[0]}'s time)"
                continue
            except CodesignError as exc:   # refuses this fabric or this group (TACOS
                # does not relay through non-participants): not a candidate here
                skipped[name] = f"inapplicable: {str(exc).splitlines()[0][:200]}"
                continue
            got = sched.collective   # a synthesizer may pick its own chunking
            if (got.kind, tuple(got.npus), got.size_bytes) != (kind, tuple(nodes), coll.size_bytes):
                skipped[name] = f"invalid schedule: it is for {got}, not {coll}"
                continue
            report = validate_schedule(sched, self.topology)
            if not report.valid:
                skipped[name] = f"invalid schedule: {'; '.join(report.errors[:1])[:200]}"
                continue
            # A candidate whose busiest link alone needs longer than the best so far
            # cannot win (every network model serves a link's bytes at most at its
            # rate): skip its re-timing.
            if best is not None and not self._spray:
                load = busiest_link_s(sched, self.topology)
                if load >= best[1]:
                    skipped[name] = f"slower: {Pruned(load, best[1])} ({best[0]}'s time)"
                    continue
            t = self._time(sched)
            times[name] = t
            if best is None or t < best[1]:   # ring, then alphabetical, on ties
                best = (name, t, sched)
        if best is None:
            raise InvalidSpecError(f"collective_method 'best' found no valid schedule for a "
                                   f"{kind} on {len(nodes)} nodes of {self.topology.name!r}: "
                                   f"{skipped}")
        choice = BestChoice(kind, len(nodes), size_class, float(size), best[0], best[1],
                            times.get("ring", float("nan")), times, skipped)
        _hold(best[2])
        self._best[key] = (choice, best[2])
        self._twins.setdefault(twins, choice)
        reps = self._classes.setdefault((kind, len(nodes), size_class), [])
        if len(reps) < MAX_GROUP_CLASSES:
            reps.append(tuple(nodes))
        return key, best[2]

    def _mapped_decision(self, kind: str, nodes: tuple[int, ...], size_class: int,
                         coll) -> tuple[BestChoice, Any] | None:
        """The decision of a group whose tournament ran, moved onto ``nodes`` by a verified
        automorphism that maps its members onto these in rank order
        (:func:`topologies.symmetry.group_map`): its winning schedule relabelled, validated
        and timed here.  None when no such group is known."""
        from evaluators.validate import validate_schedule
        from topologies.symmetry import group_map

        for rep in self._classes.get((kind, len(nodes), size_class), ()):
            hit = self._best.get((kind, rep, size_class))
            if hit is None:      # (dropped with the caches)
                continue
            h = group_map(self.topology, rep, nodes)
            if h is None:
                continue
            shared, base = hit
            sched = base.relabelled(h.node, h.link, coll)
            if not validate_schedule(sched, self.topology).valid:
                continue
            t = self._time(sched)
            _hold(sched)
            return dataclasses.replace(
                shared, time_s=t, times_s={**shared.times_s, shared.algorithm: t},
                ring_time_s=t if shared.algorithm == "ring" else shared.ring_time_s), sched
        return None

    def _flow_levels(self, sched) -> float:
        from evaluators.netsim import dependency_levels

        return sum(self._level_times(sched, dependency_levels(sched)))

    def _level_times(self, sched, level: np.ndarray, chunk: float | None = None
                     ) -> list[float]:
        """Each dependency level's time under the flow model, seconds, in level order: one
        :func:`~.phase.flow_phase` of the level's transfers of ``chunk`` bytes each
        (default the schedule's), cached by their pairs, paths and size, so identical
        levels are simulated once."""
        order = np.lexsort((sched.dst, sched.src, level))
        lv = level[order]
        bounds = np.flatnonzero(np.diff(lv)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [lv.size]])
        ptr, links = sched.path_ptr, sched.path_links
        chunk = sched.chunk_bytes if chunk is None else chunk
        times = []
        for a, b in zip(starts.tolist(), ends.tolist()):
            ids = order[a:b]
            lens = np.diff(ptr)[ids]
            offsets = np.cumsum(lens) - lens
            sel = np.repeat(ptr[ids] - offsets, lens) + np.arange(int(lens.sum()))
            sub_links = links[sel]
            key = (chunk, sched.src[ids].tobytes(), sched.dst[ids].tobytes(), lens.tobytes(),
                   sub_links.tobytes())
            t = self._levels.get(key)
            if t is None:
                moving = lens > 0
                t = 0.0
                if moving.any() and self._spray:
                    src, dst = sched.src[ids][moving], sched.dst[ids][moving]
                    sptr, slinks, owner, share = spray_paths(self.topology, src, dst)
                    t = flow_phase(self.topology, src[owner], dst[owner], chunk * share,
                                   rtol=self.rtol, paths=(sptr, slinks)).makespan_s
                elif moving.any():
                    keep = np.repeat(moving, lens)
                    mp = np.concatenate([[0], np.cumsum(lens[moving])])
                    t = flow_phase(self.topology, sched.src[ids][moving], sched.dst[ids][moving],
                                   np.full(int(moving.sum()), chunk), rtol=self.rtol,
                                   paths=(mp, sub_links[keep])).makespan_s
                self._levels[key] = t
            times.append(t)
        return times

    # ------------------------------------------------------------------ MP phases
    def mp_phase(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray) -> CommCost:
        """Point-to-point GPU messages that run together (module docstring)."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        size = np.asarray(size, dtype=np.float64)
        key = (src.tobytes(), dst.tobytes(), size.tobytes())
        hit = self._phases.get(key)
        if hit is None:
            hit = self._phases[key] = self._mp_phase(src, dst, size)
            _hold(hit)
        return hit

    def _mp_phase(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray) -> CommCost:
        sysm = self.system
        topo = self.topology
        ns, nd = sysm.node(src), sysm.node(dst)
        local = ns == nd
        intra = 0.0
        if sysm.server_level and local.any():
            out = np.bincount(src[local], weights=size[local], minlength=sysm.gpus)
            inn = np.bincount(dst[local], weights=size[local], minlength=sysm.gpus)
            intra = float(np.maximum(out, inn).max()) / sysm.fabric_Bps
        far = ~local & (size > 0)
        cost = CommCost(intra, np.zeros(topo.n_links))
        if not far.any():
            return cost
        n = topo.npus
        pair = ns[far] * n + nd[far]
        uniq, inv = np.unique(pair, return_inverse=True)
        psize = np.bincount(inv, weights=size[far])
        ps, pd = uniq // n, uniq % n
        fs, fd, fsize = ps, pd, psize      # the flows: one per pair, or its plane shares
        if self.routing == "spray":
            ptr, links, owner, share = spray_paths(topo, ps, pd)
            fs, fd, fsize = ps[owner], pd[owner], psize[owner] * share
        else:
            ptr, links = pair_paths(topo, ps, pd, method=self.routing)
        if self.model == "flow":
            res = flow_phase(topo, fs, fd, fsize, rtol=self.rtol, paths=(ptr, links))
            t_net, link_bytes, fw = res.makespan_s, res.link_bytes, res.forwards
            if fs is not ps:   # forwards per pair: a Clos has no host forwarding
                fw = np.zeros(ps.size)
        else:
            from evaluators.netsim import Messages, simulate

            batch = Messages.from_arrays(topo, fs, fd, fsize, path_ptr=ptr, path_links=links)
            res = simulate(topo, batch, model=self.model)
            t_net, link_bytes = res.makespan_s, np.asarray(res.link_bytes)
            fw = _forwards(topo, ptr, links) if fs is ps else np.zeros(ps.size)
        cost.time_s = max(intra, float(t_net))
        cost.link_bytes = np.asarray(link_bytes, dtype=float)
        cost.net_bytes = float(psize.sum())
        cost.carried_bytes = float((psize * (1 + fw)).sum())
        cost.pairs = frozenset(zip(ps.tolist(), pd.tolist()))
        return cost
