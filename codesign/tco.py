"""Total cost of ownership of a training cluster, and the cost of one training run.

Pure arithmetic on a price catalog (``codesign/data/cluster-2026.yaml``: server prices,
GPU and server power from vendor datasheets, cloud reference prices, each with its source,
date and how solid it is; :func:`load_prices` reads a replacement of the same shape).

The model (owned cluster)
-------------------------
* **capex** = servers x ``server_usd`` + the network's cost (from the fabric cost model,
  :mod:`topologies.cost`; the server price excludes scale-out NICs and optics, which the
  network cost counts).
* **power** while training = (servers x ``server_max_w`` x ``utilisation`` + the network's
  power) x ``pue``, watts at the wall.  ``server_max_w`` includes the GPUs' TDP.
* **energy per year** = power x 8760 h / 1000 (kWh; the cluster is assumed busy all
  year); **opex per year** = energy per year x ``usd_per_kwh``.
* **TCO** = capex + ``years`` x opex per year.
* **cost per hour** = TCO / (``years`` x 8760 h): the cluster's life spread evenly over
  its hours; a training run of ``D`` days costs ``24 D`` x cost per hour (it occupies the
  whole cluster for that long).

The model (cloud)
-----------------
With a price per GPU-hour the cluster is rented: capex 0, opex per year = GPUs x price
x 8760, TCO = ``years`` x that, and a run of ``D`` days costs GPUs x price x 24 D.
Power and the network are then in the price.

Examples
--------
>>> p = TcoParams(usd_per_kwh=0.1, pue=1.5, utilisation=1.0, years=1.0)
>>> t = cluster_tco(2, ServerPrice("X", 100_000, 500, 1_000), network_usd=50_000,
...                 network_power_w=0.0, params=p)
>>> t.capex_usd, round(t.energy_kwh_per_year), round(t.opex_usd_per_year)
(250000.0, 26280, 2628)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from codesign.errors import invalid
from codesign.specs import check_int, check_keys, check_number, load_yaml

__all__ = ["ServerPrice", "TcoParams", "Tco", "load_prices", "server_price", "cluster_tco",
           "run_cost_usd", "HOURS_PER_YEAR", "PRICES_PATH"]

#: Hours in a (non-leap) year.
HOURS_PER_YEAR = 8760.0
#: The built-in price catalog.
PRICES_PATH = Path(__file__).parent / "data" / "cluster-2026.yaml"


@dataclass(frozen=True)
class ServerPrice:
    """Price and power of one GPU type's reference server (one catalog entry).

    Attributes
    ----------
    gpu : str
        Hardware catalog name.
    server_usd : float
        One server without scale-out NICs and optics, USD.
    gpu_tdp_w : float
        One GPU's TDP, watts.
    server_max_w : float
        The server's maximum input power (GPUs included), watts.
    cloud_usd_per_gpu_hour : float or None
        On-demand reference price per GPU-hour, USD.
    solidity, sources : str
        How solid the numbers are; where they come from.
    """

    gpu: str
    server_usd: float
    gpu_tdp_w: float
    server_max_w: float
    cloud_usd_per_gpu_hour: float | None = None
    solidity: str = ""
    sources: str = ""


#: Dearest electricity accepted, USD per kWh: retail prices run about 0.05-0.6 worldwide,
#: so 10 is far above any grid; 1e30 printed 30-digit costs.
MAX_USD_PER_KWH = 10.0
#: Dearest GPU-hour accepted, USD: on-demand cloud prices of today's GPUs are a few USD
#: to a few tens; 1,000 is far above any of them.
MAX_GPU_HOUR_USD = 1000.0


@dataclass(frozen=True)
class TcoParams:
    """Operating assumptions (defaults from the catalog's ``defaults``).

    Attributes
    ----------
    usd_per_kwh : float
        Electricity price, USD per kWh.
    pue : float
        Power usage effectiveness (facility power / IT power), >= 1.
    utilisation : float
        Fraction of the servers' maximum power drawn while training, (0, 1].
    years : float
        Amortisation period, years (> 0).
    gpu_hour_usd : float or None
        Rent instead: price per GPU-hour, USD (``None``: owned cluster).
    """

    usd_per_kwh: float = 0.08
    pue: float = 1.3
    utilisation: float = 0.8
    years: float = 4.0
    gpu_hour_usd: float | None = None

    def __post_init__(self) -> None:
        check_number("tco usd_per_kwh", self.usd_per_kwh, inclusive=True,
                     maximum=MAX_USD_PER_KWH)
        check_number("tco pue", self.pue, minimum=1, inclusive=True, maximum=5)
        check_number("tco utilisation", self.utilisation, maximum=1)
        check_number("tco years", self.years, maximum=50)
        if self.gpu_hour_usd is not None:
            check_number("tco gpu_hour_usd", self.gpu_hour_usd, maximum=MAX_GPU_HOUR_USD)


@dataclass(frozen=True)
class Tco:
    """The cost of owning (or renting) a cluster for ``years``.

    All amounts in USD; ``power_w`` at the wall (PUE included); ``cost_per_hour_usd`` is
    TCO spread over the life's hours.  ``breakdown_usd`` splits the TCO into ``servers``,
    ``network``, ``power`` (or ``cloud``).
    """

    capex_usd: float
    opex_usd_per_year: float
    years: float
    tco_usd: float
    power_w: float
    energy_kwh_per_year: float
    cost_per_hour_usd: float
    breakdown_usd: dict[str, float]
    model: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _positive(entry: dict, key: str, where: str, *, optional: bool = False) -> float | None:
    value = entry.get(key)
    return None if value is None and optional else check_number(f"{where} {key}", value)


@lru_cache(maxsize=8)
def _load(path: str) -> tuple[dict[str, ServerPrice], TcoParams, str]:
    data = load_yaml(path)
    where = f"price file {path!r}"
    check_keys(data, allowed=("description", "defaults", "gpus"), required=("gpus",),
               where=where)
    defaults = data.get("defaults") or {}
    check_keys(defaults, allowed=("usd_per_kwh", "pue", "utilisation", "years"),
               where=f"{where} defaults")
    params = TcoParams(**{k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                          for k, v in defaults.items()})
    gpus = data["gpus"]
    if not isinstance(gpus, dict) or not gpus:
        raise invalid(f"{where} gpus", gpus, "a mapping GPU name -> prices")
    out = {}
    for name, entry in gpus.items():
        w = f"{where} gpu {name}"
        check_keys(entry, allowed=("server_usd", "gpu_tdp_w", "server_max_w",
                                   "cloud_usd_per_gpu_hour", "solidity", "sources"),
                   required=("server_usd", "gpu_tdp_w", "server_max_w"), where=w)
        out[str(name)] = ServerPrice(str(name), _positive(entry, "server_usd", w),
                                     _positive(entry, "gpu_tdp_w", w),
                                     _positive(entry, "server_max_w", w),
                                     _positive(entry, "cloud_usd_per_gpu_hour", w, optional=True),
                                     str(entry.get("solidity", "")),
                                     str(entry.get("sources", "")))
    return out, params, str(data.get("description", ""))


def load_prices(path: str | Path | None = None) -> tuple[dict[str, ServerPrice], TcoParams]:
    """The price catalog (built-in when ``path`` is None) and its default assumptions.

    Raises
    ------
    InvalidSpecError
        Unreadable file, unknown key or a non-positive price or power.
    """
    if path is not None and (not isinstance(path, (str, Path)) or not str(path)):
        # ('' , [] and {} silently gave the built-in catalog)
        raise invalid("prices", path, "a price catalog YAML path, or None (built-in)")
    prices, params, _ = _load(str(path or PRICES_PATH))
    return prices, params


def server_price(gpu: str, path: str | Path | None = None) -> ServerPrice:
    """The catalog entry of ``gpu`` (raises, listing the GPUs the catalog prices)."""
    prices, _ = load_prices(path)
    if gpu not in prices:
        raise invalid("GPU price", gpu, f"a GPU of the price catalog: {', '.join(prices)} "
                                        f"(or --prices FILE.yaml with your own)")
    return prices[gpu]


def cluster_tco(servers: int, price: ServerPrice, *, network_usd: float,
                network_power_w: float | None, params: TcoParams,
                gpus_per_server: int = 8) -> Tco:
    """Capex, opex per year and TCO of ``servers`` servers and their network (module
    docstring).

    Parameters
    ----------
    servers : int
        Servers of the cluster.
    price : ServerPrice
        The server's price and power.
    network_usd : float
        The network's cost, USD.
    network_power_w : float or None
        The network's power, watts (``None``: unknown, counted as 0 and said so in
        ``model``).
    params : TcoParams
        Operating assumptions.
    gpus_per_server : int
        GPUs per server (the cloud model rents GPUs).

    Returns
    -------
    Tco
    """
    check_int("tco servers", servers, 1)
    check_int("tco gpus_per_server", gpus_per_server, 1)   # (0 and -8 were taken)
    check_number("tco network_usd", network_usd, inclusive=True)
    if network_power_w is not None:   # (nan made the opex nan, -1 lowered it)
        check_number("tco network_power_w", network_power_w, inclusive=True)
    if not isinstance(price, ServerPrice):
        raise invalid("tco price", type(price).__name__, "a ServerPrice (server_price)")
    if not isinstance(params, TcoParams):
        raise invalid("tco params", type(params).__name__, "a TcoParams")
    years = params.years
    if params.gpu_hour_usd is not None:
        per_year = servers * gpus_per_server * params.gpu_hour_usd * HOURS_PER_YEAR
        return Tco(0.0, per_year, years, per_year * years, 0.0, 0.0,
                   servers * gpus_per_server * params.gpu_hour_usd,
                   {"cloud": per_year * years}, "cloud price per GPU-hour")
    net_w = float(network_power_w or 0.0)
    power_w = (servers * price.server_max_w * params.utilisation + net_w) * params.pue
    kwh = power_w * HOURS_PER_YEAR / 1000.0
    opex = kwh * params.usd_per_kwh
    capex_servers = servers * price.server_usd
    capex = capex_servers + float(network_usd)
    tco = capex + years * opex
    model = "owned" if network_power_w is not None else "owned (network power unknown: 0 W)"
    return Tco(capex, opex, years, tco, power_w, kwh, tco / (years * HOURS_PER_YEAR),
               {"servers": capex_servers, "network": float(network_usd),
                "power": years * opex}, model)


def run_cost_usd(tco: Tco, days: float) -> float:
    """USD of one training run of ``days`` days on the whole cluster: its hours at the
    cluster's cost per hour (owned: TCO over the life's hours; cloud: the rent)."""
    check_number("training days", days, inclusive=True)
    if not isinstance(tco, Tco):
        raise invalid("tco", type(tco).__name__, "a Tco (cluster_tco)")
    return tco.cost_per_hour_usd * 24.0 * days
