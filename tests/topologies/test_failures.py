"""Failed links, switches, servers and racks (topologies.failures)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from topologies.failures import (
    Failures,
    cable_ids,
    degrade,
    parse_failure_spec,
    parse_named_failures,
    partitioned,
    racks,
    sample_failures,
)
from topologies.registry import from_spec


def test_named_link_failure_removes_both_directions_and_reroutes():
    t = from_spec("torus:4x4x4")
    left = from_spec("torus:4x4x4,fail=link:0-1")
    assert left.n_links == t.n_links - 2
    assert left.links_between(0, 1).size == 0 and left.links_between(1, 0).size == 0
    # The route 0 -> 1 now takes a detour of 3 hops (around through a neighbour).
    assert len(left.route(0, 1)) == 3
    assert "diameter" not in left.params


def test_named_switch_server_rack_and_old_npu_form():
    assert from_spec("fattree:k=4,fail=switch:28").switches == 19
    t = from_spec("leafspine:16,oversub=2,hosts_per_leaf=4,fail=rack:0")
    assert (t.npus, t.switches) == (12, 5)       # 4 servers and their leaf
    assert from_spec("fattree:k=4,fail=server:3+switch:28").npus == 15
    old = from_spec("mesh:4x4,fail=7+9")          # unchanged behaviour
    assert old.npus == 14 and old.params["failed_npus"] == [7, 9]


@pytest.mark.parametrize("spec,needle", [
    ("ring:8,fail=link:0-1+4-5", "partitions"),
    ("ring:8,fail=link:0-5", "linked nodes"),
    ("ring:8,fail=switch:3", "switch"),
    ("ring:8,fail=bogus:1", "kind:id"),
    ("torus:4x4,fail=rack:0", "rack_size"),
])
def test_named_failures_refuse_bad_input(spec, needle):
    with pytest.raises(InvalidSpecError, match=needle):
        from_spec(spec)


def test_cables_pair_directions_and_one_way_links_stand_alone():
    t = from_spec("ring:6")
    c = cable_ids(t)
    assert len(np.unique(c)) == 6 and np.bincount(c).max() == 2
    one_way = from_spec("uniring:6")
    assert len(np.unique(cable_ids(one_way))) == 6


def test_sampling_is_seeded_and_counts_cables():
    t = from_spec("fattree:k=4")
    spec = parse_failure_spec("links=10%,seed=1")
    a = sample_failures(t, spec, np.random.default_rng(7))
    b = sample_failures(t, spec, np.random.default_rng(7))
    assert a == b
    n_cables = len(np.unique(cable_ids(t)))
    assert len(np.unique(cable_ids(t)[list(a.links)])) == round(0.1 * n_cables)
    assert len(a.links) == 2 * round(0.1 * n_cables)     # both directions of each cable
    assert sample_failures(t, parse_failure_spec("links=0%"), np.random.default_rng(0)).empty


def test_racks_are_leaf_groups_or_blocks():
    t = from_spec("fattree:k=4")
    groups = racks(t)
    assert len(groups) == 8 and all(len(n) == 2 and len(s) == 1 for n, s in groups)
    assert [n for n, _ in racks(from_spec("torus:4x4"), 4)][1] == [4, 5, 6, 7]


def test_partition_detection():
    ring = from_spec("ring:8")
    ids = np.concatenate([ring.links_between(0, 1), ring.links_between(1, 0),
                          ring.links_between(4, 5), ring.links_between(5, 4)])
    assert partitioned(degrade(ring, Failures(links=tuple(ids.tolist()))))
    assert not partitioned(degrade(ring, Failures(links=tuple(ids[:2].tolist()))))
    assert partitioned(degrade(from_spec("switch:4"), Failures(switches=(4,))))


def test_parse_failure_spec_forms_and_errors():
    s = parse_failure_spec("links=10%,switches=2,seed=3,samples=7,rack_size=4")
    assert s.amounts == (("links", "fraction", 0.1), ("switches", "count", 2.0))
    assert (s.seed, s.samples, s.rack_size) == (3, 7, 4)
    for bad in ("", "links", "links=101%", "cables=1", "links=1,links=2", "seed=x",
                "links=-1", "samples=0"):
        with pytest.raises(InvalidSpecError):
            parse_failure_spec(bad)


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=30))
def test_parse_failure_spec_never_crashes(text):
    try:
        parse_failure_spec(text)
    except InvalidSpecError:
        pass


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet="0123456789+-:linkswtchrvpu", max_size=20))
def test_named_failures_never_crash(text):
    t = from_spec("fattree:k=4")
    try:
        parse_named_failures(t, text)
    except InvalidSpecError:
        pass
