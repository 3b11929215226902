"""Design records: pinned schema, append-only atomic Parquet parts, the pandas loader."""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codesign.records as records
from codesign.errors import InvalidSpecError
from codesign.records import (
    RECORD_SCHEMA,
    RecordWriter,
    load_records,
    record_files,
)

PINNED = [
    ("study", "string", False), ("trial", "int64", False), ("status", "string", False),
    ("family", "string", True), ("servers", "int64", True), ("degree", "int64", True),
    ("link_bandwidth_Bps", "double", True),
    ("topology_spec", "string", True), ("params_json", "string", True),
    ("time_model", "string", True), ("iteration_time_s", "double", True),
    ("cost_usd", "double", True),
    ("cost_breakdown", "string", True), ("npus", "int64", True), ("switches", "int64", True),
    ("links", "int64", True), ("diameter", "int64", True), ("reason", "string", True),
    ("started_at", "timestamp[us, tz=UTC]", True), ("duration_s", "double", True),
    ("seed", "int64", True), ("config_hash", "string", True),
    ("package_version", "string", True),
    # version 2 (sweeps)
    ("workload", "string", True), ("workload_mix_json", "string", True),
    ("strategy", "string", True), ("gpu", "string", True), ("gpus", "int64", True),
    ("collective_method", "string", True), ("compute_time_s", "double", True),
    ("exposed_communication_s", "double", True), ("communication_time_s", "double", True),
    ("bandwidth_tax", "double", True), ("mean_path_length", "double", True),
    ("throughput_per_usd", "double", True), ("cost_per_throughput_usd", "double", True),
    ("per_workload_json", "string", True), ("budget_usd", "double", True),
    ("sampler", "string", True), ("objectives", "string", True),
    # version 3 (co-design per trial; the strategies struct is checked separately)
    ("server_bandwidth_Bps", "double", True), ("strategies", "strategies", True),
    ("start_iteration_time_s", "double", True), ("search_evaluations", "int64", True),
    ("mfu", "double", True), ("collective_algorithms_json", "string", True),
    ("collective_gain_over_ring", "double", True),
    # version 4 (procurement, issue 20)
    ("tco_usd", "double", True), ("days_to_train", "double", True),
    ("usd_per_run", "double", True),
]


def _row(number: int, **extra):
    row = {"study": "s", "trial": number, "status": "complete", "family": "torus",
           "servers": 16, "degree": 4, "link_bandwidth_Bps": 12.5e9,
           "iteration_time_s": 0.25 + number, "cost_usd": 1000.0 * (number + 1),
           "started_at": datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)}
    row.update(extra)
    return row


def test_schema_is_pinned():
    got = [(f.name, "strategies" if f.name == "strategies" else str(f.type), f.nullable)
           for f in RECORD_SCHEMA]
    assert got == PINNED
    assert RECORD_SCHEMA.metadata[b"codesign.schema_version"] == b"4"


def test_strategies_column_is_typed_from_the_strategy():
    import pyarrow as pa

    from codesign.workloads import Strategy

    item = RECORD_SCHEMA.field("strategies").type.value_type
    for key, value in Strategy(dp=2, tp=4).to_dict().items():
        t = item.field(key).type
        if key in ("recompute_layers", "etp", "offload_layers"):   # int | None, None by default
            assert t == pa.int64() and value is None
        elif isinstance(value, bool):
            assert t == pa.bool_()
        elif isinstance(value, int):
            assert t == pa.int64()
        else:
            assert t == pa.string()
    assert item.field("search_evaluations").type == pa.int64()


def test_strategies_round_trip_and_old_parts_load(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A version-2 part (with the since-dropped all-reduce columns) and a version-3 part.
    old = pa.table({"study": ["s"], "trial": pa.array([0], pa.int64()), "status": ["complete"],
                    "allreduce_time_s": [1.0]})
    pq.write_table(old, tmp_path / "part-00000.parquet")
    rows = [{"study": "s", "trial": 1, "status": "complete", "strategies": [
        {"workload": "bert", "dp": 8, "tp": 4, "pp": 2, "microbatches": 8, "zero": 1, "ep": 1,
         "embedding": "data", "gpus": 64, "text": "dp=8,tp=4,pp=2,microbatches=8,zero=1",
         "weight": 1.0, "iteration_time_s": 0.5, "start_iteration_time_s": 0.7,
         "search_evaluations": 16}]}]
    RecordWriter(tmp_path).write(rows)
    df = load_records(tmp_path)
    assert len(df) == 2 and df["allreduce_time_s"].tolist()[0] == 1.0
    got = df["strategies"].tolist()[1][0]
    assert (got["dp"], got["tp"], got["pp"], got["microbatches"], got["zero"]) == (8, 4, 2, 8, 1)
    assert got["search_evaluations"] == 16 and got["workload"] == "bert"
    assert tuple(records.RECORD_COLUMNS) == tuple(name for name, *_ in PINNED)


def test_import_does_not_load_pyarrow():
    import subprocess
    import sys

    code = "import sys, codesign.records; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_append_twice_gives_two_files_and_all_rows(tmp_path):
    w = RecordWriter(tmp_path / "s")
    first = w.write([_row(2), _row(0)])
    second = w.write([_row(1, status="pruned", reason="no torus", iteration_time_s=None,
                           cost_usd=None)])
    assert first.name == "part-00000.parquet" and second.name == "part-00001.parquet"
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "part-00000.parquet", "part-00001.parquet"]
    df = load_records(tmp_path / "s")
    assert df["trial"].tolist() == [0, 1, 2]
    assert df["status"].tolist() == ["complete", "pruned", "complete"]
    assert df.loc[1, "reason"] == "no torus" and pd.isna(df.loc[1, "cost_usd"])
    assert df["cost_usd"].tolist()[::2] == [1000.0, 3000.0]
    assert str(df["trial"].dtype) == "Int64" and str(df["degree"].dtype) == "Int64"
    assert df.loc[0, "started_at"] == pd.Timestamp("2025-01-02 03:04:05.678901", tz="UTC")
    # Plain pandas reads the folder too (it holds nothing but parts).
    assert len(pd.read_parquet(tmp_path / "s")) == 3
    # The loader also finds parts below a parent folder.
    assert len(load_records(tmp_path)) == 3


def test_empty_batch_writes_nothing(tmp_path):
    assert RecordWriter(tmp_path).write([]) is None
    assert list(tmp_path.iterdir()) == []


def test_empty_folder_loads_empty_frame_with_columns(tmp_path):
    df = load_records(tmp_path)
    assert len(df) == 0 and list(df.columns) == [name for name, *_ in PINNED]


def test_missing_folder_raises(tmp_path):
    with pytest.raises(InvalidSpecError, match="results folder"):
        load_records(tmp_path / "nope")


def test_crash_while_writing_leaves_no_part_and_keeps_finished_parts(tmp_path, monkeypatch):
    w = RecordWriter(tmp_path)
    done = w.write([_row(0)])
    before = done.read_bytes()

    def broken(table, where, *a, **k):
        with open(where, "wb") as fh:  # a half-written file, then the "crash"
            fh.write(b"PAR1 half")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        w.write([_row(1)])
    assert [p.name for p in tmp_path.iterdir()] == ["part-00000.parquet"]  # no temp left
    assert done.read_bytes() == before
    monkeypatch.undo()
    assert load_records(tmp_path)["trial"].tolist() == [0]


def test_never_overwrites_a_part_taken_by_another_writer(tmp_path, monkeypatch):
    w = RecordWriter(tmp_path)
    first = w.write([_row(0)])
    before = first.read_bytes()
    # Another writer raced us: we computed n = 0 although part-00000 now exists.
    monkeypatch.setattr(RecordWriter, "_next_number", lambda self: 0)
    second = w.write([_row(1)])
    assert second.name == "part-00001.parquet"
    assert first.read_bytes() == before
    assert load_records(tmp_path)["trial"].tolist() == [0, 1]


def test_hidden_and_foreign_files_are_ignored(tmp_path):
    w = RecordWriter(tmp_path)
    w.write([_row(0)])
    (tmp_path / ".part-abc.parquet.tmp").write_bytes(b"garbage")
    (tmp_path / "notes.txt").write_text("hello")
    assert [p.name for p in record_files(tmp_path)] == ["part-00000.parquet"]
    assert len(load_records(tmp_path)) == 1


def test_part_numbers_sort_numerically(tmp_path):
    w = RecordWriter(tmp_path)
    for i in range(3):
        w.write([_row(i)])
    (tmp_path / "part-00002.parquet").rename(tmp_path / "part-100000.parquet")
    assert w.write([_row(3)]).name == "part-100001.parquet"
    assert [p.name for p in record_files(tmp_path)][-2:] == ["part-100000.parquet",
                                                             "part-100001.parquet"]


@pytest.mark.parametrize("bad, match", [
    ({"bogus": 1}, "column 'bogus'"),
    ({"status": "done"}, "status"),
    ({"study": None}, "study"),
    ({"trial": "3"}, "trial"),
    ({"degree": 2.5}, "degree"),
    ({"cost_usd": True}, "cost_usd"),
    ({"family": 3}, "family"),
])
def test_bad_rows_raise_one_line_invalid_spec(tmp_path, bad, match):
    with pytest.raises(InvalidSpecError, match=match) as info:
        RecordWriter(tmp_path).write([_row(0, **bad)])
    assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_missing_required_column_raises(tmp_path):
    row = _row(0)
    del row["trial"]
    with pytest.raises(InvalidSpecError, match="trial"):
        RecordWriter(tmp_path).write([row])


def test_wider_schema_reads_old_parts_with_nulls(tmp_path):
    RecordWriter(tmp_path).write([_row(0)])
    wider = RECORD_SCHEMA.append(pa.field("bisection_Bps", pa.float64()))
    RecordWriter(tmp_path, schema=wider).write([_row(1, bisection_Bps=5e11)])
    df = load_records(tmp_path)
    assert df["trial"].tolist() == [0, 1]
    assert pd.isna(df.loc[0, "bisection_Bps"]) and df.loc[1, "bisection_Bps"] == 5e11


def test_conflicting_column_types_raise(tmp_path):
    RecordWriter(tmp_path).write([_row(0)])
    bad = pa.table({"study": ["s"], "trial": pa.array([1]), "status": ["complete"],
                    "cost_usd": ["expensive"]})
    pq.write_table(bad, tmp_path / "part-00001.parquet")
    with pytest.raises(InvalidSpecError, match="disagree"):
        load_records(tmp_path)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_float = st.floats(allow_nan=False, allow_infinity=True) | st.none()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.fixed_dictionaries({
    "trial": st.integers(0, 2 ** 62), "status": st.sampled_from(["complete", "pruned", "failed"]),
    "family": _text | st.none(), "degree": st.integers(-2 ** 63, 2 ** 63 - 1) | st.none(),
    "cost_usd": _float, "iteration_time_s": _float, "reason": _text,
}), min_size=1, max_size=5))
def test_rows_round_trip_exactly(tmp_path_factory, rows):
    folder = tmp_path_factory.mktemp("rt")
    rows = [{"study": "s", **r} for r in rows]
    RecordWriter(folder).write(rows)
    df = load_records(folder)
    expected = sorted(rows, key=lambda r: r["trial"])
    for (_, got), want in zip(df.iterrows(), expected):
        for key, value in want.items():
            if value is None:
                assert pd.isna(got[key]), key
            else:
                assert got[key] == value, key


def test_a_part_that_is_not_parquet_is_named(tmp_path):
    # Random bytes where a part should be (a truncated or foreign file): one line naming
    # the file, not a claim that the parts' schemas disagree.
    (tmp_path / "part-00000.parquet").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(InvalidSpecError, match="results part .*part-00000.parquet.*readable "
                                               "Parquet file") as exc:
        load_records(tmp_path)
    assert "disagree" not in str(exc.value) and "\n" not in str(exc.value)


def test_a_parquet_part_of_another_schema_is_named(tmp_path, capsys):
    # Fuzzing: a part written as pa.table({"a": [1, 2]}) loaded as two records of no
    # study and `codesign report` died with a TypeError traceback.
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "part-00000.parquet")
    with pytest.raises(InvalidSpecError, match=r"results part .*part-00000.parquet.*codesign "
                                               r"records \(it has no study, trial, status"):
        load_records(tmp_path)
    from codesign.app.cli import main

    assert main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
