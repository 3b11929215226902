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
"""

from __future__ import annotations

import numpy as np

from codesign.errors import invalid
from codesign.units import parse_bandwidth
from topologies.builder import LinkBuilder
from topologies.families.options import (
    DEFAULT_LAT, bandwidth_option, latency_option, parse_int,
)
from topologies.model import Topology
from topologies.registry import register_family

__all__ = ["NVLINK5_GPU_BW", "NVLINK4_GPU_BW", "add_scaleup", "scaleup_options", "nvl",
           "SCALEUP_KEYS"]

#: NVLink 5 (Blackwell): 18 links x 50 GB/s per direction per GPU (nvidia.com NVLink page).
NVLINK5_GPU_BW = 900e9
#: NVLink 4 (Hopper): 18 links x 25 GB/s per direction per GPU (H100 datasheet: 900 GB/s
#: bidirectional).
NVLINK4_GPU_BW = 450e9
#: Option keys every scale-out family accepts for its scale-up domains.
SCALEUP_KEYS = ("scaleup", "scaleup_bw", "scaleup_lat")


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
    bw = (parse_bandwidth(options["scaleup_bw"], field=f"{family} scaleup_bw")
          if "scaleup_bw" in options else default_bw)
    lat = latency_option(options, family, key="scaleup_lat", default=DEFAULT_LAT)
    if size == 1 and ("scaleup_bw" in options or "scaleup_lat" in options):
        raise invalid(f"{family} scaleup_bw", options.get("scaleup_bw", options.get("scaleup_lat")),
                      "only with scaleup=G (GPUs per scale-up domain, G >= 2)")
    return size, bw, lat


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
    return nvl(n, bandwidth=bandwidth_option(options, "nvl", default=NVLINK5_GPU_BW),
               latency=latency_option(options, "nvl"),
               name=f"nvl:{shape}" + "".join(f",{k}={v}" for k, v in options.items()))
