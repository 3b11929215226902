"""validate_schedule accepts correct hand-built schedules (oracle: the algorithms by hand)."""

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.collectives import Collective
from evaluators.schedule import Schedule, Transfer
from evaluators.validate import ValidationReport, check_schedule, event_order, validate_schedule
from validate_cases import (LAT, direct_allgather_fc, direct_reducescatter_fc, hop_time, link,
                            ring_allgather, ring_allreduce, ring_reducescatter,
                            switch_allgather_shared, switch_broadcast)
from topologies.registry import from_spec


@pytest.mark.parametrize("build", [
    lambda: ring_allgather(4)[:2],
    lambda: ring_allgather(2)[:2],
    lambda: ring_allgather(5, chunks=3)[:2],
    direct_allgather_fc,
    ring_reducescatter,
    ring_allreduce,
    direct_reducescatter_fc,
    lambda: switch_broadcast(4, hop_timing=True),
    lambda: switch_broadcast(4, hop_timing=False),
    switch_allgather_shared,
], ids=["ring-ag4", "ring-ag2", "ring-ag5x3", "direct-ag-fc4", "ring-rs4", "ring-ar4",
        "direct-rs-fc4", "bcast-switch-hops", "bcast-switch-whole", "shared-ag-switch4"])
def test_correct_schedules_are_valid(build):
    topo, sched = build()
    rep = validate_schedule(sched, topo)
    assert rep.errors == []
    assert rep.valid and rep.n_errors == 0
    assert rep.n_transfers == len(sched)
    assert rep.n_hops == int(sched.path_ptr[-1])
    assert rep.time_s == pytest.approx(float(sched.end.max()))
    assert check_schedule(sched, topo, sched.collective).valid


def test_report_counts_and_time_by_hand():
    topo, sched, _ = ring_allgather(4)
    rep = validate_schedule(sched, topo)
    d = LAT + 1e6 / 25e9
    # 3 steps of 4 transfers, one hop each, back to back.
    assert (rep.n_transfers, rep.n_hops) == (12, 12)
    assert rep.time_s == pytest.approx(3 * d, rel=1e-12)
    assert rep.link_model == "exclusive"
    assert isinstance(rep, ValidationReport)


def test_forward_at_the_instant_of_arrival_is_allowed():
    # NPU 1 forwards chunk 0 at exactly the time it arrives (end == next start).
    topo = from_spec("ring:3")
    coll = Collective("broadcast", (0, 1, 2), 1e6)
    d = hop_time(coll)
    s = Schedule.from_transfers(coll, [Transfer(0, 0, 1, (link(topo, 0, 1),), 0.0, d),
                                       Transfer(0, 1, 2, (link(topo, 1, 2),), d, 2 * d)])
    assert validate_schedule(s, topo).valid


def test_float_drift_within_tolerance_is_accepted():
    topo, sched, _ = ring_allgather(4)
    # Arrivals computed 1 ulp-ish later than the next departures: still in order.
    late = sched.retimed(sched.start, sched.end * (1 + 1e-13))
    assert validate_schedule(late, topo).valid
    # Without tolerance the forwards now leave before their chunk has arrived (and the
    # link is still busy with the previous chunk).
    strict = validate_schedule(late, topo, tol=0.0, max_errors=100)
    assert sum("does not hold it then" in e for e in strict.errors) == 8   # steps 1 and 2
    assert sum("double-booked" in e for e in strict.errors) == 8
    assert sum("postcondition" in e for e in strict.errors) == 8   # nothing was forwarded
    assert strict.n_errors == 24


def test_relay_npu_that_is_not_a_participant_may_forward():
    # Allgather among NPUs 0 and 2 of ring:4 where NPU 1 relays (holds, then forwards).
    topo = from_spec("ring:4")
    coll = Collective("allgather", (0, 2), 2e6)
    d = hop_time(coll)
    rows = [Transfer(0, 0, 1, (link(topo, 0, 1),), 0.0, d),
            Transfer(0, 1, 2, (link(topo, 1, 2),), d, 2 * d),
            Transfer(1, 2, 0, (link(topo, 2, 3), link(topo, 3, 0)), 0.0, 2 * d)]
    assert validate_schedule(Schedule.from_transfers(coll, rows), topo).valid


def test_reduce_into_a_relay_that_holds_nothing_is_a_copy():
    topo = from_spec("ring:3")
    coll = Collective("reduce", (0, 2), 1e6, root=2)
    d = hop_time(coll)
    rows = [Transfer(0, 0, 1, (link(topo, 0, 1),), 0.0, d, 1),       # into relay NPU 1
            Transfer(0, 1, 2, (link(topo, 1, 2),), d, 2 * d, 1)]     # relay reduces into root
    assert validate_schedule(Schedule.from_transfers(coll, rows), topo).valid


def test_empty_schedule_is_valid_only_when_nothing_must_move():
    topo = from_spec("ring:2")
    coll = Collective("allgather", (0, 1), 2e6)
    rep = validate_schedule(Schedule.from_transfers(coll, []), topo)
    assert not rep.valid and rep.n_errors == 2  # each NPU misses the other's chunk
    assert rep.time_s == 0.0


def test_event_order_arrivals_before_departures_and_own_departure_first():
    topo, sched, _ = ring_allgather(3)
    n = len(sched)
    order = event_order(sched)
    assert sorted(order.tolist()) == list(range(2 * n))
    pos = np.empty(2 * n, int)
    pos[order] = np.arange(2 * n)
    for i in range(n):
        assert pos[n + i] < pos[i]                     # own departure before own arrival
        for j in range(n):
            if sched.end[j] == sched.start[i]:
                assert pos[j] < pos[n + i]             # arrival first at equal times


def test_collective_argument_must_match():
    topo, sched, _ = ring_allgather(4)
    assert validate_schedule(sched, topo, Collective("allgather", range(4), 4e6)).valid
    with pytest.raises(InvalidSpecError, match="collective"):
        validate_schedule(sched, topo, Collective("allgather", range(4), 8e6))


@pytest.mark.parametrize("kwargs", [dict(tol=-1.0), dict(tol=float("nan")), dict(tol="1e-9"),
                                    dict(tol=True), dict(max_errors=0), dict(max_errors=2.5)])
def test_bad_options_raise(kwargs):
    topo, sched, _ = ring_allgather(2)
    with pytest.raises(InvalidSpecError):
        validate_schedule(sched, topo, **kwargs)
