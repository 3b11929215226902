"""Hand counts and closed forms for every family: NPUs, switches, directed links, diameter."""

from collections import Counter
from math import gcd

import networkx as nx
import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from topologies.families.clos import dragonfly, fattree, ideal, leafspine
from topologies.families.direct import direct_connect, expander
from topologies.families.nodes import dgx1, dgx_a100, hgx_h100
from topologies.registry import from_spec

B = 25e9  # default link bandwidth (25GB/s)

# (spec, npus, switches, directed links, diameter) -- counted by hand:
HAND = [
    # 64 NPUs x 3 dims x 2 directions; farthest node is 2+2+2 hops away.
    ("torus:4x4x4", 64, 0, 384, 6),
    ("torus:3x4", 12, 0, 48, 3),
    # A ring of 2 has one cable, not two (docs/architecture.md section 4).
    ("ring:2", 2, 0, 2, 1),
    ("ring:8", 8, 0, 16, 4),
    ("ring:7", 7, 0, 14, 3),
    ("uniring:8", 8, 0, 8, 7),
    # 5x5 mesh: 2 x 5 lines x 4 cables = 40 cables.
    ("mesh:5x5", 25, 0, 80, 8),
    ("mesh:7x10", 70, 0, 2 * (6 * 10 + 7 * 9), 6 + 9),
    ("fc:8", 8, 0, 56, 1),
    ("switch:8", 8, 1, 16, 2),
    ("hypercube:4", 16, 0, 64, 4),
    # hier ring4 x fc2 x switch4: 32 NPUs; 8 switches (one per switch line);
    # ring: 8 rings x 4 cables, fc: 16 pairs, switch: 32 cables -> 80 cables.
    ("hier:ring4_fc2_switch4", 32, 8, 160, 2 + 1 + 2),
    # fat-tree k=4: 16 hosts; 8 edge + 8 aggregation + 4 core; 3 x 16 cables;
    # host - edge - agg - core - agg - edge - host.
    ("fattree:k=4", 16, 20, 96, 6),
    ("fattree:8", 128, 80, 768, 6),
    ("fattree:k=2", 2, 5, 12, 6),
    # leafspine 128 hosts, oversub 2, default 16 hosts + 8 uplinks per leaf:
    # 8 leaves, 8 spines; 128 + 64 cables.
    ("leafspine:128,oversub=2", 128, 16, 384, 4),
    ("leafspine:32,hosts_per_leaf=8,oversub=1", 32, 12, 2 * (32 + 4 * 8), 4),
    # radix 8 at oversub 3: 6 hosts + 2 uplinks per leaf -> 4 leaves, 2 spines.
    ("leafspine:24,radix=8,oversub=3", 24, 4 + 2, 2 * (24 + 4 * 2), 4),
    ("ideal:128,degree=4,bw=100Gbps", 128, 1, 256, 2),
    # dragonfly a=4, p=2, h=2: g = 9 groups, 36 routers, 72 terminals;
    # 72 terminal cables + 9 x 6 local + 36 global cables = 162 cables.
    ("dragonfly:a=4,p=2,h=2", 72, 36, 324, 5),
    ("dragonfly:a=1,p=1,h=2", 3, 3, 2 * (3 + 3), 3),
    ("dgx1", 8, 0, 48, 2),
    # 2 DGX-A100: 16 GPUs, 2 NVSwitches + 8 rails, 16 + 16 cables.
    ("dgx-a100:2", 16, 10, 64, 4),
    ("dgx-a100:1", 8, 1, 16, 2),
    ("dgx-a100:4", 32, 12, 128, 4),
    ("hgx-h100:2", 16, 10, 64, 4),
    ("expander:16,degree=4", 16, 0, 64, None),
    ("perms:12,p=1:5", 12, 0, 24, None),
]


@pytest.mark.parametrize("spec, npus, switches, links, diameter", HAND,
                         ids=[h[0] for h in HAND])
def test_hand_counts(spec, npus, switches, links, diameter):
    t = from_spec(spec)
    assert (t.npus, t.switches, t.n_links) == (npus, switches, links)
    if diameter is not None:
        assert t.diameter == diameter


@pytest.mark.parametrize("k", [2, 4, 6, 8, 10])
def test_fattree_closed_forms(k):
    t = fattree(k, bandwidth=B)
    assert t.npus == k ** 3 // 4
    assert t.switches == k * k + (k // 2) ** 2
    assert t.n_links == 3 * k ** 3 // 2
    assert t.params["bisection_Bps"] == k ** 3 / 8 * B
    deg = np.bincount(t.src, minlength=t.n_nodes)
    assert np.all(deg[: t.npus] == 1)
    # Every switch uses exactly its k ports (edge/agg: k/2 down + k/2 up; core: k pods).
    assert set(deg[t.npus:].tolist()) == {k}
    # Hosts under the same edge switch are 2 hops apart, same pod 4, else 6.
    h = t.hop_matrix
    half = k // 2
    for u, v in [(0, half - 1), (0, half), (0, half * half)]:
        if v < t.npus and u != v:
            same_edge = u // half == v // half
            same_pod = u // (half * half) == v // (half * half)
            assert h[u, v] == (2 if same_edge else 4 if same_pod else 6)


def test_fattree_core_wiring():
    # Core (i, j) is cabled to aggregation switch i of every pod, once.
    k = 6
    t = fattree(k)
    n, half = t.npus, k // 2
    agg0, core0 = n + k * half, n + k * k
    for core in range(core0, core0 + half * half):
        nbrs = sorted(t.dst[t.out_links(core)].tolist())
        i = (core - core0) // half
        assert nbrs == [agg0 + pod * half + i for pod in range(k)]


@pytest.mark.parametrize("hosts, oversub, kw, m, u", [
    (128, 2, {}, 16, 8),
    (128, 1, {}, 16, 16),
    (60, 3, {}, 18, 6),
    (40, 1.5, {}, 18, 12),
    (8, 1, {}, 8, 8),
    (48, 2, {"radix": 48}, 32, 16),
    (48, 1, {"hosts_per_leaf": 12}, 12, 12),
])
def test_leafspine_sizing_rule(hosts, oversub, kw, m, u):
    t = leafspine(hosts, oversub=oversub, **kw)
    p = t.params
    leaves = -(-hosts // m)
    assert (p["hosts_per_leaf"], p["uplinks_per_leaf"], p["spines"], p["leaves"]) == \
        (m, u, u, leaves)
    assert p["hosts_per_leaf"] / p["uplinks_per_leaf"] == pytest.approx(oversub)
    assert t.switches == leaves + u
    # Each full leaf: m host links down, u links up, one to every spine.
    leaf0 = t.npus
    down = np.bincount(t.src[(t.src >= leaf0) & (t.src < leaf0 + leaves) & (t.dst < t.npus)],
                       minlength=t.n_nodes)[leaf0:leaf0 + leaves]
    up = np.bincount(t.src[(t.src >= leaf0) & (t.src < leaf0 + leaves) & (t.dst >= leaf0)],
                     minlength=t.n_nodes)[leaf0:leaf0 + leaves]
    assert down.sum() == hosts and np.all(down[:hosts // m] == m)
    assert np.all(up == u)


def test_leafspine_rejects_sizes_that_break_the_ratio():
    with pytest.raises(InvalidSpecError, match="hosts_per_leaf"):
        leafspine(64, oversub=3, hosts_per_leaf=16)
    with pytest.raises(InvalidSpecError, match="radix"):
        leafspine(64, oversub=2, radix=32)
    with pytest.raises(InvalidSpecError, match="at most one"):
        leafspine(64, oversub=2, radix=48, hosts_per_leaf=16)


def test_ideal_switch_is_one_fat_link_per_server():
    t = ideal(16, degree=4, bandwidth=12.5e9)
    assert np.all(t.bandwidth == 50e9)
    assert np.all(t.injection_bandwidth() == 50e9)
    assert t.params["bisection_Bps"] == 8 * 50e9


@pytest.mark.parametrize("a, p, h, g", [(4, 2, 2, None), (2, 1, 1, None), (3, 2, 2, 5),
                                        (1, 1, 3, 4), (4, 1, 2, 2), (2, 2, 3, 1)])
def test_dragonfly_closed_forms(a, p, h, g):
    t = dragonfly(a, p, h, g)
    g = a * h + 1 if g is None else g
    n = a * p * g
    assert (t.npus, t.switches) == (n, a * g)
    assert t.n_links == 2 * n + g * a * (a - 1) + g * (g - 1)
    routers = t.npus + np.arange(a * g)
    group = (routers - t.npus) // a
    rr = (t.src >= t.npus) & (t.dst >= t.npus)
    cross = rr & (group[np.maximum(t.src - t.npus, 0)] != group[np.maximum(t.dst - t.npus, 0)])
    # Exactly one global link (each direction) between every pair of groups.
    pairs = Counter((int(group[u - t.npus]), int(group[v - t.npus]))
                    for u, v in zip(t.src[cross], t.dst[cross]))
    assert pairs == Counter({(i, j): 1 for i in range(g) for j in range(g) if i != j})
    # At most h global ports per router (exactly h when g = a*h + 1).
    per_router = np.bincount(t.src[cross] - t.npus, minlength=a * g)
    assert per_router.max() <= h
    if g == a * h + 1:
        assert np.all(per_router == h)
    # Local links: the routers of a group are fully connected.
    local = rr & ~cross
    assert local.sum() == g * a * (a - 1)
    if a > 1 and g > 1:
        assert t.diameter == 5


def test_dragonfly_rejects_too_many_groups():
    with pytest.raises(InvalidSpecError, match="a\\*h\\+1"):
        dragonfly(2, 1, 1, g=4)


# nvidia-smi topo -m of a DGX-1 (V100), typed in as an independent oracle.
NVSMI_DGX1 = """
X   NV1 NV1 NV2 NV2 SYS SYS SYS
NV1 X   NV2 NV1 SYS NV2 SYS SYS
NV1 NV2 X   NV2 SYS SYS NV1 SYS
NV2 NV1 NV2 X   SYS SYS SYS NV1
NV2 SYS SYS SYS X   NV1 NV1 NV2
SYS NV2 SYS SYS NV1 X   NV2 NV1
SYS SYS NV1 SYS NV1 NV2 X   NV2
SYS SYS SYS NV1 NV2 NV1 NV2 X
"""


def test_dgx1_nvlink_counts_per_pair():
    t = dgx1()
    expected = np.zeros((8, 8), dtype=int)
    for i, row in enumerate(NVSMI_DGX1.split("\n")[1:-1]):
        for j, cell in enumerate(row.split()):
            if cell.startswith("NV"):
                expected[i, j] = int(cell[2:])
    counts = np.zeros((8, 8), dtype=int)
    np.add.at(counts, (t.src, t.dst), 1)
    np.testing.assert_array_equal(counts, expected)
    assert np.all(counts.sum(axis=1) == 6)          # six NVLinks per V100
    assert np.all(t.injection_bandwidth() == 6 * 25e9)


def test_dgx1_is_a_cube_with_two_face_diagonals():
    t = dgx1()
    pairs = {tuple(sorted(e)) for e in zip(t.src.tolist(), t.dst.tolist())}
    # Hybrid cube-mesh: cube Q3 (vertices = 3-bit labels) plus both diagonals of
    # the two faces with bit 2 fixed.
    ref = nx.hypercube_graph(3)
    ref = nx.relabel_nodes(ref, {v: v[0] + 2 * v[1] + 4 * v[2] for v in ref})
    ref.add_edges_from([(0, 3), (1, 2), (4, 7), (5, 6)])
    assert len(pairs) == 16
    assert nx.is_isomorphic(nx.Graph(list(pairs)), ref)
    # The pairs with two NVLinks form one Hamiltonian cycle.
    counts = Counter(zip(t.src.tolist(), t.dst.tolist()))
    double = nx.Graph([e for e, c in counts.items() if c == 2])
    assert nx.is_isomorphic(double, nx.cycle_graph(8))


@pytest.mark.parametrize("builder, nv, nic", [(dgx_a100, 300e9, 25e9), (hgx_h100, 450e9, 50e9)])
@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_rail_nodes_structure(builder, nv, nic, nodes):
    t = builder(nodes)
    n = 8 * nodes
    rails = 8 if nodes > 1 else 0
    assert (t.npus, t.switches, t.n_links) == (n, nodes + rails, 2 * n + (2 * n if rails else 0))
    np.testing.assert_array_equal(t.node_attrs["server"], np.arange(n) // 8)
    # Every GPU: one NVSwitch link (its node's) and, with rails, one NIC to rail = local index.
    for gpu in range(n):
        out = t.out_links(gpu)
        targets = sorted(t.dst[out].tolist())
        bws = sorted(t.bandwidth[out].tolist())
        assert targets[0] == n + gpu // 8
        if rails:
            assert targets[1] == n + nodes + gpu % 8
            assert bws == [nic, nv]
        else:
            assert bws == [nv]
    # Same rail in two nodes: 2 hops; different rail, different node: 4.
    if nodes > 1:
        assert t.hop_matrix[0, 8] == 2 and t.hop_matrix[0, 9] == 4
        assert t.diameter == 4


def test_expander_is_regular_simple_and_seeded():
    a = expander(32, degree=4, seed=7)
    b = expander(32, degree=4, seed=7)
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.dst, b.dst)
    assert np.all(np.bincount(a.src) == 4) and np.all(np.bincount(a.dst) == 4)
    pairs = list(zip(a.src.tolist(), a.dst.tolist()))
    assert len(set(pairs)) == len(pairs)             # simple graph
    assert set(pairs) == {(v, u) for u, v in pairs}  # cables
    others = [expander(32, degree=4, seed=s) for s in range(3)]
    assert any(not np.array_equal(o.dst, a.dst) for o in others)


def test_expander_degree_two_is_a_hamiltonian_cycle():
    t = expander(10, degree=2, seed=3)
    assert t.diameter == 5 and t.n_links == 20


@pytest.mark.parametrize("n, gens", [(12, [1, 5]), (16, [1, 3, 7]), (7, [2]), (9, [1, 4])])
def test_perms_diameter_is_coin_change(n, gens):
    t = direct_connect(n, permutations=gens)
    assert t.n_links == n * len(gens)
    assert t.params["degree"] == len(gens)
    # Independent oracle: fewest generator steps (forward only) to reach each offset.
    best = {0: 0}
    frontier = [0]
    while frontier:
        nxt = []
        for x in frontier:
            for g in gens:
                y = (x + g) % n
                if y not in best:
                    best[y] = best[x] + 1
                    nxt.append(y)
        frontier = nxt
    assert t.diameter == max(best.values())
    # Every permutation link is i -> i + g mod n.
    offsets = Counter(((t.dst - t.src) % n).tolist())
    assert offsets == Counter({g % n: n for g in gens})


def test_perms_bidirectional_adds_reverse_links():
    t = from_spec("perms:12,p=1:5,bidir=true")
    assert t.n_links == 48
    assert t.params["degree"] == 4
    assert Counter(zip(t.src.tolist(), t.dst.tolist())) == \
        Counter(zip(t.dst.tolist(), t.src.tolist()))


def test_direct_connect_with_permutations_and_matchings():
    t = direct_connect(6, permutations=[[1, 2, 0, 4, 5, 3], 3],
                       matchings=[[(0, 3), (1, 4)], [(2, 5)]])
    # 6 permutation links + 6 links of generator 3 + 3 cables.
    assert t.n_links == 6 + 6 + 6
    assert t.params["degree"] == 3
    assert t.params["generators"] == [3]
    assert len(t.links_between(0, 3)) == 2  # parallel: generator 3 and the matching
    # Fixed points are skipped (server 5 not in the ring of a subgroup).
    t2 = direct_connect(4, permutations=[[1, 2, 0, 3], [0, 1, 3, 2]], matchings=[[(0, 3)]])
    assert t2.n_links == 3 + 2 + 2


@pytest.mark.parametrize("kwargs, match", [
    (dict(permutations=[[0, 0, 1, 2]]), "permutation"),
    (dict(permutations=[4]), "generator"),
    (dict(matchings=[[(0, 1), (1, 2)]]), "matching"),
    (dict(matchings=[[(0, 0)]]), "different"),
    (dict(permutations=[2]), "not connected"),
])
def test_direct_connect_rejects_bad_input(kwargs, match):
    with pytest.raises(InvalidSpecError, match=match):
        direct_connect(4, **kwargs)


def test_totient_generators_give_connected_rings():
    # Every generator coprime with n is a Hamiltonian cycle (TopoOpt Theorem 2).
    n = 12
    for g in range(1, n):
        if gcd(g, n) == 1:
            assert direct_connect(n, permutations=[g]).diameter == n - 1
