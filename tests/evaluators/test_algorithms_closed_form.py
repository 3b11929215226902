"""Simulation (congestion model) against the closed forms, on matching topologies.

Bandwidth, latency and size are drawn at random (seeded) so that neither the
alpha nor the beta term dominates by construction; agreement is required to
1e-9 relative.  The closed forms themselves are checked against independent
hand computations and the textbook alpha-beta formulas.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.algorithms.closed_form import closed_form_time
from evaluators.collectives import Collective
from evaluators.registry import closed_forms, synthesize
from topologies.families.multidim import fully_connected, hypercube, ring, switch, uniring
from topologies.registry import from_spec

RTOL = 1e-9


def _params(seed):
    rng = np.random.default_rng(seed)
    bw = float(rng.uniform(1e9, 100e9))
    lat = float(rng.uniform(0.1e-6, 5e-6))
    size = float(rng.uniform(1e5, 1e8))
    return bw, lat, size


def _agree(topo, kind, alg, size, chunks, expected, **options):
    coll = Collective.on(kind, topo.npus, size, chunks_per_npu=chunks)
    got = synthesize(topo, coll, alg, **options).time_s
    assert got == pytest.approx(expected, rel=RTOL), (alg, kind, topo.name, chunks)


SHARDED = ("allgather", "reducescatter", "allreduce")
ROOTED = ("broadcast", "reduce")


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("chunks", [1, 2, 3])
def test_ring_on_rings(n, chunks):
    bw, lat, size = _params(n * 10 + chunks)
    for build in (ring, uniring):
        topo = build(n, bandwidth=bw, latency=lat)
        for kind in SHARDED + ROOTED:
            _agree(topo, kind, "ring", size, chunks,
                   closed_form_time("ring", kind, n, size, bw, lat, chunks=chunks))


@pytest.mark.parametrize("n", [2, 3, 4, 7])
@pytest.mark.parametrize("chunks", [1, 2])
def test_bidir_ring_on_ring(n, chunks):
    bw, lat, size = _params(100 + n * 10 + chunks)
    topo = ring(n, bandwidth=bw, latency=lat)
    for kind in SHARDED + ROOTED:
        _agree(topo, kind, "bidir-ring", size, chunks,
               closed_form_time("bidir-ring", kind, n, size, bw, lat, chunks=chunks))


@pytest.mark.parametrize("n", [2, 3, 6])
@pytest.mark.parametrize("chunks", [1, 3])
def test_direct_on_fc(n, chunks):
    bw, lat, size = _params(200 + n * 10 + chunks)
    topo = fully_connected(n, bandwidth=bw, latency=lat)
    for kind in closed_forms()["direct"].kinds:
        _agree(topo, kind, "direct", size, chunks,
               closed_form_time("direct", kind, n, size, bw, lat, chunks=chunks))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("chunks", [1, 2, 3, 4])
def test_rhd_on_hypercube_and_switch(k, chunks):
    n = 2 ** k
    bw, lat, size = _params(300 + k * 10 + chunks)
    for name, topo in (("hypercube", hypercube(k, bandwidth=bw, latency=lat)),
                       ("switch", switch(n, bandwidth=bw, latency=lat))):
        for kind in SHARDED:
            _agree(topo, kind, "rhd", size, chunks,
                   closed_form_time("rhd", kind, n, size, bw, lat, chunks=chunks, topology=name))


@pytest.mark.parametrize("n", [2, 3, 4, 6, 9, 12])
@pytest.mark.parametrize("chunks", [1, 2])
def test_dbt_on_fc(n, chunks):
    bw, lat, size = _params(400 + n * 10 + chunks)
    topo = fully_connected(n, bandwidth=bw, latency=lat)
    for kind in ("allreduce",) + ROOTED:
        _agree(topo, kind, "dbt", size, chunks,
               closed_form_time("dbt", kind, n, size, bw, lat, chunks=chunks))


HIER = ["torus:3x3", "torus:2x4", "torus:4x3", "torus:2x2x2", "torus:3x2x2", "hypercube:4",
        "hier:ring4_fc2_switch4", "hier:uniring3_fc4", "hier:ring3_switch2_fc3",
        "hier:ring5_switch4"]


@pytest.mark.parametrize("spec", HIER)
def test_hierarchical_on_uniform_multidim(spec):
    bw, lat, size = _params(len(spec))
    topo = from_spec(f"{spec},bw={bw}B/s,lat={lat}s")
    dims = [(d.kind, d.size) for d in topo.dims]
    for chunks in (1, 2, 4):
        for kind in SHARDED:
            try:
                expected = closed_form_time("hierarchical", kind, topo.npus, size, bw, lat,
                                            chunks=chunks, dims=dims)
            except InvalidSpecError:
                # Only an all-reduce with too few pieces to hide the tail has no closed form.
                assert kind == "allreduce" and chunks < 4
                continue
            _agree(topo, kind, "hierarchical", size, chunks, expected)


@pytest.mark.parametrize("spec,gens", [("perms:7,p=1:2:3", [1, 2, 3]),
                                       ("perms:12,p=1:5", [1, 5]),
                                       ("perms:9,p=2:4:8:1", [1, 2, 4, 8])])
@pytest.mark.parametrize("chunks", [1, 2])
def test_multiring_on_perms(spec, gens, chunks):
    bw, lat, size = _params(500 + len(gens) * 10 + chunks)
    topo = from_spec(f"{spec},bw={bw}B/s,lat={lat}s")
    for kind in SHARDED:
        expected = closed_form_time("multiring", kind, topo.npus, size, bw, lat,
                                    chunks=chunks, rings=len(gens))
        _agree(topo, kind, "multiring", size, chunks, expected)              # default rings
        _agree(topo, kind, "multiring", size, chunks, expected, generators=gens[::-1])


# ------------------------------------------------- closed forms vs hand values
def test_closed_forms_against_textbook_alpha_beta():
    n, S, B, a = 8, 1e9, 50e9, 2e-6
    # c = 1: the classic ring formulas (Patarasuk & Yuan), independently coded.
    assert closed_form_time("ring", "allreduce", n, S, B, a) == pytest.approx(
        2 * (n - 1) * a + 2 * (n - 1) / n * S / B, rel=1e-12)
    assert closed_form_time("ring", "allgather", n, S, B, a) == pytest.approx(
        (n - 1) * (a + S / (n * B)), rel=1e-12)
    assert closed_form_time("ring", "reducescatter", n, S, B, a) == pytest.approx(
        (n - 1) * (a + S / (n * B)), rel=1e-12)
    # Hand values: direct allgather on fc:4, 4 GB, 1 GB/s, no latency -> one 1 GB hop.
    assert closed_form_time("direct", "allgather", 4, 4e9, 1e9, 0.0) == pytest.approx(1.0)
    # rhd on a switch of 4, c = 1: 3 chunk sends through the uplink + 1 more hop.
    assert closed_form_time("rhd", "reducescatter", 4, 4e9, 1e9, 0.0,
                            topology="switch") == pytest.approx(4.0)
    # dbt broadcast on fc:7: 1 + floor(log2 6) = 3 hops of S/2.
    assert closed_form_time("dbt", "broadcast", 7, 2e9, 1e9, 0.0) == pytest.approx(3.0)
    # Pipelined chain: (n - 1 + c - 1) hops of S / c.
    assert closed_form_time("ring", "broadcast", 5, 4e9, 1e9, 0.0, chunks=4) == \
        pytest.approx((5 - 1 + 4 - 1) * 1.0)
    # Hierarchical torus 3x3, c = 1: dimension 0 carries (3-1) * 9/3 = 6 chunks.
    assert closed_form_time("hierarchical", "allgather", 9, 9e9, 1e9, 0.0,
                            dims=[("ring", 3), ("ring", 3)]) == pytest.approx(6.0)
    # Multiring: k rings each carry 1/k of the bytes.
    assert closed_form_time("multiring", "allreduce", 8, S, B, a, rings=4) == pytest.approx(
        2 * 7 * (a + S / (8 * 4 * B)))


def test_closed_form_errors_name_what_is_valid():
    with pytest.raises(InvalidSpecError) as err:
        closed_form_time("tree", "allreduce", 4, 1e6, 1e9, 1e-6)
    assert all(name in str(err.value) for name in closed_forms())
    with pytest.raises(InvalidSpecError, match="allgather, reducescatter, allreduce"):
        closed_form_time("rhd", "broadcast", 4, 1e6, 1e9, 1e-6)
    with pytest.raises(InvalidSpecError, match="chunks, topology"):
        closed_form_time("rhd", "allreduce", 4, 1e6, 1e9, 1e-6, chunk=2)
    with pytest.raises(InvalidSpecError, match="power of two"):
        closed_form_time("rhd", "allreduce", 6, 1e6, 1e9, 1e-6)
    with pytest.raises(InvalidSpecError, match="hypercube"):
        closed_form_time("rhd", "allreduce", 4, 1e6, 1e9, 1e-6, topology="torus")
    with pytest.raises(InvalidSpecError, match="ring or uniring"):
        closed_form_time("hierarchical", "allgather", 8, 1e6, 1e9, 1e-6,
                         dims=[("switch", 4), ("ring", 2)])
    with pytest.raises(InvalidSpecError, match="size 2 or 4"):
        closed_form_time("hierarchical", "allgather", 24, 1e6, 1e9, 1e-6,
                         dims=[("ring", 3), ("switch", 8)])
    with pytest.raises(InvalidSpecError, match="pieces"):
        closed_form_time("hierarchical", "allreduce", 12, 1e6, 1e9, 1e-6,
                         dims=[("ring", 3), ("ring", 4)])
    with pytest.raises(InvalidSpecError, match="dims"):
        closed_form_time("hierarchical", "allreduce", 12, 1e6, 1e9, 1e-6)
    for bad in ({"n": 1}, {"size_bytes": 0.0}, {"bandwidth_Bps": -1.0},
                {"latency_s": math.nan}):
        args = {"n": 4, "size_bytes": 1e6, "bandwidth_Bps": 1e9, "latency_s": 1e-6, **bad}
        with pytest.raises(InvalidSpecError):
            closed_form_time("ring", "allgather", **args)
    with pytest.raises(InvalidSpecError, match="chunks"):
        closed_form_time("ring", "allgather", 4, 1e6, 1e9, 1e-6, chunks=0)
