"""Procurement answers in days and dollars: time to train, TCO and the cost of one run.

A *training goal* is a number of tokens (language models: workloads with a sequence
length), of samples, or of epochs over a dataset.  One iteration processes the
workload's global batch (``Workload.batch_size`` samples; strategies never change it),
so

* tokens per iteration = global batch x sequence length, samples per iteration = global
  batch;
* iterations = goal / per-iteration amount (rounded up: a partial iteration still runs);
* **days to train** = iterations x iteration time / 86400.

The cost side is :mod:`codesign.tco` (capex, opex per year, TCO, cost per hour): a run
costs its hours at the cluster's cost per hour.  The network's cost and power in the
TCO come from the 2025-2026 parts catalog (``topologies/data/parts-2026.yaml``, the
modern-fabrics catalog with power figures), priced on the fabric the what-if chose;
budgets stay checked against the what-if's own cost model (TopoOpt Table 2 prices).

Objectives (for ``whatif --objective`` and sweeps): ``days_to_train``, ``usd_per_run``
and ``tco_usd``, all minimised.

Examples
--------
>>> goal = TrainingGoal(tokens=1e9)
>>> goal.iterations(batch_size=4, seq_len=1000)      # 1e9 / 4000 tokens per iteration
250000
>>> round(days_to_train(goal, batch_size=4, seq_len=1000, iteration_time_s=0.864), 6)
2.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from codesign.errors import invalid
from codesign.specs import check_int, check_number

__all__ = ["TrainingGoal", "parse_goal", "days_to_train", "procurement", "fabric_parts_cost",
           "DATASET_SAMPLES"]

#: Training-set sizes of zoo workloads whose dataset is known, samples: ImageNet-1k's
#: 1,281,167 training images (Russakovsky et al., IJCV 2015, Table 2) for the
#: ImageNet classifiers.  Others need ``dataset_samples`` for an epoch goal.
DATASET_SAMPLES = {"resnet50": 1_281_167, "resnet152": 1_281_167, "vgg16": 1_281_167}
SECONDS_PER_DAY = 86400.0


#: Largest training goals accepted.  Llama 3 pre-trained on 15.6e12 tokens and ImageNet
#: models run 90-600 epochs (small-data fine-tuning a few thousand); each bound is
#: hundreds of times the largest published run, where 1e30 printed 30-digit days and
#: dollars.  Samples: 1e16 tokens at one token each; dataset: 1e13 samples per epoch.
MAX_GOAL = {"tokens": 1e16, "samples": 1e16, "epochs": 1e5, "dataset_samples": 1e13}


def _amount(value: Any, name: str) -> float | None:
    """A training goal's count (``15T`` tokens, ``1.2M`` samples), ``None`` if not given."""
    from codesign.units import parse_count

    return None if value is None else parse_count(value, field=name)


@dataclass(frozen=True)
class TrainingGoal:
    """How much training a run does: exactly one of ``tokens``, ``samples``, ``epochs``.

    ``dataset_samples`` is the epoch size (default: :data:`DATASET_SAMPLES` by workload).
    """

    tokens: float | None = None
    samples: float | None = None
    epochs: float | None = None
    dataset_samples: float | None = None

    def __post_init__(self) -> None:
        given = [k for k in ("tokens", "samples", "epochs") if getattr(self, k) is not None]
        if len(given) != 1:
            raise invalid("training goal", ", ".join(given) or "none",
                          "exactly one of --tokens, --samples, --epochs")
        for key in ("tokens", "samples", "epochs", "dataset_samples"):
            value = getattr(self, key)
            if value is not None:   # (-1 and nan were taken, 'x' a TypeError)
                check_number(f"--{key.replace('_', '-')}", value)
            if value is not None and value > MAX_GOAL[key]:
                raise invalid(f"--{key.replace('_', '-')}", value,
                              f"at most {MAX_GOAL[key]:g} (a training run, not a typo)")

    @property
    def unit(self) -> str:
        """``tokens``, ``samples`` or ``epochs``."""
        return "tokens" if self.tokens is not None else \
            "samples" if self.samples is not None else "epochs"

    def iterations(self, *, batch_size: int, seq_len: int | None, workload: str = "") -> int:
        """Iterations to reach the goal with a global batch of ``batch_size`` samples of
        ``seq_len`` tokens (rounded up).

        Raises
        ------
        InvalidSpecError
            A token goal for a workload without a sequence length, or an epoch goal
            without a known dataset size.
        """
        check_int("batch_size", batch_size, 1)   # (-1 gave negative days, 0 a ZeroDivision)
        if seq_len is not None:
            check_int("seq_len", seq_len, 1)
        if self.tokens is not None:
            if not seq_len:
                raise invalid(f"--tokens for workload {workload or '?'}", f"{self.tokens:g}",
                              "a workload with a sequence length (language models); use "
                              "--samples or --epochs")
            need, per = self.tokens, batch_size * seq_len
        elif self.samples is not None:
            need, per = self.samples, batch_size
        else:
            size = self.dataset_samples or DATASET_SAMPLES.get(workload)
            if size is None:
                raise invalid(f"--epochs for workload {workload or '?'}", f"{self.epochs:g}",
                              f"a dataset size: --dataset-samples N (known: "
                              f"{', '.join(DATASET_SAMPLES)})")
            need, per = self.epochs * size, batch_size
        return int(math.ceil(need / per - 1e-9))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def parse_goal(*, tokens: Any = None, samples: Any = None, epochs: Any = None,
               dataset_samples: Any = None) -> TrainingGoal | None:
    """A :class:`TrainingGoal` from CLI/YAML values (strings such as ``"15e12"`` too), or
    ``None`` when none of ``tokens``, ``samples``, ``epochs`` is given."""
    t, s, e = (_amount(tokens, "--tokens"), _amount(samples, "--samples"),
               _amount(epochs, "--epochs"))
    d = _amount(dataset_samples, "--dataset-samples")
    if t is None and s is None and e is None:
        if d is not None:
            raise invalid("--dataset-samples", dataset_samples, "only with --epochs")
        return None
    return TrainingGoal(t, s, e, d)


def days_to_train(goal: TrainingGoal, *, batch_size: int, seq_len: int | None,
                  iteration_time_s: float, workload: str = "") -> float:
    """Days to reach ``goal``: iterations x iteration time / 86400 (module docstring)."""
    check_number("iteration time", iteration_time_s)   # seconds
    if not isinstance(goal, TrainingGoal):
        raise invalid("training goal", type(goal).__name__, "a TrainingGoal (parse_goal)")
    it = goal.iterations(batch_size=batch_size, seq_len=seq_len, workload=workload)
    return it * iteration_time_s / SECONDS_PER_DAY


def fabric_parts_cost(topology_spec: str, *, family: str | None = None, servers: int = 0,
                      degree: int = 0, link_bandwidth_Bps: float = 0.0,
                      server_gpus: int = 0) -> tuple[float, float | None]:
    """Cost (USD) and power (W) of a fabric with the 2025-2026 parts catalog.

    ``server_gpus`` (the hardware's GPUs per server, whose price the TCO counts) keeps a
    server's own scale-up domain out of the network's price
    (:func:`topologies.cost.topology_cost`).

    A ``topoopt`` fabric (built by TopologyFinder, no spec string) is priced as the
    ``perms`` fabric of the same servers, degree and rate: the same NICs, transceivers
    and patch-panel ports (TopoOpt Appendix G counts them the same way).
    """
    from search.design_point import DesignPoint, topology_spec_for
    from search.sweeps.trial import cached_topology
    from topologies.cost import load_catalog, topology_cost

    if family == "topoopt" or topology_spec.startswith("topoopt:"):
        topology_spec = topology_spec_for(DesignPoint("perms", servers, degree,
                                                      link_bandwidth_Bps))
    cost = topology_cost(cached_topology(topology_spec), catalog=load_catalog("parts-2026"),
                         server_gpus=server_gpus)
    return float(cost.total_usd), (None if cost.power_w is None else float(cost.power_w))


def procurement(goal: TrainingGoal | None, workload, *, iteration_time_s: float, servers: int,
                hardware, network_usd: float, network_power_w: float | None,
                params=None, prices: str | None = None) -> dict[str, Any]:
    """Days to train, USD per run, TCO and its parts for one answer.

    Parameters
    ----------
    goal : TrainingGoal or None
        ``None``: TCO only (no days or run cost).
    workload : codesign.workloads.Workload
        The workload trained (its global batch and sequence length).
    iteration_time_s : float
        Co-designed iteration time, seconds.
    servers : int
        Servers of the cluster.
    hardware : Hardware
        The GPU type (price catalog entry by name; ``gpus_per_server``).
    network_usd, network_power_w : float, float or None
        The network's cost (USD) and power (W).
    params : codesign.tco.TcoParams, optional
        Operating assumptions (default: the catalog's).
    prices : str, optional
        Price catalog YAML (default: the built-in one).

    Returns
    -------
    dict
        ``days_to_train``, ``iterations``, ``tokens_per_iteration`` or
        ``samples_per_iteration``, ``usd_per_run``, ``tco_usd``, ``capex_usd``,
        ``opex_usd_per_year``, ``tco`` (the :class:`codesign.tco.Tco` as a dict) and
        ``price_solidity``.
    """
    from codesign.tco import cluster_tco, load_prices, run_cost_usd, server_price

    price = server_price(hardware.name, prices)
    if params is None:
        params = load_prices(prices)[1]
    tco = cluster_tco(servers, price, network_usd=network_usd,
                      network_power_w=network_power_w, params=params,
                      gpus_per_server=hardware.gpus_per_server)
    out: dict[str, Any] = {"tco_usd": tco.tco_usd, "capex_usd": tco.capex_usd,
                           "opex_usd_per_year": tco.opex_usd_per_year, "tco": tco.to_dict(),
                           "price_solidity": price.solidity}
    if goal is not None:
        batch, seq = int(workload.batch_size), workload.seq_len
        iters = goal.iterations(batch_size=batch, seq_len=seq, workload=workload.name)
        days = iters * iteration_time_s / SECONDS_PER_DAY
        per = ({"tokens_per_iteration": batch * seq} if goal.tokens is not None
               else {"samples_per_iteration": batch})
        out.update(days_to_train=days, iterations=iters, usd_per_run=run_cost_usd(tco, days),
                   goal=goal.to_dict(), **per)
    return out
