"""Expert dispatch: where a mixture-of-experts layer's tokens travel, and how many bytes.

Around each expert layer a rank sends every routed copy of its tokens to the rank that
holds the chosen expert (dispatch) and gets the results back (combine);
:func:`codesign.workloads.demand.demand_for` emits these exchanges as all-to-alls.  Two
dispatchers, chosen by the execution option ``ep_dispatch``:

``alltoall``
    Megatron-core's all-to-all token dispatcher: every routed copy goes straight to its
    expert's rank, one all-to-all over the expert-parallel group whose per-rank buffer is
    ``top_k`` copies of the rank's tokens.  Two experts of one token on the same remote
    server cost two network copies.

``hierarchical`` (and ``hierarchical-fp8``)
    DeepSeek-V3's dispatch (technical report, arXiv 2412.19437, Sec. 3.2.2), which
    DeepEP's normal kernels and Megatron-core's flex dispatcher implement: a token
    crosses the scale-out network once per destination server, to the GPU with its own
    index on that server, which forwards it over NVLink to the GPUs holding its experts
    there; combine runs the same path backwards, the partial results summed on the
    server before they cross the network.  Modelled as two all-to-alls in the same
    communication phase (DeepEP pipelines the network and NVLink legs): one per *rail*
    (the group's GPUs with the same index on every server), of ``D`` copies per token,
    ``D`` the expected number of distinct servers a token's experts sit on
    (:func:`expected_servers`), and one per server over NVLink, of all ``top_k`` copies.
    ``hierarchical-fp8`` also sends the two dispatch-direction exchanges (the forward
    dispatch and the backward pass's gradient to the experts) in FP8, one byte per
    value plus one fp32 scale per 128 values (report Sec. 3.3.2, 1 x 128 activation
    tiles, and Sec. 3.3.4: dispatch in FP8, combine kept in BF16): 0.516 of the 16-bit
    bytes.

Group-limited routing
    DeepSeek-V3 routes each token to experts on at most ``M = 4`` of the 8 servers of
    its expert-parallel group (Sec. 2.1.2, node-limited routing): the experts are cut
    into ``expert_groups`` equal groups, a token picks ``group_top_k`` groups and then
    its ``top_k`` experts among theirs (Megatron-core's ``moe_router_num_groups`` and
    ``moe_router_group_topk``; DeepSeek's ``n_group`` / ``topk_group``).  It bounds
    ``D`` by the servers those groups span, so it only changes the hierarchical
    dispatch's network bytes: the all-to-all dispatcher sends ``top_k`` copies anyway.

SMs under overlap
    DeepEP's kernels move the tokens on the GPU's own SMs: DeepSeek-V3 "partition[s] 20
    SMs into 10 communication channels" for the dispatch and combine (report Sec.
    3.2.2, on the H800's 132 SMs), which Megatron-core's flex dispatcher runs likewise.
    When an all-to-all hides under another micro-batch's compute (``ep_comm_overlap``),
    that compute runs on the remaining SMs for as long as the exchange lasts, so a
    hidden exchange still costs ``20 / SMs`` of its time (:func:`overlap_sm_share`;
    ``evaluators.iteration.model`` times the pair).  The ``alltoall`` dispatcher's NCCL
    kernels hold SMs too, but no count for them is published: taken as none.

Balance
    ``D`` is an expectation under balanced routing, the assumption the rest of the
    expert model makes (every expert gets ``top_k / experts`` of the tokens): the groups
    are chosen uniformly among the ``expert_groups``, the experts uniformly among the
    chosen groups' experts.  Expert ``j`` of ``E`` sits on member ``j // (E / ep)`` of
    the group (members in rank order), as Megatron-core numbers local experts.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import comb

from codesign.errors import invalid
from codesign.workloads.compute import FP8_FORMATS

__all__ = ["DISPATCHERS", "FP8_DISPATCH_FACTOR", "DEEPEP_SMS", "expected_servers",
           "dispatch_legs", "check_dispatch", "overlap_sm_share"]

#: Values of the ``ep_dispatch`` execution option.
DISPATCHERS = ("alltoall", "hierarchical", "hierarchical-fp8")

#: Bytes of an FP8 dispatch relative to 16-bit values: one byte per value and one fp32
#: scale per 1 x 128 tile (DeepSeek-V3 report Sec. 3.3.2), over two bytes.
FP8_DISPATCH_FACTOR = (1.0 + 4.0 / 128.0) / 2.0

#: SMs the hierarchical dispatcher's kernels occupy while they run (DeepSeek-V3 report
#: Sec. 3.2.2: 20 SMs partitioned into 10 communication channels).
DEEPEP_SMS = 20


def overlap_sm_share(dispatcher: str, sms: int | None) -> float:
    """Fraction of a GPU's ``sms`` streaming multiprocessors that ``dispatcher``'s
    kernels take from the compute an all-to-all hides under (module docstring, "SMs
    under overlap"): ``DEEPEP_SMS / sms`` for the hierarchical dispatchers, 0 for
    ``alltoall`` (no published count) or without an SM count (roofline hardware).

    Examples
    --------
    >>> round(overlap_sm_share("hierarchical", 132), 4)
    0.1515
    >>> overlap_sm_share("alltoall", 132)
    0.0
    """
    if not dispatcher.startswith("hierarchical") or not sms:
        return 0.0
    return min(DEEPEP_SMS / sms, 1.0)


def check_dispatch(ep_dispatch: str, precision: str) -> None:
    """Refuse an unknown dispatcher, or an FP8 dispatch without an fp8 precision."""
    if ep_dispatch not in DISPATCHERS:
        raise invalid("ep_dispatch", ep_dispatch, f"one of {', '.join(DISPATCHERS)}")
    if ep_dispatch == "hierarchical-fp8" and precision not in FP8_FORMATS:
        raise invalid("ep_dispatch", ep_dispatch,
                      f"hierarchical-fp8 needs an fp8 precision (the strategy's is "
                      f"{precision}); use hierarchical")


def expected_servers(expert_server: Sequence[int], top_k: int, groups: int = 0,
                     group_top_k: int = 0) -> float:
    """Expected number of distinct servers one token's ``top_k`` experts sit on.

    Parameters
    ----------
    expert_server : sequence of int
        Server of each expert (length ``E``), in expert order.
    top_k : int
        Experts per token.
    groups, group_top_k : int, optional
        Group-limited routing: ``E / groups`` consecutive experts per group, each token
        chooses ``group_top_k`` groups, then its experts among theirs (0: no limit).

    Returns
    -------
    float
        ``sum over servers n of P(a token uses n)``, exact under balanced routing
        (module docstring): with ``S`` the chosen groups, ``P`` their experts and
        ``c_n(S)`` those on server ``n``, ``P(n unused | S) = C(P - c_n, k) / C(P, k)``;
        the distribution of ``c_n(S)`` over the ``C(G, M)`` equally likely ``S`` is
        counted group by group.
    """
    servers = {}
    labels = tuple(servers.setdefault(s, len(servers)) for s in expert_server)
    return _expected_servers(labels, int(top_k), int(groups), int(group_top_k))


@lru_cache(maxsize=256)
def _expected_servers(labels: tuple[int, ...], k: int, groups: int, picked: int) -> float:
    E = len(labels)
    G, M = (groups, picked) if groups > 1 else (1, 1)
    if E % G or not 1 <= M <= G or not 1 <= k <= E * M // G:
        raise invalid("expert routing (experts, top_k, expert_groups, group_top_k)",
                      (E, k, groups, picked),
                      "expert_groups dividing experts, 1 <= group_top_k <= expert_groups "
                      "and top_k at most the chosen groups' experts")
    size = E // G
    pool = M * size
    total = comb(pool, k)
    out = 0.0
    for n in range(max(labels) + 1):
        per_group = [sum(1 for j in range(g * size, (g + 1) * size) if labels[j] == n)
                     for g in range(G)]
        # ways[j][c]: subsets of j of the groups seen so far holding c experts of n
        ways = [dict() for _ in range(M + 1)]
        ways[0][0] = 1
        for e in per_group:
            for j in range(M - 1, -1, -1):     # each group joins a subset at most once
                for c, w in ways[j].items():
                    ways[j + 1][c + e] = ways[j + 1].get(c + e, 0) + w
        unused = sum(w * comb(pool - c, k) for c, w in ways[M].items())
        out += 1.0 - unused / (comb(G, M) * total)
    return out


def dispatch_legs(members: Sequence[int], size: float, *, experts: int, top_k: int,
                  gpus_per_server: int, dispatcher: str = "alltoall", groups: int = 0,
                  group_top_k: int = 0) -> list[tuple[tuple[int, ...], float, float]]:
    """The all-to-alls of one expert-parallel group's dispatch and combine.

    Parameters
    ----------
    members : sequence of int
        The group's ranks, in rank order (member ``i`` holds experts
        ``i E / ep .. (i + 1) E / ep - 1``).
    size : float
        The all-to-all dispatcher's per-rank buffer: ``top_k`` 16-bit copies of the
        rank's tokens (:meth:`codesign.workloads.sharding.LayerShard.ep_alltoall_bytes`),
        bytes.
    experts, top_k : int
        The layer's experts and experts per token.
    gpus_per_server : int
        GPUs per server (rank ``r`` is on server ``r // gpus_per_server``).
    dispatcher : str, optional
        One of :data:`DISPATCHERS` (module docstring).
    groups, group_top_k : int, optional
        Group-limited routing (:func:`expected_servers`).

    Returns
    -------
    list of (members, dispatch bytes, combine bytes)
        Each leg is an all-to-all over ``members`` with that per-rank buffer (``size /
        n`` to every member) in the dispatch direction (forward dispatch, backward
        gradient to the experts) and in the combine direction.  ``alltoall``, or a group
        on one server, or on servers holding unequal numbers of its members: the group
        itself.  Otherwise one leg per rail and one per server.
    """
    members = tuple(int(r) for r in members)
    fp8 = FP8_DISPATCH_FACTOR if dispatcher == "hierarchical-fp8" else 1.0
    by_server: dict[int, list[int]] = {}
    for r in members:
        by_server.setdefault(r // gpus_per_server, []).append(r)
    per = {len(v) for v in by_server.values()}
    if dispatcher == "alltoall" or len(by_server) < 2 or len(per) > 1:
        return [(members, size * fp8, size)]
    ep = len(members)
    owner = [members[j * ep // experts] // gpus_per_server for j in range(experts)]
    copies = expected_servers(owner, top_k, groups, group_top_k)
    rail = size * copies / top_k
    q = per.pop()
    legs = [(tuple(v[i] for v in by_server.values()), rail * fp8, rail) for i in range(q)]
    if q > 1:
        legs += [(tuple(v), size * fp8, size) for v in by_server.values()]
    return legs
