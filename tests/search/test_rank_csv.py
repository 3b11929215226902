"""load_cost_matrix: round trips and rejections (hypothesis)."""

import csv

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from search.reorder.rank_order import load_cost_matrix

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
costs = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False)
name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=8).map(lambda s: "n" + s)


@st.composite
def matrices(draw):
    n = draw(st.integers(2, 7))
    values = draw(st.lists(st.lists(costs, min_size=n, max_size=n), min_size=n, max_size=n))
    names = draw(st.one_of(st.none(), st.lists(name, min_size=n, max_size=n, unique=True)))
    return np.array(values), names


def write(path, rows):
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return path


@SETTINGS
@given(matrices())
def test_round_trip(tmp_path, case):
    values, names = case
    rows = ([names] if names else []) + [[repr(float(v)) for v in row] for row in values]
    cm = load_cost_matrix(write(tmp_path / "m.csv", rows))
    assert np.array_equal(cm.costs, values)
    n = values.shape[0]
    assert cm.names == (tuple(names) if names else tuple(str(i) for i in range(n)))


def test_numeric_header(tmp_path):
    cm = load_cost_matrix(write(tmp_path / "m.csv", [["10", "20"], ["0", "1e-5"], ["2e-5", "0"]]))
    assert cm.names == ("10", "20")
    assert cm.costs.tolist() == [[0, 1e-5], [2e-5, 0]]


@SETTINGS
@given(matrices(), st.data(), st.sampled_from(["-1e-6", "nan", "inf", "abc", ""]))
def test_bad_cell_named(tmp_path, case, data, bad):
    values, names = case
    n = values.shape[0]
    rows = [[repr(float(v)) for v in row] for row in values]
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1))
    rows[i][j] = bad
    header = names or [str(k) for k in range(n)]
    path = write(tmp_path / "m.csv", ([names] if names else []) + rows)
    if bad == "" and all(cell == "" for cell in rows[i]):
        return  # an all-blank line is skipped, covered by the shape test
    with pytest.raises(InvalidSpecError) as err:
        load_cost_matrix(path)
    msg = str(err.value)
    assert f"row {i + 1}" in msg and f"column {header[j]}" in msg


@SETTINGS
@given(matrices(), st.sampled_from(["drop_row", "drop_col", "add_col"]))
def test_non_square_rejected(tmp_path, case, how):
    values, names = case
    rows = [[repr(float(v)) for v in row] for row in values]
    if how == "drop_row":
        rows = rows[:-1]
    elif how == "drop_col":
        rows = [r[:-1] for r in rows]
        names = names[:-1] if names else None
    else:
        rows = [r + ["0.5"] for r in rows]
        names = names + ["nextra"] if names else None
    with pytest.raises(InvalidSpecError) as err:
        load_cost_matrix(write(tmp_path / "m.csv", ([names] if names else []) + rows))
    assert "cost matrix" in str(err.value)


def test_ragged_and_missing(tmp_path):
    with pytest.raises(InvalidSpecError, match="row 2 length"):
        load_cost_matrix(write(tmp_path / "r.csv", [["0", "1"], ["1"]]))
    with pytest.raises(InvalidSpecError, match="cost matrix file"):
        load_cost_matrix(tmp_path / "missing.csv")
    with pytest.raises(InvalidSpecError, match="distinct"):
        load_cost_matrix(write(tmp_path / "d.csv", [["a", "a"], ["0", "1"], ["1", "0"]]))
