"""Paths on any topology (topologies.routing): shortest, hashed ECMP, split ECMP, walks.

Oracles: networkx (minimum-hop lengths, the enumeration of all minimum-hop paths for the
split), the path walk checked link by link, Topology.route for the batched form.
"""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from topologies.registry import FAMILIES, family_names, from_spec
from topologies.routing import (
    all_pairs, ecmp_hashed_paths, ecmp_split_loads, pair_paths, predecessor_walk, route,
    shortest_paths,
)

family_names()  # import every built-in family before parametrising
SPECS = ["ring:6", "torus:3x4", "fattree:k=4", "expander:12,degree=3,seed=1", "switch:5",
         "ideal:6,degree=2"]


def _walks(t, src, dst, ptr, links):
    for i, (s, d) in enumerate(zip(src, dst)):
        p = links[ptr[i]:ptr[i + 1]]
        nodes = [s] + t.dst[p].tolist()
        assert t.src[p].tolist() == nodes[:-1] and nodes[-1] == d


@pytest.mark.parametrize("spec", SPECS)
def test_shortest_and_hashed_paths_are_minimum_hop_walks(spec):
    t = from_spec(spec)
    g = nx.DiGraph(list(zip(t.src.tolist(), t.dst.tolist())))
    n = t.n_nodes
    s, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    hops = dict(nx.all_pairs_shortest_path_length(g))
    want = np.array([hops[a][b] for a, b in zip(s.tolist(), d.tolist())])
    assert np.array_equal(all_pairs(t)[0][s, d], want)
    for method in ("shortest", "ecmp_hashed", "ecmp"):
        ptr, links = pair_paths(t, s, d, method=method, seed=3)
        assert np.array_equal(np.diff(ptr), want)
        _walks(t, s.tolist(), d.tolist(), ptr, links)
    if "fattree" in spec:                     # up/down on the NPUs: minimum hop too
        npu = (s < t.npus) & (d < t.npus)
        ptr, links = pair_paths(t, s[npu], d[npu], method="dmodk")
        assert np.array_equal(np.diff(ptr), want[npu])
        _walks(t, s[npu].tolist(), d[npu].tolist(), ptr, links)
    # The batch gives Topology.route's path for every pair.
    ptr, links = shortest_paths(t, s, d)
    for i in range(0, s.size, 7):
        assert tuple(links[ptr[i]:ptr[i + 1]].tolist()) == t.route(int(s[i]), int(d[i])) \
            == route(t, int(s[i]), int(d[i]))


def test_hashed_ecmp_uses_several_paths_and_the_seed_changes_it():
    t = from_spec("fattree:k=4")
    src = np.repeat(np.arange(16), 15)
    dst = np.array([d for s in range(16) for d in range(16) if d != s])
    a = ecmp_hashed_paths(t, src, dst, seed=1)[1]
    assert np.array_equal(a, ecmp_hashed_paths(t, src, dst, seed=1)[1])
    assert not np.array_equal(a, ecmp_hashed_paths(t, src, dst, seed=0)[1])
    fixed = np.bincount(shortest_paths(t, src, dst)[1], minlength=t.n_links).max()
    assert np.bincount(a, minlength=t.n_links).max() < fixed


@pytest.mark.parametrize("spec", ["ring:6", "torus:3x4", "fattree:k=4",
                                  "expander:10,degree=3,seed=2"])
def test_split_ecmp_equals_brute_force_enumeration(spec):
    t = from_spec(spec)
    g = nx.DiGraph(list(zip(t.src.tolist(), t.dst.tolist())))
    rng = np.random.default_rng(0)
    pairs = [(int(a), int(b), float(rng.uniform(1, 9)))
             for a, b in rng.integers(0, t.npus, size=(12, 2))]
    want = np.zeros(t.n_links)
    for s, d, b in pairs:
        if s == d:
            continue
        paths = list(nx.all_shortest_paths(g, s, d))
        for p in paths:
            for u, v in zip(p, p[1:]):
                ids = t.links_between(u, v)
                want[ids] += b / len(paths) * t.bandwidth[ids] / t.bandwidth[ids].sum()
    np.testing.assert_allclose(ecmp_split_loads(t, pairs), want, rtol=1e-12, atol=1e-12)


def test_split_ecmp_on_small_cases():
    ring = from_spec("ring:4")  # 0 -> 2 has two minimum-hop paths (via 1 and via 3)
    load = ecmp_split_loads(ring, [(0, 2, 8.0)])
    on = {(int(ring.src[i]), int(ring.dst[i])): load[i] for i in range(ring.n_links)}
    assert on[(0, 1)] == on[(1, 2)] == on[(0, 3)] == on[(3, 2)] == pytest.approx(4.0)
    assert load.sum() == pytest.approx(16.0)  # bytes x hops
    ft = from_spec("fattree:k=4")  # 16 hosts: host 0 -> host 15 crosses the core, 4 paths
    load = ecmp_split_loads(ft, [(0, 15, 4.0)])
    assert load.sum() == pytest.approx(4.0 * 6)  # six hops on every path
    assert np.isclose(load, 1.0).sum() == 8  # agg-core and core-agg hops split four ways


def test_predecessor_walk_and_errors():
    # A chain 0 -> 1 -> 2 -> 3 given by predecessors; 3 -> 0 unreachable.
    pred = np.array([[-1, 0, 1, 2]] * 4)
    ptr, prev, nxt = predecessor_walk(np.array([0, 0, 2]), np.array([3, 0, 3]),
                                      lambda a, cur: pred[0, cur])
    assert ptr.tolist() == [0, 3, 3, 4]
    assert list(zip(prev.tolist(), nxt.tolist())) == [(0, 1), (1, 2), (2, 3), (2, 3)]
    with pytest.raises(InfeasibleError, match="not reachable"):
        predecessor_walk(np.array([3]), np.array([0]), lambda a, cur: np.full(a.size, -1))
    t = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="route endpoint"):
        shortest_paths(t, [0], [99])
    with pytest.raises(InvalidSpecError, match="routing"):
        pair_paths(t, [0], [1], method="spray")
    with pytest.raises(InvalidSpecError, match="route src"):
        route(t, -1, 2)
    assert route(t, 2, 2) == ()


@pytest.mark.parametrize("seed", range(5))
def test_a_hop_takes_the_fastest_then_lowest_id_parallel_link(seed):
    # Oracle: the preferred link of every adjacent pair found by brute force over the
    # link list (random parallel links of mixed bandwidths).
    from topologies.builder import LinkBuilder
    from topologies.routing import _hop_links

    rng = np.random.default_rng(seed)
    b = LinkBuilder(6)
    for u in range(6):            # a ring so that every node reaches every other
        b.cable(u, (u + 1) % 6, 1e9, 1e-6)
    for _ in range(20):
        u, v = rng.choice(6, 2, replace=False)
        b.cable(int(u), int(v), float(rng.choice([1e9, 2e9, 4e9])), 1e-6,
                count=int(rng.integers(1, 3)))
    t = b.build(name="multi")
    u, v = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
    got = _hop_links(t, u.ravel(), v.ravel())
    for a, c, link in zip(u.ravel().tolist(), v.ravel().tolist(), got.tolist()):
        cands = [i for i in range(t.n_links) if t.src[i] == a and t.dst[i] == c]
        want = min(cands, key=lambda i: (-t.bandwidth[i], i)) if cands else -1
        assert link == want
    for a in range(6):
        for c in range(6):
            hops = route(t, a, c)
            assert all(h == _hop_links(t, [t.src[h]], [t.dst[h]])[0] for h in hops)


def test_routing_tables_of_all_topologies_stay_within_their_share(monkeypatch):
    # The all-pairs tables of every topology count against one share of the memory
    # limit; past it the other topologies' tables are dropped (and rebuilt when asked).
    from codesign.resources import memory_limit
    from topologies import routing

    topos = [from_spec(f"torus:{k}x{k}") for k in (10, 11, 12)]
    each = [8 * t.n_nodes ** 2 for t in topos]
    monkeypatch.setattr(routing, "TABLES_SHARE", 1.5 * max(each) / memory_limit())
    want = [all_pairs(from_spec(f"torus:{k}x{k}"))[0].copy() for k in (10, 11, 12)]
    for t, w in zip(topos, want):
        assert np.array_equal(all_pairs(t)[0], w)
    held = [routing._tables(t).nbytes() for t in topos]
    assert sum(held) <= 1.5 * max(each) and held[-1] > 0 and held[0] == 0
    assert np.array_equal(all_pairs(topos[0])[0], want[0])   # rebuilt on demand


@pytest.mark.parametrize("spec", SPECS + ["railopt:4,gpus=2,radix=4", "dgx1"])
def test_routes_without_all_pairs_tables_equal_those_with_them(spec, monkeypatch):
    # Where the all-pairs tables do not fit, routes and hop counts come from BFS rows of
    # the sources asked, a few at a time. Oracle: the same calls with the full tables.
    from codesign.resources import memory_limit_scope
    from topologies import routing

    full = from_spec(spec)
    n = full.n_nodes
    s, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    want = (shortest_paths(full, s, d), ecmp_hashed_paths(full, s, d, seed=5),
            routing.hop_counts(full, s, d), (full.diameter, full.mean_path_length),
            [route(full, int(a), int(b)) for a, b in zip(s[::5], d[::5])])
    t = from_spec(spec)
    monkeypatch.setattr(routing, "TABLES_SHARE", 0.0)
    with memory_limit_scope(16 * 24.0 * n * 3):        # three BFS rows per block
        got = (shortest_paths(t, s, d), ecmp_hashed_paths(t, s, d, seed=5),
               routing.hop_counts(t, s, d), (t.diameter, t.mean_path_length),
               [route(t, int(a), int(b)) for a, b in zip(s[::5], d[::5])])
    assert routing._tables(t).hops is None            # nothing all-pairs was built
    for (p1, l1), (p2, l2) in zip(want[:2], got[:2]):
        assert np.array_equal(p1, p2) and np.array_equal(l1, l2)
    assert np.array_equal(want[2], got[2]) and want[3] == got[3] and want[4] == got[4]


def _count_searches(monkeypatch) -> list[int]:
    """Sources of every breadth-first search ``topologies.routing`` runs from now on."""
    from topologies import routing

    searched: list[int] = []
    for name in ("_bfs", "_bfs_hops"):      # paths' predecessor rows, hop rows
        search = getattr(routing, name)
        monkeypatch.setattr(routing, name, lambda topo, src, search=search: searched.append(
            topo.n_nodes if src is None else len(src)) or search(topo, src))
    return searched


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_hop_rows_by_breadth_first_order_equal_dijkstras(name):
    # Hop rows come from scipy's breadth-first order (15x faster per source at 12,288
    # servers), paths' predecessors from its unweighted Dijkstra: a minimum hop count
    # is unique, so both give the same rows. Contract over every registered family.
    from topologies import routing

    t = from_spec(FAMILIES[name].example)
    src = np.arange(t.n_nodes)
    assert np.array_equal(routing._bfs_hops(t, src), routing._bfs(t, src)[0])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                         max_size=3 * n))))
def test_hop_rows_of_any_directed_graph_equal_dijkstras(graph):
    # Directed, disconnected, self-loops and parallel links: unreachable nodes are -1.
    from types import SimpleNamespace

    from topologies import routing

    n, edges = graph
    e = np.array(edges, dtype=np.int64).reshape(-1, 2)
    t = SimpleNamespace(n_nodes=n, n_links=len(edges), src=e[:, 0], dst=e[:, 1])
    src = np.arange(n)
    assert np.array_equal(routing._bfs_hops(t, src), routing._bfs(t, src)[0])


def test_hop_rows_searched_once_are_kept_within_the_share(monkeypatch):
    # Tables that do not fit, rows that do: a second ask for the same sources' hop
    # counts searches nothing, and the answers are the tables' (oracle: the full tables).
    from codesign.resources import memory_limit_scope
    from topologies import routing

    full = from_spec("fattree:k=4")
    n = full.n_nodes
    s, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    want = routing.hop_counts(full, s, d)
    t = from_spec("fattree:k=4")
    limit = 16 * 24.0 * n * 3
    monkeypatch.setattr(routing, "TABLES_SHARE", 4.0 * n * n / limit)   # rows, not tables
    searched = _count_searches(monkeypatch)
    with memory_limit_scope(limit):
        first = routing.hop_counts(t, s, d)
        done = sum(searched)
        again = routing.hop_counts(t, s, d)
        ecmp = ecmp_hashed_paths(t, s, d, seed=5)
    assert done == n and sum(searched) == n            # every source searched once
    assert np.array_equal(first, want) and np.array_equal(again, want)
    assert np.array_equal(ecmp[1], ecmp_hashed_paths(full, s, d, seed=5)[1])
    assert routing._tables(t).hops is None and len(routing._tables(t).rows) == n


def test_rows_of_a_block_survive_a_full_share(monkeypatch):
    """Room for a few kept rows only: a block mixing kept sources with new ones evicts or
    cannot keep rows while it is searched (a 100,000-server leaf-spine's ECMP routes
    failed with a KeyError); the answers stay the full tables' (oracle)."""
    from codesign.resources import memory_limit_scope
    from topologies import routing

    full = from_spec("fattree:k=4")
    n = full.n_nodes
    s, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    want = routing.hop_counts(full, s, d)
    want_paths = ecmp_hashed_paths(full, s, d, seed=5)
    t = from_spec("fattree:k=4")
    limit = 16 * 24.0 * n * 3                      # blocks of 3 sources
    row = 2 * n                                    # bytes of one int16 hop row
    monkeypatch.setattr(routing, "TABLES_SHARE", 4.5 * row / limit)   # 4 rows kept
    with memory_limit_scope(limit):
        for first in (np.arange(0, n, 5), np.arange(1, n, 2)):   # kept rows, then others
            routing.hop_counts(t, first, first)
        got = routing.hop_counts(t, s, d)
        paths = ecmp_hashed_paths(t, s, d, seed=5)
    assert np.array_equal(got, want)
    assert np.array_equal(paths[0], want_paths[0]) and np.array_equal(paths[1], want_paths[1])
    assert 0 < len(routing._tables(t).rows) <= 4


@pytest.mark.parametrize("spec", ["fattree:k=4", "torus:4x4", "expander:32,degree=4,seed=1"])
def test_ecmp_paths_are_the_same_with_either_in_neighbour_layout(monkeypatch, spec):
    # CSR (any size) against the padded matrix (small fabrics): the same hashed paths
    from topologies import routing

    rng = np.random.default_rng(0)
    padded = from_spec(spec)
    s, d = rng.integers(0, padded.npus, (2, 300))
    s, d = s[s != d], d[s != d]
    want = ecmp_hashed_paths(padded, s, d, seed=3)
    assert routing._tables(padded).in_nbrs[1] is None
    monkeypatch.setattr(routing, "_PADDED_BYTES", 0)
    csr = from_spec(spec)
    got = ecmp_hashed_paths(csr, s, d, seed=3)
    assert routing._tables(csr).in_nbrs[1] is not None
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


@pytest.mark.parametrize("spec", ["fattree:servers=1024,radix=64,scaleup=8,bw=400Gbps",
                                  "railopt:2,gpus=8,bw=400Gbps"])
@pytest.mark.parametrize("method", ["shortest", "ecmp", "dmodk"])
def test_gpus_of_one_scaleup_domain_talk_over_its_crossbar(spec, method):
    # Both GPUs hang off one leaf, so GPU -> NIC -> leaf -> GPU has as few hops as the
    # NVLink crossbar; hashed ECMP took it for some pairs (at 50 GB/s instead of 450).
    # Oracle: the two links of the GPUs to and from their crossbar, for every pair of a
    # domain; pairs of different domains keep the method's own paths.
    topo = from_spec(spec)
    first, count = topo.params["scaleup_switches"]
    src = np.repeat(np.arange(16), 16)
    dst = np.tile(np.arange(16), 16)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    ptr, links = pair_paths(topo, src, dst, method=method)
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        path = links[ptr[i]:ptr[i + 1]]
        if s // 8 == d // 8:
            assert path.size == 2 and first <= topo.dst[path[0]] < first + count
            assert (topo.src[path[0]], topo.dst[path[1]]) == (s, d)
            assert topo.dst[path[0]] == topo.src[path[1]]
        else:
            assert not (first <= topo.dst[path[0]] < first + count)
    if method != "dmodk":
        cross = (src // 8) != (dst // 8)
        alone = pair_paths(topo, src[cross], dst[cross], method=method)
        got = [links[ptr[i]:ptr[i + 1]].tolist() for i in np.flatnonzero(cross)]
        assert got == [alone[1][alone[0][j]:alone[0][j + 1]].tolist()
                       for j in range(int(cross.sum()))]


def test_predecessor_rows_searched_once_are_kept_within_the_share(monkeypatch):
    # Paths without all-pairs tables: an evaluation asks the same sources' paths several
    # times (ring steps, ECMP phases), and again for every strategy of a search; a
    # 98,304-GPU leaf-spine's evaluation spent 83 % of its time searching them again.
    # The second ask searches nothing; the paths are the full tables' (oracle).
    from codesign.resources import memory_limit_scope
    from topologies import routing

    full = from_spec("fattree:k=4")
    n = full.n_nodes
    s, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    want = (shortest_paths(full, s, d), ecmp_hashed_paths(full, s, d, seed=5))
    t = from_spec("fattree:k=4")
    limit = 16 * 24.0 * n * 3
    monkeypatch.setattr(routing, "TABLES_SHARE", 8.0 * n * n / limit)   # rows, not tables
    searched = _count_searches(monkeypatch)
    with memory_limit_scope(limit):
        first = (shortest_paths(t, s, d), ecmp_hashed_paths(t, s, d, seed=5))
        done = sum(searched)
        again = (shortest_paths(t, s, d), ecmp_hashed_paths(t, s, d, seed=5),
                 routing.hop_counts(t, s, d))
    assert done == n and sum(searched) == n            # every source searched once
    for got in (first, again[:2]):
        for (p1, l1), (p2, l2) in zip(want, got):
            assert np.array_equal(p1, p2) and np.array_equal(l1, l2)
    assert np.array_equal(again[2], routing.hop_counts(full, s, d))
    tab = routing._tables(t)
    assert tab.hops is None and len(tab.rows) == len(tab.pred_rows) == n
