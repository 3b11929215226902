"""Pricing any topology from a parts catalog: switches by radix and speed, optics by reach.

The TopoOpt catalog (:mod:`topologies.cost`, ``components.yaml``) prices per switch port
and per link rate, as the paper's Table 2 does.  A buyer in 2026 prices boxes: a
51.2 Tb/s switch as 64 x 800G or 128 x 400G ports, transceivers by reach class, NICs
per card, OCS ports, NVLink switch trays -- and wants the network's power beside its
price.  This module prices any :class:`~topologies.model.Topology` from such a
catalog (``topologies/data/parts-2026.yaml`` ships, with its sources and date).

How the graph is priced (:func:`parts_cost`)
--------------------------------------------
1. **Cables.**  Directed links are paired into cables (:func:`topologies.cost.group_cables`).
   A cable faster than every listed optic rate is ``ceil(rate / r_max)`` parallel lanes;
   a slower one uses the smallest listed rate above it.
2. **Reach class** of a cable: by the highest Clos level it touches
   (``reach_by_level``: 1 = endpoint-leaf, 2 = leaf-spine, 3 = spine-core; levels from
   ``params["switch_levels"]``, else a switch's hop distance from the nearest NPU);
   endpoint-to-endpoint cables are ``direct`` (copper: torus/ICI inside a cube) or
   ``optical`` (circuits through an OCS: ``tpu`` links between cubes and wrap-arounds,
   :func:`topologies.families.tpu.optical_mask`; direct-connect families ``perms``,
   ``direct``, ``topoopt``).  ``dac``/``aoc`` classes are one part per cable (an AOC's
   power covers both ends); ``dr``/``fr`` are one transceiver per cable end plus a fibre
   run; ``optical`` adds one OCS port per end.
3. **Switches.**  Each switch node needs as many ports as cable lanes end at it; it buys
   the cheapest ``units x model`` (``units = ceil(ports x k / model ports)``, a link
   taking ``k = ceil(rate / port rate)`` ports of a slower model; a switch node too big
   for one box is a chassis of several, a proxy noted in the result).  Links inside a
   server (``node_attrs["server"]``: PCIe switches) are part of the server.
4. **NICs.**  An NPU's network bandwidth (all its cable lanes) is carried by cards of
   the smallest listed NIC rate that holds it, or several of the fastest.  TPU chips
   have their ICI ports on the chip: no NICs.
5. **Scale-up domains** (``params["scaleup_switches"]``): the crossbar of a domain of
   ``G`` GPUs of per-GPU bandwidth ``b`` is ``ceil(G ceil(b / link_rate) / ports)``
   NVLink switch trays (GB200 NVL72: 72 x 18 / 144 = 9); domains of at most
   ``included_up_to_gpus`` GPUs are on the server baseboard and not priced, nor are
   domains of at most ``server_gpus`` GPUs when the caller prices servers of that many
   GPUs itself (a GB200 NVL72 rack's price includes its 9 trays).
6. **Power** (watts): switch models, transceivers / AOCs, NIC cards, OCS ports, trays.

Examples
--------
>>> from topologies.registry import from_spec
>>> c = parts_cost(from_spec("railopt:128,gpus=8,bw=400Gbps"), load_parts_catalog())
>>> c.counts["switch"], c.counts["transceiver"], c.counts["nic"]
(48, 4096, 1024)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_keys, load_yaml
from codesign.units import parse_bandwidth, parse_money

__all__ = ["PARTS", "REACH_CLASSES", "SwitchModel", "Optic", "PartsCatalog",
           "parts_catalog_from_dict", "load_parts_catalog", "parts_cost", "node_levels"]

#: Priced parts, in the order breakdowns list them.
PARTS = ("switch", "nic", "transceiver", "dac", "aoc", "ocs_port", "nvlink_switch_tray", "fibre")
#: Reach classes of the optics table.
REACH_CLASSES = ("dac", "aoc", "dr", "fr")
_RTOL = 1e-9
_OPTICAL_DIRECT_FAMILIES = ("perms", "direct", "direct_connect", "topoopt")


@dataclass(frozen=True)
class SwitchModel:
    """A switch box: ``ports`` ports of ``port_rate_Bps``; price USD, power W."""

    name: str
    port_rate_Bps: float
    ports: int
    usd: float
    power_w: float


@dataclass(frozen=True)
class Optic:
    """A transceiver (per cable end) or a DAC/AOC (per cable): USD, W, reach in metres."""

    usd: float
    power_w: float
    reach_m: float


@dataclass(frozen=True)
class PartsCatalog:
    """Parts with prices and power (module docstring); build with :func:`load_parts_catalog`."""

    switches: tuple[SwitchModel, ...]
    optics: Mapping[float, Mapping[str, Optic]]
    reach_by_level: Mapping[Any, str]
    nics: Mapping[float, tuple[float, float, int]]   # rate -> (usd, power_w, ports)
    ocs_usd_per_port: float
    ocs_power_w_per_port: float
    tray_ports: int
    tray_link_Bps: float
    tray_usd: float
    tray_power_w: float
    tray_included_up_to: int
    fibre_usd_per_m: float
    fibre_length_m: Mapping[str, float]
    description: str = ""
    date: str = ""
    source: str = ""

    def resolve(self, rate_Bps: float, table: Mapping[float, Any]) -> tuple[float, int]:
        """Listed rate and lanes realising a link of ``rate_Bps`` (smallest listed rate
        above it, else lanes of the fastest)."""
        rates = sorted(table)
        for r in rates:
            if r >= rate_Bps * (1 - _RTOL):
                return r, 1
        return rates[-1], math.ceil(rate_Bps / rates[-1] * (1 - _RTOL))

    def reach(self, level: Any) -> str:
        """Reach class of a cable at ``level`` (an int, ``"direct"`` or ``"optical"``)."""
        if level in self.reach_by_level:
            return self.reach_by_level[level]
        ints = [k for k in self.reach_by_level if isinstance(k, int)]
        return self.reach_by_level[max(ints)]


def _num(value: Any, field: str) -> float:
    return parse_money(value, field=field)


def parts_catalog_from_dict(spec: Mapping[str, Any], *, source: str = "") -> PartsCatalog:
    """Build a :class:`PartsCatalog` from the YAML structure of ``parts-2026.yaml``.

    Raises
    ------
    InvalidSpecError
        Unknown or missing keys, bad numbers; the message names the field.
    """
    where = f"parts catalog {source}".strip()
    check_keys(spec, allowed=("description", "date", "switches", "optics", "reach_by_level",
                              "nics", "ocs", "nvlink_switch_tray", "fibre"),
               required=("switches", "optics", "reach_by_level", "nics", "ocs",
                         "nvlink_switch_tray", "fibre"), where=where)
    if not isinstance(spec["switches"], list) or not spec["switches"]:
        raise invalid(f"{where} switches", spec["switches"], "a non-empty list of switch models")
    switches = []
    for i, s in enumerate(spec["switches"]):
        w = f"{where} switches[{i}]"
        check_keys(s, allowed=("name", "port_rate", "ports", "usd", "power_w"),
                   required=("port_rate", "ports", "usd", "power_w"), where=w)
        ports = s["ports"]
        if isinstance(ports, bool) or not isinstance(ports, int) or ports < 1:
            raise invalid(f"{w}.ports", ports, "an integer >= 1")
        switches.append(SwitchModel(str(s.get("name", f"switch {i}")),
                                    parse_bandwidth(s["port_rate"], field=f"{w}.port_rate"),
                                    ports, _num(s["usd"], f"{w}.usd"),
                                    _num(s["power_w"], f"{w}.power_w")))
    optics: dict[float, dict[str, Optic]] = {}
    for key, row in spec["optics"].items():
        rate = parse_bandwidth(key, field=f"{where} optics rate")
        w = f"{where} optics[{key!r}]"
        check_keys(row, allowed=REACH_CLASSES, required=REACH_CLASSES, where=w)
        optics[rate] = {}
        for cls in REACH_CLASSES:
            o = row[cls]
            check_keys(o, allowed=("usd", "power_w", "reach_m"), required=("usd", "power_w"),
                       where=f"{w}.{cls}")
            optics[rate][cls] = Optic(_num(o["usd"], f"{w}.{cls}.usd"),
                                      _num(o["power_w"], f"{w}.{cls}.power_w"),
                                      float(o.get("reach_m", 0)))
    reach: dict[Any, str] = {}
    for key, cls in spec["reach_by_level"].items():
        k = key if key in ("direct", "optical") else int(key)
        if cls not in REACH_CLASSES:
            raise invalid(f"{where} reach_by_level[{key!r}]", cls, f"one of {REACH_CLASSES}")
        reach[k] = cls
    for needed in ("direct", "optical", 1):
        if needed not in reach:
            raise invalid(f"{where} reach_by_level", sorted(map(str, reach)),
                          "entries for direct, optical and level 1")
    nics = {}
    for key, row in spec["nics"].items():
        w = f"{where} nics[{key!r}]"
        check_keys(row, allowed=("usd", "power_w", "ports"), required=("usd", "power_w"), where=w)
        nics[parse_bandwidth(key, field=f"{where} nics rate")] = (
            _num(row["usd"], f"{w}.usd"), _num(row["power_w"], f"{w}.power_w"),
            int(row.get("ports", 1)))
    ocs = check_keys(spec["ocs"], allowed=("usd_per_port", "power_w_per_port"),
                     required=("usd_per_port", "power_w_per_port"), where=f"{where} ocs")
    tray = check_keys(spec["nvlink_switch_tray"],
                      allowed=("ports", "link_rate", "usd", "power_w", "included_up_to_gpus"),
                      required=("ports", "link_rate", "usd", "power_w"),
                      where=f"{where} nvlink_switch_tray")
    fibre = check_keys(spec["fibre"], allowed=("usd_per_m", "length_m"),
                       required=("usd_per_m", "length_m"), where=f"{where} fibre")
    return PartsCatalog(
        tuple(switches), optics, reach, nics,
        _num(ocs["usd_per_port"], f"{where} ocs.usd_per_port"),
        _num(ocs["power_w_per_port"], f"{where} ocs.power_w_per_port"),
        int(tray["ports"]), parse_bandwidth(tray["link_rate"], field=f"{where} tray link_rate"),
        _num(tray["usd"], f"{where} tray usd"), _num(tray["power_w"], f"{where} tray power_w"),
        int(tray.get("included_up_to_gpus", 0)),
        _num(fibre["usd_per_m"], f"{where} fibre.usd_per_m"),
        {str(k): float(v) for k, v in dict(fibre["length_m"]).items()},
        str(spec.get("description", "")), str(spec.get("date", "")), source)


@lru_cache(maxsize=1)
def _default() -> PartsCatalog:
    from importlib.resources import as_file, files

    with as_file(files("topologies") / "data" / "parts-2026.yaml") as path:
        return parts_catalog_from_dict(load_yaml(path), source="topologies/data/parts-2026.yaml")


def load_parts_catalog(path: str | Path | None = None) -> PartsCatalog:
    """Load a parts catalog (default: the shipped ``parts-2026.yaml``)."""
    if path is None:
        return _default()
    return parts_catalog_from_dict(load_yaml(path), source=str(path))


# ------------------------------------------------------------------------- pricing
def node_levels(topology) -> np.ndarray:
    """Clos level of every node: 0 for NPUs, ``params["switch_levels"]`` for Clos
    switches, else a switch's hop distance from the nearest NPU (-1 if none)."""
    n = topology.n_nodes
    level = np.full(n, -1, dtype=np.int64)
    level[:topology.npus] = 0
    if "switch_levels" in topology.params:
        for i, (first, count) in enumerate(topology.params["switch_levels"]):
            level[first:first + count] = i + 1
        return level
    src, dst = topology.src, topology.dst
    frontier = np.zeros(n, dtype=bool)
    frontier[:topology.npus] = True
    d = 0
    while frontier.any():
        d += 1
        reach = np.zeros(n, dtype=bool)
        reach[dst[frontier[src]]] = True
        new = reach & (level < 0)
        level[new] = d
        frontier = new
    return level


class _Tally:
    def __init__(self) -> None:
        self.usd: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.power_w = 0.0

    def add(self, part: str, count: float, usd: float, power_w: float) -> None:
        count = int(round(count))
        if count <= 0:
            return
        self.count[part] = self.count.get(part, 0) + count
        self.usd[part] = self.usd.get(part, 0.0) + count * usd
        self.power_w += count * power_w


def parts_cost(topology, catalog: PartsCatalog | None = None, *, server_gpus: int = 0):
    """Price and power of ``topology`` from a parts catalog (module docstring).

    Parameters
    ----------
    topology : Topology
        Any topology.
    catalog : PartsCatalog, optional
        Default ``parts-2026``.
    server_gpus : int, optional
        GPUs of one server as the caller prices servers (``Hardware.gpus_per_server``):
        a scale-up domain of at most this many GPUs comes with the server and its
        NVLink switch trays are not priced again (0: only the catalog's
        ``included_up_to_gpus``).

    Returns
    -------
    topologies.cost.CostBreakdown
        ``items``/``counts`` over :data:`PARTS`, ``power_w`` set, ``fabric="parts"``.

    Complexity: O(L log L) for L directed links.
    """
    from topologies.cost import group_cables, intra_server_links

    cat = _default() if catalog is None else catalog
    if not isinstance(cat, PartsCatalog):
        raise invalid("parts catalog", type(cat).__name__, "a PartsCatalog")
    npus, n_nodes = topology.npus, topology.n_nodes
    src, dst = topology.src.astype(np.int64), topology.dst.astype(np.int64)
    bw = np.asarray(topology.bandwidth, dtype=np.float64)
    t = _Tally()
    notes: list[str] = []
    # Scale-up crossbars: priced as NVLink switch trays, their links carry no optics.
    crossbar = np.zeros(n_nodes, dtype=bool)
    if "scaleup_switches" in topology.params:
        first, count = topology.params["scaleup_switches"]
        crossbar[first:first + count] = True
        to_x = crossbar[dst]
        gpus = np.bincount(dst[to_x] - first, minlength=count)
        fastest = np.zeros(count)
        np.maximum.at(fastest, dst[to_x] - first, bw[to_x])
        included = max(cat.tray_included_up_to, int(server_gpus))
        big = gpus > included
        if big.any():
            per_gpu = np.ceil(fastest[big] / cat.tray_link_Bps * (1 - _RTOL))
            trays = np.ceil(gpus[big] * per_gpu / cat.tray_ports)
            t.add("nvlink_switch_tray", float(trays.sum()), cat.tray_usd, cat.tray_power_w)
        if topology.params.get("scaleup_size", 0) <= cat.tray_included_up_to:
            notes.append(f"scale-up domains of <= {cat.tray_included_up_to} GPUs are on the "
                         "server baseboard (not priced)")
        elif topology.params.get("scaleup_size", 0) <= included:
            notes.append(f"scale-up domains of <= {included} GPUs come with the servers "
                         "(their NVLink switch trays are in the server price)")
    keep = ~(crossbar[src] | crossbar[dst])
    inside = intra_server_links(topology) & keep
    if inside.any():   # PCIe or other in-box switching: part of the server
        notes.append(f"{int(inside.sum())} directed links inside servers are part of the "
                     "servers and not priced")
        keep &= ~inside
    u, v, rate = group_cables(src[keep], dst[keep], bw[keep], n_nodes)
    if u.size == 0:   # no cables (one NVLink domain, nvl:72): the trays are the network
        return _breakdown(t, notes)
    level = node_levels(topology)
    both_npu = (u < npus) & (v < npus)
    optical = np.zeros(u.size, dtype=bool)
    family = topology.family
    if family == "tpu":
        from topologies.families.tpu import optical_pairs

        optical[both_npu] = optical_pairs(topology, u[both_npu], v[both_npu])
    elif family in _OPTICAL_DIRECT_FAMILIES:
        optical = both_npu.copy()
    cable_level = np.maximum(level[u], level[v])
    rows = {}
    for r in np.unique(rate):
        rows[float(r)] = cat.resolve(float(r), cat.optics)
    row_rate = np.array([rows[float(r)][0] for r in rate])
    lanes = np.array([rows[float(r)][1] for r in rate], dtype=np.int64)
    # Optics and fibre, per reach class and listed rate.
    cls_of = np.empty(u.size, dtype=object)
    cls_of[both_npu & optical] = "optical"
    cls_of[both_npu & ~optical] = "direct"
    for lv in np.unique(cable_level[~both_npu]):
        sel = ~both_npu & (cable_level == lv)
        cls_of[sel] = int(lv)
    for key in set(cls_of.tolist()):
        reach = cat.reach(key)
        sel = cls_of == key
        for r in np.unique(row_rate[sel]):
            s2 = sel & (row_rate == r)
            n_lanes = int(lanes[s2].sum())
            optic = cat.optics[float(r)][reach]
            if reach in ("dac", "aoc"):
                t.add(reach, n_lanes, optic.usd, optic.power_w)
            else:
                t.add("transceiver", 2 * n_lanes, optic.usd, optic.power_w)
                metres = cat.fibre_length_m.get("optical" if key == "optical" else reach, 0.0)
                t.add("fibre", n_lanes, cat.fibre_usd_per_m * metres, 0.0)
            if key == "optical":
                t.add("ocs_port", 2 * n_lanes, cat.ocs_usd_per_port, cat.ocs_power_w_per_port)
    # Switch boxes.
    ends = np.concatenate([u, v])
    end_rate = np.concatenate([row_rate, row_rate])
    end_lanes = np.concatenate([lanes, lanes])
    at_sw = ends >= npus
    big = False
    if at_sw.any():
        rates_sw = np.unique(end_rate[at_sw])
        inner_optic = {m: _inner_optic(cat, m) for m in cat.switches}   # per model, once
        for r in rates_sw:
            s = at_sw & (end_rate == r)
            ports = np.bincount(ends[s], weights=end_lanes[s], minlength=n_nodes)[npus:]
            ports = ports[ports > 0].astype(np.int64)
            # A link faster than a model's ports takes several of them (a 1.6T link on
            # 800G ports uses two).
            per_link = {m: max(1, math.ceil(r / m.port_rate_Bps * (1 - _RTOL)))
                        for m in cat.switches}
            for p, n_sw in zip(*np.unique(ports, return_counts=True)):
                lanes = {m: int(p) * per_link[m] for m in cat.switches}
                best = min(cat.switches, key=lambda m: (
                    _node_usd(lanes[m], m, inner_optic[m]), m.power_w))
                units, inner = _switch_node(lanes[best], best)
                part, each, optic, fibre = inner_optic[best]
                big |= units > 1
                t.add("switch", units * n_sw, best.usd, best.power_w)
                if inner:
                    t.add(part, each * inner * n_sw, optic.usd, optic.power_w)
                    if fibre:
                        t.add("fibre", inner * n_sw, fibre, 0.0)
    if big:
        notes.append("a switch node with more ports than any model is priced as a "
                     "non-blocking Clos of that model's boxes and their inner links (TopoOpt "
                     "Sec. 5.2 prices its Ideal Switch as the full-bisection fat-tree)")
    # NICs (not for TPU chips: ICI is on the chip): an NPU's network bandwidth in cards of
    # the smallest listed NIC rate that carries it (a 4 x 200G multi-plane endpoint is one
    # 800G card with four ports), or several of the fastest.
    if family != "tpu":
        at_npu = ~at_sw
        total = np.bincount(ends[at_npu], weights=(end_rate * end_lanes)[at_npu],
                            minlength=npus)[:npus]
        for value, n_npu in zip(*np.unique(total[total > 0], return_counts=True)):
            nic_rate, cards = cat.resolve(float(value), cat.nics)
            usd, power, _ = cat.nics[nic_rate]
            t.add("nic", cards * n_npu, usd, power)
    return _breakdown(t, notes)


def _switch_node(ports: int, model: SwitchModel) -> tuple[int, int]:
    """Boxes of ``model`` and inner links (lanes) that switch ``ports`` lanes without
    blocking.

    One box when they fit.  Otherwise the node stands for a non-blocking folded Clos
    of the model (one switch that large is not built: TopoOpt Sec. 5.1-5.2 approximates
    its Ideal Switch by, and prices it as, the full-bisection fat-tree of the same
    bandwidth): the fewest tiers ``t`` whose ``2 (R/2)^t`` ports hold them, ``t - 1``
    tiers of ``ceil(ports / (R/2))`` boxes (half their ports down, half up), a top tier
    of ``ceil(ports / R)``, and ``(t - 1) x ports`` links between the tiers.

    Examples
    --------
    >>> from topologies.parts import load_parts_catalog
    >>> box = load_parts_catalog().switches[1]        # 64 x 800G
    >>> _switch_node(64, box), _switch_node(100, box), _switch_node(4096, box)
    ((1, 0), (6, 100), (320, 8192))
    """
    radix = model.ports
    if ports <= radix:
        return 1, 0
    if radix < 4:   # a box of 2 or 3 ports makes no Clos (it would never grow): boxes alone
        return math.ceil(ports / radix), 0
    half = radix // 2
    tiers = 2
    while 2 * half ** tiers < ports:
        tiers += 1
    return ((tiers - 1) * math.ceil(ports / half) + math.ceil(ports / radix),
            (tiers - 1) * ports)


def _node_usd(ports: int, model: SwitchModel, inner_optic: tuple[str, int, Optic, float]
              ) -> float:
    """Price of a switch node of ``ports`` lanes built from ``model`` boxes: the boxes
    and the inner links' optics and fibre (:func:`_switch_node`, :func:`_inner_optic`)."""
    units, inner = _switch_node(ports, model)
    _, each, optic, fibre = inner_optic
    return units * model.usd + inner * (each * optic.usd + fibre)


def _inner_optic(cat: PartsCatalog, model: SwitchModel) -> tuple[str, int, Optic, float]:
    """How one inner link of a Clos of ``model`` boxes (:func:`_switch_node`) is cabled:
    a switch-to-switch cable at the model's port rate, of the reach the catalog gives
    tier-2 cables -- ``(part, parts per link, optic, fibre USD per link)``."""
    rate = cat.resolve(model.port_rate_Bps, cat.optics)[0]
    reach = cat.reach(2)
    optic = cat.optics[rate][reach]
    if reach in ("dac", "aoc"):    # one part per cable, no fibre
        return reach, 1, optic, 0.0
    return "transceiver", 2, optic, cat.fibre_usd_per_m * cat.fibre_length_m.get(reach, 0.0)


def _breakdown(t: _Tally, notes: list[str]):
    """The tallied parts as a :class:`topologies.cost.CostBreakdown` (USD and counts per
    part)."""
    from topologies.cost import CostBreakdown

    keys = [p for p in PARTS if p in t.count]
    items = {k: t.usd[k] for k in keys}
    return CostBreakdown(math.fsum(items.values()), items, {k: t.count[k] for k in keys},
                         "parts", tuple(notes), power_w=t.power_w)
