"""Switch relaxations (thesis LP 3.13 / 3.14), the realisability check, refinement."""

import numpy as np
import pytest

from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from evaluators.mcf.fluid import copy_block
from evaluators.mcf.switches import check_blocks
from evaluators.mcf.ten import Graph, noncopy_components, time_expanded
from topologies.builder import LinkBuilder
from topology_cases import cached_topology

B = 1e9
M = 1e9


def phantom_network(eps):
    """Root 0 -> switch 4 -> {1, 2}; 3 -> 4; a thin link 1 -> 3 (one-way links).

    The switch cannot copy, so the root must send the data to the switch once
    per destination, except what NPU 3 can relay (it gets data only through
    the thin link from NPU 1): the best broadcast sends ``2 - eps R / M``
    through the root's link, ``R = 2 M / (b + eps)``.  LP 3.13 only conserves
    usage at the switch, so it can balance a single transmission from the
    root with a "phantom" transmission 3 -> 4 that carries no data, and
    claims ``R = M / b``.  LP 3.14 ties usage to the destinations served and
    cannot.
    """
    lb = LinkBuilder(4, 1)
    lb.links([0, 4, 4, 3, 1], [4, 1, 2, 4, 3], [B, B, B, B, eps], 0.0)
    return lb.build(require_connected=False, name="phantom")


@pytest.mark.parametrize("eps", [0.25 * B, 0.5 * B])
def test_313_alone_is_not_realisable_and_refinement_fixes_it(eps):
    topo = phantom_network(eps)
    coll = Collective("broadcast", (0, 1, 2), M, root=0)
    exact = 2 * M / (B + eps)
    relaxed = fluid_optimum(topo, coll, steps=5, switch_model="3.13", max_rounds=0)
    assert relaxed.time_s == pytest.approx(M / B, rel=1e-6)
    assert not relaxed.optimal                       # the check caught it
    fixed = fluid_optimum(topo, coll, steps=5, switch_model="3.13")
    assert fixed.optimal and fixed.refinement_rounds >= 1 and fixed.switch_copies > 0
    assert fixed.time_s == pytest.approx(exact, rel=1e-6)
    for model in ("3.14", "exact"):
        r = fluid_optimum(topo, coll, steps=5, switch_model=model)
        assert r.optimal and r.time_s == pytest.approx(exact, rel=1e-6)
    # Secondary cost at the optimum: root link 2 - eps R, both switch links
    # to the destinations, and the relay 1 -> 3 -> 4 of eps R.
    relay = eps * exact / M
    assert fixed.secondary_cost_bytes == pytest.approx(M * (2 - relay + 2 + 2 * relay), rel=1e-6)


def test_multicast_switch_copies():
    topo = phantom_network(0.25 * B)
    r = fluid_optimum(topo, Collective("broadcast", (0, 1, 2), M, root=0), steps=5,
                      switch_model="multicast")
    assert r.time_s == pytest.approx(M / B, rel=1e-6)


def crossing_block():
    """Origin 0 feeds NPUs 1 and 2, which send through switch 7 to NPUs 3 and 4,
    which forward to 5 and 6.  Destinations 3, 4, 5, 6; T = 4."""
    lb = LinkBuilder(7, 1)
    lb.links([0, 0, 1, 2, 7, 7, 3, 3, 4, 4], [1, 2, 7, 7, 3, 4, 5, 6, 5, 6], B, 0.0)
    topo = lb.build(require_connected=False)
    npu = np.arange(topo.n_nodes) < topo.npus
    g = Graph.build(topo.n_nodes, topo.src, topo.dst, npu, npu)
    net = time_expanded(g, 0, np.array([3, 4, 5, 6]), 4)
    return net, copy_block(net, np.ones(topo.n_links))


def solution(net, block, pieces):
    """Columns for: 0 -> {1, 2} at step 0, {1, 2} -> 7 at step 1, 7 -> {3, 4} at
    step 2, with the destinations ``pieces[(u, v)]`` on the switch edges."""
    z = np.zeros(block.n_cols)
    dest_pos = {int(d): k for k, d in enumerate(net.destinations)}

    def edge(u, v, t):
        sel = (net.node_phys[net.tail] == u) & (net.node_phys[net.head] == v) & \
            (net.node_time[net.tail] == t)
        return int(np.flatnonzero(sel)[0])

    for (u, v, t), dests in pieces.items():
        e = edge(u, v, t)
        z[block.w_col[e]] = 1.0
        for d in dests:
            col = np.flatnonzero((block.f_edge == e) & (block.f_dest == dest_pos[d]))
            z[col] = 1.0
    return z


def test_check_detects_a_copy_hidden_at_a_switch():
    # Pieces {3, 5} from NPU 1 and {4, 6} from NPU 2 cross the switch; honest
    # when the piece {3, 5} leaves towards 3 and {4, 6} towards 4; cheating when
    # the exits carry {3, 6} and {4, 5}: every usage and multiplicity count of
    # LP 3.14 agrees, but the switch would have to copy both pieces.
    net, block = crossing_block()
    comp, count = noncopy_components(net)
    assert count >= 1
    feed = {(0, 1, 0): (3, 5), (0, 2, 0): (4, 6), (1, 7, 1): (3, 5), (2, 7, 1): (4, 6)}
    honest = solution(net, block, {**feed, (7, 3, 2): (3, 5), (7, 4, 2): (4, 6)})
    cheat = solution(net, block, {**feed, (7, 3, 2): (3, 6), (7, 4, 2): (4, 5)})
    ok = [c for c in check_blocks([block], [honest]) if c.overflow > 0 or not c.passed]
    assert ok == []
    bad = [c for c in check_blocks([block], [cheat]) if not c.passed]
    assert len(bad) == 1
    # Either two flows go undelivered or two more units cross the switch.
    assert bad[0].overflow == pytest.approx(2.0, abs=1e-6)
    T1 = net.steps + 1
    assert {k // T1 for k in bad[0].keys} == {7}


def test_split_network_has_entry_labelled_copies():
    net, _ = crossing_block()
    T1 = net.steps + 1
    g = Graph.build(8, *_links_of(net), np.arange(8) < 7, np.arange(8) < 7)
    split = time_expanded(g, 0, np.array([3, 4, 5, 6]), 4, frozenset({7 * T1 + 2}))
    copies = np.flatnonzero(split.node_label >= 0)
    # Switch 7 at step 2 has two entries, (1, 1) and (2, 1): one copy each.
    assert sorted(split.node_label[copies] // T1) == [1, 2]
    for c in copies:
        ins = split.tail[split.head == c]
        assert ins.size == 1 and split.node_phys[ins[0]] == split.node_label[c] // T1


def _links_of(net):
    src = np.array([0, 0, 1, 2, 7, 7, 3, 3, 4, 4])
    dst = np.array([1, 2, 7, 7, 3, 4, 5, 6, 5, 6])
    return src, dst


@pytest.mark.parametrize("model", ["3.13", "3.14", "exact"])
def test_switch_models_agree_on_switch_topologies(model):
    for spec in ("switch:4", "irregular"):
        topo = cached_topology(spec)
        coll = Collective.on("allgather", topo.npus, M)
        r = fluid_optimum(topo, coll, switch_model=model, secondary=False)
        ref = fluid_optimum(topo, coll, switch_model="exact", steps=r.steps, secondary=False)
        assert r.optimal
        assert r.time_s == pytest.approx(ref.time_s, rel=1e-6)
