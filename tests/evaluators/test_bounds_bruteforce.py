"""Cut bounds vs brute force over every node subset on small irregular graphs.

The oracle below enumerates all 2^n node sets with plain numpy and shares no
code with evaluators.cuts / evaluators.bounds.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators.cuts as cuts
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from topologies.model import Topology

REL = 1e-9
BANDWIDTHS = [1e9, 2e9, 3e9, 5e9, 1.5e9, 2.75e9]
ODD_BANDWIDTHS = [1e9 / 3, np.pi * 1e9, 2e9 / 7, 5.1e9, 1e9]


def random_topology(seed: int, odd: bool = False) -> Topology:
    """A strongly connected random graph: 3-7 NPUs, 0-3 switches, <= 10 nodes."""
    rng = np.random.default_rng(seed)
    npus = int(rng.integers(3, 8))
    switches = int(rng.integers(0, min(3, 10 - npus) + 1))
    n = npus + switches
    order = rng.permutation(n)
    src, dst = list(order), list(np.roll(order, -1))  # a directed cycle: strongly connected
    for _ in range(int(rng.integers(0, 2 * n))):
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        src.append(a)
        dst.append(b)
        if rng.random() < 0.5:  # half of them as cables
            src.append(b)
            dst.append(a)
    pool = ODD_BANDWIDTHS if odd else BANDWIDTHS
    bw = rng.choice(pool, len(src))
    return Topology(npus, switches, src, dst, bw, 0.0, name=f"random{seed}")


def subsets(n: int) -> np.ndarray:
    codes = np.arange(1 << n)
    return ((codes[:, None] >> np.arange(n)) & 1).astype(bool)


def brute(topo: Topology, participants, root=None) -> dict:
    """Every cut quantity by enumeration: returns the optimum of each problem."""
    S = subsets(topo.n_nodes)
    cap = (S[:, topo.src] & ~S[:, topo.dst]).astype(float) @ topo.bandwidth
    P = np.zeros(topo.n_nodes, bool)
    P[list(participants)] = True
    inside = (S & P).sum(axis=1)
    outside = P.sum() - inside
    split = (inside > 0) & (outside > 0)
    out = {
        "ag": np.max(np.where(split, inside / np.where(split, cap, 1), 0)),
        "rs": np.max(np.where(split, outside / np.where(split, cap, 1), 0)),
        "a2a": np.max(np.where(split, inside * outside / np.where(split, cap, 1), 0)),
        "sep": np.min(np.where(split, cap, np.inf)),
    }
    if root is not None:
        has_root = S[:, root]
        others_out = outside  # root inside: outside counts non-roots only
        sc = has_root & (others_out > 0)
        out["scatter"] = np.max(np.where(sc, others_out / np.where(sc, cap, 1), 0))
        out["bcast"] = np.min(np.where(sc, cap, np.inf))
        ga = ~has_root & (inside > 0)
        out["gather"] = np.max(np.where(ga, inside / np.where(ga, cap, 1), 0))
        out["reduce"] = np.min(np.where(ga, cap, np.inf))
    return out


def check_all(topo: Topology, participants, M: float = 1e9, **kw) -> None:
    participants = tuple(participants)
    N = len(participants)
    root = participants[-1]
    ref = brute(topo, participants, root)
    share = M / N

    def cut(kind, r=None):
        b = lower_bound(topo, Collective(kind, participants, M, root=r), **kw)
        assert b.exact, kind
        return b

    b = cut("allgather")
    assert b.components["cut"] == pytest.approx(share * ref["ag"], rel=REL)
    # The reported set attains the value.
    S = np.zeros(topo.n_nodes, bool)
    S[list(b.cut_nodes)] = True
    cap = topo.bandwidth[S[topo.src] & ~S[topo.dst]].sum()
    assert share * np.isin(participants, b.cut_nodes).sum() / cap == \
        pytest.approx(b.components["cut"], rel=REL)
    b = cut("reducescatter")
    assert b.components["cut"] == pytest.approx(share * ref["rs"], rel=REL)
    S = np.zeros(topo.n_nodes, bool)
    S[list(b.cut_nodes)] = True
    cap = topo.bandwidth[S[topo.src] & ~S[topo.dst]].sum()
    assert share * (N - np.isin(participants, b.cut_nodes).sum()) / cap == \
        pytest.approx(b.components["cut"], rel=REL)
    assert cut("allreduce").components["cut"] == pytest.approx(M / ref["sep"], rel=REL)
    assert cut("alltoall").components["cut"] == pytest.approx(share * ref["a2a"], rel=REL)
    assert cut("scatter", root).components["cut"] == pytest.approx(share * ref["scatter"],
                                                                   rel=REL)
    assert cut("gather", root).components["cut"] == pytest.approx(share * ref["gather"], rel=REL)
    assert cut("broadcast", root).components["cut"] == pytest.approx(M / ref["bcast"], rel=REL)
    assert cut("reduce", root).components["cut"] == pytest.approx(M / ref["reduce"], rel=REL)


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_all_npus(seed):
    topo = random_topology(seed)
    check_all(topo, range(topo.npus))


@pytest.mark.parametrize("seed", range(12, 18))
def test_random_graphs_subset_of_npus(seed):
    topo = random_topology(seed)
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, topo.npus + 1))
    check_all(topo, sorted(rng.choice(topo.npus, k, replace=False).tolist()))


@pytest.mark.parametrize("seed", range(18, 24))
def test_odd_bandwidths_exact_integer_path(seed):
    # Bandwidths like 1e9/3 and pi*1e9 need huge exact integers: the rounded
    # certificates and the networkx fallback do the work.
    topo = random_topology(seed, odd=True)
    check_all(topo, range(topo.npus))


@pytest.mark.parametrize("seed", range(24, 30))
def test_coarse_rounding_paths(seed, monkeypatch):
    # Force every problem through the rounded (certificate) path with very
    # coarse rounding, so failed certificates, improving rounded cuts and exact
    # re-solves all happen; the answers must not change.
    monkeypatch.setattr(cuts, "_INT32_MAX", 0)
    monkeypatch.setattr(cuts, "_SCALED_BITS", 6)
    topo = random_topology(seed)
    check_all(topo, range(topo.npus))


@pytest.mark.parametrize("seed", range(30, 34))
def test_alltoall_split_enumeration_matches(seed):
    # Force the "enumerate participant splits + min-cut placement" method.
    topo = random_topology(seed)
    ref = brute(topo, range(topo.npus))
    b = lower_bound(topo, Collective.on("alltoall", topo.npus, 1e9), alltoall_enum_nodes=1)
    assert b.exact
    assert b.components["cut"] == pytest.approx(1e9 / topo.npus * ref["a2a"], rel=REL)


def test_dumbbell_cut_beats_ingress():
    # Two 4-cliques (fast) joined by one slow cable: the cut binds for allgather
    # and the Dinkelbach loop has to climb from the ingress seed to it.
    fast, slow = 10e9, 1e9
    src, dst, bw = [], [], []
    for group in ((0, 1, 2, 3), (4, 5, 6, 7)):
        for a in group:
            for b in group:
                if a != b:
                    src.append(a)
                    dst.append(b)
                    bw.append(fast)
    src += [3, 4]
    dst += [4, 3]
    bw += [slow, slow]
    topo = Topology(8, 0, src, dst, bw, 0.0)
    M = 8e9
    b = lower_bound(topo, Collective.on("allgather", 8, M))
    # S = one clique: 4 shards of M/8 over the slow link.
    assert b.components["cut"] == pytest.approx(4 * M / 8 / slow, rel=1e-12)
    assert b.binding == "cut" and b.exact
    assert set(b.cut_nodes) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    ref = brute(topo, range(8))
    assert b.components["cut"] == pytest.approx(M / 8 * ref["ag"], rel=REL)
    ar = lower_bound(topo, Collective.on("allreduce", 8, M))
    assert ar.components["cut"] == pytest.approx(M / slow, rel=1e-12)


def test_budget_truncation_is_valid_and_flagged():
    # One max-flow allowed: the result is a true cut (<= the exact maximum) and
    # exact is False.
    topo = random_topology(3)
    full = lower_bound(topo, Collective.on("allgather", topo.npus, 1e9))
    tiny = lower_bound(topo, Collective.on("allgather", topo.npus, 1e9), exact_node_limit=1)
    assert not tiny.exact and full.exact
    assert tiny.components["cut"] <= full.components["cut"] * (1 + 1e-12)
    bc = lower_bound(topo, Collective.on("broadcast", topo.npus, 1e9), exact_node_limit=1)
    assert not bc.exact


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=100, max_value=10_000))
def test_hypothesis_random_graphs_allgather(seed):
    topo = random_topology(seed, odd=seed % 3 == 0)
    ref = brute(topo, range(topo.npus))
    b = lower_bound(topo, Collective.on("allgather", topo.npus, 1.0))
    assert b.components["cut"] == pytest.approx(ref["ag"] / topo.npus, rel=REL)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1e-3, max_value=1e15, allow_nan=False,
                          allow_infinity=False), min_size=1, max_size=12))
def test_integer_weights_are_exact(bws):
    from fractions import Fraction

    n = len(bws) + 1
    net = cuts.CutNetwork(n, list(range(len(bws))), list(range(1, n)), bws)
    for w, b in zip(net.weight, bws):
        assert w * net.unit == Fraction(b)
    assert all(isinstance(w, int) and w > 0 for w in net.weight)


def test_symmetry_shortcut_rejects_false_automorphisms():
    # A 3x3 torus with one cable made slower keeps its coordinates and dims, so
    # translations are proposed; they no longer map the links onto themselves and
    # must be rejected, or the single-orbit shortcut would miss the slow cut.
    from topologies.families.multidim import torus
    from topologies.symmetry import participant_orbits

    base = torus([3, 3], bandwidth=2e9, latency=0.0)
    bw = base.bandwidth.copy()
    slow = np.flatnonzero(((base.src == 4) & (base.dst == 5)) | ((base.src == 5) & (base.dst == 4)))
    bw[slow] = 0.5e9
    topo = Topology(base.npus, 0, base.src, base.dst, bw, 0.0, dims=base.dims,
                    node_attrs=base.node_attrs)
    orbits = participant_orbits(topo, range(9))
    assert len(orbits) > 1
    ref = brute(topo, range(9))
    for kind, key in (("allgather", "ag"), ("reducescatter", "rs")):
        b = lower_bound(topo, Collective.on(kind, 9, 9.0))
        assert b.components["cut"] == pytest.approx(ref[key], rel=REL)
