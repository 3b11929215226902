"""Time-expanded networks and their index bookkeeping (thesis Sec. 3.1).

The fluid LPs of this package route one *block* of commodities at a time: the
data of one origin ``o`` to its destinations ``D`` (one commodity ``(o, d)``
per destination).  Each block lives on its own :class:`Network`, the
**time-expanded network** ``G^T`` (thesis Sec. 3.1, "Time-expanded
networks"): a copy ``(v, t)`` of every node for ``t = 0..T``, an edge
``(u, t) -> (v, t+1)`` for every link ``u -> v`` and step ``t < T``, and a
hold-over edge ``(v, t) -> (v, t+1)`` at the nodes that store data (NPUs and
memory; switches do not).  Origin ``(o, 0)``, sinks ``(d, T)``.

Pruning (exact): a commodity ``(o, d)`` may use an edge ``(u, t) -> (v, t+1)``
only if ``hops(o, u) <= t`` and ``t + 1 + hops(v, d) <= T`` -- otherwise no
path from ``(o, 0)`` to ``(d, T)`` passes through it.  Nodes that no
commodity can use are dropped, so blocks stay small.

**Switch copies** (thesis Sec. 3.1, "Formulation via duplicate vertices").
A node that may not copy (a switch; for reductions, also memory) can be
*split*: each of its time copies ``(s, t)`` is replaced by one copy per
*entry* -- the node ``(u, t0)`` of a copying vertex whose data enters the
non-copying region there -- and a labelled copy only receives data from its
own entry (directly or through copies with the same label).  The thesis
labels duplicates by the copying vertex where the data *leaves* the switch;
labelling by where it *enters* makes every labelled region single-source,
which with usage conservation (3.12) makes the LP exact there (a single
entry may copy, so any conserved usage flow it feeds is realisable; with exit
labels two entries' streams could still merge in one copy).  Splits are whole connected
regions of non-copying nodes (:func:`noncopy_components`), chosen by the
refinement loop in :mod:`evaluators.mcf.switches`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Graph", "Network", "time_expanded", "noncopy_components", "HOLD", "UNREACHABLE"]

#: ``Network.link`` value of a hold-over (storage) edge.
HOLD = -1
#: Hop count used for unreachable pairs (larger than any step count).
UNREACHABLE = 1 << 30


@dataclass(frozen=True)
class Graph:
    """The physical graph one phase routes on, with node roles.

    Attributes
    ----------
    n_nodes : int
        Number of physical nodes.
    src, dst : ndarray of int
        Link endpoints in the direction data moves in this phase (the
        topology's links, reversed for the reduce phase of reductions); link
        ``i`` here is the topology's link ``i``.
    store : ndarray of bool
        Nodes that can hold data between steps (NPUs, memory).
    copy : ndarray of bool
        Nodes that can send the same data several times (copy phase: NPUs and
        memory) or, for a reversed phase, combine data (NPUs).
    hops : ndarray of int
        All-pairs minimum hop counts in this direction (large where unreachable).
    reversed : bool
        Whether the links are the topology's reversed (reduce phase).
    """

    n_nodes: int
    src: np.ndarray
    dst: np.ndarray
    store: np.ndarray
    copy: np.ndarray
    hops: np.ndarray
    reversed: bool = False

    @classmethod
    def build(cls, n_nodes: int, src: np.ndarray, dst: np.ndarray, store: np.ndarray,
              copy: np.ndarray, *, reversed: bool = False) -> "Graph":
        """Graph with hop counts computed (BFS from every node, scipy)."""
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import shortest_path

        adj = csr_matrix((np.ones(src.size), (src, dst)), shape=(n_nodes, n_nodes))
        adj.sum_duplicates()
        adj.data[:] = 1.0
        dist = shortest_path(adj, method="D", unweighted=True)
        hops = np.where(np.isinf(dist), UNREACHABLE, dist).astype(np.int64)
        return cls(n_nodes, np.asarray(src, np.int64), np.asarray(dst, np.int64),
                   np.asarray(store, bool), np.asarray(copy, bool), hops, reversed)


@dataclass(frozen=True)
class Network:
    """The (pruned, possibly split) time-expanded network of one block.

    Attributes
    ----------
    node_phys : ndarray of int
        Physical node of each network node.
    node_time : ndarray of int
        Step ``t`` of each node.
    node_label : ndarray of int
        ``-1`` for ordinary nodes; for a switch copy, the key
        ``phys * (T + 1) + t`` of its entry node.
    tail, head : ndarray of int
        Network node ids of each edge's ends.
    link : ndarray of int
        Physical link of each edge, :data:`HOLD` for hold-over edges.
    source : int
        Network node of the origin (``(o, 0)``).
    sinks : ndarray of int
        Network node of each destination (``(d, T)``), aligned with
        ``destinations``.
    destinations : ndarray of int
        Physical destination nodes.
    allowed : ndarray of bool, shape (destinations, edges)
        Which edges each commodity may use (pruning).
    copy : ndarray of bool
        Per network node: may copy (otherwise usage is conserved there).
    steps : int
        ``T``.
    origin : int
        Physical origin node.
    reversed : bool
        Whether links are traversed backwards (reduce phase).
    split_keys : frozenset of int
        Keys ``phys * (T + 1) + t`` of the nodes replaced by labelled copies.
    """

    node_phys: np.ndarray
    node_time: np.ndarray
    node_label: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    link: np.ndarray
    source: int
    sinks: np.ndarray
    destinations: np.ndarray
    allowed: np.ndarray
    copy: np.ndarray
    steps: int
    origin: int
    reversed: bool = False
    split_keys: frozenset = field(default_factory=frozenset)

    @property
    def n_nodes(self) -> int:
        """Number of network nodes."""
        return int(self.node_phys.size)

    @property
    def n_edges(self) -> int:
        """Number of network edges."""
        return int(self.tail.size)

    @property
    def n_copies(self) -> int:
        """Number of labelled switch copies."""
        return int(np.count_nonzero(self.node_label >= 0))

    def key(self, nodes: np.ndarray) -> np.ndarray:
        """``phys * (T + 1) + t`` of network nodes (their time-expanded identity)."""
        return self.node_phys[nodes] * (self.steps + 1) + self.node_time[nodes]


def time_expanded(graph: Graph, origin: int, destinations: np.ndarray, steps: int,
                  split: frozenset = frozenset()) -> Network:
    """The pruned time-expanded network of one origin, with switch splits.

    Parameters
    ----------
    graph : Graph
        Physical graph of the phase.
    origin : int
        Physical origin node (holds the data at step 0).
    destinations : ndarray of int
        Physical destinations (each needs all of the origin's data at ``T``).
    steps : int
        ``T >= max hops(origin, d)``.
    split : frozenset of int
        Keys ``phys * (T + 1) + t`` of non-copying nodes to replace by
        entry-labelled copies; closed under :func:`noncopy_components`.

    Returns
    -------
    Network

    Notes
    -----
    Vectorised over links x steps; the loop over split nodes is in Python
    (splits are few: the refinement adds them only where needed).
    """
    T = int(steps)
    dests = np.asarray(destinations, dtype=np.int64)
    n = graph.n_nodes
    d_origin = graph.hops[origin]                       # hops(o, v)
    d_dest = graph.hops[:, dests]                        # hops(v, d_k)
    d_near = d_dest.min(axis=1)
    t = np.arange(T + 1)
    keep = (d_origin[:, None] <= t[None, :]) & (t[None, :] + d_near[:, None] <= T)
    keep[dests, T] = True
    node_id = np.full((n, T + 1), -1, dtype=np.int64)
    phys, time = np.nonzero(keep)
    node_id[phys, time] = np.arange(phys.size)
    # Link edges (u, t) -> (v, t + 1) and hold-overs (v, t) -> (v, t + 1).
    L = graph.src.size
    lk = np.repeat(np.arange(L), T)
    st = np.tile(np.arange(T), L)
    tails = node_id[graph.src[lk], st]
    heads = node_id[graph.dst[lk], st + 1]
    ok = (tails >= 0) & (heads >= 0)
    hv = np.repeat(np.flatnonzero(graph.store), T)
    ht = np.tile(np.arange(T), int(np.count_nonzero(graph.store)))
    htail = node_id[hv, ht]
    hhead = node_id[hv, ht + 1]
    hok = (htail >= 0) & (hhead >= 0)
    tail = np.concatenate([tails[ok], htail[hok]])
    head = np.concatenate([heads[ok], hhead[hok]])
    link = np.concatenate([lk[ok], np.full(int(hok.sum()), HOLD)])
    node_phys = phys.astype(np.int64)
    node_time = time.astype(np.int64)
    node_label = np.full(phys.size, -1, dtype=np.int64)
    copy = graph.copy[node_phys]
    if split:
        split = _close(T, node_phys, node_time, copy, tail, head, split)
        node_phys, node_time, node_label, copy, tail, head, link = _split(
            T, node_phys, node_time, node_label, copy, tail, head, link, split)
    # Per-destination pruning on the final edges.
    et = node_time[tail]
    allowed = (d_origin[node_phys[tail]] <= et)[None, :] & \
        (et[None, :] + 1 + d_dest[node_phys[head]].T <= T)
    used = allowed.any(axis=0)
    tail, head, link, allowed = tail[used], head[used], link[used], allowed[:, used]
    order = np.lexsort((link, node_time[tail]))
    tail, head, link, allowed = tail[order], head[order], link[order], allowed[:, order]
    plain = node_label < 0
    source = int(np.flatnonzero(plain & (node_phys == origin) & (node_time == 0))[0])
    final = np.full(n, -1, dtype=np.int64)
    last = np.flatnonzero(plain & (node_time == T))
    final[node_phys[last]] = last
    sinks = final[dests]
    return Network(node_phys, node_time, node_label, tail, head, link, source, sinks, dests,
                   allowed, copy, T, int(origin), graph.reversed, frozenset(split))


def _close(T: int, node_phys, node_time, copy, tail, head, split: frozenset) -> frozenset:
    """``split`` extended to whole connected regions of non-copying nodes."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    key = node_phys * (T + 1) + node_time
    nc = ~copy
    inner = nc[tail] & nc[head]
    n = key.size
    adj = coo_matrix((np.ones(int(inner.sum())), (tail[inner], head[inner])), shape=(n, n))
    _, lab = connected_components(adj, directed=True, connection="weak")
    chosen = np.isin(key, np.fromiter(split, dtype=np.int64, count=len(split))) & nc
    return frozenset(key[nc & np.isin(lab, lab[chosen])].tolist())


def _split(T: int, node_phys, node_time, node_label, copy, tail, head, link,
           split: frozenset):
    """Replace the split nodes by entry-labelled copies (module docstring)."""
    key = node_phys * (T + 1) + node_time
    is_split = np.isin(key, np.fromiter(split, dtype=np.int64, count=len(split)))
    if not is_split.any():
        return node_phys, node_time, node_label, copy, tail, head, link
    split_nodes = np.flatnonzero(is_split)
    split_nodes = split_nodes[np.argsort(node_time[split_nodes], kind="stable")]
    in_edges: dict[int, list[int]] = {}
    for e in np.flatnonzero(is_split[head]):
        in_edges.setdefault(int(head[e]), []).append(int(e))
    labels: dict[int, list[int]] = {}
    for x in split_nodes.tolist():
        found: dict[int, None] = {}
        for e in in_edges.get(x, []):
            y = int(tail[e])
            if is_split[y]:
                found.update(dict.fromkeys(labels.get(y, ())))
            elif copy[y]:
                found[int(key[y])] = None
            # A non-copying, non-split predecessor cannot occur: splits are
            # whole components of non-copying nodes.
        labels[x] = list(found)
    # New node ids: kept ordinary nodes first, then the labelled copies.
    keep = ~is_split
    new_id = np.full(node_phys.size, -1, dtype=np.int64)
    new_id[keep] = np.arange(int(keep.sum()))
    base = int(keep.sum())
    copy_id: dict[tuple[int, int], int] = {}
    cp, ct, cl = [], [], []
    for x in split_nodes.tolist():
        for lab in labels[x]:
            copy_id[(x, lab)] = base + len(cp)
            cp.append(int(node_phys[x]))
            ct.append(int(node_time[x]))
            cl.append(lab)
    et, eh, el = [], [], []
    for e in np.flatnonzero(is_split[tail] | is_split[head]).tolist():
        u, v, lk = int(tail[e]), int(head[e]), int(link[e])
        if is_split[v] and not is_split[u]:
            if copy[u] and (v, int(key[u])) in copy_id:
                et.append(int(new_id[u]))
                eh.append(copy_id[(v, int(key[u]))])
                el.append(lk)
        elif is_split[v] and is_split[u]:
            for lab in labels[u]:
                if (v, lab) in copy_id:
                    et.append(copy_id[(u, lab)])
                    eh.append(copy_id[(v, lab)])
                    el.append(lk)
        else:  # split tail, ordinary head (a copying node)
            for lab in labels[u]:
                et.append(copy_id[(u, lab)])
                eh.append(int(new_id[v]))
                el.append(lk)
    plain = ~(is_split[tail] | is_split[head])
    tail = np.concatenate([new_id[tail[plain]], np.array(et, dtype=np.int64)])
    head = np.concatenate([new_id[head[plain]], np.array(eh, dtype=np.int64)])
    link = np.concatenate([link[plain], np.array(el, dtype=np.int64)])
    node_phys = np.concatenate([node_phys[keep], np.array(cp, dtype=np.int64)])
    node_time = np.concatenate([node_time[keep], np.array(ct, dtype=np.int64)])
    node_label = np.concatenate([node_label[keep], np.array(cl, dtype=np.int64)])
    copy = np.concatenate([copy[keep], np.zeros(len(cp), dtype=bool)])
    return node_phys, node_time, node_label, copy, tail, head, link


def noncopy_components(net: Network) -> tuple[np.ndarray, int]:
    """Connected regions of ordinary (unlabelled) non-copying nodes.

    Returns
    -------
    labels : ndarray of int
        Component id per network node, ``-1`` for copying or labelled nodes.
    count : int
        Number of components.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    generic = ~net.copy & (net.node_label < 0)
    comp = np.full(net.n_nodes, -1, dtype=np.int64)
    nodes = np.flatnonzero(generic)
    if nodes.size == 0:
        return comp, 0
    local = np.full(net.n_nodes, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    inner = generic[net.tail] & generic[net.head]
    a, b = local[net.tail[inner]], local[net.head[inner]]
    adj = coo_matrix((np.ones(a.size), (a, b)), shape=(nodes.size, nodes.size))
    count, lab = connected_components(adj, directed=True, connection="weak")
    comp[nodes] = lab
    return comp, int(count)
