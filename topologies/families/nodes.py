"""Vendor GPU boxes: DGX-1 (V100), and multi-node DGX-A100 / HGX-H100 with rail networks.

DGX-1 (V100)
------------
Eight V100s in NVIDIA's "hybrid cube-mesh": a cube whose corners are GPUs,
all twelve edges wired, plus the diagonals of two opposite faces; each V100
has six NVLink 2 ports of 25 GB/s per direction, so eight of the sixteen
connected pairs have two NVLinks (:data:`DGX1_NVLINKS`).  The pair list and
GPU numbering are the ones ``nvidia-smi topo -m`` reports on DGX-1V class
machines (GPU0: NV1 to GPU1 and GPU2, NV2 to GPU3 and GPU4); the two NVLinks of
a pair are modelled as two parallel links, so there are 24 cables = 48
directed NVLinks.  (Some V100 boxes, e.g. the Azure NDv2 matrix published
with TACCL, put the double links on other pairs of the same 16; the two
multigraphs are isomorphic, only the GPU numbering differs.)

Multi-node DGX-A100 / HGX-H100
------------------------------
Per node: 8 GPUs and the NVSwitch fabric, modelled as **one switch node per
node** with a cable of the GPU's full NVLink bandwidth to each GPU (A100: 12
NVLink 3 x 25 GB/s = 300 GB/s per direction; H100: 18 NVLink 4 = 450 GB/s).
Between nodes: one NIC per GPU (A100: 200 Gb/s HDR InfiniBand; H100: 400 Gb/s
NDR) cabled to a *rail* switch; rail ``r`` joins GPU ``r`` of every node (one
switch per rail, the "rail-optimised" multi-rail fabric).  This is the
structure of the MCF thesis' evaluation (``optimal-collectives-mcf-thesis``,
Chapter 6 and 6.1: "the first GPU from every node is connected to a common
switch, the second GPU from every node is connected to a second common switch
and so on"), in the variant the thesis calls "only using NVLink" inside a
node: the thesis also models PCIe, CPU and memory vertices ("no NVLink" and
"all links" variants route intra-node traffic through them), which we do not.
With ``nodes == 1`` no rail switch is built (a rail with one GPU carries no
traffic), so the topology is the single NVSwitch star.

Ids: GPU ``g`` of node ``n`` is NPU ``8n + g``; NVSwitch of node ``n`` is
``N + n``; rail switch ``r`` is ``N + nodes + r``.
``node_attrs``: ``server`` (node index) and ``rail`` (local GPU index).

Which links (``links=`` key; the thesis' three scenarios of Sec. 6.1)
---------------------------------------------------------------------
* ``links=nvlink`` (default, the thesis' "only using NVLink"): the model
  above -- NVSwitch inside a node, each GPU's NIC cabled to its rail.
* ``links=nic`` ("completely ignoring NVLink"): no NVSwitch.  GPUs talk
  through the **PCIe host fabric** of the box: DGX-A100 has four PCIe
  switches, each serving two GPUs and their two NICs, under the CPUs.  We
  model, per node, PCIe switch ``p`` with a PCIe 4.0 x16 cable
  (:data:`A100_PCIE_BW`, 32 GB/s per direction) to GPUs ``2p`` and ``2p+1``
  and one to a *host* switch (the CPUs' root complexes as one routing node:
  we have no CPU or memory vertices, which the thesis' model has), and the
  NICs of GPUs ``2p``, ``2p+1`` hang off PCIe switch ``p`` (cables to rails
  ``2p``, ``2p+1`` at the NIC bandwidth).  So every byte a GPU sends or
  receives crosses its 32 GB/s PCIe link, as in the thesis (its "no NVLink"
  latencies are ``(N - 1) / 32 GB/s`` per GB of shard from 2 nodes on).
* ``links=all``: both -- NVSwitch, and the PCIe fabric with the NICs behind
  the PCIe switches (a GPU reaches its NIC only through PCIe).

Extra ids for ``nic``/``all``: after the NVSwitches (``all`` only) and rails
come the PCIe switches (``4 nodes``, node-major) and the host switches
(``nodes``).
"""

from __future__ import annotations

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_choice, check_int
from codesign.units import BARE_BANDWIDTH_BPS, BARE_LATENCY_S, parse_bandwidth, parse_time
from topologies.builder import LinkBuilder
from topologies.families.clos import MAX_NODES, check_link, spec_name
from topologies.families.options import no_shape, parse_int
from topologies.model import Topology
from topologies.registry import register_family

__all__ = ["dgx1", "dgx_a100", "hgx_h100", "rail_bisection_bandwidth", "DGX1_NVLINKS",
           "GPUS_PER_NODE", "LINK_SETS"]

#: GPUs per DGX/HGX node.
GPUS_PER_NODE = 8

#: DGX-1 (V100) NVLink wiring: ``(gpu_a, gpu_b, nvlinks)``; 24 NVLinks, 6 per GPU.
DGX1_NVLINKS: tuple[tuple[int, int, int], ...] = (
    (0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2),
    (1, 2, 2), (1, 3, 1), (1, 5, 2),
    (2, 3, 2), (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1), (4, 6, 1), (4, 7, 2),
    (5, 6, 2), (5, 7, 1),
    (6, 7, 2),
)

#: Per-link NVLink 2 bandwidth of a V100, bytes/s per direction.
V100_NVLINK_BW = 25e9
#: Default link latency of the vendor boxes, seconds.
DEFAULT_LATENCY = 1e-6
#: Per-GPU NVLink bandwidth to the NVSwitch fabric and per-GPU NIC bandwidth, bytes/s.
A100_NVLINK_BW, A100_NIC_BW = 300e9, 200e9 / 8
H100_NVLINK_BW, H100_NIC_BW = 450e9, 400e9 / 8
#: PCIe link bandwidth per direction (A100: 4.0 x16; H100: 5.0 x16), bytes/s.
A100_PCIE_BW, H100_PCIE_BW = 32e9, 64e9
#: Values of the ``links`` key (module docstring).
LINK_SETS = ("nvlink", "nic", "all")
#: GPUs per PCIe switch.
GPUS_PER_PCIE_SWITCH = 2


def dgx1(*, nvlink_bandwidth: float = V100_NVLINK_BW, latency: float = DEFAULT_LATENCY,
         name: str = "") -> Topology:
    """DGX-1 with eight V100s in the hybrid cube-mesh (see module docstring).

    Parameters
    ----------
    nvlink_bandwidth : float, optional
        Bandwidth of one NVLink, bytes/s per direction (V100: 25 GB/s).
    latency : float, optional
        Seconds per NVLink.
    name : str, optional
        Display name (default ``"dgx1"``).

    Returns
    -------
    Topology
        8 NPUs, no switches, 48 directed links (a pair with two NVLinks has
        two parallel links each way); diameter 2.  ``params``:
        ``nvlinks_per_gpu`` (6), ``nvlink_bandwidth_Bps``.

    Examples
    --------
    >>> t = dgx1()
    >>> t.n_links, t.diameter, float(t.injection_bandwidth()[0]) / 25e9
    (48, 2, 6.0)
    """
    bw, lat = check_link(nvlink_bandwidth, latency, "dgx1")
    b = LinkBuilder(GPUS_PER_NODE)
    pairs = np.array(DGX1_NVLINKS, dtype=np.int64)
    for count in (1, 2):
        sel = pairs[pairs[:, 2] == count]
        b.cable(sel[:, 0], sel[:, 1], bw, lat, count=count)
    return b.build(name=name or "dgx1", family="dgx1",
                   params={"nvlinks_per_gpu": 6, "nvlink_bandwidth_Bps": bw},
                   node_attrs={"server": np.zeros(GPUS_PER_NODE, dtype=np.int64)})


#: Largest node count for which :func:`rail_bisection_bandwidth` runs when a
#: topology is built (its cost grows as nodes^3).
RAIL_BISECTION_MAX_NODES = 256


def rail_bisection_bandwidth(nodes: int, nvlink_bandwidth: float, nic_bandwidth: float,
                             gpus_per_node: int = GPUS_PER_NODE) -> float:
    """Exact bisection bandwidth of the NVSwitch + rail fabric, bytes/s.

    Same definition as :meth:`topologies.model.Topology.bisection_bandwidth`
    (fewest bytes/s crossing a balanced split of the GPUs, switches placed
    freely), computed without enumerating splits:

    1. Every link joins a GPU and a switch, so each switch can be placed on its
       own: a switch with ``x`` neighbours on one side and ``y`` on the other
       adds ``min(x, y)`` links to the cut.  With ``a_n`` GPUs of node ``n`` and
       ``c_r`` GPUs of rail ``r`` on side S the cut is
       ``B_nv * sum_n min(a_n, G - a_n) + B_nic * sum_r min(c_r, M - c_r)``.
    2. For fixed node counts ``a_n`` the rail term is a sum of concave
       functions of the column sums, minimised at the column-sum vector that
       majorises every other feasible one (Gale-Ryser), i.e. node ``n`` puts its
       S-side GPUs on rails ``0 .. a_n - 1``: ``c_r = #{n : a_n > r}``.
    3. A dynamic programme over the histogram of the ``a_n`` (values ``G`` down
       to 0; state = nodes and GPUs assigned so far) then finds the optimum in
       ``O(G * M^3)`` array operations.

    The result was checked against enumeration of all splits for 2 and 3 nodes.

    Parameters
    ----------
    nodes : int
        Number of nodes ``M``.
    nvlink_bandwidth, nic_bandwidth : float
        Per-GPU NVSwitch and NIC link bandwidth, bytes/s per direction.
    gpus_per_node : int, optional
        ``G`` (8).

    Returns
    -------
    float
        Bytes/s.  One node: ``G/2 * nvlink_bandwidth``; two nodes:
        ``G * min(nic, nvlink)``.
    """
    m, g = int(nodes), int(gpus_per_node)
    half = (m * g) // 2
    cost = np.full((m + 1, half + 1), np.inf)
    cost[0, 0] = 0.0
    ks = np.arange(m + 1)
    rail_cost = nic_bandwidth * np.minimum(ks, m - ks)
    for j in range(g, -1, -1):
        new = np.full_like(cost, np.inf)
        node_cost = nvlink_bandwidth * min(j, g - j)
        for h in range(m + 1):
            shift = h * j
            if shift > half:
                break
            cand = cost[: m + 1 - h, : half + 1 - shift] + h * node_cost
            np.minimum(new[h:, shift:], cand, out=new[h:, shift:])
        if j >= 1:
            # After placing every node with a_n >= j, k of them sit on rail j-1's S side.
            new += rail_cost[:, None]
        cost = new
    return float(cost[m, half])


def _rail_nodes(nodes: int, nvlink_bandwidth: float, nic_bandwidth: float, latency: float,
                nic_latency: float | None, family: str, name: str, links: str = "nvlink",
                pcie_bandwidth: float = A100_PCIE_BW) -> Topology:
    nodes = check_int(f"{family} nodes", nodes, 1)
    check_choice(f"{family} links", links, LINK_SETS)
    nv_bw, nv_lat = check_link(nvlink_bandwidth, latency, f"{family} nvlink")
    nic_bw, nic_lat = check_link(nic_bandwidth, latency if nic_latency is None else nic_latency,
                                  f"{family} nic")
    pcie_bw, pcie_lat = check_link(pcie_bandwidth, latency, f"{family} pcie")
    n = nodes * GPUS_PER_NODE
    rails = GPUS_PER_NODE if nodes > 1 else 0
    nvs = nodes if links != "nic" else 0
    n_pcie = nodes * GPUS_PER_NODE // GPUS_PER_PCIE_SWITCH if links != "nvlink" else 0
    hosts = nodes if links != "nvlink" else 0
    n_sw = nvs + rails + n_pcie + hosts
    if n + n_sw > MAX_NODES:
        raise invalid(f"{family} nodes", nodes, f"at most {MAX_NODES // (GPUS_PER_NODE + 1)}")
    b = LinkBuilder(n, n_sw)
    gpus = np.arange(n)
    server, local = gpus // GPUS_PER_NODE, gpus % GPUS_PER_NODE
    if nvs:
        b.cable(gpus, n + server, nv_bw, nv_lat)
    rail0 = n + nvs
    if links == "nvlink":
        if rails:
            b.cable(gpus, rail0 + local, nic_bw, nic_lat)
    else:
        pcie0 = rail0 + rails
        host0 = pcie0 + n_pcie
        sw = pcie0 + gpus // GPUS_PER_PCIE_SWITCH          # PCIe switch of each GPU
        b.cable(gpus, sw, pcie_bw, pcie_lat)
        ps = np.arange(n_pcie)
        b.cable(pcie0 + ps, host0 + ps // (GPUS_PER_NODE // GPUS_PER_PCIE_SWITCH), pcie_bw,
                pcie_lat)
        if rails:   # the NIC of GPU g sits on g's PCIe switch
            b.cable(sw, rail0 + local, nic_bw, nic_lat)
    params = {"nodes": nodes, "gpus_per_node": GPUS_PER_NODE, "rails": rails,
              "nvlink_bandwidth_Bps": nv_bw, "nic_bandwidth_Bps": nic_bw, "links": links}
    if links != "nvlink":
        params["pcie_bandwidth_Bps"] = pcie_bw
    if nvs:   # the NVSwitch of each node is its scale-up domain (topologies.families.scaleup)
        params.update({"scaleup_switches": [n, nvs], "scaleup_size": GPUS_PER_NODE})
    if links == "nvlink" and nodes <= RAIL_BISECTION_MAX_NODES:
        params["bisection_Bps"] = rail_bisection_bandwidth(nodes, nv_bw, nic_bw)
    return b.build(name=name or f"{family}:{nodes}", family=family, params=params,
                   node_attrs={"server": server, "rail": local})


def dgx_a100(nodes: int = 1, *, nvswitch_bandwidth: float = A100_NVLINK_BW,
             nic_bandwidth: float = A100_NIC_BW, latency: float = DEFAULT_LATENCY,
             nic_latency: float | None = None, name: str = "", links: str = "nvlink",
             pcie_bandwidth: float = A100_PCIE_BW) -> Topology:
    """``nodes`` DGX-A100 boxes on a rail-optimised network (see module docstring).

    Parameters
    ----------
    nodes : int, optional
        Number of DGX-A100 nodes, >= 1.
    nvswitch_bandwidth : float, optional
        Each GPU's NVLink bandwidth to its node's NVSwitch, bytes/s per
        direction (A100: 300 GB/s).
    nic_bandwidth : float, optional
        Each GPU's NIC bandwidth to its rail switch, bytes/s per direction
        (HDR 200 Gb/s = 25 GB/s).
    latency : float, optional
        Seconds per NVLink hop (and per NIC hop unless ``nic_latency``).
    nic_latency : float, optional
        Seconds per NIC/rail link.
    name : str, optional
        Display name.
    links : {"nvlink", "nic", "all"}, optional
        Which links exist (module docstring): NVSwitch + NICs on the GPUs
        (default), the PCIe host fabric with the NICs behind it and no
        NVSwitch, or both.
    pcie_bandwidth : float, optional
        PCIe link bandwidth, bytes/s per direction (``links`` nic/all).

    Returns
    -------
    Topology
        With the default ``links``: ``8*nodes`` NPUs; ``nodes`` NVSwitch nodes plus 8 rail switches when
        ``nodes > 1``; ``16*nodes`` directed NVSwitch links plus ``16*nodes``
        directed NIC links when ``nodes > 1``; diameter 2 for one node, 4
        otherwise (GPU, NVSwitch, GPU, rail, GPU).

    Examples
    --------
    >>> t = dgx_a100(2)
    >>> t.npus, t.switches, t.n_links, t.diameter
    (16, 10, 64, 4)
    """
    return _rail_nodes(nodes, nvswitch_bandwidth, nic_bandwidth, latency, nic_latency,
                       "dgx-a100", name, links, pcie_bandwidth)


def hgx_h100(nodes: int = 1, *, nvswitch_bandwidth: float = H100_NVLINK_BW,
             nic_bandwidth: float = H100_NIC_BW, latency: float = DEFAULT_LATENCY,
             nic_latency: float | None = None, name: str = "", links: str = "nvlink",
             pcie_bandwidth: float = H100_PCIE_BW) -> Topology:
    """``nodes`` HGX-H100 boxes: as :func:`dgx_a100` with NVLink 4 (450 GB/s), NDR 400 Gb/s
    and PCIe 5.0 x16 (64 GB/s)."""
    return _rail_nodes(nodes, nvswitch_bandwidth, nic_bandwidth, latency, nic_latency,
                       "hgx-h100", name, links, pcie_bandwidth)


# ---------------------------------------------------------------- spec strings
def _latencies(options, family: str) -> tuple[float, float | None]:
    """``lat=`` takes one value or ``NVLINK:NIC``."""
    if "lat" not in options:
        return DEFAULT_LATENCY, None
    parts = options["lat"].split(":")
    if len(parts) not in (1, 2):
        raise invalid(f"{family} lat", options["lat"], "one time or NVLINK:NIC, e.g. 1us:2us")
    values = [parse_time(p, field=f"{family} lat", bare=BARE_LATENCY_S) for p in parts]
    return values[0], (values[1] if len(values) == 2 else None)


@register_family("dgx1", keys=("nvlink", "lat"), shape="", example="dgx1",
                 summary="DGX-1 V100 hybrid cube-mesh, NVLink counts per GPU pair")
def _dgx1_spec(shape, options):
    no_shape(shape, "dgx1", "no shape: dgx1[,nvlink=25GB/s][,lat=1us]")
    bw = parse_bandwidth(options["nvlink"], field="dgx1 nvlink", bare=BARE_BANDWIDTH_BPS) \
        if "nvlink" in options \
        else V100_NVLINK_BW
    lat, nic_lat = _latencies(options, "dgx1")
    if nic_lat is not None:
        raise invalid("dgx1 lat", options["lat"], "a single time (DGX-1 has only NVLinks)")
    return dgx1(nvlink_bandwidth=bw, latency=lat, name=spec_name("dgx1", shape, options))


def _rail_spec(family: str, builder, nv_default: float, nic_default: float):
    def build(shape, options):
        nodes = parse_int(shape, f"{family} nodes", minimum=1) if shape else 1
        nv = parse_bandwidth(options["nvlink"], field=f"{family} nvlink", bare=BARE_BANDWIDTH_BPS) \
            if "nvlink" in options else nv_default
        nic = parse_bandwidth(options["nic"], field=f"{family} nic", bare=BARE_BANDWIDTH_BPS) \
            if "nic" in options else nic_default
        lat, nic_lat = _latencies(options, family)
        links = options.get("links", "nvlink")
        return builder(nodes, nvswitch_bandwidth=nv, nic_bandwidth=nic, latency=lat,
                       nic_latency=nic_lat, name=spec_name(family, shape, options), links=links)
    return build


register_family("dgx-a100", keys=("nvlink", "nic", "lat", "links"), shape="NODES",
                example="dgx-a100:2",
                summary="DGX-A100 nodes: NVSwitch per node, 8 rails of 200Gbps NICs")(
    _rail_spec("dgx-a100", dgx_a100, A100_NVLINK_BW, A100_NIC_BW))
register_family("hgx-h100", keys=("nvlink", "nic", "lat", "links"), shape="NODES",
                example="hgx-h100:2",
                summary="HGX-H100 nodes: NVSwitch per node, 8 rails of 400Gbps NICs")(
    _rail_spec("hgx-h100", hgx_h100, H100_NVLINK_BW, H100_NIC_BW))
