"""codesign.files (safe reader, atomic writer) and codesign.resources (limits)."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.files import (load_json_text, load_yaml_file, load_yaml_text, read_text,
                            write_text_atomic)
from codesign.resources import (ResourceLimitError, check_count, check_memory, format_bytes,
                                memory_limit, memory_limit_scope)

yaml_data = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10 ** 6, 10 ** 6), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=60, deadline=None)
@given(yaml_data)
def test_safe_yaml_loads_what_pyyaml_loads(value):
    text = yaml.safe_dump(value)
    assert load_yaml_text(text) == yaml.safe_load(text)


def _bomb(levels: int, width: int) -> str:
    lines = ["l0: &l0 [" + ", ".join(["x"] * width) + "]"]
    for k in range(1, levels):
        lines.append(f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels, width", [(2, 3), (4, 5), (3, 10)])
def test_alias_expansion_is_counted_exactly(levels, width):
    # Oracle: the expanded node count of the nested lists, in closed form.  Level k is a
    # list of width copies of level k-1: nodes(0) = 1 + width, nodes(k) = 1 + width*nodes(k-1);
    # the document adds one mapping node and one key scalar per level.
    nodes = [1 + width]
    for _ in range(1, levels):
        nodes.append(1 + width * nodes[-1])
    total = 1 + levels + sum(nodes)
    text = _bomb(levels, width)
    assert load_yaml_text(text, max_nodes=total)["l0"] == ["x"] * width
    with pytest.raises(InvalidSpecError, match="alias bomb"):
        load_yaml_text(text, max_nodes=total - 1)


def test_billion_laughs_is_refused_fast_without_echo():
    text = _bomb(9, 9)
    with pytest.raises(InvalidSpecError) as info:
        load_yaml_text(text, where="f.yaml")
    assert "lol" not in str(info.value) and len(str(info.value)) < 300


def test_recursive_alias_and_deep_nesting():
    with pytest.raises(InvalidSpecError):
        load_yaml_text("a: &a [1, *a]\n")
    with pytest.raises(InvalidSpecError, match="nested"):
        load_yaml_text("[" * 200 + "]" * 200)
    with pytest.raises(InvalidSpecError, match="nested"):
        load_json_text("[" * 200 + "]" * 200)
    assert load_json_text("[" * 50 + "]" * 50) is not None
    assert load_json_text('{"a": "[[[[[[["}') == {"a": "[[[[[[["}


def test_json_refuses_nan_and_reports_line():
    with pytest.raises(InvalidSpecError, match="NaN"):
        load_json_text('{"x": NaN}')
    with pytest.raises(InvalidSpecError, match="line 2"):
        load_json_text('{\n"x": }')


def test_reader_refuses_directories_large_files_and_bom_is_dropped(tmp_path):
    with pytest.raises(InvalidSpecError, match="directory"):
        read_text(tmp_path)
    big = tmp_path / "big.yaml"
    big.write_text("x" * 2000)
    with pytest.raises(InvalidSpecError, match="larger than"):
        read_text(big, max_bytes=1000)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes("\ufeffnpus: 2\n".encode("utf-8"))
    assert load_yaml_file(bom) == {"npus": 2}


def test_atomic_write_replaces_whole_file_and_leaves_nothing_on_error(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    write_text_atomic(target, json.dumps({"a": 1}))
    assert json.loads(target.read_text()) == {"a": 1}

    def broken(*_args, **_kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(InvalidSpecError, match="No space left"):
        write_text_atomic(target, "new")
    assert json.loads(target.read_text()) == {"a": 1}      # old content intact
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left


def test_limits_and_messages():
    assert format_bytes(3 * 2 ** 30) == "3 GiB" and format_bytes(float("inf")).startswith("an ")
    with memory_limit_scope(2 ** 20):
        assert memory_limit() == 2 ** 20 and os.environ["CODESIGN_MAX_MEMORY"]
        check_memory("x", "n", 1, 2 ** 19, "y")
        with pytest.raises(ResourceLimitError, match=r"refused: x with n=1 needs about 2 MiB"):
            check_memory("x", "n", 1, 2 ** 21, "do less")
    with pytest.raises(ResourceLimitError, match="plans 1e\\+10 entries"):
        check_count("x", "n", 5, 1e10, "y")
    with pytest.raises(ResourceLimitError):   # NaN estimates are refused, not waved through
        check_memory("x", "n", 1, float("nan"), "y")


def test_output_checks_name_a_file_in_the_way_and_an_uncreatable_folder(tmp_path):
    # Fuzzing: `--out afile/t.yaml` (afile a file) said "folder 'afile' does not exist",
    # `report --out afile` "cannot create ... File exists", and `--report /proc/xx` passed
    # the check (os.access says yes on /proc) and failed after the whole computation.
    from codesign.files import check_output_folder, check_output_path

    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidSpecError, match=r"'.*afile' is a file, not a folder"):
        check_output_path(tmp_path / "afile" / "t.yaml")
    with pytest.raises(InvalidSpecError, match=r"afile' is a file, not a folder"):
        check_output_path(tmp_path / "afile" / "sub" / "t.yaml")
    with pytest.raises(InvalidSpecError, match=r"it exists and is a file, not a folder"):
        check_output_folder(tmp_path / "afile")
    if os.path.isdir("/proc/self"):
        with pytest.raises(InvalidSpecError, match=r"no folder can be created in '/proc'"):
            check_output_folder("/proc/xx")
    assert check_output_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]   # the probe left nothing


def test_local_workers_are_bounded_by_the_cpus(monkeypatch):
    from codesign.resources import WORKERS_PER_CPU, check_local_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert check_local_workers("workers", 2) == 2          # the defaults run on 1 CPU
    assert check_local_workers("workers", WORKERS_PER_CPU) == WORKERS_PER_CPU
    with pytest.raises(InvalidSpecError, match=r"invalid workers 1000000: expected at most "
                                               r"4 worker processes on this machine"):
        check_local_workers("workers", 10 ** 6)


@pytest.mark.parametrize("text, line, key, first", [
    ("study: s1\nstudy: s2\n", 2, "study", 1),                  # a sweep file: s2 ran
    ("npus: 2\nnpus: 3\n", 2, "npus", 1),                       # a topology file
    ("b: {x: 1, x: 2}\n", 1, "x", 1),                           # a flow mapping
    ("l:\n - {n: 1}\n - n: 2\n   n: 3\n", 4, "n", 3),           # nested
])
def test_duplicate_yaml_keys_are_refused_naming_key_and_file(text, line, key, first):
    # Fuzzing: the last of two equal keys won silently, in every YAML file the project reads.
    with pytest.raises(InvalidSpecError, match=rf"invalid YAML in spec file 's.yaml' at line "
                                               rf"{line}: duplicate key '{key}' \(also at "
                                               rf"line {first}\)"):
        load_yaml_text(text, where="spec file 's.yaml'")


def test_merge_keys_and_equal_keys_in_different_mappings_are_fine():
    text = "base: &b {p: 1, q: 2}\nc:\n  <<: *b\n  p: 3\nd: {p: 4}\n"
    assert load_yaml_text(text) == {"base": {"p": 1, "q": 2}, "c": {"p": 3, "q": 2},
                                    "d": {"p": 4}}
