"""YAML topology files (docs/architecture.md section 6): the explicit graph, ASTRA-sim's file.

Explicit graph
--------------
::

    name: my-box            # optional (default: the file name without extension)
    npus: 8
    switches: 1             # optional, ids npus.. ; default 0
    bandwidth: 25GB/s       # default for links that do not say (string with unit or bytes/s)
    latency: 1us            # default for links that do not say (string with unit or seconds)
    links:                  # each entry: src, dst and optionally bandwidth, latency,
      - {src: 0, dst: 8}    #   count (parallel links, default 1) and
      - {src: 1, dst: 8, bandwidth: 50GB/s, count: 2}   # bidirectional (default true)

Numbers are base units (bytes/s, seconds); strings are parsed with
:mod:`codesign.units`.  A link without ``bandwidth`` or ``latency`` needs the
top-level default: there is no silent fallback.  Unknown keys, ids out of
range, self-loops and disconnected graphs raise
:class:`~codesign.errors.InvalidSpecError`.

ASTRA-sim analytical network file
---------------------------------
::

    topology: [Ring, FullyConnected, Switch]
    npus_count: [4, 2, 4]
    bandwidth: [50.0, 25.0, 12.5]    # ASTRA-sim GB/s = 2^30 bytes/s, per link and direction
    latency: [500.0, 500.0, 500.0]   # ns per link

read with ASTRA-sim's own units into a hierarchical multi-dimensional topology
(:func:`topologies.families.multidim.multidim`, dimensions fastest-varying
first, as ASTRA-sim lists them).  A ``Switch`` dimension gets one switch per
line, so a message crosses two links, matching ASTRA-sim's analytical model.
A file is of this form when it has the key ``topology``.

:func:`dump_yaml_topology` writes the explicit form with one directed link per
entry (``bidirectional: false``), which loads back to the same link arrays in
the same order.  Family, dimensions and node attributes are not written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_keys, get_bool, get_int, get_str, load_yaml
from codesign.units import (BARE_BANDWIDTH_BPS, BARE_LATENCY_S, MAX_BANDWIDTH_BPS, MAX_TIME_S,
                            MIN_BANDWIDTH_BPS, parse_bandwidth, parse_time)
from topologies.builder import LinkBuilder
from topologies.model import Dimension, Topology

__all__ = ["load_yaml_topology", "topology_from_dict", "dump_yaml_topology",
           "ASTRA_GBPS", "ASTRA_NS"]

#: One ASTRA-sim "GB/s" in bytes/s (ASTRA-sim uses 2^30).
ASTRA_GBPS = float(2 ** 30)
#: One ASTRA-sim latency unit (ns) in seconds.
ASTRA_NS = 1e-9

EXPLICIT_KEYS = ("name", "npus", "switches", "bandwidth", "latency", "links")
LINK_KEYS = ("src", "dst", "bandwidth", "latency", "count", "bidirectional")
ASTRA_KEYS = ("topology", "npus_count", "bandwidth", "latency")
ASTRA_KINDS = {"ring": "ring", "fullyconnected": "fc", "switch": "switch"}


def load_yaml_topology(path: str | Path) -> Topology:
    """Read a topology from a YAML file (explicit graph or ASTRA-sim network file).

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    Topology
        Named after the file's ``name`` key or, if absent, the file stem.

    Raises
    ------
    InvalidSpecError
        Missing file, bad YAML, unknown or missing keys, bad values, or a
        disconnected network.
    """
    p = Path(path)
    data = load_yaml(p)
    return topology_from_dict(data, name=p.stem, where=f"topology file {str(p)!r}")


def topology_from_dict(spec: Any, *, name: str = "", where: str = "topology spec") -> Topology:
    """Build a topology from an already-loaded YAML mapping (either form).

    ``name`` is used when the mapping has no ``name`` key.
    """
    if isinstance(spec, Mapping) and "topology" in spec:
        return _from_astra(spec, name, where)
    return _from_explicit(spec, name, where)


def _from_explicit(spec: Any, default_name: str, where: str) -> Topology:
    check_keys(spec, allowed=EXPLICIT_KEYS, required=("npus", "links"), where=where)
    npus = get_int(spec, "npus", where=where, minimum=1)
    switches = get_int(spec, "switches", 0, where=where, minimum=0)
    name = get_str(spec, "name", default_name, where=where) or "custom"
    n_nodes = npus + switches
    bw_default = (parse_bandwidth(spec["bandwidth"], field=f"{where} bandwidth",
                                  bare=BARE_BANDWIDTH_BPS)
                  if "bandwidth" in spec else None)
    lat_default = (parse_time(spec["latency"], field=f"{where} latency", bare=BARE_LATENCY_S)
                   if "latency" in spec else None)
    links = spec["links"]
    if links is None:
        links = []
    if not isinstance(links, list):
        raise invalid(f"{where} links", links, "a list of {src, dst, ...} mappings")
    b = LinkBuilder(npus, switches)
    for i, link in enumerate(links):
        at = f"links[{i}] of {where}"
        check_keys(link, allowed=LINK_KEYS, required=("src", "dst"), where=at)
        ends = []
        for key in ("src", "dst"):
            node = get_int(link, key, where=at)
            if not 0 <= node < n_nodes:
                raise invalid(f"{at} {key}", node, f"a node id in 0..{n_nodes - 1}")
            ends.append(node)
        if ends[0] == ends[1]:
            raise invalid(f"{at} src/dst", ends, "two different nodes (no self-loops)")
        bw = (parse_bandwidth(link["bandwidth"], field=f"{at} bandwidth", bare=BARE_BANDWIDTH_BPS)
              if "bandwidth" in link else bw_default)
        lat = parse_time(link["latency"], field=f"{at} latency", bare=BARE_LATENCY_S) \
            if "latency" in link \
            else lat_default
        for key, value in (("bandwidth", bw), ("latency", lat)):
            if value is None:
                raise InvalidSpecError(f"missing key {key!r} in {at}: give it there or as a "
                                       f"top-level default")
        count = get_int(link, "count", 1, where=at, minimum=1)
        if get_bool(link, "bidirectional", True, where=at):
            b.cable(ends[0], ends[1], bw, lat, count=count)
        else:
            b.links(ends[0], ends[1], bw, lat, count=count)
    return b.build(name=name, family="custom", params={"format": "explicit"})


def _astra_list(spec: Mapping[str, Any], key: str, where: str) -> list:
    value = spec[key]
    if not isinstance(value, list) or not value:
        raise invalid(f"{where} key {key!r}", value, "a non-empty list, one entry per dimension")
    return value


#: Ranges of the ASTRA-sim fields in their units: the bounds every bandwidth and time
#: of the framework has (codesign.units: 1e-6 .. 1e18 B/s, at most 1e9 s), so that an
#: ASTRA-sim file cannot carry a link a spec string or an explicit YAML file could not
#: (1.0e-320 GB/s became a NaN iteration time).
ASTRA_BANDWIDTH_RANGE = (MIN_BANDWIDTH_BPS / ASTRA_GBPS, MAX_BANDWIDTH_BPS / ASTRA_GBPS)
ASTRA_LATENCY_RANGE = (0.0, MAX_TIME_S / ASTRA_NS)


def _astra_number(value: Any, field: str, *, positive: bool) -> float:
    low, high = ASTRA_BANDWIDTH_RANGE if positive else ASTRA_LATENCY_RANGE
    unit = "GB/s = 2^30 B/s" if positive else "ns"
    rule = f"a number of ASTRA-sim {unit} from {low:.3g} to {high:.3g}"
    number = value
    if isinstance(value, str):
        # YAML 1.1 reads 1.0e308 (no exponent sign) as a string; ASTRA-sim reads a number.
        try:
            number = float(value)
        except ValueError:
            raise invalid(field, value, rule) from None
    if isinstance(number, bool) or not isinstance(number, (int, float)) \
            or not math.isfinite(number) or not low <= number <= high \
            or (positive and number == 0):
        raise invalid(field, value, rule)
    return float(number)


def _from_astra(spec: Mapping[str, Any], default_name: str, where: str) -> Topology:
    from topologies.families.multidim import multidim

    check_keys(spec, allowed=ASTRA_KEYS, required=ASTRA_KEYS, where=f"ASTRA-sim {where}")
    kinds = _astra_list(spec, "topology", where)
    sizes = _astra_list(spec, "npus_count", where)
    bws = _astra_list(spec, "bandwidth", where)
    lats = _astra_list(spec, "latency", where)
    if not len(kinds) == len(sizes) == len(bws) == len(lats):
        raise invalid(f"{where} list lengths (topology, npus_count, bandwidth, latency)",
                      (len(kinds), len(sizes), len(bws), len(lats)), "equal lengths")
    dims = []
    for k, (kind, size, bw, lat) in enumerate(zip(kinds, sizes, bws, lats)):
        key = str(kind).lower() if isinstance(kind, str) else None
        if key not in ASTRA_KINDS:
            raise invalid(f"{where} topology[{k}]", kind, "Ring, FullyConnected or Switch")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise invalid(f"{where} npus_count[{k}]", size, "an integer >= 1")
        dims.append(Dimension(ASTRA_KINDS[key], size,
                              _astra_number(bw, f"{where} bandwidth[{k}]", positive=True)
                              * ASTRA_GBPS,
                              _astra_number(lat, f"{where} latency[{k}]", positive=False)
                              / 1e9))  # ns; dividing keeps 500ns exactly 5e-07 s
    return multidim(dims, name=default_name or "astra-sim", family="hierarchical",
                    params={"format": "astra-sim"})


def dump_yaml_topology(topology: Topology, path: str | Path) -> None:
    """Write ``topology`` as an explicit-graph YAML file (one directed link per entry).

    Bandwidths are written in bytes/s and latencies in seconds (plain numbers),
    so :func:`load_yaml_topology` gives back identical link arrays.
    """
    import yaml

    data = {"name": topology.name}
    data.update(topology.to_spec_dict())
    from codesign.files import write_text_atomic

    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=None),
                      what="topology file")
