"""Clos fabrics as GPU clusters are bought today, for any number of servers.

* ``fattree:servers=N,radix=R[,oversub=O][,tiers=T]`` -- a partially populated
  fat tree of radix-``R`` switches (:func:`clos_fattree`); ``fattree:k=K`` stays the
  complete k-ary tree of :func:`topologies.families.clos.fattree`.
* ``railopt:N[,gpus=G,radix=R,oversub=O,tiers=T]`` -- a rail-optimised Clos
  (:func:`railopt`): ``N`` servers of ``G`` GPUs, one NIC per GPU; NIC ``i`` of every
  server of a leaf group goes to the group's leaf ``i`` (rail ``i``), so same-rank
  GPUs are one leaf apart (NVIDIA DGX SuperPOD reference architectures; NCCL keeps
  most traffic on its rail).
* ``multiplane:N,planes=P[,radix=R,...]`` -- ``P`` independent Clos planes, each
  NIC port on its own plane (:func:`multiplane`).

All three are partially populated XGFTs (:mod:`topologies.families.xgft`): leaves
with ``R O/(1+O)`` endpoint ports and ``R/(1+O)`` uplinks, full bisection above the
leaves, the fewest tiers that hold the endpoints (or ``tiers=``), only the switches
that have endpoints below them, and upper-level switches merged where a partially
filled top would leave ports idle.  Every family takes ``scaleup=G`` (``G``
consecutive NPUs share an NVLink crossbar, :mod:`topologies.families.scaleup`) of
``scaleup_bw=`` per GPU; left out, it is the GPU's NVLink where a GPU is given (the
iteration model, :func:`topologies.families.scaleup.with_gpu_scaleup`), NVLink 4
(450 GB/s) otherwise.

Rail layout of :func:`railopt`: GPU ``g`` of server ``s`` is NPU ``s G + g`` and sits
in XGFT slot ``g S' + s`` (``S'`` = servers rounded up to whole leaves for 2 tiers,
to whole pods for 3 or more), so every leaf -- and with 3 tiers every pod -- holds
one rail: same-rank GPUs meet below the top tier ("rail-aligned pods"), other
traffic crosses the top tier or, in NCCL, moves to the right GPU over NVLink first.
When whole pods per rail do not fit the tiers, rails are aligned to leaves only (pods
mix rails), and as a last resort packed densely (leaves mix rails); the fewest tiers
win.
"""

from __future__ import annotations

import math

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from topologies.builder import LinkBuilder
from topologies.families.clos import oversub_ratio, spec_name
from topologies.families.options import (
    DEFAULT_BW, DEFAULT_LAT, bandwidth_option, latency_option, parse_float, parse_int,
)
from topologies.families.scaleup import (
    NVLINK4_GPU_BW, SCALEUP_KEYS, add_scaleup, mark_default_scaleup, scaleup_options,
)
from topologies.families.xgft import Xgft, fattree_shape, xgft_links
from topologies.model import Topology
from topologies.registry import register_family

__all__ = ["clos_fattree", "railopt", "multiplane", "path_stats", "MAX_ENDPOINTS",
           "DEFAULT_RADIX"]

#: Largest endpoint count of the sized Clos families (docs/architecture.md section 6: Clos
#: families for any size, up to 100,000 servers; with 8 GPUs per server that is 800,000 GPU
#: endpoints).
MAX_ENDPOINTS = 1_000_000
#: Default switch radix: a 51.2 Tb/s switch as 64 x 800G ports.
DEFAULT_RADIX = 64


def _endpoints(n: int, family: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise invalid(f"{family} endpoints", n, "an integer >= 2")
    if n > MAX_ENDPOINTS:
        raise invalid(f"{family} endpoints", n, f"at most {MAX_ENDPOINTS:,}")
    return int(n)


def _link(bandwidth, latency, family):
    bw, lat = float(bandwidth), float(latency)
    if not math.isfinite(bw) or bw <= 0:
        raise invalid(f"{family} bw", bandwidth, "a finite bandwidth > 0 bytes/s")
    if not math.isfinite(lat) or lat < 0:
        raise invalid(f"{family} lat", latency, "a finite latency >= 0 s")
    return bw, lat


def path_stats(slots: np.ndarray, shape: Xgft) -> tuple[int, float]:
    """Closed-form diameter and mean hop count between distinct NPUs of a Clos family
    without scale-up domains.

    Two NPUs whose lowest common subtree is at level ``l`` are ``2 l`` hops apart (up to
    the common ancestor and down; no shorter path exists, since NPUs attach only to
    leaves).  Counting ordered pairs per level is ``O(N h)`` with no all-pairs table (a
    100,000-server fabric in milliseconds).  With scale-up domains, paths may run
    through a neighbouring GPU's crossbar and rail, which this count does not model.
    """
    slots = np.asarray(slots, dtype=np.int64)
    n = slots.size
    if n < 2:
        return 0, 0.0
    same = [0]
    for l in range(1, shape.levels + 1):
        _, counts = np.unique(slots // shape.M(l), return_counts=True)
        same.append(int((counts.astype(np.int64) ** 2).sum()) - n)
    total, diameter = 0.0, 0
    for l in range(1, shape.levels + 1):
        at_l = same[l] - same[l - 1]
        total += 2 * l * at_l
        if at_l > 0:
            diameter = 2 * l
    return diameter, total / (n * (n - 1))


def _build(family: str, npus: int, slots: np.ndarray, shape: Xgft, radix: int, ratio,
           bw: float, lat: float, scaleup: tuple[int, float, float], name: str,
           params: dict, attrs: dict) -> Topology:
    size, su_bw, su_lat = scaleup
    if size > 1 and npus % size:
        raise invalid(f"{family} scaleup", size,
                      f"a divisor of the {npus} GPUs (whole scale-up domains)")
    b = LinkBuilder(npus, 0)
    h = shape.levels
    levels, n_sw, merges = xgft_links(b, shape, slots, np.arange(npus), npus,
                                      bandwidth=(bw,) * h, latency=(lat,) * h)
    n_su = add_scaleup(b, npus, size, npus + n_sw, su_bw, su_lat)
    b.switches = n_sw + n_su
    planes = shape.w[0]
    params = {**params, "endpoints": npus, "radix": radix, "oversub": float(ratio),
              "tiers": h, "planes": planes, "link_bandwidth_Bps": bw,
              "injection_Bps": planes * bw, "switch_levels": levels, "merges": merges,
              "leaves": levels[0][1], "xgft_m": list(shape.m), "xgft_w": list(shape.w)}
    if size > 1:
        params.update({"scaleup_size": size, "scaleup_switches": [npus + n_sw, n_su],
                       "scaleup_bandwidth_Bps": su_bw})
    else:
        params["diameter"], params["mean_path_length"] = path_stats(slots, shape)
    if size == 1 and ratio == 1:
        # Non-blocking: every subtree has as much uplink as endpoint capacity, so the
        # smallest balanced cut is the endpoint links of the smaller half.
        params["bisection_Bps"] = (npus // 2) * planes * bw
    attrs = {**attrs, "clos_rank": slots}
    if size > 1:
        attrs.setdefault("server", np.arange(npus) // size)
    return b.build(name=name, family=family, params=params, node_attrs=attrs)


def clos_fattree(servers: int, *, radix: int = DEFAULT_RADIX, oversub: float = 1.0,
                 tiers: int | None = None, bandwidth: float = DEFAULT_BW,
                 latency: float = DEFAULT_LAT, scaleup: int = 1,
                 scaleup_bandwidth: float = NVLINK4_GPU_BW, scaleup_latency: float = DEFAULT_LAT,
                 name: str = "") -> Topology:
    """Partially populated fat tree for any number of endpoints.

    Parameters
    ----------
    servers : int
        Endpoints (NPUs: servers, or GPUs with ``scaleup``), 2 .. 1,000,000.
    radix : int, optional
        Ports per switch.
    oversub : float, optional
        Leaf oversubscription (endpoint ports / uplinks); 1 = non-blocking.
    tiers : int, optional
        Switch levels (default: the fewest that hold ``servers``).
    bandwidth, latency : float, optional
        Every Clos link, bytes/s per direction and seconds.
    scaleup, scaleup_bandwidth, scaleup_latency : optional
        GPUs per scale-up domain (1 = none) and its per-GPU link.
    name : str, optional

    Returns
    -------
    Topology
        Family ``fattree``; ``params``: ``servers``, ``radix``, ``oversub``, ``tiers``,
        ``switch_levels``, ``merges`` (per level), ``leaves`` ...; ``node_attrs["clos_rank"]``.

    Examples
    --------
    >>> t = clos_fattree(1000, radix=64)          # 32 leaves, 16 merged spines
    >>> t.params["tiers"], t.params["leaves"], t.switches
    (2, 32, 48)
    """
    n = _endpoints(servers, "fattree")
    ratio = oversub_ratio(oversub, "fattree oversub")
    r = parse_int(str(radix), "fattree radix", minimum=2) if not isinstance(radix, int) else radix
    if r < 2:
        raise invalid("fattree radix", radix, "an integer >= 2")
    bw, lat = _link(bandwidth, latency, "fattree")
    shape = fattree_shape(n, r, oversub_down=ratio.numerator, oversub_up=ratio.denominator,
                          tiers=tiers)
    return _build("fattree", n, np.arange(n), shape, r, ratio, bw, lat,
                  (scaleup, scaleup_bandwidth, scaleup_latency),
                  name or f"fattree:servers={n},radix={r}",
                  {"servers": n, "hosts": n}, {})


def multiplane(servers: int, *, planes: int, radix: int = DEFAULT_RADIX, oversub: float = 1.0,
               tiers: int | None = None, bandwidth: float = DEFAULT_BW,
               latency: float = DEFAULT_LAT, scaleup: int = 1,
               scaleup_bandwidth: float = NVLINK4_GPU_BW, scaleup_latency: float = DEFAULT_LAT,
               name: str = "") -> Topology:
    """``planes`` identical, disjoint fat trees; every endpoint has one port on each.

    A multi-plane fabric splits each NIC into ``P`` ports of ``bandwidth`` (e.g. an
    800G NIC as 4 x 200G), each cabled to its own plane; with the smaller port rate a
    switch has more ports, so each plane needs fewer tiers.  It is
    ``XGFT(h; m; w_1 = P, ...)``: the plane is the first parent digit.  The endpoint's
    injection bandwidth is ``P x bandwidth``; a single flow pinned to one plane gets
    ``bandwidth`` (routing spreads pairs over planes, :mod:`topologies.routing`).

    Examples
    --------
    >>> t = multiplane(512, planes=4, radix=128)
    >>> t.params["tiers"], t.switches          # per plane 8 leaves, 4 merged spines
    (2, 48)
    """
    n = _endpoints(servers, "multiplane")
    if isinstance(planes, bool) or not isinstance(planes, (int, np.integer)) or planes < 1:
        raise invalid("multiplane planes", planes, "an integer >= 1")
    if planes > 64:
        raise invalid("multiplane planes", planes, "at most 64")
    ratio = oversub_ratio(oversub, "multiplane oversub")
    bw, lat = _link(bandwidth, latency, "multiplane")
    shape = fattree_shape(n, radix, oversub_down=ratio.numerator, oversub_up=ratio.denominator,
                          tiers=tiers, planes=int(planes), field="multiplane")
    return _build("multiplane", n, np.arange(n), shape, radix, ratio, bw, lat,
                  (scaleup, scaleup_bandwidth, scaleup_latency),
                  name or f"multiplane:{n},planes={planes}", {"servers": n, "hosts": n},
                  {})


def railopt(servers: int, *, gpus: int = 8, radix: int = DEFAULT_RADIX, oversub: float = 1.0,
            tiers: int | None = None, bandwidth: float = DEFAULT_BW,
            latency: float = DEFAULT_LAT, scaleup: int | None = None,
            scaleup_bandwidth: float = NVLINK4_GPU_BW, scaleup_latency: float = DEFAULT_LAT,
            name: str = "") -> Topology:
    """Rail-optimised Clos: NIC ``g`` of every server of a leaf group on leaf ``g``.

    Parameters
    ----------
    servers : int
        Servers ``S`` (>= 1; ``S x gpus >= 2``).
    gpus : int, optional
        GPUs per server = NICs per server = rails ``G`` (one NIC per GPU, as DGX/HGX).
    radix, oversub, tiers : optional
        As :func:`clos_fattree`; a leaf serves ``radix x oversub / (1 + oversub)``
        servers on one rail.
    bandwidth, latency : float, optional
        NIC rate per GPU (bytes/s per direction) and link latency (s).
    scaleup : int, optional
        GPUs per scale-up domain (default ``gpus``: the server's NVSwitch; a multiple
        of ``gpus`` for rack-scale domains such as NVL72 of 4-GPU trays; 1 = none).
    scaleup_bandwidth, scaleup_latency : float, optional
        Per-GPU scale-up link (default NVLink 4, 450 GB/s per direction).

    Returns
    -------
    Topology
        NPUs are GPUs (``s G + g``); then leaves, spines (and cores), then the scale-up
        crossbars.  ``node_attrs``: ``server``, ``rail``, ``clos_rank``.

    Examples
    --------
    >>> t = railopt(128, gpus=8)            # DGX SuperPOD-like: 4 SUs of 32 servers
    >>> t.params["leaves"], t.params["switch_levels"][1][1]
    (32, 16)
    """
    if isinstance(servers, bool) or not isinstance(servers, (int, np.integer)) or servers < 1:
        raise invalid("railopt servers", servers, "an integer >= 1")
    if isinstance(gpus, bool) or not isinstance(gpus, (int, np.integer)) or gpus < 1:
        raise invalid("railopt gpus", gpus, "an integer >= 1 (GPUs = NICs = rails per server)")
    s, g = int(servers), int(gpus)
    npus = _endpoints(s * g, "railopt")
    ratio = oversub_ratio(oversub, "railopt oversub")
    bw, lat = _link(bandwidth, latency, "railopt")
    p, q = ratio.numerator, ratio.denominator
    size = g if scaleup is None else scaleup
    if size > 1 and size % g and g % size:
        raise invalid("railopt scaleup", size, f"a multiple or divisor of gpus={g}")
    if radix > 2:   # the radix must split into endpoint ports and uplinks at this ratio
        fattree_shape(1, radix, oversub_down=p, oversub_up=q, tiers=2, field="railopt")
    if tiers is None:
        candidates = range(1, 6)
    else:
        candidates = [tiers]
    shape, s_pad = None, s
    # Prefer the fewest tiers; at each, rail-aligned pods (every pod one rail), else
    # rail-aligned leaves (pods mix rails), else a dense rail-major layout.
    last: InvalidSpecError | None = None
    for h in candidates:
        if h == 1:
            try:
                shape, s_pad = fattree_shape(npus, radix, oversub_down=p, oversub_up=q,
                                             tiers=1, field="railopt"), s
                break
            except InvalidSpecError as exc:
                last = exc
                continue
        probe = fattree_shape(1, radix, oversub_down=p, oversub_up=q, tiers=h, field="railopt")
        for block in dict.fromkeys((probe.M(h - 1), probe.m[0], 1)):
            try:
                s_pad = -(-s // block) * block
                shape = fattree_shape(g * s_pad, radix, oversub_down=p, oversub_up=q,
                                      tiers=h, field="railopt")
                break
            except InvalidSpecError as exc:
                last = exc
        if shape is not None:
            break
    if shape is None:
        if tiers is not None and last is not None:
            raise last
        raise invalid("railopt size", f"{s} servers x {g} GPUs",
                      f"at most 5 tiers of radix {radix}; use a larger radix")
    server, rail = np.divmod(np.arange(npus), g)
    slots = rail * s_pad + server if shape.levels > 1 else np.arange(npus)
    return _build("railopt", npus, slots, shape, radix, ratio, bw, lat,
                  (size, scaleup_bandwidth, scaleup_latency),
                  name or f"railopt:{s},gpus={g}", {"servers": s, "gpus": npus,
                                                    "gpus_per_server": g, "rails": g},
                  {"server": server // (size // g) if size > g else server, "rail": rail})


# ---------------------------------------------------------------- spec strings
_CLOS_KEYS = ("radix", "oversub", "tiers", "bw", "lat") + SCALEUP_KEYS


def _common(options, family):
    radix = parse_int(options.get("radix", str(DEFAULT_RADIX)), f"{family} radix", minimum=2)
    if radix > 4096:
        raise invalid(f"{family} radix", radix, "at most 4096 ports per switch")
    oversub = parse_float(options.get("oversub", "1"), f"{family} oversub", strict=True)
    tiers = parse_int(options["tiers"], f"{family} tiers", minimum=1) if "tiers" in options \
        else None
    if tiers is not None and tiers > 5:
        raise invalid(f"{family} tiers", tiers, "1 to 5")
    return dict(radix=radix, oversub=oversub, tiers=tiers,
                bandwidth=bandwidth_option(options, family),
                latency=latency_option(options, family))


def fattree_servers_spec(shape: str, options) -> Topology:
    """``fattree:servers=N[,radix=R,oversub=O,tiers=T,scaleup=G,...]`` (called by the
    ``fattree`` family's parser in :mod:`topologies.families.clos`)."""
    text = options.get("servers", shape)
    n = parse_int(text, "fattree servers", minimum=2)
    size, su_bw, su_lat = scaleup_options(options, "fattree")
    return mark_default_scaleup(
        clos_fattree(n, scaleup=size, scaleup_bandwidth=su_bw, scaleup_latency=su_lat,
                     name=spec_name("fattree", shape, options), **_common(options, "fattree")),
        options)


@register_family("railopt", keys=("gpus",) + _CLOS_KEYS, shape="SERVERS",
                 example="railopt:4,gpus=2,radix=4",
                 summary="rail-optimised Clos: NIC g of every server on rail leaf g; gpus=NICs "
                         "per server, radix, oversub, tiers, scaleup domains")
def _railopt_spec(shape, options):
    s = parse_int(shape, "railopt servers", minimum=1)
    g = parse_int(options.get("gpus", "8"), "railopt gpus", minimum=1)
    size, su_bw, su_lat = scaleup_options(options, "railopt", default_size=g)
    return mark_default_scaleup(
        railopt(s, gpus=g, scaleup=size, scaleup_bandwidth=su_bw, scaleup_latency=su_lat,
                name=spec_name("railopt", shape, options), **_common(options, "railopt")),
        options)


@register_family("multiplane", keys=("planes",) + _CLOS_KEYS, shape="ENDPOINTS",
                 example="multiplane:8,planes=2,radix=4",
                 summary="P disjoint Clos planes, every NIC port on its own plane (bw per port)")
def _multiplane_spec(shape, options):
    n = parse_int(shape, "multiplane endpoints", minimum=2)
    if "planes" not in options:
        raise invalid("multiplane planes", "(missing)", "planes=P, e.g. multiplane:1024,planes=4")
    planes = parse_int(options["planes"], "multiplane planes", minimum=1)
    size, su_bw, su_lat = scaleup_options(options, "multiplane")
    return mark_default_scaleup(
        multiplane(n, planes=planes, scaleup=size, scaleup_bandwidth=su_bw,
                   scaleup_latency=su_lat, name=spec_name("multiplane", shape, options),
                   **_common(options, "multiplane")),
        options)
