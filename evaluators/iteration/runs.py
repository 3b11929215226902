"""Measured training runs: the CSV format of ``codesign calibrate`` and of the validation set.

One row per run (``experiments/validation/README.md`` documents the columns)::

    id,source,gpu,gpus,workload,options,strategy,system,measured,value,flops_formula

``workload`` is a zoo name (with ``options``: space-separated ``key=value`` overrides of
its hyper-parameters and settings) or a model YAML file; ``strategy`` a strategy string
whose ``dp x tp x pp x cp`` equals ``gpus``; ``system`` a topology spec or YAML file
(a relative path beside the runs file) whose NPUs are the job's servers or GPUs, built
when the file is read (default: an ideal switch with the GPU's reference servers and
NIC rate); ``measured`` one of ``iteration_s``, ``tokens_per_s``, ``samples_per_s`` (the
whole job's images or sequences per second) or ``tflops_per_gpu``
(then ``flops_formula`` names the FLOP count the publication used, see
:func:`published_flops`); optional ``evaluate``: space-separated ``key=value`` options
of :func:`~evaluators.iteration.evaluate` that the publication states
(:data:`EVALUATE_KEYS`, e.g. ``tp_comm_overlap=true param_gather_overlap=true``;
``tp_comm_overlap=backward`` for Megatron-LM's asynchronous TP all-reduce;
``pp_comm_overlap=true`` for its overlapped pipeline sends; ``gpus_per_server=4`` where
the job's servers hold other than the catalog's reference number of GPUs, e.g. the
4-GPU compute trays of a GB200 NVL72 job that fills no whole rack).
Extra columns (``reference``, ``notes``) are kept as text.

Every bad cell raises :class:`~codesign.errors.InvalidSpecError` naming the file, the
row (1 = first data row) and the field.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import InfeasibleError, InvalidSpecError, invalid
from codesign.files import is_file
from codesign.workloads.compute import resolve_precision
from codesign.specs import check_choice

__all__ = ["Run", "load_runs", "published_flops", "FLOPS_FORMULAS", "MEASURED", "EVALUATE_KEYS",
           "predict_run", "default_system", "memory_fits", "block_time", "comparable_pairs",
           "comparison_errors"]

#: What a row may measure.
MEASURED = ("iteration_s", "tokens_per_s", "samples_per_s", "tflops_per_gpu")
#: Options of ``evaluate`` a row may set (column ``evaluate``): true/false ones, then names.
_BOOLEAN_KEYS = ("overlap", "tp_comm_overlap", "param_gather_overlap", "pp_comm_overlap",
                 "ep_comm_overlap")
_INTEGER_KEYS = ("gpus_per_server",)
EVALUATE_KEYS = _BOOLEAN_KEYS + ("collective_method", "network_model", "routing",
                                 "ep_dispatch", "attention_kernel") \
    + _INTEGER_KEYS
#: FLOP counts publications use to report TFLOP/s per GPU.
FLOPS_FORMULAS = ("megatron-recompute", "megatron")
#: Range of a measured iteration time, seconds.  Below a microsecond is less than one
#: kernel launch (~5 us on today's GPUs); above 10^6 s (11.6 days) one step is no
#: training run one can measure.  Outside it the value is a typo or a unit slip, and in
#: the least-squares fit of log times a 1e300 overflowed to non-finite residuals.
MIN_ITERATION_S, MAX_ITERATION_S = 1e-6, 1e6
_REQUIRED = ("id", "gpu", "gpus", "workload", "strategy", "measured", "value")
#: Every column a runs file may have (README of experiments/validation, "Columns"); an
#: unknown one is refused: a misspelt ``evaluate`` would be dropped without a word.
_COLUMNS = _REQUIRED + ("source", "reference", "options", "system", "evaluate",
                        "flops_formula", "notes")


@dataclass(frozen=True)
class Run:
    """One measured training run.

    ``measured_s`` is the iteration time in seconds, converted from the published
    quantity (:func:`load_runs`).
    """

    id: str
    source: str
    hardware: str
    gpus: int
    workload: Any
    strategy: Any
    system: str
    measured_s: float
    row: int
    measured: str = "iteration_s"
    value: float = 0.0
    reference: str = ""
    notes: str = ""
    options: tuple[tuple[str, Any], ...] = ()


def _model_key(run: Run) -> tuple:
    """What two runs must share to form a comparison (:func:`comparable_pairs`): the
    source, the GPU type, the model (its hyper-parameters, or for a model file its name
    and parameter count), its LoRA settings and the number format of its matrix math."""
    w, s = run.workload, run.strategy
    hp = getattr(w, "hyperparameters", None) or {}
    model = tuple(sorted((k, repr(v)) for k, v in hp.items())) if hp else (w.parameters,)
    precision = getattr(s, "precision", None) or w.precision
    return (run.source, run.hardware.lower(), w.name, model, w.lora_rank, w.lora_modules,
            precision)


def comparable_pairs(runs: Sequence[Run]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of runs whose ratio of times is a comparison the
    model makes: one source (one software stack and cluster), one GPU type, one model in
    one number format -- differing in anything else (GPUs, strategy, batch, system).

    Every question this project answers is such a ratio (fabric A against B, strategy X
    against Y, 8k against 16k GPUs); :func:`comparison_errors` measures how well the
    model predicts it.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> w = NS(name="m", hyperparameters={"layers": 2}, parameters=1, lora_rank=0,
    ...        lora_modules=(), precision=None)
    >>> run = lambda src, prec: Run("r", src, "H100", 8, w, NS(precision=prec), "", 1.0, 1)
    >>> comparable_pairs([run("a", "bf16"), run("a", "bf16"), run("b", "bf16"),
    ...                   run("a", "fp8")])
    [(0, 1)]
    """
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault(_model_key(r), []).append(i)
    # Within groups only: linear in the runs plus the pairs (not all n^2 / 2 of them).
    return sorted((a, b) for members in groups.values()
                  for k, a in enumerate(members) for b in members[k + 1:])


def comparison_errors(runs: Sequence[Run], predicted_s: Sequence[float]) -> np.ndarray:
    """Relative error of every predicted ratio of two comparable runs' times.

    For a pair with relative errors ``e_i`` and ``e_j`` (predicted / measured - 1) the
    predicted ratio of their times is off by ``(1 + e_i) / (1 + e_j)``; the error is
    taken in the worse direction, ``exp(|ln(1 + e_i) - ln(1 + e_j)|) - 1``, so it does
    not depend on which run is named first.  Errors common to both runs (a kernel
    efficiency the publication's software beats or misses everywhere) cancel.

    Parameters
    ----------
    runs : sequence of Run
    predicted_s : sequence of float
        Predicted iteration times (s), one per run.

    Returns
    -------
    numpy.ndarray
        One error per :func:`comparable_pairs` pair, in that order (empty without pairs).

    Examples
    --------
    Two runs 10 % and 21 % slow: their ratio is off by 1.21 / 1.10 - 1 = 10 %.

    >>> from types import SimpleNamespace as NS
    >>> w = NS(name="m", hyperparameters={}, parameters=1, lora_rank=0, lora_modules=(),
    ...        precision=None)
    >>> runs = [Run(str(i), "a", "H100", 8, w, NS(precision=None), "", 1.0, 1)
    ...         for i in range(2)]
    >>> comparison_errors(runs, [1.10, 1.21]).round(4).tolist()
    [0.1]
    """
    if len(predicted_s) != len(runs):
        raise invalid("predicted_s", len(predicted_s), f"one time per run ({len(runs)})")
    log_ratio = np.log(np.asarray(predicted_s, float)
                       / np.array([r.measured_s for r in runs], float))
    pairs = comparable_pairs(runs)
    if not pairs:
        return np.zeros(0)
    i, j = np.array(pairs).T
    return np.exp(np.abs(log_ratio[i] - log_ratio[j])) - 1.0


def published_flops(formula: str, workload) -> float:
    """FLOPs per iteration of ``workload`` under a publication's counting ``formula``.

    ``megatron-recompute``
        Narayanan et al. SC'21 Sec. 5.1: ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``, the
        model's FLOPs with the forward pass rerun by full activation recomputation.
    ``megatron``
        Megatron-LM's ``num_floating_point_operations`` (``megatron/training/training.py``,
        2024): ``12 B s l h^2 ((1 + g/a + s/h) q/h + (f/h) k r + V/(2 l h))`` for ``g``
        key/value heads of ``a``, query width ``q = a x head_dim`` (``h`` unless
        ``head_dim`` is set), FFN width ``f``, ``k`` experts per token, ``r = 3/2``
        with SwiGLU; no recomputation.

    Raises
    ------
    InvalidSpecError
        Unknown formula, or a workload without the transformer hyper-parameters.
    """
    hp = getattr(workload, "hyperparameters", {}) or {}
    need = ("layers", "hidden", "heads", "vocab", "seq_len")
    if any(k not in hp for k in need):
        raise invalid("flops_formula", formula, "only for transformer workloads (layers, "
                      "hidden, heads, vocab, seq_len)")
    B = float(workload.batch_size)
    s, l, h, V = (float(hp[k]) for k in ("seq_len", "layers", "hidden", "vocab"))
    if formula == "megatron-recompute":
        return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    if formula == "megatron":
        a = float(hp["heads"])
        g = float(hp.get("kv_heads") or a)
        f = float(hp.get("ffn") or 4 * h)
        k = float(hp.get("top_k") or 1) if hp.get("experts") else 1.0
        r = 1.5 if hp.get("gated") else 1.0
        q = a * float(hp["head_dim"]) if hp.get("head_dim") else h
        return 12.0 * B * s * l * h * h * ((1 + g / a + s / h) * q / h + f / h * k * r
                                           + V / (2 * l * h))
    raise invalid("flops_formula", formula, f"one of {', '.join(FLOPS_FORMULAS)}")


def default_system(hardware, gpus: int) -> str:
    """An ideal non-blocking switch: ``gpus / gpus_per_server`` servers, each with one
    NIC of the hardware's rate per GPU."""
    per = hardware.gpus_per_server
    servers = max(1, gpus // per)
    nic = hardware.nic_bandwidth_Bps or hardware.fabric_bandwidth_Bps
    return f"ideal:{servers},degree={per},bw={nic * 8 / 1e9:g}Gbps"


def _options(text: str, where: str) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in text.split():
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise invalid(f"{where} options", item, "space-separated KEY=VALUE pairs")
        try:
            out[key] = yaml.safe_load(val)
        except yaml.YAMLError:
            raise invalid(f"{where} options {key}", val, "a YAML value") from None
    return out


def load_runs(path: str | Path, *, hardware: str | None = None, catalog=None) -> list[Run]:
    """Read a runs CSV (module docstring); ``hardware`` keeps only that GPU's rows.

    Raises
    ------
    InvalidSpecError
        Missing file or column, or a bad cell (the message names row and field).
    """
    from codesign.workloads import get_workload, load_workload
    from codesign.workloads.hardware import get_hardware
    from codesign.workloads.strategy import as_strategy

    import io

    from codesign.files import read_text

    p = Path(path)
    if not is_file(p):
        raise invalid("runs file", str(path), "an existing CSV file")
    # The project's one safe reader: bounded size, UTF-8 text (a binary or Latin-1 file
    # is refused with one line, not a UnicodeDecodeError).
    text = read_text(p, what="runs file")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        cols = reader.fieldnames or []
        for c in _REQUIRED:
            if c not in cols:
                raise invalid(f"{p.name} columns", ",".join(cols), f"a header with {c!r}")
        # A repeated column would be read from its last cell only (DictReader).
        seen_cols: set[str] = set()
        for c in cols:
            if c in seen_cols:
                raise invalid(f"{p.name} column", c, "each column once in the header")
            check_choice(f"{p.name} column", c, _COLUMNS)
            seen_cols.add(c)
        rows = list(reader)
    except csv.Error as exc:
        raise invalid(f"{p.name}", "not CSV", f"a comma-separated file ({exc})") from None
    if not rows:
        raise invalid(f"{p.name}", "no rows", "at least one run")
    first_row: dict[str, int] = {}
    for i, r in enumerate(rows, start=1):
        # DictReader keeps the cells past the header under the key None (restkey).
        if None in r:
            raise invalid(f"{p.name} row {i}", f"{len(cols) + len(r[None])} cells",
                          f"at most {len(cols)} cells, one per header column")
        run_id = (r.get("id") or f"row{i}").strip()
        if run_id in first_row:
            raise invalid(f"{p.name} row {i} id", run_id,
                          f"an id no other row has (row {first_row[run_id]} has it)")
        first_row[run_id] = i
    runs = []
    npus_of: dict[str, int] = {}   # each distinct system built once
    for i, r in enumerate(rows, start=1):
        where = f"{p.name} row {i}"
        hw_name = (r.get("gpu") or "").strip()
        try:
            hw = get_hardware(hw_name, catalog)
        except InvalidSpecError as exc:
            allowed = str(exc).split(": ", 1)[-1].removeprefix("expected ")
            raise invalid(f"{where} gpu", hw_name, allowed) from None
        if hardware is not None and hw.name.lower() != hardware.lower():
            continue
        try:
            gpus = int(r["gpus"])
            if gpus < 1 or str(gpus) != r["gpus"].strip():
                raise ValueError
        except (ValueError, TypeError):
            raise invalid(f"{where} gpus", r.get("gpus"), "an integer >= 1") from None
        name = (r.get("workload") or "").strip()
        opts = _options(r.get("options") or "", where)
        try:
            if name.endswith((".yaml", ".yml")):
                wpath = Path(name) if Path(name).is_absolute() else p.parent / name
                workload = load_workload(wpath)
            else:
                workload = get_workload(name, **opts)
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"{where} workload/options: {exc}") from None
        try:
            strategy = as_strategy(r["strategy"].strip())
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"{where} strategy: {exc}") from None
        if strategy.gpus != gpus:
            raise invalid(f"{where} strategy", r["strategy"],
                          f"dp x tp x pp x cp = gpus ({gpus}), not {strategy.gpus}")
        measured = (r.get("measured") or "").strip()
        check_choice(f"{where} measured", measured, MEASURED)
        try:
            value = float(r["value"])
            if not math.isfinite(value) or value <= 0:
                raise ValueError
        except (ValueError, TypeError):
            raise invalid(f"{where} value", r.get("value"), "a positive number") from None
        if measured == "iteration_s":
            seconds = value
        elif measured == "samples_per_s":
            seconds = workload.batch_size / value
        elif measured == "tokens_per_s":
            seq = (workload.hyperparameters or {}).get("seq_len") or workload.seq_len
            if not seq:
                raise invalid(f"{where} measured", measured, "tokens_per_s only for "
                              "workloads with a seq_len")
            seconds = workload.batch_size * seq / value
        else:
            formula = (r.get("flops_formula") or "").strip()
            try:
                flops = published_flops(formula, workload)
            except InvalidSpecError as exc:
                raise InvalidSpecError(f"{where} flops_formula: {exc}") from None
            seconds = flops / (gpus * value * 1e12)
        if not MIN_ITERATION_S <= seconds <= MAX_ITERATION_S:
            raise invalid(f"{where} value", value,
                          f"a {measured} giving an iteration time from {MIN_ITERATION_S:g} "
                          f"to {MAX_ITERATION_S:g} s (this one gives {seconds:.3g} s)")
        # Faster than the GPUs' peak in the run's number format on the model's own FLOPs:
        # a value in the wrong unit or a typo, which a fit would turn into a profile no
        # GPU can have.
        try:
            fmt = resolve_precision(workload, hw, strategy.precision)
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"{where} precision: {exc}") from None
        achieved = workload.flops_per_iteration / (gpus * seconds)
        if achieved > hw.peak_flops(fmt):
            raise invalid(f"{where} value", value,
                          f"a {measured} the GPUs can reach (this one means "
                          f"{achieved / 1e12:,.0f} TFLOP/s of model FLOPs per GPU, above "
                          f"the {hw.name}'s {fmt} peak, "
                          f"{hw.peak_flops(fmt) / 1e12:,.0f})")
        system = (r.get("system") or "").strip() or default_system(hw, gpus)
        ev = _options(r.get("evaluate") or "", where)
        for key, val in ev.items():
            check_choice(f"{where} evaluate", key, EVALUATE_KEYS)
            if key == "tp_comm_overlap" and val == "backward":
                continue
            if key in _BOOLEAN_KEYS and not isinstance(val, bool):
                raise invalid(f"{where} evaluate {key}", val, "true or false"
                              + (" or backward" if key == "tp_comm_overlap" else ""))
            if key in _INTEGER_KEYS:
                if isinstance(val, bool) or not isinstance(val, int) or val < 1 \
                        or gpus % val:
                    raise invalid(f"{where} evaluate {key}", val,
                                  f"a whole number of GPUs that divides gpus ({gpus})")
                continue
            if key not in _BOOLEAN_KEYS and not isinstance(val, str):
                raise invalid(f"{where} evaluate {key}", val, "a name")
        system = _check_system(system, where, strategy,
                               ev.get("gpus_per_server", hw.gpus_per_server), p.parent, npus_of)
        runs.append(Run(id=(r.get("id") or f"row{i}").strip(), source=(r.get("source") or
                        "").strip(), hardware=hw.name, gpus=gpus, workload=workload,
                        strategy=strategy, system=system, measured_s=seconds, row=i,
                        measured=measured, value=value, reference=r.get("reference", ""),
                        notes=r.get("notes", ""), options=tuple(ev.items())))
    if not runs:
        raise invalid(f"{p.name} gpu", hardware, "a GPU that some row names")
    return runs


def _check_system(system: str, where: str, strategy, gpus_per_server: int, base: Path,
                  npus_of: dict[str, int]) -> str:
    """Build a row's ``system`` when the file is read, so that a bad spec or one whose
    NPUs are neither the run's servers nor its GPUs is refused naming the row before any
    run is predicted (a calibration used to stop at that row, minutes in).  Returns the
    spec to predict with: a relative YAML path found beside the runs file is read from
    there, as a workload YAML is.  ``npus_of`` caches each distinct system's NPU count
    (topologies bound their own size)."""
    from codesign.workloads.placement import Placement
    from topologies.registry import load_topology

    path = Path(system)
    if system.endswith((".yaml", ".yml")) and not path.is_absolute() \
            and is_file(base / path):
        system = str(base / path)
    if system not in npus_of:
        try:
            npus_of[system] = load_topology(system).npus
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"{where} system: {exc}") from None
    try:
        placement = Placement.for_strategy(strategy, gpus_per_server)
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"{where} strategy: {exc}") from None
    if npus_of[system] not in (placement.servers, placement.gpus):
        raise invalid(f"{where} system", system,
                      f"a topology whose NPUs are the run's servers ({placement.servers}, "
                      f"{placement.gpus_per_server} GPUs each) or its GPUs ({placement.gpus}),"
                      f" not {npus_of[system]}")
    return system


def predict_run(run: Run, hardware, **kwargs) -> float:
    """Predicted iteration time (s) of ``run`` on ``hardware`` (a Hardware; pass a copy
    with other compute parameters to test them); keyword arguments go to
    :func:`~evaluators.iteration.evaluate`.  The memory check is off by default: a
    published run did fit, whatever the memory model says (:func:`memory_fits` tells)."""
    from evaluators.iteration.model import evaluate
    from topologies.registry import load_topology

    kwargs = {**dict(run.options), **kwargs}
    kwargs.setdefault("check_memory", False)
    per = kwargs.pop("gpus_per_server", None)
    try:
        # A runs file's system, strategy and options meet the network here first: the
        # message names the row (it named only the topology field before).
        topo = load_topology(run.system)
        if per is not None:
            kwargs.setdefault("placement", _placement(run, per))
        return evaluate(topo, run.workload, run.strategy, hardware=hardware,
                        **kwargs).iteration_time_s
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"run {run.id} (row {run.row}, system {run.system!r}): "
                               f"{exc}") from None


def _placement(run: Run, gpus_per_server: int):
    """The run's ranks on servers of ``gpus_per_server`` GPUs."""
    from codesign.workloads.placement import Placement

    return Placement.for_strategy(run.strategy, gpus_per_server)


def memory_fits(run: Run, hardware) -> bool:
    """Whether the memory model finds that ``run`` fits on ``hardware``."""
    from codesign.workloads.memory import check_memory

    try:
        per = dict(run.options).get("gpus_per_server", hardware.gpus_per_server)
        check_memory(run.workload, run.strategy, hardware, _placement(run, per))
    except InfeasibleError:
        return False
    return True


def block_time(workload: str, strategy, hardware, system: str, *,
               options: dict[str, Any] | None = None, **kwargs) -> float:
    """Seconds one more transformer block adds to an iteration of ONE micro-batch:
    the model's forward + backward of a layer (recomputation and exposed TP
    communication included, the optimizer step not) -- what a profile of one layer
    measures (Korthikanti et al. 2022, Table 4).

    Parameters
    ----------
    workload : str
        A transformer of the zoo; ``options`` its hyper-parameters (``layers`` is set).
    strategy, hardware, system
        As for :func:`~evaluators.iteration.evaluate` (``microbatches=1``).
    **kwargs
        More options of :func:`~evaluators.iteration.evaluate`.

    Returns
    -------
    float
        Seconds per layer: the difference between the models with two and one blocks.
    """
    from codesign.workloads import get_workload
    from evaluators.iteration.model import evaluate
    from topologies.registry import load_topology

    topo = load_topology(system)
    kwargs.setdefault("check_memory", False)
    out = []
    for layers in (1, 2):
        w = get_workload(workload, **{**(options or {}), "layers": layers})
        r = evaluate(topo, w, strategy, hardware=hardware, **kwargs)
        out.append(r.iteration_time_s - r.optimizer_time_s)
    return out[1] - out[0]
