"""Hand-computed cases for the three network models (docs/architecture.md section 5)."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.netsim import MODELS, Message, Messages, model_names, simulate
from topologies.model import Topology
from topologies.registry import from_spec

S = 1e6          # bytes
B = 1e9          # bytes/s
L = 1e-6         # s
T = L + S / B    # one store-and-forward hop


def line(bws, lats):
    """Path graph 0 - 1 - ... - k without dims: link 2i is i -> i+1, link 2i+1 is i+1 -> i."""
    k = len(bws)
    src, dst, bw, lat = [], [], [], []
    for i in range(k):
        src += [i, i + 1]
        dst += [i + 1, i]
        bw += [bws[i]] * 2
        lat += [lats[i]] * 2
    return Topology(k + 1, 0, src, dst, bw, lat, name="line")


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_model_single_hop(model):
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    r = simulate(t, [(0, 1, S)], model=model)
    assert r.finish_s[0] == pytest.approx(T, rel=1e-12)
    assert r.makespan_s == pytest.approx(T, rel=1e-12)
    link = t.route(0, 1)[0]
    assert r.link_bytes[link] == S and r.link_bytes.sum() == S
    assert r.to_dict()["transfers"] == [{"src": 0, "dst": 1, "size_bytes": S,
                                         "start_s": 0.0, "finish_s": r.finish_s[0]}]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_model_ready_time_and_self_message(model):
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    r = simulate(t, [Message(0, 1, S, ready_s=5e-3), Message(2, 2, S, ready_s=1e-3)], model=model)
    assert r.finish_s.tolist() == pytest.approx([5e-3 + T, 1e-3], rel=1e-12)
    assert r.ready_s.tolist() == [5e-3, 1e-3]


def test_unknown_model_lists_the_three():
    t = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="analytical, congestion, flow"):
        simulate(t, [(0, 1, S)], model="packet")
    with pytest.raises(InvalidSpecError, match="on_rates"):
        simulate(t, [(0, 1, S)], model="flow", seed=1)
    with pytest.raises(InvalidSpecError, match="none"):
        simulate(t, [(0, 1, S)], model="analytical", on_rates=print)
    with pytest.raises(InvalidSpecError, match="one of: order"):
        simulate(t, [(0, 1, S)], model="congestion", on_rates=print)
    assert model_names() == ["analytical", "congestion", "flow"]


# --------------------------------------------------------------- multi-hop
BWS, LATS = [4e9, 2e9, 8e9], [1e-6, 2e-6, 3e-6]


def test_multihop_uniform_store_and_forward():
    t = line([B] * 3, [L] * 3)
    r = simulate(t, [(0, 3, S)], model="congestion")
    assert r.finish_s[0] == pytest.approx(3 * (L + S / B), rel=1e-12)
    assert r.hop_start.tolist() == pytest.approx([0, T, 2 * T], rel=1e-12)
    a = simulate(t, [(0, 3, S)], model="analytical")
    assert a.finish_s[0] == pytest.approx(3 * L + S / B, rel=1e-12)


def test_multihop_heterogeneous_each_model():
    t = line(BWS, LATS)
    cong = simulate(t, [(0, 3, S)], model="congestion").finish_s[0]
    assert cong == pytest.approx(sum(l + S / b for b, l in zip(BWS, LATS)), rel=1e-12)
    # analytical without dims: sum of latencies + size / bottleneck bandwidth
    ana = simulate(t, [(0, 3, S)], model="analytical").finish_s[0]
    assert ana == pytest.approx(6e-6 + S / 2e9, rel=1e-12)
    # flow: drains at the bottleneck rate, then the path latency once
    flo = simulate(t, [(0, 3, S)], model="flow").finish_s[0]
    assert flo == pytest.approx(S / 2e9 + 6e-6, rel=1e-12)


def test_explicit_path_is_used_and_checked():
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    long_way = (t.route(0, 3)[0], t.route(3, 2)[0], t.route(2, 1)[0])   # 0->3->2->1
    r = simulate(t, [Message(0, 1, S, path=long_way)], model="congestion")
    assert r.finish_s[0] == pytest.approx(3 * T, rel=1e-12)
    assert r.path_links.tolist() == list(long_way)
    with pytest.raises(InvalidSpecError, match="message 0 path"):
        simulate(t, [Message(0, 2, S, path=long_way)])
    with pytest.raises(InvalidSpecError, match="consecutive"):
        simulate(t, [Message(0, 1, S, path=(long_way[0], long_way[2], long_way[1], long_way[2]))])


# --------------------------------------------------------------- contention
def test_congestion_two_messages_one_link_second_waits():
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    r = simulate(t, [(0, 1, S), (0, 1, S)], model="congestion")
    assert r.finish_s.tolist() == pytest.approx([T, 2 * T], rel=1e-12)
    assert r.start_s.tolist() == pytest.approx([0, T], rel=1e-12)
    link = t.route(0, 1)[0]
    assert r.link_busy_s[link] == pytest.approx(2 * T)
    assert r.link_utilization[link] == pytest.approx(1.0)
    # analytical ignores contention: both finish at T
    assert simulate(t, [(0, 1, S), (0, 1, S)], model="analytical").finish_s.tolist() == \
        pytest.approx([T, T], rel=1e-12)


def test_congestion_fifo_by_arrival_then_index():
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    # message 1 is ready first, so it is served first although its index is larger
    r = simulate(t, [Message(0, 1, S, ready_s=1e-6), Message(0, 1, S)], model="congestion")
    assert r.finish_s.tolist() == pytest.approx([2 * T, T], rel=1e-12)
    # equal arrival: lower index first
    r = simulate(t, [Message(0, 1, S, ready_s=1e-6), Message(0, 1, 2 * S, ready_s=1e-6)],
                 model="congestion")
    assert r.finish_s.tolist() == pytest.approx([1e-6 + T, 1e-6 + T + L + 2 * S / B], rel=1e-12)


def test_congestion_pipelines_two_multihop_messages():
    t = line([B] * 2, [L] * 2)
    r = simulate(t, [(0, 2, S), (0, 2, S)], model="congestion")
    assert r.finish_s.tolist() == pytest.approx([2 * T, 3 * T], rel=1e-12)
    assert r.hop_start.tolist() == pytest.approx([0, T, T, 2 * T], rel=1e-12)


def test_congestion_cross_traffic_joins_queue_mid_path():
    # A: 0 -> 2 reaches link 1->2 at T; B: 1 -> 2 ready at T/2 holds it until 1.5 T.
    t = line([B] * 2, [L] * 2)
    r = simulate(t, [(0, 2, S), Message(1, 2, S, ready_s=T / 2)], model="congestion")
    assert r.finish_s.tolist() == pytest.approx([2.5 * T, 1.5 * T], rel=1e-12)
    assert r.hop_start.tolist() == pytest.approx([0, 1.5 * T, 0.5 * T], rel=1e-12)


def test_dependencies_delay_ready_time_every_model():
    t = line([B] * 3, [L] * 3)
    msgs = [Message(2, 3, S, deps=(1,)), Message(0, 1, S), Message(1, 2, S, deps=(1,))]
    for model, first in (("congestion", T), ("analytical", T), ("flow", T)):
        r = simulate(t, msgs, model=model)
        assert r.finish_s.tolist() == pytest.approx([2 * T, first, 2 * T], rel=1e-12), model
        assert r.ready_s.tolist() == pytest.approx([T, 0, T], rel=1e-12), model


@pytest.mark.parametrize("model", sorted(MODELS))
def test_cyclic_dependencies_rejected(model):
    t = from_spec("ring:4")
    with pytest.raises(InvalidSpecError, match="acyclic"):
        simulate(t, [Message(0, 1, S, deps=(1,)), Message(1, 2, S, deps=(0,))], model=model)


# ---------------------------------------------------------------- analytical
HIER = "hier:ring4_switch2,bw=100GB/s:50GB/s,lat=1us:2us"


@pytest.mark.parametrize("src,dst,expected", [
    (0, 1, 1e-6 + S / 100e9),          # dim 0 ring, 1 hop
    (0, 2, 2e-6 + S / 100e9),          # ring of 4: 2 hops either way
    (0, 3, 1e-6 + S / 100e9),          # ring wraps: 1 hop the short way
    (3, 1, 2e-6 + S / 100e9),
    (0, 4, 2 * 2e-6 + S / 50e9),       # dim 1 switch: 2 hops
    (6, 2, 2 * 2e-6 + S / 50e9),
    (1, 6, 1e-6 + S / 100e9),          # differ in both: only dim 0 counts (ASTRA-sim)
    (5, 0, 1e-6 + S / 100e9),
])
def test_analytical_hierarchical_first_differing_dimension(src, dst, expected):
    t = from_spec(HIER)
    r = simulate(t, [(src, dst, S)], model="analytical")
    assert r.finish_s[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("spec,src,dst,hops", [
    ("uniring:5,bw=1GB/s,lat=1us", 3, 1, 3),      # forward distance
    ("uniring:5,bw=1GB/s,lat=1us", 1, 3, 2),
    ("mesh:5,bw=1GB/s,lat=1us", 4, 0, 4),         # |dx|, no wrap
    ("fc:6,bw=1GB/s,lat=1us", 0, 5, 1),
    ("switch:4,bw=1GB/s,lat=1us", 3, 0, 2),
    ("torus:4x4,bw=1GB/s,lat=1us", 1, 15, 2),     # dim 0: 1 -> 3 is 2 hops on a ring of 4
    ("torus:4x4,bw=1GB/s,lat=1us", 0, 12, 1),     # dim 1: ring wraps 0 -> 3
])
def test_analytical_hop_counts_per_dimension_kind(spec, src, dst, hops):
    t = from_spec(spec)
    r = simulate(t, [(src, dst, S)], model="analytical")
    assert r.finish_s[0] == pytest.approx(hops * L + S / B, rel=1e-12)


def test_analytical_parallel_links_add_bandwidth():
    t = from_spec("hier:ring4_switch2,bw=100GB/s:50GB/s,lat=1us:2us,links=2")
    r = simulate(t, [(0, 4, S)], model="analytical")
    assert r.finish_s[0] == pytest.approx(4e-6 + S / 100e9, rel=1e-12)


def test_analytical_dependencies_in_any_index_order():
    t = from_spec("ring:8,bw=1GB/s,lat=1us")
    # chain 2 <- 0 <- 1 (message 0 waits for 1, message 2 waits for 0), hops 1, 2, 3
    msgs = [Message(0, 2, S, deps=(1,)), Message(0, 1, S), Message(0, 3, S, deps=(0,))]
    r = simulate(t, msgs, model="analytical")
    d = [2 * L + S / B, L + S / B, 3 * L + S / B]
    assert r.finish_s.tolist() == pytest.approx([d[1] + d[0], d[1], d[1] + d[0] + d[2]], rel=1e-12)


# ---------------------------------------------------------------------- flow
def test_flow_two_flows_share_link_then_survivor_speeds_up():
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    seen = []
    r = simulate(t, [(0, 1, S), (0, 1, 2 * S)], model="flow",
                 on_rates=lambda now, ids, rates: seen.append((now, ids.tolist(), rates.tolist())))
    # both at B/2 until the 1 MB flow drains at 2 S / B; the other then has S left at B
    assert r.finish_s.tolist() == pytest.approx([2 * S / B + L, 3 * S / B + L], rel=1e-12)
    assert seen[0] == (0.0, [0, 1], [B / 2, B / 2])
    assert seen[1][1:] == ([1], [B])
    assert seen[1][0] == pytest.approx(2 * S / B, rel=1e-12)
    link = t.route(0, 1)[0]
    assert r.link_busy_s[link] == pytest.approx(3 * S / B)


def test_flow_classic_three_flows_two_links():
    # link 0->1 of 1 GB/s, link 1->2 of 2 GB/s; A: 0->2, B: 0->1, C: 1->2.
    t = line([1e9, 2e9], [0.0, 0.0])
    seen = []
    r = simulate(t, [(0, 2, S), (0, 1, S), (1, 2, S)], model="flow",
                 on_rates=lambda now, ids, rates: seen.append(rates.tolist()))
    assert seen[0] == pytest.approx([0.5e9, 0.5e9, 1.5e9], rel=1e-12)
    # C drains first (S / 1.5 GB/s); A stays bottlenecked on link 0->1 with B.
    assert seen[1] == pytest.approx([0.5e9, 0.5e9], rel=1e-12)
    assert r.finish_s.tolist() == pytest.approx([2e-3, 2e-3, S / 1.5e9], rel=1e-12)


def test_flow_late_arrival_shares_remaining_bytes():
    t = from_spec("ring:4,bw=1GB/s,lat=0")
    r = simulate(t, [(0, 1, 2 * S), Message(0, 1, S, ready_s=S / B)], model="flow")
    # at S/B flow 0 has S left; both drain S at B/2 -> finish at 3 S / B
    assert r.finish_s.tolist() == pytest.approx([3 * S / B, 3 * S / B], rel=1e-12)
    assert r.start_s.tolist() == pytest.approx([0, S / B], rel=1e-12)


def test_flow_zero_size_message_pays_latency_only():
    t = line([B] * 2, [L] * 2)
    r = simulate(t, [(0, 2, 0.0)], model="flow")
    assert r.finish_s[0] == pytest.approx(2 * L, rel=1e-12)


# ------------------------------------------------ random instances vs oracles
def oracle_congestion(topo, msgs):
    """Link-centric reference: explicit FIFO queues; the clock visits every event time."""
    n = len(msgs)
    hop = [0] * n
    arrive = [m[3] for m in msgs]           # arrival time at the current link's queue
    in_queue = [False] * n
    finish = [None] * n
    busy_until = defaultdict(float)
    queue = defaultdict(list)
    t = 0.0
    while None in finish:
        for i, m in enumerate(msgs):
            if finish[i] is None and not in_queue[i] and arrive[i] <= t:
                queue[m[4][hop[i]]].append((arrive[i], i))
                in_queue[i] = True
        for link, q in queue.items():
            if q and busy_until[link] <= t:
                q.sort()
                _, i = q.pop(0)
                in_queue[i] = False
                end = t + topo.latency[link] + msgs[i][2] / topo.bandwidth[link]
                busy_until[link] = end
                hop[i] += 1
                if hop[i] == len(msgs[i][4]):
                    finish[i] = end
                arrive[i] = end
        later = [arrive[i] for i in range(n)
                 if finish[i] is None and not in_queue[i] and arrive[i] > t]
        later += [busy_until[l] for l, q in queue.items() if q and busy_until[l] > t]
        if later:
            t = min(later)
    return finish


@pytest.mark.parametrize("seed", range(6))
def test_congestion_matches_queue_oracle_and_lower_bounds(seed):
    rng = random.Random(seed)
    t = from_spec(["torus:3x3,bw=2GB/s,lat=1us", "mesh:2x3,lat=0",
                   "hier:ring3_switch2,bw=1GB/s:3GB/s"][seed % 3])
    msgs = []
    for _ in range(20):
        s, d = rng.sample(range(t.npus), 2)
        size = rng.choice([1e5, 2e5, 5e5])
        ready = rng.choice([0.0, 1e-4, 2.5e-4])
        msgs.append((s, d, size, ready, t.route(s, d)))
    r = simulate(t, msgs, model="congestion")
    assert r.finish_s.tolist() == pytest.approx(oracle_congestion(t, msgs), rel=1e-9)
    # every link serves one hop at a time
    svc = t.latency[r.path_links] + r.size_bytes[Messages.from_list(t, msgs).hop_msg] \
        / t.bandwidth[r.path_links]
    for link in np.unique(r.path_links):
        on = np.flatnonzero(r.path_links == link)
        order = on[np.argsort(r.hop_start[on])]
        assert np.all(r.hop_start[order][1:] >= (r.hop_start + svc)[order][:-1] - 1e-15)
    assert np.all(r.link_utilization <= 1 + 1e-12)
    # no model beats the contention-free path time; store-and-forward pays every hop
    ana = simulate(t, [m[:4] + (m[4],) for m in msgs], model="analytical")
    flo = simulate(t, msgs, model="flow")
    for i, (s, d, size, ready, path) in enumerate(msgs):
        path = list(path)
        sf = ready + sum(t.latency[l] + size / t.bandwidth[l] for l in path)
        assert r.finish_s[i] >= sf * (1 - 1e-12)
        fluid = ready + sum(t.latency[l] for l in path) + size / min(t.bandwidth[l] for l in path)
        assert flo.finish_s[i] >= fluid * (1 - 1e-12)
        if not t.dims:
            assert ana.finish_s[i] == pytest.approx(fluid, rel=1e-12)


def test_queue_oracle_is_able_to_disagree():
    # the oracle itself must see contention (guards against a vacuous comparison)
    t = from_spec("ring:4,bw=1GB/s,lat=1us")
    p = t.route(0, 1)
    assert oracle_congestion(t, [(0, 1, S, 0.0, p), (0, 1, S, 0.0, p)]) == \
        pytest.approx([T, 2 * T], rel=1e-12)


def test_analytical_on_astra_sim_network_file_uses_its_units():
    from topologies.yaml_io import topology_from_dict

    t = topology_from_dict({"topology": ["Ring", "FullyConnected", "Switch"],
                            "npus_count": [4, 2, 4], "bandwidth": [50.0, 25.0, 12.5],
                            "latency": [500.0, 500.0, 500.0]})
    gb = 2.0 ** 30                      # ASTRA-sim GB/s
    msgs = [(0, 2, S), (0, 4, S), (0, 8, S), (1, 14, S), (12, 0, S)]
    r = simulate(t, msgs, model="analytical")
    expected = [2 * 500e-9 + S / (50 * gb),      # ring of 4, two hops
                500e-9 + S / (25 * gb),          # fully connected, one hop
                2 * 500e-9 + S / (12.5 * gb),    # switch, two hops
                500e-9 + S / (50 * gb),          # (1,0,0) -> (2,1,1): dim 0 only
                500e-9 + S / (25 * gb)]          # (0,1,1) -> (0,0,0): dim 1 first
    assert r.finish_s.tolist() == pytest.approx(expected, rel=1e-12)
