"""Report: the exact Pareto filter against brute force, and a report from a saved dataset."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.records import RecordWriter
from codesign.app.report import pareto_mask, write_report


def _brute_force(points: np.ndarray) -> np.ndarray:
    n = len(points)
    keep = np.zeros(n, dtype=bool)
    for i in range(n):
        if not np.isfinite(points[i]).all():
            continue
        keep[i] = True
        for j in range(n):
            if j != i and np.isfinite(points[j]).all() and np.all(points[j] <= points[i]) \
                    and np.any(points[j] < points[i]):
                keep[i] = False
                break
    return keep


# Small integer grids make ties (equal x, equal y, duplicates) common.
_coord = st.integers(0, 6).map(float) | st.sampled_from([np.nan, np.inf])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_coord, _coord), max_size=30))
def test_pareto_mask_matches_brute_force(pairs):
    pts = np.array(pairs, dtype=float).reshape(-1, 2)
    np.testing.assert_array_equal(pareto_mask(pts), _brute_force(pts))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1e3)), min_size=1, max_size=60))
def test_pareto_mask_matches_brute_force_on_real_values(pairs):
    pts = np.array(pairs, dtype=float)
    np.testing.assert_array_equal(pareto_mask(pts), _brute_force(pts))


def test_pareto_by_hand():
    pts = [[1, 5], [2, 2], [3, 3], [2, 2], [0, 9], [2, 4], [5, 1], [5, 1.5]]
    assert pareto_mask(pts).tolist() == [True, True, False, True, True, False, True, False]
    assert pareto_mask(np.zeros((0, 2))).tolist() == []


@pytest.mark.parametrize("bad", [[1, 2, 3], [[1, 2, 3]], np.zeros((2, 2, 2))])
def test_pareto_bad_shape_raises(bad):
    with pytest.raises(InvalidSpecError):
        pareto_mask(bad)


# ------------------------------------------------------------------ the report
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
# (trial, family, status, cost, time): front of study "a" is trials 0, 1, 3.
DATA = [
    (0, "torus", "complete", 100.0, 0.9),
    (1, "ideal", "complete", 400.0, 0.1),
    (2, "perms", "complete", 300.0, 0.5),   # dominated by 3
    (3, "fattree", "complete", 250.0, 0.4),
    (4, "torus", "pruned", None, None),
    (5, "leafspine", "failed", None, None),
]


def _dataset(folder, study="a", data=DATA):
    rows = []
    for trial, family, status, cost, t in data:
        rows.append({"study": study, "trial": trial, "status": status, "family": family,
                     "servers": 16, "degree": 4, "link_bandwidth_Bps": 12.5e9,
                     "topology_spec": f"{family}:16" if status == "complete" else None,
                     "iteration_time_s": t, "cost_usd": cost,
                     "reason": {"pruned": "InfeasibleError: odd <degree> | x",
                                "failed": "RuntimeError: boom"}.get(status, ""),
                     "started_at": T0, "duration_s": 0.01, "seed": 7, "config_hash": "abc123",
                     "package_version": "0.1.0", "time_model": "alpha-beta-ring-allreduce"})
    w = RecordWriter(folder)
    w.write(rows[:3])
    w.write(rows[3:])


def _section(md: str, heading: str) -> str:
    part = md.split(f"## {heading}\n", 1)[1]
    return part.split("\n## ", 1)[0]


def _table_trials(section: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\| (\d+) \|", section, flags=re.M)]


def test_report_from_saved_dataset(tmp_path):
    study = tmp_path / "a"
    _dataset(study / "records")
    paths = write_report(study)
    assert set(paths) == {"markdown", "html", "plot"}
    assert all(p.parent == study for p in paths.values())
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["markdown"].read_text()
    # Front: cheapest first, exactly the non-dominated complete designs.
    assert _table_trials(_section(md, "Pareto front (a)")) == [0, 3, 1]
    assert _table_trials(_section(md, "All trials (a)")) == [0, 1, 2, 3, 4, 5]
    summary = _section(md, "Summary")
    for label, value in (("records", 6), ("complete", 4), ("pruned", 1), ("failed", 1),
                         ("designs on the Pareto front", 3)):
        assert f"| {label} | {value} |" in summary
    assert "odd <degree> \\| x" in md  # pipes escaped in Markdown tables
    assert "](pareto.png)" in md
    prov = _section(md, "Provenance")
    assert "abc123" in prov and "| seeds | 7 |" in prov and "0.1.0" in prov
    page = paths["html"].read_text()
    assert "odd &lt;degree&gt; | x" in page and 'src="pareto.png"' in page
    assert page.count("<tr>") == md.count("\n| ") - md.count("\n| ---")  # same tables
    assert "RuntimeError: boom" in page


def test_report_of_a_records_folder_goes_next_to_it(tmp_path):
    _dataset(tmp_path / "a" / "records")
    paths = write_report(tmp_path / "a" / "records")
    assert paths["markdown"].parent == tmp_path / "a"
    assert sorted(p.name for p in (tmp_path / "a" / "records").iterdir()) == [
        "part-00000.parquet", "part-00001.parquet"]


def test_report_out_dir_and_fronts_per_study(tmp_path):
    _dataset(tmp_path / "res" / "a" / "records", study="a")
    # Study b: one design that would dominate all of a's if studies were mixed.
    _dataset(tmp_path / "res" / "b" / "records", study="b",
             data=[(0, "ideal", "complete", 1.0, 0.01), (1, "torus", "complete", 2.0, 0.02)])
    paths = write_report(tmp_path / "res", out_dir=tmp_path / "out")
    assert paths["html"].parent == tmp_path / "out"
    md = paths["markdown"].read_text()
    assert _table_trials(_section(md, "Pareto front (a)")) == [0, 3, 1]
    assert _table_trials(_section(md, "Pareto front (b)")) == [0]


def test_report_without_complete_trials_still_writes(tmp_path):
    _dataset(tmp_path, data=[(0, "torus", "pruned", None, None)])
    paths = write_report(tmp_path, out_dir=tmp_path / "r")
    md = paths["markdown"].read_text()
    assert "No complete trials" in md and paths["plot"].stat().st_size > 0


def test_report_of_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidSpecError, match="no records") as info:
        write_report(tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidSpecError):
        write_report(tmp_path / "missing")
