"""Fabric cost model: TopoOpt (NSDI'23) Section 5.2, Appendix G and Table 2.

What it prices
--------------
The network only: NICs, transceivers, electrical switch ports, optical patch-panel
ports, optical circuit switch (OCS) ports, 1x2 optical switches and fibre.  Servers,
GPUs, racks, power and labour are not counted (neither does the paper).  Prices come
from a :class:`Catalog`, by default ``topologies/data/components.yaml`` (the paper's
Table 2); :func:`load_catalog` reads a replacement.

Assumptions (each is a reading of Appendix G; where the paper is silent we say so)
----------------------------------------------------------------------------------
1. **Link rates.**  A link of a rate listed in the catalog uses that row.  A slower
   link uses the smallest listed rate above it (you buy the next faster part).  A link
   faster than every listed rate is built from ``ceil(rate / r_max)`` parallel *lanes*
   of the fastest listed rate ``r_max`` -- the paper's own rule for 200 Gbps ("we use
   more 100 Gbps ports and fibers", footnote 4: 200G parts cost 2x 100G), so 400 Gbps
   is two 200 Gbps lanes.  Each lane has its own transceivers, switch ports, optical
   ports and fibres.
2. **NICs.**  A NIC carries ``nic_ports`` links of its row's rate ("we consider two
   2-port NICs as one 4-port NIC"): a server with ``p`` lanes needs
   ``ceil(p / nic_ports)`` NICs.  In the shipped catalog ``nic_ports`` is 2 up to
   100 Gbps and 1 at 200 Gbps, because a 200 Gbps link is two 100 Gbps lanes
   (footnote 4) that take both ports of a 2-port NIC.  This reading is ours; it is
   the one that reproduces the paper's ratios (``experiments/cost/``).
3. **Transceivers and fibre.**  "One transceiver per NIC and switch port": every end
   of every cable has a transceiver; every cable is one fibre run (``fibres_per_link``
   runs per lane: 2 at 200 Gbps).  A fibre costs ``usd_per_m`` times the mean of the
   catalog's length range (the paper draws lengths uniformly from 0-1000 m at $0.30/m,
   i.e. $150 per fibre in expectation; we use the expectation so that costs are
   deterministic).
4. **Fat-tree** (:func:`fattree_cost`).  The paper counts the switch ports of a
   standard k-ary fat-tree ("k = 8 ... 640 switch ports in total, in addition to 1 NIC
   per host and one transceiver per NIC and switch port"): with three tiers every
   tier boundary carries one cable per host, so ``5 n`` switch ports, ``3 n`` cables
   and ``6 n`` transceivers for ``n = k^3/4`` hosts.  The paper does not say how it
   sizes a fat-tree for other ``n``; ``sizing="per_port"`` (default) prices exactly the
   ports the ``n`` hosts use (switch ports are priced per port, Table 2 amortises a
   bare-metal switch over its ports), ``sizing="kary"`` buys the whole smallest k-ary
   fat-tree with ``>= n`` hosts.  Both agree at ``n = k^3/4``.
5. **Oversubscribed fat-tree.**  "Half of the links in the ToR uplink layer are
   omitted" (Section 5.1), read literally: only the edge-to-aggregation cables are
   divided by ``oversub``; the upper tiers stay as in the full tree.
6. **Ideal Switch** (:func:`ideal_switch_cost`): "a full-bisection Fat-tree of the
   same bandwidth", i.e. a fat-tree whose server links carry ``d x B``.
7. **TopoOpt** (:func:`topoopt_cost`): each of the ``n`` servers has ``d``
   interfaces; ``n d`` NIC ports and transceivers, one fibre run per interface to
   the optical layer, and either ``2 n d`` patch-panel ports plus ``n d`` 1x2
   switches (the look-ahead design: 2d patch panels, every interface split into an
   Active and a Look-ahead port, Appendix C) or ``n d`` OCS ports ("d OCSs connected
   to all servers in a flat topology", which is also OCS-reconfig's cost).  We price
   one long fibre run per interface, as the paper counts NICs and transceivers per
   interface (the paper does not count the 1x2 switch's second output; pricing a
   second long run per interface moves the ratios away from the paper's, see
   ``experiments/cost/``).  Optical ports
   do not depend on the link rate ("the cost of optical components stays constant as
   link bandwidth increases").  Ports are priced per port, not per whole panel.
8. **Expander** (:func:`expander_cost`): servers with ``d`` NICs cabled directly to
   each other: ``n d`` NIC ports and transceivers and ``n d / 2`` fibres, no switch.
9. **Any topology** (:func:`topology_cost`): ``ideal`` is priced as (6);
   direct-connect families built from permutations and matchings (``perms``,
   ``direct``, ``topoopt``) as TopoOpt with patch panels (7), per interface: a duplex
   interface sends to one server and receives from another, so a server has
   ``max(out-links, in-links)`` interfaces; everything else by counting the graph:
   every cable (a pair of opposite directed links, or a lone directed link) has a
   transceiver at each end and one fibre run; an NPU end is a NIC port, a switch end
   a switch port; link rates resolve as in (1).  For ``fattree``, ``leafspine`` and
   ``expander`` the graph *is* the fabric the paper prices, and counting it gives the
   closed forms of :func:`fattree_cost` and :func:`expander_cost`.  Links inside a
   server (``node_attrs["server"]``: NVLink, NVSwitch) belong to the server and are
   not priced unless asked (``intra_server=True``); Table 2 has no such parts, so they
   would be priced as network parts of the same rate, a proxy only.

Examples
--------
>>> cat = load_catalog()
>>> fattree_cost(128, 12.5e9, catalog=cat).counts["switch_port"]    # k = 8, 100 Gbps
640
>>> round(topoopt_cost(128, 4, 12.5e9, catalog=cat).total_usd)
416256
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import invalid
from codesign.files import exists
from codesign.specs import check_choice, check_int, check_keys, check_number, get_int, load_yaml
from codesign.units import MAX_BANDWIDTH_BPS, format_bandwidth, parse_bandwidth, parse_money
from topologies.families.clos import MAX_NODES

__all__ = [
    "COMPONENTS", "RatePrices", "Catalog", "CostBreakdown", "load_catalog", "check_catalog",
    "catalog_from_dict",
    "fattree_cost", "ideal_switch_cost", "topoopt_cost", "ocs_reconfig_cost", "expander_cost",
    "cost_equivalent_fattree", "topology_cost", "group_cables", "intra_server_links",
    "CATALOG_NAMES",
]

#: Names :func:`load_catalog` accepts instead of a path: the TopoOpt Table 2 catalog
#: (``components.yaml``) and the 2025-2026 parts catalog (``parts-2026.yaml``,
#: :mod:`topologies.parts`).
CATALOG_NAMES = {"topoopt-2023": "components.yaml", "table2": "components.yaml",
                 "parts-2026": "parts-2026.yaml", "2026": "parts-2026.yaml"}

#: Priced components, in the order breakdowns list them.
COMPONENTS = ("nic", "transceiver", "switch_port", "patch_panel_port", "ocs_port", "switch_1x2",
              "fibre")

#: Per-rate priced components (``fibre`` is priced per metre, not per rate).
_RATE_PRICES = ("transceiver", "nic", "switch_port", "patch_panel_port", "ocs_port", "switch_1x2")
_RATE_KEYS = _RATE_PRICES + ("nic_ports", "fibres_per_link")

#: Relative tolerance when matching a link rate to a catalog rate (12.5e9 B/s == 100 Gbps).
_RATE_RTOL = 1e-9

SIZINGS = ("per_port", "kary")
TECHNOLOGIES = ("patch_panel", "ocs")

#: Families whose links are direct server-to-server circuits set up through an optical
#: layer (TopoOpt's TopologyFinder output and permutation graphs).
_OPTICAL_DIRECT_FAMILIES = ("perms", "direct", "direct_connect", "topoopt")


# ---------------------------------------------------------------------------- catalog
@dataclass(frozen=True)
class RatePrices:
    """Unit prices of the components of one link rate (one row of Table 2).

    Attributes
    ----------
    rate_Bps : float
        Link rate of the row, bytes/s (100 Gbps = 12.5e9).
    transceiver, nic, switch_port, patch_panel_port, ocs_port, switch_1x2 : float
        Unit prices, USD.
    nic_ports : int
        Links of this rate one NIC carries.
    fibres_per_link : int
        Fibre runs per link of this rate.
    """

    rate_Bps: float
    transceiver: float
    nic: float
    switch_port: float
    patch_panel_port: float
    ocs_port: float
    switch_1x2: float
    nic_ports: int = 2
    fibres_per_link: int = 1


@dataclass(frozen=True)
class Catalog:
    """Component prices by link rate plus the fibre cost model.

    Use :func:`load_catalog` to build one from YAML.

    Attributes
    ----------
    rates : tuple of RatePrices
        Rows in ascending rate order, distinct rates.
    fibre_usd_per_m : float
        Fibre price, USD per metre.
    fibre_length_m : tuple of float
        ``(min, max)`` fibre length, metres; lengths are uniform on it, every fibre
        is priced at the mean length.
    description, source : str
        Free text and the file it came from.
    """

    rates: tuple[RatePrices, ...]
    fibre_usd_per_m: float
    fibre_length_m: tuple[float, float]
    description: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if not self.rates:
            raise invalid("catalog rates", self.rates, "at least one link rate")
        values = [r.rate_Bps for r in self.rates]
        if any(b <= a for a, b in zip(values, values[1:])):
            raise invalid("catalog rates", [format_bandwidth(v, bits=True) for v in values],
                          "distinct rates in ascending order")

    @property
    def rates_Bps(self) -> tuple[float, ...]:
        """The listed link rates, bytes/s, ascending."""
        return tuple(r.rate_Bps for r in self.rates)

    @property
    def fibre_usd(self) -> float:
        """Expected price of one fibre run, USD (price per metre times mean length)."""
        lo, hi = self.fibre_length_m
        return self.fibre_usd_per_m * (lo + hi) / 2.0

    def resolve(self, link_rate_Bps: float) -> tuple[RatePrices, int]:
        """The catalog row and number of parallel lanes that realise one link.

        Rule (module docstring, assumption 1): the listed rate itself, else the
        smallest listed rate above it, else ``ceil(rate / r_max)`` lanes of the
        fastest listed rate ``r_max``.

        Parameters
        ----------
        link_rate_Bps : float
            Link rate, bytes/s.

        Returns
        -------
        row : RatePrices
        lanes : int
            Parallel links of ``row.rate_Bps`` per link (1 unless the rate exceeds
            every listed rate).

        Examples
        --------
        >>> cat = load_catalog()
        >>> row, lanes = cat.resolve(50e9)            # 400 Gbps
        >>> row.rate_Bps * 8 / 1e9, lanes
        (200.0, 2)
        """
        rate = _rate(link_rate_Bps, "link rate (bytes/s)")
        for row in self.rates:
            if row.rate_Bps >= rate * (1.0 - _RATE_RTOL):
                return row, 1
        top = self.rates[-1]
        return top, math.ceil(rate / top.rate_Bps * (1.0 - _RATE_RTOL))

    def lanes(self, link_rate_Bps: float) -> int:
        """Parallel lanes that realise one link of ``link_rate_Bps`` (see :meth:`resolve`)."""
        return self.resolve(link_rate_Bps)[1]

    def price(self, component: str, link_rate_Bps: float) -> float:
        """Unit price of ``component`` for a link of ``link_rate_Bps``, USD.

        The price is that of one part of the row chosen by :meth:`resolve`; a link
        that needs several lanes needs :meth:`lanes` such parts.  ``"fibre"`` is the
        expected price of one fibre run and does not depend on the rate.

        Parameters
        ----------
        component : str
            One of :data:`COMPONENTS`.
        link_rate_Bps : float
            Link rate, bytes/s.

        Examples
        --------
        >>> load_catalog().price("switch_port", 12.5e9)   # 100 Gbps
        187.0
        """
        check_choice("component", component, COMPONENTS)
        row, _ = self.resolve(link_rate_Bps)
        if component == "fibre":
            return self.fibre_usd
        return float(getattr(row, component))


def _positive(value: Any, field_: str, maximum: float | None = None) -> float:
    """A finite number > 0 (at most ``maximum``): numbers only ('16' was read as 16 B/s)."""
    return check_number(field_, value, maximum=maximum)


def _rate(value: Any, field_: str) -> float:
    """A link rate, bytes/s, as the topology specs bound it (1e300 priced $3e294)."""
    return _positive(value, field_, MAX_BANDWIDTH_BPS)


def _length(value: Any, field_: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(field_, value, "a length in metres (a number >= 0)")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise invalid(field_, value, "a length in metres (a number >= 0)")
    return v


def catalog_from_dict(spec: Mapping[str, Any], *, source: str = "") -> Catalog:
    """Build a :class:`Catalog` from the YAML structure of ``components.yaml``.

    Parameters
    ----------
    spec : mapping
        ``{"rates": {"100Gbps": {"transceiver": 99, ...}, ...}, "fibre": {"usd_per_m":
        0.3, "length_m": {"min": 0, "max": 1000}}, "description": "..."}``.  Rates are
        bandwidth strings (``codesign.units``); prices are USD (numbers or ``"$1.2k"``);
        ``length_m`` is a number (every fibre that long) or ``{min, max}``.
    source : str, optional
        Where it came from, kept on the catalog.

    Raises
    ------
    InvalidSpecError
        Unknown or missing keys, negative prices, duplicate rates; the message names
        the field.
    """
    where = f"catalog {source}".strip()
    check_keys(spec, allowed=("description", "rates", "fibre"), required=("rates", "fibre"),
               where=where)
    rates_spec = spec["rates"]
    if not isinstance(rates_spec, Mapping) or not rates_spec:
        raise invalid(f"{where} rates", rates_spec,
                      "a non-empty mapping of link rates (e.g. 100Gbps) to component prices")
    rows: dict[float, RatePrices] = {}
    for key, row_spec in rates_spec.items():
        rate = parse_bandwidth(key, field=f"{where} rate")
        row_where = f"{where} rates[{key!r}]"
        check_keys(row_spec, allowed=_RATE_KEYS, required=_RATE_PRICES, where=row_where)
        prices = {name: parse_money(row_spec[name], field=f"{row_where}.{name}")
                  for name in _RATE_PRICES}
        nic_ports = get_int(row_spec, "nic_ports", 2, where=row_where, minimum=1)
        fibres = get_int(row_spec, "fibres_per_link", 1, where=row_where, minimum=1)
        for other in rows:
            if math.isclose(other, rate, rel_tol=_RATE_RTOL):
                raise invalid(f"{where} rate", key, "each link rate listed once")
        rows[rate] = RatePrices(rate, nic_ports=nic_ports, fibres_per_link=fibres, **prices)
    fibre = check_keys(spec["fibre"], allowed=("usd_per_m", "length_m"),
                       required=("usd_per_m", "length_m"), where=f"{where} fibre")
    usd_per_m = parse_money(fibre["usd_per_m"], field=f"{where} fibre.usd_per_m")
    length = fibre["length_m"]
    if isinstance(length, Mapping):
        check_keys(length, allowed=("min", "max"), required=("min", "max"),
                   where=f"{where} fibre.length_m")
        lo = _length(length["min"], f"{where} fibre.length_m.min")
        hi = _length(length["max"], f"{where} fibre.length_m.max")
        if hi < lo:
            raise invalid(f"{where} fibre.length_m", dict(length), "min <= max")
    else:
        lo = hi = _length(length, f"{where} fibre.length_m")
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise invalid(f"{where} description", description, "a string")
    return Catalog(tuple(rows[r] for r in sorted(rows)), usd_per_m, (lo, hi),
                   description=description, source=source)


@lru_cache(maxsize=1)
def _default_catalog() -> Catalog:
    from importlib.resources import as_file, files

    with as_file(files("topologies") / "data" / "components.yaml") as path:
        return catalog_from_dict(load_yaml(path), source="topologies/data/components.yaml")


def check_catalog(value: Any, field: str) -> str:
    """A catalog argument (``whatif --catalog``, a sweep's ``catalog``), checked and loaded.

    Returns
    -------
    str
        The name of :data:`CATALOG_NAMES` as given, or the file's absolute path.

    Raises
    ------
    InvalidSpecError
        Naming ``field``: neither a catalog name nor a file, or a bad catalog file.
    """
    # (a path that exists but is no regular file -- a FIFO, a folder -- gets the safe
    # reader's own reason from load_catalog)
    if not isinstance(value, str) or not value or (
            value not in CATALOG_NAMES and not exists(value)):
        raise invalid(field, value, f"one of {', '.join(CATALOG_NAMES)} or a catalog YAML file")
    if value not in CATALOG_NAMES:
        value = str(Path(value).resolve())
    load_catalog(value)
    return value


def load_catalog(path: str | Path | None = None):
    """Load a component catalog.

    Parameters
    ----------
    path : str or Path, optional
        A YAML file with the structure of ``topologies/data/components.yaml`` (per-rate
        prices, TopoOpt Table 2 style) or of ``topologies/data/parts-2026.yaml`` (a parts
        catalog: switch boxes, optics by reach, power; recognised by its ``switches``
        key); or a name of :data:`CATALOG_NAMES` (``parts-2026``, ``topoopt-2023``).
        ``None`` loads the packaged TopoOpt Table 2.

    Returns
    -------
    Catalog or topologies.parts.PartsCatalog

    Raises
    ------
    InvalidSpecError
        Missing file, bad YAML, unknown or missing key, negative price.
    """
    if path is None:
        return _default_catalog()
    if str(path) in CATALOG_NAMES:
        if CATALOG_NAMES[str(path)] == "components.yaml":
            return _default_catalog()
        from topologies.parts import load_parts_catalog

        return load_parts_catalog()
    spec = load_yaml(path)
    if isinstance(spec, Mapping) and "switches" in spec:
        from topologies.parts import parts_catalog_from_dict

        return parts_catalog_from_dict(spec, source=str(path))
    return catalog_from_dict(spec, source=str(path))


# -------------------------------------------------------------------------- breakdown
@dataclass(frozen=True)
class CostBreakdown:
    """The cost of a fabric and where it goes.

    Attributes
    ----------
    total_usd : float
        Total, USD.
    items : dict of str to float
        USD per component (keys from :data:`COMPONENTS`, only those used).
    counts : dict of str to int
        Units bought per component (NICs, transceivers, ports, 1x2 switches, fibre runs).
    fabric : str
        What was priced (``"fattree"``, ``"topoopt-patch_panel"``, ``"graph"``...).
    notes : tuple of str
        Assumptions worth telling the user (what was left out, how it was modelled).
    power_w : float or None
        Network power, watts, when the catalog has power figures (parts catalogs;
        TopoOpt's Table 2 has none: ``None``).
    """

    total_usd: float
    items: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    fabric: str = ""
    notes: tuple[str, ...] = ()
    power_w: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``cost_usd``, ``power_w``, ``breakdown_usd``, ``counts``,
        ``fabric``, ``notes``."""
        return {"cost_usd": float(self.total_usd),
                "power_w": None if self.power_w is None else float(self.power_w),
                "breakdown_usd": dict(self.items), "counts": dict(self.counts),
                "fabric": self.fabric, "notes": list(self.notes)}


class _Tally:
    """Accumulates component counts and their prices."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.usd: dict[str, float] = {}

    def add(self, component: str, count: int | np.integer, unit_usd: float) -> None:
        count = int(count)
        if count <= 0:
            return
        self.counts[component] = self.counts.get(component, 0) + count
        self.usd[component] = self.usd.get(component, 0.0) + count * float(unit_usd)

    def result(self, fabric: str, notes: tuple[str, ...] = ()) -> CostBreakdown:
        keys = [c for c in COMPONENTS if c in self.counts]
        items = {c: self.usd[c] for c in keys}
        return CostBreakdown(math.fsum(items.values()), items, {c: self.counts[c] for c in keys},
                             fabric, tuple(notes))


def _catalog(catalog: Catalog | None) -> Catalog:
    if catalog is None:
        return _default_catalog()
    if not isinstance(catalog, Catalog):
        raise invalid("catalog", type(catalog).__name__, "a Catalog from load_catalog() or None")
    return catalog


# ---------------------------------------------------------------------- fabric costs
def _kary_hosts(servers: int, tiers: int) -> int:
    """Hosts of the smallest k-ary fat-tree with ``tiers`` tiers and >= ``servers`` hosts."""
    # An L-tier folded Clos of radix-k switches holds 2 (k/2)^L hosts (k^3/4 for L = 3).
    half = 1
    while 2 * half ** tiers < servers:
        half += 1
    return 2 * half ** tiers


def fattree_cost(servers: int, link_rate_Bps: float, *, catalog: Catalog | None = None,
                 oversub: float = 1.0, degree: int = 1, tiers: int = 3,
                 sizing: str = "per_port") -> CostBreakdown:
    """Cost of a (possibly oversubscribed) fat-tree, counted as TopoOpt Appendix G does.

    "A standard k = 8 Fat-tree has 80 switches ..., or 640 switch ports in total, in
    addition to 1 NIC per host and one transceiver per NIC and switch port."  With
    ``L`` tiers and ``N`` fabric hosts (``N = servers`` for ``sizing="per_port"``, the
    host count of the smallest k-ary tree for ``"kary"``): ``servers`` host cables;
    ``ceil(N / oversub)`` edge-to-aggregation cables and ``N`` cables at each higher
    tier boundary; ``N`` edge down-ports plus two switch ports per inter-switch cable;
    a transceiver at both ends of every cable; a fibre run per cable.  Every link has
    rate ``degree * link_rate_Bps`` (the paper's ``d x B``), realised by the catalog
    rule (module docstring, assumption 1).

    Parameters
    ----------
    servers : int
        Hosts (servers), >= 1.
    link_rate_Bps : float
        Link rate ``B``, bytes/s.
    catalog : Catalog, optional
        Prices (default: TopoOpt Table 2).
    oversub : float, optional
        Ratio of edge down- to up-link capacity; 2 is TopoOpt's "Oversub. Fat-tree"
        (half the ToR uplinks omitted).  1 = full bisection.
    degree : int, optional
        Each server link carries ``degree * link_rate_Bps`` (one NIC per server unless
        the link needs more lanes than a NIC has ports).
    tiers : int, optional
        Switch tiers (3 for the k-ary fat-tree, 2 for a leaf-spine, 1 for one switch).
    sizing : {"per_port", "kary"}, optional
        Price the ports the hosts use, or the whole smallest k-ary fat-tree.

    Returns
    -------
    CostBreakdown
        Items ``nic``, ``transceiver``, ``switch_port``, ``fibre``.

    Examples
    --------
    >>> c = fattree_cost(128, 12.5e9)        # k = 8 at 100 Gbps
    >>> c.counts["nic"], c.counts["switch_port"], c.counts["transceiver"], c.counts["fibre"]
    (128, 640, 768, 384)
    """
    cat = _catalog(catalog)
    n = check_int("fattree servers", servers, 1, MAX_NODES)
    d = check_int("fattree degree", degree, 1)
    levels = check_int("fattree tiers", tiers, 1, 5)   # (10 tiers were priced)
    o = _positive(oversub, "fattree oversub")
    check_choice("fattree sizing", sizing, SIZINGS)
    row, lanes = cat.resolve(d * _rate(link_rate_Bps, "fattree link rate (bytes/s)"))
    fabric_hosts = n if sizing == "per_port" else _kary_hosts(n, levels)
    inter = 0
    if levels >= 2:
        inter = math.ceil(fabric_hosts / o * (1.0 - 1e-12)) + (levels - 2) * fabric_hosts
    cables = n + inter
    t = _Tally()
    t.add("nic", n * math.ceil(lanes / row.nic_ports), row.nic)
    t.add("transceiver", (2 * n + 2 * inter) * lanes, row.transceiver)
    t.add("switch_port", (fabric_hosts + 2 * inter) * lanes, row.switch_port)
    t.add("fibre", cables * lanes * row.fibres_per_link, cat.fibre_usd)
    name = "fattree" if o == 1.0 else f"fattree-oversub{o:g}"
    return t.result(name)


def ideal_switch_cost(servers: int, degree: int, link_rate_Bps: float, *,
                      catalog: Catalog | None = None, tiers: int = 3,
                      sizing: str = "per_port") -> CostBreakdown:
    """Cost of TopoOpt's Ideal Switch: a full-bisection fat-tree of ``d x B`` links.

    Section 5.1: "the Ideal Switch can be approximated with a full-bisection
    bandwidth Fat-tree where the bandwidth of each link is d x B"; Section 5.2: "We
    estimate the cost of Ideal Switch with a full-bisection Fat-tree of the same
    bandwidth."  Same counting as :func:`fattree_cost` with ``degree=degree``.

    Parameters
    ----------
    servers : int
        Servers, >= 1.
    degree : int
        Server degree ``d``.
    link_rate_Bps : float
        Per-interface rate ``B``, bytes/s.
    catalog, tiers, sizing
        As for :func:`fattree_cost`.

    Examples
    --------
    >>> c = ideal_switch_cost(128, 4, 12.5e9)   # 400 Gbps server links = 2 x 200 Gbps lanes
    >>> c.counts["switch_port"] == 2 * 640
    True
    """
    c = fattree_cost(servers, link_rate_Bps, catalog=catalog, degree=degree, tiers=tiers,
                     sizing=sizing)
    return CostBreakdown(c.total_usd, c.items, c.counts, "ideal")


def topoopt_cost(servers: int, degree: int, link_rate_Bps: float, *,
                 technology: str = "patch_panel", catalog: Catalog | None = None,
                 lookahead: bool = True) -> CostBreakdown:
    """Cost of a TopoOpt fabric (Appendix G, Appendix C look-ahead design).

    "A TopoOpt system of 128 nodes with degree d uses 128 x d NICs and transceivers,
    but 128 x 2 x d patch panel ports because of the look-ahead design ... We
    calculate the cost of TopoOpt based on 2d patch panels and 1x2 switches at each
    link."  Per server: ``d`` interfaces of rate ``B`` (each ``lanes`` lanes, module
    docstring assumption 1), ``ceil(d*lanes / nic_ports)`` NICs, one transceiver and
    one fibre run per lane; with patch panels two panel ports and one 1x2 switch per
    lane (one panel port and no 1x2 switch when ``lookahead=False``); with OCSs one
    OCS port per lane.

    Parameters
    ----------
    servers : int
        Servers ``n``, >= 1.
    degree : int
        Interfaces per server ``d``, >= 1.
    link_rate_Bps : float
        Interface rate ``B``, bytes/s.
    technology : {"patch_panel", "ocs"}, optional
        Optical layer.
    catalog : Catalog, optional
        Prices (default: TopoOpt Table 2).
    lookahead : bool, optional
        Patch panels only: the Active/Look-ahead design (2d panels and 1x2 switches).

    Returns
    -------
    CostBreakdown
        Items ``nic``, ``transceiver``, ``patch_panel_port`` and ``switch_1x2`` or
        ``ocs_port``, ``fibre``.

    Examples
    --------
    >>> c = topoopt_cost(128, 4, 12.5e9)
    >>> c.counts["nic"], c.counts["transceiver"], c.counts["patch_panel_port"]
    (256, 512, 1024)
    """
    cat = _catalog(catalog)
    n = check_int("topoopt servers", servers, 1, MAX_NODES)
    d = check_int("topoopt degree", degree, 1)
    tech = check_choice("topoopt technology", technology, TECHNOLOGIES)
    if not isinstance(lookahead, bool):
        raise invalid("topoopt lookahead", lookahead, "True or False")
    row, lanes = cat.resolve(_rate(link_rate_Bps, "topoopt link rate (bytes/s)"))
    per_server = d * lanes
    t = _Tally()
    t.add("nic", n * math.ceil(per_server / row.nic_ports), row.nic)
    t.add("transceiver", n * per_server, row.transceiver)
    if tech == "patch_panel":
        t.add("patch_panel_port", n * per_server * (2 if lookahead else 1), row.patch_panel_port)
        if lookahead:
            t.add("switch_1x2", n * per_server, row.switch_1x2)
    else:
        t.add("ocs_port", n * per_server, row.ocs_port)
    t.add("fibre", n * per_server * row.fibres_per_link, cat.fibre_usd)
    return t.result(f"topoopt-{tech}")


def ocs_reconfig_cost(servers: int, degree: int, link_rate_Bps: float, *,
                      catalog: Catalog | None = None) -> CostBreakdown:
    """Cost of the OCS-reconfig baseline: "d OCSs connected to all servers in a flat
    topology" (Appendix G) -- the same parts as :func:`topoopt_cost` with OCSs."""
    c = topoopt_cost(servers, degree, link_rate_Bps, technology="ocs", catalog=catalog)
    return CostBreakdown(c.total_usd, c.items, c.counts, "ocs-reconfig")


def expander_cost(servers: int, degree: int, link_rate_Bps: float, *,
                  catalog: Catalog | None = None) -> CostBreakdown:
    """Cost of the Expander baseline: servers with ``d`` NICs cabled directly.

    Section 5.1: "a fabric where each server has d NICs with bandwidth B
    interconnected via an Expander topology".  ``n d`` NIC ports and transceivers
    (``ceil(d*lanes / nic_ports)`` NICs per server) and ``n d / 2`` cables, each one
    fibre run per lane; no switch.

    Parameters
    ----------
    servers, degree : int
        ``n`` servers of degree ``d``; ``n * d`` must be even (a d-regular graph).
    link_rate_Bps : float
        Link rate, bytes/s.
    catalog : Catalog, optional
        Prices (default: TopoOpt Table 2).

    Examples
    --------
    >>> expander_cost(128, 4, 12.5e9).counts["fibre"]
    256
    """
    cat = _catalog(catalog)
    n = check_int("expander servers", servers, 1, MAX_NODES)
    d = check_int("expander degree", degree, 1)
    if (n * d) % 2:
        raise invalid("expander servers x degree", f"{n} x {d}",
                      "an even product (a d-regular graph on n nodes has n*d/2 cables)")
    row, lanes = cat.resolve(_rate(link_rate_Bps, "expander link rate (bytes/s)"))
    t = _Tally()
    t.add("nic", n * math.ceil(d * lanes / row.nic_ports), row.nic)
    t.add("transceiver", n * d * lanes, row.transceiver)
    t.add("fibre", n * d // 2 * lanes * row.fibres_per_link, cat.fibre_usd)
    return t.result("expander")


def cost_equivalent_fattree(servers: int, budget_usd: float, *, degree: int = 1,
                            catalog: Catalog | None = None, tiers: int = 3,
                            sizing: str = "per_port") -> tuple[float, CostBreakdown]:
    """The full-bisection fat-tree whose cost is closest to a budget.

    TopoOpt's "Fat-tree" baseline (Section 5.1): "each server has one NIC and the
    bandwidth of each link is d x B', where B' is lower than B and is selected such
    that Fat-tree's cost is similar to TopoOpt".  ``B'`` is chosen among the
    catalog's listed rates: the one whose fat-tree cost is closest to
    ``budget_usd`` (the cheaper one on a tie).

    Parameters
    ----------
    servers : int
        Servers, >= 1.
    budget_usd : float
        Target cost, USD (typically ``topoopt_cost(...).total_usd``).
    degree : int, optional
        ``d``: server links carry ``d x B'``.
    catalog, tiers, sizing
        As for :func:`fattree_cost`.

    Returns
    -------
    rate_Bps : float
        ``B'``, bytes/s (server links carry ``degree * B'``).
    cost : CostBreakdown

    Examples
    --------
    >>> rate, c = cost_equivalent_fattree(128, topoopt_cost(128, 4, 12.5e9).total_usd, degree=4)
    >>> rate * 8 / 1e9                      # B' = 25 Gbps: 100 Gbps server links
    25.0
    """
    cat = _catalog(catalog)
    budget = _positive(budget_usd, "budget (USD)")
    options = []
    for rate in cat.rates_Bps:
        c = fattree_cost(servers, rate, catalog=cat, degree=degree, tiers=tiers, sizing=sizing)
        options.append((abs(c.total_usd - budget), c.total_usd, rate, c))
    _, _, rate, cost = min(options, key=lambda o: o[:2])
    return rate, cost


# --------------------------------------------------------------------- any topology
def group_cables(src: np.ndarray, dst: np.ndarray, bw: np.ndarray, n_nodes: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group directed links into cables: ``(u, v, rate_Bps)`` arrays, ``u < v``.

    Between two nodes the ``i``-th fastest link one way and the ``i``-th fastest the
    other way form one cable (rate: the faster of the two); a link without a partner
    (a unidirectional ring) is a cable of its own.
    """
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    bw = np.asarray(bw, dtype=np.float64)
    if src.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    pair = lo * n_nodes + hi
    direction = (src > dst).astype(np.int64)
    order = np.lexsort((-bw, direction, pair))
    group = pair[order] * 2 + direction[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    rank = np.arange(group.size) - np.repeat(starts, np.diff(np.r_[starts, group.size]))
    keys, first, inverse = np.unique(pair[order] * (int(rank.max()) + 1) + rank,
                                     return_index=True, return_inverse=True)
    rate = np.zeros(keys.size)
    np.maximum.at(rate, inverse, bw[order])
    return lo[order][first], hi[order][first], rate


def _resolve_many(cat: Catalog, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Catalog row index and lanes for every entry of ``rates`` (bytes/s)."""
    uniq, inverse = np.unique(rates, return_inverse=True)
    row_idx = np.empty(uniq.size, dtype=np.int64)
    lanes = np.empty(uniq.size, dtype=np.int64)
    for i, r in enumerate(uniq):
        row, n = cat.resolve(float(r))
        row_idx[i] = cat.rates.index(row)
        lanes[i] = n
    return row_idx[inverse], lanes[inverse]


def intra_server_links(topology) -> np.ndarray:
    """Mask of directed links inside one server (``node_attrs["server"]``): both ends
    NPUs of that server, or an NPU and a switch all of whose neighbours are NPUs of that
    same server (an NVSwitch, a PCIe switch)."""
    server = topology.node_attrs.get("server")
    src, dst = topology.src, topology.dst
    if server is None or src.size == 0:
        return np.zeros(src.size, dtype=bool)
    npus, n_nodes = topology.npus, topology.n_nodes
    node_server = np.full(n_nodes, -1, dtype=np.int64)
    node_server[:npus] = np.asarray(server, dtype=np.int64).reshape(npus, -1)[:, 0]
    if topology.switches:
        touch = (src >= npus) | (dst >= npus)
        sw = np.where(src >= npus, src, dst)[touch]
        other = np.where(src >= npus, dst, src)[touch]
        other_server = np.where(other < npus, node_server[other], -1)
        lo = np.full(n_nodes, np.iinfo(np.int64).max)
        hi = np.full(n_nodes, -1, dtype=np.int64)
        np.minimum.at(lo, sw, other_server)
        np.maximum.at(hi, sw, other_server)
        internal = (lo == hi) & (lo >= 0)
        internal[:npus] = False
        node_server[npus:] = -2
        node_server[internal] = lo[internal]
    return (node_server[src] == node_server[dst]) & (node_server[src] >= 0)


def _graph_cost(topology, cat: Catalog, *, optical: str | None,
                intra_server: bool = False) -> CostBreakdown:
    """Count the parts of a topology (module docstring, assumption 9).

    Cables (pairs of opposite directed links) get a transceiver per lane at each end,
    a switch port per lane at each switch end and one fibre run per lane.  With
    ``optical`` (``"patch_panel"`` or ``"ocs"``) the NPU-to-NPU links are circuits
    through that optical layer and are priced per *interface*, as in
    :func:`topoopt_cost`: a duplex interface sends to one server and receives from
    another (a permutation link ``i -> p[i]`` uses one interface at each server), so
    an NPU has ``max(out-links, in-links)`` interfaces per rate, each with a
    transceiver, a fibre run to the optical layer and two panel ports plus a 1x2
    switch (or one OCS port).  NPUs need ``ceil(lanes / nic_ports)`` NICs per rate.
    """
    rows = cat.rates
    n_rows = len(rows)
    npus = topology.npus
    src = topology.src.astype(np.int64)
    dst = topology.dst.astype(np.int64)
    bw = np.asarray(topology.bandwidth, dtype=np.float64)
    notes: list[str] = []
    if not intra_server:
        inside = intra_server_links(topology)
        if inside.any():
            notes.append(f"{int(inside.sum())} directed links inside servers (node_attrs "
                         "'server') are part of the servers and not priced")
            src, dst, bw = src[~inside], dst[~inside], bw[~inside]
    t = _Tally()
    nic_keys: list[np.ndarray] = []     # npu * n_rows + row
    nic_lanes: list[np.ndarray] = []

    def add_per_row(component: str, row_idx: np.ndarray, qty: np.ndarray) -> None:
        totals = np.bincount(row_idx, weights=qty, minlength=n_rows)
        for i in np.flatnonzero(totals):
            unit = cat.fibre_usd if component == "fibre" else getattr(rows[i], component)
            t.add(component, round(totals[i]), unit)

    direct = (src < npus) & (dst < npus) if optical else np.zeros(src.size, dtype=bool)
    if direct.any():
        row_idx, lanes = _resolve_many(cat, bw[direct])
        out = np.bincount(src[direct] * n_rows + row_idx, weights=lanes,
                          minlength=npus * n_rows)
        inn = np.bincount(dst[direct] * n_rows + row_idx, weights=lanes,
                          minlength=npus * n_rows)
        ifaces = np.maximum(out, inn).astype(np.int64)
        key = np.flatnonzero(ifaces)
        n_if, r_if = ifaces[key], key % n_rows
        nic_keys.append(key)
        nic_lanes.append(n_if)
        fpl = np.array([r.fibres_per_link for r in rows], dtype=np.int64)
        add_per_row("transceiver", r_if, n_if)
        add_per_row("fibre", r_if, n_if * fpl[r_if])
        if optical == "patch_panel":
            add_per_row("patch_panel_port", r_if, 2 * n_if)
            add_per_row("switch_1x2", r_if, n_if)
        else:
            add_per_row("ocs_port", r_if, n_if)
    rest = ~direct
    u, v, rate = group_cables(src[rest], dst[rest], bw[rest], topology.n_nodes)
    if u.size:
        row_idx, lanes = _resolve_many(cat, rate)
        fpl = np.array([rows[i].fibres_per_link for i in row_idx], dtype=np.int64)
        switch_ends = (u >= npus).astype(np.int64) + (v >= npus)
        add_per_row("transceiver", row_idx, 2 * lanes)
        add_per_row("switch_port", row_idx, switch_ends * lanes)
        add_per_row("fibre", row_idx, lanes * fpl)
        for end in (u, v):
            at_npu = end < npus
            nic_keys.append(end[at_npu] * n_rows + row_idx[at_npu])
            nic_lanes.append(lanes[at_npu])
    if nic_keys:
        keys, inverse = np.unique(np.concatenate(nic_keys), return_inverse=True)
        per = np.bincount(inverse, weights=np.concatenate(nic_lanes)).astype(np.int64)
        row_of = keys % n_rows
        ports = np.array([r.nic_ports for r in rows], dtype=np.int64)[row_of]
        add_per_row("nic", row_of, -(-per // ports))
    return t.result(f"graph-{optical}" if optical else "graph", tuple(notes))


def topology_cost(topology, *, catalog: Catalog | None = None,
                  intra_server: bool = False, server_gpus: int = 0) -> CostBreakdown:
    """Cost of the fabric a topology stands for (module docstring, assumption 9).

    * ``ideal`` (TopoOpt's Ideal Switch, params ``degree`` and ``link_bandwidth_Bps``):
      :func:`ideal_switch_cost` -- one big switch is not buildable, the paper prices
      it as a full-bisection fat-tree of ``d x B`` links.
    * ``perms`` / ``direct`` / ``topoopt`` (direct-connect graphs from permutations
      and matchings, TopologyFinder's output): the circuits are set up through patch
      panels with the look-ahead design (``params["technology"] = "ocs"`` selects
      OCSs), priced per server interface as in :func:`topoopt_cost`.
    * anything else (``fattree``, ``leafspine``, ``expander``, rings, tori, DGX...):
      the graph's cables are counted.  Links inside a server (``node_attrs["server"]``:
      NVLink, NVSwitch) are part of the server and not priced unless
      ``intra_server=True``; Table 2 has no such parts, so they would be priced as
      network parts of the same rate.

    Parameters
    ----------
    topology : Topology
        Any topology.
    catalog : Catalog or topologies.parts.PartsCatalog, optional
        Prices (default: TopoOpt Table 2).  A parts catalog (``load_catalog("parts-2026")``)
        prices switch boxes, optics by reach class, NICs, OCS ports and NVLink trays and
        reports ``power_w`` (:func:`topologies.parts.parts_cost`).
    intra_server : bool, optional
        Also price the links inside servers (Table 2 catalogs only).
    server_gpus : int, optional
        GPUs of one server as the caller prices servers: a parts catalog does not price
        the NVLink switch trays of a scale-up domain of at most this many GPUs (a GB200
        NVL72 rack comes with its own; :func:`topologies.parts.parts_cost`).  Table 2
        catalogs never price scale-up links (they are inside servers).

    Returns
    -------
    CostBreakdown

    Examples
    --------
    >>> from topologies.families.multidim import ring
    >>> topology_cost(ring(4, bandwidth=12.5e9)).counts
    {'nic': 4, 'transceiver': 8, 'fibre': 4}

    Complexity: O(L log L) for L directed links.
    """
    from topologies.parts import PartsCatalog, parts_cost

    if isinstance(catalog, PartsCatalog):
        return parts_cost(topology, catalog, server_gpus=server_gpus)
    cat = _catalog(catalog)
    if not isinstance(intra_server, bool):
        raise invalid("intra_server", intra_server, "True or False")
    family = getattr(topology, "family", "custom")
    params = getattr(topology, "params", {}) or {}
    if family == "ideal":
        degree = params.get("degree")
        rate = params.get("link_bandwidth_Bps")
        if degree is None or rate is None:
            # Without the family's parameters: one cable of d x B per server.
            degree, rate = 1, float(topology.bandwidth.max())
        c = ideal_switch_cost(topology.npus, int(degree), float(rate), catalog=cat)
        note = (f"Ideal Switch priced as a full-bisection 3-tier fat-tree of "
                f"{format_bandwidth(int(degree) * float(rate), bits=True)} server links "
                "(TopoOpt Section 5.2)")
        return CostBreakdown(c.total_usd, c.items, c.counts, c.fabric, (note,))
    if family in _OPTICAL_DIRECT_FAMILIES:
        tech = params.get("technology", "patch_panel")
        check_choice(f"{family} technology", tech, TECHNOLOGIES)
        return _graph_cost(topology, cat, optical=tech, intra_server=intra_server)
    return _graph_cost(topology, cat, optical=None, intra_server=intra_server)
