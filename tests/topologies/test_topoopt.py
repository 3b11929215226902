"""TopologyFinder, CoinChangeMod, SelectPermutations and OCS-reconfig (TopoOpt NSDI'23).

Oracles: Euler's product formula for the totient, cycle walks for rings, BFS on the
circulant graph for CoinChangeMod, networkx's Yen paths for k-shortest paths,
Theorem 1's bound, and degree / connectivity invariants counted from the link arrays.
"""

from __future__ import annotations

from collections import deque

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from topologies.topoopt import (
    coin_change_mod, coin_change_table, ocs_reconfig, ring_targets,
    select_permutations, theorem1_diameter_bound, topology_finder, totient_perms)
from topologies.topoopt.matching import mp_matching
from topologies.routing import k_shortest_paths, neighbour_lists


def _phi(n: int) -> int:
    out, m, p = n, n, 2
    while p * p <= m:
        if m % p == 0:
            while m % p == 0:
                m //= p
            out -= out // p
        p += 1
    if m > 1:
        out -= out // m
    return out


def _bfs(n: int, coins) -> np.ndarray:
    dist = np.full(n, -1)
    dist[0] = 0
    q = deque([0])
    while q:
        u = q.popleft()
        for c in coins:
            v = (u + c) % n
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def _degrees(topo):
    n = topo.npus
    return np.bincount(topo.src, minlength=n), np.bincount(topo.dst, minlength=n)


def _strongly_connected(topo) -> bool:
    g = nx.DiGraph()
    g.add_nodes_from(range(topo.npus))
    g.add_edges_from(zip(topo.src.tolist(), topo.dst.tolist()))
    return nx.is_strongly_connected(g)


# ------------------------------------------------------------------ TotientPerms
def test_totient_perms_paper_example():
    assert totient_perms(12) == [1, 5, 7, 11]          # Sec. 4.3


@pytest.mark.parametrize("n", range(2, 80))
def test_totient_perms_count_and_primes(n):
    assert len(totient_perms(n)) == _phi(n)
    primes = totient_perms(n, primes_only=True)
    assert primes[0] == 1 and set(primes) <= set(totient_perms(n))
    assert all(p == 1 or all(p % q for q in range(2, p)) for p in primes)


@pytest.mark.parametrize("k", range(2, 41))
def test_every_ring_is_a_hamiltonian_cycle(k):
    members = np.random.default_rng(k).permutation(1000)[:k]    # any server ids, any order
    for p in totient_perms(k):
        src, dst = ring_targets(members, p)
        nxt = dict(zip(src.tolist(), dst.tolist()))
        seen, u = [], int(members[0])
        for _ in range(k):
            seen.append(u)
            u = nxt[u]
        assert u == members[0] and sorted(seen) == sorted(members.tolist())


def test_totient_perms_rejects_bad_n():
    with pytest.raises(InvalidSpecError, match="totient_perms n"):
        totient_perms(1)


# ------------------------------------------------------------ SelectPermutations
def test_select_permutations_geometric():
    assert select_permutations(12, totient_perms(12), 2) == [1, 5]
    assert select_permutations(64, totient_perms(64), 3) == [1, 3, 11]   # ~1, 4, 16
    with pytest.raises(InvalidSpecError, match="from 1 to 4"):
        select_permutations(12, totient_perms(12), 5)


@pytest.mark.parametrize("d", range(1, 9))
def test_select_permutations_diameter_within_theorem1(d):
    # Theorem 1 / App. E.2 with the constant stated in theorem1_diameter_bound (C = 1).
    for n in range(4, 601, 7):
        cands = totient_perms(n)
        if d > len(cands):
            continue
        gens = select_permutations(n, cands, d)
        diameter = int(coin_change_table(n, gens).dist.max())
        assert diameter <= theorem1_diameter_bound(n, d), (n, d, gens, diameter)


# ---------------------------------------------------------------- CoinChangeMod
@settings(max_examples=150, deadline=None)
@given(st.integers(2, 70).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(1, n - 1), min_size=1, max_size=6) if n > 1 else st.just({1}),
    st.integers(0, n - 1), st.integers(0, n - 1))))
def test_coin_change_paths_are_shortest(case):
    n, coins, src, dst = case
    coins = sorted(coins)
    bfs = _bfs(n, coins)
    if np.any(bfs < 0):
        with pytest.raises(InfeasibleError):
            coin_change_table(n, coins)
        return
    table = coin_change_table(n, coins)
    assert np.array_equal(table.dist, bfs)
    path = coin_change_mod(n, coins, src, dst)
    assert path[0] == src and path[-1] == dst
    assert len(path) - 1 == bfs[(dst - src) % n]
    assert all((b - a) % n in coins for a, b in zip(path, path[1:]))


def test_coin_change_rejects_bad_coins():
    with pytest.raises(InvalidSpecError, match="coins"):
        coin_change_table(8, [0, 3])
    with pytest.raises(InvalidSpecError, match="coins"):
        coin_change_table(8, [3, 3])


# --------------------------------------------------------------- k shortest paths
@pytest.mark.parametrize("seed", range(6))
def test_k_shortest_paths_match_yen(seed):
    g = nx.random_regular_graph(3, 14, seed=seed).to_directed()
    n = 14
    src = np.array([u for u, _ in g.edges()])
    dst = np.array([v for _, v in g.edges()])
    hops = np.array(nx.floyd_warshall_numpy(g, nodelist=range(n)), dtype=int)
    nbrs = neighbour_lists(n, src, dst)
    rng = np.random.default_rng(seed)
    for _ in range(10):
        s, t = (int(x) for x in rng.choice(n, 2, replace=False))
        ours = k_shortest_paths(nbrs, hops, s, t, 4)
        yen = []
        for p in nx.shortest_simple_paths(g, s, t):
            if len(p) - 1 > hops[s, t] + 2 or len(yen) == 4:
                break
            yen.append(p)
        assert [len(p) for p in ours] == [len(p) for p in yen]
        assert len({tuple(p) for p in ours}) == len(ours)
        for p in ours:
            assert p[0] == s and p[-1] == t and len(set(p)) == len(p)
            assert all(g.has_edge(a, b) for a, b in zip(p, p[1:]))


def test_k_shortest_paths_longer_than_the_recursion_limit():
    # A 3,000-server cycle (a sparse fabric's long detours): the two antipodal paths
    # have 1,500 hops each, beyond Python's recursion limit (TopologyFinder on 2,048
    # servers hit it).  Closed form: clockwise and counter-clockwise.
    n = 3000
    src = np.concatenate([np.arange(n), (np.arange(n) + 1) % n])
    dst = np.concatenate([(np.arange(n) + 1) % n, np.arange(n)])
    d = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    hops = np.minimum(d, n - d)
    paths = k_shortest_paths(neighbour_lists(n, src, dst), hops, 0, n // 2, 3)
    assert sorted(paths) == [list(range(n // 2 + 1)),
                             [0] + list(range(n - 1, n // 2 - 1, -1))]


# --------------------------------------------------------------- matching step
def test_mp_matching_is_a_matching_on_available_servers():
    rng = np.random.default_rng(0)
    w = rng.random((30, 30))
    w = w + w.T
    np.fill_diagonal(w, 0)
    avail = rng.random(30) < 0.7
    for edges in (10**6, 10):      # exact Blossom, then the candidate graph
        pairs, exact = mp_matching(w, avail, rng=rng, blossom_max_edges=edges)
        flat = [v for p in pairs for v in p]
        assert len(flat) == len(set(flat)) and all(avail[v] for v in flat)
        assert exact == (edges > 30 * 30)
        assert len(pairs) == avail.sum() // 2       # complete positive graph: maximal


def test_mp_matching_blossom_is_maximum_weight():
    rng = np.random.default_rng(3)
    w = np.triu(rng.integers(1, 50, (10, 10)).astype(float), 1)
    w = w + w.T
    pairs, exact = mp_matching(w, np.ones(10, bool), rng=rng)
    g = nx.Graph()
    g.add_weighted_edges_from((i, j, w[i, j]) for i in range(10) for j in range(i + 1, 10))
    best = sum(w[a, b] for a, b in nx.max_weight_matching(g))
    assert exact and sum(w[a, b] for a, b in pairs) == pytest.approx(best)


# --------------------------------------------------------------- TopologyFinder
def _check_result(r, n, d):
    topo = r.topology
    out_deg, in_deg = _degrees(topo)
    assert np.all(out_deg == d) and np.all(in_deg == d)
    assert _strongly_connected(topo)
    mp_out = np.bincount(topo.src[r.link_kind == "mp"], minlength=n)
    ar_out = np.bincount(topo.src[r.link_kind == "allreduce"], minlength=n)
    assert np.all(mp_out + ar_out <= d)
    present = set(zip(topo.src.tolist(), topo.dst.tolist()))
    for (s, t), paths in r.routes.items():
        assert paths
        for p in paths:
            assert p[0] == s and p[-1] == t
            assert all((a, b) in present for a, b in zip(p, p[1:]))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 24), st.integers(1, 6), st.integers(0, 3), st.integers(0, 2**16),
       st.sampled_from(["halve", "none", "harmonic"]))
def test_topology_finder_degree_and_connectivity(n, d, n_groups, seed, discount):
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n_groups):
        k = int(rng.integers(2, n + 1))
        groups.append((tuple(rng.permutation(n)[:k].tolist()), float(rng.integers(1, 10))))
    mp = rng.random((n, n)) * (rng.random((n, n)) < 0.3) * 10
    r = topology_finder(n, d, groups, mp, discount=discount, seed=seed)
    _check_result(r, n, d)
    # The degree split (lines 2-3) and per-group degrees never exceed d.
    assert r.degree_allreduce + r.degree_mp == d
    assert all(g.degree <= r.degree_allreduce for g in r.groups)
    if any(b > 0 for _, b in groups):
        assert r.degree_allreduce >= 1


def test_single_group_uses_select_permutations_and_coin_change():
    n, d = 64, 3
    r = topology_finder(n, d, [(tuple(range(n)), 1e9)])
    gens = select_permutations(n, totient_perms(n), d)
    assert r.generators == [gens] and r.degree_allreduce == d
    assert r.diameter == int(coin_change_table(n, gens).dist.max())
    assert r.routes[(5, 6)] == [[5, 6]]
    _check_result(r, n, d)


def test_group_positions_follow_the_group_order():
    members = (3, 0, 4, 1, 2)           # ring order given by the group, not by id
    r = topology_finder(5, 2, [(members, 1e9)])
    ring = r.topology.src[r.link_kind == "allreduce"], r.topology.dst[r.link_kind == "allreduce"]
    pairs = set(zip(ring[0].tolist(), ring[1].tolist()))
    for p in r.generators[0]:
        assert all((members[i], members[(i + p) % 5]) in pairs for i in range(5))
    assert r.repairs == 0
    _check_result(r, 5, 2)


def test_hot_mp_pair_gets_a_direct_link():
    n = 16
    mp = np.zeros((n, n))
    mp[3, 11] = 5e9
    r = topology_finder(n, 4, [(tuple(range(n)), 1e8)], mp)   # d_A = ceil(4 x 1.6/6.6) = 1
    mp_links = set(zip(r.topology.src[r.link_kind == "mp"].tolist(),
                       r.topology.dst[r.link_kind == "mp"].tolist()))
    assert (3, 11) in mp_links and (11, 3) in mp_links
    assert r.routes[(3, 11)][0] == [3, 11]
    _check_result(r, n, 4)


def test_disjoint_groups_each_get_the_allreduce_degree():
    groups = [(tuple(range(0, 8)), 1e9), (tuple(range(8, 16)), 1e9)]
    r = topology_finder(16, 3, groups)
    assert [g.degree for g in r.groups] == [3, 3]
    _check_result(r, 16, 3)          # the two pieces are joined by the repair
    assert r.repairs >= 1


def test_no_allreduce_traffic_is_repaired_to_connected():
    rng = np.random.default_rng(1)
    mp = rng.random((20, 20))
    r = topology_finder(20, 1, [], mp)       # d = 1: must become one Hamiltonian cycle
    assert r.degree_allreduce == 0
    _check_result(r, 20, 1)


def test_topology_finder_is_deterministic_for_a_seed():
    rng = np.random.default_rng(5)
    mp = rng.random((40, 40)) * (rng.random((40, 40)) < 0.2)
    groups = [(tuple(range(0, 40, 2)), 3.0), (tuple(range(40)), 1.0)]
    a = topology_finder(40, 5, groups, mp, seed=7)
    b = topology_finder(40, 5, groups, mp, seed=7)
    assert np.array_equal(a.topology.src, b.topology.src)
    assert np.array_equal(a.topology.dst, b.topology.dst)
    assert a.routes == b.routes


def test_topology_finder_on_a_workload_demand():
    from codesign.workloads import get_workload
    from codesign.workloads.demand import demand_for

    d = demand_for(get_workload("dlrm"), "dp=64,embedding=model", "A100-80", check=False)
    groups, mp = d.split()
    r = topology_finder(d.placement.servers, 4, groups, mp)
    _check_result(r, d.placement.servers, 4)
    assert r.topology.family == "topoopt" and r.degree_mp >= 1


@pytest.mark.parametrize("kwargs,match", [
    ({"n": 1}, "servers"), ({"d": 0}, "degree"),
    ({"groups": [((0, 0), 1.0)]}, "servers"), ({"groups": [((0, 1), -1.0)]}, "bytes"),
    ({"groups": [(0, 1)]}, "groups"), ({"mp": np.ones((3, 3))}, "mp shape"),
    ({"discount": "cube"}, "discount"), ({"seed": -1}, "seed"), ({"k_paths": 0}, "k_paths"),
    # Fuzzing: degree 10^9 allocated links for seconds before running out of memory.
    ({"d": 10 ** 9}, r"degree 1000000000: expected an integer from 1 to 1024")])
def test_topology_finder_bad_input(kwargs, match):
    args = {"n": 6, "d": 2, "groups": [((0, 1, 2), 1.0)], "mp": None, **kwargs}
    n, d, groups, mp = args.pop("n"), args.pop("d"), args.pop("groups"), args.pop("mp")
    with pytest.raises(InvalidSpecError, match=match):
        topology_finder(n, d, groups, mp, **args)


# ----------------------------------------------------------------- OCS-reconfig
@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.integers(1, 5), st.integers(0, 2**16))
def test_ocs_reconfig_degree_and_connectivity(n, d, seed):
    rng = np.random.default_rng(seed)
    t = rng.random((n, n)) * (rng.random((n, n)) < 0.4)
    r = ocs_reconfig(t, d, seed=seed)
    out_deg, in_deg = _degrees(r.topology)
    assert np.all(out_deg == d) and np.all(in_deg == d)
    assert _strongly_connected(r.topology)
    assert r.circuits.sum() == n * d and np.all(np.diag(r.circuits) == 0)


def test_ocs_reconfig_greedy_follows_demand_with_discount():
    t = np.zeros((6, 6))
    t[0, 1], t[2, 3] = 8.0, 3.0
    r = ocs_reconfig(t, 3)
    # Halving: 8 -> 4 -> 2 beats 3 after the second circuit, then 3 -> 1.5 < 2.
    assert r.circuits[0, 1] == 3 and r.circuits[2, 3] >= 1
    flat = ocs_reconfig(t, 3, discount="none")
    assert flat.circuits[0, 1] == 3 and flat.circuits[2, 3] == 3


def test_topology_cost_matches_topoopt_cost():
    # An independent oracle: the per-interface closed form of topologies.cost.
    from topologies.cost import ocs_reconfig_cost, topology_cost, topoopt_cost

    rng = np.random.default_rng(0)
    r = topology_finder(32, 4, [(tuple(range(32)), 1e9)], rng.random((32, 32)) * 1e10,
                        link_bandwidth=12.5e9)
    assert topology_cost(r.topology).total_usd == pytest.approx(
        topoopt_cost(32, 4, 12.5e9).total_usd)
    o = ocs_reconfig(rng.random((32, 32)), 4, link_bandwidth=12.5e9)
    assert topology_cost(o.topology).total_usd == pytest.approx(
        ocs_reconfig_cost(32, 4, 12.5e9).total_usd)


def test_mp_matching_greedy_pieces_stay_a_matching():
    rng = np.random.default_rng(2)
    w = rng.random((40, 40))
    w = w + w.T
    np.fill_diagonal(w, 0)
    pairs, exact = mp_matching(w, np.ones(40, bool), rng=rng, blossom_max_edges=10,
                               blossom_max_nodes=2)
    flat = [v for p in pairs for v in p]
    assert not exact and len(flat) == len(set(flat)) == 40


def test_paths_for_any_pair_use_coin_change_inside_a_group():
    n = 32
    mp = np.zeros((n, n))
    mp[0, 17] = 1e9
    r = topology_finder(n, 3, [(tuple(range(n)), 1e9)], mp, max_routed_pairs=0)
    gens = r.generators[0]
    table = coin_change_table(n, gens)
    for s, t in [(0, 9), (5, 30), (31, 2)]:
        (path,) = r.paths(s, t)
        assert path == table.positions(s, t) and len(path) - 1 == table.dist[(t - s) % n]
    # An MP pair (not precomputed here) gets k shortest paths on the whole topology.
    got = r.paths(0, 17)
    assert 1 <= len(got) <= r.k_paths and len(got[0]) - 1 == r.topology.hop_matrix[0, 17]
    with pytest.raises(InvalidSpecError, match="route dst"):
        r.paths(0, n)
