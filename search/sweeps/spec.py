"""The sweep specification: a strictly validated YAML file (or dict) describing a design study.

``codesign sweep CONFIG.yaml`` reads one of these (:func:`load_sweep_spec`) and hands
the :class:`SweepSpec` to :func:`search.sweeps.driver.run_sweep`.  Every key is checked with
:mod:`codesign.specs`: an unknown key, a wrong type or an out-of-range value raises
:class:`~codesign.errors.InvalidSpecError` with one line naming the field, the value
and what is allowed.  Example (``experiments/sweeps/small.yaml`` is the canonical
small sweep)::

    study: small
    workloads: resnet50                  # one zoo name, or a weighted mix:
    # workloads:
    #   - {name: resnet50, weight: 2}
    #   - {name: dlrm, weight: 1, config: simulation, strategy: "dp=128"}
    #   - {name: llama3-70b, options: {seq_len: 8192, lora_rank: 16}}
    #   - {file: my-model.yaml, weight: 1}   # a model YAML file (codesign workload show)
    space:
      families: [fattree, leafspine, ideal, expander, torus, perms, topoopt]
      servers: 16                         # or a list of server counts
      degree: {low: 2, high: 8}           # or an integer, or a list of integers
      link_rate: [25Gbps, 100Gbps, 200Gbps, 400Gbps]   # or {low, high, step}
      gpu: [A100-80]
      gpus_per_server: 8                  # optional; default: the GPU's reference server
      hardware_file: my-h100.yaml         # optional: a hardware catalog (e.g. written by
                                          # codesign calibrate) the gpu names come from
      catalog: parts-2026                 # optional: network parts catalog (default
                                          # table2, TopoOpt's 2023 prices) or a YAML path
      collective_method: [best]           # default best: the fastest valid synthesizer
                                          # per collective; auto: multiring without
                                          # switches, ring with; or an algorithm name
      strategy_search: {evaluations: 16, restarts: 1, shapes: 32}   # default; off: fixed
                                          # strategies; shapes: timed before the chains
      comm_overlap: framework             # default: the overlap today's training stacks
                                          # switch on (none: gradient buckets only)
      leafspine_oversub: 2
    objectives: [iteration_time_s, cost_usd]
    constraints: {budget_usd: 2M, max_degree: 8}   # money as in the CLI: 2e6, 500k, $2M
    sampler: nsga2                        # default nsga2 for >1 objective, tpe for one
    population_size: 8
    trials: 24
    max_in_flight: 2
    seed: 0
    storage: null                         # Optuna journal file by default, or a URL

Objectives and their directions (implied, :data:`OBJECTIVES`): ``iteration_time_s``,
``cost_usd``, ``exposed_communication_s`` and ``cost_per_throughput_usd`` are
minimised; ``throughput_per_usd`` is maximised; with a ``procurement`` mapping
(``procurement: {tokens: 15e12, pue: 1.2, years: 5}``: a training goal and TCO
assumptions, :mod:`search.time_to_train`) also ``tco_usd``, ``usd_per_run`` and
``days_to_train`` (minimised; the last two need the goal).

Strategy search (co-design per trial, :mod:`search.per_fabric`): with
``strategy_search`` on (the default; ``on`` means ``{evaluations: 16, restarts: 1,
shapes: 32}``) every trial searches, per workload of the mix, the fastest
memory-feasible strategy on its fabric: from :func:`search.strategy.feasible.feasible_start`
(or from the workload's ``strategy`` when given and it fits) and up to ``shapes``
model-parallel shapes (:func:`search.strategy.feasible.shape_candidates`), then
``evaluations`` MCMC steps from the fastest of them; ``off`` times each workload's
``strategy`` (default: the feasible start) as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_choice, check_int, check_keys, check_number, load_yaml
from codesign.units import BARE_BANDWIDTH_BPS, parse_bandwidth, parse_money
from search.per_fabric import (DEFAULT_SHAPES, MAX_SEARCH_EVALUATIONS, MAX_SEARCH_SHAPES,
                               SearchBudget)

__all__ = [
    "OBJECTIVES",
    "SWEEP_FAMILIES",
    "MAX_SERVER_DEGREE",
    "SAMPLERS",
    "WorkloadItem",
    "with_options",
    "model_file_item",
    "SweepSpace",
    "SweepSpec",
    "parse_sweep_spec",
    "load_sweep_spec",
    "parse_usd",
]

#: Objective name -> Optuna direction.
OBJECTIVES: dict[str, str] = {
    "iteration_time_s": "minimize",
    "cost_usd": "minimize",
    "throughput_per_usd": "maximize",
    "cost_per_throughput_usd": "minimize",
    "exposed_communication_s": "minimize",
    # Procurement (issue 20; need the spec's ``procurement`` key, days and USD per run
    # a training goal in it): search.time_to_train.
    "tco_usd": "minimize",
    "usd_per_run": "minimize",
    "days_to_train": "minimize",
}
#: Samplers a sweep may use.
SAMPLERS = ("nsga2", "tpe", "grid", "random")
#: Topology families of a sweep: the spec-string families of
#: :data:`search.design_point.DESIGN_FAMILIES` plus ``topoopt`` (TopologyFinder on the
#: trial's demand, :mod:`search.sweeps.trial`).
SWEEP_FAMILIES = ("fattree", "leafspine", "ideal", "expander", "torus", "perms", "topoopt",
                  "railopt", "multiplane")
#: Largest server degree (links per server) a sweep space or what-if grid may name: a
#: 72-GPU rack's one NIC per GPU is far below it, and it bounds the fabrics priced.
MAX_SERVER_DEGREE = 4096

_STUDY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TOP_KEYS = ("study", "workloads", "space", "objectives", "constraints", "sampler",
             "population_size", "trials", "max_in_flight", "seed", "storage", "batch_size",
             "trial_timeout_s", "procurement")
_SPACE_KEYS = ("families", "servers", "degree", "link_rate", "gpu", "gpus_per_server",
               "collective_method", "strategy_search", "leafspine_oversub", "hardware_file",
               "catalog", "comm_overlap")
_WORKLOAD_KEYS = ("name", "file", "weight", "config", "strategy", "options")


def _number(value: Any, where: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(where, value, "a number > 0" if positive else "a number")
    v = float(value)
    if not math.isfinite(v) or (positive and v <= 0):
        raise invalid(where, value, "a finite number > 0" if positive else "a finite number")
    return v


def _names(value: Any, where: str, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
        raise invalid(where, value, "a name or a non-empty list of names")
    if len(set(items)) != len(items):
        raise invalid(where, value, "distinct names")
    if allowed is not None:
        for x in items:
            check_choice(where, x, allowed)
    return tuple(items)


def parse_usd(value: Any, where: str = "budget") -> float:
    """An amount of US dollars > 0 (:func:`codesign.units.parse_money`, the one money
    parser: ``1e6``, ``500k``, ``$2M``, ``1.5B``, ``2_000_000``)."""
    return parse_money(value, field=where, allow_zero=False)


def _search_budget(value: Any, where: str) -> SearchBudget | None:
    """``strategy_search``: on/off (YAML booleans too) or ``{evaluations, restarts, batch,
    shapes}``."""
    if isinstance(value, dict):
        check_keys(value, allowed=("evaluations", "restarts", "batch", "shapes"), where=where)
        return SearchBudget(
            # (the bounds every SweepPoint checks: a larger value passed here, then every
            # design point built from it was refused)
            evaluations=check_int(f"{where} evaluations", value.get("evaluations", 16), 1,
                                  MAX_SEARCH_EVALUATIONS),
            restarts=check_int(f"{where} restarts", value.get("restarts", 1), 1, 1000),
            batch=check_int(f"{where} batch", value.get("batch", 4), 1, 1000),
            shapes=check_int(f"{where} shapes", value.get("shapes", DEFAULT_SHAPES), 0,
                             MAX_SEARCH_SHAPES))
    # YAML 1.1 reads on/off as booleans; accept the strings too.
    text = str(value).lower() if isinstance(value, (bool, str)) else ""
    if text in ("on", "off", "true", "false"):
        return SearchBudget() if text in ("on", "true") else None
    raise invalid(where, value, "on, off or {evaluations: N, restarts: R}")


@dataclass(frozen=True)
class WorkloadItem:
    """One workload of the (weighted) mix.

    Attributes
    ----------
    name : str
        Zoo name (:func:`codesign.workloads.workload_names`), or for a model file the
        model's own ``name``.
    weight : float
        Relative weight (> 0); weights are normalised by their sum.
    config : str or None
        Zoo configuration (``simulation``, ...); ``None``: the model's default.
    strategy : str or None
        Parallelization strategy string: the strategy search's start (when it fits) or,
        with ``strategy_search: off``, the strategy timed; ``None``: the feasible start
        (:func:`search.strategy.feasible.feasible_start`).
    options : tuple of (str, value)
        Hyper-parameter and setting overrides, sorted by key: what ``--option`` gives
        ``evaluate`` (``seq_len``, ``batch_size``, ``precision``, ``lora_rank`` ...;
        :func:`codesign.workloads.get_workload`); ``()``: the zoo entry as it is.
    file : str or None
        A user model file (:func:`codesign.workloads.load_workload`), absolute path;
        ``None``: a zoo model.  Build such items with :func:`model_file_item`.
    digest : str or None
        SHA-256 (16 hex digits) of the file's bytes when it was read: part of the study's
        identity, so a sweep resumed after the file changed is a different study.
    """

    name: str
    weight: float = 1.0
    config: str | None = None
    strategy: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    file: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        # (a weight of nan made the mix's time nan, 0 a division by zero, -1 was taken)
        if not isinstance(self.name, str) or not self.name:
            raise invalid("workload name", self.name, "a zoo name or a model's name")
        check_number(f"workload {self.name} weight", self.weight)

    @property
    def label(self) -> str:
        """The name shown in results and reports: ``name``, with the options when there
        are any (``llama3-70b[lora_rank=16,seq_len=8192]``), so two entries of one zoo
        model stay apart."""
        if self.file is not None:
            return f"{self.name}({Path(self.file).name})"
        if not self.options:
            return self.name
        return f"{self.name}[{','.join(f'{k}={v}' for k, v in self.options)}]"

    def load(self):
        """The :class:`~codesign.workloads.Workload` (built once per process and item).

        Raises
        ------
        InvalidSpecError
            An option the model does not take, or a bad value (one line).
        """
        return _load_item(self.name, self.config, self.options, self.file, self.digest)


@lru_cache(maxsize=64)
def _load_item(name: str, config: str | None, options: tuple[tuple[str, Any], ...],
               file: str | None, digest: str | None):
    from codesign.workloads import get_workload, load_workload

    if file is not None:
        return load_workload(file)   # ``digest`` keys the cache: an edited file is reread
    return get_workload(name, config, **dict(options))


def model_file_item(path: str, where: str, weight: float = 1.0,
                    strategy: str | None = None) -> WorkloadItem:
    """A mix entry for the user model file ``path`` (relative to the working directory),
    read and checked now, named by the model's own ``name``.

    Raises
    ------
    InvalidSpecError
        A missing or unreadable file, or a model file with an error (one line, prefixed
        with ``where``).
    """
    from codesign.files import is_file, load_yaml_text, read_text
    from codesign.workloads import workload_from_dict

    if not isinstance(path, str) or not path:
        raise invalid(f"{where} file", path, "a model YAML file path")
    try:
        resolved = Path(path).resolve()
    except (OSError, ValueError):   # (a NUL byte)
        resolved = None
    if resolved is None or not is_file(resolved):
        raise invalid(f"{where} file", path, "a readable model YAML file")
    try:
        # One bounded read (what load_workload does) for both the model and its digest,
        # so the digest is of the text the model was built from.
        text = read_text(resolved, what="spec file")
        workload = workload_from_dict(load_yaml_text(text, where=f"spec file {str(resolved)!r}"),
                                      source=str(resolved))
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"{where}: {exc}") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return WorkloadItem(workload.name, weight, None, strategy, file=str(resolved),
                        digest=digest)


def with_options(item: WorkloadItem, options: Any, where: str) -> WorkloadItem:
    """``item`` with the workload ``options`` (a mapping of hyper-parameters and settings to
    scalars, as a sweep entry's ``options`` or ``--option`` give them; ``None``: none),
    checked by building the workload, so an option the model does not take fails here and
    not in every trial.

    Raises
    ------
    InvalidSpecError
        Not a mapping of names to numbers, strings or booleans, or an option or value
        the model refuses (one line, prefixed with ``where``).
    """
    if options is None or options == {}:
        return item
    if item.file is not None:
        raise invalid(where, options, "nothing with a model file (put overrides in the file)")
    if not isinstance(options, dict) or not all(isinstance(k, str) and k for k in options):
        raise invalid(where, options, "a mapping of workload settings to values, e.g. "
                      "{seq_len: 8192, lora_rank: 16}")
    for key, value in options.items():
        if not isinstance(value, (int, float, str, bool)):
            raise invalid(f"{where} {key}", value, "a number, a string or a boolean")
    out = dataclasses.replace(item, options=tuple(sorted(options.items())))
    try:
        out.load()
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"{where}: {exc}") from None
    return out


@dataclass(frozen=True)
class SweepSpace:
    """The design space (see the module docstring for the YAML form).

    ``degree`` is either a tuple of allowed integers or a ``(low, high)`` range
    (``degree_is_range``); ``link_rates_Bps`` is always the tuple of allowed rates,
    bytes/s (a ``{low, high, step}`` range is expanded).
    """

    families: tuple[str, ...]
    servers: tuple[int, ...]
    degrees: tuple[int, ...]
    degree_is_range: bool
    link_rates_Bps: tuple[float, ...]
    gpus: tuple[str, ...] = ("A100-80",)
    collective_methods: tuple[str, ...] = ("best",)
    strategy_search: SearchBudget | None = SearchBudget()
    leafspine_oversub: float = 2.0
    gpus_per_server: int | None = None
    hardware_file: str | None = None
    catalog: str | None = None
    comm_overlap: str = "framework"


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep specification (build it with :func:`parse_sweep_spec`).

    Attributes
    ----------
    study : str
        Study name (a folder name); results go to ``results/<study>/``.
    workloads : tuple of WorkloadItem
        The workload mix.
    space : SweepSpace
        The design space.
    objectives : tuple of str
        Keys of :data:`OBJECTIVES`.
    budget_usd : float or None
        Designs whose network costs more are pruned ("budget exceeded").
    max_degree : int or None
        Degrees above it are removed from the space.
    sampler : str
        One of :data:`SAMPLERS`.
    population_size : int
        NSGA-II population.
    trials : int
        Planned number of trials; ``--resume`` tops the study up to it.
    max_in_flight : int
        Trials evaluated at the same time.
    seed : int
        Sampler and randomized-family seed.
    storage : str or None
        Optuna storage URL; ``None``: a journal file in the study folder.
    batch_size : int
        Records per Parquet part.
    trial_timeout_s : float or None
        A trial running longer is cancelled and recorded as failed.
    procurement : tuple of (key, value)
        The ``procurement`` mapping (:func:`_procurement`): training goal and TCO
        assumptions; trials then record ``tco_usd`` and, with a goal,
        ``days_to_train`` and ``usd_per_run``.
    """

    study: str
    workloads: tuple[WorkloadItem, ...]
    space: SweepSpace
    objectives: tuple[str, ...] = ("iteration_time_s", "cost_usd")
    budget_usd: float | None = None
    max_degree: int | None = None
    sampler: str = "nsga2"
    population_size: int = 8
    trials: int = 24
    max_in_flight: int = 2
    seed: int = 0
    storage: str | None = None
    batch_size: int = 8
    trial_timeout_s: float | None = 600.0
    procurement: tuple[tuple[str, Any], ...] = ()

    @property
    def directions(self) -> list[str]:
        """Optuna directions of :attr:`objectives`."""
        return [OBJECTIVES[o] for o in self.objectives]

    def identity(self) -> dict[str, Any]:
        """What defines the study (hashed by :meth:`config_hash`): everything but the planned
        trial count, storage, batch size and timeout (they change how long and where the
        study runs, not which designs it proposes or how they are scored)."""
        d = asdict(self)
        for key in ("trials", "storage", "batch_size", "trial_timeout_s"):
            d.pop(key)
        return d

    def config_hash(self) -> str:
        """First 16 hex digits of the SHA-256 of :meth:`identity` as canonical JSON."""
        from search.sweeps.trial import time_model_name

        ident = {**self.identity(), "time_model": time_model_name()}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> "SweepSpec":
        """A copy with some top-level fields changed (``trials``, ``seed``, ``study``...)."""
        return dataclasses.replace(self, **changes)


def _workloads(value: Any) -> tuple[WorkloadItem, ...]:
    from codesign.workloads import workload_configs, workload_names

    names = tuple(workload_names())
    if isinstance(value, str):
        value = [{"name": value}]
    if not isinstance(value, list) or not value:
        raise invalid("sweep workloads", value, "a zoo name or a non-empty list of "
                      "{name or file, weight, config, strategy, options}")
    items = []
    for i, raw in enumerate(value):
        where = f"sweep workloads[{i}]"
        if isinstance(raw, str):
            raw = {"name": raw}
        check_keys(raw, allowed=_WORKLOAD_KEYS, where=where)
        if ("name" in raw) == ("file" in raw):
            raise invalid(where, sorted(raw), "exactly one of name (a zoo model) or file (a "
                          "model YAML file)")
        weight = _number(raw.get("weight", 1.0), f"{where} weight")
        strategy = raw.get("strategy")
        if strategy is not None:
            from codesign.workloads import parse_strategy

            if not isinstance(strategy, str):
                raise invalid(f"{where} strategy", strategy, "a strategy string dp=D,tp=T,pp=P")
            parse_strategy(strategy)  # raises a one-line InvalidSpecError
        if "file" in raw:
            extra = [k for k in ("config", "options") if k in raw]
            if extra:
                raise invalid(f"{where} {extra[0]}", raw[extra[0]],
                              "nothing with a model file (put overrides in the file)")
            items.append(model_file_item(raw["file"], where, weight, strategy))
            continue
        name = raw["name"]
        check_choice(f"{where} name", name, names)
        config = raw.get("config")
        if config is not None:
            configs = workload_configs(name)
            check_choice(f"{where} config", config, configs)
        items.append(with_options(WorkloadItem(name, weight, config, strategy),
                                  raw.get("options"), f"{where} options"))
    keys = [(w.name, w.config, w.strategy, w.options, w.file) for w in items]
    if len(set(keys)) != len(keys):
        raise invalid("sweep workloads", [w.label for w in items],
                      "distinct (name or file, config, strategy, options) entries")
    return tuple(items)


def _distinct(value: Any, where: str, item: Callable[[Any], Any], rule: str, what: str
              ) -> tuple:
    """One value or a non-empty list of them (else ``rule``), each read by ``item``, all
    distinct (else ``distinct <what>``)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise invalid(where, value, rule)
    out = tuple(item(v) for v in items)
    if len(set(out)) != len(out):
        raise invalid(where, value, f"distinct {what}")
    return out


def _degrees(value: Any) -> tuple[tuple[int, ...], bool]:
    where = "sweep space degree"
    if isinstance(value, dict):
        check_keys(value, allowed=("low", "high"), required=("low", "high"), where=where)
        low = check_int(f"{where} low", value["low"], 1, MAX_SERVER_DEGREE)
        high = check_int(f"{where} high", value["high"], low, MAX_SERVER_DEGREE)
        return tuple(range(low, high + 1)), True
    if (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, list)
                                                                    and value):
        return _distinct(value, where, lambda v: check_int(where, v, 1, MAX_SERVER_DEGREE), "",
                         "integers"), False
    raise invalid(where, value, "an integer, a list of integers or {low, high}")


def _rates(value: Any) -> tuple[float, ...]:
    where = "sweep space link_rate"
    if isinstance(value, dict):
        check_keys(value, allowed=("low", "high", "step"), required=("low", "high", "step"),
                   where=where)
        low, high, step = (parse_bandwidth(value[k], field=f"{where} {k}", bare=BARE_BANDWIDTH_BPS)
                           for k in ("low", "high", "step"))
        if high < low:
            raise invalid(f"{where} high", value["high"], f"a bandwidth >= low ({value['low']})")
        count = int(math.floor((high - low) / step + 1e-9)) + 1
        if count > 1000:
            raise invalid(f"{where} step", value["step"], "a step giving at most 1000 rates")
        return tuple(low + i * step for i in range(count))
    return _distinct(value, where,
                     lambda v: parse_bandwidth(v, field=where, bare=BARE_BANDWIDTH_BPS),
                     "a bandwidth, a list of bandwidths or {low, high, step}", "bandwidths")


def _space(value: Any) -> SweepSpace:
    from codesign.workloads import hardware_names
    from evaluators.iteration.comm import collective_methods
    from evaluators.iteration.inputs import COMM_OVERLAPS
    where = "sweep space"
    check_keys(value, allowed=_SPACE_KEYS, required=("families", "servers", "degree",
                                                     "link_rate"), where=where)
    families = _names(value["families"], f"{where} families", SWEEP_FAMILIES)
    servers = _distinct(value["servers"], f"{where} servers",
                        lambda s: check_int(f"{where} servers", s, 2, 1 << 20),
                        "an integer >= 2 or a list of them", "integers")
    degrees, is_range = _degrees(value["degree"])
    rates = _rates(value["link_rate"])
    hardware_file = value.get("hardware_file")
    names = tuple(hardware_names())
    if hardware_file is not None:
        from codesign.workloads.hardware import load_hardware_catalog

        if not isinstance(hardware_file, str) or not hardware_file:
            raise invalid(f"{where} hardware_file", hardware_file,
                          "the path of a hardware catalog YAML (e.g. from codesign calibrate)")
        hardware_file = str(Path(hardware_file).resolve())
        names = tuple(load_hardware_catalog(hardware_file).names())
    gpus = _names(value.get("gpu", [names[0] if hardware_file else "A100-80"]),
                  f"{where} gpu", names)
    methods = _names(value.get("collective_method", ["best"]), f"{where} collective_method",
                     collective_methods())
    search = _search_budget(value.get("strategy_search", True), f"{where} strategy_search")
    oversub = _number(value.get("leafspine_oversub", 2.0), f"{where} leafspine_oversub")
    per_server = value.get("gpus_per_server")
    if per_server is not None:
        per_server = check_int(f"{where} gpus_per_server", per_server, 1, 1024)
    catalog = value.get("catalog")
    if catalog is not None:
        from topologies.cost import check_catalog

        catalog = check_catalog(catalog, f"{where} catalog")
    overlap = check_choice(f"{where} comm_overlap", value.get("comm_overlap", "framework"),
                           COMM_OVERLAPS)
    return SweepSpace(families, servers, degrees, is_range, rates, gpus, methods, search,
                      oversub, per_server, hardware_file, catalog, overlap)


def parse_sweep_spec(spec: Any, *, where: str = "sweep spec") -> SweepSpec:
    """Validate a loaded sweep specification (a mapping, e.g. from YAML).

    Parameters
    ----------
    spec : mapping
        Keys as in the module docstring.
    where : str, optional
        What the mapping is, for messages (the file name).

    Returns
    -------
    SweepSpec

    Raises
    ------
    InvalidSpecError
        Any unknown key, wrong type or out-of-range value (one line naming it).
    """
    check_keys(spec, allowed=_TOP_KEYS, required=("study", "workloads", "space"), where=where)
    study = spec["study"]
    if not isinstance(study, str) or not _STUDY_RE.match(study):
        raise invalid("sweep study", study, "a folder name of letters, digits, '_', '.' or '-'")
    workloads = _workloads(spec["workloads"])
    space = _space(spec["space"])
    _check_strategy_gpus(workloads, space)
    objectives = _names(spec.get("objectives", ["iteration_time_s", "cost_usd"]),
                        "sweep objectives", tuple(OBJECTIVES))
    constraints = spec.get("constraints") or {}
    check_keys(constraints, allowed=("budget_usd", "max_degree"), where="sweep constraints")
    budget = constraints.get("budget_usd")
    budget = None if budget is None else parse_usd(budget, "sweep constraints budget_usd")
    max_degree = constraints.get("max_degree")
    if max_degree is not None:
        max_degree = check_int("sweep constraints max_degree", max_degree, 1, MAX_SERVER_DEGREE)
        kept = tuple(d for d in space.degrees if d <= max_degree)
        if not kept:
            raise invalid("sweep constraints max_degree", max_degree,
                          f"an integer >= the smallest degree of the space ({min(space.degrees)})")
        space = dataclasses.replace(space, degrees=kept)
    default_sampler = "nsga2" if len(objectives) > 1 else "tpe"
    sampler = spec.get("sampler", default_sampler)
    check_choice("sweep sampler", sampler, SAMPLERS)
    population = check_int("sweep population_size", spec.get("population_size", 8), 2, 100000)
    trials = check_int("sweep trials", spec.get("trials", 24), 1, 10_000_000)
    in_flight = check_int("sweep max_in_flight", spec.get("max_in_flight", 2), 1, 100000)
    seed = check_int("sweep seed", spec.get("seed", 0), 0, 2 ** 32 - 1)
    storage = spec.get("storage")
    if storage is not None and (not isinstance(storage, str) or "://" not in storage):
        raise invalid("sweep storage", storage,
                      "an Optuna storage URL such as sqlite:///study.db, or null (journal file)")
    batch = check_int("sweep batch_size", spec.get("batch_size", 8), 1, 100000)
    timeout = spec.get("trial_timeout_s", 600.0)
    if timeout is not None:
        timeout = _number(timeout, "sweep trial_timeout_s")
    procurement = _procurement(spec.get("procurement"), objectives, workloads)
    return SweepSpec(study, workloads, space, objectives, budget, max_degree, sampler, population,
                     trials, in_flight, seed, storage, batch, timeout, procurement)


def _check_strategy_gpus(workloads, space: SweepSpace) -> None:
    """A workload's given strategy must use the GPUs of some design of the space (servers
    x GPUs per server); one that fits none was found only when every trial was pruned."""
    from codesign.workloads import get_hardware, parse_strategy
    from codesign.workloads.hardware import load_hardware_catalog

    catalog = load_hardware_catalog(space.hardware_file) if space.hardware_file else None
    per = {space.gpus_per_server or get_hardware(g, catalog).gpus_per_server
           for g in space.gpus}
    counts = sorted({n * p for n in space.servers for p in per})
    for i, w in enumerate(workloads):
        if w.strategy is not None and parse_strategy(w.strategy).gpus not in counts:
            shown = ", ".join(map(str, counts[:8])) + (" ..." if len(counts) > 8 else "")
            raise invalid(f"sweep workloads[{i}] strategy", w.strategy,
                          f"a strategy on the GPUs of a design of the space ({shown}), not "
                          f"{parse_strategy(w.strategy).gpus}")


PROCUREMENT_KEYS = ("tokens", "samples", "epochs", "dataset_samples", "usd_per_kwh", "pue",
                     "utilisation", "years", "gpu_hour_usd", "prices")


def _procurement(value: Any, objectives: tuple[str, ...],
                 workloads: tuple[WorkloadItem, ...]) -> tuple[tuple[str, Any], ...]:
    """Validate the ``procurement`` mapping, e.g. ``{tokens: 15e12, pue: 1.2, years: 5}``
    (goal: one of tokens/samples/epochs, with dataset_samples for epochs; TCO: usd_per_kwh,
    pue, utilisation, years, gpu_hour_usd, prices = a price catalog file)."""
    from search.time_to_train import parse_goal

    procurement_objectives = [o for o in objectives if o in ("tco_usd", "usd_per_run",
                                                             "days_to_train")]
    if value is None:
        if procurement_objectives:
            raise invalid("sweep objectives", procurement_objectives[0],
                          "a procurement mapping in the spec (e.g. procurement: {tokens: "
                          "15e12})")
        return ()
    check_keys(value, allowed=PROCUREMENT_KEYS, where="sweep procurement")
    goal = parse_goal(tokens=value.get("tokens"), samples=value.get("samples"),
                      epochs=value.get("epochs"), dataset_samples=value.get("dataset_samples"))
    needs_goal = [o for o in procurement_objectives if o != "tco_usd"]
    if goal is None and needs_goal:
        raise invalid("sweep objectives", needs_goal[0],
                      "a training goal in procurement (tokens, samples or epochs)")
    if goal is not None and len(workloads) != 1:
        raise invalid("sweep procurement goal with a workload mix", len(workloads),
                      "one workload (days to train are per model)")
    from codesign.tco import TcoParams

    numbers = {k: _number(value[k], f"sweep procurement {k}", positive=False)
               for k in ("usd_per_kwh", "pue", "utilisation", "years", "gpu_hour_usd")
               if value.get(k) is not None}
    TcoParams(**numbers)    # validates the ranges
    prices = value.get("prices")
    if prices is not None:
        from codesign.tco import load_prices

        if not isinstance(prices, str):
            raise invalid("sweep procurement prices", prices, "a price catalog YAML path")
        load_prices(prices)
    out = dict(numbers, **(goal.to_dict() if goal is not None else {}))
    if prices is not None:
        out["prices"] = prices
    return tuple(sorted(out.items()))


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep YAML file (:func:`parse_sweep_spec`)."""
    data = load_yaml(path)
    return parse_sweep_spec(data, where=f"sweep file {str(path)!r}")
