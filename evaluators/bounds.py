"""Lower bounds on the time of a collective on a topology (``codesign bound``).

:func:`lower_bound` returns the largest of several valid lower bounds, each a
*component* of the :class:`Bound`.  They ignore latency except ``latency``,
and assume what the rest of the framework does (docs/architecture.md sections 3 and 5):
NPUs store, forward, copy and reduce; switches only route (they neither store,
replicate nor reduce), so every transfer goes from an NPU to an NPU; a link
of bandwidth ``b`` carries at most ``b * T`` bytes in time ``T``.

Notation: ``P`` the participants (possibly a subset of the NPUs; the other
NPUs and the switches may relay), ``N = |P|``, ``M = collective.size_bytes``
(nccl-tests convention, :mod:`evaluators.collectives`), ``in(v)`` / ``out(v)``
the total bandwidth of the links entering / leaving ``v``, ``cap(S)`` the
bandwidth of the links leaving the node set ``S``.

Per kind (thesis = "Optimal collectives via multicommodity flow", Appendix A
"Simple bounds on collectives"):

* **allgather** -- ``ingress``: every participant receives the ``N-1`` other
  shards, ``(N-1)M/N / in(v)`` (thesis Thm. 10-11); ``egress``: it sends its
  shard at least once, ``M/N / out(v)`` (Thm. 10); ``egress_total``: the
  downloads total ``(N-1)M``, each one uploaded by some NPU, so
  ``(N-1)M / sum_NPU out`` (binds when switches cannot replicate, e.g. fat
  uplinks into thin NPU egress); ``cut``: for any node set ``S`` holding a
  participant and missing another, the shards of ``S & P`` must all leave
  ``S``: ``(M/N) max_S |S & P| / cap(S)``, maximised exactly by
  :func:`evaluators.cuts.max_ratio_cut` (Dinkelbach on the parametric min cut,
  the fractional-programming form of the issue's cut bound).
* **reducescatter** -- the time reversal: ``egress`` ``(N-1)M/N / out(v)``
  (Thm. 16), ``ingress`` ``M/N / in(v)``, ``ingress_total`` ``(N-1)M /
  sum_NPU in`` (Thm. 16: ``(n-1)`` downloads in all), ``cut`` ``(M/N) max_U
  |P - U| / cap(U)`` (each shard owned outside ``U`` needs ``U``'s
  contributions), the allgather cut of the reversed graph.
* **allreduce** -- ``ingress_total`` ``2(N-1)M / sum_NPU in`` and
  ``egress_total`` ``2(N-1)M / sum_NPU out`` (thesis Thm. 18-19: any
  allreduce downloads ``2(n-1)`` buffers in all, and every download is an
  upload); ``ingress`` / ``egress`` ``M / in(v)``, ``M / out(v)`` (each
  participant needs every element's other contributions and must send its
  own); ``cut`` ``M / min cap(U)`` over sets separating two participants
  (every element's contributions inside must leave).  On networks where
  every NPU has the same ingress (rings, tori, hypercubes, a switch, fc) the
  totals equal the reduce-scatter plus allgather per-NPU bounds, the "RS + AG"
  bound of the issue.  We do **not** add the two halves' *cut* (or per-node
  maximum) bounds: that sum is not a valid allreduce bound in general.  On
  ``0 -> 2 <- 1``-style graphs where NPU 0's ingress and NPU 1's egress are
  the thin links, an allreduce can stream NPU 1's contribution through the
  thin egress while the sums stream through the thin ingress, overlapping
  the two halves: it takes ``~M/b`` while RS-cut + AG-cut is ``4M/(3b)``
  (``tests/evaluators/test_bounds_schedules.py`` builds this schedule).
* **broadcast** -- ``ingress`` ``M / in(v)`` for non-roots, ``egress``
  ``M / out(root)`` (Thm. 8-9), totals ``(N-1)M / sum_NPU in|out``, ``cut``
  ``M / min_v maxflow(root, v)``.  **reduce** -- the reverse (Thm. 12-13,
  Lemma 15), cut ``M / min_v maxflow(v, root)``.
* **scatter** -- ``egress`` ``(N-1)M/N / out(root)``, ``ingress``
  ``M/N / in(v)``, ``cut`` ``(M/N) max_{S contains root} |P - S| / cap(S)``
  (exact, one sink).  **gather** -- the reverse.
* **alltoall** (``M`` per-rank send buffer, ``M/N`` per ordered pair) --
  ``ingress`` / ``egress`` ``(N-1)M/N / in|out(v)``; ``volume``: every block
  crosses at least its hop distance, ``(M/N) sum_{p != q} hops(p, q) /
  sum_links b``; ``cut`` ``(M/N) max_S |S & P| |P - S| / cap(S)``, exact by
  enumeration on small inputs, otherwise the best of candidate cuts (single
  nodes and their complements, slabs and half-rings along each dimension,
  Kernighan-Lin bisections, the allgather and reduce-scatter arg-max cuts),
  each a valid bound, with ``exact=False``.
* **latency** (every kind) -- the largest, over the ordered pairs that must
  communicate, of the minimum path latency (TACOS Sec. V-A starts its ILP search
  at the diameter for the same reason: two far NPUs must communicate).

Budget: exact cut computations use at most ``exact_node_limit**2 // nodes``
max-flow problems, so every network of up to ``exact_node_limit`` nodes is
exact, and larger ones too when symmetry (:func:`topologies.symmetry.participant_orbits`)
leaves few sinks.  Beyond that the bound is the best over the sinks or pairs
tried (still valid) and :attr:`Bound.exact` is ``False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_int
from evaluators.collectives import Collective
from evaluators.cuts import CutNetwork, max_product_cut, max_ratio_cut, min_pair_cuts
from topologies.model import kl_bisections
from topologies.symmetry import participant_orbits, twin_classes

__all__ = ["Bound", "lower_bound", "KL_MAX_NODES", "CUT_FLOW_MAX_SIZE"]

#: Kernighan-Lin candidate cuts (all-to-all, large inputs) only up to this many
#: nodes: networkx's implementation is quadratic.
KL_MAX_NODES = 2000
#: Largest nodes + links for which cut components run max-flows (issue 18: bounded
#: time; ~12 s for ring:20000, 60000 nodes + links, on the benchmark machine).
CUT_FLOW_MAX_SIZE = 60_000
#: Node visits the latency component may spend on shortest-path searches (one search
#: visits every node): every source while sources x nodes <= 4e6; 40 searches on 10^5 nodes.
LATENCY_ROW_WORK = 4_000_000


@dataclass(frozen=True)
class Bound:
    """A lower bound on a collective's time.

    Attributes
    ----------
    time_s : float
        The bound, seconds: the largest of :attr:`components`.
    components : dict of str to float
        Each valid bound, seconds (``"ingress"``, ``"egress"``,
        ``"ingress_total"``, ``"egress_total"``, ``"cut"``, ``"volume"``,
        ``"latency"``; which ones depends on the kind, module docstring).
    cut_nodes : tuple of int or None
        The arg-max node set ``S`` of the cut bound (the bottleneck is the
        links leaving it), or None when the kind has no cut component.
    exact : bool
        Whether the cut component is the exact maximum over all cuts (False
        when the search was limited; the value is then still a valid bound).
    kind : str
        Collective kind.
    size_bytes : float
        Collective size, bytes (nccl-tests convention).
    npus : int
        Number of participants.
    """

    time_s: float
    components: dict[str, float]
    cut_nodes: tuple[int, ...] | None
    exact: bool
    kind: str = ""
    size_bytes: float = 0.0
    npus: int = 0

    @property
    def binding(self) -> str:
        """Name of the largest component (the first listed among float ties)."""
        top = max(self.components.values())
        return next(k for k, v in self.components.items() if v >= top * (1 - 1e-12))

    @property
    def algbw_Bps(self) -> float:
        """Algorithm bandwidth at the bound, bytes/s: ``size / time``."""
        return self.size_bytes / self.time_s if self.time_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (units in the names)."""
        return {
            "time_s": self.time_s,
            "binding": self.binding,
            "components_s": dict(self.components),
            "cut_nodes": None if self.cut_nodes is None else list(self.cut_nodes),
            "exact": self.exact,
        }


def lower_bound(topology, collective: Collective, *, exact_node_limit: int = 512,
                alltoall_enum_nodes: int = 18, alltoall_enum_participants: int = 10,
                seed: int = 0) -> Bound:
    """Lower bound on the time of ``collective`` on ``topology``.

    Parameters
    ----------
    topology : topologies.Topology
        The network (bandwidths in bytes/s, latencies in s).
    collective : evaluators.collectives.Collective
        Kind, participants (NPU ids of ``topology``), size in bytes.
    exact_node_limit : int, optional
        Exact cut computations solve at most ``exact_node_limit**2 // nodes``
        max-flow problems (every network up to this many nodes is exact).
    alltoall_enum_nodes : int, optional
        All-to-all cut: enumerate every node subset up to this many nodes
        (``2^nodes`` sets; at most 24).
    alltoall_enum_participants : int, optional
        All-to-all cut: otherwise enumerate every split of up to this many
        participants, other nodes placed by min cuts (at most 20).
    seed : int, optional
        Seed of the Kernighan-Lin candidate cuts (all-to-all on large inputs).

    Returns
    -------
    Bound
        ``time_s`` is the largest component, seconds.

    Raises
    ------
    InvalidSpecError
        If a participant is not an NPU of the topology or an option is bad.
    InfeasibleError
        If two participants that must communicate are not connected.

    Examples
    --------
    >>> from topologies.families.multidim import ring
    >>> b = lower_bound(ring(4, bandwidth=1e9, latency=0.0), Collective.on("allgather", 4, 4e9))
    >>> round(b.time_s, 6), b.binding, b.exact
    (1.5, 'ingress', True)
    """
    exact_node_limit = check_int("exact_node_limit", exact_node_limit, 1)
    alltoall_enum_nodes = check_int("alltoall_enum_nodes", alltoall_enum_nodes, 1, 24)
    alltoall_enum_participants = check_int("alltoall_enum_participants",
                                           alltoall_enum_participants, 1, 20)
    seed = check_int("seed", seed, 0)
    bad = [p for p in collective.npus if not 0 <= p < topology.npus]
    if bad:
        raise invalid("collective participant", bad[0], f"an NPU id in 0..{topology.npus - 1}")
    ctx = _Context(topology, collective, exact_node_limit, alltoall_enum_nodes,
                   alltoall_enum_participants, seed)
    ctx.check_connected()
    comps, cut_nodes, exact = _KINDS[collective.kind](ctx)
    comps["latency"] = ctx.latency_bound()
    comps = {k: float(v) for k, v in comps.items()}
    return Bound(max(comps.values()), comps, cut_nodes, exact, collective.kind,
                 collective.size_bytes, collective.n)


# ------------------------------------------------------------------ context
class _Context:
    """Per-call quantities shared by the per-kind bounds."""

    def __init__(self, topology, collective: Collective, exact_node_limit: int,
                 enum_nodes: int, enum_members: int, seed: int) -> None:
        self.topo = topology
        self.coll = collective
        self.P = np.array(collective.npus, dtype=np.int64)
        self.N = collective.n
        self.M = collective.size_bytes
        n = topology.n_nodes
        self.members = np.zeros(n, dtype=bool)
        self.members[self.P] = True
        self.in_bw = np.bincount(topology.dst, weights=topology.bandwidth, minlength=n)
        self.out_bw = np.bincount(topology.src, weights=topology.bandwidth, minlength=n)
        self.npu_in_total = float(self.in_bw[: topology.npus].sum())
        self.npu_out_total = float(self.out_bw[: topology.npus].sum())
        # Above CUT_FLOW_MAX_SIZE nodes + links no max-flow runs at all (one networkx
        # flow on a 100000-node ring takes minutes): the cut components then come from
        # single-node and candidate sets, still valid lower bounds, exact=False.
        self.max_flows = (0 if n + topology.n_links > CUT_FLOW_MAX_SIZE
                          else max(1, exact_node_limit**2 // max(n, 1)))
        self.enum_nodes = enum_nodes
        self.enum_members = enum_members
        self.seed = seed

    @property
    def root(self) -> int:
        return int(self.coll.root)

    @cached_property
    def net(self) -> CutNetwork:
        return CutNetwork.from_topology(self.topo)

    @cached_property
    def rev(self) -> CutNetwork:
        return self.net.reversed()

    def others(self) -> np.ndarray:
        """Participants other than the root."""
        return self.P[self.P != self.root]

    # Pairs that must communicate, as (sources, targets).
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        kind = self.coll.kind
        if kind in ("broadcast", "scatter"):
            return np.array([self.root]), self.others()
        if kind in ("reduce", "gather"):
            return self.others(), np.array([self.root])
        return self.P, self.P

    def _graph(self, weights: np.ndarray | None):
        """CSR adjacency over all nodes; parallel links keep their smallest weight."""
        from scipy.sparse import csr_array

        topo, n = self.topo, self.topo.n_nodes
        key = topo.src * n + topo.dst
        order = np.argsort(key, kind="stable")
        uniq, start = np.unique(key[order], return_index=True)
        w = (np.ones(uniq.size) if weights is None
             else np.minimum.reduceat(weights[order], start))
        return csr_array((w, (uniq // n, uniq % n)), shape=(n, n))

    @cached_property
    def orbits(self) -> list[list[int]]:
        """Orbits of the participants under verified automorphisms (exact shortcut)."""
        return participant_orbits(self.topo, self.P.tolist())

    def sinks(self) -> list[int]:
        """One participant per orbit."""
        return [orbit[0] for orbit in self.orbits]

    def _rows(self, weights: np.ndarray | None, max_rows: int | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distances between the pairs that must communicate, one row per distinct source.

        Returns ``(dist, row_weight, sources)``: for all-pairs kinds the rows are
        the orbit representatives (automorphisms preserve distances), each
        weighted by its orbit's size; for broadcast and scatter the root's row;
        for reduce and gather the distances *to* the root (one search on the
        reversed graph), as one row.
        """
        from scipy.sparse.csgraph import dijkstra

        g = self._graph(weights)
        unweighted = weights is None
        kind = self.coll.kind
        if kind in ("reduce", "gather"):
            d = dijkstra(g.T.tocsr(), directed=True, indices=[self.root],
                         unweighted=unweighted)[:, self.others()]
            return d, np.ones(1), np.array([self.root])
        srcs, dsts = self.pairs()
        weight = np.ones(srcs.size)
        if kind not in ("broadcast", "scatter"):
            srcs = np.array(self.sinks(), dtype=np.int64)
            weight = np.array([len(o) for o in self.orbits], dtype=np.float64)
        if max_rows is not None and srcs.size > max_rows:
            srcs, weight = srcs[:max_rows], weight[:max_rows]
        rows = []
        for lo in range(0, srcs.size, 256):  # blocks keep memory at 256 x nodes
            block = srcs[lo:lo + 256]
            d = dijkstra(g, directed=True, indices=block, unweighted=unweighted)[:, dsts]
            d[block[:, None] == dsts[None, :]] = 0.0
            rows.append(d)
        return np.concatenate(rows), weight, srcs

    def check_connected(self) -> None:
        """Raise InfeasibleError if a pair that must communicate is disconnected."""
        from scipy.sparse.csgraph import connected_components

        # O(nodes + links): a strongly connected network connects every pair, so the
        # per-source searches below (seconds to minutes on 10^4+ nodes) are skipped.
        if connected_components(self._graph(None), directed=True,
                                connection="strong")[0] == 1:
            return
        dist, _, srcs = self._rows(None)
        bad = np.argwhere(np.isinf(dist))
        if bad.size:
            _, dsts = self.pairs()
            if self.coll.kind in ("reduce", "gather"):
                a, b = int(self.others()[bad[0][1]]), self.root
            else:
                a, b = int(srcs[bad[0][0]]), int(dsts[bad[0][1]])
            raise InfeasibleError(f"{self.coll.kind} on {self.topo.name!r} is impossible: "
                                  f"NPU {b} cannot be reached from NPU {a}")

    def latency_bound(self) -> float:
        """Largest minimum path latency over the pairs that must communicate, s."""
        lat = self.topo.latency
        if self.topo.n_links == 0 or not np.any(lat > 0):
            return 0.0
        # Bounded work (issue 18): at most LATENCY_ROW_WORK node visits, i.e. searches
        # from the first sources only on huge networks; a maximum over a subset of the
        # pairs is still a lower bound.
        rows = max(1, LATENCY_ROW_WORK // max(self.topo.n_nodes, 1))
        return float(self._rows(lat, max_rows=rows)[0].max())

    def hop_sum(self) -> float:
        """Sum of minimum hop counts over the ordered pairs that must communicate."""
        dist, weight, _ = self._rows(None)
        return float(weight @ dist.sum(axis=1))

    def distinct(self, nodes) -> list[int]:
        """``nodes`` with twins merged: one per twin class (exact for pair cuts whose
        other end is not in ``nodes``: the swap of two twins fixes it)."""
        nodes = [int(x) for x in nodes]
        drop = set()
        for group in twin_classes(self.topo, nodes):
            drop.update(group[1:])
        return [x for x in nodes if x not in drop]

    def mask_nodes(self, mask: np.ndarray) -> tuple[int, ...]:
        return tuple(int(x) for x in np.flatnonzero(mask))


Result = tuple[dict[str, float], tuple[int, ...] | None, bool]


# ----------------------------------------------------------------- per kind
def _allgather(c: _Context, reverse: bool) -> Result:
    """Allgather, or reduce-scatter (``reverse``: the allgather cut of the reversed
    graph; U = complement of its arg-max)."""
    N, M, P = c.N, c.M, c.P
    share = M / N
    r = max_ratio_cut(c.rev if reverse else c.net, c.members, c.sinks(), max_flows=c.max_flows)
    fan_in, fan_out = (1, N - 1) if reverse else (N - 1, 1)    # shares in, shares out
    total, total_bw = (("ingress_total", c.npu_in_total) if reverse
                       else ("egress_total", c.npu_out_total))
    comps = {
        "ingress": fan_in * share / c.in_bw[P].min(),
        "egress": fan_out * share / c.out_bw[P].min(),
        total: (N - 1) * M / total_bw,
        "cut": share * r.ratio,
    }
    return comps, c.mask_nodes(~r.mask if reverse else r.mask), r.exact


def _allreduce(c: _Context) -> Result:
    N, M, P = c.N, c.M, c.P
    a = int(P[0])
    rest = c.distinct(P[1:])
    pairs = [(a, b) for b in rest] + [(b, a) for b in rest]
    pc = min_pair_cuts(c.net, pairs, max_flows=c.max_flows)
    comps = {
        "ingress": M / c.in_bw[P].min(),
        "egress": M / c.out_bw[P].min(),
        "ingress_total": 2 * (N - 1) * M / c.npu_in_total,
        "egress_total": 2 * (N - 1) * M / c.npu_out_total,
        "cut": M / pc.capacity_Bps,
    }
    return comps, c.mask_nodes(pc.mask), pc.exact


def _rooted(c: _Context, to_root: bool) -> Result:
    """Broadcast (the root sends ``M`` to every other member) or reduce (``to_root``)."""
    N, M, r, others = c.N, c.M, c.root, c.others()
    pairs = [(v, r) if to_root else (r, v) for v in c.distinct(others)]
    pc = min_pair_cuts(c.net, pairs, max_flows=c.max_flows)
    comps = {
        "ingress": M / (c.in_bw[r] if to_root else c.in_bw[others].min()),
        "egress": M / (c.out_bw[others].min() if to_root else c.out_bw[r]),
        "ingress_total": (N - 1) * M / c.npu_in_total,
        "egress_total": (N - 1) * M / c.npu_out_total,
        "cut": M / pc.capacity_Bps,
    }
    return comps, c.mask_nodes(pc.mask), pc.exact


def _scatter_gather(c: _Context, to_root: bool) -> Result:
    """Scatter (the root sends ``M/N`` to every other member) or gather (``to_root``)."""
    N, M, r, others = c.N, c.M, c.root, c.others()
    share = M / N
    # Gather: the allgather cut with the root as the only sink.  Scatter: max over S
    # containing the root of |P - S| / cap(S) = the same cut of the reversed graph,
    # S = its complement.
    rc = max_ratio_cut(c.net if to_root else c.rev, c.members, [r], max_flows=c.max_flows)
    comps = {
        "ingress": (N - 1) * share / c.in_bw[r] if to_root else share / c.in_bw[others].min(),
        "egress": share / c.out_bw[others].min() if to_root else (N - 1) * share / c.out_bw[r],
        "cut": share * rc.ratio,
    }
    return comps, c.mask_nodes(rc.mask if to_root else ~rc.mask), rc.exact


def _alltoall(c: _Context) -> Result:
    N, M, P = c.N, c.M, c.P
    share = M / N
    comps = {
        "ingress": (N - 1) * share / c.in_bw[P].min(),
        "egress": (N - 1) * share / c.out_bw[P].min(),
        "volume": share * c.hop_sum() / float(c.topo.bandwidth.sum()),
    }
    n = c.topo.n_nodes
    exact_possible = n <= c.enum_nodes or (
        N <= c.enum_members and (n == N or (1 << N) - 2 <= c.max_flows))
    cands = [] if exact_possible else _alltoall_candidates(c)
    pc = max_product_cut(c.net, c.members, enum_nodes=c.enum_nodes, enum_members=c.enum_members,
                         max_flows=c.max_flows, candidates=cands)
    comps["cut"] = share * pc.ratio
    return comps, c.mask_nodes(pc.mask), pc.exact


def _alltoall_candidates(c: _Context) -> list[np.ndarray]:
    """Candidate sets for the all-to-all cut on inputs too large to enumerate."""
    topo, n, P = c.topo, c.topo.n_nodes, c.P
    cands: list[np.ndarray] = []
    # Single participants (and their complements) with the thinnest links: the
    # others cannot beat the ingress / egress components anyway.
    thin = set(P[np.argsort(c.in_bw[P], kind="stable")[:32]].tolist())
    thin |= set(P[np.argsort(c.out_bw[P], kind="stable")[:32]].tolist())
    for p in sorted(thin):
        single = np.zeros(n, dtype=bool)
        single[p] = True
        cands += [single, ~single]
    coords = topo.node_attrs.get("coords")
    if coords is not None and topo.dims and coords.shape == (topo.npus, len(topo.dims)):
        for k, d in enumerate(topo.dims):
            x = coords[:, k]
            slabs = [x < cut for cut in range(1, d.size)]
            if d.kind in ("ring", "uniring") and d.size > 2:
                slabs += [(x - off) % d.size < d.size // 2 for off in range(d.size)]
            for slab in slabs:
                mask = np.zeros(n, dtype=bool)
                mask[: topo.npus] = slab
                cands.append(mask)
    if n <= KL_MAX_NODES:
        # Kernighan-Lin halves of the whole network and their complements.
        cands += [m for side in kl_bisections(topo, range(c.seed, c.seed + 4))
                  for m in (side, ~side)]
    for net, flip in ((c.net, False), (c.rev, True)):
        r = max_ratio_cut(net, c.members, c.sinks(),
                          max_flows=max(1, c.max_flows // 2) if c.max_flows else 0)
        cands.append(~r.mask if flip else r.mask)
    return cands


_KINDS = {
    "allgather": lambda c: _allgather(c, False),
    "reducescatter": lambda c: _allgather(c, True),
    "allreduce": _allreduce,
    "broadcast": lambda c: _rooted(c, False),
    "reduce": lambda c: _rooted(c, True),
    "scatter": lambda c: _scatter_gather(c, False),
    "gather": lambda c: _scatter_gather(c, True),
    "alltoall": _alltoall,
}
