"""Communication patterns shared by the baseline algorithms.

A pattern runs among a *group* of NPUs (``members``, in the pattern's rank
order) on *blocks*: ``blocks[i]`` is the array of chunk ids that member ``i``
owns - for a reduce-scatter the chunks that must end fully reduced (over the
group) at member ``i``, for an all-gather the chunks member ``i`` holds at the
start.  At the top level a block is one shard (``c`` chunks); the hierarchical
algorithm reuses the same patterns with blocks made of many shards.

Patterns return steps (see :mod:`evaluators.algorithms.plan`) in causal order.
Each chunk id in a block is its own transfer: the schedule IR moves one chunk
per transfer, so under the congestion model every chunk transfer pays the
link latency once per hop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluators.algorithms.plan import COPY, REDUCE, Step, as_chunks, sequence

__all__ = [
    "ring_reduce_scatter", "ring_all_gather", "ring_all_reduce",
    "direct_reduce_scatter", "direct_all_gather", "direct_all_reduce",
    "hd_reduce_scatter", "hd_all_gather", "hd_all_reduce",
    "chain_broadcast", "chain_reduce", "tree_reduce", "tree_broadcast",
]

Blocks = Sequence[np.ndarray]


def _cat(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([as_chunks(a) for a in arrays]) if arrays else np.zeros(0, np.int64)


# ---------------------------------------------------------------------- ring
def ring_reduce_scatter(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Ring reduce-scatter (Patarasuk & Yuan 2009): ``m-1`` steps; at step ``s``
    member ``i`` adds its partial sum of block ``i-s-1`` into member ``i+1``.

    Block ``b`` travels ``b+1 -> b+2 -> ... -> b`` and ends at member ``b``
    with every member's contribution.
    """
    m = len(members)
    return [[(blocks[(i - s - 1) % m], members[i], members[(i + 1) % m], REDUCE)
             for i in range(m)] for s in range(m - 1)]


def ring_all_gather(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Ring all-gather: at step ``s`` member ``i`` forwards block ``i-s`` to ``i+1``."""
    m = len(members)
    return [[(blocks[(i - s) % m], members[i], members[(i + 1) % m], COPY)
             for i in range(m)] for s in range(m - 1)]


def ring_all_reduce(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Ring all-reduce: reduce-scatter then all-gather over the same ring."""
    return sequence(ring_reduce_scatter(members, blocks), ring_all_gather(members, blocks))


# -------------------------------------------------------------------- direct
def direct_reduce_scatter(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Every member adds its contribution to block ``j`` directly into member ``j``.

    Step ``d`` (``d = 1..m-1``) has member ``i`` send to member ``i+d``, so no
    member receives from two senders in the same step.
    """
    m = len(members)
    return [[(blocks[(i + d) % m], members[i], members[(i + d) % m], REDUCE)
             for i in range(m)] for d in range(1, m)]


def direct_all_gather(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Every member sends its block directly to every other member (offset order)."""
    m = len(members)
    return [[(blocks[i], members[i], members[(i + d) % m], COPY) for i in range(m)]
            for d in range(1, m)]


def direct_all_reduce(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Direct reduce-scatter to the block owners, then direct all-gather."""
    return sequence(direct_reduce_scatter(members, blocks), direct_all_gather(members, blocks))


# ------------------------------------------------------- halving-doubling
def _fold(m: int) -> tuple[int, list[int], list[list[int]]]:
    """Virtual ranks for a group of ``m`` (Thakur, Rabenseifner & Gropp 2005, Sec. 4).

    With ``p = 2^floor(log2 m)`` and ``r = m - p``, member ``2i`` (``i < r``)
    folds into member ``2i+1``; the ``p`` remaining members are the virtual
    ranks.  Returns ``(p, real member of each virtual rank, members whose
    blocks each virtual rank owns)``.
    """
    p = 1 << (m.bit_length() - 1)
    r = m - p
    real = [2 * v + 1 for v in range(r)] + list(range(2 * r, m))
    owned = [[2 * v, 2 * v + 1] for v in range(r)] + [[j] for j in range(2 * r, m)]
    return p, real, owned


def _hd_rs_virtual(members: Sequence[int], vblocks: Blocks, p: int) -> list[Step]:
    """Recursive halving among ``p = 2^k`` ranks (distance ``p/2`` first).

    Rank ``v`` keeps, at the step with distance ``d``, the half of its blocks
    whose index has bit ``d`` equal to its own, and adds the other half into
    its partner ``v ^ d``; it ends with block ``v``.  Blocks are sent in
    decreasing ``block ^ partner`` so that the partner receives first what it
    forwards soonest (the chunks it keeps to the end arrive last), which lets
    the steps overlap under the congestion model.
    """
    steps: list[Step] = []
    d = p >> 1
    while d >= 1:
        step: Step = []
        for v in range(p):
            partner = v ^ d
            # Blocks v still handles agree with v on every bit above d; send the
            # ones that agree with the partner on bit d.
            high = ~((d << 1) - 1)
            mine = [x for x in range(p) if (x & high) == (v & high)]
            send = sorted((x for x in mine if (x & d) == (partner & d)),
                          key=lambda x: -(x ^ partner))
            step.append((_cat([vblocks[x] for x in send]), members[v], members[partner],
                         REDUCE))
        steps.append(step)
        d >>= 1
    return steps


def _hd_ag_virtual(members: Sequence[int], vblocks: Blocks, p: int) -> list[Step]:
    """Recursive doubling among ``p = 2^k`` ranks (distance 1 first): rank ``v``
    sends everything it holds to ``v ^ d``, in the order it got it (own block
    first, i.e. increasing ``block ^ v``)."""
    steps: list[Step] = []
    d = 1
    while d < p:
        step: Step = []
        for v in range(p):
            held = sorted((x for x in range(p) if (x ^ v) < d), key=lambda x: x ^ v)
            step.append((_cat([vblocks[x] for x in held]), members[v], members[v ^ d], COPY))
        steps.append(step)
        d <<= 1
    return steps


def _hd(members: Sequence[int], blocks: Blocks, kind: str) -> list[Step]:
    m = len(members)
    p, real, owned = _fold(m)
    vmembers = [members[j] for j in real]
    vblocks = [_cat([blocks[j] for j in group]) for group in owned]
    extras = [(2 * v, 2 * v + 1) for v in range(m - p)]  # (folded member, its partner)
    pre: list[Step] = []
    post: list[Step] = []
    if kind in ("reducescatter", "allreduce"):
        # Fold: the extra member adds its whole buffer into its partner, in the
        # order the partner will forward it (as recursive halving sends it).
        fold_step: Step = []
        for e, o in extras:
            v = real.index(o)
            order = sorted(range(p), key=lambda x: -(x ^ v))
            fold_step.append((_cat([vblocks[x] for x in order]), members[e], members[o], REDUCE))
        pre = [fold_step] if fold_step else []
        core = _hd_rs_virtual(vmembers, vblocks, p)
        if kind == "allreduce":
            core = sequence(core, _hd_ag_virtual(vmembers, vblocks, p))
            back = [(_cat([vblocks[x] for x in sorted(range(p), key=lambda x: x ^ real.index(o))]),
                     members[o], members[e], COPY) for e, o in extras]
        else:
            back = [(as_chunks(blocks[e]), members[o], members[e], COPY) for e, o in extras]
        post = [back] if back else []
    else:  # allgather
        fold_step = [(as_chunks(blocks[e]), members[e], members[o], COPY) for e, o in extras]
        pre = [fold_step] if fold_step else []
        core = _hd_ag_virtual(vmembers, vblocks, p)
        back = []
        for e, o in extras:
            v = real.index(o)
            # Everything but the extra member's own block, in arrival order.
            order = sorted(range(p), key=lambda x: x ^ v)
            parts = [blocks[j] for x in order for j in owned[x] if j != e]
            back.append((_cat(parts), members[o], members[e], COPY))
        post = [back] if back else []
    return sequence(pre, core, post)


def hd_reduce_scatter(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Recursive-halving reduce-scatter (Thakur, Rabenseifner & Gropp 2005, Sec. 4.3).

    For a group whose size is not a power of two, the first ``2r`` members
    fold pairwise (member ``2i`` adds its whole buffer into ``2i+1``), the
    ``2^k`` remaining ranks halve over *virtual blocks* (a folded pair's
    virtual block is both members' blocks), and at the end member ``2i+1``
    copies member ``2i``'s reduced block back to it.
    """
    return _hd(members, blocks, "reducescatter")


def hd_all_gather(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Recursive-doubling all-gather; for non-powers of two member ``2i`` first
    copies its block to ``2i+1``, the virtual ranks double, and ``2i+1`` copies
    everything else back to ``2i`` at the end (the same fold as
    :func:`hd_reduce_scatter`)."""
    return _hd(members, blocks, "allgather")


def hd_all_reduce(members: Sequence[int], blocks: Blocks) -> list[Step]:
    """Rabenseifner's all-reduce: recursive-halving reduce-scatter then
    recursive-doubling all-gather; non-powers of two fold first and send the
    whole result back to the folded members at the end (Thakur et al. 2005,
    Sec. 4.4)."""
    return _hd(members, blocks, "allreduce")


# --------------------------------------------------------- chains and trees
def chain_broadcast(path: Sequence[int], chunks: np.ndarray) -> list[Step]:
    """Pipelined broadcast along ``path[0] -> path[1] -> ...`` (``path[0]`` holds the data).

    Step ``s`` holds the sends of chunk ``j`` over hop ``h`` with ``j + h = s``
    (the pipeline's diagonal), so chunk ``j`` leaves ``path[h]`` only after it
    arrived there.
    """
    chunks = as_chunks(chunks)
    hops = len(path) - 1
    steps: list[Step] = []
    for s in range(chunks.size + hops - 1):
        steps.append([(chunks[j:j + 1], path[s - j], path[s - j + 1], COPY)
                      for j in range(max(0, s - hops + 1), min(chunks.size, s + 1))])
    return steps


def chain_reduce(path: Sequence[int], chunks: np.ndarray) -> list[Step]:
    """Pipelined reduction along ``path[0] -> ... -> path[-1]`` (the root): each
    member adds its partial sum into the next one."""
    return [[(c, a, b, REDUCE) for c, a, b, _ in step] for step in chain_broadcast(path, chunks)]


def _levels(parent: dict[int, int | None]) -> dict[int, int]:
    depth: dict[int, int] = {}
    for node in parent:
        chain = []
        x = node
        while x not in depth and parent[x] is not None:
            chain.append(x)
            x = parent[x]
        base = depth.get(x, 0)
        depth.setdefault(x, base)
        for k, y in enumerate(reversed(chain)):
            depth[y] = base + k + 1
    return depth


def tree_reduce(parent: dict[int, int | None], chunks: np.ndarray) -> list[Step]:
    """Pipelined reduction up a tree: ``parent[x]`` is ``x``'s parent (``None``
    at the root).  A node adds its partial sum of chunk ``j`` into its parent
    once every child's partial sum of chunk ``j`` has arrived; nodes are listed
    deepest first, chunk by chunk (step ``j``)."""
    chunks = as_chunks(chunks)
    depth = _levels(parent)
    order = sorted((x for x in parent if parent[x] is not None), key=lambda x: (-depth[x], x))
    return [[(chunks[j:j + 1], x, parent[x], REDUCE) for x in order] for j in range(chunks.size)]


def tree_broadcast(parent: dict[int, int | None], chunks: np.ndarray) -> list[Step]:
    """Pipelined broadcast down a tree from its root, chunk by chunk, shallowest first."""
    chunks = as_chunks(chunks)
    depth = _levels(parent)
    order = sorted((x for x in parent if parent[x] is not None), key=lambda x: (depth[x], x))
    return [[(chunks[j:j + 1], parent[x], x, COPY) for x in order] for j in range(chunks.size)]

