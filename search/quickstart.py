"""The quickstart study: the walking skeleton of the whole pipeline.

``codesign quickstart`` calls :func:`run_quickstart`: a small multi-objective
Optuna study (minimise iteration time and network cost) over topology family,
link rate and server degree for a fixed number of servers, whose trials are
evaluated as Ray tasks (:func:`search.evaluate_design.evaluate_design`) and
whose rows go to Parquet through :class:`codesign.records.RecordWriter`.
``codesign report`` then reads that folder (:func:`codesign.report.write_report`).

Layout of ``results/<study>/``::

    records/part-00000.parquet ...   the records, and nothing else (so that
                                     pandas.read_parquet("results/<study>/records")
                                     and DuckDB/Polars globs read the study)
    optuna-journal.log               the Optuna journal (resumable storage)
    report.md, report.html, pareto.png   written by codesign report  DESIGN.md section 7 is the
contract: Ray embedded locally by default, Optuna ask/tell driven by this loop,
a journal file as storage, Parquet parts appended per batch.

The loop
--------
* **Ask/tell, deterministic.**  At most ``max_in_flight`` trials run at once.
  Trials are told in trial-number order and trial ``k`` is asked right after
  trial ``k - max_in_flight`` has been told, so the sampler (NSGA-II, seeded)
  always sees exactly the same history when it proposes trial ``k``: a fresh
  study with the same configuration proposes the same designs whatever the
  order in which Ray finishes them.  (A slow trial delays the next ask; the
  quickstart's trials all take milliseconds.)
* **Outcomes.**  A design that cannot be built or priced is told ``PRUNED``
  and recorded with its reason; an exception, a lost worker (after Ray's
  retries) or a timeout is told ``FAIL`` and recorded as ``failed``; the study
  goes on.
* **Records.**  Each told trial carries its record as the Optuna user attribute
  ``codesign_record``; records are written in batches of ``batch_size``.  On
  start, trials of the study that have no record yet (the previous run
  stopped before writing its last batch) get theirs from that attribute, and
  trials left running by a stopped run are told ``FAIL`` and recorded as
  ``failed`` ("interrupted").  So the Parquet folder and the journal agree.
* **Resuming.**  ``trials`` is the planned size of the study: running again
  with the same configuration tops the study up to ``trials`` (and does
  nothing if it is complete).  A different configuration under the same
  study folder is refused (its ``config_hash`` differs): choose another
  ``results_dir`` or ``study``.  A resumed study proposes valid designs but not
  necessarily the ones an uninterrupted run would have.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from search.evaluate_design import (
    DESIGN_FAMILIES,
    TIME_MODEL,
    DesignPoint,
    DesignResult,
    evaluate_design,
)

__all__ = [
    "DEFAULT_FAMILIES",
    "DEFAULT_LINK_RATES_BPS",
    "QuickstartConfig",
    "QuickstartResult",
    "run_quickstart",
]

#: Families compared by default (TopoOpt Section 5.1's architectures that exist here).
DEFAULT_FAMILIES = ("fattree", "leafspine", "ideal", "expander", "torus", "perms")
#: Default link rates: 25, 100, 200 and 400 Gbps, in bytes/s.
DEFAULT_LINK_RATES_BPS = (25e9 / 8, 100e9 / 8, 200e9 / 8, 400e9 / 8)
#: Optuna user attribute holding a trial's record (JSON).
RECORD_ATTR = "codesign_record"
#: Optuna study user attribute holding the configuration hash.
CONFIG_HASH_ATTR = "codesign_config_hash"

_STUDY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_OBJECTIVES = ("iteration_time_s", "cost_usd")


def _int(value: Any, field_: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise invalid(f"quickstart {field_}", value, f"an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class QuickstartConfig:
    """Configuration of :func:`run_quickstart`.

    Attributes
    ----------
    servers : int
        Servers in every design (fixed), >= 2.
    trials : int
        Planned number of trials of the study (>= 1); a rerun tops up to it.
    seed : int
        Seed of the sampler (NSGA-II) and of randomized families.
    families : tuple of str
        Topology families to choose from (keys of
        :data:`search.evaluate_design.DESIGN_FAMILIES`).
    link_rates_Bps : tuple of float or str
        Link rates to choose from, bytes/s (strings such as ``"100Gbps"`` are
        parsed).
    degree_range : tuple of int
        Inclusive range ``(low, high)`` of the server degree.
    allreduce_size_bytes : float or str
        All-reduce buffer per server, bytes (``"1GiB"`` is parsed).
    leafspine_oversub : float
        Oversubscription of the ``leafspine`` family.
    results_dir : str or pathlib.Path
        Root of the results; the study lives in ``results_dir/study/``.
    study : str
        Study name (a folder name: letters, digits, ``_ . -``).
    journal_path : str or pathlib.Path, optional
        Optuna journal file (default ``results_dir/study/optuna-journal.log``).
    storage : str, optional
        An Optuna storage URL (``sqlite:///study.db``) used instead of the journal.
    ray_address : str, optional
        Join this Ray cluster instead of starting a local instance.
    num_cpus : int, optional
        CPUs of the local Ray instance (default: all).
    max_in_flight : int
        Trials evaluated at the same time (>= 1).
    population_size : int
        NSGA-II population size (>= 2); small so that a short study evolves.
    batch_size : int
        Records per Parquet part file (>= 1).
    trial_timeout_s : float, optional
        A trial still running after this many seconds is cancelled and
        recorded as failed (``None``: no limit).
    """

    servers: int = 16
    trials: int = 12
    seed: int = 0
    families: tuple[str, ...] = DEFAULT_FAMILIES
    link_rates_Bps: tuple[float, ...] = DEFAULT_LINK_RATES_BPS
    degree_range: tuple[int, int] = (2, 8)
    allreduce_size_bytes: float = float(2 ** 30)
    leafspine_oversub: float = 2.0
    results_dir: str | Path = "results"
    study: str = "quickstart"
    journal_path: str | Path | None = None
    storage: str | None = None
    ray_address: str | None = None
    num_cpus: int | None = None
    max_in_flight: int = 2
    population_size: int = 6
    batch_size: int = 4
    trial_timeout_s: float | None = 300.0

    def __post_init__(self) -> None:
        from codesign.units import parse_bandwidth, parse_size

        _int(self.servers, "servers", 2)
        _int(self.trials, "trials", 1)
        _int(self.seed, "seed", 0)
        _int(self.max_in_flight, "max_in_flight", 1)
        _int(self.population_size, "population_size", 2)
        _int(self.batch_size, "batch_size", 1)
        families = (self.families,) if isinstance(self.families, str) else tuple(self.families)
        if not families or len(set(families)) != len(families):
            raise invalid("quickstart families", self.families,
                          f"distinct names among {', '.join(DESIGN_FAMILIES)}")
        for fam in families:
            if fam not in DESIGN_FAMILIES:
                raise invalid("quickstart family", fam, f"one of {', '.join(DESIGN_FAMILIES)}")
        rates = tuple(parse_bandwidth(r, field="quickstart link rate") for r in
                      ((self.link_rates_Bps,) if isinstance(self.link_rates_Bps, (str, int, float))
                       else self.link_rates_Bps))
        if not rates or len(set(rates)) != len(rates):
            raise invalid("quickstart link_rates_Bps", self.link_rates_Bps,
                          "one or more distinct bandwidths such as 100Gbps")
        degrees = tuple(self.degree_range) if isinstance(self.degree_range, (tuple, list)) else ()
        if (len(degrees) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in degrees)
                or not 1 <= degrees[0] <= degrees[1]):
            raise invalid("quickstart degree_range", self.degree_range,
                          "two integers (low, high) with 1 <= low <= high")
        size = parse_size(self.allreduce_size_bytes, field="quickstart allreduce size")
        oversub = float(self.leafspine_oversub)
        if not math.isfinite(oversub) or oversub <= 0:
            raise invalid("quickstart leafspine_oversub", self.leafspine_oversub, "a number > 0")
        if not isinstance(self.study, str) or not _STUDY_RE.match(self.study):
            raise invalid("quickstart study", self.study,
                          "a folder name of letters, digits, '_', '.' or '-'")
        if self.num_cpus is not None:
            _int(self.num_cpus, "num_cpus", 1)
        if self.trial_timeout_s is not None and not (
                isinstance(self.trial_timeout_s, (int, float)) and self.trial_timeout_s > 0):
            raise invalid("quickstart trial_timeout_s", self.trial_timeout_s,
                          "a number of seconds > 0 or None")
        for name, value in (("families", families), ("link_rates_Bps", rates),
                            ("degree_range", degrees), ("allreduce_size_bytes", size),
                            ("leafspine_oversub", oversub),
                            ("results_dir", Path(self.results_dir))):
            object.__setattr__(self, name, value)
        if self.journal_path is not None:
            object.__setattr__(self, "journal_path", Path(self.journal_path))

    @property
    def study_dir(self) -> Path:
        """The study's folder, ``results_dir/study`` (records, journal, report)."""
        return Path(self.results_dir) / self.study

    @property
    def records_dir(self) -> Path:
        """The Parquet parts, ``results_dir/study/records`` (nothing else lives there, so
        ``pandas.read_parquet(records_dir)`` reads the whole study)."""
        return self.study_dir / "records"

    @property
    def journal(self) -> Path | None:
        """The Optuna journal file, or ``None`` when ``storage`` is a URL."""
        if self.storage:
            return None
        return Path(self.journal_path) if self.journal_path else self.study_dir / "optuna-journal.log"

    def identity(self) -> dict[str, Any]:
        """The fields that define the study (what :meth:`config_hash` hashes).

        Paths, Ray placement, the planned trial count, batch size and timeout
        are left out: they change where and how long the study runs, not which
        designs it proposes or how they are scored.
        """
        return {"study": self.study, "servers": self.servers, "seed": self.seed,
                "families": list(self.families), "link_rates_Bps": list(self.link_rates_Bps),
                "degree_range": list(self.degree_range),
                "allreduce_size_bytes": self.allreduce_size_bytes,
                "leafspine_oversub": self.leafspine_oversub, "max_in_flight": self.max_in_flight,
                "population_size": self.population_size, "time_model": TIME_MODEL,
                "sampler": "NSGAIISampler"}

    def config_hash(self) -> str:
        """First 16 hex digits of the SHA-256 of :meth:`identity` (canonical JSON)."""
        text = json.dumps(self.identity(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def search_space(self) -> dict[str, Any]:
        """The Optuna distributions asked for every trial (family, link rate, degree)."""
        from optuna.distributions import CategoricalDistribution, IntDistribution

        return {"family": CategoricalDistribution(self.families),
                "link_bandwidth_Bps": CategoricalDistribution(self.link_rates_Bps),
                "degree": IntDistribution(self.degree_range[0], self.degree_range[1])}


@dataclass(frozen=True)
class QuickstartResult:
    """What :func:`run_quickstart` returns.

    Attributes
    ----------
    study : str
        Study name.
    results_dir : pathlib.Path
        The study's folder (``results_dir/study``), input of ``codesign report``;
        the Parquet parts are in its ``records/`` subfolder.
    journal_path : pathlib.Path or None
        The Optuna journal (``None`` with a storage URL).
    trials_run : int
        Trials evaluated by this call.
    complete, pruned, failed : int
        Records of the whole study by status.
    records : int
        Records in the folder.
    duration_s : float
        Wall time of the call, seconds.
    config_hash : str
        :meth:`QuickstartConfig.config_hash`.
    """

    study: str
    results_dir: Path
    journal_path: Path | None
    trials_run: int
    complete: int
    pruned: int
    failed: int
    records: int
    duration_s: float
    config_hash: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (paths as strings)."""
        return {"study": self.study, "results_dir": str(self.results_dir),
                "journal": str(self.journal_path) if self.journal_path else None,
                "trials_run": self.trials_run, "complete": self.complete,
                "pruned": self.pruned, "failed": self.failed, "records": self.records,
                "duration_s": self.duration_s, "config_hash": self.config_hash}


# --------------------------------------------------------------------- records
def _point(config: QuickstartConfig, params: dict[str, Any]) -> DesignPoint:
    return DesignPoint(family=params.get("family", ""), servers=config.servers,
                       degree=int(params.get("degree", 0)),
                       link_bandwidth_Bps=float(params.get("link_bandwidth_Bps", float("nan"))),
                       allreduce_size_bytes=config.allreduce_size_bytes, seed=config.seed,
                       oversub=config.leafspine_oversub)


def _record(config: QuickstartConfig, number: int, point: DesignPoint,
            result: DesignResult | None, *, status: str | None = None,
            reason: str = "") -> dict[str, Any]:
    """The record row of one trial (``result`` None: failed before producing one)."""
    from codesign import __version__
    from codesign.records import to_json

    row: dict[str, Any] = {
        "study": config.study, "trial": int(number),
        "family": point.family, "servers": point.servers, "degree": point.degree,
        "link_bandwidth_Bps": point.link_bandwidth_Bps,
        "allreduce_size_bytes": point.allreduce_size_bytes,
        "params_json": to_json(point.to_dict()), "time_model": TIME_MODEL,
        "seed": config.seed, "config_hash": config.config_hash(),
        "package_version": __version__,
    }
    if result is not None:
        row.update({
            "status": result.status, "topology_spec": result.topology_spec or None,
            "iteration_time_s": result.iteration_time_s,
            "allreduce_time_s": result.allreduce_time_s, "cost_usd": result.cost_usd,
            "cost_breakdown": to_json(result.cost_breakdown) if result.status == "complete"
            else None,
            "npus": result.npus, "switches": result.switches, "links": result.links,
            "diameter": result.diameter, "reason": result.reason,
            "started_at": result.started_at, "duration_s": result.duration_s,
            "time_model": result.time_model,
        })
    if status is not None:
        row["status"] = status
    if reason:
        row["reason"] = reason
    row.setdefault("reason", "")
    return row


def _encode(row: dict[str, Any]) -> str:
    return json.dumps({k: (v.isoformat() if isinstance(v, datetime) else v)
                       for k, v in row.items()}, sort_keys=True)


def _decode(text: str) -> dict[str, Any]:
    row = json.loads(text)
    if row.get("started_at"):
        row["started_at"] = datetime.fromisoformat(row["started_at"])
    return row


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc  # RayTaskError wraps the task's exception
    lines = str(cause).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(cause).__name__}: {text}"[:500]


# ----------------------------------------------------------------------- study
def _open_study(config: QuickstartConfig):
    """Create or load the Optuna study and check that it belongs to ``config``."""
    import optuna
    from optuna.samplers import NSGAIISampler

    from codesign.records import record_files

    if config.storage:
        storage: Any = config.storage
    else:
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        journal = config.journal
        journal.parent.mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(journal)))
    if (config.study not in optuna.get_all_study_names(storage) and config.records_dir.is_dir()
            and record_files(config.records_dir)):
        # Records without their journal: a new study would reuse their trial numbers.
        raise InvalidSpecError(
            f"invalid quickstart study {config.study!r}: {config.records_dir} already holds "
            f"records but the storage ({config.journal or config.storage}) has no such study; "
            f"restore the journal or use another results_dir or study name")
    sampler = NSGAIISampler(population_size=config.population_size, seed=config.seed)
    study = optuna.create_study(study_name=config.study, storage=storage, sampler=sampler,
                                directions=["minimize", "minimize"], load_if_exists=True)
    wanted = config.config_hash()
    found = study.user_attrs.get(CONFIG_HASH_ATTR)
    if found is None:
        study.set_user_attr(CONFIG_HASH_ATTR, wanted)
        study.set_user_attr("codesign_config", config.identity())
        with warnings.catch_warnings():  # experimental in Optuna 3.2-5: harmless here
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(list(_OBJECTIVES))
    elif found != wanted:
        raise InvalidSpecError(
            f"invalid quickstart study {config.study!r}: its storage "
            f"({config.journal or config.storage}) holds a study made with another configuration "
            f"(config_hash {found}, now {wanted}); use another results_dir or study name")
    return study


def _reconcile(study, config: QuickstartConfig, writer) -> None:
    """Give every trial of the study a record (see the module docstring)."""
    from optuna.trial import TrialState

    from codesign.records import load_records

    frame = load_records(config.records_dir)
    recorded = set(int(t) for t in frame["trial"]) if len(frame) else set()
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.number in recorded:
            continue
        point = _point(config, t.params)
        if t.state in (TrialState.RUNNING, TrialState.WAITING):
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            rows.append(_record(config, t.number, point, None, status="failed",
                                reason="interrupted: the run evaluating this trial stopped "
                                       "before it finished"))
        elif RECORD_ATTR in t.user_attrs:
            rows.append(_decode(t.user_attrs[RECORD_ATTR]))
        else:
            status = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned"}.get(
                t.state, "failed")
            rows.append(_record(config, t.number, point, None, status="failed",
                                reason=f"trial finished as {status} without a codesign record"))
    writer.write(rows)


def _run_trials(study, config: QuickstartConfig, writer, to_run: int,
                progress: Callable[..., Any] | None,
                evaluate: Callable[[DesignPoint], DesignResult]) -> None:
    import ray
    from optuna.trial import TrialState

    # max_retries: a lost worker is retried by Ray; exceptions raised by the
    # evaluation itself are not (it is deterministic), they are recorded as failed.
    remote = ray.remote(num_cpus=1, max_retries=2, retry_exceptions=False)(evaluate)
    space = config.search_space()
    in_flight: deque = deque()  # (trial, point, object ref), in trial order
    pending: list[dict[str, Any]] = []
    asked = told = 0
    try:
        while told < to_run:
            while len(in_flight) < config.max_in_flight and asked < to_run:
                trial = study.ask(space)
                point = _point(config, trial.params)
                in_flight.append((trial, point, remote.remote(point)))
                asked += 1
            # Tell strictly in trial order: the sampler's history at each ask is fixed.
            trial, point, ref = in_flight.popleft()
            try:
                result = ray.get(ref, timeout=config.trial_timeout_s)
                if isinstance(result, DesignResult):
                    row = _record(config, trial.number, point, result)
                else:
                    row = _record(config, trial.number, point, None, status="failed",
                                  reason=f"the evaluation returned {type(result).__name__}, "
                                         f"not a DesignResult")
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref, force=True)
                row = _record(config, trial.number, point, None, status="failed",
                              reason=f"timed out after {config.trial_timeout_s:g} s")
            except Exception as exc:  # noqa: BLE001 - any task failure is recorded, the study goes on
                row = _record(config, trial.number, point, None, status="failed",
                              reason=_one_line(exc))
            values = [row.get(k) for k in _OBJECTIVES]
            if row["status"] == "complete" and not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values):
                row.update(status="failed", reason=f"objectives {values} are not finite numbers")
            values = [float(v) for v in values] if row["status"] == "complete" else values
            trial.set_user_attr(RECORD_ATTR, _encode(row))
            if row["status"] == "complete":
                study.tell(trial, values)
            else:
                study.tell(trial, state=TrialState.PRUNED if row["status"] == "pruned"
                           else TrialState.FAIL)
            told += 1
            pending.append(row)
            if len(pending) >= config.batch_size:
                writer.write(pending)
                pending = []
            if progress is not None:
                progress(told, to_run)
    finally:
        # Told trials keep their record in the journal too, so even if this write is
        # lost the next run restores it (_reconcile).
        writer.write(pending)


def run_quickstart(config: QuickstartConfig | None = None, *,
                   progress: Callable[[int, int], Any] | None = None,
                   evaluate: Callable[[DesignPoint], DesignResult] | None = None
                   ) -> QuickstartResult:
    """Run (or top up) the quickstart study and write its records.

    Parameters
    ----------
    config : QuickstartConfig, optional
        Defaults: 16 servers, 12 trials, seed 0, six families, 25-400 Gbps links,
        degree 2-8, a 1 GiB all-reduce, results under ``results/quickstart/``.
    progress : callable, optional
        Called as ``progress(done, total)`` after every finished trial of this
        call (``total`` = trials this call runs).
    evaluate : callable, optional
        The evaluation run in each Ray task, ``DesignPoint -> DesignResult``
        (default :func:`search.evaluate_design.evaluate_design`); for tests and
        experiments with another performance model.  It must be picklable.

    Returns
    -------
    QuickstartResult
        Paths and counts; ``results_dir`` is the folder to pass to
        :func:`codesign.report.write_report`.

    Raises
    ------
    InvalidSpecError
        The study folder holds a study with another configuration.

    Notes
    -----
    Starts a local Ray instance (all CPUs or ``num_cpus``) unless Ray is
    already initialised in this process or ``ray_address`` is given; shuts
    down only an instance it started.  Ray is not started at all when the
    study already has its ``trials``.  The 12-trial default finishes in well
    under a minute on 2 cores, most of it Ray start-up.
    """
    import optuna

    from codesign.records import RecordWriter, load_records
    from search.ray_session import ray_session

    config = config if config is not None else QuickstartConfig()
    t0 = time.perf_counter()
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the library stays quiet
    try:
        writer = RecordWriter(config.records_dir)
        study = _open_study(config)
        _reconcile(study, config, writer)
        done = sum(t.state.is_finished() for t in study.get_trials(deepcopy=False))
        to_run = max(0, config.trials - done)
        if to_run:
            with ray_session(config.ray_address, num_cpus=config.num_cpus):
                _run_trials(study, config, writer, to_run, progress,
                            evaluate if evaluate is not None else evaluate_design)
    finally:
        optuna.logging.set_verbosity(verbosity)
    frame = load_records(config.records_dir)
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    return QuickstartResult(
        study=config.study, results_dir=config.study_dir, journal_path=config.journal,
        trials_run=to_run, complete=int(counts.get("complete", 0)),
        pruned=int(counts.get("pruned", 0)), failed=int(counts.get("failed", 0)),
        records=len(frame), duration_s=time.perf_counter() - t0,
        config_hash=config.config_hash())
