"""Themis (ISCA'22) Table 2 platforms as named presets: ``themis:NAME``.

Table 2 lists six 1024-NPU multi-dimensional networks with, per dimension
(dim1 first = fastest-varying), the topology, size, bandwidth per link
(Gb/s), links per NPU and network latency (ns, the ``step_latency`` of
Sec. 4.4).  :class:`~topologies.model.Dimension` counts parallel links per
connected NPU *pair*, so the table's links per NPU are divided by the number
of neighbours an NPU has in that dimension: 2 on a (bidirectional) ring,
``P - 1`` on a fully-connected dimension, 1 (its uplink) on a switch.  The
aggregate bandwidth per NPU (Table 2's "Aggr BW/NPU") is then
``bandwidth * links * neighbours``.

Names are the table's in lower case with ``-`` separators: ``2d-sw-sw``,
``3d-sw-sw-sw-homo``, ``3d-sw-sw-sw-hetero``, ``3d-fc-ring-sw``,
``4d-ring-sw-sw-sw``, ``4d-ring-fc-ring-sw``.
"""

from __future__ import annotations

from codesign.errors import invalid
from topologies.families.multidim import multidim
from topologies.model import Dimension
from topologies.registry import register_family

__all__ = ["THEMIS_TABLE2", "themis_preset", "preset_dimensions"]

#: Table 2 rows: name -> ((kind, size, Gb/s per link, links per NPU, latency ns), ...).
THEMIS_TABLE2: dict[str, tuple[tuple[str, int, float, int, float], ...]] = {
    "2d-sw-sw": (("switch", 16, 200, 6, 700), ("switch", 64, 800, 1, 1700)),
    "3d-sw-sw-sw-homo": (("switch", 16, 200, 4, 700), ("switch", 8, 200, 4, 700),
                         ("switch", 8, 800, 1, 1700)),
    "3d-sw-sw-sw-hetero": (("switch", 16, 200, 8, 700), ("switch", 8, 200, 4, 700),
                           ("switch", 8, 400, 1, 1700)),
    "3d-fc-ring-sw": (("fc", 8, 200, 7, 700), ("ring", 16, 200, 4, 700),
                      ("switch", 8, 400, 1, 1700)),
    "4d-ring-sw-sw-sw": (("ring", 4, 1000, 2, 20), ("switch", 4, 200, 8, 700),
                         ("switch", 8, 200, 4, 700), ("switch", 8, 400, 1, 1700)),
    "4d-ring-fc-ring-sw": (("ring", 4, 1500, 2, 20), ("fc", 8, 200, 7, 700),
                           ("ring", 4, 200, 6, 700), ("switch", 8, 800, 1, 1700)),
}


def _neighbours(kind: str, size: int) -> int:
    return {"ring": 2 if size > 2 else 1, "fc": size - 1, "switch": 1}[kind]


def preset_dimensions(name: str) -> tuple[Dimension, ...]:
    """The :class:`Dimension` tuple of Table 2 row ``name`` (bandwidth in B/s, latency in s).

    Raises
    ------
    InvalidSpecError
        If ``name`` is not a Table 2 row.
    """
    rows = THEMIS_TABLE2.get(name.lower())
    if rows is None:
        raise invalid("themis preset", name, f"one of {', '.join(THEMIS_TABLE2)}")
    dims = []
    for kind, size, gbps, links_per_npu, lat_ns in rows:
        # Links per NPU -> parallel links per connected pair (Dimension.links).
        per_pair = max(1, links_per_npu // _neighbours(kind, size))
        dims.append(Dimension(kind, size, gbps * 1e9 / 8, lat_ns / 1e9, per_pair))
    return tuple(dims)


def themis_preset(name: str):
    """Build Table 2 platform ``name`` (1024 NPUs) as a multi-dimensional topology.

    Examples
    --------
    >>> t = themis_preset("2d-sw-sw")
    >>> t.npus, [d.size for d in t.dims]
    (1024, [16, 64])
    """
    dims = preset_dimensions(name)
    return multidim(dims, name=f"themis:{name.lower()}", family="themis",
                    params={"preset": name.lower()})


@register_family("themis", keys=(), shape="NAME", example="themis:3d-sw-sw-sw-hetero",
                 summary="Themis ISCA'22 Table 2 platforms (1024 NPUs): " + ", ".join(THEMIS_TABLE2))
def _themis_spec(shape, options):
    return themis_preset(shape)
