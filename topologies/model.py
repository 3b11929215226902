"""The immutable :class:`Topology` (docs/architecture.md section 3).

Nodes ``0 .. npus-1`` are endpoints (NPUs, or whole servers in cluster-level
fabrics): they compute, store, reduce and may forward.  Nodes ``npus ..
npus+switches-1`` are switches: they only route.  Links are directed and held
as parallel numpy arrays ``src``, ``dst``, ``bandwidth`` (bytes/s) and
``latency`` (s); link ``i`` is ``src[i] -> dst[i]``.  Parallel links are
allowed; a cable is two directed links.

Hot loops use the arrays and the CSR adjacency (:meth:`Topology.out_links`);
graph algorithms use :meth:`Topology.to_networkx`.  Derived quantities (hop
matrix, routes, diameter, bisection) are computed lazily and cached; the
topology itself never changes after construction.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_choice

__all__ = ["Dimension", "Topology", "EXACT_BISECTION_MAX_NPUS", "kl_bisections"]

#: Largest NPU count for which :meth:`Topology.bisection_bandwidth` enumerates
#: every balanced bipartition (C(16, 8) / 2 = 6435 max-flow problems).
EXACT_BISECTION_MAX_NPUS = 16
#: Largest node count for which :meth:`Topology.summary` runs the Kernighan-Lin
#: bisection (O(N^2) per pass) when the family has no closed form.
SUMMARY_KL_MAX_NODES = 4096

DIMENSION_KINDS = ("ring", "uniring", "fc", "switch", "mesh")


@dataclass(frozen=True)
class Dimension:
    """One dimension of a multi-dimensional network (fastest-varying first).

    Attributes
    ----------
    kind : str
        ``"ring"`` (bidirectional), ``"uniring"``, ``"fc"`` (fully connected),
        ``"switch"`` or ``"mesh"`` (a line: a torus dimension is a ``ring``).
    size : int
        Number of NPUs along the dimension.
    bandwidth_Bps : float
        Bandwidth of one directed link of this dimension, bytes/s (for a switch
        dimension: of each NPU's uplink).
    latency_s : float
        Latency of one link, seconds.
    links : int
        Parallel links per connected NPU pair (Themis Table 2's link counts);
        ``bandwidth_Bps`` is per link.
    """

    kind: str
    size: int
    bandwidth_Bps: float
    latency_s: float
    links: int = 1

    def __post_init__(self) -> None:
        check_choice("dimension kind", self.kind, DIMENSION_KINDS)
        if isinstance(self.size, bool) or not isinstance(self.size, (int, np.integer)) or self.size < 1:
            raise invalid("dimension size", self.size, "an integer >= 1")
        if not np.isfinite(self.bandwidth_Bps) or self.bandwidth_Bps <= 0:
            raise invalid("dimension bandwidth", self.bandwidth_Bps, "a finite value > 0 bytes/s")
        if not np.isfinite(self.latency_s) or self.latency_s < 0:
            raise invalid("dimension latency", self.latency_s, "a finite value >= 0 s")
        if self.links < 1:
            raise invalid("dimension links", self.links, "an integer >= 1")


def _as_array(values: Any, dtype: Any, name: str, n: int) -> np.ndarray:
    arr = np.array(values, dtype=dtype, copy=True)
    if arr.ndim == 0:
        arr = np.full(n, arr, dtype=dtype)
    if arr.shape != (n,):
        raise invalid(f"{name} array shape", arr.shape, f"({n},), one entry per link")
    arr.setflags(write=False)
    return arr


class Topology:
    """An immutable network of NPUs, switches and directed links.

    Parameters
    ----------
    npus : int
        Number of endpoint nodes (ids ``0 .. npus-1``).
    switches : int
        Number of switch nodes (ids ``npus ..``).
    src, dst : array_like of int
        Link endpoints, one entry per directed link.
    bandwidth : array_like of float or float
        Link bandwidth, bytes/s (one value for all links or one per link).
    latency : array_like of float or float
        Link latency, seconds.
    name : str, optional
        Display name, usually the spec string.
    family : str, optional
        Registered family that built it (``"torus"``, ``"fattree"``...).
    params : mapping, optional
        The family's parameters (used by the cost model and reports).
    dims : sequence of Dimension, optional
        Per-dimension description for multi-dimensional networks,
        fastest-varying first.
    node_attrs : mapping of str to array, optional
        Per-NPU attributes such as ``server`` (server index of each NPU) or
        ``coords`` (shape ``(npus, ndims)``).
    require_connected : bool, optional
        Reject topologies in which some NPU cannot reach another (default).

    Raises
    ------
    InvalidSpecError
        On out-of-range ids, self-loops, non-positive bandwidth, negative
        latency, or (by default) a disconnected network.

    Examples
    --------
    >>> t = Topology(2, 0, [0, 1], [1, 0], 25e9, 1e-6)
    >>> t.npus, t.n_links, t.diameter
    (2, 2, 1)
    """

    def __init__(self, npus: int, switches: int, src: Any, dst: Any, bandwidth: Any, latency: Any,
                 *, name: str = "", family: str = "custom", params: Mapping[str, Any] | None = None,
                 dims: Sequence[Dimension] = (), node_attrs: Mapping[str, Any] | None = None,
                 require_connected: bool = True) -> None:
        if isinstance(npus, bool) or int(npus) != npus or npus < 1:
            raise invalid("npus", npus, "an integer >= 1")
        if isinstance(switches, bool) or int(switches) != switches or switches < 0:
            raise invalid("switches", switches, "an integer >= 0")
        self.npus = int(npus)
        self.switches = int(switches)
        n_nodes = self.npus + self.switches
        src_arr = np.asarray(src, dtype=np.int64).ravel()
        n = src_arr.size
        self.src = _as_array(src_arr, np.int64, "src", n)
        self.dst = _as_array(dst, np.int64, "dst", n)
        self.bandwidth = _as_array(bandwidth, np.float64, "bandwidth", n)
        self.latency = _as_array(latency, np.float64, "latency", n)
        if n:
            for name_, arr in (("src", self.src), ("dst", self.dst)):
                bad = np.flatnonzero((arr < 0) | (arr >= n_nodes))
                if bad.size:
                    raise invalid(f"link {bad[0]} {name_}", int(arr[bad[0]]),
                                  f"a node id in 0..{n_nodes - 1}")
            loops = np.flatnonzero(self.src == self.dst)
            if loops.size:
                raise invalid(f"link {loops[0]}", f"{self.src[loops[0]]}->{self.dst[loops[0]]}",
                              "two different nodes (no self-loops)")
            bad = np.flatnonzero(~np.isfinite(self.bandwidth) | (self.bandwidth <= 0))
            if bad.size:
                raise invalid(f"link {bad[0]} bandwidth", float(self.bandwidth[bad[0]]),
                              "a finite value > 0 bytes/s")
            bad = np.flatnonzero(~np.isfinite(self.latency) | (self.latency < 0))
            if bad.size:
                raise invalid(f"link {bad[0]} latency", float(self.latency[bad[0]]),
                              "a finite value >= 0 s")
        self.name = name or f"{family}[{self.npus}]"
        self.family = family
        self.params: Mapping[str, Any] = dict(params or {})
        self.dims: tuple[Dimension, ...] = tuple(dims)
        if self.dims and int(np.prod([d.size for d in self.dims])) != self.npus:
            raise invalid("dimension sizes", [d.size for d in self.dims],
                          f"sizes whose product is the NPU count {self.npus}")
        attrs = {}
        for key, value in (node_attrs or {}).items():
            arr = np.array(value, copy=True)
            if arr.shape[:1] != (self.npus,):
                raise invalid(f"node attribute {key!r} shape", arr.shape,
                              f"first axis of length {self.npus} (one row per NPU)")
            arr.setflags(write=False)
            attrs[key] = arr
        self.node_attrs: Mapping[str, np.ndarray] = attrs
        # CSR adjacency: links sorted by source (and by destination for in_links).
        order = np.argsort(self.src, kind="stable")
        self._out_idx = order
        self._out_ptr = np.searchsorted(self.src[order], np.arange(n_nodes + 1))
        order_in = np.argsort(self.dst, kind="stable")
        self._in_idx = order_in
        self._in_ptr = np.searchsorted(self.dst[order_in], np.arange(n_nodes + 1))
        if require_connected:
            self._check_connected()

    # ------------------------------------------------------------------ basics
    @property
    def n_nodes(self) -> int:
        """Number of nodes (NPUs plus switches)."""
        return self.npus + self.switches

    @property
    def n_links(self) -> int:
        """Number of directed links."""
        return int(self.src.size)

    def is_npu(self, node: int) -> bool:
        """Whether ``node`` is an endpoint (as opposed to a switch)."""
        return 0 <= node < self.npus

    def out_links(self, node: int) -> np.ndarray:
        """Ids of the links leaving ``node`` (ascending). O(1) view."""
        return self._out_idx[self._out_ptr[node]:self._out_ptr[node + 1]]

    def in_links(self, node: int) -> np.ndarray:
        """Ids of the links entering ``node`` (ascending). O(1) view."""
        return self._in_idx[self._in_ptr[node]:self._in_ptr[node + 1]]

    def links_between(self, u: int, v: int) -> np.ndarray:
        """Ids of the (parallel) directed links ``u -> v``."""
        out = self.out_links(u)
        return out[self.dst[out] == v]

    def __repr__(self) -> str:
        return (f"Topology({self.name!r}, npus={self.npus}, switches={self.switches}, "
                f"links={self.n_links})")

    def __getstate__(self) -> dict[str, Any]:
        # Cached derived data is dropped: it is cheap to rebuild and can be large.
        state = self.__dict__.copy()
        for key in ("diameter", "mean_path_length"):
            state.pop(key, None)
        return state

    # ------------------------------------------------------------------ graphs
    def to_networkx(self):
        """Return a ``networkx.MultiDiGraph`` view of the topology.

        Nodes carry ``kind`` (``"npu"`` or ``"switch"``); edges are keyed by
        link id and carry ``bandwidth`` (bytes/s) and ``latency`` (s).
        """
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        g.add_nodes_from((i, {"kind": "npu"}) for i in range(self.npus))
        g.add_nodes_from((i, {"kind": "switch"}) for i in range(self.npus, self.n_nodes))
        g.add_edges_from(
            (int(u), int(v), int(k), {"bandwidth": float(b), "latency": float(l)})
            for k, (u, v, b, l) in enumerate(zip(self.src, self.dst, self.bandwidth, self.latency))
        )
        return g

    def _adjacency(self):
        from scipy.sparse import csr_matrix

        n = self.n_nodes
        data = np.ones(self.n_links, dtype=np.float64)
        adj = csr_matrix((data, (self.src, self.dst)), shape=(n, n))
        adj.sum_duplicates()
        adj.data[:] = 1.0
        return adj

    @property
    def hop_matrix(self) -> np.ndarray:
        """All-pairs hop counts over all nodes, shape ``(n_nodes, n_nodes)``; -1 if unreachable.

        Built once per topology by :func:`topologies.routing.all_pairs`.
        """
        from topologies.routing import all_pairs

        return all_pairs(self)[0]

    def component_labels(self) -> np.ndarray:
        """Strongly connected component of every node (equal labels: the nodes reach each
        other both ways), shape ``(n_nodes,)``."""
        from scipy.sparse.csgraph import connected_components

        return connected_components(self._adjacency(), directed=True, connection="strong")[1]

    def _check_connected(self) -> None:
        labels = self.component_labels()
        main = labels[0]
        bad = np.flatnonzero(labels != main)
        if bad.size:
            node = int(bad[0])
            what = f"NPU {node}" if node < self.npus else f"switch {node}"
            raise InvalidSpecError(f"invalid topology {self.name!r}: {what} is not connected "
                                   f"both ways to NPU 0; the network must be connected")

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """A minimum-hop path from ``src`` to ``dst`` as a tuple of link ids.

        :func:`topologies.routing.route` (``"shortest"``, its docstring states the rule
        and the errors): among parallel links the one with the highest bandwidth, then the
        lowest id; ties between equal-hop paths follow scipy's BFS order.
        """
        from topologies.routing import route

        return route(self, src, dst)

    # ------------------------------------------------------------- summaries
    @cached_property
    def diameter(self) -> int:
        """Largest minimum hop count between two NPUs (switch hops count).

        A family's closed form (``params["diameter"]``, e.g. the sized Clos families)
        is used when given, so that 100,000-server fabrics need no all-pairs table.
        """
        if "diameter" in self.params:
            return int(self.params["diameter"])
        from topologies.routing import npu_hop_stats

        return npu_hop_stats(self)[0]

    @cached_property
    def mean_path_length(self) -> float:
        """Mean minimum hop count over ordered pairs of distinct NPUs (a family's closed
        form ``params["mean_path_length"]`` when given)."""
        if "mean_path_length" in self.params:
            return float(self.params["mean_path_length"])
        from topologies.routing import npu_hop_stats

        return npu_hop_stats(self)[1]

    def injection_bandwidth(self) -> np.ndarray:
        """Per-NPU injection bandwidth (sum of outgoing link bandwidths), bytes/s."""
        return np.bincount(self.src, weights=self.bandwidth, minlength=self.n_nodes)[: self.npus]

    def bisection_bandwidth(self) -> tuple[float, str]:
        """Bisection bandwidth in bytes/s and how it was obtained.

        The bisection bandwidth is the minimum, over splits of the NPUs into two
        halves (sizes floor(N/2) and ceil(N/2)) with switches placed on
        whichever side minimises the cut, of the total bandwidth of links from
        one side to the other.

        Returns
        -------
        value : float
            Bytes/s.
        method : str
            ``"exact"`` (N <= 16: every balanced split, each solved as a
            max-flow / min-cut over switch placement), ``"closed-form"`` (the
            family's formula, stored in ``params["bisection_Bps"]``) or
            ``"upper-bound"`` (the best cut found by Kernighan-Lin bisection
            from several seeds: a true cut, so an upper bound on the exact
            value).
        """
        if "bisection_Bps" in self.params:
            return float(self.params["bisection_Bps"]), "closed-form"
        if self.npus < 2:
            return 0.0, "exact"
        if self.npus <= EXACT_BISECTION_MAX_NPUS:
            return self._bisection_exact(), "exact"
        return self._bisection_kl(), "upper-bound"

    def _cut(self, side: np.ndarray) -> float:
        cross = side[self.src] & ~side[self.dst]
        return float(self.bandwidth[cross].sum())

    def _bisection_exact(self) -> float:
        import networkx as nx

        n = self.npus
        half = n // 2
        best = np.inf
        # Fix NPU 0 on side S when the halves have equal size to skip mirror splits;
        # both directions of the cut are still evaluated below.
        is_sw_src, is_sw_dst = self.src >= n, self.dst >= n
        star_switches = not np.any(is_sw_src & is_sw_dst)
        direct = ~is_sw_src & ~is_sw_dst
        to_sw, from_sw = ~is_sw_src & is_sw_dst, is_sw_src & ~is_sw_dst
        src_c, dst_c = np.minimum(self.src, n - 1), np.minimum(self.dst, n - 1)
        for chosen in itertools.combinations(range(n), half):
            if n % 2 == 0 and 0 not in chosen:
                continue
            side = np.zeros(self.n_nodes, dtype=bool)
            side[list(chosen)] = True
            if self.switches == 0:
                best = min(best, self._cut(side), self._cut(~side))
                continue
            if star_switches:
                # No switch-to-switch links: each switch independently joins the side
                # that cuts less, min(bandwidth from S into it, bandwidth out of it to T).
                for s_side in (side[:n], ~side[:n]):
                    npu_cut = self.bandwidth[direct & s_side[src_c] & ~s_side[dst_c]].sum()
                    into = np.bincount(self.dst[to_sw] - n,
                                       weights=self.bandwidth[to_sw] * s_side[self.src[to_sw]],
                                       minlength=self.switches)
                    out = np.bincount(self.src[from_sw] - n,
                                      weights=self.bandwidth[from_sw] * ~s_side[self.dst[from_sw]],
                                      minlength=self.switches)
                    best = min(best, float(npu_cut + np.minimum(into, out).sum()))
                continue
            # Switches go wherever the cut is smallest: an s-t min cut with the two
            # NPU halves contracted into a super source (label 0) and a super sink
            # (label 1); switch i keeps its own label 2 + i - npus.
            for forward in (True, False):
                labels = np.empty(self.n_nodes, dtype=np.int64)
                labels[:n] = np.where(side[:n] == forward, 0, 1)
                labels[n:] = np.arange(2, 2 + self.switches)
                a, c = labels[self.src], labels[self.dst]
                keep = (a != c) & (a != 1) & (c != 0)
                width = self.switches + 2
                keys, inverse = np.unique(a[keep] * width + c[keep], return_inverse=True)
                caps = np.bincount(inverse, weights=self.bandwidth[keep])
                g = nx.DiGraph()
                g.add_nodes_from((0, 1))
                g.add_edges_from((int(k // width), int(k % width), {"capacity": float(w)})
                                 for k, w in zip(keys, caps))
                best = min(best, nx.maximum_flow_value(g, 0, 1))
        return float(best)

    def _bisection_kl(self, seeds: int = 4) -> float:
        best = np.inf
        for side in kl_bisections(self, range(seeds)):
            npu_side = side[: self.npus]
            # Rebalance the NPUs if switches made the halves uneven.
            k = int(npu_side.sum())
            half = self.npus // 2
            if k != half and k != self.npus - half:
                idx = np.flatnonzero(npu_side if k > half else ~npu_side)
                flip = idx[: abs(k - half)]
                side[flip] = ~side[flip]
            best = min(best, self._cut(side), self._cut(~side))
        return float(best)

    def summary(self) -> dict[str, Any]:
        """Key figures as a JSON-ready dict (the fields of ``codesign topology show``)."""
        if "bisection_Bps" not in self.params and self.n_nodes > SUMMARY_KL_MAX_NODES:
            # Kernighan-Lin is O(N^2) per pass: minutes for 10^5 nodes.  A summary
            # answers in seconds; bisection_bandwidth() still computes it on request.
            bis, method = None, (f"not computed (more than {SUMMARY_KL_MAX_NODES} nodes "
                                 "and no closed form)")
        else:
            bis, method = self.bisection_bandwidth()
        inj = self.injection_bandwidth()
        return {
            "name": self.name,
            "family": self.family,
            "npus": self.npus,
            "switches": self.switches,
            "links": self.n_links,
            "diameter": self.diameter,
            "mean_path_length": round(self.mean_path_length, 6),
            "injection_Bps": float(inj.min()),
            "injection_max_Bps": float(inj.max()),
            "bisection_Bps": bis,
            "bisection_method": method,
            "dimensions": [
                {"kind": d.kind, "size": d.size, "bandwidth_Bps": d.bandwidth_Bps,
                 "latency_s": d.latency_s, "links": d.links}
                for d in self.dims
            ],
        }

    def without_npus(self, failed: Sequence[int], *, name: str = "") -> "Topology":
        """The network with NPUs ``failed`` removed (failed nodes, TACOS Fig. 22(a)).

        Links touching a failed NPU disappear; the remaining NPUs keep their
        order and are renumbered ``0 .. npus-len(failed)-1`` (switches follow).
        The result is irregular: ``dims`` is dropped, ``node_attrs`` rows of
        the survivors are kept, and ``params["failed_npus"]`` records the
        original ids and ``params["npu_ids"]`` the original id of each NPU.

        Parameters
        ----------
        failed : sequence of int
            Original NPU ids to remove (distinct, fewer than ``npus``).
        name : str, optional
            Name of the result (default: ``"<name> without [..]"``).

        Raises
        ------
        InvalidSpecError
            If an id is not an NPU, repeated, removes every NPU, or the rest is
            disconnected.

        Examples
        --------
        >>> triangle = Topology(3, 0, [0, 1, 1, 2, 0, 2], [1, 0, 2, 1, 2, 0], 1e9, 0.0)
        >>> triangle.without_npus([1]).n_links      # the cable 0-2 is left
        2
        """
        ids = [int(v) for v in failed]
        if len(set(ids)) != len(ids) or any(v < 0 or v >= self.npus for v in ids) \
                or len(ids) >= self.npus:
            raise invalid("failed NPUs", list(failed),
                          f"distinct NPU ids in 0..{self.npus - 1}, fewer than {self.npus}")
        keep = np.ones(self.n_nodes, dtype=bool)
        keep[ids] = False
        new_id = np.cumsum(keep) - 1
        links = keep[self.src] & keep[self.dst]
        survivors = np.flatnonzero(keep[:self.npus])
        params = {**self.params, "failed_npus": sorted(ids),
                  "npu_ids": survivors.tolist()}
        attrs = {k: v[survivors] for k, v in self.node_attrs.items()}
        return Topology(self.npus - len(ids), self.switches, new_id[self.src[links]],
                        new_id[self.dst[links]], self.bandwidth[links], self.latency[links],
                        name=name or f"{self.name} without {sorted(ids)}", family=self.family,
                        params=params, node_attrs=attrs)

    def to_spec_dict(self) -> dict[str, Any]:
        """The explicit-graph YAML form (docs/architecture.md section 6), a link per entry."""
        return {
            "npus": self.npus,
            "switches": self.switches,
            "links": [
                {"src": int(u), "dst": int(v), "bandwidth": float(b), "latency": float(l),
                 "bidirectional": False}
                for u, v, b, l in zip(self.src, self.dst, self.bandwidth, self.latency)
            ],
        }


def kl_bisections(topology: Topology, seeds) -> list[np.ndarray]:
    """Kernighan-Lin bisections of all nodes, one per seed, as node masks (side A).

    Kernighan & Lin, "An efficient heuristic procedure for partitioning graphs", Bell
    System Technical Journal 49(2), 1970 (networkx ``kernighan_lin_bisection``) on the
    undirected graph whose edge weight is the total bandwidth of the links between two
    nodes, both directions.  A heuristic: callers evaluate the true directed cut of
    each side (:meth:`Topology.bisection_bandwidth`, :mod:`evaluators.bounds`).

    Parameters
    ----------
    topology : Topology
        The network.
    seeds : iterable of int
        One bisection per seed (KL's random start).

    Returns
    -------
    list of ndarray of bool, shape (n_nodes,)
        ``True`` for the nodes of the first half.
    """
    import networkx as nx
    from networkx.algorithms.community import kernighan_lin_bisection

    g = nx.Graph()
    g.add_nodes_from(range(topology.n_nodes))
    for u, v, b in zip(topology.src.tolist(), topology.dst.tolist(),
                       topology.bandwidth.tolist()):
        w = g.get_edge_data(u, v, {"weight": 0.0})["weight"]
        g.add_edge(u, v, weight=w + b)
    out = []
    for seed in seeds:
        side, _ = kernighan_lin_bisection(g, weight="weight", seed=seed)
        mask = np.zeros(topology.n_nodes, dtype=bool)
        mask[list(side)] = True
        out.append(mask)
    return out
