"""Double binary tree (``--algorithm dbt``): two complementary binary trees,
each carrying half of the chunks (Sanders, Speck & Traeff, "Two-tree
algorithms for full bandwidth broadcast, reduction and scan", Parallel
Computing 35(12), 2009; the construction NCCL 2.4 uses for all-reduce).

Tree 1 is the *in-order* binary tree on positions ``1..m``: position ``x``
with lowest set bit ``h`` hangs below ``x + 2^h`` or ``x - 2^h`` (whichever is
a multiple of ``2^(h+1)`` with an odd quotient), going further up while that
position is beyond ``m``; the root is the largest power of two ``<= m``.
Leaves are the odd positions, interior nodes the even ones, and the height is
``floor(log2 m)``.  Tree 2 is tree 1 mirrored (position ``x -> m+1-x``) when
``m`` is even and shifted by one (``x -> x+1``, ``m -> 1``) when ``m`` is odd,
so that the interior nodes of one tree are leaves of the other: each NPU
sends and receives about the same amount in total (Sanders et al., Sec. 3).

The returned schedule's collective is ``collective.with_chunks(2 * c)``:
pieces ``k < c`` of every shard go through tree 1, pieces ``k >= c`` through
tree 2, pipelined chunk by chunk.

* allreduce: both trees span all ``n`` participants (rank order); each chunk
  is reduced up its tree (a node adds its partial sum into its parent once
  its children's have arrived) and broadcast down from the tree's root;
* broadcast / reduce: both trees span the ``n - 1`` non-root participants
  (in rank order starting after the root) and the root is the parent of both
  tree roots (Sanders et al.'s two-tree broadcast and reduction).
"""

from __future__ import annotations

import numpy as np

from evaluators.algorithms.patterns import tree_broadcast, tree_reduce
from evaluators.algorithms.closed_form import DBT
from evaluators.algorithms.plan import Plan, shard_chunks
from evaluators.collectives import Collective
from evaluators.registry import register_algorithm
from evaluators.schedule import Schedule

__all__ = ["dbt", "inorder_tree", "double_binary_tree"]


def inorder_tree(m: int) -> list[int | None]:
    """Parent of each of ``m`` ranks (0-based) in the in-order binary tree (``None``: root).

    Examples
    --------
    >>> inorder_tree(6)          # positions 1..6: root 4; 2 -> {1, 3}; 4 -> {2, 6}; 6 -> {5}
    [1, 3, 1, None, 5, 3]
    """
    root = 1 << (m.bit_length() - 1)
    parent: list[int | None] = []
    for x in range(1, m + 1):
        if x == root:
            parent.append(None)
            continue
        y = x
        while True:
            h = (y & -y).bit_length() - 1
            y = y + (1 << h) if (y >> (h + 1)) % 2 == 0 else y - (1 << h)
            if y <= m:
                break
        parent.append(y - 1)
    return parent


def double_binary_tree(m: int) -> tuple[list[int | None], list[int | None]]:
    """The two complementary trees on ``m`` ranks (parent lists; module docstring)."""
    t1 = inorder_tree(m)
    f = (lambda r: m - 1 - r) if m % 2 == 0 else (lambda r: (r + 1) % m)
    t2: list[int | None] = [None] * m
    for r, p in enumerate(t1):
        t2[f(r)] = None if p is None else f(p)
    return t1, t2


@register_algorithm("dbt", kinds=("allreduce", "broadcast", "reduce"),
                    summary="double binary tree (two complementary trees, half the chunks each)",
                    closed_form=DBT)
def dbt(topology, collective: Collective) -> Schedule:
    """Double-binary-tree schedule.

    Parameters
    ----------
    topology : topologies.Topology
        Any connected network (tree edges are minimum-hop routes).
    collective : Collective
        allreduce, broadcast or reduce.

    Returns
    -------
    Schedule
        For ``collective.with_chunks(2 * c)``, timed by the ``congestion``
        model; ``metadata["trees"]`` holds both trees as ``{child NPU: parent
        NPU}`` maps.

    Notes
    -----
    allreduce: ``4 (n-1) n c`` transfers (``n`` shards of ``2c`` chunks, each
    reduced over ``n-1`` edges and broadcast over ``n-1``); broadcast and
    reduce: ``2 (n-1) c``.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> s = dbt(from_spec("fc:7,bw=1GB/s,lat=0"), Collective.on("broadcast", 7, 2e9))
    >>> round(s.time_s, 9)     # 1 GB per tree over 1 + floor(log2 6) = 3 hops
    3.0
    """
    c = collective.chunks_per_npu
    split = collective.with_chunks(2 * c)
    npus = list(collective.npus)
    n = collective.n
    halves = (np.arange(c), np.arange(c, 2 * c))
    if collective.kind == "allreduce":
        members = npus
        roots: list[int | None] = [None, None]
    else:
        r = collective.position(collective.root)
        members = [npus[(r + d) % n] for d in range(1, n)]
        roots = [collective.root, collective.root]
    trees = []
    for parents, root in zip(double_binary_tree(len(members)), roots):
        trees.append({members[i]: (root if p is None else members[p])
                      for i, p in enumerate(parents)})
        if root is not None:
            trees[-1][root] = None
    plan = Plan(topology, split)
    if collective.kind == "allreduce":
        streams = [np.concatenate([shard_chunks(split, s, half) for s in range(n)])
                   for half in halves]
        ups = [tree_reduce(t, ch) for t, ch in zip(trees, streams)]
        downs = [tree_broadcast(t, ch) for t, ch in zip(trees, streams)]
        # Chunk j: both reductions, then both broadcasts (causal: the root has
        # the full sum of chunk j before broadcasting it).
        for j in range(streams[0].size):
            plan.add_steps([ups[0][j], ups[1][j], downs[0][j], downs[1][j]])
    else:
        pattern = tree_broadcast if collective.kind == "broadcast" else tree_reduce
        steps = [pattern(t, shard_chunks(split, 0, half)) for t, half in zip(trees, halves)]
        for j in range(c):
            plan.add_steps([steps[0][j], steps[1][j]])
    meta_trees = [{int(k): (None if v is None else int(v)) for k, v in t.items()} for t in trees]
    return plan.finish("dbt", trees=meta_trees)
