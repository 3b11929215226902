"""TPU-style optical torus: scale-up cubes joined by optical circuit switches.

TPU v4 (Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for
Machine Learning with Hardware Support for Embeddings", ISCA'23; Google Cloud TPU
v4 documentation): a rack is a 4x4x4 *cube* of 64 chips wired electrically (copper
ICI); the 16 links on each of the cube's 6 faces leave the rack as optical links
into optical circuit switches (OCS), which join cubes into a 3D torus of any
multiple of the cube -- 64 cubes = 4096 chips in a 16x16x16 torus with 6,144
optical links ends on 48 OCSes of 128 used ports.  Every chip has 6 ICI links (one
per direction per axis).  Even a single cube closes its torus wrap-around through
the OCS.

*Twisted torus* (``twist=true``; Camarero, Martinez and Beivide, "Lattice graphs
for high-scale interconnection topologies", IEEE TPDS 2015; Cloud TPU v4 docs:
"AxBxC is either 2A=B=C or 2A=2B=C"): when the axes have sizes ``k`` and ``2k``, the
wrap-around link of every short (``k``) axis lands ``k`` further along every long
(``2k``) axis: ``(.., k-1, .., z) -> (.., 0, .., z + k mod 2k)``.  The twist shortens
the diameter and raises the bisection of the non-cubic tori.

Spec: ``tpu:4x4x4,cubes=C[,grid=AxBxC][,twist=true][,bw=..][,lat=..]``.  The cube
shape is the shape; the ``C`` cubes are arranged in a grid (default: the most
nearly cubic factorisation of ``C``, preferring a ``k,k,2k`` or ``k,2k,2k`` torus
when ``twist=true``); the torus is the grid times the cube.

Node ids: chip ``(x, y, z)`` is NPU ``x + X (y + Y z)`` (fastest-varying first).
``node_attrs``: ``coords``, ``cube`` (cube index of each chip: the scale-up domain;
its copper cables are priced as DACs, not as part of a server).  ``params``: ``cube_shape``, ``grid``, ``torus``, ``twist``,
``optical_cables``, ``electrical_cables``, ``ocs_ports`` (one per optical cable
end), ``bisection_Bps`` (untwisted torus: ``2 N / L_max x bw`` across the longest
axis, which is the minimum bisection of a k-ary torus with even sizes).
"""

from __future__ import annotations

import math

import numpy as np

from codesign.errors import invalid
from topologies.builder import LinkBuilder
from topologies.families.options import (
    DEFAULT_LAT, bandwidth_option, latency_option, parse_dims, parse_int,
)
from topologies.model import Dimension, Topology
from topologies.registry import register_family

__all__ = ["tpu_torus", "optical_mask", "optical_pairs", "ICI_LINK_BW", "MAX_CHIPS"]

#: TPU v4 ICI link: 400 Gb/s per direction (50 GB/s), 6 links per chip.
ICI_LINK_BW = 50e9
#: Largest chip count.
MAX_CHIPS = 1 << 18


def _grid(cubes: int, cube: tuple[int, int, int], twist: bool) -> tuple[int, int, int]:
    best = None
    for a in range(1, cubes + 1):
        if cubes % a:
            continue
        for b in range(1, cubes // a + 1):
            if (cubes // a) % b:
                continue
            g = (a, b, cubes // a // b)
            dims = [g[i] * cube[i] for i in range(3)]
            ok = _twistable(dims) if twist else True
            key = (not ok, max(dims) / min(dims), g)
            if best is None or key < best[0]:
                best = (key, g)
    return best[1]


def _twistable(dims) -> bool:
    k = min(dims)
    return all(d in (k, 2 * k) for d in dims) and max(dims) == 2 * k


def tpu_torus(cube: tuple[int, int, int] = (4, 4, 4), cubes: int = 1, *,
              grid: tuple[int, int, int] | None = None, twist: bool = False,
              bandwidth: float = ICI_LINK_BW, latency: float = DEFAULT_LAT,
              name: str = "") -> Topology:
    """Cubes of chips joined by OCS into a (possibly twisted) 3D torus (module docstring).

    Parameters
    ----------
    cube : (int, int, int)
        Chips per cube along each axis (TPU v4: 4x4x4).
    cubes : int
        Number of cubes.
    grid : (int, int, int), optional
        Cubes along each axis (product ``cubes``).
    twist : bool
        Twisted wrap-around (axes must be ``k`` and ``2k``).
    bandwidth, latency : float
        Every ICI link (electrical or optical), bytes/s per direction and seconds.
    name : str, optional

    Returns
    -------
    Topology

    Examples
    --------
    >>> t = tpu_torus((4, 4, 4), 64)
    >>> t.params["torus"], t.params["ocs_ports"], t.params["bisection_Bps"] / 1e12
    ([16, 16, 16], 6144, 25.6)
    """
    cube = tuple(int(c) for c in cube)
    if len(cube) != 3 or min(cube) < 1:
        raise invalid("tpu cube shape", "x".join(map(str, cube)), "three sizes, e.g. 4x4x4")
    if isinstance(cubes, bool) or not isinstance(cubes, (int, np.integer)) or cubes < 1:
        raise invalid("tpu cubes", cubes, "an integer >= 1")
    if grid is None:
        grid = _grid(int(cubes), cube, twist)
    grid = tuple(int(g) for g in grid)
    if len(grid) != 3 or min(grid) < 1 or math.prod(grid) != cubes:
        raise invalid("tpu grid", "x".join(map(str, grid)), f"three sizes whose product is "
                      f"cubes={cubes}")
    dims = [cube[i] * grid[i] for i in range(3)]
    n = math.prod(dims)
    if n < 2:
        raise invalid("tpu size", f"{n} chip", "at least 2 chips")
    if n > MAX_CHIPS:
        raise invalid("tpu size", f"{n} chips", f"at most {MAX_CHIPS} chips")
    if twist and not _twistable(dims):
        raise invalid("tpu twist", "x".join(map(str, dims)),
                      "a torus whose axes are k and 2k (k x k x 2k or k x 2k x 2k; TPU v4 rule "
                      "2A=B=C or 2A=2B=C), e.g. tpu:4x4x4,cubes=2,twist=true")
    bw, lat = float(bandwidth), float(latency)
    ids = np.arange(n)
    strides = [1, dims[0], dims[0] * dims[1]]
    coords = np.stack([(ids // strides[k]) % dims[k] for k in range(3)], axis=1)
    k_short = min(dims)
    long_axes = [i for i in range(3) if twist and dims[i] == 2 * k_short]
    b = LinkBuilder(n, 0)
    for k in range(3):
        s = dims[k]
        if s == 1:
            continue
        x = coords[:, k]
        if s == 2 and not (twist and dims[k] == k_short):
            a = ids[x == 0]
            b.cable(a, a + strides[k], bw, lat)
            continue
        inner = ids[x < s - 1]
        b.cable(inner, inner + strides[k], bw, lat)
        last = coords[x == s - 1].copy()
        src = ids[x == s - 1]
        last[:, k] = 0
        if twist and dims[k] == k_short:
            for j in long_axes:
                last[:, j] = (last[:, j] + k_short) % dims[j]
        dst = last[:, 0] + dims[0] * (last[:, 1] + dims[1] * last[:, 2])
        b.cable(src, dst, bw, lat)
    cube_of = ((coords[:, 0] // cube[0]) + grid[0] * ((coords[:, 1] // cube[1])
               + grid[1] * (coords[:, 2] // cube[2])))
    topo_links = b.build(name="tmp", family="tpu", node_attrs={"coords": coords,
                                                               "cube": cube_of},
                         require_connected=False)
    mask = optical_mask(topo_links)
    optical = int(mask.sum()) // 2
    params = {"cube_shape": list(cube), "grid": list(grid), "torus": dims, "twist": bool(twist),
              "cubes": int(cubes), "chips": n, "link_bandwidth_Bps": bw,
              "optical_cables": optical, "electrical_cables": int((~mask).sum()) // 2,
              "ocs_ports": 2 * optical}
    if not twist:
        # Torus distances add up per axis (ring distance min(x, d - x)): closed forms so a
        # 4096-chip pod needs no all-pairs table.
        ring_sum = [sum(min(x, d - x) for x in range(d)) for d in dims]
        params["diameter"] = int(sum(d // 2 for d in dims))
        params["mean_path_length"] = (n * sum(rs * n // d for rs, d in zip(ring_sum, dims))
                                      / (n * (n - 1)))
    if not twist and all(d % 2 == 0 or d == 1 for d in dims) and max(dims) > 2:
        # Cut the longest axis in half: 2 planes of N / L_max links each (wrap-around).
        params["bisection_Bps"] = 2 * n // max(dims) * bw
    shape_dims = () if twist else tuple(Dimension("ring", d, bw, lat) for d in dims)
    return Topology(n, 0, topo_links.src, topo_links.dst, topo_links.bandwidth,
                    topo_links.latency, name=name or f"tpu:{'x'.join(map(str, cube))},cubes={cubes}",
                    family="tpu", params=params, dims=shape_dims,
                    node_attrs={"coords": coords, "cube": cube_of})


def optical_mask(topology) -> np.ndarray:
    """Directed links of a ``tpu`` topology that go through the OCS layer.

    A link is electrical when both chips are in the same cube and adjacent there
    (one step along one axis, no wrap-around); every other link -- between cubes,
    or a wrap-around, even inside one cube -- is an optical circuit.
    """
    return optical_pairs(topology, topology.src, topology.dst)


def optical_pairs(topology, u, v) -> np.ndarray:
    """Whether the chip pairs ``u[i] - v[i]`` of a ``tpu`` topology are joined through the
    OCS (rule of :func:`optical_mask`)."""
    coords = np.asarray(topology.node_attrs["coords"])
    cube = np.asarray(topology.node_attrs["cube"])
    u, v = np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64)
    step = np.abs(coords[u] - coords[v]).sum(axis=1)
    return (cube[u] != cube[v]) | (step != 1)


@register_family("tpu", keys=("cubes", "grid", "twist", "bw", "lat"), shape="AxBxC (cube)",
                 example="tpu:2x2x2,cubes=2,twist=true",
                 summary="TPU-style 3D torus: cubes of chips joined by optical circuit switches, "
                         "optional twist (tpu:4x4x4,cubes=64 = TPU v4 pod)")
def _tpu_spec(shape, options):
    cube = parse_dims(shape or "4x4x4", "tpu")
    if len(cube) != 3:
        raise invalid("tpu cube shape", shape, "three sizes, e.g. 4x4x4")
    cubes = parse_int(options.get("cubes", "1"), "tpu cubes", minimum=1)
    if cubes > 4096:
        raise invalid("tpu cubes", cubes, "at most 4096")
    grid = parse_dims(options["grid"], "tpu grid") if "grid" in options else None
    if grid is not None and len(grid) != 3:
        raise invalid("tpu grid", options["grid"], "three sizes, e.g. 4x4x4")
    twist = {"true": True, "false": False}.get(options.get("twist", "false").lower())
    if twist is None:
        raise invalid("tpu twist", options["twist"], "true or false")
    items = [shape] if shape else []
    items += [f"{k}={v}" for k, v in options.items()]
    return tpu_torus(cube, cubes, grid=grid, twist=twist,
                     bandwidth=bandwidth_option(options, "tpu", default=ICI_LINK_BW),
                     latency=latency_option(options, "tpu"),
                     name="tpu:" + ",".join(items) if items else "tpu")
