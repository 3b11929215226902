"""Lower bounds vs closed forms derived by hand (evaluators.bounds).

B is the bandwidth of one directed link, M the collective size, N the NPU count.
"""

import pytest

from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from topologies.families.multidim import fully_connected, hypercube, ring, switch, torus, uniring

B = 2.5e9
M = 3.0e8
REL = 1e-12


def bound(topo, kind, size=M, **kw):
    return lower_bound(topo, Collective.on(kind, topo.npus, size, **kw))


# Allgather closed forms.  Each is the ingress bound (N-1)M/N / in(v); the
# comment says why no cut does better.
CASES = [
    # ring:N, in(v) = 2B.  A set S missing t: an arc leaves through 2 links, so
    # |S|/cap <= (N-1)/2B, reached by S = all but t.
    ("ring8", ring(8, bandwidth=B, latency=0.0), 8, 2 * B),
    ("ring5", ring(5, bandwidth=B, latency=0.0), 5, 2 * B),
    # uniring: one link out of any arc, |S| <= N-1.
    ("uniring6", uniring(6, bandwidth=B, latency=0.0), 6, B),
    # torus 4x4: in(v) = 4B -> 15/(4B) = 3.75/B; half torus: 8 / (8 links B) = 1/B;
    # all but two neighbours: 14 / (6B) = 2.33/B.  Ingress binds.
    ("torus4x4", torus([4, 4], bandwidth=B, latency=0.0), 16, 4 * B),
    # torus 4x4x4: in(v) = 6B -> 63/(6B) = 10.5/B; half: 32/(32B) = 1/B.
    ("torus4x4x4", torus([4, 4, 4], bandwidth=B, latency=0.0), 64, 6 * B),
    # hypercube d: in(v) = dB; a subcube of 2^(d-1) has 2^(d-1) links out -> 1/B.
    ("hypercube4", hypercube(4, bandwidth=B, latency=0.0), 16, 4 * B),
    ("hypercube3", hypercube(3, bandwidth=B, latency=0.0), 8, 3 * B),
    # switch:N: S = switch + all but t leaves through the downlink to t: (N-1)/B.
    ("switch6", switch(6, bandwidth=B, latency=0.0), 6, B),
    # fc:N: in(v) = (N-1)B, T = M/(N B); |S| = k leaves through k(N-k) links.
    ("fc5", fully_connected(5, bandwidth=B, latency=0.0), 5, 4 * B),
]


@pytest.mark.parametrize("name,topo,n,ingress", CASES, ids=[c[0] for c in CASES])
def test_allgather_reducescatter_allreduce_closed_forms(name, topo, n, ingress):
    ag_expected = (n - 1) * M / (n * ingress)
    ag = bound(topo, "allgather")
    assert ag.time_s == pytest.approx(ag_expected, rel=REL)
    assert ag.components["cut"] == pytest.approx(ag_expected, rel=REL)
    assert ag.exact
    rs = bound(topo, "reducescatter")
    assert rs.time_s == pytest.approx(ag_expected, rel=REL)
    assert rs.components["cut"] == pytest.approx(ag_expected, rel=REL)
    # allreduce = reduce-scatter + allgather on these uniform networks.
    ar = bound(topo, "allreduce")
    assert ar.time_s == pytest.approx(2 * ag_expected, rel=REL)
    assert ar.exact


def test_specific_numbers():
    # The brief's formulas written out with numbers.
    n = 8
    assert bound(ring(n, bandwidth=B, latency=0), "allgather").time_s == \
        pytest.approx(7 * M / (8 * 2 * B), rel=REL)
    assert bound(hypercube(3, bandwidth=B, latency=0), "allgather").time_s == \
        pytest.approx(7 * M / (8 * 3 * B), rel=REL)
    assert bound(switch(n, bandwidth=B, latency=0), "allgather").time_s == \
        pytest.approx(7 * M / (8 * B), rel=REL)
    assert bound(fully_connected(n, bandwidth=B, latency=0), "allgather").time_s == \
        pytest.approx(M / (8 * B), rel=REL)


def test_cut_binds_on_a_mesh_line():
    # mesh:6 is a line; in(end) = B gives 5/6 M/B; a half line {0,1,2} leaves
    # through one link: 3 * M/6 / B = M/(2B) < 5M/(6B).  Allgather is ingress-bound,
    # but the alltoall cut is |S||P-S|/cap = 9/B * M/6 = 1.5 M/B.
    from topologies.families.multidim import mesh

    line = mesh([6], bandwidth=B, latency=0.0)
    ag = bound(line, "allgather")
    assert ag.time_s == pytest.approx(5 * M / (6 * B), rel=REL)
    a2a = bound(line, "alltoall")
    assert a2a.components["cut"] == pytest.approx(1.5 * M / B, rel=REL)
    assert a2a.binding == "cut" and a2a.exact
    assert a2a.cut_nodes in ((0, 1, 2), (3, 4, 5))


def test_alltoall_closed_forms():
    # ring:8: an arc of a nodes leaves through 2 links: a(8-a)/(2B), max 16/(2B) = 8/B;
    # T = (M/8) * 8/B = M/B.  Hop volume: 8 * (1+1+2+2+3+3+4) = 128 block-hops over
    # 16 links: (M/8) * 128 / (16B) = M/B as well.
    r8 = bound(ring(8, bandwidth=B, latency=0.0), "alltoall")
    assert r8.components["cut"] == pytest.approx(M / B, rel=REL)
    assert r8.components["volume"] == pytest.approx(M / B, rel=REL)
    assert r8.exact
    # switch:N: every NPU receives (N-1) blocks over one downlink.
    s6 = bound(switch(6, bandwidth=B, latency=0.0), "alltoall")
    assert s6.time_s == pytest.approx(5 * M / (6 * B), rel=REL)
    assert s6.components["cut"] == pytest.approx(5 * M / (6 * B), rel=REL)
    # fc:N: one block per link.
    f5 = bound(fully_connected(5, bandwidth=B, latency=0.0), "alltoall")
    assert f5.time_s == pytest.approx(M / (5 * B), rel=REL)


def test_rooted_closed_forms():
    r = ring(6, bandwidth=B, latency=0.0)
    # broadcast: every NPU receives M over in(v) = 2B; max-flow(root, v) = 2B.
    bc = bound(r, "broadcast")
    assert bc.time_s == pytest.approx(M / (2 * B), rel=REL)
    assert bc.components["cut"] == pytest.approx(M / (2 * B), rel=REL)
    assert bound(r, "reduce").time_s == pytest.approx(M / (2 * B), rel=REL)
    # scatter: the root sends 5 shards over 2B.
    sc = bound(r, "scatter")
    assert sc.time_s == pytest.approx(5 * M / (6 * 2 * B), rel=REL)
    assert bound(r, "gather").time_s == pytest.approx(5 * M / (6 * 2 * B), rel=REL)
    # uniring: the farthest node is still fed at B.
    u = uniring(5, bandwidth=B, latency=0.0)
    assert bound(u, "broadcast").components["cut"] == pytest.approx(M / B, rel=REL)


def test_latency_component():
    lat = 1e-6
    r = ring(8, bandwidth=B, latency=lat)
    b = bound(r, "allgather", size=1.0)  # tiny size: latency binds
    assert b.components["latency"] == pytest.approx(4 * lat, rel=REL)
    assert b.binding == "latency" and b.time_s == pytest.approx(4 * lat, rel=REL)
    # uniring: 0 must reach 7, seven hops.
    u = uniring(8, bandwidth=B, latency=lat)
    assert bound(u, "allgather", size=1.0).components["latency"] == pytest.approx(7 * lat)
    # broadcast from root 3 on uniring:8: the farthest is 2, seven hops away.
    b = lower_bound(u, Collective.on("broadcast", 8, 1.0, root=3))
    assert b.components["latency"] == pytest.approx(7 * lat)
    # switch: two hops.
    assert bound(switch(4, bandwidth=B, latency=lat), "alltoall", size=1.0) \
        .components["latency"] == pytest.approx(2 * lat)


def test_subset_of_npus():
    # Allgather among NPUs {0, 4} of ring:8: each receives M/2 over 2B -> M/(4B);
    # the cut {0} and its relays can still use both directions around the ring.
    r = ring(8, bandwidth=B, latency=0.0)
    b = lower_bound(r, Collective("allgather", (0, 4), M))
    assert b.time_s == pytest.approx(M / (4 * B), rel=REL)
    assert b.exact
    # Alltoall between the two ends of a line: the only path has one link each way.
    from topologies.families.multidim import mesh

    line = mesh([5], bandwidth=B, latency=0.0)
    b = lower_bound(line, Collective("alltoall", (0, 4), M))
    assert b.components["cut"] == pytest.approx(M / 2 / B, rel=REL)


def test_to_dict_and_algbw():
    b = bound(ring(4, bandwidth=B, latency=0.0), "allgather")
    d = b.to_dict()
    assert d["time_s"] == b.time_s and d["exact"] is True
    assert d["binding"] in d["components_s"]
    assert d["components_s"][d["binding"]] == b.time_s
    assert isinstance(d["cut_nodes"], list)
    assert b.algbw_Bps == pytest.approx(M / b.time_s)
    import json

    json.dumps(d)
