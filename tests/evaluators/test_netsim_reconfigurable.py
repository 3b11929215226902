"""Reconfigurable circuit fabric (OCS-reconfig): hand-computed timelines."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import InfeasibleError, InvalidSpecError
from evaluators.netsim.reconfigurable import ReconfigurableFabric
from fluid_cases import greedy   # the greedy circuit policy, shared with the loop cases


def ring(demand: np.ndarray, d: int) -> np.ndarray:
    """A fixed one-way ring, whatever the demand."""
    n = len(demand)
    c = np.zeros((n, n), dtype=np.int64)
    c[np.arange(n), (np.arange(n) + 1) % n] = 1
    return c


def test_first_flow_waits_for_the_reconfiguration_delay():
    f = ReconfigurableFabric(4, 1, 1e9, policy=greedy, epoch_s=0.05, delay_s=0.01)
    assert f.transfer([0], [1], [1e7]).tolist() == pytest.approx([0.02])
    assert f.reconfigurations == 1 and f.paused_s == pytest.approx(0.01)


def test_unforeseen_flows_wait_for_the_next_epoch_without_a_path():
    f = ReconfigurableFabric(4, 1, 1e9, policy=greedy, epoch_s=0.05, delay_s=0.01)
    f.transfer([0], [1], [1e7])                       # ends at 0.02 with circuit 0->1
    # 1->2 and 2->3 have no path until the 0.05 boundary, then 10 ms pause, then 0.1 s.
    got = f.transfer([1, 2], [2, 3], [1e8, 1e8])
    assert got.tolist() == pytest.approx([0.16, 0.16])
    assert f.reconfigurations == 2


def test_forwarding_relays_over_the_ring_and_pays_the_tax():
    f = ReconfigurableFabric(4, 1, 1e9, policy=ring, epoch_s=1.0, delay_s=0.0)
    # 0 -> 2 goes 0->1->2: 2 hops, one flow at full rate
    assert f.transfer([0], [2], [1e9]).tolist() == pytest.approx([1.0])
    assert f.bandwidth_tax == pytest.approx(2.0)


def test_no_forwarding_means_waiting_for_a_direct_circuit():
    f = ReconfigurableFabric(4, 1, 1e9, policy=ring, epoch_s=1.0, delay_s=0.0,
                             forwarding=False)
    with pytest.raises(InfeasibleError, match="no circuit path"):
        f.transfer([0], [2], [1e9])


def test_max_min_sharing_and_parallel_circuits_add_up():
    def double(demand, d):
        c = np.zeros_like(demand, dtype=np.int64)
        c[0, 1] = 2
        return c
    f = ReconfigurableFabric(2, 2, 1e9, policy=double, epoch_s=10.0, delay_s=0.0)
    # two flows on 2 parallel circuits: 1 GB/s each
    assert f.transfer([0, 0], [1, 1], [1e9, 2e9]).tolist() == pytest.approx([1.0, 1.5])


def test_release_times_and_pause_during_an_epoch_boundary():
    f = ReconfigurableFabric(3, 1, 1e9, policy=greedy, epoch_s=0.1, delay_s=0.02)
    # released at 0.05: the fabric has no circuits; waits for 0.1, pauses to 0.12
    got = f.transfer([0], [1], [1e7], release_s=[0.05])
    assert got.tolist() == pytest.approx([0.13])


@pytest.mark.parametrize("kwargs, field", [
    ({"epoch_s": 0.0}, "epoch_s"), ({"delay_s": -1.0}, "delay_s"),
    ({"policy": 3}, "policy")])
def test_bad_parameters(kwargs, field):
    with pytest.raises(InvalidSpecError, match=field):
        ReconfigurableFabric(4, 1, 1e9, **{"policy": greedy, **kwargs})


def test_policy_breaking_the_degree_is_refused():
    def too_many(demand, d):
        return np.ones_like(demand, dtype=np.int64) * 5
    f = ReconfigurableFabric(3, 1, 1e9, policy=too_many)
    with pytest.raises(InfeasibleError, match="degree"):
        f.transfer([0], [1], [1.0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_circuits_match_the_flow_model_and_batching_only_delays(seed):
    """With circuits that never change (a one-way ring, no pause) the fabric is the flow
    model on that ring: same finish times at rtol=0 (independent oracle: netsim flow);
    with event batching and coarse rates (rtol) each flow within 2 rtol of exact (max-min
    rates are not monotone, so a flow may also finish a little earlier) and the makespan
    within rtol, not earlier (200 random cases checked when this was written: flows
    0.957-1.10, makespan 1.000-1.003)."""
    from evaluators.netsim import simulate
    from topologies.registry import from_spec

    rng = np.random.default_rng(seed)
    n, m = 6, 25
    src = rng.integers(0, n, m)
    dst = (src + rng.integers(1, n, m)) % n
    size = rng.uniform(1e6, 1e8, m)
    exact = ReconfigurableFabric(n, 1, 1e9, policy=ring, epoch_s=1e9, delay_s=0.0,
                                 rtol=0.0).transfer(src, dst, size)
    topo = from_spec(f"uniring:{n},bw=1GB/s,lat=0")
    oracle = simulate(topo, [(int(s), int(d), float(b)) for s, d, b in zip(src, dst, size)],
                      model="flow")
    assert exact.tolist() == pytest.approx(oracle.finish_s.tolist(), rel=1e-9)
    coarse = ReconfigurableFabric(n, 1, 1e9, policy=ring, epoch_s=1e9, delay_s=0.0,
                                  rtol=0.05).transfer(src, dst, size)
    assert ((coarse / exact) >= 0.9).all() and ((coarse / exact) <= 1.1 + 1e-9).all()
    assert exact.max() * (1 - 1e-9) <= coarse.max() <= exact.max() * 1.05
