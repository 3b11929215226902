"""Design records: one Arrow schema, append-only Parquet parts, a pandas loader.

Every evaluated design becomes one *record* (one row) of :data:`RECORD_SCHEMA`
(docs/architecture.md sections 3 and 7).  This module is the only place that defines the
columns; search loops fill rows, reports read them.

Storage layout
--------------
``<folder>/part-00000.parquet``, ``part-00001.parquet``, ... (the quickstart
uses ``results/<study>/records/``; keep the folder for parts only so that
``pandas.read_parquet(folder)`` works, it reads every file it finds): each call
to :meth:`RecordWriter.write` adds one new part file holding one batch of rows.
A part is written under a hidden temporary name (ignored by readers), flushed
to disk and then linked to its final name, which fails rather than overwrites
if the name is taken.  So a crash never leaves a half-written ``part-*`` file
and a finished file is never rewritten (docs/architecture.md section 7: "never rewrite a
finished row").  The parts are plain Parquet: pandas, DuckDB and Polars read
the folder directly (``duckdb.sql("select * from 'results/quickstart/records/*.parquet'")``).

Columns
-------
:data:`_COLUMNS` below is the one list of the columns, each with its Arrow type and a
description (units in the names, docs/architecture.md section 4); the schema carries
the descriptions as field metadata.  Groups: identity (``study``, ``trial``,
``status``, ``reason``), design parameters (``params_json`` holds every parameter,
also those without a column), metrics, topology summary, timings, provenance; sweeps
added columns in schema version 2, co-design per trial in version 3, procurement in
version 4.  ``strategies`` is a typed list with one struct per workload of the mix
(:func:`_strategy_struct`: the fields of :meth:`codesign.workloads.Strategy.to_dict`
-- new strategy keys become new struct fields -- plus the search's); query it with
DuckDB (``select s.tp from (select unnest(strategies) s from 'records/*.parquet')``) or
Polars (``.explode("strategies").unnest("strategies")``).  Version 3 dropped
``allreduce_size_bytes`` and ``allreduce_time_s`` (always empty since the iteration
model replaced the all-reduce stand-in); older parts that have them still load.

Extending the schema
--------------------
Columns are only ever appended to :data:`_COLUMNS` (with a :data:`SCHEMA_VERSION` bump),
never renamed or retyped, so :func:`load_records` can read old and new parts together
(a column missing from an older part reads as null).  The schema version is kept in the
schema metadata (``codesign.schema_version``).

pyarrow and pandas are imported lazily: this module belongs to the bottom layer
and must stay cheap to import.
"""

from __future__ import annotations

import errno
import json
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codesign.errors import InvalidSpecError, invalid
from codesign.files import is_dir
from codesign.specs import check_choice

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "RECORD_SCHEMA",
    "RECORD_COLUMNS",
    "STATUSES",
    "SCHEMA_VERSION",
    "record_schema",
    "RecordWriter",
    "load_records",
    "record_files",
    "to_json",
]

#: Allowed values of the ``status`` column.
STATUSES = ("complete", "pruned", "failed")
#: Bumped when columns are added to :data:`RECORD_SCHEMA`.
SCHEMA_VERSION = "4"

_PART_RE = re.compile(r"^part-(\d+)\.parquet$")
_REQUIRED = ("study", "trial", "status")

# (name, arrow type name, nullable, description).  The single definition of a record.
_COLUMNS: tuple[tuple[str, str, bool, str], ...] = (
    ("study", "string", False, "study name"),
    ("trial", "int64", False, "trial number within the study"),
    ("status", "string", False, "complete | pruned | failed"),
    ("family", "string", True, "topology family"),
    ("servers", "int64", True, "number of servers (endpoints)"),
    ("degree", "int64", True, "links (NICs) per server"),
    ("link_bandwidth_Bps", "float64", True, "bandwidth of one link, bytes/s"),
    ("topology_spec", "string", True, "topology spec string that was built"),
    ("params_json", "string", True, "every design parameter, JSON object"),
    ("time_model", "string", True, "performance model that produced the times"),
    ("iteration_time_s", "float64", True, "training-iteration time, s (objective 1)"),
    ("cost_usd", "float64", True, "network cost, USD (objective 2)"),
    ("cost_breakdown", "string", True, "cost per component, JSON object of USD"),
    ("npus", "int64", True, "endpoints in the topology"),
    ("switches", "int64", True, "switches in the topology"),
    ("links", "int64", True, "directed links in the topology"),
    ("diameter", "int64", True, "largest NPU-to-NPU hop count"),
    ("reason", "string", True, "why the trial was pruned or failed"),
    ("started_at", "timestamp[us, UTC]", True, "evaluation start, UTC"),
    ("duration_s", "float64", True, "evaluation wall time, s"),
    ("seed", "int64", True, "study seed"),
    ("config_hash", "string", True, "hash of the study configuration"),
    ("package_version", "string", True, "codesign version that wrote the row"),
    # Schema version 2 (sweeps, issue 9): columns appended, none renamed or retyped.
    ("workload", "string", True, "workload name, or name*weight+... for a mix"),
    ("workload_mix_json", "string", True, "the workload mix, JSON list of {name, weight, "
                                          "config, strategy}"),
    ("strategy", "string", True, "parallelization strategy (JSON object per workload "
                                 "for a mix)"),
    ("gpu", "string", True, "GPU type (hardware catalog name)"),
    ("gpus", "int64", True, "GPUs in the design"),
    ("collective_method", "string", True, "collective algorithm of the iteration model"),
    ("compute_time_s", "float64", True, "compute time per iteration, s (weighted over the mix)"),
    ("exposed_communication_s", "float64", True, "communication not hidden by compute, s"),
    ("communication_time_s", "float64", True, "total communication time incl. overlapped, s"),
    ("bandwidth_tax", "float64", True, "network traffic incl. forwarding / logical demand"),
    ("mean_path_length", "float64", True, "mean hops between communicating servers"),
    ("throughput_per_usd", "float64", True, "iterations per second per USD of network"),
    ("cost_per_throughput_usd", "float64", True, "USD per (iteration per second): cost x time"),
    ("per_workload_json", "string", True, "metrics per workload of the mix, JSON list"),
    ("budget_usd", "float64", True, "network budget of the study, USD"),
    ("sampler", "string", True, "Optuna sampler of the study"),
    ("objectives", "string", True, "objective columns of the study, comma-separated"),
    # Schema version 3 (co-design per trial, issue 16).
    ("server_bandwidth_Bps", "float64", True, "bandwidth out of one server (all its links), "
                                              "bytes/s"),
    ("strategies", "strategies", True, "chosen strategy per workload: list of typed structs"),
    ("start_iteration_time_s", "float64", True, "weighted iteration time of the search's "
                                                "feasible start strategies, s"),
    ("search_evaluations", "int64", True, "strategies timed by the trial's search"),
    ("mfu", "float64", True, "model FLOPs utilisation (weighted over the mix)"),
    ("collective_algorithms_json", "string", True, "collective_method best: winner per "
                                                   "collective, JSON"),
    ("collective_gain_over_ring", "float64", True, "ring time / chosen time over the "
                                                   "collectives of the trial"),
    # Schema version 4 (procurement, issue 20): with the spec's ``procurement`` mapping.
    ("tco_usd", "float64", True, "total cost of ownership over the amortisation period, "
                                 "USD (servers, network, power; or the cloud rent)"),
    ("days_to_train", "float64", True, "days to reach the training goal"),
    ("usd_per_run", "float64", True, "USD of one training run to the goal"),
)

#: Column names of :data:`RECORD_SCHEMA`, in order.
RECORD_COLUMNS: tuple[str, ...] = tuple(c[0] for c in _COLUMNS)


def _strategy_struct() -> "pa.DataType":
    """The struct of one ``strategies`` item: :meth:`Strategy.to_dict`'s keys (typed from
    the default strategy's values, or the field's annotation when it is None) plus the
    search's fields."""
    import dataclasses

    import pyarrow as pa

    from codesign.workloads.strategy import Strategy

    annotations = {f.name: str(f.type) for f in dataclasses.fields(Strategy)}

    def arrow(key: str, value: Any) -> "pa.DataType":
        if value is None:  # typed by the field's annotation
            note = annotations.get(key, "")
            value = (True if "bool" in note else 0 if "int" in note else 0.0 if "float" in note
                     else "")
        return pa.infer_type([value])

    fields = [pa.field(k, arrow(k, v)) for k, v in Strategy().to_dict().items()]
    names = {f.name for f in fields}
    fields += [pa.field(name, type_) for name, type_ in (
        ("text", pa.string()), ("workload", pa.string()), ("weight", pa.float64()),
        ("order", pa.string()), ("start_text", pa.string()), ("iteration_time_s", pa.float64()),
        ("start_iteration_time_s", pa.float64()), ("search_evaluations", pa.int64()))
        if name not in names]
    return pa.struct(fields)


def _arrow_type(name: str) -> "pa.DataType":
    import pyarrow as pa

    if name == "strategies":
        return pa.list_(_strategy_struct())
    if name == "timestamp[us, UTC]":
        return pa.timestamp("us", tz="UTC")
    return {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(),
            "bool": pa.bool_()}[name]


def record_schema() -> "pa.Schema":
    """Build the Arrow schema of a design record (see the module docstring)."""
    import pyarrow as pa

    fields = [pa.field(name, _arrow_type(type_), nullable=nullable,
                       metadata={"description": desc})
              for name, type_, nullable, desc in _COLUMNS]
    return pa.schema(fields, metadata={"codesign.schema": "design-record",
                                       "codesign.schema_version": SCHEMA_VERSION})


def __getattr__(name: str) -> Any:
    # RECORD_SCHEMA is built on first use so that importing this module does not
    # import pyarrow (bottom layer, docs/architecture.md section 2).
    if name == "RECORD_SCHEMA":
        schema = record_schema()
        globals()["RECORD_SCHEMA"] = schema
        return schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_json(value: Any) -> str:
    """Serialise a parameter or breakdown mapping to the JSON stored in string columns.

    Keys are sorted so that equal mappings give equal strings; numpy scalars
    become plain numbers.
    """
    def default(obj: Any) -> Any:
        if hasattr(obj, "item"):
            return obj.item()
        if isinstance(obj, (set, frozenset, tuple)):
            return list(obj)
        raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

    return json.dumps(value, sort_keys=True, default=default)


def record_files(directory: str | Path) -> list[Path]:
    """The finished part files under ``directory`` (recursively), in write order.

    Hidden files and folders (temporary parts start with ``.``) are skipped.
    """
    root = Path(directory)
    files = []
    for path in root.rglob("part-*.parquet"):
        rel = path.relative_to(root).parts
        if any(p.startswith((".", "_")) for p in rel) or not _PART_RE.match(path.name):
            continue
        files.append(path)
    return sorted(files, key=lambda p: (str(p.parent), int(_PART_RE.match(p.name).group(1))))


class RecordWriter:
    """Append batches of records to a folder as new Parquet part files.

    Parameters
    ----------
    directory : str or pathlib.Path
        The folder of part files (``results/<study>/records/``); created if missing.
    schema : pyarrow.Schema, optional
        :data:`RECORD_SCHEMA` (default) or a schema with more (nullable) columns.

    Notes
    -----
    Each :meth:`write` creates ``part-<n>.parquet``, ``n`` one more than the largest
    existing part number (the next one if another writer took it), as the module
    docstring's "Storage layout" describes; finished parts are never modified.

    Examples
    --------
    >>> import tempfile
    >>> w = RecordWriter(tempfile.mkdtemp())
    >>> w.write([{"study": "s", "trial": 0, "status": "complete", "cost_usd": 1.0}]).name
    'part-00000.parquet'
    """

    def __init__(self, directory: str | Path, *, schema: "pa.Schema | None" = None) -> None:
        self.directory = Path(directory)
        self.schema = schema if schema is not None else record_schema()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidSpecError(f"cannot create results folder {str(self.directory)!r}: "
                                   f"{exc.strerror}") from None

    def _next_number(self) -> int:
        numbers = [int(m.group(1)) for p in self.directory.iterdir()
                   if (m := _PART_RE.match(p.name))]
        return max(numbers, default=-1) + 1

    def to_table(self, rows: Sequence[Mapping[str, Any]]) -> "pa.Table":
        """Convert rows (mappings column -> value) into a table of the writer's schema.

        Missing nullable columns become null.  Unknown columns, a missing or
        null required column (``study``, ``trial``, ``status``), an unknown
        status or a value of the wrong type raise :class:`InvalidSpecError`.
        """
        import pyarrow as pa

        names = self.schema.names
        for i, row in enumerate(rows):
            unknown = [k for k in row if k not in names]
            if unknown:
                raise invalid(f"record #{i} column", unknown[0],
                              f"one of the schema columns ({', '.join(names)})")
            for key in _REQUIRED:
                if row.get(key) is None:
                    raise invalid(f"record #{i} {key}", row.get(key), "a value (required column)")
            check_choice(f"record #{i} status", row["status"], STATUSES)
        arrays = []
        for f in self.schema:
            values = [row.get(f.name) for row in rows]
            bad = next((v for v in values if v is not None and not _fits(v, f.type)), _OK)
            if bad is not _OK:
                raise invalid(f"record column {f.name!r} value", bad,
                              f"a value of type {f.type}, or None")
            arrays.append(pa.array(values, type=f.type))
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write one batch of rows as a new part file.

        Parameters
        ----------
        rows : sequence of mapping
            One mapping per record, keys from the schema.

        Returns
        -------
        pathlib.Path or None
            The new part file, or ``None`` if ``rows`` is empty (nothing written).
        """
        import pyarrow.parquet as pq

        rows = list(rows)
        if not rows:
            return None
        table = self.to_table(rows)
        tmp = self.directory / f".part-{uuid.uuid4().hex}.parquet.tmp"
        try:
            pq.write_table(table, tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            n = self._next_number()
            while True:
                final = self.directory / f"part-{n:05d}.parquet"
                try:
                    os.link(tmp, final)  # atomic; never replaces an existing part
                    break
                except FileExistsError:
                    n += 1
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP,
                                         errno.EXDEV, errno.EMLINK):
                        raise
                    # File systems without hard links: rename is still atomic; the
                    # existence check narrows (but cannot close) the race with
                    # another writer.
                    if final.exists():
                        n += 1
                        continue
                    os.rename(tmp, final)
                    break
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.directory)
        return final


_OK = object()


def _fits(value: Any, type_: "pa.DataType") -> bool:
    import numbers

    import pyarrow as pa

    # pyarrow silently truncates 2.5 into an int64 column and turns True into
    # 1.0 in a float column; records must not change values on the way in.
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if pa.types.is_integer(type_) and not isinstance(value, numbers.Integral):
            return False
    try:
        pa.array([value], type=type_)
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return False


def _fsync_dir(directory: Path) -> None:
    # Make the new directory entry durable; not supported everywhere (Windows).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_records(directory: str | Path, *, schema: "pa.Schema | None" = None
                 ) -> "pd.DataFrame":
    """Read every record under ``directory`` into a pandas DataFrame.

    Parameters
    ----------
    directory : str or pathlib.Path
        A folder of part files or any folder above them (``results/<study>/``,
        ``results/``); part files are found recursively.
    schema : pyarrow.Schema, optional
        Expected schema (default :data:`RECORD_SCHEMA`); columns that parts add
        beyond it are kept, columns missing from older parts read as null.

    Returns
    -------
    pandas.DataFrame
        One row per record, sorted by ``study`` then ``trial`` (then write
        order); integer columns use pandas' nullable ``Int64``.  Empty (with
        the schema's columns) if the folder holds no part files.

    Raises
    ------
    InvalidSpecError
        If ``directory`` is not a folder, a part is not a readable Parquet file, or
        parts disagree on a column's type.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    root = Path(directory)
    if not is_dir(root):
        raise invalid("results folder", str(root), "an existing folder of part-*.parquet files")
    base = schema if schema is not None else record_schema()
    files = record_files(root)
    schemas = []
    for f in files:
        try:
            schemas.append(pq.read_schema(f))
        except (pa.ArrowInvalid, OSError) as exc:
            # Not a Parquet file (truncated by a crash of another tool, or not ours).
            raise invalid("results part", str(f), f"a readable Parquet file ({exc}); move "
                          "or delete it") from None
        # Every record ever written has its key columns; a part without them is another
        # tool's Parquet file (its rows would read as records of no study).
        missing = [c for c in _REQUIRED if c not in schemas[-1].names]
        if missing:
            raise invalid("results part", str(f), f"a part file of codesign records (it has "
                          f"no {', '.join(missing)} column); move or delete it")
    try:
        unified = pa.unify_schemas([base, *schemas])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidSpecError(f"invalid results folder {str(root)!r}: parts disagree on "
                               f"column types ({exc}); keep one schema per folder") from None
    table = (ds.dataset([str(f) for f in files], schema=unified, format="parquet").to_table()
             if files else unified.empty_table())
    mapper = {pa.int64(): pd.Int64Dtype()}.get
    frame = table.to_pandas(types_mapper=mapper)
    if len(frame):
        frame = frame.sort_values(["study", "trial"], kind="stable").reset_index(drop=True)
    return frame
