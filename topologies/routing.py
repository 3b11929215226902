"""Routing: the one place that computes paths, on any topology and on Clos fabrics as deployed.

Every evaluator that needs a path asks this module (docs/architecture.md section 5's "minimum-hop
routes"); the methods, named so that the two meanings of "ECMP" cannot be confused:

Any topology (all-pairs BFS tables, :func:`all_pairs`, cached per topology)
--------------------------------------------------------------------------
* ``"shortest"`` (:func:`shortest_paths`, :func:`route`) -- one fixed minimum-hop path
  per pair: scipy's BFS predecessors, and among parallel links the one with the highest
  bandwidth, then the lowest id.  Deterministic; what :meth:`Topology.route` returns.
* ``"ecmp_hashed"`` (:func:`ecmp_hashed_paths`; the iteration model's ``routing="ecmp"``)
  -- one minimum-hop path per pair, chosen hop by hop by a seeded per-flow hash among all
  minimum-hop predecessors: what switches' per-flow ECMP does (flows may collide).
* ``"ecmp_split"`` (:func:`ecmp_split_loads`) -- every pair's bytes split evenly over
  *all* its minimum-hop paths (ideal ECMP, a fluid split; the shared-cluster model):
  link ``(u, v)`` carries ``sigma(s, u) sigma(v, t) / sigma(s, t)`` of pair ``(s, t)``
  (Brandes, "A faster algorithm for betweenness centrality", J. Math. Sociol. 2001:
  path counts ``sigma`` by BFS level).
* k shortest simple paths (:func:`k_shortest_paths`, TopoOpt Algorithm 1 line 20: MP
  traffic on "k-shortest paths" of the combined topology).
* :func:`predecessor_walk`: the vectorised walk behind all of these, also used on
  graphs that are not a :class:`Topology` (the circuits of a reconfigurable fabric).

Clos fabrics (up/down)
----------------------
A Clos fabric (``params["switch_levels"]``: leaves, spines, cores ... as id ranges,
recorded by every Clos builder of :mod:`topologies.families`) is routed *up/down*: a
packet climbs from its source to the lowest level where its destination is below,
then descends.  What differs between deployments is which uplink each hop takes:

* ``"dmodk"`` -- deterministic destination-mod-k routing (Zahavi, "D-Mod-K Routing
  Providing Non-Blocking Traffic for Shift Permutations on Real Life Fat Trees",
  Technion CCIT report 776, 2010; Gomez et al., "Deterministic versus adaptive
  routing in fat-trees", IPDPS'07), what InfiniBand subnet managers (OpenSM
  ``ftree``) and static ECMP-free Ethernet fabrics install: at level ``l`` the uplink
  is ``floor(d / P_l) mod k_l``, where ``d`` is the destination's position in the
  tree (``node_attrs["clos_rank"]``, default its id), ``k_l`` the node's number of
  uplinks and ``P_l = k_0 k_1 ... k_{l-1}``.  Destinations are spread evenly over
  uplinks, every destination has a single root switch, and a *shift permutation*
  (``i -> i + c``) is routed without two flows on one link on a full XGFT.
* ``"ecmp"`` -- hashed equal-cost multipath on the up/down paths (``clos_paths``):
  every flow (pair) takes a uniformly hashed uplink at each level (seeded, so a
  ``seed`` is a different hash function).  Flows collide: ``n`` flows on ``n``
  uplinks leave about ``n / e`` uplinks idle (balls into bins), which is why
  hashed ECMP loses bandwidth on permutation traffic.
* ``"spray"`` -- every pair splits evenly over the endpoint's planes/ports (the
  first hop), each part routed D-mod-k above: multi-plane fabrics with packet
  spraying or NCCL's multi-port channels (:func:`spray_paths`).

The down path is the mirror image of the destination's own climb with the same
choices, so the two climbs meet exactly at the lowest common ancestor.  Traffic
between two GPUs of one scale-up domain (``params["scaleup_switches"]``) stays on
the domain's NVLink crossbar.

Ring orders (:func:`ring_order`): NCCL builds a ring domain by domain and, on
rail-optimised fabrics, so that every inter-server hop joins two NICs of the same
rail (each server entered and left on the same rail: "snake" order inside the
domains); same-rank GPUs (one rail) are ordered as the leaves hold them, so
consecutive members share a leaf.

Complexity: the all-pairs tables are O(n^2) memory (checked against the machine,
:func:`codesign.resources.check_memory`); the Clos structure O(L log L) for L links,
routing ``k`` pairs O(k x tiers) vectorised, no all-pairs tables (works for
100,000-server fabrics).

Examples
--------
>>> from topologies.registry import from_spec
>>> import numpy as np
>>> t = from_spec("fattree:k=8")
>>> src = np.arange(128); dst = (src + 16) % 128          # a shift permutation
>>> ptr, links = clos_paths(t, src, dst)
>>> int(np.bincount(links).max())                          # no link carries two flows
1
>>> route(from_spec("ring:4"), 0, 2) == from_spec("ring:4").route(0, 2)
True
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_choice

__all__ = ["ROUTING_METHODS", "PAIR_PATH_METHODS", "all_pairs", "route", "predecessor_walk",
           "shortest_paths", "ecmp_hashed_paths", "pair_paths", "path_counts",
           "grid_ring_order", "grid_coordinates", "is_grid",
           "ecmp_split_loads", "neighbour_lists", "k_shortest_paths", "MAX_EXTRA_HOPS",
           "ClosStructure", "clos_structure", "is_clos", "clos_paths", "spray_paths",
           "ring_order", "max_link_flows"]

#: Uplink choice rules of :func:`clos_paths`.
ROUTING_METHODS = ("dmodk", "ecmp")

#: One-path-per-pair methods of :func:`pair_paths` (``"ecmp"`` is ``"ecmp_hashed"``, the
#: name the iteration model's ``routing`` option uses).
PAIR_PATH_METHODS = ("shortest", "ecmp", "ecmp_hashed", "dmodk")

#: k shortest paths: paths at most this many hops longer than the shortest are considered.
MAX_EXTRA_HOPS = 2

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


# ------------------------------------------------------------------ any topology
class _Tables:
    """Per-topology routing tables, each built on first use."""

    def __init__(self) -> None:
        self.hops: np.ndarray | None = None
        self.pred: np.ndarray | None = None
        self.best: np.ndarray | None = None
        self.in_nbrs: tuple[np.ndarray, np.ndarray | None] | None = None
        #: Hop-count rows of single sources (int16 where the node count allows), kept
        #: where the full tables do not fit (:func:`_row_blocks`), and the predecessor
        #: rows of the sources searched for paths.
        self.rows: dict[int, np.ndarray] = {}
        self.pred_rows: dict[int, np.ndarray] = {}
        self.rows_bytes = 0

    def nbytes(self) -> int:
        arrays = (self.hops, self.pred, *(self.in_nbrs or ()), *(self.best or ()))
        return sum(int(a.nbytes) for a in arrays if a is not None) + self.rows_bytes

    def clear(self) -> None:
        self.hops = self.pred = self.best = self.in_nbrs = None
        self.rows, self.pred_rows, self.rows_bytes = {}, {}, 0


#: Share of the memory limit (:mod:`codesign.resources`) the routing tables of all
#: topologies may hold together.  A sweep or what-if keeps dozens of fabrics alive
#: (``search.sweeps.trial.cached_topology``), and the all-pairs tables of one
#: 4,096-server Clos are 210 MB: without a bound a 32k-GPU what-if held gigabytes.
TABLES_SHARE = 0.25


#: Node and link visits the breadth-first searches of one call may plan when the tables
#: do not fit (sources x (nodes + links)); about 40 million a second on the benchmark
#: machine, so 4e9 is ~100 s (the 16,384-GPU rail-optimised fabric's diameter: 2.5e9,
#: 60 s).  Above it the call is refused in one line, as the tables' memory check does.
BFS_WORK_LIMIT = 4e9


def _tables(topology) -> _Tables:
    t = _TABLES.get(topology)
    if t is None:
        t = _TABLES[topology] = _Tables()
    return t


def _make_room(topology, nbytes: float) -> None:
    """Before ``topology`` keeps ``nbytes`` more of tables: past :data:`TABLES_SHARE` of
    the memory limit, drop every other topology's tables (rebuilt when asked again)."""
    from codesign.resources import memory_limit

    held = sum(t.nbytes() for t in list(_TABLES.values()))
    if held + nbytes > TABLES_SHARE * memory_limit():
        for topo, tab in list(_TABLES.items()):
            if topo is not topology:
                tab.clear()


def all_pairs(topology) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs minimum-hop tables ``(hops, pred)`` over all nodes (cached per topology).

    Returns
    -------
    hops : ndarray of int32, shape (n_nodes, n_nodes)
        Hop counts, -1 where unreachable (:attr:`Topology.hop_matrix`).
    pred : ndarray of int32, shape (n_nodes, n_nodes)
        ``pred[s, v]``: the node before ``v`` on the BFS path from ``s`` (scipy's
        unweighted Dijkstra, so ties follow its order; negative: none).

    Raises
    ------
    InfeasibleError
        If the tables (24 bytes per node pair while built) do not fit in memory.
    """
    tab = _tables(topology)
    if tab.hops is None:
        from codesign.resources import check_memory

        # float64 distances + int32 predecessors from scipy, then int32 copies of both.
        n = topology.n_nodes
        check_memory("the all-pairs hop matrix (diameter, routes)", "nodes", n,
                     24.0 * n * n, "use a smaller network, or commands that need no "
                     "all-pairs routes (topology cost, synth --algorithm themis)")
        _make_room(topology, 8.0 * n * n)
        tab.hops, tab.pred = _bfs(topology, None)
    return tab.hops, tab.pred


def _bfs(topology, sources) -> tuple[np.ndarray, np.ndarray]:
    """Hop counts and BFS predecessors (int32) from ``sources`` (``None``: every node),
    one row per source, as :func:`all_pairs` has them: scipy's unweighted Dijkstra runs
    each source on its own, so a row does not depend on which other sources are asked."""
    from scipy.sparse.csgraph import shortest_path

    dist, pred = shortest_path(_adjacency(topology), method="D", unweighted=True,
                               return_predecessors=True, indices=sources)
    return np.where(np.isinf(dist), -1, dist).astype(np.int32), pred.astype(np.int32)


def _adjacency(topology):
    """The 0/1 CSR adjacency matrix of ``topology`` (parallel links merged)."""
    from scipy.sparse import csr_matrix

    n = topology.n_nodes
    adj = csr_matrix((np.ones(topology.n_links), (topology.src, topology.dst)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def _bfs_hops(topology, sources: np.ndarray) -> np.ndarray:
    """Hop-count rows (int32, -1: unreachable) from ``sources`` by breadth-first search.

    The same rows as :func:`_bfs` (a minimum hop count is unique), about 15 times faster
    per source: scipy's ``breadth_first_order`` visits each node and link once, where
    its unweighted Dijkstra keeps a heap (0.05 against 0.85 ms per source on a
    12,288-server leaf-spine).  Its predecessors break ties another way than
    Dijkstra's, so the ``"shortest"`` paths keep :func:`_bfs`; hop rows (hashed ECMP,
    hop counts) come from here.  Depths from the visiting order: one binary search per
    level.
    """
    from scipy.sparse.csgraph import breadth_first_order

    adj = _adjacency(topology)
    hops = np.full((len(sources), topology.n_nodes), -1, dtype=np.int32)
    pos = np.empty(topology.n_nodes, dtype=np.int64)
    for i, s in enumerate(np.asarray(sources).tolist()):
        order, pred = breadth_first_order(adj, int(s), directed=True, return_predecessors=True)
        # A queue's order: the nodes of one level are consecutive, and the parents'
        # positions of order[1:] never decrease, so each level ends where the parents
        # reach past the level before it.
        pos[order] = np.arange(order.size)
        parent = pos[pred[order[1:]]]
        ends = [1]
        while ends[-1] < order.size:
            ends.append(int(np.searchsorted(parent, ends[-1], side="left")) + 1)
        hops[i, order] = np.repeat(np.arange(len(ends), dtype=np.int32),
                                   np.diff([0, *ends]))
    return hops


def _tables_fit(topology) -> bool:
    """Whether the all-pairs tables are kept for ``topology``: built already, or their
    build (24 bytes per node pair) fits in :data:`TABLES_SHARE` of the memory limit.
    Otherwise routes and hop counts come from BFS rows of the sources asked, a block
    at a time (:func:`_row_blocks`), of which only the hop rows are kept: a 16,384-GPU
    rail-optimised fabric (19,712 nodes) needed 9 GB for its tables."""
    from codesign.resources import memory_limit

    n = topology.n_nodes
    return _tables(topology).hops is not None or 24.0 * n * n <= TABLES_SHARE * memory_limit()


def _row_blocks(topology, sources: np.ndarray, *, pred: bool = True):
    """``(block, hops rows, pred rows)`` for the distinct ``sources`` in blocks whose BFS
    rows take at most a sixteenth of the memory limit; from the kept tables when
    :func:`_tables_fit`.

    Without the tables, the rows of every source searched are kept (int16 where the node
    count allows, within the tables' share, :func:`_make_room`): hop rows, and
    predecessor rows when paths were asked.  An evaluation asks for the hop counts of the
    pairs it used and for its sources' paths (ring steps, ECMP), several times and again
    for every strategy of a search: a 98,304-GPU leaf-spine's evaluation spent 83 % of
    its 44 s searching the same sources again.  With ``pred=False`` only hop rows are
    wanted (``None`` in the third place).  Blocks hold sources in ascending order; with
    the tables, the one block is every node (callers pick their rows by
    :func:`numpy.searchsorted`)."""
    from codesign.resources import check_count, memory_limit

    if _tables_fit(topology):   # the tables themselves, rows by node id (no copies)
        hops, preds = all_pairs(topology)
        yield np.arange(topology.n_nodes), hops, preds if pred else None
        return
    sources = np.unique(np.asarray(sources, dtype=np.int64))
    n = topology.n_nodes
    tab = _tables(topology)
    kept = tab.pred_rows if pred else tab.rows
    todo = np.array([x for x in sources.tolist() if x not in kept], dtype=np.int64)
    check_count("minimum-hop routes by breadth-first search (diameter, routes)", "nodes", n,
                float(todo.size) * (n + topology.n_links),
                "use a smaller network, or commands that need no all-pairs routes "
                "(topology cost, synth --algorithm themis)", maximum=BFS_WORK_LIMIT)
    step = max(1, int(memory_limit() / 16 / (24.0 * n)))
    for a in range(0, sources.size, step):
        block = sources[a:a + step]
        missing = block[np.isin(block, todo)] if todo.size else block[:0]
        # The kept rows this block uses, taken before the search below: keeping the new
        # rows may evict them (_make_room), and a full share keeps none of the new ones
        # (a 100,000-server leaf-spine's routes failed with a KeyError).
        have = {x: (tab.rows[x], tab.pred_rows.get(x)) for x in block.tolist()
                if x in kept} if missing.size < block.size else {}
        hops = preds = None
        if missing.size:
            # Hop rows alone by breadth-first order, predecessors by Dijkstra (the
            # "shortest" paths' ties): _bfs_hops.
            hops, preds = _bfs(topology, missing) if pred else (_bfs_hops(topology, missing),
                                                                None)
            _keep_rows(topology, tab, missing, hops, preds)
        if missing.size == block.size:
            yield block, hops, preds
        else:
            fresh = (dict(zip(missing.tolist(), zip(hops, preds if pred else hops)))
                     if missing.size else {})
            rows = [have[x] if x in have else fresh[x] for x in block.tolist()]
            yield (block, np.stack([r[0] for r in rows]).astype(np.int32),
                   np.stack([r[1] for r in rows]).astype(np.int32) if pred else None)


def _keep_rows(topology, tab: _Tables, sources: np.ndarray, hops: np.ndarray,
               preds: np.ndarray | None = None) -> None:
    """Keep the hop rows of ``sources`` (and their predecessor rows, when given) while
    the tables' share has room for them."""
    from codesign.resources import memory_limit

    kind = np.int16 if topology.n_nodes < 2 ** 15 else np.int32   # (scipy's "none": -9999)
    small = hops.astype(kind)
    extra = None if preds is None else preds.astype(kind)
    nbytes = int(small.nbytes) + (0 if extra is None else int(extra.nbytes))
    _make_room(topology, nbytes)
    if tab.nbytes() + nbytes > TABLES_SHARE * memory_limit():
        return      # this topology's rows alone fill the share: search again later
    for i, x in enumerate(sources.tolist()):
        if x not in tab.rows:
            tab.rows[x] = small[i]
            tab.rows_bytes += int(small[i].nbytes)
        if extra is not None and x not in tab.pred_rows:
            tab.pred_rows[x] = extra[i]
            tab.rows_bytes += int(extra[i].nbytes)


def _pair_blocks(topology, src: np.ndarray, *, pred: bool = True):
    """:func:`_row_blocks` for pairs with sources ``src``: per block ``(ids, row, hops,
    preds)``, ``ids`` the pairs whose source is in the block and ``row`` their sources'
    rows in ``hops`` (and ``preds``)."""
    for block, hops, preds in _row_blocks(topology, src, pred=pred):
        ids = np.flatnonzero(np.isin(src, block))
        yield ids, np.searchsorted(block, src[ids]), hops, preds


def hop_counts(topology, src, dst) -> np.ndarray:
    """Minimum hop counts of node pairs (``-1``: unreachable), without the all-pairs
    tables when they do not fit (:func:`_tables_fit`)."""
    src, dst = _check_pairs(topology, src, dst)
    out = np.empty(src.size, dtype=np.int64)
    for ids, row, hops, _ in _pair_blocks(topology, src, pred=False):
        out[ids] = hops[row, dst[ids]]
    return out


def npu_hop_stats(topology) -> tuple[int, float]:
    """``(diameter, mean hop count)`` over ordered pairs of distinct NPUs, by BFS rows of
    the NPUs a block at a time when the all-pairs tables do not fit."""
    k = topology.npus
    if k < 2:
        return 0, 0.0
    top, total = 0, 0.0
    for block, hops, _ in _row_blocks(topology, np.arange(k), pred=False):
        h = hops[:int(np.count_nonzero(block < k)), :k]   # the NPUs' rows lead a block
        top, total = max(top, int(h.max())), total + float(h.sum())
    return top, total / (k * (k - 1))


def _hop_links(topology, u, v) -> np.ndarray:
    """The link used for each hop ``u -> v`` (-1: none): among parallel links the highest
    bandwidth, then the lowest id.

    The table is one entry per adjacent node pair (sorted ``u * n_nodes + v`` keys), not
    a dense ``n_nodes``-square one: 210 MB on a 5,000-node fabric, per topology."""
    tab = _tables(topology)
    if tab.best is None:
        n = topology.n_nodes
        key = topology.src.astype(np.int64) * n + topology.dst
        # The preferred link of every pair first: by key, then bandwidth down, then id.
        order = np.lexsort((np.arange(topology.n_links), -topology.bandwidth, key))
        first = np.ones(order.size, dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        tab.best = (key[order][first], order[first].astype(np.int64))
    keys, links = tab.best
    want = np.asarray(u, dtype=np.int64) * topology.n_nodes + np.asarray(v, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
    if keys.size == 0:
        return np.full(want.shape, -1, dtype=np.int64)
    return np.where(keys[at] == want, links[at], -1)


def _check_pairs(topology, src, dst, *, npus_only: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``src, dst`` as int64 arrays of one shape, every id a node (or an NPU) of ``topology``."""
    src = np.atleast_1d(np.asarray(src, dtype=np.int64))
    dst = np.atleast_1d(np.asarray(dst, dtype=np.int64))
    if src.shape != dst.shape:
        raise invalid("route pairs", f"{src.size} sources and {dst.size} destinations",
                      "as many sources as destinations")
    limit = topology.npus if npus_only else topology.n_nodes
    bad = (src < 0) | (src >= limit) | (dst < 0) | (dst >= limit)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise invalid("route endpoint", f"{src[i]}->{dst[i]}",
                      f"{'NPU' if npus_only else 'node'} ids in 0..{limit - 1}")
    return src, dst


def predecessor_walk(src: np.ndarray, dst: np.ndarray, prev_of
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Walk every pair's path back from ``dst`` to ``src``, all pairs at once.

    Parameters
    ----------
    src, dst : ndarray of int
        Pair endpoints (equal ones have an empty path).
    prev_of : callable
        ``prev_of(active, cur) -> prev``: for the pairs ``active`` (indices) now at nodes
        ``cur``, the node before ``cur`` on their path (negative: unreachable).

    Returns
    -------
    ptr : ndarray of int
        CSR pointer: pair ``i``'s hops are ``ptr[i]:ptr[i+1]``, source to destination.
    prev, nxt : ndarray of int
        The two nodes of every hop, in that order.

    Raises
    ------
    InfeasibleError
        If some pair's destination is not reachable from its source.
    """
    k = src.size
    prevs: list[np.ndarray] = []
    nxts: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    cur = dst.copy()
    active = np.flatnonzero(cur != src)
    while active.size:
        prev = np.asarray(prev_of(active, cur[active]), dtype=np.int64)
        if np.any(prev < 0):
            i = int(active[np.flatnonzero(prev < 0)[0]])
            raise InfeasibleError(f"node {dst[i]} is not reachable from node {src[i]}",
                                  reason="connectivity")
        prevs.append(prev)
        nxts.append(cur[active])
        owners.append(active)
        cur[active] = prev
        active = active[prev != src[active]]
    if not owners:
        z = np.zeros(0, dtype=np.int64)
        return np.zeros(k + 1, dtype=np.int64), z, z
    owner = np.concatenate(owners)
    step = np.concatenate([np.full(a.size, j) for j, a in enumerate(owners)])
    # The walk went dst -> src: sort by owner, then by descending step.
    order = np.lexsort((-step, owner))
    ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=k))]).astype(np.int64)
    return ptr, np.concatenate(prevs)[order], np.concatenate(nxts)[order]


def _node_paths_to_links(topology, ptr, prev, nxt) -> tuple[np.ndarray, np.ndarray]:
    return ptr, _hop_links(topology, prev, nxt) if prev.size else prev


def shortest_paths(topology, src, dst) -> tuple[np.ndarray, np.ndarray]:
    """One fixed minimum-hop path per pair (``"shortest"``, module docstring), CSR.

    Parameters
    ----------
    topology : Topology
        Any network (builds the all-pairs tables, :func:`all_pairs`).
    src, dst : array_like of int
        Node ids (NPUs or switches); ``src == dst`` gives an empty path.

    Returns
    -------
    ptr, links : ndarray
        CSR paths as :func:`clos_paths` returns them.

    Raises
    ------
    InvalidSpecError
        Node ids out of range.
    InfeasibleError
        A destination unreachable from its source.
    """
    src, dst = _check_pairs(topology, src, dst)
    parts = []
    for ids, row, _, pred in _pair_blocks(topology, src):
        ptr, prev, nxt = predecessor_walk(src[ids], dst[ids],
                                          lambda a, cur: pred[row[a], cur])
        parts.append((ids, *_node_paths_to_links(topology, ptr, prev, nxt)))
    return _joined(src.size, parts)


def _joined(k: int, parts: list) -> tuple[np.ndarray, np.ndarray]:
    """CSR paths of ``k`` pairs from per-block parts (one block: as it is)."""
    if len(parts) == 1 and parts[0][0].size == k:
        return parts[0][1], parts[0][2]
    return _merge(k, parts)


def route(topology, src: int, dst: int) -> tuple[int, ...]:
    """The ``"shortest"`` path of one pair as a tuple of link ids (:meth:`Topology.route`).

    Raises
    ------
    InvalidSpecError
        If a node id is out of range.
    InfeasibleError
        If ``dst`` cannot be reached from ``src``.
    """
    for name_, node in (("src", src), ("dst", dst)):
        if not 0 <= node < topology.n_nodes:
            raise invalid(f"route {name_}", node, f"a node id in 0..{topology.n_nodes - 1}")
    if src == dst:
        return ()
    # One pair: the walk of shortest_paths in plain Python (no array set-up per call).
    if _tables_fit(topology):
        row = all_pairs(topology)[1][src]
    else:
        row = next(_row_blocks(topology, [src]))[2][0]   # the one source's BFS row
    if row[dst] < 0 and dst != src:
        raise InfeasibleError(f"node {dst} is not reachable from node {src} in "
                              f"{topology.name!r}", reason="connectivity")
    nodes = [int(dst)]
    while nodes[-1] != src:
        nodes.append(int(row[nodes[-1]]))
    nodes.reverse()
    return tuple(_hop_links(topology, nodes[:-1], nodes[1:]).tolist())


#: Largest padded in-neighbour matrix (nodes x largest in-degree, int64), bytes: the
#: padded layout is 10-15 % faster for ECMP than CSR (measured on a k=16 fat-tree and a
#: 128-server rail-optimised fabric), CSR needs no more than the links.
_PADDED_BYTES = 32 * 2 ** 20


def _in_neighbours(topology) -> tuple[np.ndarray, np.ndarray | None]:
    """Distinct in-neighbours per node, each node's in ascending id order, cached: a
    matrix padded with -1 to the largest in-degree ``(matrix, None)`` when it is small,
    else CSR ``(start, nbrs)`` (the padded matrix of a 100,000-server leaf-spine, whose
    spines have 75,000 ports, took 70 GB)."""
    tab = _tables(topology)
    if tab.in_nbrs is None:
        t = topology
        pairs = np.unique(np.stack([t.dst, t.src], axis=1), axis=0)   # sorted by (dst, src)
        counts = np.bincount(pairs[:, 0], minlength=t.n_nodes)
        start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        width = int(counts.max()) if counts.size else 0
        if 8.0 * t.n_nodes * max(width, 1) <= _PADDED_BYTES:
            out = np.full((t.n_nodes, max(width, 1)), -1, dtype=np.int64)
            out[pairs[:, 0], np.arange(pairs.shape[0]) - start[pairs[:, 0]]] = pairs[:, 1]
            tab.in_nbrs = (out, None)
        else:
            tab.in_nbrs = (start, pairs[:, 1].astype(np.int64))
    return tab.in_nbrs


def _ecmp_prev(topology, src: np.ndarray, dst: np.ndarray, cur: np.ndarray,
               seed: int, hops: np.ndarray, row: np.ndarray) -> np.ndarray:
    """A predecessor of ``cur`` on a minimum-hop path from ``src``, picked by a hash of
    (src, dst, cur, seed) among all of them (per-flow hashing); ``hops[row]`` are the
    sources' hop-count rows."""
    want = hops[row, cur] - 1
    # One hop from the source the only predecessor at distance 0 is the source itself:
    # answered without gathering cur's in-neighbours (a big switch of an ``ideal`` fabric
    # has tens of thousands, for every pair routed through it).
    far = np.flatnonzero(want != 0)
    if far.size == want.size:
        return _ecmp_pick(topology, src, dst, cur, seed, hops, row, want)
    out = src.astype(np.int64, copy=True)
    if far.size:
        out[far] = _ecmp_pick(topology, src[far], dst[far], cur[far], seed, hops, row[far],
                              want[far])
    return out


def _ecmp_pick(topology, src, dst, cur, seed: int, hops, row, want) -> np.ndarray:
    """:func:`_ecmp_prev`'s hashed choice among ``cur``'s in-neighbours at ``want`` hops
    from the source (-1 where there is none)."""
    with np.errstate(over="ignore"):          # the products wrap modulo 2^64 on purpose
        h = (src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             ^ dst.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
             ^ cur.astype(np.uint64) * np.uint64(0x94D049BB133111EB)
             ^ np.uint64(seed & 0xFFFFFFFF) * np.uint64(0xD6E8FEB86659FD93))
    h ^= h >> np.uint64(31)
    table, nbrs = _in_neighbours(topology)
    if nbrs is None:                                         # padded: (A, width)
        cand = table[cur]
        safe = np.where(cand < 0, 0, cand)
        ok = (cand >= 0) & (hops[row[:, None], safe] == want[:, None])
        count = ok.sum(axis=1)
        pick = (h % np.maximum(count, 1).astype(np.uint64)).astype(np.int64)
        sel = ok & (np.cumsum(ok, axis=1) - 1 == pick[:, None])
        return np.where(count > 0, cand[np.arange(cand.shape[0]), sel.argmax(axis=1)], -1)
    lo = table[cur]                                          # CSR: one entry per candidate
    cnt = table[cur + 1] - lo
    owner = np.repeat(np.arange(cur.size), cnt)
    first = np.cumsum(cnt) - cnt                             # each pair's first candidate
    cand = nbrs[np.repeat(lo - first, cnt) + np.arange(owner.size)]
    ok = hops[row[owner], cand] == want[owner]
    count = np.bincount(owner, weights=ok, minlength=cur.size).astype(np.int64)
    pick = (h % np.maximum(count, 1).astype(np.uint64)).astype(np.int64)
    ok_before = np.cumsum(ok) - ok             # rank among the pair's valid candidates
    sel = ok & (ok_before - ok_before[np.repeat(first, cnt)] == pick[owner])
    out = np.full(cur.size, -1, dtype=np.int64)
    out[owner[sel]] = cand[sel]
    return out


def ecmp_hashed_paths(topology, src, dst, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One hashed minimum-hop path per pair (``"ecmp_hashed"``, module docstring), CSR.

    Same parameters, result and errors as :func:`shortest_paths`; ``seed`` picks the
    hash function.
    """
    src, dst = _check_pairs(topology, src, dst)
    parts = []
    for ids, row, hops, _ in _pair_blocks(topology, src, pred=False):
        s, d = src[ids], dst[ids]
        ptr, prev, nxt = predecessor_walk(
            s, d, lambda a, cur: _ecmp_prev(topology, s[a], d[a], cur, seed, hops, row[a]))
        parts.append((ids, *_node_paths_to_links(topology, ptr, prev, nxt)))
    return _joined(src.size, parts)


def pair_paths(topology, src, dst, *, method: str = "shortest", seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """One path per pair by ``method`` (:data:`PAIR_PATH_METHODS`), CSR ``(ptr, links)``.

    ``"shortest"``: :func:`shortest_paths`; ``"ecmp"`` / ``"ecmp_hashed"``:
    :func:`ecmp_hashed_paths`; ``"dmodk"``: :func:`clos_paths` (Clos fabrics only).  On a
    Clos fabric with scale-up domains, two GPUs of one domain take its crossbar whatever
    the method (as :func:`clos_paths` routes them).
    """
    if method == "dmodk":
        return clos_paths(topology, src, dst, method="dmodk", seed=seed)
    if method not in ("shortest", "ecmp", "ecmp_hashed"):
        raise invalid("routing", method, f"one of {', '.join(PAIR_PATH_METHODS)}")

    def route(a, b):
        if method == "shortest":
            return shortest_paths(topology, a, b)
        return ecmp_hashed_paths(topology, a, b, seed=seed)

    if not (is_clos(topology) and "scaleup_switches" in topology.params):
        return route(src, dst)
    # Two GPUs of one scale-up domain talk over its crossbar, as clos_paths routes them:
    # a path through a NIC and a leaf has as few hops when both GPUs hang off one leaf,
    # and hashed ECMP took it for some pairs (at the NIC's rate, not NVLink's).
    src, dst = _check_pairs(topology, src, dst)
    return _over_crossbars(topology, clos_structure(topology), src, dst, route)


def _over_crossbars(topology, cs: "ClosStructure", src: np.ndarray, dst: np.ndarray,
                    route) -> tuple[np.ndarray, np.ndarray]:
    """CSR paths of the pairs: two NPUs of one scale-up domain over its crossbar (their
    links to and from it), every other pair by ``route(src, dst)``."""
    npus = topology.npus
    both = (src < npus) & (dst < npus)
    local = np.zeros(src.size, dtype=bool)
    local[both] = (cs.domain[src[both]] == cs.domain[dst[both]]) & (src[both] != dst[both])
    if not local.any():
        return route(src, dst)
    li, fi = np.flatnonzero(local), np.flatnonzero(~local)
    lptr = np.arange(0, 2 * li.size + 1, 2, dtype=np.int64)
    llinks = np.stack([cs.su_up[src[li]], cs.su_down[dst[li]]], axis=1).ravel()
    fptr, flinks = route(src[fi], dst[fi])
    return _merge(src.size, [(li, lptr, llinks), (fi, fptr, flinks)])


def path_counts(topology) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs hop matrix and number of minimum-hop paths ``sigma`` (parallel links
    count once), by BFS level (Brandes 2001): ``sigma(s, v) = sum over in-neighbours u
    with h(s, u) = h(s, v) - 1 of sigma(s, u)``."""
    n = topology.n_nodes
    hops = np.asarray(all_pairs(topology)[0], dtype=np.int64)
    adj = np.zeros((n, n))
    adj[topology.src, topology.dst] = 1.0
    sigma = np.eye(n)
    for d in range(1, int(hops[np.isfinite(hops)].max()) + 1 if hops.size else 1):
        nxt = (sigma * (hops == d - 1)) @ adj
        sigma += nxt * (hops == d)
    return hops, sigma


def ecmp_split_loads(topology, pairs, counts=None) -> np.ndarray:
    """Bytes per link when every pair's bytes are split evenly over all its minimum-hop
    paths (``"ecmp_split"``, module docstring).

    Parameters
    ----------
    topology : Topology
        The network.
    pairs : iterable of (src node, dst node, bytes)
        Traffic.
    counts : tuple, optional
        Cached :func:`path_counts` of ``topology``.

    Returns
    -------
    numpy.ndarray, shape (n_links,)
        Load of every directed link, bytes.  Link ``(u, v)`` carries the fraction
        ``sigma(s, u) sigma(v, t) / sigma(s, t)`` of pair ``(s, t)`` when it lies on a
        minimum-hop path (``h(s, u) + 1 + h(v, t) = h(s, t)``); parallel links share
        their hop's fraction in proportion to their bandwidth.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> load = ecmp_split_loads(from_spec("ring:4,bw=1GB/s"), [(0, 2, 8.0)])
    >>> sorted(load.tolist())                      # two 2-hop paths, 4 bytes each
    [0.0, 0.0, 0.0, 0.0, 4.0, 4.0, 4.0, 4.0]
    """
    hops, sigma = counts if counts is not None else path_counts(topology)
    src, dst = topology.src, topology.dst
    bw = np.asarray(topology.bandwidth, dtype=float)
    # Parallel links between the same (u, v) split their hop's share by bandwidth.
    key = src.astype(np.int64) * topology.n_nodes + dst
    _, inverse = np.unique(key, return_inverse=True)
    share = bw / np.bincount(inverse, weights=bw)[inverse]
    load = np.zeros(len(src))
    for s, t, b in pairs:
        if s == t or b <= 0:
            continue
        on = hops[s, src] + 1 + hops[dst, t] == hops[s, t]
        frac = np.where(on, sigma[s, src] * sigma[dst, t], 0.0) / sigma[s, t]
        load += b * frac * share
    return load


def neighbour_lists(n: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Distinct out-neighbours of every node, ascending (parallel links collapse)."""
    keys = np.unique(src.astype(np.int64) * n + dst)
    out: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip((keys // n).tolist(), (keys % n).tolist()):
        out[u].append(v)
    return out


# k shortest simple paths by hop count (TopoOpt Algorithm 1 line 20, MP routing): for
# L = h(s, t), h(s, t) + 1, ... (h the BFS hop matrix) a depth-first search extends a path
# s .. u of l hops to a neighbour v only when l + 1 + h(v, t) <= L and keeps the paths of
# exactly L hops, neighbours in ascending id order.  This yields the same path lengths as
# Yen's algorithm (networkx ``shortest_simple_paths``, the oracle in the tests) at a
# fraction of the cost, because the hop matrix is computed once for the whole topology.
def k_shortest_paths(nbrs: list[list[int]], hops: np.ndarray, s: int, t: int, k: int, *,
                     max_extra_hops: int = MAX_EXTRA_HOPS) -> list[list[int]]:
    """Up to ``k`` simple paths ``[s, ..., t]`` with the fewest hops.

    Parameters
    ----------
    nbrs : list of list of int
        Out-neighbours (:func:`neighbour_lists`).
    hops : numpy.ndarray
        All-pairs hop counts (``-1`` unreachable), e.g. ``Topology.hop_matrix``.
    s, t : int
        Distinct endpoints.
    k : int
        Paths wanted (>= 1).
    max_extra_hops : int, optional
        Longest detour considered beyond the shortest path.

    Returns
    -------
    list of list of int
        Paths sorted by hop count; fewer than ``k`` if no more exist within
        ``h(s, t) + max_extra_hops`` hops; empty if ``t`` is unreachable.
    """
    h0 = int(hops[s, t])
    if h0 < 0 or s == t:
        return [] if s != t else [[s]]
    col = hops[:, t].tolist()
    found: list[list[int]] = []
    for limit in range(h0, h0 + max_extra_hops + 1):
        # Depth-first with an explicit stack (a path may be thousands of hops long on a
        # sparse fabric, beyond Python's recursion limit): ``path[i]``'s neighbours are
        # tried from position ``nxt[i]`` on, in ascending order.
        path, nxt, on_path = [s], [0], {s}
        while path and len(found) < k:
            u = path[-1]
            budget = limit - len(path)       # hops left after the next one
            nb = nbrs[u]
            if budget == 0:
                if t in nb:
                    found.append(path + [t])
                v = None
            else:
                v = None
                i = nxt[-1]
                while i < len(nb):
                    w = nb[i]
                    i += 1
                    hw = col[w]
                    if w != t and w not in on_path and 0 <= hw <= budget:
                        v = w
                        break
                nxt[-1] = i
            if v is None:                    # u is done: back up
                on_path.discard(path.pop())
                nxt.pop()
            else:
                path.append(v)
                nxt.append(0)
                on_path.add(v)
        if len(found) >= k:
            break
    return found


# ------------------------------------------------------------------ Clos fabrics
@dataclass(frozen=True)
class ClosStructure:
    """What up/down routing needs to know about a Clos topology.

    Attributes
    ----------
    level : ndarray of int
        Per node: 0 for NPUs, 1.. for Clos switches (leaves = 1), -1 for scale-up
        crossbars.
    up_ptr, up_links : ndarray of int
        CSR of each node's uplinks (links to the next level), sorted by (neighbour
        id, link id).
    partner : ndarray of int
        The opposite link of every link (same cable).
    stride : ndarray of int
        ``P_l`` per level (D-mod-k divisor).
    rank : ndarray of int
        Each NPU's position in the tree (``node_attrs["clos_rank"]``).
    domain : ndarray of int or None
        Scale-up domain of each NPU (``None`` without scale-up).
    su_up, su_down : ndarray of int or None
        Per NPU, its link to / from its crossbar.
    """

    level: np.ndarray
    up_ptr: np.ndarray
    up_links: np.ndarray
    partner: np.ndarray
    stride: np.ndarray
    rank: np.ndarray
    domain: np.ndarray | None
    su_up: np.ndarray | None
    su_down: np.ndarray | None


def is_clos(topology) -> bool:
    """Whether ``topology`` carries a Clos description (``params["switch_levels"]``)."""
    return "switch_levels" in getattr(topology, "params", {})


def _partner(topology) -> np.ndarray:
    """Opposite link of every directed link (k-th parallel u->v pairs with k-th v->u)."""
    n = topology.n_nodes
    src, dst = topology.src.astype(np.int64), topology.dst.astype(np.int64)
    key = src * n + dst
    order = np.lexsort((np.arange(src.size), key))
    sk = key[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    rank = np.empty(src.size, dtype=np.int64)
    rank[order] = np.arange(src.size) - np.repeat(starts, np.diff(np.r_[starts, sk.size]))
    width = int(rank.max()) + 1 if rank.size else 1
    combo = key * width + rank
    rev = (dst * n + src) * width + rank
    corder = np.argsort(combo)
    pos = np.searchsorted(combo[corder], rev)
    pos = np.minimum(pos, combo.size - 1)
    found = combo[corder][pos] == rev
    if not np.all(found):
        i = int(np.flatnonzero(~found)[0])
        raise invalid(f"{topology.name} link {i}", f"{src[i]}->{dst[i]}",
                      "a cable (a link back the other way) for up/down routing")
    return corder[pos]


def clos_structure(topology) -> ClosStructure:
    """The (cached) :class:`ClosStructure` of a Clos topology.

    Raises
    ------
    InvalidSpecError
        If the topology has no ``switch_levels`` (not a Clos family), or a node's
        uplinks are not uniform enough to route (an NPU without a leaf).
    """
    hit = _CACHE.get(topology)
    if hit is not None:
        return hit
    if not is_clos(topology):
        raise invalid("up/down routing topology", topology.name,
                      "a Clos family with params['switch_levels'] (fattree, leafspine, railopt, "
                      "multiplane); use shortest-path routing on other networks")
    n_nodes, npus = topology.n_nodes, topology.npus
    level = np.full(n_nodes, -1, dtype=np.int64)
    level[:npus] = 0
    for i, (first, count) in enumerate(topology.params["switch_levels"]):
        level[first:first + count] = i + 1
    src, dst = topology.src.astype(np.int64), topology.dst.astype(np.int64)
    up = (level[src] >= 0) & (level[dst] == level[src] + 1)
    ids = np.flatnonzero(up)
    ids = ids[np.lexsort((ids, dst[ids], src[ids]))]
    counts = np.bincount(src[ids], minlength=n_nodes)
    up_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if np.any(counts[:npus] == 0):
        bad = int(np.flatnonzero(counts[:npus] == 0)[0])
        raise invalid(f"{topology.name} NPU {bad}", "no uplink", "every NPU cabled to a leaf")
    tiers = int(level.max())
    deg = [int(counts[level == l].max()) if np.any(level == l) else 1 for l in range(tiers)]
    stride = np.cumprod([1] + deg).astype(np.int64)
    rank = np.asarray(topology.node_attrs.get("clos_rank", np.arange(npus)), dtype=np.int64)
    domain = su_up = su_down = None
    partner = _partner(topology)
    if "scaleup_switches" in topology.params:
        first, count = topology.params["scaleup_switches"]
        to_x = (src < npus) & (dst >= first) & (dst < first + count)
        su_up = np.full(npus, -1, dtype=np.int64)
        su_up[src[to_x]] = np.flatnonzero(to_x)
        su_down = partner[su_up]
        domain = dst[su_up] - first
    out = ClosStructure(level, up_ptr, ids, partner, stride, rank, domain, su_up, su_down)
    _CACHE[topology] = out
    return out

def _hash(src: np.ndarray, dst: np.ndarray, level: int, seed: int) -> np.ndarray:
    """A 64-bit mix of (src, dst, level, seed): per-flow ECMP hash (splitmix64 finaliser)."""
    h = (src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
         ^ dst.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
         ^ np.uint64(((level * 0x94D049BB + seed) * 0xD6E8FEB86659FD93) & 0xFFFFFFFFFFFFFFFF))
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


def _walk(topology, cs: ClosStructure, src: np.ndarray, dst: np.ndarray, method: str,
          seed: int, first_choice: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Up/down paths of pairs that are not inside one scale-up domain (CSR)."""
    k = src.size
    x, y = src.copy(), dst.copy()
    key = cs.rank[dst]
    ups: list[np.ndarray] = []      # per step: (pair index, link) of the source climb
    downs: list[np.ndarray] = []    # per step: mirrored links of the destination climb
    owners: list[np.ndarray] = []
    active = np.flatnonzero(x != y)
    lvl = 0
    while active.size:
        if lvl >= cs.stride.size:
            i = int(active[0])
            raise InfeasibleError(f"{topology.name}: up/down climbs from {src[i]} and {dst[i]} "
                                  "do not meet at the top of the Clos", reason="connectivity")
        xa, ya = x[active], y[active]
        nx = cs.up_ptr[xa + 1] - cs.up_ptr[xa]
        ny = cs.up_ptr[ya + 1] - cs.up_ptr[ya]
        if np.any(nx == 0) or np.any(ny == 0):
            i = int(active[np.flatnonzero((nx == 0) | (ny == 0))[0]])
            raise InfeasibleError(f"{topology.name}: no uplink above node {x[i]} or {y[i]} on "
                                  f"the way from {src[i]} to {dst[i]}", reason="connectivity")
        if lvl == 0 and first_choice is not None:
            pick = first_choice[active]
        elif method == "dmodk":
            # Sprayed flows fix the plane themselves: inside a plane D-mod-k counts
            # destinations without the plane digit.
            div = cs.stride[lvl] // (cs.stride[1] if first_choice is not None else 1)
            pick = key[active] // div
        else:
            pick = _hash(src[active], dst[active], lvl, seed).astype(np.int64, copy=False) \
                & np.int64(0x7FFFFFFFFFFF)
        lx = cs.up_links[cs.up_ptr[xa] + pick % nx]
        ly = cs.up_links[cs.up_ptr[ya] + pick % ny]
        ups.append(lx)
        downs.append(cs.partner[ly])
        owners.append(active)
        x[active] = topology.dst[lx]
        y[active] = topology.dst[ly]
        active = active[x[active] != y[active]]
        lvl += 1
    if not owners:
        return np.zeros(k + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    n_steps = len(owners)
    owner = np.concatenate(owners + owners)
    links = np.concatenate(ups + downs)
    # Order: up steps ascending, then down steps descending (mirror).
    pos = np.concatenate([np.full(o.size, j) for j, o in enumerate(owners)]
                         + [np.full(o.size, 2 * n_steps - 1 - j) for j, o in enumerate(owners)])
    order = np.lexsort((pos, owner))
    counts = np.bincount(owner, minlength=k)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), links[order]


def _merge(k: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
           ) -> tuple[np.ndarray, np.ndarray]:
    """Merge CSR path sets over disjoint pair subsets ``(pair ids, ptr, links)``."""
    counts = np.zeros(k, dtype=np.int64)
    for ids, ptr, _ in parts:
        counts[ids] = np.diff(ptr)
    out_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    links = np.empty(int(out_ptr[-1]), dtype=np.int64)
    for ids, ptr, lk in parts:
        lens = np.diff(ptr)
        if lk.size:
            dest = np.repeat(out_ptr[ids], lens) + (np.arange(lk.size) - np.repeat(ptr[:-1], lens))
            links[dest] = lk
    return out_ptr, links


def clos_paths(topology, src, dst, *, method: str = "dmodk", seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """One up/down path per pair (module docstring), as CSR ``(ptr, links)``.

    Parameters
    ----------
    topology : Topology
        A Clos family (``params["switch_levels"]``).
    src, dst : array_like of int
        NPU ids; ``src == dst`` gives an empty path.
    method : {"dmodk", "ecmp"}
        Uplink choice: deterministic destination-mod-k or seeded per-flow hash.
    seed : int
        ECMP hash seed.

    Returns
    -------
    ptr, links : ndarray
        Path of pair ``i`` is ``links[ptr[i]:ptr[i+1]]`` (link ids, source to
        destination), the format of :class:`evaluators.netsim.Messages`.

    Raises
    ------
    InvalidSpecError
        Unknown method, bad ids, or not a Clos topology.
    """
    check_choice("routing method", method, ROUTING_METHODS)
    src, dst = _check_pairs(topology, src, dst, npus_only=True)
    cs = clos_structure(topology)

    def walk(a, b):
        return _walk(topology, cs, a, b, method, int(seed))

    if cs.domain is None:
        return walk(src, dst)
    return _over_crossbars(topology, cs, src, dst, walk)


def spray_paths(topology, src, dst) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every pair split evenly over its source's uplinks (planes), D-mod-k above.

    Returns
    -------
    ptr, links : ndarray
        CSR paths of the sub-flows.
    owner : ndarray of int
        Pair index of every sub-flow.
    share : ndarray of float
        Fraction of the pair's bytes on every sub-flow (sums to 1 per pair).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("multiplane:8,planes=2,radix=4")
    >>> ptr, links, owner, share = spray_paths(t, [0], [5])
    >>> owner.tolist(), share.tolist()
    ([0, 0], [0.5, 0.5])
    """
    src, dst = _check_pairs(topology, src, dst, npus_only=True)
    cs = clos_structure(topology)
    local = np.zeros(src.size, dtype=bool) if cs.domain is None else \
        (cs.domain[src] == cs.domain[dst])
    local |= src == dst
    ways = np.where(local, 1, cs.up_ptr[src + 1] - cs.up_ptr[src])
    owner = np.repeat(np.arange(src.size), ways)
    choice = np.arange(owner.size) - np.repeat(np.cumsum(ways) - ways, ways)
    s, d = src[owner], dst[owner]
    fi = np.flatnonzero(~local[owner])
    li = np.flatnonzero(local[owner] & (s != d))
    parts = []
    if fi.size:
        fptr, flinks = _walk(topology, cs, s[fi], d[fi], "dmodk", 0,
                             first_choice=choice[fi])
        parts.append((fi, fptr, flinks))
    if li.size:
        lptr = np.arange(0, 2 * li.size + 1, 2, dtype=np.int64)
        parts.append((li, lptr, np.stack([cs.su_up[s[li]], cs.su_down[d[li]]], axis=1).ravel()))
    ptr, links = _merge(owner.size, parts)
    return ptr, links, owner, 1.0 / ways[owner]


def ring_order(topology, members) -> list[int]:
    """NCCL-like ring order of ``members`` (NPU ids) on a Clos fabric (module docstring).

    Members are grouped by scale-up domain (NVLink first), domains in tree order;
    inside a domain GPUs go by rail, alternately up and down ("snake"), so that
    every hop between domains joins two GPUs of the same rail.  Without scale-up
    domains members follow the tree (``clos_rank``), so ring neighbours share a
    leaf wherever the leaf holds both.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("railopt:4,gpus=2,radix=4")
    >>> ring_order(t, range(8))
    [0, 1, 3, 2, 4, 5, 7, 6]
    """
    m = np.unique(np.asarray(list(members), dtype=np.int64))
    if m.size and (m[0] < 0 or m[-1] >= topology.npus):
        raise invalid("ring members", m.tolist(), f"NPU ids in 0..{topology.npus - 1}")
    cs = clos_structure(topology)
    rank = cs.rank[m]
    if cs.domain is None:
        return m[np.argsort(rank, kind="stable")].tolist()
    dom = cs.domain[m]
    # Domains in the order of their lowest tree position; inside, by tree position.
    first = {}
    for d, r in zip(dom.tolist(), rank.tolist()):
        first[d] = min(first.get(d, r), r)
    dom_order = sorted(first, key=first.get)
    out: list[int] = []
    for j, d in enumerate(dom_order):
        sel = m[dom == d]
        sel = sel[np.argsort(cs.rank[sel], kind="stable")].tolist()
        out.extend(sel if j % 2 == 0 else sel[::-1])
    return out


def _whole_grid_sizes(topology) -> list[int] | None:
    """Sizes of the dimensions of a torus or mesh of several dimensions over all its NPUs."""
    sizes = [int(d.size) for d in getattr(topology, "dims", ()) or ()]
    return sizes if len(sizes) > 1 and int(np.prod(sizes)) == topology.npus else None


def is_grid(topology) -> bool:
    """Whether ``topology`` is a whole direct-connect torus or mesh of several dimensions
    (dimension-wise collectives apply; a degraded one is not: :func:`grid_coordinates`)."""
    return topology.switches == 0 and _whole_grid_sizes(topology) is not None


def grid_coordinates(topology) -> tuple[list[int] | None, np.ndarray]:
    """``(sizes, ids)``: the grid a torus or mesh spans (sizes of its dimensions, the
    first varying fastest) and every NPU's id in that grid; a degraded grid
    (:func:`topologies.failures.degrade`) keeps the intact one's.  ``(None, ids)`` when
    ``topology`` is not a multi-dimensional grid."""
    ids = np.arange(topology.npus, dtype=np.int64)
    sizes = _whole_grid_sizes(topology)
    if sizes is not None:
        return sizes, ids
    grid = topology.params.get("grid_sizes")
    if grid and "npu_ids" in topology.params:
        return [int(k) for k in grid], np.asarray(topology.params["npu_ids"], dtype=np.int64)
    return None, ids


def grid_ring_order(topology, members) -> list[int]:
    """Ring order of ``members`` on a multi-dimensional grid (torus or mesh): the
    boustrophedon (reflected mixed-radix Gray code) sweep of the grid, in which
    consecutive nodes differ by one step in one dimension.

    Over the whole grid every ring hop but the closing one is a single link, where the
    rank order (dimension 0 fastest) jumps across a row every ``size_0`` hops; a subset
    keeps the sweep's order.  Node ``i`` has coordinates ``i = x_0 + k_0 (x_1 + k_1
    (x_2 + ...))`` (the :class:`~topologies.Dimension` order, the first varying fastest).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> grid_ring_order(from_spec("torus:3x2"), range(6))
    [0, 1, 2, 5, 4, 3]
    """
    m = np.unique(np.asarray(list(members), dtype=np.int64))
    sizes, ids = grid_coordinates(topology)
    if sizes is None:
        raise invalid("grid ring order topology", topology.name,
                      "a torus or mesh whose dimensions multiply to its NPUs (or what is "
                      "left of one after failures)")
    if m.size and (m[0] < 0 or m[-1] >= topology.npus):
        raise invalid("ring members", m.tolist(), f"NPU ids in 0..{topology.npus - 1}")
    coords, rest = [], ids[m]
    for k in sizes:
        coords.append(rest % k)
        rest = rest // k
    # Reflected Gray position, most significant (slowest) dimension first: a dimension
    # is swept backwards when the sweep of the dimensions above it is at an odd step.
    pos = np.zeros(m.size, dtype=np.int64)
    for k, x in zip(reversed(sizes), reversed(coords)):
        pos = pos * k + np.where(pos % 2 == 1, k - 1 - x, x)
    return m[np.argsort(pos, kind="stable")].tolist()


def max_link_flows(topology, ptr: np.ndarray, links: np.ndarray) -> int:
    """Most paths sharing one directed link (1 = no two flows collide)."""
    if links.size == 0:
        return 0
    return int(np.bincount(links, minlength=topology.n_links).max())
