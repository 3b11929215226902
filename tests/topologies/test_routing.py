"""Up/down Clos routing: D-mod-k, hashed ECMP, plane spraying, ring orders.

Oracles: path validity checked link by link, the D-mod-k theorem (a shift permutation is
routed without two flows on a link on a full fat tree), the flow model (max-min fair
rates, evaluators.iteration.phase with rtol=0 is exact) against injection bandwidth,
the congestion bound (bytes / capacity of the busiest link).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from evaluators.iteration.phase import flow_phase
from topologies.registry import FAMILIES, family_names, from_spec
from topologies.routing import (
    clos_paths, clos_structure, is_clos, max_link_flows, ring_order, spray_paths,
)

family_names()
CLOS_EXAMPLES = sorted(name for name, fam in FAMILIES.items()
                       if is_clos(from_spec(fam.example)))

# Fully populated, non-blocking instances of every Clos family (shift theorem holds).
FULL = ["fattree:k=8", "fattree:servers=128,radix=8", "fattree:servers=512,radix=32",
        "fattree:servers=64,radix=8,scaleup=4", "leafspine:64,hosts_per_leaf=8",
        "railopt:64,gpus=4,radix=32", "railopt:128,gpus=8,radix=64,scaleup=1", "multiplane:64,planes=2,radix=8"]


def _check_paths(t, src, dst, ptr, links):
    lev = clos_structure(t).level
    for i in range(src.size):
        p = links[ptr[i]:ptr[i + 1]]
        if src[i] == dst[i]:
            assert p.size == 0
            continue
        assert t.src[p[0]] == src[i] and t.dst[p[-1]] == dst[i]
        assert np.all(t.dst[p[:-1]] == t.src[p[1:]])
        nodes = np.r_[t.src[p], t.dst[p[-1]]]
        levels = lev[nodes]
        if np.any(levels < 0):          # through a scale-up crossbar: 2 hops
            assert p.size == 2
            continue
        top = int(np.argmax(levels))
        assert np.all(np.diff(levels[:top + 1]) == 1) and np.all(np.diff(levels[top:]) == -1)


def test_every_registered_clos_family_is_covered():
    assert {"fattree", "leafspine", "railopt", "multiplane"} <= set(CLOS_EXAMPLES)


@pytest.mark.parametrize("name", CLOS_EXAMPLES)
@pytest.mark.parametrize("method", ["dmodk", "ecmp"])
def test_paths_are_valid_up_down_routes(name, method):
    t = from_spec(FAMILIES[name].example)
    rng = np.random.default_rng(1)
    src = rng.integers(0, t.npus, 200)
    dst = rng.integers(0, t.npus, 200)
    ptr, links = clos_paths(t, src, dst, method=method, seed=3)
    _check_paths(t, src, dst, ptr, links)


def _rank_shift(t, c):
    order = np.argsort(clos_structure(t).rank)
    src = order
    dst = order[(np.arange(t.npus) + c) % t.npus]
    return src, dst


@pytest.mark.parametrize("spec", FULL)
def test_shift_permutation_is_contention_free_and_reaches_injection_bandwidth(spec):
    t = from_spec(spec)
    inj = float(t.params.get("injection_Bps", t.params["link_bandwidth_Bps"]))
    for c in sorted({1, 3, t.npus // 4, t.npus // 2}):
        src, dst = _rank_shift(t, c)
        if "planes" in t.params and t.params["planes"] > 1:
            ptr, links, owner, share = spray_paths(t, src, dst)
            size = 1e6 * share
            s, d = src[owner], dst[owner]
        else:
            ptr, links = clos_paths(t, src, dst)
            size, s, d = np.full(src.size, 1e6), src, dst
            assert max_link_flows(t, ptr, links) == 1
        res = flow_phase(t, s, d, size, rtol=0, paths=(ptr, links))
        # Contention-free: every flow runs at its path's slowest link, alone.
        alone = size / np.minimum.reduceat(t.bandwidth[links], ptr[:-1]) \
            + np.add.reduceat(t.latency[links], ptr[:-1])
        assert res.makespan_s == pytest.approx(alone.max(), rel=1e-9), c
        if "scaleup_size" not in t.params:       # every flow crosses the Clos
            lat = float(np.max(res.hops)) * float(t.latency.max())
            assert res.makespan_s == pytest.approx(1e6 / inj + lat, rel=1e-9), c


def test_ecmp_collides_where_dmodk_does_not():
    t = from_spec("fattree:k=8")
    src, dst = _rank_shift(t, 16)
    worst = [max_link_flows(t, *clos_paths(t, src, dst, method="ecmp", seed=s))
             for s in range(5)]
    assert min(worst) >= 2                        # balls into bins: some uplink gets two
    t_d = flow_phase(t, src, dst, np.full(128, 1e6), rtol=0,
                     paths=clos_paths(t, src, dst)).makespan_s
    t_e = flow_phase(t, src, dst, np.full(128, 1e6), rtol=0,
                     paths=clos_paths(t, src, dst, method="ecmp")).makespan_s
    assert t_e >= 2 * t_d * 0.99
    # Same seed, same paths; another seed, other paths.
    a = clos_paths(t, src, dst, method="ecmp", seed=1)[1]
    assert np.array_equal(a, clos_paths(t, src, dst, method="ecmp", seed=1)[1])
    assert not np.array_equal(a, clos_paths(t, src, dst, method="ecmp", seed=2)[1])


def _job(rng, n, kind):
    if kind == "perm":
        src = np.arange(n)
        dst = rng.permutation(n)
        keep = src != dst
        return src[keep], dst[keep]
    if kind == "alltoall":
        s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        keep = s != d
        return s[keep], d[keep]
    src = np.arange(n)                                       # ring neighbours
    return src, (src + 1) % n


@settings(max_examples=12, deadline=None)
@given(leaves=st.integers(2, 4), m=st.sampled_from([2, 4, 6]), oversub=st.sampled_from([2, 3]),
       kind=st.sampled_from(["perm", "alltoall", "ring"]), seed=st.integers(0, 100))
def test_non_blocking_never_slower_than_oversubscribed(leaves, m, oversub, kind, seed):
    """Same hosts, same leaves, same injection bandwidth; only the uplinks differ."""
    if m % oversub:
        m = oversub * 2
    n = leaves * m
    full = from_spec(f"leafspine:{n},hosts_per_leaf={m},lat=0")
    thin = from_spec(f"leafspine:{n},hosts_per_leaf={m},oversub={oversub},lat=0")
    src, dst = _job(np.random.default_rng(seed), n, kind)
    size = np.random.default_rng(seed + 1).uniform(1e5, 1e6, src.size)
    out = []
    for t in (full, thin):
        ptr, links = clos_paths(t, src, dst)
        load = np.bincount(links, weights=np.repeat(size, np.diff(ptr)), minlength=t.n_links)
        bound = float((load / t.bandwidth).max())
        span = flow_phase(t, src, dst, size, rtol=0, paths=(ptr, links)).makespan_s
        out.append((bound, span))
    assert out[0][0] <= out[1][0] * (1 + 1e-12)
    assert out[0][1] <= out[1][1] * (1 + 1e-9)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(7, 24), kind=st.sampled_from(["perm", "alltoall", "ring"]),
       seed=st.integers(0, 100))
def test_non_blocking_fattree_never_slower_than_oversubscribed(n, kind, seed):
    """fattree:servers=N radix 12 (6 hosts + 6 uplinks per leaf) vs radix 8 at 3:1 (6 hosts +
    2 uplinks): same leaves and link rate, so the same injection bandwidth."""
    src, dst = _job(np.random.default_rng(seed), n, kind)
    size = np.random.default_rng(seed + 1).uniform(1e5, 1e6, src.size)
    out = []
    for spec in (f"fattree:servers={n},radix=12,tiers=2,lat=0",
                 f"fattree:servers={n},radix=8,oversub=3,tiers=2,lat=0"):
        t = from_spec(spec)
        ptr, links = clos_paths(t, src, dst)
        out.append(flow_phase(t, src, dst, size, rtol=0, paths=(ptr, links)).makespan_s)
    assert out[0] <= out[1] * (1 + 1e-9)


def test_partial_population_breaks_the_shift_theorem_by_pigeonhole():
    """Why the shift theorem needs whole leaves: on 65 hosts a leaf holding 60..63 sends a
    shift by 2 to 62, 63, 64, 0, and no destination-only rule gives four consecutive
    destinations (mod 65) four different uplinks for every window unless 4 divides 65."""
    t = from_spec("fattree:servers=65,radix=8")
    src = np.arange(65)
    ptr, links = clos_paths(t, src, (src + 2) % 65)
    assert max_link_flows(t, ptr, links) == 2


def test_scaleup_domain_traffic_stays_on_nvlink():
    t = from_spec("railopt:4,gpus=4,radix=8")
    ptr, links = clos_paths(t, [0, 0], [3, 4])
    first, count = t.params["scaleup_switches"]
    inside = links[ptr[0]:ptr[1]]
    assert inside.size == 2 and first <= t.dst[inside[0]] < first + count
    across = links[ptr[1]:ptr[2]]
    assert np.all(t.dst[across] < first)           # never through a crossbar


def test_ring_order_keeps_inter_server_hops_on_one_rail():
    t = from_spec("railopt:8,gpus=4,radix=8")
    order = ring_order(t, range(t.npus))
    assert sorted(order) == list(range(t.npus))
    server, rail = t.node_attrs["server"], t.node_attrs["rail"]
    for a, b in zip(order, order[1:] + order[:1]):
        if server[a] != server[b]:
            assert rail[a] == rail[b]
    # Same-rank GPUs: consecutive members share a leaf wherever a leaf holds both.
    members = [g for g in range(t.npus) if rail[g] == 2]
    ring = ring_order(t, members)
    ptr, links = clos_paths(t, ring, ring[1:] + ring[:1])
    hops = np.diff(ptr)
    assert (hops == 2).sum() >= len(ring) - 2        # all but the leaf-crossing hops


def test_spray_splits_over_planes():
    t = from_spec("multiplane:16,planes=4,radix=8")
    ptr, links, owner, share = spray_paths(t, [0, 1], [9, 1])
    assert owner.tolist() == [0, 0, 0, 0, 1]
    np.testing.assert_allclose(np.bincount(owner, weights=share), [1.0, 1.0])
    first_hops = links[ptr[:4]]
    assert len(set(t.dst[first_hops].tolist())) == 4   # four different planes' leaves


def test_bad_input():
    with pytest.raises(InvalidSpecError, match="Clos"):
        clos_paths(from_spec("torus:4x4"), [0], [1])
    t = from_spec("fattree:k=4")
    with pytest.raises(InvalidSpecError, match="dmodk"):
        clos_paths(t, [0], [1], method="random")
    with pytest.raises(InvalidSpecError, match="NPU ids"):
        clos_paths(t, [0], [99])


def test_100k_servers_route_without_all_pairs_tables():
    t = from_spec("fattree:servers=100000,radix=64")
    src = np.arange(0, 100000, 7)
    dst = (src * 31 + 5) % 100000
    ptr, links = clos_paths(t, src, dst)
    _check_paths(t, src[:50], dst[:50], ptr[:51], links)
    assert "_paths" not in t.__dict__                  # no n^2 hop matrix was built


def test_iteration_model_routes_all_to_all_by_dmodk():
    """DLRM's embedding all-to-all on a fat tree: shortest-path routing piles flows on
    one uplink, D-mod-k spreads them (evaluate(..., routing="dmodk") calls clos_paths)."""
    from codesign.workloads import Placement
    from evaluators.iteration import evaluate

    kw = dict(placement=Placement(16, 4), hardware="A100-80")
    out = {r: evaluate("fattree:k=4,bw=100Gbps", "dlrm", "dp=64,embedding=model",
                       routing=r, **kw) for r in ("shortest", "dmodk")}
    assert out["dmodk"].embedding_s < out["shortest"].embedding_s
    assert out["dmodk"].iteration_time_s <= out["shortest"].iteration_time_s


def test_same_rank_collective_stays_on_its_rail():
    """A ring all-reduce among GPU 3 of every server (a DP group with tp=8) crosses only
    rail-3 leaves (and spines between scalable units), never an NVLink crossbar or another
    rail's leaf: the synthesizer's minimum-hop paths and D-mod-k agree on a rail fabric."""
    from evaluators.collectives import Collective
    from evaluators.registry import synthesize

    t = from_spec("railopt:64,gpus=8,radix=32")
    rail = t.node_attrs["rail"]
    members = tuple(ring_order(t, [g for g in range(t.npus) if rail[g] == 3]))
    sched = synthesize(t, Collective("allreduce", members, 64e6), "ring")
    leaves_first, leaves = t.params["switch_levels"][0]
    xbar_first, xbars = t.params["scaleup_switches"]
    nodes = np.unique(np.r_[t.src[sched.path_links], t.dst[sched.path_links]])
    assert not np.any((nodes >= xbar_first) & (nodes < xbar_first + xbars))
    used_leaves = nodes[(nodes >= leaves_first) & (nodes < leaves_first + leaves)]
    for leaf in used_leaves:
        gpus = t.src[(t.dst == leaf) & (t.src < t.npus)]
        assert set(rail[gpus].tolist()) == {3}
    ptr, links = clos_paths(t, members, members[1:] + members[:1])
    assert not np.any(t.dst[links] >= xbar_first)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=2, max_value=6), min_size=2, max_size=3),
       st.booleans())
def test_grid_ring_order_steps_one_link_at_a_time(sizes, mesh):
    """The sweep order of a torus or mesh is a permutation of its NPUs in which every
    consecutive pair is joined by a link (a Hamiltonian path of the grid)."""
    from topologies.routing import grid_ring_order

    spec = f"{'mesh' if mesh else 'torus'}:{'x'.join(map(str, sizes))}"
    t = from_spec(spec)
    order = grid_ring_order(t, range(t.npus))
    assert sorted(order) == list(range(t.npus))
    assert all(t.links_between(a, b).size for a, b in zip(order, order[1:]))
    # A subset keeps the sweep's relative order.
    sub = order[::2]
    assert grid_ring_order(t, sorted(sub)) == sub


def test_a_degraded_grid_keeps_its_coordinates_for_the_sweep():
    """What is left of a torus after a failure keeps its grid (params grid_sizes and
    npu_ids), so its rings still step one link at a time where the links remain."""
    from topologies.failures import Failures, degrade
    from topologies.routing import grid_coordinates, grid_ring_order

    t = from_spec("torus:4x4")
    d = degrade(t, Failures(npus=(5,)))
    sizes, ids = grid_coordinates(d)
    assert sizes == [4, 4] and ids.tolist() == [i for i in range(16) if i != 5]
    order = grid_ring_order(d, range(d.npus))
    intact = [i for i in grid_ring_order(t, range(16)) if i != 5]
    assert [int(ids[i]) for i in order] == intact
    assert grid_coordinates(from_spec("fattree:k=4"))[0] is None
    # Degraded again: the ids stay those of the intact grid.
    twice = degrade(d, Failures(npus=(0,)))     # d's NPU 0 is the grid's NPU 0
    assert grid_coordinates(twice)[1].tolist() == [i for i in range(16) if i not in (0, 5)]
