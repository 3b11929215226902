"""Expert dispatch (codesign.workloads.dispatch): servers per token against brute force,
the hierarchical dispatch's legs and bytes, FP8 dispatch, group-limited routing."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads import demand_for, get_workload
from codesign.workloads.dispatch import (
    DISPATCHERS, FP8_DISPATCH_FACTOR, dispatch_legs, expected_servers)
from codesign.workloads.model import Layer
from codesign.workloads.placement import Placement
from evaluators.iteration import evaluate


def _brute(expert_server, k, groups=0, picked=0):
    """Exact expectation by enumerating every group choice and every expert choice."""
    E = len(expert_server)
    G, M = (groups, picked) if groups > 1 else (1, 1)
    size = E // G
    total, count = Fraction(0), 0
    for chosen in itertools.combinations(range(G), M):
        pool = [j for g in chosen for j in range(g * size, (g + 1) * size)]
        for pick in itertools.combinations(pool, k):
            total += len({expert_server[j] for j in pick})
            count += 1
    return float(total / count)


@pytest.mark.parametrize("servers,k,groups,picked", [
    ([0] * 4 + [1] * 4, 2, 0, 0),
    ([0] * 4 + [1] * 4, 3, 0, 0),
    ([0, 0, 1, 1, 2, 2, 3, 3], 2, 4, 2),
    ([0, 0, 1, 1, 2, 2, 3, 3], 3, 2, 1),      # groups span two servers each
    ([0, 1, 2, 3, 0, 1, 2, 3], 2, 4, 2),      # groups spread over all servers
    ([0] * 3 + [1] * 3 + [2] * 3 + [3] * 3, 4, 4, 2),
    ([5, 5, 9, 9, 9, 2], 2, 3, 2),            # uneven servers, arbitrary labels
])
def test_expected_servers_matches_brute_force(servers, k, groups, picked) -> None:
    assert expected_servers(servers, k, groups, picked) == pytest.approx(
        _brute(servers, k, groups, picked), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.data())
def test_expected_servers_property(n_servers, per_group, n_groups, data) -> None:
    # Random placements of a small expert set: the DP equals enumeration, lies between
    # 1 and min(k, servers), and, when every group sits on one server, never grows
    # when fewer groups may be picked (spread groups need not: [0, 1 | 0, 1], top-2).
    E = per_group * n_groups * 2
    servers = data.draw(st.lists(st.integers(0, n_servers - 1), min_size=E, max_size=E))
    G = n_groups * 2
    M = data.draw(st.integers(1, G))
    k = data.draw(st.integers(1, M * (E // G)))
    got = expected_servers(servers, k, G, M)
    assert got == pytest.approx(_brute(servers, k, G, M), rel=1e-9)
    assert 1 - 1e-12 <= got <= min(k, len(set(servers))) + 1e-12
    size = E // G
    aligned = all(len(set(servers[g * size:(g + 1) * size])) == 1 for g in range(G))
    if M < G and aligned:
        assert got <= expected_servers(servers, k, G, M + 1) + 1e-12


def test_deepseek_v3_node_limited_routing() -> None:
    # 256 experts on 8 servers (32 each), top-8, 4 of 8 groups (DeepSeek-V3 Sec. 2.1.2):
    # at most 4 servers, fewer than the 5.29 of unlimited top-8 (8 (1 - C(224,8)/C(256,8))).
    from math import comb

    owner = [j // 32 for j in range(256)]
    free = expected_servers(owner, 8)
    assert free == pytest.approx(8 * (1 - comb(224, 8) / comb(256, 8)), rel=1e-12)
    limited = expected_servers(owner, 8, 8, 4)
    # each chosen server unused only if none of its 32 of the pool's 128 experts is picked
    assert limited == pytest.approx(4 * (1 - comb(96, 8) / comb(128, 8)), rel=1e-12)
    assert limited < 4 < free


def test_dispatch_legs_split_rails_and_servers() -> None:
    members = tuple(range(16))                  # two servers of 8
    size = 1000.0
    assert dispatch_legs(members, size, experts=16, top_k=2, gpus_per_server=8) == \
        [(members, size, size)]
    one_server = dispatch_legs(tuple(range(8)), size, experts=16, top_k=2, gpus_per_server=8,
                               dispatcher="hierarchical")
    assert one_server == [(tuple(range(8)), size, size)]
    legs = dispatch_legs(members, size, experts=16, top_k=2, gpus_per_server=8,
                         dispatcher="hierarchical")
    rails = [leg for leg in legs if len({r // 8 for r in leg[0]}) == 2]
    local = [leg for leg in legs if len({r // 8 for r in leg[0]}) == 1]
    assert sorted(r[0] for r in rails) == [(i, i + 8) for i in range(8)]
    assert sorted(v[0] for v in local) == [tuple(range(8)), tuple(range(8, 16))]
    D = expected_servers([j // 8 for j in range(16)], 2)
    assert all(r[1] == r[2] == pytest.approx(size * D / 2) for r in rails)
    assert all(v[1] == v[2] == size for v in local)
    fp8 = dispatch_legs(members, size, experts=16, top_k=2, gpus_per_server=8,
                        dispatcher="hierarchical-fp8")
    assert [m for m, _, _ in fp8] == [m for m, _, _ in legs]
    assert [a for _, a, _ in fp8] == pytest.approx([a * FP8_DISPATCH_FACTOR for _, a, _ in legs])
    assert [b for _, _, b in fp8] == [b for _, _, b in legs]
    assert FP8_DISPATCH_FACTOR == pytest.approx((1 + 4 / 128) / 2)


def _moe(**kw):
    return get_workload("mixtral-8x7b", layers=2, hidden=512, heads=8, kv_heads=8, ffn=1024,
                        vocab=1000, seq_len=512, experts=16, top_k=4, batch_size=32, **kw)


def test_hierarchical_dispatch_network_bytes_closed_form() -> None:
    # Two servers of 8 GPUs, ep=16: the all-to-all sends each rank's top_k copies to
    # every member (half cross the network); the hierarchical dispatch sends D copies per
    # token on the rails, half of them to the other server.
    w = _moe()
    pl = Placement(servers=2, gpus_per_server=8)
    st_ = "dp=16,ep=16,microbatches=2"
    flat = demand_for(w, st_, "H100", pl)
    hier = demand_for(w, st_, "H100", pl, ep_dispatch="hierarchical")
    grouped = demand_for(_moe(expert_groups=2, group_top_k=1), st_, "H100", pl,
                         ep_dispatch="hierarchical")

    def network(d):
        return sum(op.bytes * op.repeat * sum(
            1 for a in op.members for b in op.members if a // 8 != b // 8) / len(op.members)
            for op in d.collectives() if op.purpose == "ep")

    size = next(op.bytes for op in flat.collectives() if op.purpose == "ep")
    copies = 2 * 2 * 2 * 2      # MoE layers x (dispatch, combine) x (fwd, bwd) x micro-batches
    assert network(flat) == pytest.approx(copies * 16 * size * 8 / 16)
    D = expected_servers([j // 8 for j in range(16)], 4)
    assert network(hier) == pytest.approx(copies * 16 * size * D / 4 * 1 / 2)
    # one group of one server: every token stays on one server; the only network copy
    # is to the other server when that group is there (half the time)
    assert network(grouped) == pytest.approx(copies * 16 * size * 1 / 4 * 1 / 2)
    assert network(grouped) < network(hier) < network(flat)
    # compute is the same whichever dispatcher
    assert [op.seconds for op in flat.compute()] == [op.seconds for op in hier.compute()]


def test_fp8_dispatch_only_shrinks_the_dispatch_direction() -> None:
    w = _moe()
    pl = Placement(servers=2, gpus_per_server=8)
    st_ = "dp=16,ep=16,microbatches=2,precision=fp8"
    a = demand_for(w, st_, "H100", pl, ep_dispatch="hierarchical")
    b = demand_for(w, st_, "H100", pl, ep_dispatch="hierarchical-fp8")
    ea = [op for op in a.collectives() if op.purpose == "ep"]
    eb = [op for op in b.collectives() if op.purpose == "ep"]
    ratios = sorted({round(y.bytes / x.bytes, 9) for x, y in zip(ea, eb)})
    assert ratios == [round(FP8_DISPATCH_FACTOR, 9), 1.0]
    assert sum(y.bytes for y in eb) == pytest.approx(
        sum(x.bytes for x in ea) * (1 + FP8_DISPATCH_FACTOR) / 2)
    with pytest.raises(InvalidSpecError, match="ep_dispatch.*fp8 precision"):
        demand_for(w, "dp=16,ep=16,microbatches=2", "H100", pl,
                   ep_dispatch="hierarchical-fp8")
    with pytest.raises(InvalidSpecError, match="ep_dispatch"):
        demand_for(w, st_, "H100", pl, ep_dispatch="deepep")


@pytest.mark.parametrize("dispatcher", DISPATCHERS)
def test_every_dispatcher_times_an_iteration(dispatcher) -> None:
    # Contract: every dispatcher runs end to end, with the same compute; on one server
    # all three send the same bytes as the all-to-all (no network to save).
    w = _moe()
    kw = dict(placement=Placement(servers=2, gpus_per_server=8), hardware="H100")
    st_ = "dp=16,ep=16,microbatches=2,precision=fp8"
    r = evaluate("ideal:2,degree=8,bw=100Gbps", w, st_, ep_dispatch=dispatcher, **kw)
    base = evaluate("ideal:2,degree=8,bw=100Gbps", w, st_, **kw)
    assert r.compute_time_s == pytest.approx(base.compute_time_s)
    assert r.breakdown["ep_s"] <= base.breakdown["ep_s"] * (1 + 1e-9)
    one = Placement(servers=1, gpus_per_server=8)
    st8 = "dp=8,ep=8,microbatches=2"
    d8 = demand_for(w, st8, "H100", one, ep_dispatch=dispatcher.replace("-fp8", ""))
    assert [o.bytes for o in d8.collectives() if o.purpose == "ep"] == \
        [o.bytes for o in demand_for(w, st8, "H100", one).collectives() if o.purpose == "ep"]


def test_group_limited_routing_is_checked() -> None:
    with pytest.raises(InvalidSpecError, match="expert_groups"):
        _moe(expert_groups=3, group_top_k=1)
    with pytest.raises(InvalidSpecError, match="group_top_k"):
        _moe(expert_groups=4, group_top_k=5)
    with pytest.raises(InvalidSpecError, match="group_top_k"):
        _moe(expert_groups=8, group_top_k=1)      # 2 experts cannot serve top_k 4
    with pytest.raises(InvalidSpecError, match="group_top_k"):
        _moe(expert_groups=4)
    with pytest.raises(InvalidSpecError, match="expert_groups"):
        get_workload("llama3-8b", expert_groups=2, group_top_k=1)
    with pytest.raises(InvalidSpecError, match="expert_groups"):
        Layer(name="x", kind="expert", params=10, fwd_flops=1.0, bwd_flops=2.0,
              activation_bytes=1.0, experts=4, top_k=1, expert_groups=3, group_top_k=1)
    w = _moe(expert_groups=4, group_top_k=2)
    moe = [layer for layer in w.layers if layer.experts]
    assert moe and all((x.expert_groups, x.group_top_k) == (4, 2) for x in moe)


def test_cli_evaluate_takes_the_dispatcher(capsys) -> None:
    import json

    from codesign.app.cli import main

    args = ["evaluate", "--topology", "ideal:2,bw=100Gbps", "--workload", "mixtral-8x7b",
            *[x for kv in ("layers=2", "hidden=512", "heads=8", "kv_heads=8", "ffn=1024",
                           "vocab=1000", "seq_len=512", "experts=16", "top_k=4",
                           "expert_groups=2", "group_top_k=1", "batch_size=32")
              for x in ("--option", kv)],
            "--hardware", "H100", "--strategy", "dp=16,ep=16,microbatches=2,precision=fp8",
            "--routing", "shortest"]
    assert main([*args, "--ep-dispatch", "hierarchical-fp8", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main([*args, "--json"]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert got["breakdown"]["ep_s"] < flat["breakdown"]["ep_s"]
    bf16 = [a.replace(",precision=fp8", "") for a in args]
    assert main([*bf16, "--ep-dispatch", "hierarchical-fp8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ep_dispatch" in err[0] and "fp8 precision" in err[0]
