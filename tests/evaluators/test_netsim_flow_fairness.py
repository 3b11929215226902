"""The flow model's rates are max-min fair, checked by an independent bottleneck test.

Max-min fairness (Bertsekas & Gallager, Data Networks 6.5.2): a feasible
allocation is max-min fair iff every flow has a bottleneck link, i.e. a link on
its path that is saturated and on which no other flow has a larger rate.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from evaluators.netsim import Message, max_min_rates, simulate
from topologies.model import Topology
from topologies.registry import from_spec

TOL = 1e-9


def max_min_violation(capacity, paths, rates):
    """None if ``rates`` is max-min fair for flows on ``paths``; else a reason (plain loops)."""
    load = {}
    users = {}
    for f, path in enumerate(paths):
        for link in path:
            load[link] = load.get(link, 0.0) + rates[f]
            users.setdefault(link, []).append(f)
    for link, x in load.items():
        if x > capacity[link] * (1 + TOL):
            return f"link {link} overloaded: {x} > {capacity[link]}"
    for f, path in enumerate(paths):
        if rates[f] <= 0:
            return f"flow {f} has rate {rates[f]}"
        if not any(load[l] >= capacity[l] * (1 - TOL)
                   and rates[f] >= max(rates[g] for g in users[l]) * (1 - TOL) for l in path):
            return f"flow {f} has no bottleneck link"
    return None


def rates_for(capacity, paths):
    hop_flow = np.array([f for f, p in enumerate(paths) for _ in p], dtype=np.int64)
    hop_link = np.array([l for p in paths for l in p], dtype=np.int64)
    return max_min_rates(np.asarray(capacity, dtype=float), hop_flow, hop_link, len(paths))


def test_checker_rejects_unfair_allocations():
    cap = [1.0, 2.0]
    paths = [[0, 1], [0], [1]]
    assert max_min_violation(cap, paths, [0.5, 0.5, 1.5]) is None
    assert "no bottleneck" in max_min_violation(cap, paths, [0.5, 0.5, 1.0])   # link 1 idle part
    assert "overloaded" in max_min_violation(cap, paths, [0.6, 0.5, 1.4])
    assert "no bottleneck" in max_min_violation(cap, paths, [0.25, 0.75, 1.75])  # flow 0 starved


def test_classic_example_rates():
    assert rates_for([1.0, 2.0], [[0, 1], [0], [1]]).tolist() == pytest.approx([0.5, 0.5, 1.5])


def test_three_levels_of_bottlenecks():
    # link capacities 3, 5, 12; flows: a on 0, b on 0+1, c on 1+2, d on 2, e on 2
    paths = [[0], [0, 1], [1, 2], [2], [2]]
    r = rates_for([3.0, 5.0, 12.0], paths)
    # link 0 saturates first (a, b at 1.5); then link 1 (c gets 5 - 1.5 = 3.5);
    # then link 2 (d, e share 12 - 3.5)
    assert r.tolist() == pytest.approx([1.5, 1.5, 3.5, 4.25, 4.25])
    assert max_min_violation([3.0, 5.0, 12.0], paths, r) is None
    # with link 2 at 10 it is the bottleneck of c too: c, d, e at 10/3
    r = rates_for([3.0, 5.0, 10.0], paths)
    assert r.tolist() == pytest.approx([1.5, 1.5, 10 / 3, 10 / 3, 10 / 3])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.lists(st.floats(0.5, 8.0), min_size=6, max_size=6),
       st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True),
                min_size=1, max_size=10))
def test_max_min_rates_random_incidence(n_links, caps, paths):
    caps = caps[:n_links]
    paths = [[l % n_links for l in p] for p in paths]
    paths = [sorted(set(p)) for p in paths]
    r = rates_for(caps, paths)
    assert max_min_violation(caps, paths, r) is None


@pytest.mark.parametrize("seed", range(8))
def test_every_recomputation_during_simulation_is_max_min_fair(seed):
    rng = np.random.default_rng(seed)
    spec = ["torus:3x3", "mesh:2x4", "hier:ring3_switch2", "fc:5"][seed % 4]
    base = from_spec(spec)
    # random heterogeneous capacities on the same graph
    t = Topology(base.npus, base.switches, base.src, base.dst,
                 rng.uniform(1e9, 8e9, base.n_links), rng.uniform(0, 2e-6, base.n_links))
    msgs = []
    for i in range(25):
        s, d = rng.choice(t.npus, 2, replace=False)
        deps = (int(rng.integers(i)),) if i and rng.random() < 0.3 else ()
        msgs.append(Message(int(s), int(d), float(rng.uniform(1e5, 1e6)),
                            float(rng.choice([0.0, 5e-5, 1e-4])), None, deps))
    checks = []

    def observe(now, ids, rates):
        paths = [t.route(msgs[i].src, msgs[i].dst) for i in ids]
        checks.append(max_min_violation(t.bandwidth, paths, rates))

    r = simulate(t, msgs, model="flow", on_rates=observe)
    assert len(checks) >= 10 and all(c is None for c in checks), checks
    # every flow drained: bytes / max possible rate is a lower bound on its activity
    for i, m in enumerate(msgs):
        path = t.route(m.src, m.dst)
        lower = r.ready_s[i] + m.size_bytes / t.bandwidth[list(path)].min() \
            + t.latency[list(path)].sum()
        assert r.finish_s[i] >= lower * (1 - 1e-9)
        for d in m.deps:
            assert r.ready_s[i] >= r.finish_s[d] * (1 - 1e-12)


def test_flow_conserves_bytes_per_link():
    rng = random.Random(3)
    t = from_spec("torus:3x3,bw=2GB/s")
    msgs = [(s, d, 1e6) for s, d in (rng.sample(range(9), 2) for _ in range(15))]
    r = simulate(t, msgs, model="flow")
    for link in range(t.n_links):
        carried = sum(m[2] for m in msgs if link in t.route(m[0], m[1]))
        assert r.link_bytes[link] == pytest.approx(carried)
        assert r.link_busy_s[link] == pytest.approx(carried / t.bandwidth[link])
    assert np.all(r.link_utilization <= 1 + 1e-9)
