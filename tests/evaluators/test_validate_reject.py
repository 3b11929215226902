"""validate_schedule rejects hand-broken schedules with the right message."""

import pytest

from codesign.errors import InvalidSpecError
from evaluators.collectives import Collective
from evaluators.schedule import COPY, REDUCE, Schedule, Transfer
from evaluators.validate import check_schedule, validate_schedule
from topologies.registry import from_spec
from validate_cases import (direct_allgather_fc, edit, hop_time, link, ring_allgather,
                            ring_reducescatter, shifted, switch_allgather_shared,
                            switch_broadcast)


def errors_of(sched, topo, **kw):
    rep = validate_schedule(sched, topo, **kw)
    assert not rep.valid
    assert rep.n_errors >= len(rep.errors) >= 1
    return rep.errors


def test_missing_chunk_fails_the_postcondition():
    topo, sched, _ = ring_allgather(4)
    # The last step's transfer from NPU 0 carries chunk (0 - 2) mod 4 = 2 to NPU 1.
    i = next(i for i, tr in enumerate(sched) if tr.src == 0 and tr.chunk == 2)
    errs = errors_of(edit(sched, drop={i}), topo)
    assert errs == ["postcondition: chunk 2 is missing at NPU 1 at the end"]


def test_send_before_arrival_names_transfer_chunk_nodes_and_times():
    topo, sched, dep = ring_allgather(4)
    i = next(i for i in range(len(sched)) if dep[i] >= 0)     # a forwarding send
    d = float(sched.end[0] - sched.start[0])
    bad = shifted(sched, i, -d / 2)
    errs = errors_of(bad, topo)
    c, u, v = int(sched.chunk[i]), int(sched.src[i]), int(sched.dst[i])
    held = [e for e in errs if "does not hold it then" in e]
    assert len(held) == 1             # the root cause; later sends of that chunk cascade
    assert any(f"transfer {i}, which should have delivered it, sent nothing" in e for e in errs)
    assert all("does not hold it" in e or "double-booked" in e or "postcondition" in e
               for e in errs)
    assert held[0].startswith(f"transfer {i} (chunk {c}, {u}->{v}, [")
    assert f"NPU {u} sends chunk {c} at {bad.start[i]:.9g}s" in held[0]
    assert f"first arrives there at {sched.end[dep[i]]:.9g}s by transfer {dep[i]}" in held[0]


def test_send_of_a_chunk_not_yet_or_never_delivered():
    topo, sched = direct_allgather_fc(4)
    bad = edit(sched, chunk={0: 3})   # NPU 0 sends NPU 3's chunk at t=0; it arrives at d
    errs = errors_of(bad, topo)
    d = float(sched.end[0])
    assert errs == [f"transfer 0 (chunk 3, 0->1, [0s, {d:.9g}s]): NPU 0 sends chunk 3 at 0s but "
                    f"does not hold it then (it first arrives there at {d:.9g}s by transfer 9)",
                    "postcondition: chunk 0 is missing at NPU 1 at the end"]
    bad = edit(sched, drop={9}, chunk={0: 3})   # ... and now never
    assert any("NPU 0 sends chunk 3 at 0s but does not hold it then (no transfer ever delivers "
               "it there)" in e for e in validate_schedule(bad, topo).errors)


def test_nonexistent_link():
    topo, sched, _ = ring_allgather(4)
    errs = errors_of(edit(sched, path={3: (99,)}), topo)
    assert len(errs) == 1
    assert errs[0].startswith("transfer 3 (chunk")
    assert "link 99 in its path does not exist" in errs[0]


def test_noncontiguous_path_and_wrong_endpoints():
    topo, sched, _ = ring_allgather(4)
    l01, l23, l12 = link(topo, 0, 1), link(topo, 2, 3), link(topo, 1, 2)
    i = next(i for i, tr in enumerate(sched) if tr.src == 0)           # a 0->1 transfer
    errs = errors_of(edit(sched, path={i: (l01, l23)}), topo)
    assert any("path is not contiguous" in e and f"link {l01} (0->1) is followed by link "
               f"{l23} (2->3)" in e for e in errs)
    errs = errors_of(edit(sched, path={i: (l12,)}), topo)
    assert any(f"path starts with link {l12} (1->2), which does not leave its src 0" in e
               for e in errs)
    assert any(f"path ends with link {l12} (1->2), which does not enter its dst 1" in e
               for e in errs)


def test_double_booked_link_exclusive():
    # Broadcast through the switch with whole-path occupancy but all copies at once:
    # the root's uplink carries three chunks at the same time.
    topo, sched = switch_broadcast(4, hop_timing=False)
    d2 = float(sched.end[0] - sched.start[0])
    bad = sched.retimed([0.0, 0.0, 0.0], [d2, d2, d2])
    errs = errors_of(bad, topo)
    up = link(topo, 0, 4)
    assert all(f"link {up} (0->4) is double-booked" in e for e in errs)
    assert len(errs) == 2     # (0, 1) and (1, 2) in start order on the shared uplink
    assert "transfer 0 (chunk 0, 0->1) occupies it during [0s, " in errs[0]


def test_touching_occupations_are_not_double_booked():
    topo, sched = switch_broadcast(4, hop_timing=False)
    assert validate_schedule(sched, topo).valid        # back to back on the uplink


def test_hop_timing_store_and_forward_violations():
    topo, sched = switch_broadcast(4, hop_timing=True)
    hs = sched.hop_start.copy()
    d = hop_time(sched.collective)
    hs[1] -= d / 2                                     # hop 1 of transfer 0 starts too early
    errs = errors_of(sched.retimed(sched.start, sched.end, hop_start=hs), topo)
    assert any("hop 1 on link" in e and "before hop 0 ends" in e for e in errs)
    assert any("its last hop ends at" in e for e in errs)
    # Pipelined hops that collide on the uplink: copy 1 starts its first hop with copy 0's.
    hs = sched.hop_start.copy()
    hs[2] = hs[0]
    errs = errors_of(sched.retimed(sched.start, sched.end, hop_start=hs), topo)
    assert any("double-booked" in e for e in errs)
    assert any("its first hop starts at 0s, before the transfer starts" in e for e in errs)


def test_over_capacity_shared():
    topo, sched = switch_allgather_shared(4, factor=2 / 3)
    errs = errors_of(sched, topo)
    # Every uplink and every downlink must carry three 1 MB copies in 2 us + 80 us.
    assert len(errs) == 8
    end = float(sched.end[0])
    assert errs[0] == (f"link 0 (0->4) is over capacity: transfers [0, 1, 2] must move 3000000 B "
                       f"within [0s, {end:.9g}s] but it carries at most {end * 25e9:.9g} B at "
                       f"2.5e+10 B/s")
    assert all("is over capacity: transfers [" in e for e in errs)


def test_shared_transfers_that_touch_do_not_overlap():
    topo, sched = switch_allgather_shared(4, factor=1 / 3)   # each at full bandwidth
    # Run the three copies of each NPU one after another: loads are 1 at every instant.
    dur = float(sched.end[0])
    # Latin square: NPU p's copy to q goes in slot (q - p - 1) mod 4, distinct per p and per q.
    k = [int(q - p - 1) % 4 for p, q in zip(sched.src, sched.dst)]
    good = sched.retimed([dur * j for j in k], [dur * (j + 1) for j in k])
    assert validate_schedule(good, topo).valid
    assert not validate_schedule(sched, topo).valid


def test_shared_duration_shorter_than_latency_plus_bytes_over_bandwidth():
    topo, sched = switch_allgather_shared(4)
    bad = edit(sched, end={0: 2e-6})                   # exactly the 2-hop latency
    errs = errors_of(bad, topo)
    assert errs[0] == ("transfer 0 (chunk 0, 0->1, [0s, 2e-06s]): lasts 2e-06s but needs at "
                       "least 4.2e-05s (path latency 2e-06s + 1000000 B / 2.5e+10 B/s)")


def test_shared_rates_may_vary_over_time():
    # Max-min fair sharing of link 0->1 of ring:2 by two 1 MB chunks: A alone at full rate
    # for x/2, then A and B at half rate each until A ends at 1.5x, then B alone until 2x
    # (x = 40 us, plus 1 us latency).  Constant average rates (2/3 each) would overlap to
    # 4/3 of the bandwidth during [x/2, 1.5x], yet the schedule is feasible.
    topo = from_spec("ring:2")
    coll = Collective("allgather", (0, 1), 4e6, chunks_per_npu=2)
    x, lat = 1e6 / 25e9, 1e-6
    rows = [Transfer(0, 0, 1, (0,), 0.0, 1.5 * x + lat),
            Transfer(1, 0, 1, (0,), 0.5 * x, 2 * x + lat),
            Transfer(2, 1, 0, (1,), 0.0, x + lat), Transfer(3, 1, 0, (1,), x, 2 * x + lat)]
    ok = Schedule.from_transfers(coll, rows, link_model="shared")
    assert validate_schedule(ok, topo).valid
    # Squeeze B to end at 1.8x: both need 2x of link time within [0, 1.8x + lat].
    bad = edit(ok, end={1: 1.8 * x + lat})
    errs = errors_of(bad, topo)
    assert errs == [f"link 0 (0->1) is over capacity: transfers [0, 1] must move 2000000 B "
                    f"within [0s, {1.8 * x + lat:.9g}s] but it carries at most "
                    f"{(1.8 * x + lat) * 25e9:.9g} B at 2.5e+10 B/s"]


def test_no_link_model_skips_occupancy_but_not_data():
    topo, sched = switch_broadcast(4, hop_timing=False)
    d2 = float(sched.end[0] - sched.start[0])
    crowded = Schedule.from_transfers(sched.collective, list(sched), link_model="none")
    crowded = crowded.retimed([0.0] * 3, [d2] * 3)
    assert validate_schedule(crowded, topo).valid
    errs = errors_of(edit(crowded, drop={2}), topo)
    assert errs == ["postcondition: chunk 0 is missing at NPU 3 at the end"]


def test_double_counted_reduction():
    topo, sched = ring_reducescatter(4)
    # Repeat transfer 0 (NPU 0 reduces chunk 3 into NPU 1) after the ring is done.
    tr = list(sched)[0]
    t_end = float(sched.end.max())
    rows = list(sched) + [tr._replace(start=t_end, end=t_end + float(tr.end - tr.start))]
    bad = Schedule.from_transfers(sched.collective, rows)
    errs = errors_of(bad, topo)
    assert errs == [f"transfer {len(rows) - 1} (chunk 3, 0->1, [{t_end:.9g}s, "
                    f"{rows[-1].end:.9g}s]): reduce double-counts the contributions of NPUs "
                    f"[0] already held by NPU 1"]


def test_copy_that_discards_contributions():
    topo, sched = ring_reducescatter(4)
    bad = edit(sched, op={0: COPY})  # NPU 1's own contribution to chunk 3 is overwritten
    errs = errors_of(bad, topo)
    assert any(e.startswith("transfer 0 (chunk 3, 0->1") and "copy overwrites a partial sum at "
               "NPU 1 that holds contributions of NPUs [1]" in e for e in errs)
    assert any("postcondition: chunk 3 at NPU 3 is not fully reduced at the end: missing the "
               "contributions of NPUs [1]" in e for e in errs)


def test_reduce_in_a_non_reducing_collective():
    topo, sched, _ = ring_allgather(4)
    errs = errors_of(edit(sched, op={5: REDUCE}), topo)
    assert errs == [e for e in errs if "reduce op in a allgather" in e] and len(errs) == 1


def test_duration_shorter_than_latency_plus_bytes_over_bandwidth():
    topo, sched, _ = ring_allgather(4)
    d = float(sched.end[0] - sched.start[0])
    bad = edit(sched, end={0: float(sched.start[0]) + d / 2})
    errs = errors_of(bad, topo)
    assert len(errs) == 1
    assert errs[0].startswith("transfer 0 (chunk 0, 0->1")
    assert f"lasts {d / 2:.9g}s but needs at least {d:.9g}s (path latency 1e-06s + 1000000 B / " \
           f"2.5e+10 B/s)" in errs[0]


def test_end_not_after_start_and_bad_endpoints():
    topo, sched, _ = ring_allgather(4)
    errs = errors_of(edit(sched, end={2: float(sched.start[2])}), topo)
    assert any(e.startswith("transfer 2 ") and "is not after start" in e for e in errs)
    errs = errors_of(edit(sched, dst={1: 7}), topo)
    assert any("dst 7 is not an NPU" in e for e in errs)
    errs = errors_of(edit(sched, chunk={1: 40}), topo)
    assert any("chunk 40 does not exist: the collective has chunks 0..3" in e for e in errs)
    topo_sw, bc = switch_broadcast(4)
    errs = errors_of(edit(bc, dst={0: 4}), topo_sw)     # the switch cannot receive data
    assert any("dst 4 is not an NPU" in e and "switches only forward" in e for e in errs)


def test_unknown_link_model():
    topo, sched, _ = ring_allgather(2)
    bad = Schedule.from_transfers(sched.collective, list(sched), link_model="magic")
    errs = errors_of(bad, topo)
    assert "link_model 'magic' is unknown" in errs[0]


def test_participant_outside_topology():
    topo = from_spec("ring:2")
    coll = Collective("allgather", (0, 5), 2e6)
    errs = errors_of(Schedule.from_transfers(coll, []), topo)
    assert "collective participant 5 is not an NPU" in errs[0]


def test_max_errors_caps_messages_but_counts_all():
    topo = from_spec("ring:4")
    coll = Collective("allgather", range(4), 4e6)
    rep = validate_schedule(Schedule.from_transfers(coll, []), topo, max_errors=5)
    assert rep.n_errors == 12 and len(rep.errors) == 5


def test_check_schedule_raises_first_error():
    topo, sched, _ = ring_allgather(4)
    with pytest.raises(InvalidSpecError, match=r"^invalid schedule: postcondition: chunk 2 "
                                                r"is missing at NPU 1 at the end$"):
        i = next(i for i, tr in enumerate(sched) if tr.src == 0 and tr.chunk == 2)
        check_schedule(edit(sched, drop={i}), topo)
    with pytest.raises(InvalidSpecError, match=r"\(and 1[01] more\)$"):
        check_schedule(Schedule.from_transfers(sched.collective, []), topo)
