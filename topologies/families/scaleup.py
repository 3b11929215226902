"""Scale-up domains: GPUs joined by an NVLink-switch crossbar (DGX/HGX, NVL72 racks).

A scale-up domain of ``G`` GPUs is modelled as **one switch node** with a cable of
the GPU's full scale-up bandwidth to each GPU: a non-blocking crossbar, which is
what NVSwitch provides (NVIDIA, "NVLink and NVLink Switch", nvidia.com/en-us/data-
center/nvlink: fifth-generation NVLink, 18 links x 50 GB/s = 900 GB/s per GPU per
direction (1.8 TB/s bidirectional), up to 72 GPUs in one NVLink domain (GB200
NVL72); HGX H100: 18 NVLink 4 links = 450 GB/s per direction).  The same model
is used by ``dgx-a100`` / ``hgx-h100`` (:mod:`topologies.families.nodes`).

How a spec composes scale-up and scale-out (decided here):

* ``nvl:72[,bw=900GB/s,lat=..]`` -- one scale-up domain alone;
* every scale-out Clos family takes ``scaleup=G`` (GPUs per domain) with
  ``scaleup_bw=`` / ``scaleup_lat=``: its NPUs are GPUs, ``G`` consecutive NPUs
  form a domain with its own crossbar, and every GPU also has its own NIC into the
  scale-out fabric (``fattree:servers=128,radix=64,scaleup=8``,
  ``railopt:144,gpus=4,scaleup=72,scaleup_bw=900GB/s`` = 8 GB200 NVL72 racks on a
  rail-optimised fabric);
* ``tpu:4x4x4,...``: the 4x4x4 cube is the scale-up domain (electrical ICI) and the
  OCS layer joins cubes (:mod:`topologies.families.tpu`).

``node_attrs["server"]`` is the domain of every GPU, so the cost model treats the
crossbar as part of the domain (priced as NVLink switch trays by the parts
catalog, :mod:`topologies.parts`); ``params["scaleup_switches"]`` is
``[first_id, count]`` of the crossbar nodes and ``params["scaleup_size"]`` the
GPUs per domain, which :mod:`topologies.routing` uses to keep traffic inside a
domain on NVLink.

**Whose NVLink.**  A spec names no GPU, so a domain whose spec leaves its bandwidth out
(``scaleup_bw=`` on the Clos families, ``bw=`` on ``nvl``) gets the family default
(Clos families: NVLink 4, 450 GB/s, H100/H200; ``nvl``: NVLink 5, 900 GB/s) and is
marked ``params["scaleup_bandwidth_default"] = True``.  Where the GPU is known -- the
iteration model's :class:`evaluators.iteration.Cluster` (``codesign evaluate``, the
sweeps and what-ifs) -- :func:`with_gpu_scaleup` rebuilds such a
topology at the GPU's own ``fabric_bandwidth`` from the hardware catalog (B200 and GB200:
900 GB/s, A100: 300 GB/s), so ``railopt:2,gpus=8`` of B200s has B200 NVLink.  A
bandwidth written in the spec is kept whatever the GPU.  ``dgx-a100`` / ``hgx-h100``
(:mod:`topologies.families.nodes`) name their GPU and keep their own.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from codesign.units import spec_rate
from topologies.builder import LinkBuilder
from topologies.families.options import (
    DEFAULT_LAT, bandwidth_option, latency_option, parse_int,
)
from topologies.model import Topology
from topologies.registry import register_family

__all__ = ["NVLINK5_GPU_BW", "NVLINK4_GPU_BW", "add_scaleup", "scaleup_options", "nvl",
           "SCALEUP_KEYS", "DEFAULT_MARK", "mark_default_scaleup",
           "with_gpu_scaleup"]

#: NVLink 5 (Blackwell): 18 links x 50 GB/s per direction per GPU (nvidia.com NVLink page).
NVLINK5_GPU_BW = 900e9
#: NVLink 4 (Hopper): 18 links x 25 GB/s per direction per GPU (H100 datasheet: 900 GB/s
#: bidirectional).
NVLINK4_GPU_BW = 450e9
#: Option keys every scale-out family accepts for its scale-up domains.
SCALEUP_KEYS = ("scaleup", "scaleup_bw", "scaleup_lat")
#: ``params`` key: the scale-up bandwidth is the family default, not written in the spec.
DEFAULT_MARK = "scaleup_bandwidth_default"


def add_scaleup(b: LinkBuilder, npus: int, size: int, first_switch: int, bandwidth: float,
                latency: float) -> int:
    """Cable every block of ``size`` consecutive NPUs to a crossbar switch of its own.

    Returns the number of switches added (``npus // size``; ``size`` must divide
    ``npus``).  Nothing is added for ``size == 1``.
    """
    if size <= 1:
        return 0
    domains = npus // size
    ids = np.arange(npus)
    b.cable(ids, first_switch + ids // size, bandwidth, latency)
    return domains


def scaleup_options(options, family: str, default_size: int = 1,
                    default_bw: float = NVLINK4_GPU_BW) -> tuple[int, float, float]:
    """Parse ``scaleup=G``, ``scaleup_bw=BW`` and ``scaleup_lat=T`` (G = 1: none)."""
    size = parse_int(options.get("scaleup", str(default_size)), f"{family} scaleup", minimum=1)
    bw = (bandwidth_option(options, family, key="scaleup_bw")
          if "scaleup_bw" in options else default_bw)
    lat = latency_option(options, family, key="scaleup_lat", default=DEFAULT_LAT)
    if size == 1 and ("scaleup_bw" in options or "scaleup_lat" in options):
        raise invalid(f"{family} scaleup_bw", options.get("scaleup_bw", options.get("scaleup_lat")),
                      "only with scaleup=G (GPUs per scale-up domain, G >= 2)")
    return size, bw, lat


def mark_default_scaleup(topology: Topology, options, key: str = "scaleup_bw") -> Topology:
    """Mark ``topology`` (just built by a spec parser from ``options``) when it has scale-up
    domains whose bandwidth option ``key`` was not given (module docstring)."""
    if key not in options and int(topology.params.get("scaleup_size", 0) or 0) >= 2:
        topology.params[DEFAULT_MARK] = True   # type: ignore[index]  (still being built)
    return topology


def with_gpu_scaleup(topology: Topology, bandwidth_Bps: float) -> Topology:
    """``topology`` with scale-up domains of ``bandwidth_Bps`` per GPU if its spec left
    their bandwidth at the family default (``params["scaleup_bandwidth_default"]``), else
    ``topology`` itself (module docstring).

    The topology is rebuilt from its name (the spec string, ``fail=`` included) with the
    bandwidth option added, so the name shows the bandwidth used
    (``railopt:2,gpus=8,bw=400Gbps,scaleup_bw=900GB/s``).

    Raises
    ------
    InvalidSpecError
        A marked topology whose name is no longer its spec (one degraded by
        :func:`topologies.failures.degrade` after it was built): apply this before.
    """
    if not topology.params.get(DEFAULT_MARK):
        return topology
    have = float(topology.params.get("scaleup_bandwidth_Bps", 0.0) or 0.0)
    if abs(have - float(bandwidth_Bps)) <= 1e-9 * float(bandwidth_Bps):
        return topology
    key = "bw" if topology.family == "nvl" else "scaleup_bw"
    try:
        rebuilt = _rebuilt(topology.name, key, float(bandwidth_Bps))
    except InvalidSpecError:
        rebuilt = None
    if rebuilt is None or rebuilt.family != topology.family or rebuilt.npus != topology.npus:
        raise invalid(f"scale-up bandwidth of {topology.name!r}", f"{have / 1e9:g} GB/s",
                      f"the GPU's {float(bandwidth_Bps) / 1e9:g} GB/s: the spec left it at "
                      f"the family default and the topology cannot be rebuilt from its name; "
                      f"build it with {key}={spec_rate(bandwidth_Bps, 'GB/s')}")
    return rebuilt


@lru_cache(maxsize=16)
def _rebuilt(spec: str, key: str, bandwidth_Bps: float) -> Topology:
    from topologies.registry import from_spec

    return from_spec(f"{spec},{key}={spec_rate(bandwidth_Bps, 'GB/s')}")


def nvl(size: int, *, bandwidth: float = NVLINK5_GPU_BW, latency: float = DEFAULT_LAT,
        name: str = "") -> Topology:
    """One NVLink scale-up domain of ``size`` GPUs (GB200 NVL72 is ``nvl(72)``).

    Parameters
    ----------
    size : int
        GPUs in the domain, >= 2.
    bandwidth : float, optional
        Scale-up bandwidth per GPU per direction, bytes/s (default NVLink 5, 900 GB/s).
    latency : float, optional
        Latency of a GPU-to-crossbar link, seconds.
    name : str, optional
        Display name.

    Returns
    -------
    Topology
        GPUs ``0 .. size-1``, the crossbar ``size``; diameter 2; ``bisection_Bps`` =
        ``floor(size/2) * bandwidth``.

    Examples
    --------
    >>> t = nvl(72)
    >>> t.npus, t.switches, t.params["bisection_Bps"] / 1e12
    (72, 1, 32.4)
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
        raise invalid("nvl size", size, "an integer >= 2 (GPUs in the NVLink domain)")
    b = LinkBuilder(int(size), 1)
    add_scaleup(b, int(size), int(size), int(size), float(bandwidth), float(latency))
    params = {"gpus": int(size), "scaleup_size": int(size), "scaleup_switches": [int(size), 1],
              "scaleup_bandwidth_Bps": float(bandwidth),
              "bisection_Bps": (int(size) // 2) * float(bandwidth)}
    return b.build(name=name or f"nvl:{size}", family="nvl", params=params,
                   node_attrs={"server": np.zeros(int(size), dtype=np.int64),
                               "rail": np.arange(int(size))})


@register_family("nvl", keys=("bw", "lat"), shape="GPUS", example="nvl:8",
                 summary="one NVLink scale-up domain: GPUS on a non-blocking NVLink-switch "
                         "crossbar (nvl:72 = GB200 NVL72); scale-out families take scaleup=G")
def _nvl_spec(shape, options):
    if not shape:
        raise invalid("nvl shape", shape, "the GPU count, e.g. nvl:72")
    n = parse_int(shape, "nvl GPUs", minimum=2)
    if n > 1 << 16:
        raise invalid("nvl GPUs", n, "at most 65536 GPUs in one scale-up domain")
    return mark_default_scaleup(
        nvl(n, bandwidth=bandwidth_option(options, "nvl", default=NVLINK5_GPU_BW),
            latency=latency_option(options, "nvl"),
            name=f"nvl:{shape}" + "".join(f",{k}={v}" for k, v in options.items())),
        options, key="bw")
