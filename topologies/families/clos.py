"""Switched fabrics: k-ary fat-tree, two-tier leaf-spine, TopoOpt's Ideal Switch and dragonfly.

Endpoints (hosts, servers or terminals) are the NPUs ``0 .. N-1``; switches
follow them.  Every cable is bidirectional (two directed links of the stated
bandwidth, one per direction).

* :func:`fattree` -- the k-ary fat-tree of Al-Fares et al. (SIGCOMM'08), the
  "Fat-tree" baseline of TopoOpt (NSDI'23, Section 5.1 and Appendix G).
* :func:`leafspine` -- a two-tier Clos with an oversubscription ratio (TopoOpt's
  "Oversub. Fat-tree" baseline, Section 5.1), sized by the rule documented on
  the function.
* :func:`ideal` -- TopoOpt's "Ideal Switch" (Section 5.1): one switch, each
  server attached with ``d x B``.
* :func:`dragonfly` -- the canonical dragonfly of Kim, Dally, Scott and Abts
  (ISCA'08) with a documented deterministic global-link arrangement.

Node numbering is documented per builder so that other modules (cost model,
placement) can rely on it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_int
from topologies.builder import LinkBuilder
from topologies.families.options import (
    DEFAULT_BW, DEFAULT_LAT, bandwidth_option, latency_option, no_shape, parse_float, parse_int,
)
from topologies.model import Topology
from topologies.registry import register_family

__all__ = ["fattree", "leafspine", "ideal", "dragonfly", "spec_name", "link_options",
           "oversub_ratio", "MAX_NODES", "check_link"]

#: Largest node count (NPUs + switches) a builder accepts; beyond it the
#: all-pairs hop matrix alone would not fit in memory.
MAX_NODES = 1 << 20

#: Default leaf size of :func:`leafspine` when neither ``hosts_per_leaf`` nor
#: ``radix`` is given (a 32-port leaf at oversubscription 1).
DEFAULT_HOSTS_PER_LEAF = 16


def _check_nodes(total: int, family: str) -> None:
    if total > MAX_NODES:
        raise invalid(f"{family} size", f"{total} nodes", f"at most {MAX_NODES} nodes in all")


def spec_name(family: str, shape: str, options) -> str:
    """The canonical spec string ``family:shape,key=value,...`` used as a display name."""
    items = ([shape] if shape else []) + [f"{k}={v}" for k, v in options.items()]
    return f"{family}:{','.join(items)}" if items else family


def link_options(family: str, shape: str, options) -> dict:
    """The keyword arguments of a family builder that every spec parser passes:
    ``bandwidth`` (``bw=``, bytes/s), ``latency`` (``lat=``, s) and ``name`` (:func:`spec_name`)."""
    return dict(bandwidth=bandwidth_option(options, family),
                latency=latency_option(options, family), name=spec_name(family, shape, options))


def check_link(bandwidth: float, latency: float, family: str) -> tuple[float, float]:
    """A family builder's link bandwidth (bytes/s, finite > 0) and latency (s, finite >= 0).

    Validated here so that the message names the family option, not "link 0".
    """
    try:
        bw, lat = float(bandwidth), float(latency)
    except (TypeError, ValueError):
        raise invalid(f"{family} bandwidth/latency", (bandwidth, latency), "numbers") from None
    if not math.isfinite(bw) or bw <= 0:
        raise invalid(f"{family} bandwidth", bandwidth, "a finite value > 0 bytes/s")
    if not math.isfinite(lat) or lat < 0:
        raise invalid(f"{family} latency", latency, "a finite value >= 0 s")
    return bw, lat


# ------------------------------------------------------------------- fat-tree
def fattree(k: int, *, bandwidth: float = DEFAULT_BW, latency: float = DEFAULT_LAT,
            name: str = "") -> Topology:
    """k-ary fat-tree (Al-Fares, Loukissas and Vahdat, SIGCOMM'08).

    ``k`` pods, each with ``k/2`` edge and ``k/2`` aggregation switches of
    radix ``k``; ``(k/2)^2`` core switches; ``k^3/4`` hosts.  Every cable has
    the same bandwidth, so the fabric has full bisection bandwidth.

    Parameters
    ----------
    k : int
        Switch radix, even, >= 2.
    bandwidth : float, optional
        Bandwidth of every directed link, bytes/s.
    latency : float, optional
        Latency of every link, seconds.
    name : str, optional
        Display name (default ``"fattree:k=K"``).

    Returns
    -------
    Topology
        Node ids: hosts ``0 .. k^3/4-1`` (pod-major: host ``h`` sits under edge
        switch ``h // (k/2)``), then the ``k^2/2`` edge switches (pod ``p``'s
        edge ``e`` is ``N + p*k/2 + e``), the ``k^2/2`` aggregation switches
        (``N + k^2/2 + p*k/2 + a``), the ``(k/2)^2`` core switches
        (``N + k^2 + i*k/2 + j``; core ``(i, j)`` is cabled to aggregation
        switch ``i`` of every pod).  ``3k^3/2`` directed links; diameter 6 for
        ``k >= 4`` (host, edge, aggregation, core, aggregation, edge, host).
        ``params``: ``k``, ``hosts``/``servers``, ``link_bandwidth_Bps``,
        ``bisection_Bps`` = ``(k^3/8) * bandwidth`` (half the hosts at full
        rate), ``oversub`` = 1, ``switch_levels`` (edge, aggregation, core id ranges,
        for :mod:`topologies.routing`), closed-form ``diameter`` and
        ``mean_path_length``.  ``node_attrs["pod"]``: pod of each host.

    Examples
    --------
    >>> t = fattree(4)
    >>> t.npus, t.switches, t.n_links, t.diameter
    (16, 20, 96, 6)
    """
    k = check_int("fattree k", k, 2)
    if k % 2:
        raise invalid("fattree k", k, "an even integer >= 2")
    bw, lat = check_link(bandwidth, latency, "fattree")
    half = k // 2
    n_hosts = k ** 3 // 4
    n_edge = n_agg = k * half
    n_core = half * half
    _check_nodes(n_hosts + n_edge + n_agg + n_core, "fattree")
    edge0, agg0, core0 = n_hosts, n_hosts + n_edge, n_hosts + n_edge + n_agg
    b = LinkBuilder(n_hosts, n_edge + n_agg + n_core)
    hosts = np.arange(n_hosts)
    b.cable(hosts, edge0 + hosts // half, bw, lat)
    # Edge e and aggregation a of the same pod: every pair (a complete bipartite pod).
    pod, e, a = np.meshgrid(np.arange(k), np.arange(half), np.arange(half), indexing="ij")
    b.cable(edge0 + pod * half + e, agg0 + pod * half + a, bw, lat)
    # Core (i, j) reaches aggregation switch i of every pod.
    pod, i, j = np.meshgrid(np.arange(k), np.arange(half), np.arange(half), indexing="ij")
    b.cable(agg0 + pod * half + i, core0 + i * half + j, bw, lat)
    # Hop counts by lowest common switch: 2 under one edge, 4 in one pod, 6 across pods.
    e, pod_hosts = half, half * half
    pairs = n_hosts * (n_hosts - 1)
    hops = 2 * n_hosts * (e - 1) + 4 * n_hosts * (pod_hosts - e) + 6 * n_hosts * (n_hosts - pod_hosts)
    diameter = 6 if n_hosts > pod_hosts else (4 if pod_hosts > e else 2)
    params = {"k": k, "hosts": n_hosts, "servers": n_hosts, "link_bandwidth_Bps": bw,
              "diameter": diameter, "mean_path_length": hops / pairs,
              "edge_switches": n_edge, "aggregation_switches": n_agg, "core_switches": n_core,
              "oversub": 1.0, "bisection_Bps": n_hosts / 2 * bw,
              "switch_levels": [[edge0, n_edge], [agg0, n_agg], [core0, n_core]]}
    return b.build(name=name or f"fattree:k={k}", family="fattree", params=params,
                   node_attrs={"pod": hosts // (half * half)})


# ----------------------------------------------------------------- leaf-spine
def oversub_ratio(oversub: float, field: str = "leafspine oversub") -> Fraction:
    """An oversubscription ratio as a fraction of small integers (``1.5`` -> ``3/2``)."""
    try:
        value = float(oversub)
    except (TypeError, ValueError):
        raise invalid(field, oversub, "a number > 0 such as 1, 2 or 1.5") from None
    if not math.isfinite(value) or value <= 0:
        raise invalid(field, oversub, "a finite number > 0 such as 1, 2 or 1.5")
    frac = Fraction(value).limit_denominator(64)
    if abs(float(frac) - value) > 1e-9 * value:
        raise invalid(field, oversub, "a ratio of small integers such as 3 or 1.5")
    return frac


def leafspine(hosts: int, *, oversub: float = 1.0, hosts_per_leaf: int | None = None,
              radix: int | None = None, bandwidth: float = DEFAULT_BW,
              latency: float = DEFAULT_LAT, name: str = "") -> Topology:
    """Two-tier leaf-spine (folded Clos) with an oversubscription ratio.

    Sizing rule: every leaf has ``m = hosts_per_leaf`` host ports and
    ``u = m / oversub`` uplinks, one to each of ``u`` spine switches; all
    links have the same bandwidth, so each full leaf's downlink capacity is
    exactly ``oversub`` times its uplink capacity.  ``m`` comes from, in order:

    * ``hosts_per_leaf`` (``m / oversub`` must be an integer);
    * ``radix`` (ports per leaf): ``u = radix / (1 + oversub)`` must be an
      integer and ``m = radix - u``;
    * the default: the smallest multiple of the ratio's numerator that is
      >= ``min(16, hosts)`` (``oversub = p/q`` in lowest terms; 16 hosts and 16
      uplinks at oversub 1, 16 and 8 at 2, 18 and 6 at 3).

    There are ``ceil(hosts / m)`` leaves; when ``m`` does not divide ``hosts``
    the last leaf is partly filled (and therefore less oversubscribed).  Every spine
    is cabled to every leaf, so a spine has as many ports as there are leaves (TopoOpt's
    baseline, any host count); for spines of a bounded radix, merged where the fabric is
    partly filled, and more tiers when needed, use ``fattree:servers=N,radix=R,oversub=O``
    (:func:`topologies.families.gpu_clos.clos_fattree`).

    Parameters
    ----------
    hosts : int
        Number of hosts (NPUs), >= 2.
    oversub : float, optional
        Downlink to uplink capacity ratio per leaf (> 0; 1 = full bisection).
    hosts_per_leaf, radix : int, optional
        Leaf sizing, see above (give at most one).
    bandwidth : float, optional
        Bandwidth of every directed link, bytes/s.
    latency : float, optional
        Latency of every link, seconds.
    name : str, optional
        Display name.

    Returns
    -------
    Topology
        Hosts ``0 .. H-1`` (host ``h`` on leaf ``h // m``), leaves
        ``H .. H+L-1``, spines ``H+L .. H+L+u-1``.  ``2(H + L*u)`` directed
        links; diameter 2 within a leaf, 4 across leaves.  ``params``:
        ``hosts``/``servers``, ``oversub``, ``hosts_per_leaf``,
        ``uplinks_per_leaf``, ``leaves``, ``spines``, ``link_bandwidth_Bps``,
        ``switch_levels`` (leaf and spine id ranges), closed-form ``diameter`` and
        ``mean_path_length`` and,
        when the leaves are all full and their number is even,
        ``bisection_Bps`` = ``min(H/2, u*L/2) * bandwidth`` (split the leaves in
        halves; each spine then carries ``L/2`` cut links, unless the host
        links are the smaller cut).

    Examples
    --------
    >>> t = leafspine(128, oversub=2)
    >>> t.params["leaves"], t.params["spines"], t.params["bisection_Bps"] / 25e9
    (8, 8, 32.0)
    """
    hosts = check_int("leafspine hosts", hosts, 2)
    ratio = oversub_ratio(oversub)
    bw, lat = check_link(bandwidth, latency, "leafspine")
    p, q = ratio.numerator, ratio.denominator
    if hosts_per_leaf is not None and radix is not None:
        raise invalid("leafspine sizing", "hosts_per_leaf and radix", "at most one of them")
    if hosts_per_leaf is not None:
        m = check_int("leafspine hosts_per_leaf", hosts_per_leaf, 1)
        if (m * q) % p:
            raise invalid("leafspine hosts_per_leaf", m,
                          f"a multiple of {p} so that hosts_per_leaf / oversub ({float(ratio):g}) "
                          "uplinks is a whole number")
        u = m * q // p
    elif radix is not None:
        r = check_int("leafspine radix", radix, 2)
        if (r * q) % (p + q):
            raise invalid("leafspine radix", r,
                          f"a multiple of {p + q} so that radix / (1 + oversub) uplinks is a "
                          "whole number, or give hosts_per_leaf")
        u = r * q // (p + q)
        m = r - u
    else:
        m = p * math.ceil(min(DEFAULT_HOSTS_PER_LEAF, hosts) / p)
        u = m * q // p
    if u < 1 or m < 1:
        raise invalid("leafspine sizing", f"{m} hosts and {u} uplinks per leaf",
                      "at least one host and one uplink per leaf")
    leaves = -(-hosts // m)
    _check_nodes(hosts + leaves + u, "leafspine")
    leaf0, spine0 = hosts, hosts + leaves
    b = LinkBuilder(hosts, leaves + u)
    h = np.arange(hosts)
    b.cable(h, leaf0 + h // m, bw, lat)
    leaf, spine = np.meshgrid(np.arange(leaves), np.arange(u), indexing="ij")
    b.cable(leaf0 + leaf, spine0 + spine, bw, lat)
    # 2 hops under one leaf, 4 across leaves.
    fill = np.bincount(h // m)
    same = int((fill.astype(np.int64) ** 2).sum()) - hosts
    params = {"hosts": hosts, "servers": hosts, "oversub": float(ratio), "hosts_per_leaf": m,
              "diameter": 4 if leaves > 1 else 2,
              "mean_path_length": (2 * same + 4 * (hosts * (hosts - 1) - same))
              / (hosts * (hosts - 1)),
              "uplinks_per_leaf": u, "leaves": leaves, "spines": u, "link_bandwidth_Bps": bw,
              "switch_levels": [[leaf0, leaves], [spine0, u]]}
    if hosts % m == 0 and leaves % 2 == 0:
        params["bisection_Bps"] = min(hosts / 2, u * leaves / 2) * bw
    return b.build(name=name or f"leafspine:{hosts},oversub={float(ratio):g}",
                   family="leafspine", params=params, node_attrs={"leaf": h // m})


# --------------------------------------------------------------- ideal switch
def ideal(servers: int, *, degree: int = 1, bandwidth: float = DEFAULT_BW,
          latency: float = DEFAULT_LAT, name: str = "") -> Topology:
    """TopoOpt's Ideal Switch (NSDI'23, Section 5.1): one switch, ``d x B`` per server.

    "An ideal electrical switch that scales to any number of servers, where
    each server is connected to the switch via a link with d x B bandwidth."
    We model each server's attachment as **one** cable of ``degree *
    bandwidth`` rather than ``degree`` parallel cables of ``bandwidth``: the
    paper's point is that no network with degree ``d`` and link rate ``B`` can
    be faster, and under the one-chunk-per-link model (docs/architecture.md section 5) a
    single transfer on ``d`` parallel links would only get ``B``, whereas on the
    ideal switch it gets the whole ``d x B``.

    Parameters
    ----------
    servers : int
        Number of servers (NPUs), >= 1 (one server is a valid system: its GPUs talk
        over the intra-server fabric only).
    degree : int, optional
        Server degree ``d`` (interfaces per server), >= 1.
    bandwidth : float, optional
        Per-interface link bandwidth ``B``, bytes/s.
    latency : float, optional
        Latency of each link, seconds (a message crosses two links).
    name : str, optional
        Display name.

    Returns
    -------
    Topology
        Servers ``0 .. N-1``, the switch ``N``; ``2N`` directed links of
        ``d*B``; diameter 2.  ``params``: ``servers``, ``degree``,
        ``link_bandwidth_Bps`` (``B``), ``server_bandwidth_Bps`` (``d*B``),
        ``bisection_Bps`` = ``floor(N/2) * d * B``.

    Examples
    --------
    >>> t = ideal(8, degree=4, bandwidth=12.5e9)
    >>> t.npus, t.switches, float(t.bandwidth[0])
    (8, 1, 50000000000.0)
    """
    n = check_int("ideal servers", servers, 1)
    d = check_int("ideal degree", degree, 1)
    bw, lat = check_link(bandwidth, latency, "ideal")
    _check_nodes(n + 1, "ideal")
    b = LinkBuilder(n, 1)
    b.cable(np.arange(n), n, d * bw, lat)
    params = {"servers": n, "degree": d, "link_bandwidth_Bps": bw, "server_bandwidth_Bps": d * bw,
              "bisection_Bps": (n // 2) * d * bw}
    return b.build(name=name or f"ideal:{n},degree={d}", family="ideal", params=params)


# ------------------------------------------------------------------ dragonfly
def dragonfly(a: int, p: int, h: int, g: int | None = None, *, bandwidth: float = DEFAULT_BW,
              latency: float = DEFAULT_LAT, global_bandwidth: float | None = None,
              global_latency: float | None = None, name: str = "") -> Topology:
    """Canonical dragonfly (Kim, Dally, Scott and Abts, ISCA'08).

    ``g`` groups of ``a`` routers; every router has ``p`` terminals (the NPUs)
    and ``h`` global ports; the routers of a group are fully connected by
    local cables and every pair of groups is joined by exactly one global
    cable.  The largest ("balanced maximum") size is ``g = a*h + 1``.

    Global-link arrangement (deterministic, the "consecutive" arrangement):
    the global ports of group ``i`` are numbered ``0 .. a*h-1``, port ``t``
    belonging to router ``t // h``; group ``i`` reaches group ``j`` through its
    port ``j`` if ``j < i`` and ``j - 1`` if ``j > i``.  With ``g < a*h + 1``
    the highest-numbered ports stay unused.

    Parameters
    ----------
    a, p, h : int
        Routers per group (>= 1), terminals per router (>= 1), global ports per
        router (>= 1, or 0 with a single group).
    g : int, optional
        Number of groups, ``1 .. a*h + 1`` (default ``a*h + 1``).
    bandwidth, latency : float, optional
        Terminal and local links: bytes/s per direction and seconds.
    global_bandwidth, global_latency : float, optional
        Global links (default: same as local).
    name : str, optional
        Display name.

    Returns
    -------
    Topology
        Terminal ``t`` of router ``r`` of group ``G`` is NPU ``(G*a + r)*p + t``;
        router ``(G, r)`` is switch ``N + G*a + r``.  ``a*p*g`` NPUs, ``a*g``
        switches, ``2*a*p*g + g*a*(a-1) + g*(g-1)`` directed links; diameter 5
        when ``a > 1`` and ``g > 1`` (terminal, local, global, local, terminal).
        ``node_attrs``: ``group`` and ``router`` (global router index) of each
        NPU.

    Examples
    --------
    >>> t = dragonfly(4, 2, 2)
    >>> t.npus, t.switches, t.n_links, t.diameter
    (72, 36, 324, 5)
    """
    a = check_int("dragonfly a (routers per group)", a, 1)
    p = check_int("dragonfly p (terminals per router)", p, 1)
    h = check_int("dragonfly h (global links per router)", h, 0)
    g_max = a * h + 1
    g = g_max if g is None else check_int("dragonfly g (groups)", g, 1)
    if g > g_max:
        raise invalid("dragonfly g (groups)", g,
                      f"at most a*h+1 = {g_max} so that every pair of groups has a global link")
    bw, lat = check_link(bandwidth, latency, "dragonfly")
    gbw, glat = check_link(bw if global_bandwidth is None else global_bandwidth,
                            lat if global_latency is None else global_latency, "dragonfly global")
    n_routers = a * g
    n = n_routers * p
    if n < 2:
        raise invalid("dragonfly size", f"a={a}, p={p}, g={g}", "at least 2 terminals in all")
    _check_nodes(n + n_routers, "dragonfly")
    b = LinkBuilder(n, n_routers)
    terminals = np.arange(n)
    b.cable(terminals, n + terminals // p, bw, lat)
    grp, r1, r2 = np.meshgrid(np.arange(g), np.arange(a), np.arange(a), indexing="ij")
    mask = r1 < r2
    b.cable(n + grp[mask] * a + r1[mask], n + grp[mask] * a + r2[mask], bw, lat)
    gi, gj = np.triu_indices(g, k=1)  # gi < gj
    port_i = gj - 1          # in group gi, the target gj > gi uses port gj - 1
    port_j = gi              # in group gj, the target gi < gj uses port gi
    b.cable(n + gi * a + port_i // max(h, 1), n + gj * a + port_j // max(h, 1), gbw, glat)
    params = {"a": a, "p": p, "h": h, "g": g, "terminals": n, "routers": n_routers,
              "link_bandwidth_Bps": bw, "global_bandwidth_Bps": gbw}
    return b.build(name=name or f"dragonfly:a={a},p={p},h={h},g={g}", family="dragonfly",
                   params=params,
                   node_attrs={"group": terminals // (a * p), "router": terminals // p})


# ---------------------------------------------------------------- spec strings
@register_family("fattree", keys=("k", "servers", "radix", "oversub", "tiers", "bw", "lat",
                                  "scaleup", "scaleup_bw", "scaleup_lat"),
                 shape="K or k=K, or servers=N[,radix=R,oversub=O,tiers=T]",
                 example="fattree:k=4",
                 summary="fat tree: k-ary (k^3/4 hosts), or servers=N partially populated with "
                         "radix-R switches (topologies.families.gpu_clos)")
def _fattree_spec(shape, options):
    if "servers" in options or any(key in options for key in
                                   ("radix", "oversub", "tiers", "scaleup")):
        if "k" in options:
            raise invalid("fattree spec", f"k={options['k']} with servers=",
                          "either k=K (k-ary tree) or servers=N[,radix=R,...]")
        if shape and "servers" in options:
            raise invalid("fattree spec", f"{shape} and servers={options['servers']}",
                          "the server count given once")
        if "servers" not in options:
            raise invalid("fattree servers", "(missing)",
                          "servers=N with radix/oversub/tiers, e.g. fattree:servers=1000,radix=64")
        from topologies.families.gpu_clos import fattree_servers_spec

        return fattree_servers_spec("", options)
    if shape and "k" in options:
        raise invalid("fattree spec", f"{shape} and k={options['k']}", "k given once")
    text = options.get("k", shape)
    if not text:
        raise invalid("fattree k", text, "an even integer >= 2, e.g. fattree:k=8, or "
                      "fattree:servers=N,radix=R for any server count")
    if "scaleup_bw" in options or "scaleup_lat" in options:
        raise invalid("fattree scaleup_bw", options.get("scaleup_bw", options.get("scaleup_lat")),
                      "only with servers=N,scaleup=G")
    k = parse_int(text, "fattree k", minimum=2)
    return fattree(k, **link_options("fattree", shape, options))


@register_family("leafspine", keys=("oversub", "hosts_per_leaf", "radix", "bw", "lat"),
                 shape="HOSTS", example="leafspine:32,oversub=2",
                 summary="two-tier leaf-spine with oversubscription ratio oversub")
def _leafspine_spec(shape, options):
    hosts = parse_int(shape, "leafspine hosts", minimum=2)
    oversub = parse_float(options.get("oversub", "1"), "leafspine oversub", strict=True)
    m = parse_int(options["hosts_per_leaf"], "leafspine hosts_per_leaf") \
        if "hosts_per_leaf" in options else None
    r = parse_int(options["radix"], "leafspine radix", minimum=2) if "radix" in options else None
    return leafspine(hosts, oversub=oversub, hosts_per_leaf=m, radix=r,
                     **link_options("leafspine", shape, options))


@register_family("ideal", keys=("degree", "bw", "lat"), shape="SERVERS",
                 example="ideal:16,degree=4,bw=100Gbps",
                 summary="TopoOpt Ideal Switch: one switch, each server attached with degree x bw")
def _ideal_spec(shape, options):
    n = parse_int(shape, "ideal servers", minimum=1)
    d = parse_int(options.get("degree", "1"), "ideal degree", minimum=1)
    return ideal(n, degree=d, **link_options("ideal", shape, options))


@register_family("dragonfly", keys=("a", "p", "h", "g", "bw", "lat", "gbw", "glat"), shape="",
                 example="dragonfly:a=4,p=2,h=2",
                 summary="dragonfly: g groups of a routers, p terminals and h global links each")
def _dragonfly_spec(shape, options):
    no_shape(shape, "dragonfly", "no shape; give a=..,p=..,h=.. e.g. dragonfly:a=4,p=2,h=2")
    missing = [key for key in ("a", "p", "h") if key not in options]
    if missing:
        raise invalid("dragonfly spec", f"missing {missing[0]}=",
                      "a=ROUTERS_PER_GROUP,p=TERMINALS_PER_ROUTER,h=GLOBAL_LINKS_PER_ROUTER")
    a = parse_int(options["a"], "dragonfly a", minimum=1)
    p = parse_int(options["p"], "dragonfly p", minimum=1)
    h = parse_int(options["h"], "dragonfly h", minimum=0)
    g = parse_int(options["g"], "dragonfly g", minimum=1) if "g" in options else None
    gbw = bandwidth_option(options, "dragonfly", key="gbw") if "gbw" in options else None
    glat = latency_option(options, "dragonfly", key="glat") if "glat" in options else None
    return dragonfly(a, p, h, g, global_bandwidth=gbw, global_latency=glat,
                     **link_options("dragonfly", shape, options))
