"""Rank layout (Megatron order), parallel groups and embedding-table placement."""

from __future__ import annotations

import pytest

from codesign.errors import InvalidSpecError
from codesign.workloads.placement import Placement
from codesign.workloads.strategy import Strategy


def test_megatron_rank_order() -> None:
    s = Strategy(dp=3, tp=2, pp=4)
    pl = Placement(servers=6, gpus_per_server=4)
    T, D = 2, 3
    for t in range(2):
        for d in range(3):
            for p in range(4):
                assert pl.rank(s, t=t, d=d, p=p) == t + T * (d + D * p)
    assert pl.tp_groups(s, 1) == [(6, 7), (8, 9), (10, 11)]
    assert pl.dp_groups(s, 0) == [(0, 2, 4), (1, 3, 5)]
    assert pl.stage_ranks(s, 3) == tuple(range(18, 24))
    assert pl.server_array()[9] == 2


def test_custom_order() -> None:
    s = Strategy(dp=2, tp=3, pp=2)
    pl = Placement(servers=12, gpus_per_server=1, order=("dp", "tp", "pp"))
    for t in range(3):
        for d in range(2):
            for p in range(2):
                assert pl.rank(s, t=t, d=d, p=p) == d + 2 * (t + 3 * p)


def test_groups_partition_each_stage() -> None:
    s = Strategy(dp=8, tp=2, pp=2, ep=4)
    pl = Placement.for_strategy(s, 8)
    assert (pl.servers, pl.gpus_per_server) == (4, 8)
    for p in range(2):
        stage = set(pl.stage_ranks(s, p))
        for groups, size in ((pl.tp_groups(s, p), 2), (pl.dp_groups(s, p), 8),
                             (pl.ep_groups(s, p), 4), (pl.expert_dp_groups(s, p), 2)):
            flat = [r for g in groups for r in g]
            assert sorted(flat) == sorted(stage)
            assert all(len(g) == size for g in groups)
    # EP groups are consecutive DP indices; expert replicas are ep apart.
    assert pl.ep_groups(s, 0)[0] == (0, 2, 4, 6)
    assert pl.expert_dp_groups(s, 0)[0] == (0, 8)


def test_tables_round_robin_and_explicit() -> None:
    pl = Placement(servers=4, gpus_per_server=2)
    assert pl.table_server_list(6) == (0, 1, 2, 3, 0, 1)
    assert pl.table_ranks(6) == (0, 2, 4, 6, 1, 3)
    pl = Placement(servers=16, gpus_per_server=1, table_servers=(0, 3, 8, 13))
    assert pl.table_ranks(4) == (0, 3, 8, 13)
    with pytest.raises(InvalidSpecError, match="one server per embedding table"):
        pl.table_ranks(5)


@pytest.mark.parametrize("kwargs, field", [
    ({"servers": 0}, "placement servers"),
    ({"servers": 2, "gpus_per_server": True}, "placement gpus_per_server"),
    ({"servers": 2, "order": ("tp", "dp")}, "placement order"),
    ({"servers": 2, "table_servers": (0, 2)}, "table_servers entry"),
    ({"servers": 2, "table_servers": ()}, "table_servers"),
])
def test_placement_errors(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        Placement(**kwargs)


def test_placement_must_hold_the_strategy() -> None:
    with pytest.raises(InvalidSpecError, match="uses dp\\*tp\\*pp\\*cp = 8 GPUs"):
        Placement(servers=3, gpus_per_server=2).rank_grid(Strategy(dp=8))
    with pytest.raises(InvalidSpecError, match="multiple of gpus_per_server"):
        Placement.for_strategy(Strategy(dp=12), 8)
    assert Placement.for_strategy(Strategy(dp=4), 8).gpus_per_server == 4
