"""The hardware catalog: GPU peak FLOP/s, memory, servers and intra-server fabric.

The built-in catalog is ``codesign/workloads/data/hardware.yaml`` (V100, A100-40,
A100-80, H100, H200, B200, from NVIDIA's datasheets; dense tensor-core peaks), with the
kernel-model parameters of ``codesign/workloads/data/compute_profiles.yaml``
(:class:`~codesign.workloads.efficiency.ComputeProfile`, one per GPU name).  A user file
of the same shape replaces the catalog: :func:`load_hardware_catalog`; a GPU in it may
carry its own ``compute:`` mapping (what ``codesign calibrate`` writes), otherwise it
takes the built-in profile of the same name, if any.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from codesign.errors import invalid
from codesign.specs import check_choice, check_keys, get_int, get_str, load_yaml
from codesign.units import BARE_BANDWIDTH_BPS, BARE_MEMORY_BYTES, parse_bandwidth, parse_size
from codesign.workloads.efficiency import ComputeProfile, profile_from_dict

__all__ = ["Hardware", "HardwareCatalog", "DTYPES", "get_hardware", "hardware_names",
           "load_hardware_catalog", "catalog_from_dict", "parse_flops", "builtin_profiles",
           "hardware_to_yaml"]

#: Number formats a catalog may give a peak for (``bf16`` reads the ``fp16`` peak and
#: ``fp8-cs``, fp8 with current scaling, the ``fp8`` one; ``mxfp8``, the microscaling
#: format of Blackwell's tensor cores, has its own entry where the GPU runs it).
DTYPES = ("fp8", "mxfp8", "fp16", "bf16", "tf32", "fp32", "fp64")
#: Formats that read another format's peak (same tensor-core instructions).
_PEAK_OF = {"bf16": "fp16", "fp8-cs": "fp8"}

_FLOPS_RE = re.compile(r"^\s*([+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*"
                       r"([kKMGTPE])?\s*(?:FLOP/s|FLOPS|flop/s|flops)?\s*$")
_SCALE = {None: 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


#: Plausible dense peak of one GPU, FLOP/s: B200's FP4 is about 1e16 (a hundredth of the
#: upper end); below 1 GFLOP/s is no accelerator (1e-300 TFLOP/s timed 2.5e303 s).
MIN_PEAK_FLOPS, MAX_PEAK_FLOPS = 1e9, 1e18


def parse_flops(value: Any, *, field: str = "peak_flops") -> float:
    """Parse a FLOP rate: a number (FLOP/s) or a string such as ``312TFLOP/s``.

    Raises
    ------
    InvalidSpecError
        Not a positive finite rate.
    """
    if isinstance(value, bool):
        raise invalid(field, value, "a rate such as 312TFLOP/s")
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str) and (m := _FLOPS_RE.match(value)):
        v = float(m.group(1)) * _SCALE[m.group(2)]
    else:
        raise invalid(field, value, "a rate such as 312TFLOP/s or 3.12e14")
    if not math.isfinite(v) or not MIN_PEAK_FLOPS <= v <= MAX_PEAK_FLOPS:
        raise invalid(field, value, "a rate such as 312TFLOP/s, from 1GFLOP/s to 1EFLOP/s "
                      "per GPU")
    return v


@dataclass(frozen=True)
class Hardware:
    """One accelerator model and its reference server.

    Parameters
    ----------
    name : str
        Catalog name (``"H100"``).
    peak : tuple of (str, float)
        Dense peak FLOP/s per number format (see :meth:`peak_flops`).
    memory_bytes : float
        HBM capacity, bytes.
    memory_bandwidth_Bps : float
        HBM bandwidth, bytes/s.
    gpus_per_server : int
        GPUs in the reference server.
    fabric : str
        Intra-server fabric.
    fabric_bandwidth_Bps : float
        Intra-server fabric bandwidth per GPU per direction, bytes/s.
    nic_bandwidth_Bps : float or None
        Scale-out bandwidth per GPU per direction, bytes/s.
    host_memory_bytes, host_link_Bps : float or None
        Host (CPU) memory per GPU of the reference server, bytes, and the GPU's link to
        it per direction, bytes/s (where activations are offloaded, strategy
        ``offload_layers``); ``None``: not catalogued (no offloading).
    description, source : str
        What it is; where the numbers come from.
    compute : ComputeProfile or None
        Kernel-model parameters (:mod:`codesign.workloads.efficiency`); ``None``: the
        constant-efficiency roofline.
    """

    name: str
    peak: tuple[tuple[str, float], ...]
    memory_bytes: float
    memory_bandwidth_Bps: float
    gpus_per_server: int
    fabric: str
    fabric_bandwidth_Bps: float
    nic_bandwidth_Bps: float | None = None
    description: str = ""
    source: str = ""
    compute: ComputeProfile | None = None
    host_memory_bytes: float | None = None
    host_link_Bps: float | None = None

    def peak_flops(self, dtype: str = "fp16") -> float:
        """Dense peak FLOP/s for number format ``dtype`` (``bf16`` reads ``fp16``,
        ``fp8-cs`` reads ``fp8``, where the catalog gives no entry of their own).

        Raises
        ------
        InvalidSpecError
            The catalog gives no peak for ``dtype``; the message lists those it gives.
        """
        table = dict(self.peak)
        key = self._peak_key(dtype)
        if key is None:
            raise invalid(f"{self.name} dtype", dtype, f"one of {', '.join(table)}")
        return table[key]

    def runs_format(self, dtype: str) -> bool:
        """Whether :meth:`peak_flops` has a peak for number format ``dtype``."""
        return self._peak_key(dtype) is not None

    def _peak_key(self, dtype: str) -> str | None:
        """The catalog entry whose peak ``dtype`` runs at, or None."""
        table = dict(self.peak)
        key = dtype if dtype in table else _PEAK_OF.get(dtype, dtype)
        return key if key in table else None

    def with_compute_parameters(self, **values: float) -> Hardware:
        """A copy whose compute profile has some of its fitted efficiencies replaced
        (:meth:`ComputeProfile.with_parameters`).

        Raises
        ------
        InvalidSpecError
            The GPU has no compute profile, or a name is not a fitted parameter.
        """
        if self.compute is None:
            raise invalid(f"{self.name} compute", None, "a compute profile (sms, efficiencies)")
        return replace(self, compute=self.compute.with_parameters(**values))

    def with_attention_kernel(self, kernel: str | None) -> Hardware:
        """A copy whose fused attention runs ``kernel`` (``None``: this GPU's default,
        :meth:`ComputeProfile.with_attention_kernel`).

        Raises
        ------
        InvalidSpecError
            An unknown kernel, one without a measured speed on this GPU, or a GPU
            without a compute profile.
        """
        if kernel is None:
            return self
        if self.compute is None:
            raise invalid("attention_kernel", kernel,
                          f"no kernel choice for {self.name}: it has no compute profile "
                          "(the roofline times its attention)")
        return replace(self, compute=self.compute.with_attention_kernel(kernel))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "peak_flops": dict(self.peak), "memory_bytes": self.memory_bytes,
                "memory_bandwidth_Bps": self.memory_bandwidth_Bps,
                "gpus_per_server": self.gpus_per_server, "fabric": self.fabric,
                "fabric_bandwidth_Bps": self.fabric_bandwidth_Bps,
                "nic_bandwidth_Bps": self.nic_bandwidth_Bps,
                "host_memory_bytes": self.host_memory_bytes,
                "host_link_Bps": self.host_link_Bps, "source": self.source,
                "compute": None if self.compute is None else self.compute.to_dict()}


@dataclass(frozen=True)
class HardwareCatalog:
    """Named :class:`Hardware` entries and where they came from."""

    gpus: tuple[Hardware, ...]
    description: str = ""
    source: str = ""

    def names(self) -> list[str]:
        return [g.name for g in self.gpus]

    def get(self, name: str) -> Hardware:
        """The entry called ``name`` (case-insensitive)."""
        for g in self.gpus:
            if isinstance(name, str) and g.name.lower() == name.lower():
                return g
        raise invalid("hardware", name, f"one of {', '.join(self.names())}")


_GPU_KEYS = ("description", "source", "peak_flops", "memory", "memory_bandwidth",
             "gpus_per_server", "fabric", "fabric_bandwidth", "nic_bandwidth", "compute",
             "host_memory", "host_bandwidth")
_GPU_REQUIRED = ("peak_flops", "memory", "memory_bandwidth", "gpus_per_server",
                 "fabric_bandwidth")


def catalog_from_dict(spec: Any, *, source: str = "",
                      profiles: Mapping[str, ComputeProfile] | None = None) -> HardwareCatalog:
    """Build a catalog from the YAML structure of ``hardware.yaml``.

    ``profiles`` gives the compute profile of GPUs without a ``compute`` key, by name.

    Raises
    ------
    InvalidSpecError
        Unknown or missing keys, a bad rate, size or count; the message names the field.
    """
    where = f"hardware catalog {source}".strip()
    check_keys(spec, allowed=("description", "gpus"), required=("gpus",), where=where)
    gpus_spec = spec["gpus"]
    if not isinstance(gpus_spec, Mapping) or not gpus_spec:
        raise invalid(f"{where} gpus", gpus_spec, "a non-empty mapping of GPU names to specs")
    gpus = []
    for name, g in gpus_spec.items():
        gw = f"{where} gpus[{name!r}]"
        if not isinstance(name, str) or not name:
            raise invalid(f"{where} gpu name", name, "a non-empty string")
        check_keys(g, allowed=_GPU_KEYS, required=_GPU_REQUIRED, where=gw)
        peaks = g["peak_flops"]
        if not isinstance(peaks, Mapping) or not peaks:
            raise invalid(f"{gw} peak_flops", peaks, "a mapping such as {fp16: 312TFLOP/s}")
        peak = []
        for dtype, rate in peaks.items():
            check_choice(f"{gw} peak_flops key", dtype, DTYPES)
            peak.append((dtype, parse_flops(rate, field=f"{gw} peak_flops.{dtype}")))
        texts = {k: get_str(g, k, "", where=gw) for k in ("description", "source", "fabric")}
        nic = g.get("nic_bandwidth")
        compute = (profile_from_dict(g["compute"], where=f"{gw} compute") if "compute" in g
                   else (profiles or {}).get(name))
        gpus.append(Hardware(
            name=name, peak=tuple(peak),
            memory_bytes=parse_size(g["memory"], field=f"{gw} memory", bare=BARE_MEMORY_BYTES),
            memory_bandwidth_Bps=parse_bandwidth(g["memory_bandwidth"],
                                                 field=f"{gw} memory_bandwidth",
                                                 bare=BARE_BANDWIDTH_BPS),
            gpus_per_server=get_int(g, "gpus_per_server", where=gw, minimum=1),
            fabric=texts["fabric"],
            fabric_bandwidth_Bps=parse_bandwidth(g["fabric_bandwidth"],
                                                 field=f"{gw} fabric_bandwidth",
                                                 bare=BARE_BANDWIDTH_BPS),
            nic_bandwidth_Bps=None if nic is None else parse_bandwidth(
                nic, field=f"{gw} nic_bandwidth", bare=BARE_BANDWIDTH_BPS),
            host_memory_bytes=None if g.get("host_memory") is None else parse_size(
                g["host_memory"], field=f"{gw} host_memory", bare=BARE_MEMORY_BYTES),
            host_link_Bps=None if g.get("host_bandwidth") is None else parse_bandwidth(
                g["host_bandwidth"], field=f"{gw} host_bandwidth", bare=BARE_BANDWIDTH_BPS),
            description=texts["description"], source=texts["source"], compute=compute))
    return HardwareCatalog(tuple(gpus), description=get_str(spec, "description", "", where=where),
                           source=source)


@lru_cache(maxsize=1)
def _default_catalog() -> HardwareCatalog:
    from importlib.resources import as_file, files

    with as_file(files("codesign.workloads") / "data" / "hardware.yaml") as path:
        return catalog_from_dict(load_yaml(path), source="codesign/workloads/data/hardware.yaml",
                                 profiles=builtin_profiles())


@lru_cache(maxsize=1)
def builtin_profiles() -> dict[str, ComputeProfile]:
    """The kernel-model profiles of ``codesign/workloads/data/compute_profiles.yaml``."""
    from importlib.resources import as_file, files

    with as_file(files("codesign.workloads") / "data" / "compute_profiles.yaml") as path:
        spec = load_yaml(path)
    where = "compute_profiles.yaml"
    check_keys(spec, allowed=("description", "gpus"), required=("gpus",), where=where)
    return {name: profile_from_dict(p, where=f"{where} gpus[{name!r}]")
            for name, p in spec["gpus"].items()}


def load_hardware_catalog(path: str | Path | None = None) -> HardwareCatalog:
    """Load a hardware catalog; ``None`` gives the built-in one.

    A user file replaces the built-in catalog entirely (same keys as
    ``codesign/workloads/data/hardware.yaml``).
    """
    if path is None:
        return _default_catalog()
    return catalog_from_dict(load_yaml(path), source=str(path), profiles=builtin_profiles())


def hardware_names() -> list[str]:
    """Names in the built-in catalog."""
    return _default_catalog().names()


def get_hardware(name: str | Hardware, catalog: HardwareCatalog | None = None) -> Hardware:
    """Look up ``name`` in ``catalog`` (default: the built-in one); a Hardware passes through.

    Raises
    ------
    InvalidSpecError
        Unknown name; the message lists the catalog's names.
    """
    if isinstance(name, Hardware):
        return name
    return (catalog or _default_catalog()).get(name)



def hardware_to_yaml(hw: Hardware) -> dict[str, Any]:
    """A catalog file (the structure of ``hardware.yaml``) holding ``hw`` alone.

    Rates are written as plain numbers (FLOP/s, bytes and bytes/s), which the parser
    accepts; the ``compute`` profile is included when the GPU has one.
    """
    g: dict[str, Any] = {
        "description": hw.description, "source": hw.source,
        "peak_flops": {k: float(v) for k, v in hw.peak},
        "memory": float(hw.memory_bytes), "memory_bandwidth": float(hw.memory_bandwidth_Bps),
        "gpus_per_server": hw.gpus_per_server, "fabric": hw.fabric,
        "fabric_bandwidth": float(hw.fabric_bandwidth_Bps)}
    if hw.nic_bandwidth_Bps is not None:
        g["nic_bandwidth"] = float(hw.nic_bandwidth_Bps)
    if hw.host_memory_bytes is not None:
        g["host_memory"] = float(hw.host_memory_bytes)
    if hw.host_link_Bps is not None:
        g["host_bandwidth"] = float(hw.host_link_Bps)
    if hw.compute is not None:
        g["compute"] = hw.compute.to_dict()
    return {"description": f"{hw.name} profile", "gpus": {hw.name: g}}
