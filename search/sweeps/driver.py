"""The design-space sweep driver: Optuna ask/tell on Ray, records to Parquet, resumable.

``codesign sweep CONFIG.yaml`` and ``codesign quickstart`` call :func:`run_sweep`
with a :class:`search.sweeps.spec.SweepSpec`.  Each trial is one design point
(:class:`SweepPoint`: topology family, servers, degree, link rate, GPU type,
collective method, the strategy-search budget) evaluated by :func:`evaluate_trial` in a
Ray task (which co-designs the strategies of the mix on the trial's fabric,
:mod:`search.per_fabric`); its record goes to the study's Parquet
folder through :class:`codesign.records.RecordWriter`.  docs/architecture.md section 7 is
the contract: Ray embedded locally by default (an address joins a cluster),
Optuna ask/tell driven by this loop, a journal file as storage (any Optuna URL
on request), Parquet parts appended per batch.

Layout of ``results/<study>/``::

    records/part-00000.parquet ...   the records and nothing else (pandas.read_parquet,
                                     DuckDB and Polars globs read the folder as it is)
    optuna-journal.log               the Optuna journal (resumable storage)
    report.md, report.html, *.png    written by codesign report

The loop (moved here from the quickstart, which is now a sweep with an embedded spec)
-------------------------------------------------------------------------------------
* **Ask/tell, deterministic.**  At most ``max_in_flight`` trials run at once.
  Trials are told in trial-number order and trial ``k`` is asked right after
  trial ``k - max_in_flight`` has been told, so the seeded sampler always sees
  the same history when it proposes trial ``k``: a fresh study with the same
  specification proposes the same designs whatever order Ray finishes them in.
* **Outcomes.**  A design that cannot be built, exceeds the budget or whose
  strategy does not fit in GPU memory is told ``PRUNED`` and recorded with the
  reason.  An exception in the evaluation or a timeout is told ``FAIL`` and
  recorded as ``failed``.  A *lost worker* (the process died: ``os._exit``, OOM
  kill, node loss) is retried once by Ray (``max_retries=1``); if the retry is
  lost too the trial is recorded ``failed`` with Ray's error.  The study goes on.
* **Records.**  Each told trial carries its record as the Optuna user attribute
  ``codesign_record``; records are written in batches of ``batch_size``.  On
  start, trials that have no record yet (the previous run stopped before
  writing its last batch) get theirs from that attribute, and trials left
  running by a stopped run (even ``kill -9``) are told ``FAIL`` and recorded as
  ``failed`` ("interrupted").  So the Parquet folder and the journal agree and
  every trial number has exactly one record.
* **Resuming.**  ``trials`` is the planned size of the study.  A study that
  already has trials is continued only with ``resume=True`` (``--resume``): it
  is topped up to ``trials`` (nothing runs if it is complete).  A different
  specification under the same study folder is refused (its ``config_hash``
  differs).  A resumed study proposes valid designs, not necessarily those an
  uninterrupted run would have.  A resume under other code than the study was made
  with (:func:`codesign.provenance.code_fingerprint`) is said in one note: its old
  records keep the old model's times.

The evaluation of one trial (:func:`evaluate_trial`, the performance models) lives in
:mod:`search.sweeps.trial`.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.provenance import code_fingerprint
from codesign.units import format_size
from search.sweeps.spec import SweepSpec
from search.sweeps.trial import SweepPoint, TrialOutcome, evaluate_trial, time_model_name

__all__ = [
    "SweepPoint",
    "TrialOutcome",
    "SweepResult",
    "evaluate_trial",
    "run_sweep",
    "time_model_name",
    "distinct_designs",
    "planned_note",
    "resume_note",
]

#: Optuna user attribute holding a trial's record (JSON).
RECORD_ATTR = "codesign_record"
#: Optuna study user attribute holding the configuration hash.
CONFIG_HASH_ATTR = "codesign_config_hash"
#: Study attribute: :func:`codesign.provenance.code_fingerprint` of the code that created
#: the study (a resume under other code is noted, :func:`resume_note`).
CODE_ATTR = "codesign_code"
#: Disk a trial takes, bytes: its Parquet row (8.6-12.7 KB a trial on the committed sweeps,
#: mostly each part file's schema) and its Optuna journal entries (7-17 KB; more with
#: strategy searches), measured on experiments/sweeps/ and the quickstart; rounded up.
BYTES_PER_TRIAL = 32 * 1024


def distinct_designs(spec: SweepSpec) -> int:
    """Number of distinct design points of the spec's space (the grid sampler's grid)."""
    return math.prod(len(v) for v in _Run(spec, Path(".")).grid().values())


def planned_note(spec: SweepSpec) -> str | None:
    """A one-line note when the planned trials exceed the distinct designs, else ``None``.

    The samplers draw designs again once the space is covered, and every trial is timed
    and recorded, so such a plan mostly repeats work; it is allowed (a strategy search
    may find another strategy for a design drawn again) but said.
    """
    n = distinct_designs(spec)
    if spec.trials <= n:
        return None
    return (f"{spec.trials:,} trials planned over {n:,} distinct designs: designs drawn "
            f"again are timed again (records about "
            f"{format_size(spec.trials * BYTES_PER_TRIAL)})")


def resume_note(study, finished: int) -> str | None:
    """A one-line note when a resumed study's records so far were made by other code
    (:data:`CODE_ATTR`), else ``None``: its new trials are timed by today's model, the
    old ones keep their times, and one report would rank the two together."""
    made = study.user_attrs.get(CODE_ATTR)
    now = code_fingerprint()
    if not finished or made == now:
        return None
    made = made or "unrecorded"
    return (f"the study's {finished:,} finished trials were made by other code "
            f"(fingerprint {made}, now {now}); new trials use today's model, so their "
            f"times may not compare with the old records -- start another results folder "
            f"to time every design with one model")


def _check_disk(spec: SweepSpec, study_dir: Path, to_run: int) -> None:
    """Refuse, before any trial runs, a plan whose records would not fit on the disk."""
    import shutil

    where = study_dir.resolve()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return  # nothing to measure against: the writes report their own errors
    if to_run * BYTES_PER_TRIAL > free:
        raise InvalidSpecError(
            f"invalid sweep trials {spec.trials}: expected at most "
            f"{free // BYTES_PER_TRIAL:,} more on this disk ({format_size(free)} free at "
            f"{where}; a trial's records and journal take about "
            f"{format_size(BYTES_PER_TRIAL)})")


# ---------------------------------------------------------------------- result
@dataclass(frozen=True)
class SweepResult:
    """What :func:`run_sweep` returns.

    Attributes
    ----------
    study : str
        Study name.
    results_dir : pathlib.Path
        The study folder (input of ``codesign report``); records in ``records/``.
    journal_path : pathlib.Path or None
        The Optuna journal (``None`` with a storage URL).
    trials_run : int
        Trials evaluated by this call.
    complete, pruned, failed, records : int
        Records of the whole study by status, and in total.
    reasons : dict of str to int
        Pruned and failed records of the whole study counted by the kind of their
        reason (the text before the first colon: ``memory``, ``budget exceeded``,
        ``unbuildable``...).
    duration_s : float
        Wall time of the call, seconds.
    config_hash : str
        :meth:`SweepSpec.config_hash`.
    time_model : str
        Performance model of the evaluations.
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
    time_model: str
    reasons: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (paths as strings)."""
        d = asdict(self)
        d["results_dir"] = str(self.results_dir)
        d["journal_path"] = str(self.journal_path) if self.journal_path else None
        return d


# ---------------------------------------------------------------- the loop
@dataclass
class _Run:
    """One run of the loop: the spec plus where it lives."""

    spec: SweepSpec
    study_dir: Path

    @property
    def records_dir(self) -> Path:
        return self.study_dir / "records"

    @property
    def journal(self) -> Path | None:
        return None if self.spec.storage else self.study_dir / "optuna-journal.log"

    def search_space(self) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, IntDistribution

        sp = self.spec.space
        degrees = sp.degrees
        contiguous = sp.degree_is_range and degrees == tuple(range(degrees[0], degrees[-1] + 1))
        space: dict[str, Any] = {
            "family": CategoricalDistribution(sp.families),
            "servers": CategoricalDistribution(sp.servers),
            "degree": (IntDistribution(degrees[0], degrees[-1]) if contiguous
                       else CategoricalDistribution(degrees)),
            "link_bandwidth_Bps": CategoricalDistribution(sp.link_rates_Bps),
            "gpu": CategoricalDistribution(sp.gpus),
            "collective_method": CategoricalDistribution(sp.collective_methods),
        }
        # A parameter with one value is not asked (fewer journal writes per trial; the
        # point takes the value from the spec).  Family, degree and link rate always are.
        return {k: d for k, d in space.items() if k in ("family", "degree", "link_bandwidth_Bps")
                or len(getattr(d, "choices", (0, 1))) > 1}

    def grid(self) -> dict[str, list[Any]]:
        sp = self.spec.space
        grid: dict[str, list[Any]] = {
            "family": list(sp.families), "servers": list(sp.servers), "degree": list(sp.degrees),
            "link_bandwidth_Bps": list(sp.link_rates_Bps), "gpu": list(sp.gpus),
            "collective_method": list(sp.collective_methods)}
        return {k: v for k, v in grid.items() if k in self.search_space()}

    def sampler(self):
        from optuna.samplers import GridSampler, NSGAIISampler, RandomSampler, TPESampler

        s, seed = self.spec.sampler, self.spec.seed
        if s == "nsga2":
            return NSGAIISampler(population_size=self.spec.population_size, seed=seed)
        if s == "tpe":
            return TPESampler(seed=seed)
        if s == "random":
            return RandomSampler(seed=seed)

        class AskTellGridSampler(GridSampler):
            # GridSampler.after_trial calls study.stop() once the grid is covered, which
            # only works inside study.optimize; this loop stops by counting trials.
            def after_trial(self, study, trial, state, values) -> None:
                return None

        return AskTellGridSampler(self.grid(), seed=seed)

    def point(self, params: dict[str, Any]) -> SweepPoint:
        sp = self.spec.space
        return SweepPoint(
            family=params.get("family", ""), servers=int(params.get("servers", sp.servers[0])),
            degree=int(params.get("degree", 0)),
            link_bandwidth_Bps=float(params.get("link_bandwidth_Bps", float("nan"))),
            gpu=params.get("gpu", sp.gpus[0]),
            collective_method=params.get("collective_method", sp.collective_methods[0]),
            workloads=self.spec.workloads,
            search_evaluations=sp.strategy_search.evaluations if sp.strategy_search else 0,
            search_restarts=sp.strategy_search.restarts if sp.strategy_search else 1,
            search_shapes=sp.strategy_search.shapes if sp.strategy_search else 0,
            seed=self.spec.seed, oversub=sp.leafspine_oversub,
            budget_usd=self.spec.budget_usd, gpus_per_server=sp.gpus_per_server,
            hardware_file=sp.hardware_file, catalog=sp.catalog,
            procurement=self.spec.procurement, comm_overlap=sp.comm_overlap)

    def record(self, number: int, point: SweepPoint | None, outcome: TrialOutcome | None,
               *, status: str | None = None, reason: str = "",
               drawn: dict[str, Any] | None = None) -> dict[str, Any]:
        """The record row of one trial (``outcome`` None: failed before producing one).

        ``point`` None: a trial stopped before its design was drawn in full (a kill
        between two of the sampler's suggestions); its row holds what was drawn
        (``drawn``, the trial's params) and leaves the rest empty."""
        from codesign import __version__
        from codesign.records import to_json

        spec = self.spec
        workloads = spec.workloads
        mix = [asdict(w) for w in workloads]
        workload = (workloads[0].label if len(workloads) == 1 else
                    "+".join(f"{w.label}*{w.weight:g}" for w in workloads))
        if point is not None:
            params = point.to_dict()
            params.pop("workloads")
        else:
            params = dict(drawn or {})
        row: dict[str, Any] = {
            "study": spec.study, "trial": int(number), "family": params.get("family"),
            "servers": params.get("servers"), "degree": params.get("degree"),
            "link_bandwidth_Bps": params.get("link_bandwidth_Bps"),
            "params_json": to_json(params),
            "time_model": time_model_name(), "seed": spec.seed,
            "config_hash": spec.config_hash(), "package_version": __version__,
            "workload": workload, "workload_mix_json": to_json(mix), "gpu": params.get("gpu"),
            "collective_method": params.get("collective_method"),
            "budget_usd": spec.budget_usd,
            "sampler": spec.sampler, "objectives": ",".join(spec.objectives),
        }
        if outcome is not None:
            from codesign.records import RECORD_COLUMNS

            # Only schema columns (a custom evaluation may return more metrics).
            row.update({k: v for k, v in outcome.metrics.items() if k in RECORD_COLUMNS})
            row.update(status=outcome.status, reason=outcome.reason,
                       started_at=outcome.started_at, duration_s=outcome.duration_s)
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


def _task_error(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc  # RayTaskError wraps the task's exception
    lines = str(cause).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(cause).__name__}: {text}"[:500]


def _storage_error(url: str | None, journal: Path | None, exc: BaseException
                   ) -> InvalidSpecError:
    """The one-line error of a storage that cannot be opened or read."""
    lines = str(exc).strip().splitlines()
    why = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:200]
    if url:
        return invalid("sweep storage", url, "an Optuna storage URL that opens, such as "
                       f"sqlite:///study.db in an existing folder ({why})")
    return InvalidSpecError(
        f"invalid sweep journal '{journal}': cannot be read ({why}); restore it from a "
        "backup, or move it and its records/ folder away and run the sweep again")


def _open_study(run: _Run, *, resume: bool):
    """Create or load the Optuna study and check that it belongs to ``run.spec``."""
    import optuna

    from codesign.records import record_files

    spec = run.spec
    where = run.journal or spec.storage
    # Opening a storage runs a database driver or replays the journal: whatever it raises
    # (sqlalchemy's unknown dialect or unopenable file, a corrupt journal line) is the
    # user's storage, reported in one line naming it.
    try:
        if spec.storage:
            storage: Any = optuna.storages.get_storage(spec.storage)
        else:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            run.journal.parent.mkdir(parents=True, exist_ok=True)
            storage = JournalStorage(JournalFileBackend(str(run.journal)))
        exists = spec.study in optuna.get_all_study_names(storage)
        if not exists and run.records_dir.is_dir() and record_files(run.records_dir):
            # Records without their journal: a new study would reuse their trial numbers.
            raise InvalidSpecError(
                f"invalid sweep study {spec.study!r}: {run.records_dir} already holds records "
                f"but the storage ({where}) has no such study; restore the journal or use "
                f"another results folder or study name")
        # The journal tolerates a corrupt last line until the next write reads past it.
        study = optuna.create_study(study_name=spec.study, storage=storage,
                                    sampler=run.sampler(), directions=spec.directions,
                                    load_if_exists=True)
    except InvalidSpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - any backend failure is the storage's
        raise _storage_error(spec.storage, run.journal, exc) from None
    wanted = spec.config_hash()
    found = study.user_attrs.get(CONFIG_HASH_ATTR)
    if found is None:
        study.set_user_attr(CONFIG_HASH_ATTR, wanted)
        study.set_user_attr(CODE_ATTR, code_fingerprint())
        study.set_user_attr("codesign_config", json.loads(json.dumps(spec.identity(),
                                                                      default=str)))
        with warnings.catch_warnings():  # experimental in Optuna 3.2-5: harmless here
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(list(spec.objectives))
    elif found != wanted:
        raise InvalidSpecError(
            f"invalid sweep study {spec.study!r}: its storage ({where}) holds a study made "
            f"with another specification (config_hash {found}, now {wanted}); use another "
            f"results folder or study name")
    elif not resume and study.get_trials(deepcopy=False):
        raise InvalidSpecError(
            f"invalid sweep study {spec.study!r}: {where} already holds "
            f"{len(study.get_trials(deepcopy=False))} trials; pass --resume to continue it, "
            f"or use another results folder or study name")
    return study


def _reconcile(study, run: _Run, writer) -> None:
    """Give every trial of the study exactly one record (see the module docstring)."""
    from optuna.trial import TrialState

    from codesign.records import load_records

    frame = load_records(run.records_dir)
    recorded = set(int(t) for t in frame["trial"]) if len(frame) else set()
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.number in recorded:
            continue
        try:
            point = run.point(t.params)
        except InvalidSpecError:
            # Killed between two of the sampler's suggestions: part of the design drawn
            # (a resume after kill -9 stopped on "sweep point degree 0").
            point = None
        if t.state in (TrialState.RUNNING, TrialState.WAITING):
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            rows.append(run.record(t.number, point, None, status="failed", drawn=t.params,
                                   reason="interrupted: the run evaluating this trial stopped "
                                          "before it finished" + ("" if point else
                                          ", before its design was drawn")))
        elif RECORD_ATTR in t.user_attrs:
            rows.append(_decode(t.user_attrs[RECORD_ATTR]))
        else:
            state = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned"}.get(
                t.state, "failed")
            rows.append(run.record(t.number, point, None, status="failed", drawn=t.params,
                                   reason=f"trial finished as {state} without a codesign "
                                          f"record"))
    writer.write(rows)


def _objective_values(row: dict[str, Any], objectives: tuple[str, ...]) -> list[float] | None:
    values = [row.get(k) for k in objectives]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
           for v in values):
        return [float(v) for v in values]
    return None


def _trial_task(evaluate: Callable[[SweepPoint], TrialOutcome], point: SweepPoint
                ) -> TrialOutcome:
    """One trial as a Ray task: its strategy-search chains run as Ray tasks of their own
    (:func:`search.strategy.chains.on_ray`), so a trial's workloads and restarts search
    side by side; cancelling the trial (its timeout) cancels them too."""
    from search.strategy.chains import on_ray

    with on_ray():
        return evaluate(point)


def _run_trials(study, run: _Run, writer, to_run: int,
                progress: Callable[..., Any] | None,
                evaluate: Callable[[SweepPoint], TrialOutcome]) -> None:
    import ray
    from optuna.trial import TrialState

    spec = run.spec
    # max_retries=1: a lost worker (the process died) is retried once by Ray; exceptions
    # raised by the evaluation itself are not retried (it is deterministic): recorded failed.
    remote = ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(_trial_task)
    space = run.search_space()
    in_flight: deque = deque()  # (trial, point, object ref), in trial order
    pending: list[dict[str, Any]] = []
    asked = told = 0
    try:
        while told < to_run:
            while len(in_flight) < spec.max_in_flight and asked < to_run:
                trial = study.ask(space)
                point = run.point(trial.params)
                in_flight.append((trial, point, remote.remote(evaluate, point)))
                asked += 1
            # Tell strictly in trial order: the sampler's history at each ask is fixed.
            trial, point, ref = in_flight.popleft()
            try:
                result = ray.get(ref, timeout=spec.trial_timeout_s)
                if isinstance(result, TrialOutcome):
                    row = run.record(trial.number, point, result)
                else:
                    row = run.record(trial.number, point, None, status="failed",
                                     reason=f"the evaluation returned {type(result).__name__},"
                                            f" not a TrialOutcome")
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref, force=True)
                row = run.record(trial.number, point, None, status="failed",
                                 reason=f"timed out after {spec.trial_timeout_s:g} s")
            except Exception as exc:  # noqa: BLE001 - any task failure is recorded, study goes on
                row = run.record(trial.number, point, None, status="failed",
                                 reason=_task_error(exc))
            values = _objective_values(row, spec.objectives)
            if row["status"] == "complete" and values is None:
                row.update(status="failed", reason=f"objectives "
                           f"{[row.get(k) for k in spec.objectives]} are not finite numbers")
            trial.set_user_attr(RECORD_ATTR, _encode(row))
            if row["status"] == "complete":
                study.tell(trial, values)
            else:
                study.tell(trial, state=TrialState.PRUNED if row["status"] == "pruned"
                           else TrialState.FAIL)
            told += 1
            pending.append(row)
            if len(pending) >= spec.batch_size:
                writer.write(pending)
                pending = []
            if progress is not None:
                progress(told, to_run)
    finally:
        # Told trials keep their record in the journal too, so even if this write is
        # lost the next run restores it (_reconcile).
        writer.write(pending)


def run_sweep(spec: SweepSpec, *, results_dir: str | Path = "results", resume: bool = False,
              ray_address: str | None = None, num_cpus: int | None = None,
              progress: Callable[[int, int], Any] | None = None,
              evaluate: Callable[[SweepPoint], TrialOutcome] | None = None,
              notify: Callable[[str], Any] | None = None) -> SweepResult:
    """Run (or, with ``resume``, top up) a sweep and write its records.

    Parameters
    ----------
    spec : SweepSpec
        The validated specification (:func:`search.sweeps.spec.load_sweep_spec`).
    results_dir : str or pathlib.Path, optional
        Root of the results; the study lives in ``results_dir/<study>/``.
    resume : bool, optional
        Continue a study that already has trials (top it up to ``spec.trials``).
    ray_address : str, optional
        Join this Ray cluster instead of starting a local instance.
    num_cpus : int, optional
        CPUs of the local Ray instance (default: all).
    progress : callable, optional
        ``progress(done, total)`` after every finished trial of this call.
    evaluate : callable, optional
        The evaluation run in each Ray task, ``SweepPoint -> TrialOutcome`` (default
        :func:`evaluate_trial`); must be picklable.
    notify : callable, optional
        ``notify(line)`` with a note before the trials run (a resume under other code,
        :func:`resume_note`).

    Returns
    -------
    SweepResult

    Raises
    ------
    InvalidSpecError
        The study folder holds a study of another specification, or already has
        trials and ``resume`` is false.

    Notes
    -----
    Ray is started only when trials remain to run, and shut down only if this call
    started it (:func:`search.ray_session.ray_session`).
    """
    import optuna

    from codesign.files import check_output_folder
    from codesign.records import RecordWriter, load_records
    from search.ray_session import ray_session

    t0 = time.perf_counter()
    run = _Run(spec, Path(results_dir) / spec.study)
    # before anything is created: a file in the way, no write permission, a name too long
    check_output_folder(run.study_dir, what="results folder")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the library stays quiet
    try:
        new = not run.study_dir.exists()
        if new:  # refuse before creating anything
            _check_disk(spec, run.study_dir, spec.trials)
        writer = RecordWriter(run.records_dir)
        try:
            study = _open_study(run, resume=resume)
        except InvalidSpecError:
            if new:  # leave nothing behind for a study that never opened (rmdir: if empty)
                for folder in (run.records_dir, run.study_dir):
                    try:
                        folder.rmdir()
                    except OSError:
                        pass
            raise
        _reconcile(study, run, writer)
        finished = sum(t.state.is_finished() for t in study.get_trials(deepcopy=False))
        to_run = max(0, spec.trials - finished)
        if not new:  # a resumed study: what is left to run
            _check_disk(spec, run.study_dir, to_run)
            note = resume_note(study, finished) if to_run else None
            if note and notify is not None:
                notify(note)
        if to_run:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                with ray_session(ray_address, num_cpus=num_cpus):
                    _run_trials(study, run, writer, to_run, progress,
                                evaluate if evaluate is not None else evaluate_trial)
    finally:
        optuna.logging.set_verbosity(verbosity)
    frame = load_records(run.records_dir)
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    reasons: dict[str, int] = {}
    if len(frame):
        for status, reason in zip(frame["status"], frame["reason"]):
            if status != "complete":
                kind = (reason or status).split(":", 1)[0].strip() or status
                reasons[kind] = reasons.get(kind, 0) + 1
    return SweepResult(
        study=spec.study, results_dir=run.study_dir, journal_path=run.journal,
        trials_run=to_run, complete=int(counts.get("complete", 0)),
        pruned=int(counts.get("pruned", 0)), failed=int(counts.get("failed", 0)),
        records=len(frame), duration_s=time.perf_counter() - t0,
        config_hash=spec.config_hash(), time_model=time_model_name(),
        reasons=dict(sorted(reasons.items())))
