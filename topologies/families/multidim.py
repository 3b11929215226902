"""Multi-dimensional networks: ring, uniring, mesh, torus, fully-connected, switch,
hypercube and the hierarchical family (per dimension Ring, FullyConnected or
Switch, as in Themis Table 2 and ASTRA-sim's analytical network).

All of them are built by :func:`multidim` from a list of
:class:`~topologies.model.Dimension`, fastest-varying first: NPU id
``x0 + d0*(x1 + d1*(x2 ...))`` (docs/architecture.md section 4).  Per dimension:

* ``ring``: a cable between neighbours ``x`` and ``x+1 mod d``; a ring of size 2
  has one cable, not two (docs/architecture.md section 4).
* ``uniring``: one directed link ``x -> x+1 mod d``.
* ``mesh``: cables between ``x`` and ``x+1`` for ``x < d-1`` (no wrap-around).
* ``fc``: a cable between every pair of the dimension's NPUs.
* ``switch``: one switch per line of the dimension; a cable from each NPU of
  the line to it.

``links`` parallel copies are made of every cable; bandwidth is per directed
link.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from codesign.errors import invalid
from topologies.builder import LinkBuilder, check_topology_size
from topologies.families.options import (
    latency_option, bandwidth_option, parse_dims, parse_int, per_dim_bandwidth,
    per_dim_latency,
)
from topologies.model import DIMENSION_KINDS, Dimension, Topology
from topologies.registry import register_family

__all__ = ["multidim", "ring", "uniring", "mesh", "torus", "fully_connected", "switch",
           "hypercube", "hierarchical"]


def multidim(dims: Sequence[Dimension], *, name: str = "", family: str = "hierarchical",
             params: Mapping[str, object] | None = None) -> Topology:
    """Build a multi-dimensional network.

    Parameters
    ----------
    dims : sequence of Dimension
        Fastest-varying first.
    name, family : str, optional
        Display name and family recorded on the topology.
    params : mapping, optional
        Extra family parameters to record.

    Returns
    -------
    Topology
        ``prod(d.size)`` NPUs; switches for ``switch`` dimensions follow them.
        ``node_attrs["coords"]`` holds each NPU's coordinates.

    Notes
    -----
    O(N * sum of per-dimension degrees) links.

    Examples
    --------
    >>> t = multidim([Dimension("ring", 4, 25e9, 1e-6), Dimension("switch", 2, 50e9, 1e-6)])
    >>> t.npus, t.switches
    (8, 4)
    """
    dims = tuple(dims)
    if not dims:
        raise invalid("dimensions", dims, "at least one dimension")
    sizes = [int(d.size) for d in dims]
    n = math.prod(sizes)  # Python ints: no overflow for absurd shapes
    check_topology_size(n, _switch_count(dims, n), _link_count(dims, n), field="shape",
                        value="x".join(map(str, sizes)))
    ids = np.arange(n)
    strides = np.cumprod([1] + sizes[:-1])
    coords = np.stack([(ids // strides[k]) % sizes[k] for k in range(len(dims))], axis=1)
    # Switch dimensions get one switch per line (all NPUs sharing the other coordinates).
    n_switches = sum(n // d.size for d in dims if d.kind == "switch" and d.size > 1)
    b = LinkBuilder(n, n_switches)
    next_switch = n
    for k, d in enumerate(dims):
        s, stride = d.size, strides[k]
        if s == 1:
            continue
        x = coords[:, k]
        bw, lat, cnt = d.bandwidth_Bps, d.latency_s, d.links
        if d.kind == "ring":
            if s == 2:
                a = ids[x == 0]
                b.cable(a, a + stride, bw, lat, count=cnt)
            else:
                nxt = ids + ((x + 1) % s - x) * stride
                b.cable(ids, nxt, bw, lat, count=cnt)
        elif d.kind == "uniring":
            nxt = ids + ((x + 1) % s - x) * stride
            b.links(ids, nxt, bw, lat, count=cnt)
        elif d.kind == "mesh":
            a = ids[x < s - 1]
            b.cable(a, a + stride, bw, lat, count=cnt)
        elif d.kind == "fc":
            base = ids[x == 0]
            for i in range(s):
                for j in range(i + 1, s):
                    b.cable(base + i * stride, base + j * stride, bw, lat, count=cnt)
        elif d.kind == "switch":
            base = ids[x == 0]
            sw = next_switch + np.arange(base.size)
            next_switch += base.size
            for i in range(s):
                b.cable(base + i * stride, sw, bw, lat, count=cnt)
    kinds = "x".join(f"{d.kind}{d.size}" for d in dims)
    return b.build(name=name or f"{family}:{kinds}", family=family, params=params, dims=dims,
                   node_attrs={"coords": coords})


def _switch_count(dims: Sequence[Dimension], n: int) -> int:
    return sum(n // d.size for d in dims if d.kind == "switch" and d.size > 1)


def _link_count(dims: Sequence[Dimension], n: int) -> int:
    """Directed links :func:`multidim` will create (for the size check before building)."""
    total = 0
    for d in dims:
        s, lines = d.size, n // d.size
        if s == 1:
            continue
        per_line = {"ring": 2 * s if s > 2 else 2, "uniring": s, "mesh": 2 * (s - 1),
                    "fc": s * (s - 1), "switch": 2 * s}[d.kind]
        total += lines * per_line * d.links
    return total


def _uniform(kind: str, shape: Sequence[int], bandwidth: float | Sequence[float],
             latency: float | Sequence[float], links: int = 1) -> list[Dimension]:
    shape = list(shape)
    bws = list(bandwidth) if isinstance(bandwidth, (list, tuple)) else [bandwidth] * len(shape)
    lats = list(latency) if isinstance(latency, (list, tuple)) else [latency] * len(shape)
    if len(bws) != len(shape) or len(lats) != len(shape):
        raise invalid("per-dimension bandwidth/latency count", (len(bws), len(lats)),
                      f"{len(shape)} values, one per dimension")
    return [Dimension(kind, int(s), float(bw), float(lat), links)
            for s, bw, lat in zip(shape, bws, lats)]


def ring(n: int, *, bandwidth: float = 25e9, latency: float = 1e-6, name: str = "") -> Topology:
    """Bidirectional ring of ``n`` NPUs (bandwidth in bytes/s per direction, latency in s)."""
    return multidim(_uniform("ring", [n], bandwidth, latency), name=name or f"ring:{n}",
                    family="ring")


def uniring(n: int, *, bandwidth: float = 25e9, latency: float = 1e-6, name: str = "") -> Topology:
    """Unidirectional ring ``i -> i+1 mod n``."""
    return multidim(_uniform("uniring", [n], bandwidth, latency), name=name or f"uniring:{n}",
                    family="uniring")


def mesh(shape: Sequence[int], *, bandwidth: float | Sequence[float] = 25e9,
         latency: float | Sequence[float] = 1e-6, name: str = "") -> Topology:
    """n-D mesh (no wrap-around); per-dimension bandwidth (bytes/s) and latency (s) allowed."""
    return multidim(_uniform("mesh", shape, bandwidth, latency),
                    name=name or "mesh:" + "x".join(map(str, shape)), family="mesh")


def torus(shape: Sequence[int], *, bandwidth: float | Sequence[float] = 25e9,
          latency: float | Sequence[float] = 1e-6, name: str = "") -> Topology:
    """n-D torus: a bidirectional ring per dimension (size-2 dimensions have one cable)."""
    dims = _uniform("ring", shape, bandwidth, latency)
    params = {}
    sizes = [d.size for d in dims]
    if len(set(sizes)) == 1 and sizes[0] % 2 == 0 and sizes[0] >= 4 and \
            len({d.bandwidth_Bps for d in dims}) == 1:
        # k-ary n-cube with even k: the bisection cuts 2 k^(n-1) cables (Dally & Towles,
        # "Principles and Practices of Interconnection Networks", Section 3.3).
        n = int(np.prod(sizes))
        params["bisection_Bps"] = 2.0 * n / sizes[0] * dims[0].bandwidth_Bps
    return multidim(dims, name=name or "torus:" + "x".join(map(str, shape)), family="torus",
                    params=params)


def fully_connected(n: int, *, bandwidth: float = 25e9, latency: float = 1e-6,
                    name: str = "") -> Topology:
    """A cable between every pair of ``n`` NPUs."""
    return multidim(_uniform("fc", [n], bandwidth, latency), name=name or f"fc:{n}",
                    family="fc")


def switch(n: int, *, bandwidth: float = 25e9, latency: float = 1e-6, name: str = "") -> Topology:
    """Star: ``n`` NPUs on one switch (a message crosses two links)."""
    if n < 2:
        raise invalid("switch NPU count", n, "an integer >= 2")
    return multidim(_uniform("switch", [n], bandwidth, latency), name=name or f"switch:{n}",
                    family="switch")


def hypercube(dim: int, *, bandwidth: float = 25e9, latency: float = 1e-6,
              name: str = "") -> Topology:
    """Hypercube of ``2**dim`` NPUs (one cable per dimension, i.e. a 2x2x...x2 torus)."""
    return multidim(_uniform("ring", [2] * dim, bandwidth, latency),
                    name=name or f"hypercube:{dim}", family="hypercube",
                    params={"bisection_Bps": 2 ** (dim - 1) * bandwidth})


def hierarchical(dims: Sequence[Dimension], *, name: str = "") -> Topology:
    """Multi-dimensional network with one kind per dimension (Themis / ASTRA-sim style)."""
    return multidim(dims, name=name, family="hierarchical")


# ---------------------------------------------------------------- spec strings
_KEYS = ("bw", "lat")


def _single(shape: str, family: str, minimum: int) -> int:
    dims = parse_dims(shape, family, min_size=minimum)
    if len(dims) != 1:
        raise invalid(f"{family} shape", shape, "a single NPU count such as 8")
    return dims[0]


def _single_spec(family: str, build):
    def spec(shape, options):
        return build(_single(shape, family, 2), bandwidth=bandwidth_option(options, family),
                     latency=latency_option(options, family), name=f"{family}:{shape}")
    return spec


for _family, _build, _summary in (("ring", ring, "bidirectional ring of N NPUs"),
                                  ("uniring", uniring, "unidirectional ring of N NPUs"),
                                  ("fc", fully_connected, "fully-connected graph of N NPUs"),
                                  ("switch", switch, "N NPUs on one switch")):
    register_family(_family, keys=_KEYS, shape="N", example=f"{_family}:8",
                    summary=_summary)(_single_spec(_family, _build))


def _grid_spec(kind: str, family: str):
    def build(shape, options):
        dims = parse_dims(shape, family, min_size=1)
        if int(np.prod(dims)) < 2:
            raise invalid(f"{family} shape", shape, "at least 2 NPUs in all")
        bws = per_dim_bandwidth(options, len(dims), family)
        lats = per_dim_latency(options, len(dims), family)
        if family == "torus":
            return torus(dims, bandwidth=list(bws), latency=list(lats), name=f"torus:{shape}")
        return multidim(_uniform(kind, dims, list(bws), list(lats)),
                        name=f"{family}:{shape}", family=family)
    return build


register_family("mesh", keys=_KEYS, shape="D0xD1x...", example="mesh:5x5",
                summary="n-D mesh, per-dimension bw/lat")(_grid_spec("mesh", "mesh"))
register_family("torus", keys=_KEYS, shape="D0xD1x...", example="torus:4x4x4",
                summary="n-D torus, per-dimension bw/lat")(_grid_spec("ring", "torus"))


@register_family("hypercube", keys=_KEYS, shape="DIM", example="hypercube:4",
                 summary="hypercube of 2^DIM NPUs")
def _hypercube_spec(shape, options):
    dim = parse_int(shape, "hypercube dimension", minimum=1)
    if dim > 16:
        raise invalid("hypercube dimension", shape, "an integer from 1 to 16")
    return hypercube(dim, bandwidth=bandwidth_option(options, "hypercube"),
                     latency=latency_option(options, "hypercube"), name=f"hypercube:{shape}")


_KIND_ALIASES = {"ring": "ring", "r": "ring", "uniring": "uniring", "fc": "fc",
                 "fullyconnected": "fc", "switch": "switch", "sw": "switch", "mesh": "mesh"}


@register_family("hier", keys=("bw", "lat", "links"), shape="KIND SIZE _ KIND SIZE ...",
                 example="hier:ring4_fc2_switch4,bw=200GB/s:100GB/s:50GB/s",
                 summary="multi-dimensional: per dimension ring/fc/switch with size")
def _hier_spec(shape, options):
    import re

    if not shape:
        raise invalid("hier shape", shape, "dimensions such as ring4_fc2_switch4")
    dims_text = shape.lower().split("_")
    kinds, sizes = [], []
    for part in dims_text:
        m = re.fullmatch(r"([a-z]+)(\d+)", part)
        if not m or m.group(1) not in _KIND_ALIASES:
            raise invalid("hier dimension", part,
                          f"KIND followed by SIZE, KIND one of {', '.join(DIMENSION_KINDS)}")
        kinds.append(_KIND_ALIASES[m.group(1)])
        sizes.append(parse_int(m.group(2), f"hier dimension {part!r} size", minimum=1))
    bws = per_dim_bandwidth(options, len(sizes), "hier")
    lats = per_dim_latency(options, len(sizes), "hier")
    if "links" in options:
        parts = options["links"].split(":")
        if len(parts) not in (1, len(sizes)):
            raise invalid("hier links", options["links"], "one count or one per dimension")
        links = [parse_int(p, "hier links") for p in parts] * (len(sizes) if len(parts) == 1 else 1)
    else:
        links = [1] * len(sizes)
    if int(np.prod(sizes)) < 2:
        raise invalid("hier shape", shape, "at least 2 NPUs in all")
    dims = [Dimension(k, s, bw, lat, c) for k, s, bw, lat, c in zip(kinds, sizes, bws, lats, links)]
    return hierarchical(dims, name=f"hier:{shape}")
