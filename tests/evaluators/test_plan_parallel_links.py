"""Transfers are dealt round-robin over equal parallel links (Plan._spread_parallel)."""

from dataclasses import replace

import numpy as np
import pytest

from evaluators.collectives import Collective
from evaluators.registry import synthesize
from evaluators.validate import validate_schedule
from topologies.builder import LinkBuilder
from topologies.families.multidim import multidim
from topologies.families.themis_presets import preset_dimensions


def two_npus(cables: int, slow_extra: bool = False):
    b = LinkBuilder(2, 0)
    for _ in range(cables):
        b.cable(0, 1, 1e9, 0.0)
    if slow_extra:
        b.cable(0, 1, 0.25e9, 0.0)          # a slower parallel cable is not used
    return b.build(name=f"{cables} cables")


@pytest.mark.parametrize("cables", [1, 2, 4])
def test_chunks_use_every_cable(cables):
    # 4 chunks per NPU, 1 MB each: one cable -> 4 ms, c cables -> 4/c ms.
    t = two_npus(cables)
    coll = Collective.on("allgather", 2, 8e6, chunks_per_npu=4)
    s = synthesize(t, coll, "direct")
    assert s.time_s == pytest.approx(4e-3 / cables, rel=1e-12)
    assert validate_schedule(s, t).valid
    used = {int(l) for l in s.path_links}
    assert len(used) == 2 * cables


def test_slower_parallel_link_is_left_alone():
    t = two_npus(2, slow_extra=True)
    s = synthesize(t, Collective.on("allgather", 2, 8e6, chunks_per_npu=4), "direct")
    assert s.time_s == pytest.approx(2e-3, rel=1e-12)
    assert np.all(t.bandwidth[s.path_links] == 1e9)


@pytest.mark.parametrize("baseline", [False, True])
def test_themis_replay_close_to_model_with_link_bundles(baseline):
    """Table 2's 2D-SW_SW has 6 links per NPU on dim 1: the replayed schedule uses
    all six and lands near the Sec. 4.4 model (it used one, 4-6x slower, before)."""
    d = preset_dimensions("2d-sw-sw")
    t = multidim([replace(d[0], size=4), replace(d[1], size=8)])
    s = synthesize(t, Collective.on("allreduce", t.npus, 1e9), "themis", chunks=16,
                   baseline=baseline, link_order="model")
    assert s.time_s == pytest.approx(s.metadata["model_time_s"], rel=0.15)
