"""Spec strings: parser properties (hypothesis) and bad input for every family."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from topologies.families.clos import dragonfly, fattree, ideal, leafspine
from topologies.families.direct import direct_connect, expander
from topologies.families.nodes import dgx1, dgx_a100
from topologies.model import Topology
from topologies.registry import FAMILIES, family_names, from_spec, parse_spec

family_names()

# ------------------------------------------------------------------ parse_spec
_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=8).filter(
    lambda s: s.strip("-") == s and s)
_shape = st.text(alphabet="0123456789xabc_", min_size=1, max_size=8)
_value = st.text(alphabet="0123456789.:GMkiBbps/un", min_size=1, max_size=10)


@given(family=_word, shape=st.one_of(st.just(""), _shape),
       options=st.dictionaries(_word, _value, max_size=4))
def test_parse_spec_round_trips_its_pieces(family, shape, options):
    items = ([shape] if shape else []) + [f"{k}={v}" for k, v in options.items()]
    spec = family + (":" + ",".join(items) if items else "")
    assert parse_spec(spec) == (family, shape, options)


@given(st.one_of(st.text(max_size=30), st.none(), st.integers(), st.lists(st.text())))
def test_parse_spec_garbage_only_raises_invalid_spec(value):
    try:
        family, shape, options = parse_spec(value)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(family, str) and isinstance(shape, str) and isinstance(options, dict)


_small_shape = st.text(alphabet="0123456789xk=", max_size=2)
_small_value = st.text(alphabet="0123456789.:-GBbpsuentrfalsy/", max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(sorted(FAMILIES)), shape=_small_shape,
       options=st.dictionaries(st.sampled_from(["bw", "lat", "k", "degree", "seed", "p", "a",
                                                "h", "g", "oversub", "radix", "nvlink", "nic",
                                                "bidir", "hosts_per_leaf", "links", "x"]),
                               _small_value, max_size=4))
def test_from_spec_never_raises_anything_but_invalid_spec(family, shape, options):
    items = ([shape] if shape else []) + [f"{k}={v}" for k, v in options.items()]
    spec = family + (":" + ",".join(items) if items else "")
    try:
        t = from_spec(spec)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(t, Topology) and t.npus >= 1


# ------------------------------------------------------------------- bad input
BAD_SPECS = [
    "torus:0x4", "ring:abc", "ring:8,bw=-5GB/s", "ring:8,lat=-1us", "foo:3", "ring:8,speed=1",
    "", "  ", ",", "torus:4x4,bw=1GB/s,bw=2GB/s", "ring:8,,bw=1GB/s",
    "fattree:k=3", "fattree:k=0", "fattree", "fattree:4,k=4", "fattree:k=4,bw=0",
    "leafspine:128,oversub=0", "leafspine:128,oversub=abc", "leafspine:1",
    "leafspine:64,oversub=3,hosts_per_leaf=16", "leafspine:64,radix=32,oversub=2",
    "ideal:8,degree=0", "ideal:0", "ideal:8,bw=fast",
    "dragonfly:a=4,p=2", "dragonfly:a=2,p=1,h=1,g=9", "dragonfly:4,a=4,p=2,h=2",
    "dragonfly:a=0,p=1,h=1", "dragonfly:a=1,p=1,h=0",
    "expander:15,degree=3", "expander:8,degree=8", "expander:8", "expander:8,degree=1",
    "expander:8,degree=4,seed=-1",
    "perms:12,p=2:4", "perms:12", "perms:12,p=12", "perms:12,p=1,bidir=maybe", "perms:12,p=a",
    "dgx1:4", "dgx1:lat=1us:2us", "dgx1:nic=1GB/s", "dgx1,nic=1GB/s",
    "dgx-a100:0", "dgx-a100:2,nvlink=-1GB/s", "dgx-a100:2,lat=1us:2us:3us", "hgx-h100:x",
]


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_bad_specs_raise_one_line_invalid_spec(spec):
    with pytest.raises(InvalidSpecError) as info:
        from_spec(spec)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(("invalid", "unknown", "missing"))


@pytest.mark.parametrize("call", [
    lambda: fattree(3), lambda: fattree(True), lambda: fattree(4, bandwidth=-1.0),
    lambda: fattree(4, latency=float("nan")), lambda: fattree(4000),
    lambda: leafspine(8, oversub=-1), lambda: leafspine(8, oversub=float("inf")),
    lambda: leafspine(8, hosts_per_leaf=0),
    lambda: ideal(8, degree=0), lambda: ideal(8, degree=2.5),
    lambda: dragonfly(0, 1, 1), lambda: dragonfly(2, 1, 1, g=0),
    lambda: expander(7, degree=3), lambda: expander(8, degree=4, seed=1.5),
    lambda: direct_connect(4, permutations="12"), lambda: direct_connect(1),
    lambda: direct_connect(4, permutations=[1], bidirectional="yes"),
    lambda: dgx1(nvlink_bandwidth=0), lambda: dgx_a100(0), lambda: dgx_a100(2, nic_bandwidth=-1),
])
def test_bad_python_arguments_raise_invalid_spec(call):
    with pytest.raises(InvalidSpecError) as info:
        call()
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- spec names
@pytest.mark.parametrize("spec", [
    "fattree:k=4,bw=100Gbps", "fattree:8", "leafspine:32,oversub=2,lat=2us",
    "ideal:16,degree=4,bw=100Gbps", "dragonfly:a=2,p=2,h=1,gbw=10GB/s",
    "expander:16,degree=4,seed=3", "perms:12,p=1:5,bidir=true", "dgx1:nvlink=20GB/s",
    "dgx-a100:2,nic=400Gbps,lat=1us:3us", "hgx-h100:1",
])
def test_name_is_the_spec_and_rebuilds_the_same_topology(spec):
    t = from_spec(spec)
    assert t.name == spec
    again = from_spec(t.name)
    for key in ("src", "dst", "bandwidth", "latency"):
        np.testing.assert_array_equal(getattr(again, key), getattr(t, key))


def test_family_without_shape_takes_options_after_a_comma_or_a_colon():
    a, b = from_spec("dgx1,nvlink=20GB/s"), from_spec("dgx1:nvlink=20GB/s")
    assert set(a.bandwidth.tolist()) == set(b.bandwidth.tolist()) == {20e9}
    assert parse_spec("dgx-a100,lat=1us:2us") == ("dgx-a100", "", {"lat": "1us:2us"})


def test_spec_options_reach_the_builders():
    t = from_spec("dgx-a100:2,nvlink=100GB/s,nic=400Gbps,lat=1us:3us")
    nic = t.dst >= t.npus + 2
    assert set(t.bandwidth[nic].tolist()) == {50e9}
    assert set(t.bandwidth[~nic & (t.dst >= t.npus)].tolist()) == {100e9}
    assert set(t.latency[nic].tolist()) == {3e-6}
    d = from_spec("dragonfly:a=2,p=1,h=1,gbw=10GB/s,glat=5us")
    assert sorted(set(d.bandwidth.tolist())) == [10e9, 25e9]
    assert sorted(set(d.latency.tolist())) == [pytest.approx(1e-6), pytest.approx(5e-6)]
    assert from_spec("fattree:4").params["k"] == from_spec("fattree:k=4").params["k"] == 4
    assert from_spec("perms:12,p=1").params["generators"] == [1]
