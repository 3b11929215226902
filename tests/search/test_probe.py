"""Latency probe (Section 4.2): round-robin schedule, CSV round trip, loopback probe on Ray."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from search.reorder.probe import _EchoNode, probe_latencies, round_robin_schedule, save_cost_matrix
from search.reorder.rank_order import load_cost_matrix
from search.ray_session import ray_session


def check_schedule(n, rounds):
    expected_rounds = n - 1 if n % 2 == 0 else n
    assert len(rounds) == expected_rounds
    seen = []
    for pairs in rounds:
        members = [v for p in pairs for v in p]
        assert len(members) == len(set(members)), "a node appears twice in one round"
        assert all(0 <= a < b < n for a, b in pairs)
        # Perfect matching for even n; exactly one node sits out (the bye) for odd n.
        assert len(members) == n - (n % 2)
        seen.extend(pairs)
    assert sorted(seen) == list(itertools.combinations(range(n), 2))  # every pair exactly once


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_round_robin_small(n):
    check_schedule(n, round_robin_schedule(n))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 60))
def test_round_robin_property(n):
    check_schedule(n, round_robin_schedule(n))


def test_round_robin_odd_byes_are_distinct():
    # n = 5: each node sits out exactly one of the 5 rounds.
    rounds = round_robin_schedule(5)
    byes = [set(range(5)) - {v for p in pairs for v in p} for pairs in rounds]
    assert all(len(b) == 1 for b in byes)
    assert set().union(*byes) == set(range(5))


def test_round_robin_hand_case():
    assert round_robin_schedule(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]


@pytest.mark.parametrize("bad", [1, 0, -3, 2.0, True, "4"])
def test_round_robin_rejects(bad):
    with pytest.raises(InvalidSpecError):
        round_robin_schedule(bad)


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    m = rng.uniform(1e-6, 1e-3, size=(5, 5))
    m = np.maximum(m, m.T)
    np.fill_diagonal(m, 0.0)
    names = ["10.0.0.1", "10.0.0.2", "local-0", "b", "c"]
    cm = load_cost_matrix(save_cost_matrix(tmp_path / "c.csv", m, names))
    assert np.array_equal(cm.costs, m)
    assert cm.names == tuple(names)


def test_csv_integer_names(tmp_path):
    m = np.array([[0.0, 1.5e-5], [2.5e-5, 0.0]])
    cm = load_cost_matrix(save_cost_matrix(tmp_path / "c.csv", m, ["0", "7"]))
    assert np.array_equal(cm.costs, m) and cm.names == ("0", "7")


@pytest.mark.parametrize("matrix,names", [
    (np.zeros((2, 3)), ["a", "b"]),
    (np.zeros((1, 1)), ["a"]),
    (np.array([[0.0, -1.0], [1.0, 0.0]]), ["a", "b"]),
    (np.array([[0.0, np.nan], [1.0, 0.0]]), ["a", "b"]),
    (np.zeros((2, 2)), ["a", "a"]),
    (np.zeros((2, 2)), ["a"]),
    (np.zeros((2, 2)), ["a,b", "c"]),
    (np.zeros((2, 2)), ["1.5", "2"]),  # would be read back as data, not a header
])
def test_csv_rejects(tmp_path, matrix, names):
    with pytest.raises(InvalidSpecError):
        save_cost_matrix(tmp_path / "c.csv", matrix, names)


@pytest.mark.parametrize("kwargs", [
    {"rounds": 0}, {"payload_bytes": 4}, {"payload_bytes": 70000}, {"nodes": 1},
    {"timeout_s": 0}, {"timeout_s": float("nan")}, {"seed": -1},
])
def test_probe_rejects_before_starting_ray(kwargs):
    with pytest.raises(InvalidSpecError):
        probe_latencies(**kwargs)


def test_echo_node_in_process_and_lost_packets():
    # The actor class without Ray: two nodes on loopback echo each other; a probe to a
    # port nobody answers times out, is retried, and comes back empty.
    a, b = _EchoNode("127.0.0.1"), _EchoNode("127.0.0.1")
    try:
        host, port = b.address()
        assert host == "127.0.0.1" and port > 0
        rtts = a.probe((host, port), 5, 16, round_id=1, seq0=0, packet_timeout_s=0.5, max_retries=1)
        assert len(rtts) == 5 and all(0 < r < 0.5 for r in rtts)
        a_port = a.address()[1]
    finally:
        a.close()
        b.close()
    c = _EchoNode("127.0.0.1")
    try:
        assert c.probe(("127.0.0.1", a_port), 2, 8, round_id=0, seq0=0,
                       packet_timeout_s=0.01, max_retries=1) == []
    finally:
        c.close()


def check_result(res, n, rounds):
    m = res.matrix_s
    assert m.shape == (n, n)
    assert res.names == tuple(f"local-{k}" for k in range(n))
    assert np.all(np.diag(m) == 0)
    assert np.array_equal(m, m.T)
    off = m[~np.eye(n, dtype=bool)]
    assert np.all(off > 0) and np.all(off < 10e-3)
    # Independent check of the reduction: every ordered pair was probed, and each
    # entry is max over both directions of the 10th percentile of RTT/2.
    assert set(res.samples) == {(i, j) for i in range(n) for j in range(n) if i != j}
    for (i, j), rtt in res.samples.items():
        assert 1 <= rtt.size <= rounds and np.all(rtt > 0)
        expect = max(np.percentile(rtt, 10), np.percentile(res.samples[(j, i)], 10)) / 2
        assert m[i, j] == pytest.approx(expect, rel=1e-12)


def test_probe_loopback_on_local_ray(tmp_path, monkeypatch, ray_shared):
    import ray

    killed = []
    real_kill = ray.kill
    monkeypatch.setattr(ray, "kill", lambda actor, **kw: (killed.append(actor), real_kill(actor, **kw)))
    # One Ray for both runs (keeps the test short); the probe must reuse it and leave it up.
    with ray_session(num_cpus=2):
        res4 = probe_latencies(nodes=4, rounds=10, payload_bytes=32, seed=3, timeout_s=60)
        res3 = probe_latencies(nodes=3, rounds=5, seed=0, timeout_s=60)  # odd: a bye per round
        assert ray.is_initialized()  # the probe did not shut down a Ray it did not start
    check_result(res4, 4, 10)
    check_result(res3, 3, 5)
    assert len(killed) == 7  # every actor is killed explicitly, Ray itself stays up
    cm = load_cost_matrix(save_cost_matrix(tmp_path / "probe.csv", res4.matrix_s, res4.names))
    assert np.array_equal(cm.costs, res4.matrix_s) and cm.names == res4.names
