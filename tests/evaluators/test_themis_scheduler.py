"""Themis (ISCA'22) scheduler: latency model, Algorithm 1, schedules, presets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.algorithms.themis import (
    baseline_orders, dimension_cost, model_time, themis, themis_orders,
)
from evaluators.collectives import Collective
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule
from topologies.families.themis_presets import THEMIS_TABLE2, preset_dimensions
from topologies.model import Dimension
from topologies.registry import from_spec


# ------------------------------------------------------------ Sec. 4.4 model
def dimension_time(dim, kind, nbytes):
    """Sec. 4.4 ``A_K + n_K * B_K`` (s) of one RS/AG stage on ``dim``."""
    return sum(dimension_cost(dim, kind, nbytes))


def test_dimension_time_hand_calculation():
    # ring: (P-1) steps, (P-1)/P * bytes over one link.
    assert dimension_time(Dimension("ring", 4, 1e9, 1e-6), "rs", 4e9) == pytest.approx(3e-6 + 3.0)
    # direct on FC: one step, every peer over its own link: (3/4 * 4e9) / (3 * 1e9).
    assert dimension_time(Dimension("fc", 4, 1e9, 1e-6), "ag", 4e9) == pytest.approx(1e-6 + 1.0)
    # halving-doubling on a switch of 8: log2 8 = 3 steps; 2 parallel links double the uplink.
    assert dimension_time(Dimension("switch", 8, 1e9, 2e-6, links=2), "allgather", 8e9) == \
        pytest.approx(6e-6 + 7 / 8 * 8e9 / 2e9)
    # non-power of two (6 -> 4 virtual ranks): fold + 2 halvings + copy back.
    assert dimension_time(Dimension("switch", 6, 1e9, 1e-6), "rs", 6e9) == \
        pytest.approx(4e-6 + (0.75 * 6e9 + 6e9 + 1e9) / 1e9)
    assert dimension_time(Dimension("ring", 1, 1e9, 1e-6), "rs", 1e9) == 0.0
    with pytest.raises(InvalidSpecError):
        dimension_time(Dimension("ring", 4, 1e9, 1e-6), "allreduce", 1e9)


def _fig5_dims():
    # Fig. 5: 4x4, BW(dim1) = 2 BW(dim2); a 64 MB RS on dim1 takes 1 time unit (1 s here).
    return (Dimension("ring", 4, 48e6, 0.0), Dimension("ring", 4, 24e6, 0.0))


def test_fig5_fig7_example():
    dims = _fig5_dims()
    assert dimension_time(dims[0], "rs", 64e6) == pytest.approx(1.0)
    assert dimension_time(dims[1], "rs", 16e6) == pytest.approx(0.5)
    orders, loads = themis_orders(dims, "allreduce", 256e6, 4)
    rs = [[k for ph, k in st if ph == "rs"] for st in orders]
    # Fig. 7: chunk 1 baseline, chunk 2 starts on dim2, chunks 3-4 on dim1 again.
    assert rs == [[0, 1], [1, 0], [0, 1], [0, 1]]
    assert [k for ph, k in orders[1] if ph == "ag"] == [0, 1]   # AG = reverse of RS
    # Tracker by hand: dim1 2 + 0.5 + 2 + 2, dim2 1 + 4 + 1 + 1 (units).
    assert loads.tolist() == pytest.approx([6.5, 7.0])
    # Baseline pipeline: dim1 serves 4 RS + 4 AG of 1 unit back to back -> 8 units.
    base = model_time(dims, baseline_orders(dims, "allreduce", 4), 256e6, "fifo")
    assert base["time_s"] == pytest.approx(8.0)
    assert base["busy_s"] == pytest.approx([8.0, 4.0])
    assert base["utilization"] == pytest.approx([1.0, 0.5])
    # Traced by hand: under FIFO dim1 serves chunk 2's 2-unit AG before chunk 4's
    # 0.5-unit one and dim1 starves until 7 -> 8 units; SCF (Sec. 4.3) takes the
    # small stages first and ends at 7 = dim2's load, the bound of the tracker.
    assert model_time(dims, orders, 256e6, "fifo")["time_s"] == pytest.approx(8.0)
    scf = model_time(dims, orders, 256e6, "scf")
    assert scf["time_s"] == pytest.approx(7.0)
    assert scf["busy_s"] == pytest.approx([6.5, 7.0])


# ---------------------------------------------------------------- schedules
@pytest.mark.parametrize("spec", ["torus:3x3", "hier:ring4_switch2", "hier:ring2_fc2_switch2"])
@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
@pytest.mark.parametrize("chunks", [1, 3, 8])
def test_schedules_valid(spec, kind, chunks):
    topo = from_spec(spec)
    coll = Collective.on(kind, topo.npus, 4e6)
    for kw in ({}, {"baseline": True}, {"policy": "fifo"}):
        s = synthesize(topo, coll, "themis", chunks=chunks, **kw)
        assert s.collective.chunks_per_npu == chunks
        report = validate_schedule(s, topo)
        assert report.valid, report.errors[:3]
        assert len(s.metadata["orders"]) == chunks
        assert math.isfinite(s.time_s) and s.time_s > 0


def test_baseline_is_the_hierarchical_algorithm():
    topo = from_spec("hier:ring4_switch2,bw=100GB/s:40GB/s")
    coll = Collective.on("allreduce", topo.npus, 8e6)
    base = synthesize(topo, coll, "themis", chunks=4, baseline=True)
    hier = synthesize(topo, coll.with_chunks(4), "hierarchical")
    assert base.time_s == pytest.approx(hier.time_s)


def test_chunks_round_up_to_collective_chunks():
    topo = from_spec("torus:2x2")
    s = themis(topo, Collective.on("allgather", 4, 1e6, chunks_per_npu=2), chunks=3)
    assert s.collective.chunks_per_npu == 4


@pytest.mark.parametrize("spec", ["torus:3x3", "hier:ring4_switch2", "hier:ring2_fc2_switch2",
                                  "hier:ring4_ring4,bw=200GB/s:100GB/s,lat=0"])
@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_never_much_slower_than_baseline(spec, kind):
    topo = from_spec(spec)
    coll = Collective.on(kind, topo.npus, 16e6)
    for chunks in (3, 8):
        th = synthesize(topo, coll, "themis", chunks=chunks).time_s
        base = synthesize(topo, coll, "themis", chunks=chunks, baseline=True).time_s
        assert th <= 1.1 * base


@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_faster_on_unbalanced_bandwidth(kind):
    # BW(dim1) = 2 BW(dim2) < 4 BW(dim2): dim2 over-provisioned (Sec. 3, Fig. 5).
    topo = from_spec("hier:ring4_ring4,bw=200GB/s:100GB/s,lat=0")
    coll = Collective.on(kind, topo.npus, 16e6)
    th = synthesize(topo, coll, "themis", chunks=8)
    base = synthesize(topo, coll, "themis", chunks=8, baseline=True)
    assert th.time_s < 0.95 * base.time_s
    assert th.metadata["model_time_s"] < base.metadata["model_time_s"]


@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_just_enough_bandwidth_keeps_baseline(kind):
    # Sec. 6.3: BW(dim1) = P_1 * BW(dim2) -> the baseline is already optimal.
    topo = from_spec("hier:ring4_ring4,bw=400GB/s:100GB/s,lat=0")
    coll = Collective.on(kind, topo.npus, 16e6)
    th = synthesize(topo, coll, "themis", chunks=8)
    base = synthesize(topo, coll, "themis", chunks=8, baseline=True)
    assert th.metadata["orders"] == base.metadata["orders"]
    assert th.time_s == pytest.approx(base.time_s)


def test_deterministic():
    topo = from_spec("hier:ring2_fc2_switch2,bw=50GB/s:25GB/s:10GB/s")
    coll = Collective.on("allreduce", topo.npus, 5e6)
    a = synthesize(topo, coll, "themis", chunks=6)
    b = synthesize(topo, coll, "themis", chunks=6)
    assert a.metadata == b.metadata
    for field in ("chunk", "src", "dst", "start", "end"):
        assert np.array_equal(getattr(a, field), getattr(b, field))


def test_rejects():
    coll = Collective.on("allreduce", 4, 1e6)
    with pytest.raises(InvalidSpecError, match="themis"):
        themis(_no_dims(), coll)
    topo = from_spec("torus:2x2")
    for kw in ({"chunks": 0}, {"chunks": 2.5}, {"policy": "lifo"}, {"baseline": "yes"}):
        with pytest.raises(InvalidSpecError):
            themis(topo, coll, **kw)
    with pytest.raises(InvalidSpecError):
        themis(topo, Collective.on("allreduce", [0, 1], 1e6))


def _no_dims():
    from topologies.builder import LinkBuilder

    b = LinkBuilder(4, 0)
    b.cable([0, 1, 2, 3], [1, 2, 3, 0], 1e9, 1e-6)
    return b.build(name="plain")


# ------------------------------------------------------------------ presets
def test_table2_presets():
    agg_gbps = {"2d-sw-sw": (1200, 800), "3d-sw-sw-sw-homo": (800, 800, 800),
                "3d-sw-sw-sw-hetero": (1600, 800, 400), "3d-fc-ring-sw": (1400, 800, 400),
                "4d-ring-sw-sw-sw": (2000, 1600, 800, 400),
                "4d-ring-fc-ring-sw": (3000, 1400, 1200, 800)}
    assert set(agg_gbps) == set(THEMIS_TABLE2)
    for name, agg in agg_gbps.items():
        dims = preset_dimensions(name)
        assert int(np.prod([d.size for d in dims])) == 1024
        neigh = {"ring": 2, "switch": 1}
        got = [d.bandwidth_Bps * d.links * (d.size - 1 if d.kind == "fc" else neigh[d.kind])
               * 8 / 1e9 for d in dims]
        assert got == pytest.approx(list(agg))
    t = from_spec("themis:2d-sw-sw")
    assert t.npus == 1024 and t.family == "themis"
    assert [d.latency_s for d in t.dims] == pytest.approx([700e-9, 1700e-9])
    with pytest.raises(InvalidSpecError):
        from_spec("themis:5d-nope")
