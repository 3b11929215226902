"""TopologyFinder (TopoOpt NSDI'23, Sec. 4.2, Algorithm 1).

Inputs are what :meth:`codesign.workloads.demand.Demand.split` returns: AllReduce
server groups (servers in ring order, bytes each member sends its successor per
iteration) and the MP server matrix (bytes per iteration, rows send).

Steps (Algorithm 1 line numbers)
--------------------------------
1. *Degree split* (lines 2-3): ``d_A = max(1, ceil(d T_A / (T_A + T_MP)))`` when there
   is AllReduce traffic (else 0), ``d_MP = d - d_A``; ``T_A`` counts every member's
   bytes (``bytes x group size``) so it is comparable with the MP matrix sum.
2. *AllReduce sub-topology* (lines 4-11): groups in decreasing traffic; group ``k``
   gets ``d_k = ceil(d_A T_k / T)`` rings (line 6).  Degree is a per-server budget,
   so ``T`` is the AllReduce traffic of the most loaded member of ``k`` (the sum
   over the groups it belongs to): a single group gets ``d_A``, disjoint groups
   (hybrid parallelism) each get ``d_A``, overlapping groups share it in proportion;
   ``d_k`` is capped by the members' remaining budget (line 7) and by the number of
   generators.  TotientPerms / SelectPermutations run on the group's own ring
   positions ``0..k-1`` (member ``i`` of the group is position ``i``), so groups of
   any size and any membership work.
3. *MP sub-topology* (lines 12-17): matching rounds on the MP demand
   (:mod:`topologies.topoopt.matching`), each matched pair gets a cable and its
   weight is discounted (App. E.4 Eq. 2); servers outside AllReduce groups have
   more free interfaces and keep matching until the demand or the interfaces run
   out.
4. *Final topology* (line 18) plus two steps the paper leaves implicit: free
   interfaces (no demand left for them) are filled with random links, and the
   connectivity repair (OWAN two-edge replacement, App. E.4) joins disconnected
   pieces (:mod:`topologies.topoopt.repair`).
5. *Routing* (lines 19-20): CoinChangeMod (Algorithm 4) over each group's
   generators for the AllReduce pairs (each member to its successor in the group's
   order), ``k_paths`` shortest paths for the MP pairs (:func:`topologies.routing.k_shortest_paths`).

Degree
------
As in :func:`topologies.families.direct.direct_connect`: a server has ``d``
interfaces, each with a transmit and a receive fibre.  A ring permutation uses one
interface of each member (``i -> i+p`` out, ``i-p -> i`` in: one-way links); a
matched MP pair uses one interface at each end (a cable, both directions); a fill
link uses the transmit fibre of one server and the receive fibre of another.  The
result has exactly ``d`` outgoing and ``d`` incoming links at every server
(parallel links allowed), all of bandwidth ``link_bandwidth``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.resources import check_memory
from topologies.families.options import DEFAULT_BW, DEFAULT_LAT
from topologies.model import Topology
from topologies.topoopt.coin_change import CoinTable, coin_change_table
from topologies.topoopt.matching import discount_function, mp_matching
from topologies.routing import k_shortest_paths, neighbour_lists
from topologies.topoopt.perms import ring_targets, select_permutations, totient_perms
from topologies.topoopt.repair import (
    KIND_NAMES, MP, RING, LinkSet, connect_pieces, fill_interfaces)

__all__ = ["TopoOptResult", "topology_finder", "build_topology", "MAX_SERVERS", "MAX_DEGREE",
           "DEFAULT_K_PATHS", "DEFAULT_MAX_ROUTED_PAIRS"]

#: Largest server count accepted.
MAX_SERVERS = 20000
#: Largest degree (interfaces per server) accepted.  TopoOpt's servers have 4-8
#: (Sec. 5.1); a degree of servers or more is accepted (several of a server's
#: interfaces cabled to one peer, the fill's parallel links), but 1,024 is beyond any
#: server's NIC count, and 10^9 allocated links for seconds before running out of memory.
MAX_DEGREE = 1024
#: Paths per MP pair.
DEFAULT_K_PATHS = 4
#: MP pairs routed up front (heaviest first); others on demand with ``paths()``.
DEFAULT_MAX_ROUTED_PAIRS = 4096


@dataclass(frozen=True)
class GroupRings:
    """The rings chosen for one AllReduce group."""

    servers: tuple[int, ...]
    bytes: float
    degree: int
    generators: tuple[int, ...]


@dataclass(frozen=True)
class TopoOptResult:
    """TopologyFinder's output: the topology ``G`` and the routing rules ``R``.

    Attributes
    ----------
    topology : Topology
        ``n`` servers, no switches, family ``"topoopt"``; ``params`` holds
        ``servers``, ``degree``, ``link_bandwidth_Bps``, ``degree_allreduce``,
        ``degree_mp``, ``generators`` (per group).
    routes : dict
        ``(src, dst) -> list of server paths`` for the AllReduce successor pairs
        (CoinChangeMod path first) and the heaviest ``max_routed_pairs`` MP pairs
        (``k_paths`` shortest paths); any other pair: :meth:`paths`.
    groups : tuple of GroupRings
        Per input group (same order): degree and generators (empty when the group
        got no degree; its traffic is then routed over the other links).
    degree_allreduce, degree_mp : int
        Line 2-3's split.
    link_kind : numpy.ndarray of str
        Per topology link: ``"allreduce"``, ``"mp"``, ``"fill"`` or ``"repair"``.
    repairs : int
        Two-edge replacements made by the connectivity repair.
    matching_exact : bool
        Every matching round ran Blossom on all positive pairs.
    diameter : int
    mean_path_length : float
        Hops, over ordered server pairs.
    """

    topology: Topology
    routes: dict
    groups: tuple
    degree_allreduce: int
    degree_mp: int
    link_kind: np.ndarray
    repairs: int
    matching_exact: bool
    k_paths: int
    _tables: dict = field(repr=False, default_factory=dict)

    @property
    def diameter(self) -> int:
        return self.topology.diameter

    @property
    def mean_path_length(self) -> float:
        return self.topology.mean_path_length

    @property
    def generators(self) -> list[list[int]]:
        """Chosen generators per input group."""
        return [list(g.generators) for g in self.groups]

    def paths(self, src: int, dst: int, *, k: int | None = None) -> list[list[int]]:
        """Routes for any server pair, as Algorithm 1 lines 19-20 would give them.

        Stored routes first; otherwise a pair with MP demand gets its ``k`` shortest
        paths, a pair inside an AllReduce group with rings its CoinChangeMod path
        over that group's generators, and any other pair its ``k`` shortest paths.
        """
        if (src, dst) in self.routes:
            return self.routes[(src, dst)]
        n = self.topology.npus
        for name, v in (("src", src), ("dst", dst)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
                raise invalid(f"route {name}", v, f"a server id in 0..{n - 1}")
        s, t = int(src), int(dst)
        if s == t:
            return [[s]]
        if not self._tables["mp_pairs"][s, t]:
            for gi, g in enumerate(self.groups):
                if g.generators and s in self._tables[("pos", gi)] \
                        and t in self._tables[("pos", gi)]:
                    path = _coin_route(self._tables, gi, g.servers, s, t)
                    if path is not None:
                        return [path]
        return k_shortest_paths(self._tables["nbrs"], self.topology.hop_matrix, s, t,
                                k or self.k_paths)

    def summary(self) -> dict:
        """JSON-ready key figures (``codesign topology topoopt``)."""
        kinds, counts = np.unique(self.link_kind, return_counts=True)
        return {
            "servers": self.topology.npus,
            "degree": int(self.topology.params["degree"]),
            "link_bandwidth_Bps": float(self.topology.params["link_bandwidth_Bps"]),
            "degree_allreduce": self.degree_allreduce,
            "degree_mp": self.degree_mp,
            "diameter": self.diameter,
            "mean_path_length": round(self.mean_path_length, 6),
            "groups": [{"servers": len(g.servers), "bytes": g.bytes, "degree": g.degree,
                        "generators": list(g.generators)} for g in self.groups],
            "links": {str(k): int(c) for k, c in zip(kinds, counts)},
            "repairs": self.repairs,
            "matching_exact": self.matching_exact,
            "routed_pairs": len(self.routes),
        }


def _coin_route(tables: dict, gi: int, servers, s: int, t: int) -> list[int] | None:
    """CoinChangeMod path of group ``gi`` from server ``s`` to ``t``; ``None`` if a ring
    link it needs was used by the connectivity repair."""
    pos = tables[("pos", gi)]
    table: CoinTable = tables[("coins", gi)]
    path = [servers[p] for p in table.positions(pos[s], pos[t])]
    present = tables["present"]
    if all((u, v) in present for u, v in zip(path, path[1:])):
        return path
    return None


def _check_inputs(n, d, groups, mp):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= MAX_SERVERS:
        raise invalid("topology_finder servers", n, f"an integer from 2 to {MAX_SERVERS}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 1 <= d <= MAX_DEGREE:
        raise invalid("topology_finder degree", d, f"an integer from 1 to {MAX_DEGREE}")
    # Server x server matrices (MP demand, hops, routing tables): ~32 bytes per pair,
    # measured (490 MB above the interpreter at 4000 servers, d=8); refused up front.
    check_memory("TopologyFinder", "servers", int(n), 32.0 * n * n,
                 "use fewer servers (one TopologyFinder per pod)")
    out = []
    for i, item in enumerate(groups or ()):
        try:
            servers, size = item
            servers = tuple(int(s) for s in servers)
            size = float(size)
        except (TypeError, ValueError):
            raise invalid(f"topology_finder groups[{i}]", item,
                          "a pair (servers, bytes) as Demand.split() returns") from None
        if len(servers) < 2 or len(set(servers)) != len(servers) \
                or min(servers) < 0 or max(servers) >= n:
            raise invalid(f"topology_finder groups[{i}] servers", list(servers),
                          f"at least 2 distinct server ids in 0..{n - 1}")
        if not np.isfinite(size) or size < 0:
            raise invalid(f"topology_finder groups[{i}] bytes", size, "a finite value >= 0")
        out.append((servers, size))
    if mp is None:
        mat = np.zeros((n, n))
    else:
        mat = np.array(mp, dtype=np.float64)
        if mat.shape != (n, n):
            raise invalid("topology_finder mp shape", mat.shape, f"({n}, {n}), servers x servers")
        if not np.all(np.isfinite(mat)) or np.any(mat < 0):
            raise invalid("topology_finder mp", "negative or non-finite entries",
                          "bytes >= 0")
        np.fill_diagonal(mat, 0.0)
    return int(n), int(d), out, mat


def build_topology(links: LinkSet, n: int, d: int, bandwidth: float, latency: float, *,
                   name: str, params: dict) -> tuple[Topology, np.ndarray]:
    """The immutable topology of a finished link set (links sorted by kind, then ids)."""
    src, dst, kind = links.arrays()
    order = np.lexsort((dst, src, kind))
    topo = Topology(n, 0, src[order], dst[order], bandwidth, latency, name=name,
                    family="topoopt", params={"servers": n, "degree": d,
                                              "link_bandwidth_Bps": float(bandwidth),
                                              **params})
    return topo, np.array(KIND_NAMES, dtype=object)[kind[order]].astype(str)


def topology_finder(n: int, d: int, groups=(), mp=None, *, discount="halve",
                    primes_only: bool = False, k_paths: int = DEFAULT_K_PATHS,
                    max_routed_pairs: int = DEFAULT_MAX_ROUTED_PAIRS,
                    link_bandwidth: float = DEFAULT_BW, latency: float = DEFAULT_LAT,
                    min_ratio: float = 1.0, seed: int = 0, name: str = "") -> TopoOptResult:
    """TopologyFinder (Algorithm 1): a direct-connect topology and routes for a demand.

    Parameters
    ----------
    n : int
        Servers of the job.
    d : int
        Interfaces (degree) per server.
    groups : sequence of (servers, bytes)
        AllReduce groups, servers in ring order, ``bytes`` sent by each member to its
        successor per iteration (``Demand.split()[0]``).
    mp : array_like, optional
        ``n x n`` MP bytes per iteration (``Demand.split()[1]``).
    discount : {"halve", "none", "harmonic"} or callable, optional
        Pair-weight multiplier after ``l`` links (:mod:`topologies.topoopt.matching`).
    primes_only : bool, optional
        TotientPerms with prime generators only (plus 1).
    k_paths : int, optional
        Paths per MP pair.
    max_routed_pairs : int, optional
        MP pairs (heaviest first) routed up front; the rest with ``result.paths``.
    link_bandwidth : float, optional
        Bytes/s of every directed link.
    latency : float, optional
        Seconds per link.
    min_ratio : float, optional
        SelectPermutations' smallest geometric ratio (1: as printed; 2: App. E.2).
    seed : int, optional
        Tie-breaks of the matchings, the fill and the repair; same seed, same result.
    name : str, optional
        Topology name.

    Returns
    -------
    TopoOptResult

    Raises
    ------
    InvalidSpecError
        Bad sizes, groups, matrix or options.
    InfeasibleError
        Internal invariants (degree ``d`` everywhere) could not be met; the repair
        makes any ``n >= 2``, ``d >= 1`` connected, so this signals a bug.

    Complexity: O(d n^2) numpy work for the matchings, O(n (n + nd)) for the hop
    matrix, Blossom on the candidate graph; ~0.1 s for 128 servers, a few seconds
    for 1024 (``experiments/benchmarks/bench_topologyfinder.py``).

    Examples
    --------
    >>> r = topology_finder(12, 2, [(tuple(range(12)), 1e9)])
    >>> r.generators, r.diameter
    ([[1, 5]], 5)
    """
    n, d, groups, mp = _check_inputs(n, d, groups, mp)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise invalid("topology_finder seed", seed, "an integer >= 0")
    for fname, v, low in (("k_paths", k_paths, 1), ("max_routed_pairs", max_routed_pairs, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise invalid(f"topology_finder {fname}", v, f"an integer >= {low}")
    disc = discount_function(discount)
    rng = np.random.default_rng(int(seed))

    # Step 1: degree split (lines 2-3).
    t_ar = sum(b * len(s) for s, b in groups)
    t_mp = float(mp.sum())
    if t_ar > 0:
        d_a = min(d, max(1, ceil(d * t_ar / (t_ar + t_mp) - 1e-12)))
    else:
        d_a = 0
    d_mp = d - d_a

    # Step 2: AllReduce rings (lines 4-11), per-server budget (module docstring).
    links = LinkSet(n)
    budget = np.full(n, d_a, dtype=np.int64)
    load = np.zeros(n)
    for s, b in groups:
        load[list(s)] += b
    chosen: dict[int, tuple[int, ...]] = {}
    degrees: dict[int, int] = {}
    order = sorted(range(len(groups)), key=lambda i: -groups[i][1] * len(groups[i][0]))
    for gi in order:
        servers, b = groups[gi]
        members = np.array(servers)
        if b <= 0:
            continue
        k = len(servers)
        share = b / float(load[members].max())
        d_k = ceil(d_a * share - 1e-12)
        cands = totient_perms(k, primes_only=primes_only)
        d_k = min(d_k, int(budget[members].min()), len(cands))
        if d_k <= 0:
            continue
        gens = select_permutations(k, cands, d_k, min_ratio=min_ratio)
        for p in gens:
            links.add(*ring_targets(members, p), RING)
        budget[members] -= d_k
        chosen[gi], degrees[gi] = tuple(gens), d_k

    # Step 3: MP matchings (lines 12-17).
    spare = d - links.out_degree()
    weights = mp + mp.T
    pair_links = np.zeros((n, n), dtype=np.int64)
    exact = True
    for _ in range(d):
        avail = spare > 0
        if avail.sum() < 2:
            break
        w = weights * disc(pair_links)
        pairs, ex = mp_matching(w, avail, rng=rng)
        exact &= ex
        if not pairs:
            break
        a = np.array([p[0] for p in pairs])
        c = np.array([p[1] for p in pairs])
        links.add(np.concatenate([a, c]), np.concatenate([c, a]), MP)
        spare[a] -= 1
        spare[c] -= 1
        pair_links[a, c] += 1
        pair_links[c, a] += 1

    # Step 4: fill free interfaces, then connectivity repair.
    fill_interfaces(links, spare, spare, rng)
    repairs = connect_pieces(links, rng)
    out_deg, in_deg = links.out_degree(), links.in_degree()
    if not (np.all(out_deg == d) and np.all(in_deg == d)):
        raise InfeasibleError(f"TopologyFinder could not give every server degree {d}")
    group_rings = tuple(GroupRings(tuple(s), b, degrees.get(i, 0), chosen.get(i, ()))
                        for i, (s, b) in enumerate(groups))
    topo, kind = build_topology(
        links, n, d, link_bandwidth, latency, name=name or f"topoopt:{n},degree={d}",
        params={"degree_allreduce": d_a, "degree_mp": d_mp,
                "generators": [list(g.generators) for g in group_rings],
                "technology": "patch_panel", "seed": int(seed)})

    # Step 5: routes (lines 19-20).
    routes: dict = {}
    nbrs = neighbour_lists(n, topo.src, topo.dst)
    hops = topo.hop_matrix
    tables: dict = {"nbrs": nbrs, "present": set(zip(topo.src.tolist(), topo.dst.tolist())),
                    "mp_pairs": mp > 0}
    for gi, (servers, _) in enumerate(groups):
        k = len(servers)
        gens = chosen.get(gi)
        if gens:
            tables[("coins", gi)] = coin_change_table(k, gens)
            tables[("pos", gi)] = {srv: i for i, srv in enumerate(servers)}
        for i in range(k):
            s, t = servers[i], servers[(i + 1) % k]
            path = _coin_route(tables, gi, servers, s, t) if gens else None
            paths = [path] if path is not None else k_shortest_paths(nbrs, hops, s, t, 1)
            old = routes.get((s, t), [])
            routes[(s, t)] = old + [p for p in paths if p not in old]
    if max_routed_pairs:
        ii, jj = np.nonzero(mp)
        order_mp = np.lexsort((jj, ii, -mp[ii, jj]))[:max_routed_pairs]
        for s, t in zip(ii[order_mp].tolist(), jj[order_mp].tolist()):
            old = routes.get((s, t), [])
            extra = k_shortest_paths(nbrs, hops, s, t, k_paths)
            routes[(s, t)] = old + [p for p in extra if p not in old][: max(0, k_paths -
                                                                            len(old))]
    return TopoOptResult(topology=topo, routes=routes, groups=group_rings,
                         degree_allreduce=d_a, degree_mp=d_mp, link_kind=kind,
                         repairs=repairs, matching_exact=bool(exact), k_paths=int(k_paths),
                         _tables=tables)
