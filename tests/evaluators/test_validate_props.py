"""Property tests of validate_schedule on random ring-allgather schedules (hypothesis)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluators.schedule import REDUCE, Schedule
from evaluators.validate import validate_schedule
from validate_cases import edit, ring_allgather

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def ring_cases(draw):
    """A ring allgather on ring:n with random idle gaps and longer-than-needed transfers."""
    n = draw(st.integers(2, 6))
    chunks = draw(st.integers(1, 3))
    count = (n - 1) * n * chunks
    unit = 4e-5   # about one hop of a 1 MB chunk on 25 GB/s
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 1e-7, 0.3 * unit, 2.0 * unit]),
                         min_size=count, max_size=count))
    extra = draw(st.lists(st.sampled_from([0.0, 0.0, 1e-9, 0.5 * unit]),
                          min_size=count, max_size=count))
    return ring_allgather(n, chunks, size=1e6 * n * chunks, gaps=gaps, extra=extra)


@SETTINGS
@given(ring_cases())
def test_random_idle_gaps_stay_valid(case):
    topo, sched, _ = case
    rep = validate_schedule(sched, topo)
    assert rep.valid, rep.errors[:3]


@SETTINGS
@given(ring_cases(), st.data())
def test_deleting_any_transfer_is_caught(case, data):
    topo, sched, _ = case
    i = data.draw(st.integers(0, len(sched) - 1))
    c, v = int(sched.chunk[i]), int(sched.dst[i])
    rep = validate_schedule(edit(sched, drop={i}), topo, max_errors=10_000)
    assert not rep.valid
    # In a ring allgather each transfer is the only delivery of its chunk to its receiver.
    assert f"postcondition: chunk {c} is missing at NPU {v} at the end" in rep.errors


@SETTINGS
@given(ring_cases(), st.data())
def test_starting_before_the_dependency_arrives_is_caught(case, data):
    topo, sched, dep = case
    forwards = [i for i in range(len(sched)) if dep[i] >= 0]
    if not forwards:        # ring:2 only has the owners' sends
        return
    i = data.draw(st.sampled_from(forwards))
    arrival = float(sched.end[dep[i]])
    frac = data.draw(st.floats(0.0, 0.999))
    new_start = frac * arrival               # strictly before the arrival (by >= 0.1%)
    dur = float(sched.end[i] - sched.start[i])
    bad = edit(sched, start={i: new_start}, end={i: new_start + dur})
    rep = validate_schedule(bad, topo, max_errors=1000)
    assert not rep.valid
    assert any(e.startswith(f"transfer {i} (") and "does not hold it then" in e
               for e in rep.errors)


@SETTINGS
@given(ring_cases(), st.data())
def test_any_reduce_op_in_an_allgather_is_caught(case, data):
    topo, sched, _ = case
    i = data.draw(st.integers(0, len(sched) - 1))
    rep = validate_schedule(edit(sched, op={i: REDUCE}), topo)
    assert rep.errors == [e for e in rep.errors if "reduce op in a allgather" in e]
    assert rep.n_errors == 1


@SETTINGS
@given(ring_cases(), st.data())
def test_permuting_the_transfer_list_changes_nothing(case, data):
    topo, sched, _ = case
    perm = data.draw(st.permutations(range(len(sched))))
    rows = [list(sched)[k] for k in perm]
    shuffled = Schedule.from_transfers(sched.collective, rows, **sched.metadata)
    assert validate_schedule(shuffled, topo).valid
    assert np.isclose(validate_schedule(shuffled, topo).time_s, sched.time_s)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 10)), min_size=1, max_size=9))
def test_shared_capacity_verdict_matches_horns_window_condition(jobs):
    """Fluid copies of chunk 0 over link 0->1 of ring:2: the validator accepts exactly when
    every window [a, b] (a a start, b an end) holds at most b - a seconds of link work
    (Horn's condition for preemptive scheduling with release times and deadlines)."""
    from evaluators.collectives import Collective
    from evaluators.schedule import Transfer
    from topologies.registry import from_spec

    topo = from_spec("ring:2")                 # 25 GB/s, 1 us
    coll = Collective("allgather", (0, 1), 2e5)  # 100 kB chunks: 4 us of link time
    u, lat, w = 1e-6, 1e-6, 4e-6
    rows = [Transfer(0, 0, 1, (0,), k * u, k * u + lat + w + m * u) for k, m in jobs]
    rows.append(Transfer(1, 1, 0, (1,), 0.0, lat + w))
    sched = Schedule.from_transfers(coll, rows, link_model="shared")
    starts = [r.start for r in rows[:-1]]
    ends = [r.end for r in rows[:-1]]
    feasible = all(
        w * sum(1 for s, e in zip(starts, ends) if s >= a and e <= b) <= (b - a) * (1 + 1e-9)
        for a in starts for b in ends if b > a)
    rep = validate_schedule(sched, topo)
    assert rep.valid == feasible, rep.errors
    if not feasible:
        assert rep.n_errors == 1 and "link 0 (0->1) is over capacity" in rep.errors[0]
