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
* Groups of a set on different servers run at the same time; the set takes as long
  as its slowest server group (contention between groups on disjoint servers is not
  modelled).

MP phases
---------
Messages between GPUs of one server use the fabric (each GPU sends and receives at
``B_f``: time = max over GPUs of max(bytes out, bytes in) / B_f).  Messages between
nodes are merged per node pair (one flow per server pair, as a server's NIC carries
them) and simulated together with the network model (``flow``: :func:`~.phase.flow_phase`;
``analytical`` / ``congestion``: :func:`evaluators.netsim.simulate`).  The phase takes
the longer of the two.  An all-to-all of ``S`` bytes on ``n`` members sends ``S / n``
from every member to every other.

Every result is cached by its content: the same collective repeats hundreds of times;
schedules of the size-independent baselines (:data:`SIZE_FREE`) are synthesized once per
(kind, nodes) and re-timed for each size (their start/end times are then stale: only
the re-timing under the network model is used).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from evaluators.iteration.phase import DEFAULT_RTOL, flow_phase, route_table

__all__ = ["System", "CommCost", "CommTimer", "intra_ring_time", "SIZE_FREE", "ROUTINGS"]

#: Routing of MP phases (:meth:`evaluators.iteration.phase._Routes.paths`; ``dmodk``:
#: deterministic up/down routing on Clos fabrics, :func:`topologies.routing.clos_paths`).
ROUTINGS = ("shortest", "ecmp", "dmodk")

#: Algorithms whose transfers and paths do not depend on the buffer size: their schedule
#: is synthesized once per (kind, nodes) and re-timed for every size.
SIZE_FREE = frozenset({"ring", "bidir-ring", "direct", "rhd", "dbt", "hierarchical",
                       "multiring"})


#: Per topology (weakly held), the caches of every CommTimer configuration.
_SHARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: Cached entries per topology before its caches are dropped (bounds memory).
_MAX_CACHED = 20_000


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


@dataclass
class CommCost:
    """Time and network footprint of one communication step (one occurrence).

    ``link_bytes`` per topology link; ``net_bytes`` logical bytes between nodes;
    ``carried_bytes`` the same counting every host-based forwarding again (bytes x
    (1 + intermediate NPUs)); ``pairs`` the node pairs that carry traffic.
    """

    time_s: float
    link_bytes: np.ndarray
    net_bytes: float = 0.0
    carried_bytes: float = 0.0
    pairs: frozenset = field(default_factory=frozenset)


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


def _levels(dep_ptr: np.ndarray, dep_idx: np.ndarray) -> np.ndarray:
    """Dependency depth of every transfer (dependencies point to earlier indices)."""
    n = dep_ptr.size - 1
    level = np.zeros(n, dtype=np.int64)
    ptr = dep_ptr.tolist()
    idx = dep_idx.tolist()
    lv = [0] * n
    for i in range(n):
        a, b = ptr[i], ptr[i + 1]
        if a < b:
            lv[i] = 1 + max(lv[j] for j in idx[a:b])
    level[:] = lv
    return level


class CommTimer:
    """Cached timing of collectives and MP phases on a :class:`System` (module docstring).

    Parameters
    ----------
    system : System
    collective_method : str
        Registered algorithm for inter-node ring collectives.
    network_model : str
        ``flow``, ``congestion`` or ``analytical``.
    rtol : float
        Event-batching tolerance of the flow phases (:func:`~.phase.flow_phase`).
    routing : str
        Paths of MP phases: ``shortest`` (:meth:`Topology.route`), ``ecmp`` (one hashed
        minimum-hop path per server pair) or ``dmodk`` (Clos fabrics: deterministic
        up/down D-mod-k routing, :func:`topologies.routing.clos_paths`).  Collective schedules keep their own paths.
    """

    def __init__(self, system: System, collective_method: str, network_model: str,
                 rtol: float = DEFAULT_RTOL, routing: str = "shortest") -> None:
        from evaluators.netsim.simulator import get_model
        from evaluators.registry import ALGORITHMS, algorithm_names

        names = algorithm_names()
        if collective_method not in ALGORITHMS:
            raise invalid("collective_method", collective_method, f"one of {', '.join(names)}")
        get_model(network_model)
        if routing not in ROUTINGS:
            raise invalid("routing", routing, " or ".join(ROUTINGS))
        self.routing = routing
        self.system = system
        self.topology = system.topology
        self.method = collective_method
        self.model = network_model
        self.rtol = rtol
        # Caches live with the (immutable) topology, so that repeated evaluations on one
        # topology (search loops) reuse them; keyed by everything a result depends on.
        per_topo = _SHARED.setdefault(self.topology, {})
        if sum(len(d) for c in per_topo.values() for d in c.values()) > _MAX_CACHED:
            per_topo.clear()
        caches = per_topo.setdefault(
            (collective_method, network_model, float(rtol), routing, system.g,
             system.server_level, system.fabric_Bps), {"inter": {}, "sets": {}, "phases": {}, "levels": {},
                                  "structure": {}})
        self._inter: dict[tuple, CommCost] = caches["inter"]
        self._sets: dict[tuple, CommCost] = caches["sets"]
        self._phases: dict[tuple, CommCost] = caches["phases"]
        self._levels: dict[tuple, float] = caches["levels"]
        self._structure: dict[tuple, Any] = caches["structure"]

    # ------------------------------------------------------------------ collectives
    def collective_set(self, kind: str, groups: list[tuple[int, ...]], size: float) -> CommCost:
        """A ring collective of ``size`` bytes on every group at once (one occurrence)."""
        key = (kind, tuple(groups), float(size))
        hit = self._sets.get(key)
        if hit is None:
            hit = self._sets[key] = self._collective_set(kind, groups, float(size))
        return hit

    def _collective_set(self, kind: str, groups: list[tuple[int, ...]], size: float) -> CommCost:
        sysm = self.system
        n_links = self.topology.n_links
        by_nodes: dict[tuple[int, ...], list[int]] = {}
        intra = 0.0
        for grp in groups:
            if len(grp) < 2 or size <= 0:
                continue
            nodes = sysm.node(np.array(grp)).tolist()
            servers = tuple(dict.fromkeys(nodes))
            c = max(nodes.count(s) for s in servers)
            if len(servers) == 1:
                intra = max(intra, intra_ring_time(kind, len(grp), size, sysm.fabric_Bps))
                continue
            entry = by_nodes.setdefault(servers, [0, 0])
            entry[0] += 1
            entry[1] = max(entry[1], c)
        total = CommCost(intra, np.zeros(n_links))
        pairs: set = set()
        for servers, (k, c) in by_nodes.items():
            pre = intra_ring_time("reducescatter", c, size, sysm.fabric_Bps) \
                if kind in ("allreduce", "reducescatter") else 0.0
            post = intra_ring_time("allgather", c, size, sysm.fabric_Bps) \
                if kind in ("allreduce", "allgather") else 0.0
            inter = self.inter_collective(kind, servers, k * size)
            total.time_s = max(total.time_s, pre + inter.time_s + post)
            total.link_bytes = total.link_bytes + inter.link_bytes
            total.net_bytes += inter.net_bytes
            total.carried_bytes += inter.carried_bytes
            pairs |= inter.pairs
        total.pairs = frozenset(pairs)
        return total

    def inter_collective(self, kind: str, nodes: tuple[int, ...], size: float) -> CommCost:
        """A collective on topology nodes, synthesized and re-timed (cached)."""
        key = (kind, nodes, size)
        hit = self._inter.get(key)
        if hit is not None:
            return hit
        from evaluators.collectives import Collective
        from evaluators.registry import synthesize

        from evaluators.schedule import Schedule

        topo = self.topology
        coll = Collective(kind, nodes, size)
        base = self._structure.get((kind, nodes)) if self.method in SIZE_FREE else None
        if base is None:
            try:
                sched = synthesize(topo, coll, method=self.method)
            except InvalidSpecError as exc:
                raise InvalidSpecError(f"collective_method {self.method!r} cannot time a {kind} "
                                       f"on {len(nodes)} nodes of {topo.name!r}: {exc}") from None
            self._structure[(kind, nodes)] = sched
        else:   # same transfers and paths, another buffer size: keep the base's chunking
            # (multiring splits every shard over its rings: chunks_per_npu = rings).
            coll = Collective(kind, nodes, size, chunks_per_npu=base.collective.chunks_per_npu,
                              root=base.collective.root)
            sched = Schedule(coll, base.chunk, base.src, base.dst, base.path_ptr,
                             base.path_links, base.start, base.end, base.op, base.metadata)
        ptr, links = sched.path_ptr, sched.path_links
        chunk = sched.chunk_bytes
        link_bytes = np.bincount(links, minlength=topo.n_links) * chunk
        fw = _forwards(topo, ptr, links)
        moving = np.diff(ptr) > 0
        n_moving = int(moving.sum())
        pairs = frozenset(zip(sched.src[moving].tolist(), sched.dst[moving].tolist()))
        if self.model == "flow":
            time_s = self._flow_levels(sched)
        else:
            from evaluators.netsim import replay_time

            time_s = replay_time(sched, topo, model=self.model)
        cost = CommCost(float(time_s), link_bytes.astype(float), n_moving * chunk,
                        float((1 + fw[moving]).sum()) * chunk, pairs)
        self._inter[key] = cost
        return cost

    def _flow_levels(self, sched) -> float:
        from evaluators.netsim import transfer_dependencies

        dptr, didx = transfer_dependencies(sched)
        level = _levels(dptr, didx)
        order = np.lexsort((sched.dst, sched.src, level))
        lv = level[order]
        bounds = np.flatnonzero(np.diff(lv)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [lv.size]])
        ptr, links = sched.path_ptr, sched.path_links
        chunk = sched.chunk_bytes
        total = 0.0
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
                if moving.any():
                    keep = np.repeat(moving, lens)
                    mp = np.concatenate([[0], np.cumsum(lens[moving])])
                    t = flow_phase(self.topology, sched.src[ids][moving], sched.dst[ids][moving],
                                   np.full(int(moving.sum()), chunk), rtol=self.rtol,
                                   paths=(mp, sub_links[keep])).makespan_s
                self._levels[key] = t
            total += t
        return total

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
        if self.routing == "dmodk":
            from topologies.routing import clos_paths

            ptr, links = clos_paths(topo, ps, pd, method="dmodk")
        else:
            ptr, links = route_table(topo).paths(ps, pd, routing=self.routing)
        if self.model == "flow":
            res = flow_phase(topo, ps, pd, psize, rtol=self.rtol, paths=(ptr, links))
            t_net, link_bytes, fw = res.makespan_s, res.link_bytes, res.forwards
        else:
            from evaluators.netsim import Messages, simulate

            batch = Messages.from_arrays(topo, ps, pd, psize, path_ptr=ptr, path_links=links)
            res = simulate(topo, batch, model=self.model)
            t_net, link_bytes = res.makespan_s, np.asarray(res.link_bytes)
            fw = _forwards(topo, ptr, links)
        cost.time_s = max(intra, float(t_net))
        cost.link_bytes = np.asarray(link_bytes, dtype=float)
        cost.net_bytes = float(psize.sum())
        cost.carried_bytes = float((psize * (1 + fw)).sum())
        cost.pairs = frozenset(zip(ps.tolist(), pd.tolist()))
        return cost
