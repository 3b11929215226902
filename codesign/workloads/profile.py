"""Measured per-layer compute times that replace the roofline: :func:`load_profile`.

Three file formats are read (chosen by content, CSV by the ``.csv`` suffix):

CSV (``.csv``), one measurement per row, header required::

    layer,batch,fwd_s,bwd_s
    block0.attn,8,1.9ms,3.8ms
    Dense_4096_4096,256,0.00017,0.00030

``layer`` is a layer name or a layer ``signature`` (``Dense_<in>_<out>``,
``Embed_<rows>x<dim>``...); ``batch`` the samples measured; times are seconds or
time strings (``1.9ms``, ``120us``).

JSON::

    {"measurements": [{"layer": "block0.attn", "batch": 8, "fwd_s": 0.0019, "bwd_s": 0.0038}]}

FlexFlow measure files (the ``--mfile`` of FlexFlow's simulator, as TopoOpt ships them
in ``simulation/scripts/.../measure_*.json``)::

    {"batch_size": 32768, "ngpus": 128,
     "measurements": [{"name": "Dense_2048_2048", "pc_str": "2-1-128",
                       "fw_time": 0.112845, "bw_time": 0.178074, "mem_req": 35667968}]}

``name`` is FlexFlow's operator signature, ``fw_time`` / ``bw_time`` are milliseconds
for one partition, and ``pc_str`` is the parallel configuration: the number of
dimensions, then the partition degree of each, the sample dimension last (the memory
figures confirm it: ``mem_req`` falls with the last degree as the per-partition batch
does).  Only partitions split along samples alone are read, as ``batch_size / degree``
samples; partitions that split weights have no per-sample meaning here and are
skipped (counted in :attr:`Profile.skipped`).

Lookup and scaling: a layer matches by name first, then by signature.  At a measured
batch the measured times are used; between two measured batches they are linearly
interpolated; outside the measured range the nearest measurement is scaled in
proportion to the batch.
"""

from __future__ import annotations

import bisect
import csv
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_keys, check_number
from codesign.units import parse_time
from codesign.workloads.model import Layer

__all__ = ["Profile", "load_profile", "profile_from_measurements"]


@dataclass(frozen=True)
class Profile:
    """Measured ``(batch, fwd_s, bwd_s)`` points per layer name or signature."""

    points: tuple[tuple[str, tuple[tuple[float, float, float], ...]], ...]
    source: str = ""
    format: str = ""
    skipped: int = 0

    def keys(self) -> list[str]:
        return [k for k, _ in self.points]

    def _table(self) -> dict[str, tuple[tuple[float, float, float], ...]]:
        return dict(self.points)

    def key_for(self, layer: Layer) -> str | None:
        """The profile key ``layer`` matches (its name, else its signature), or None."""
        table = self._table()
        if layer.name in table:
            return layer.name
        if layer.signature and layer.signature in table:
            return layer.signature
        return None

    def time(self, layer: Layer, batch: float) -> tuple[float, float] | None:
        """``(fwd_s, bwd_s)`` of ``layer`` at ``batch`` samples, or None if not profiled."""
        key = self.key_for(layer)
        if key is None:
            return None
        pts = self._table()[key]
        batches = [p[0] for p in pts]
        i = bisect.bisect_left(batches, batch)
        if i < len(pts) and batches[i] == batch:
            return pts[i][1], pts[i][2]
        if 0 < i < len(pts):
            (b0, f0, w0), (b1, f1, w1) = pts[i - 1], pts[i]
            t = (batch - b0) / (b1 - b0)
            return f0 + t * (f1 - f0), w0 + t * (w1 - w0)
        b, f, w = pts[0] if i == 0 else pts[-1]
        return f * batch / b, w * batch / b


def profile_from_measurements(rows: list[tuple[str, float, float, float]], *,
                              source: str = "", format: str = "", skipped: int = 0
                              ) -> Profile:
    """A Profile from ``(key, batch, fwd_s, bwd_s)`` rows (repeats are averaged)."""
    acc: dict[str, dict[float, list[tuple[float, float]]]] = {}
    for key, batch, fwd, bwd in rows:
        acc.setdefault(key, {}).setdefault(batch, []).append((fwd, bwd))
    points = []
    for key, by_batch in acc.items():
        pts = tuple((b, sum(f for f, _ in v) / len(v), sum(w for _, w in v) / len(v))
                    for b, v in sorted(by_batch.items()))
        points.append((key, pts))
    if not points:
        raise InvalidSpecError(f"invalid profile {source!r}: no usable measurements")
    return Profile(tuple(points), source=source, format=format, skipped=skipped)


def _key(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, value, "a layer name or signature")
    return value.strip()


def load_profile(path: str | Path) -> Profile:
    """Read a measured profile (CSV, JSON or FlexFlow measure file; see the module doc).

    Raises
    ------
    InvalidSpecError
        Unreadable file, unknown format, missing or bad field (the message names it).
    """
    p = Path(path)
    from codesign.files import load_json_file, read_text

    if p.suffix.lower() == ".csv":
        return _from_csv(read_text(p, what="profile"), str(p))
    data = load_json_file(p, what="profile")
    return profile_from_json(data, source=str(p))


def profile_from_json(data: Any, *, source: str = "") -> Profile:
    """A Profile from parsed JSON: the native or the FlexFlow measure structure."""
    where = f"profile {source}".strip()
    if not isinstance(data, Mapping) or not isinstance(data.get("measurements"), list):
        raise InvalidSpecError(f"invalid {where}: expected an object with a 'measurements' "
                               f"list (native or FlexFlow measure format)")
    items = data["measurements"]
    if "batch_size" in data or any(isinstance(m, Mapping) and "fw_time" in m for m in items):
        return _from_flexflow(data, where, source)
    check_keys(data, allowed=("measurements", "description"), where=where)
    rows = []
    for i, m in enumerate(items):
        mw = f"{where} measurements[{i}]"
        check_keys(m, allowed=("layer", "batch", "fwd_s", "bwd_s"),
                   required=("layer", "batch", "fwd_s", "bwd_s"), where=mw)
        rows.append((_key(m["layer"], f"{mw} layer"), check_number(f"{mw} batch", m["batch"]),
                     parse_time(m["fwd_s"], field=f"{mw} fwd_s"),
                     parse_time(m["bwd_s"], field=f"{mw} bwd_s")))
    return profile_from_measurements(rows, source=source, format="json")


def _from_flexflow(data: Mapping[str, Any], where: str, source: str) -> Profile:
    check_keys(data, allowed=("batch_size", "ngpus", "measurements"),
               required=("batch_size", "measurements"), where=where)
    batch = check_number(f"{where} batch_size", data["batch_size"])
    rows, skipped = [], 0
    for i, m in enumerate(data["measurements"]):
        mw = f"{where} measurements[{i}]"
        check_keys(m, allowed=("name", "pc_str", "fw_time", "bw_time", "mem_req"),
                   required=("name", "pc_str", "fw_time", "bw_time"), where=mw)
        degrees = _pc_degrees(m["pc_str"], f"{mw} pc_str")
        if any(d != 1 for d in degrees[:-1]):
            skipped += 1  # weights are split: no per-sample time to take from it
            continue
        rows.append((_key(m["name"], f"{mw} name"), batch / degrees[-1],
                     parse_time(m["fw_time"], field=f"{mw} fw_time") * 1e-3,
                     parse_time(m["bw_time"], field=f"{mw} bw_time") * 1e-3))
    return profile_from_measurements(rows, source=source, format="flexflow", skipped=skipped)


def _pc_degrees(text: Any, field: str) -> list[int]:
    rule = "'NDIMS-D1-...-DN' with positive integers, e.g. 2-1-128"
    if not isinstance(text, str):
        raise invalid(field, text, rule)
    try:
        parts = [int(x) for x in text.split("-")]
    except ValueError:
        raise invalid(field, text, rule) from None
    if len(parts) < 2 or parts[0] != len(parts) - 1 or any(x < 1 for x in parts):
        raise invalid(field, text, rule)
    return parts[1:]


def _from_csv(text: str, source: str) -> Profile:
    where = f"profile {source}"
    reader = csv.reader(text.splitlines())
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InvalidSpecError(f"invalid {where}: empty file (expected a header "
                               f"layer,batch,fwd_s,bwd_s)") from None
    if sorted(header) != sorted(["layer", "batch", "fwd_s", "bwd_s"]):
        raise invalid(f"{where} header", ",".join(header), "the columns layer,batch,fwd_s,bwd_s")
    col = {h: i for i, h in enumerate(header)}
    rows = []
    for n, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        rw = f"{where} line {n}"
        if len(row) != len(header):
            raise invalid(rw, ",".join(row), f"{len(header)} comma-separated fields")
        cell = {h: row[i].strip() for h, i in col.items()}
        try:
            batch = float(cell["batch"])
        except ValueError:
            raise invalid(f"{rw} batch", cell["batch"], "a number > 0") from None
        rows.append((_key(cell["layer"], f"{rw} layer"), check_number(f"{rw} batch", batch),
                     parse_time(cell["fwd_s"], field=f"{rw} fwd_s"),
                     parse_time(cell["bwd_s"], field=f"{rw} bwd_s")))
    return profile_from_measurements(rows, source=source, format="csv")
