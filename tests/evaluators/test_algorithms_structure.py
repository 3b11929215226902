"""Structure of the baseline schedules: who talks to whom, how many transfers,
the trees and rings they use, and their options' validation."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from evaluators.algorithms.dbt import double_binary_tree, inorder_tree
from evaluators.algorithms.multiring import (
    direct_generators, select_generators, totient_generators,
)
from evaluators.collectives import Collective
from evaluators.registry import synthesize
from evaluators.schedule import COPY, REDUCE
from evaluators.validate import validate_schedule
from topologies.registry import from_spec


def _pairs(sched):
    return Counter(zip(sched.src.tolist(), sched.dst.tolist()))


def _phi(n):
    # Euler's product formula, independent of the gcd test in totient_generators.
    result, m, p = n, n, 2
    while p * p <= m:
        if m % p == 0:
            while m % p == 0:
                m //= p
            result -= result // p
        p += 1
    if m > 1:
        result -= result // m
    return result


# ------------------------------------------------------------------ counts
@pytest.mark.parametrize("n,c", [(4, 1), (5, 2), (8, 3)])
def test_transfer_counts(n, c):
    topo = from_spec(f"fc:{n}")
    coll = {k: Collective.on(k, n, 1e6, chunks_per_npu=c)
            for k in ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast")}
    assert len(synthesize(topo, coll["allgather"], "ring")) == (n - 1) * n * c
    assert len(synthesize(topo, coll["allreduce"], "ring")) == 2 * (n - 1) * n * c
    assert len(synthesize(topo, coll["broadcast"], "ring")) == (n - 1) * c
    assert len(synthesize(topo, coll["allreduce"], "bidir-ring")) == 2 * (n - 1) * n * 2 * c
    assert len(synthesize(topo, coll["alltoall"], "direct")) == (n - 1) * n * c
    assert len(synthesize(topo, coll["allreduce"], "direct")) == 2 * (n - 1) * n * c
    assert len(synthesize(topo, coll["allreduce"], "dbt")) == 2 * (n - 1) * n * 2 * c
    assert len(synthesize(topo, coll["broadcast"], "dbt")) == (n - 1) * 2 * c
    if n & (n - 1) == 0:
        assert len(synthesize(topo, coll["reducescatter"], "rhd")) == (n - 1) * n * c


def test_ring_uses_only_ring_neighbours_and_reduce_ops():
    topo = from_spec("ring:6")
    order = [0, 2, 4, 1, 3, 5]
    s = synthesize(topo, Collective.on("allreduce", 6, 6e6), "ring", order=order)
    ring_pairs = {(order[i], order[(i + 1) % 6]) for i in range(6)}
    assert set(_pairs(s)) == ring_pairs
    assert s.metadata["order"] == order
    # First half reduces, second half copies; every path is the hop distance.
    half = len(s) // 2
    assert np.all(s.op[:half] == REDUCE) and np.all(s.op[half:] == COPY)
    hops = np.diff(s.path_ptr)
    assert np.all(hops == topo.hop_matrix[s.src, s.dst])
    assert validate_schedule(s, topo).valid


def test_ring_reduce_ends_at_root_and_broadcast_starts_there():
    topo = from_spec("ring:5")
    red = synthesize(topo, Collective.on("reduce", 5, 1e6, root=2), "ring")
    assert set(_pairs(red)) == {(3, 4), (4, 0), (0, 1), (1, 2)}
    bc = synthesize(topo, Collective.on("broadcast", 5, 1e6, root=2), "ring")
    assert set(_pairs(bc)) == {(2, 3), (3, 4), (4, 0), (0, 1)}


def test_bidir_ring_splits_chunks_between_directions():
    topo = from_spec("ring:5")
    s = synthesize(topo, Collective.on("allgather", 5, 5e6, chunks_per_npu=3), "bidir-ring")
    assert s.collective.chunks_per_npu == 6
    cw = (s.dst - s.src) % 5 == 1
    assert cw.sum() == len(s) // 2
    assert np.all(s.chunk[cw] % 6 < 3) and np.all(s.chunk[~cw] % 6 >= 3)


@pytest.mark.parametrize("order", [[0, 1], [0, 1, 2, 2], [0, 1, 2, 7], "0123", [0, 1, 2, True]])
def test_ring_order_validation(order):
    topo = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="ring order"):
        synthesize(topo, Collective.on("allgather", 4, 1e6), "ring", order=order)


@settings(max_examples=15, deadline=None)
@given(st.permutations(list(range(6))), st.sampled_from(["allgather", "reducescatter",
                                                         "allreduce", "reduce"]))
def test_ring_any_order_is_valid(order, kind):
    topo = from_spec("torus:2x3")
    s = synthesize(topo, Collective.on(kind, 6, 6e6, chunks_per_npu=2), "ring", order=order)
    assert validate_schedule(s, topo).valid
    ring_pairs = {(order[i], order[(i + 1) % 6]) for i in range(6)}
    assert set(_pairs(s)) <= ring_pairs


# -------------------------------------------------------------------- rhd
@pytest.mark.parametrize("n", [3, 5, 6, 7, 12])
def test_rhd_fold_for_non_powers_of_two(n):
    p = 1 << (n.bit_length() - 1)
    r = n - p
    topo = from_spec(f"switch:{n}")
    for kind in ("allgather", "reducescatter", "allreduce"):
        s = synthesize(topo, Collective.on(kind, n, 1e6 * n, chunks_per_npu=2), "rhd")
        assert s.metadata["folded"] == r
        assert validate_schedule(s, topo).valid
        # A folded rank talks only to its partner.
        for i in range(r):
            e = 2 * i
            peers = {int(d) for sr, d in zip(s.src, s.dst) if sr == e} | \
                    {int(sr) for sr, d in zip(s.src, s.dst) if d == e}
            assert peers == {e + 1}


def test_rhd_partners_are_hypercube_neighbours():
    topo = from_spec("hypercube:4")
    s = synthesize(topo, Collective.on("allreduce", 16, 16e6), "rhd")
    x = s.src ^ s.dst
    assert np.all((x & (x - 1)) == 0)              # differ in exactly one bit
    assert np.all(np.diff(s.path_ptr) == 1)        # one hop each
    # Halving sends n/2, n/4, ... shards per step: on each dimension's link.
    per_dim = Counter(int(v).bit_length() - 1 for v in x[: len(s) // 2])
    assert per_dim == {3: 8 * 16, 2: 4 * 16, 1: 2 * 16, 0: 1 * 16}


# -------------------------------------------------------------------- dbt
def test_inorder_tree_by_hand():
    assert inorder_tree(1) == [None]
    assert inorder_tree(2) == [1, None]
    assert inorder_tree(7) == [1, 3, 1, None, 5, 3, 5]   # perfect tree rooted at 4


@pytest.mark.parametrize("m", range(1, 41))
def test_double_binary_tree_properties(m):
    t1, t2 = double_binary_tree(m)
    for t in (t1, t2):
        assert t.count(None) == 1
        kids = Counter(p for p in t if p is not None)
        assert max(kids.values(), default=0) <= 2
        depth = []
        for x in range(m):          # every node reaches the root (no cycles)
            d, y = 0, x
            while t[y] is not None:
                y, d = t[y], d + 1
                assert d <= m
            depth.append(d)
        assert max(depth) == int(np.floor(np.log2(m)))  # floor(log2 m)
    interior1 = {p for p in t1 if p is not None}
    interior2 = {p for p in t2 if p is not None}
    assert not interior1 & interior2       # complementary: interior in at most one tree


def test_dbt_metadata_and_halves():
    topo = from_spec("fc:6")
    s = synthesize(topo, Collective.on("broadcast", 6, 6e6, chunks_per_npu=2, root=3), "dbt")
    t1, t2 = s.metadata["trees"]
    assert t1[3] is None and t2[3] is None
    assert sorted(k for k, v in t1.items() if v == 3) != sorted(k for k, v in t2.items() if v == 3)
    # Pieces 0, 1 travel the edges of tree 1, pieces 2, 3 those of tree 2.
    for chunk, src, dst in zip(s.chunk, s.src, s.dst):
        tree = t1 if chunk < 2 else t2
        assert tree[int(dst)] == src


# ------------------------------------------------------------ hierarchical
def test_hierarchical_stages_and_lines():
    topo = from_spec("hier:ring4_fc2_switch4")
    s = synthesize(topo, Collective.on("allreduce", 32, 32e6), "hierarchical")
    assert s.metadata["stages"] == ["rs:dim0:ring", "rs:dim1:direct", "rs:dim2:rhd",
                                    "ag:dim2:rhd", "ag:dim1:direct", "ag:dim0:ring"]
    coords = topo.node_attrs["coords"]
    differ = (coords[s.src] != coords[s.dst]).sum(axis=1)
    assert np.all(differ == 1)             # every transfer stays within one line
    # Reduce-scatter on dim 0 carries 3/4 of the data over each ring link: 3 * 8 shards.
    dim0 = coords[s.src][:, 0] != coords[s.dst][:, 0]
    assert dim0.sum() == 2 * 32 * 3 * 8


def test_hierarchical_rejects_what_it_cannot_do():
    with pytest.raises(InvalidSpecError, match="multi-dimensional"):
        synthesize(from_spec("perms:6,p=1"), Collective.on("allreduce", 6, 1e6), "hierarchical")
    with pytest.raises(InvalidSpecError, match="every NPU"):
        synthesize(from_spec("torus:2x2"), Collective.on("allreduce", [0, 1, 2], 1e6),
                   "hierarchical")


# --------------------------------------------------------------- multiring
@pytest.mark.parametrize("n", range(2, 40))
def test_totient_generators_count(n):
    gens = totient_generators(n)
    assert len(gens) == _phi(n)
    for p in gens:   # each generator visits every participant exactly once
        assert sorted((i * p) % n for i in range(n)) == list(range(n))


def test_select_generators_geometric():
    assert select_generators(totient_generators(12), 2, 12) == [1, 5]    # TopoOpt's example
    assert select_generators(totient_generators(12), 3, 12) == [1, 5, 11]
    assert select_generators(totient_generators(16), 2, 16) == [1, 3]
    assert select_generators([1], 1, 2) == [1]
    with pytest.raises(InvalidSpecError, match="from 1 to 4"):
        select_generators(totient_generators(12), 5, 12)


def test_multiring_default_generators_follow_the_topology():
    coll = Collective.on("allreduce", 6, 6e6)
    assert direct_generators(from_spec("ring:6"), coll.npus) == [1, 5]
    assert synthesize(from_spec("perms:7,p=1:3"), Collective.on("allreduce", 7, 7e6),
                      "multiring").metadata["generators"] == [1, 3]
    assert synthesize(from_spec("switch:4"), Collective.on("allreduce", 4, 4e6),
                      "multiring").metadata["generators"] == [1, 3]
    # On a bidirectional ring the default is the two directions: the bidir ring.
    ring6 = from_spec("ring:6")
    a = synthesize(ring6, coll, "multiring")
    b = synthesize(ring6, coll, "bidir-ring")
    assert a.time_s == pytest.approx(b.time_s, rel=1e-12)


@pytest.mark.parametrize("options,match", [
    ({"generators": [2]}, "gcd"), ({"generators": [1, 1]}, "distinct"),
    ({"generators": [0]}, "1 <= p < 8"), ({"generators": "x"}, "integers"),
    ({"generators": [1], "rings": 1}, "at most one"), ({"rings": 0}, "from 1 to 4"),
    ({"rings": 5}, "from 1 to 4"), ({"rings": 1.5}, "integer")])
def test_multiring_option_errors(options, match):
    with pytest.raises(InvalidSpecError, match=match):
        synthesize(from_spec("fc:8"), Collective.on("allreduce", 8, 1e6), "multiring", **options)


@settings(max_examples=12, deadline=None)
@given(st.sets(st.sampled_from(totient_generators(10)), min_size=1),
       st.sampled_from(["allgather", "reducescatter", "allreduce"]))
def test_multiring_any_generators_are_valid(gens, kind):
    topo = from_spec("perms:10,p=1:3,bidir=true")
    gens = sorted(gens)
    s = synthesize(topo, Collective.on(kind, 10, 1e7), "multiring", generators=gens)
    assert s.collective.chunks_per_npu == len(gens)
    assert validate_schedule(s, topo).valid
    for r, p in enumerate(gens):          # ring r: pieces r, hops i -> i + p
        mine = s.chunk % len(gens) == r
        assert np.all((s.dst[mine] - s.src[mine]) % 10 == p)
