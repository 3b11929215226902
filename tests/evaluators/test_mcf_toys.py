"""The toy examples of thesis Chapter 2, with the values the text derives.

Bandwidths are 1 GB/s per link direction and the broadcast moves M = 1 GB,
so times are in units of M / b = 1 s.
"""

import pytest

from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topologies.builder import LinkBuilder

B = 1e9
M = 1e9


def star(gpus, memory_bw=None):
    """``gpus`` NPUs cabled to one hub node (id ``gpus``): host memory or a switch."""
    lb = LinkBuilder(gpus, 1)
    lb.cable(list(range(gpus)), [gpus] * gpus, B, 0.0)
    topo = lb.build(name=f"star{gpus}")
    groups = [(list(range(topo.n_links)), memory_bw)] if memory_bw else []
    return topo, groups


def test_path_broadcast_fluid_saturates_both_links():
    # Figure 2.1: broadcast along 1 -> 2 -> 3.  "In an optimal fluid solution,
    # both the link from 1 to 2 and the link from 2 to 3 should be fully
    # saturated at all times": time M/b, each link carries M once.
    lb = LinkBuilder(3)
    lb.cable([0, 1], [1, 2], B, 0.0)
    r = fluid_optimum(lb.build(), Collective("broadcast", (0, 1, 2), M, root=0))
    assert r.optimal and r.steps == 2
    assert r.time_s == pytest.approx(M / B, rel=1e-9)
    assert r.secondary_cost_bytes == pytest.approx(2 * M, rel=1e-6)


def test_path_broadcast_heterogeneous_bottleneck():
    lb = LinkBuilder(4)
    lb.cable([0, 1, 2], [1, 2, 3], [B, 0.25 * B, 2 * B], 0.0)
    r = fluid_optimum(lb.build(), Collective("broadcast", (0, 1, 2, 3), M, root=0))
    assert r.time_s == pytest.approx(M / (0.25 * B), rel=1e-9)


def test_shared_memory_copies_save_writes():
    # Figure 2.2: three GPUs on a host memory, broadcast from GPU 1.  With the
    # memory modelled (it stores and copies) GPU 1 writes once and both others
    # read: time M/b, 3M moved through GPU links.  Treated as a switch the
    # data must be written twice (1 -> mem -> 2 -> mem -> 3): same fluid time
    # but 4M ("our second algorithm requires writing less data to memory").
    topo, _ = star(3)
    coll = Collective("broadcast", (0, 1, 2), M, root=0)
    mem = fluid_optimum(topo, coll, memory_nodes=(3,))
    sw = fluid_optimum(topo, coll)
    assert mem.optimal and sw.optimal
    assert mem.time_s == pytest.approx(M / B, rel=1e-6)
    assert sw.time_s == pytest.approx(M / B, rel=1e-6)
    assert mem.secondary_cost_bytes == pytest.approx(3 * M, rel=1e-6)
    assert sw.secondary_cost_bytes == pytest.approx(4 * M, rel=1e-6)
    # As a switch the relay through GPU 2 takes 4 steps, as a memory 2.
    assert (mem.steps, sw.steps) == (2, 4)


@pytest.mark.parametrize("y", [3e9, 5e9, 8e9])
def test_memory_bandwidth_memory_vs_switch(y):
    # Figure 2.3: four GPUs on a host memory with links x = b and memory
    # bandwidth y (all reads and writes together).  Memory treated as a switch
    # needs 3 writes and 3 reads per byte: throughput min(x, y/6).  Modelled
    # as memory (copies) one write and three reads: min(x, y/4).
    topo, groups = star(4, memory_bw=y)
    coll = Collective("broadcast", (0, 1, 2, 3), M, root=0)
    sw = fluid_optimum(topo, coll, link_groups=groups)
    mem = fluid_optimum(topo, coll, link_groups=groups, memory_nodes=(4,))
    assert sw.optimal and mem.optimal
    assert sw.time_s == pytest.approx(M / min(B, y / 6), rel=1e-6)
    assert mem.time_s == pytest.approx(M / min(B, y / 4), rel=1e-6)


def test_memory_as_gpu_halves_throughput():
    # Figure 2.7 as we read it: GPU 1 reaches GPU 2 and the memory over two
    # links that share GPU 1's bandwidth b.  Requiring the data at the memory
    # (memory as a GPU) uses both links at b/2; the optimum with memory as a
    # non-mandatory copying node just uses the link to GPU 2, throughput b.
    lb = LinkBuilder(2, 1)
    lb.cable([0, 0], [1, 2], B, 0.0)
    topo = lb.build()
    out_of_0 = [int(i) for i in topo.out_links(0)]
    r = fluid_optimum(topo, Collective("broadcast", (0, 1), M, root=0), memory_nodes=(2,),
                      link_groups=[(out_of_0, B)])
    assert r.time_s == pytest.approx(M / B, rel=1e-6)
    lb = LinkBuilder(3)
    lb.cable([0, 0], [1, 2], B, 0.0)
    topo = lb.build()
    out_of_0 = [int(i) for i in topo.out_links(0)]
    r = fluid_optimum(topo, Collective("broadcast", (0, 1, 2), M, root=0),
                      link_groups=[(out_of_0, B)])
    assert r.time_s == pytest.approx(2 * M / B, rel=1e-6)


def test_memory_cannot_reduce():
    # Reversal (thesis Sec. 3.2): memory copies but does not reduce, so in a
    # reduce into GPU 0 over the Figure 2.2 star the memory behaves like a
    # switch: GPU 0 must download one sum, but the two contributions cannot be
    # combined at the memory, so one GPU adds the other's first.
    topo, _ = star(3)
    coll = Collective("reduce", (0, 1, 2), M, root=0)
    r = fluid_optimum(topo, coll, memory_nodes=(3,))
    assert r.time_s == pytest.approx(M / B, rel=1e-6)
    # 2 -> mem -> 1 (adds) -> mem -> 0: four GPU-link transfers, not three.
    assert r.secondary_cost_bytes == pytest.approx(4 * M, rel=1e-6)
    bc = fluid_optimum(topo, Collective("broadcast", (0, 1, 2), M, root=0), memory_nodes=(3,))
    assert bc.secondary_cost_bytes == pytest.approx(3 * M, rel=1e-6)
