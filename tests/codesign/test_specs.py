"""Strict spec loading: unknown keys, wrong types and bad YAML are one-line errors."""

import pytest
from hypothesis import given, strategies as st

from codesign.errors import InvalidSpecError
from codesign.specs import check_choice, check_keys, get_bool, get_int, get_str, load_yaml


def test_unknown_key_is_named_with_the_allowed_ones():
    with pytest.raises(InvalidSpecError, match=r"unknown key 'bandwith' in topology file: "
                                               r"allowed keys are npus, bandwidth"):
        check_keys({"npus": 4, "bandwith": 1}, allowed=["npus", "bandwidth"],
                   where="topology file")


def test_missing_required_key():
    with pytest.raises(InvalidSpecError, match="missing key 'npus'"):
        check_keys({}, allowed=["npus"], required=["npus"])


def test_not_a_mapping():
    with pytest.raises(InvalidSpecError, match="expected a mapping"):
        check_keys([1, 2], allowed=["a"])


def test_typed_getters():
    spec = {"n": 4, "x": 1.5, "s": "ring", "b": True}
    assert get_int(spec, "n", minimum=1) == 4
    assert get_str(spec, "s", choices=["ring", "torus"]) == "ring"
    assert get_bool(spec, "b") is True
    assert get_int(spec, "absent", 7) == 7
    with pytest.raises(InvalidSpecError, match="'n'.*>= 5"):
        get_int(spec, "n", minimum=5)
    with pytest.raises(InvalidSpecError, match="one of ring2"):
        get_str(spec, "s", choices=["ring2"])
    with pytest.raises(InvalidSpecError, match="true or false"):
        get_bool({"b": "yes"}, "b")
    with pytest.raises(InvalidSpecError, match="an integer"):
        get_int({"n": True}, "n")


def test_load_yaml_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("npus: [1, 2\n")
    with pytest.raises(InvalidSpecError) as exc:
        load_yaml(bad)
    assert "\n" not in str(exc.value) and "line" in str(exc.value)
    with pytest.raises(InvalidSpecError, match="cannot read"):
        load_yaml(tmp_path / "missing.yaml")


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.integers(), max_size=6))
def test_check_keys_accepts_exactly_the_allowed_keys(spec):
    allowed = ["a", "b", "c"]
    if all(k in allowed for k in spec):
        assert check_keys(spec, allowed=allowed) is spec
    else:
        with pytest.raises(InvalidSpecError, match="unknown key"):
            check_keys(spec, allowed=allowed)


_ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)


@given(_ANY | st.sampled_from(["tpe", "random"]))
def test_check_choice_returns_a_choice_or_names_field_value_and_choices(value):
    if isinstance(value, str) and value in ("tpe", "random"):
        assert check_choice("sweep sampler", value, ("tpe", "random")) == value
        return
    with pytest.raises(InvalidSpecError) as err:
        check_choice("sweep sampler", value, {"tpe": 1, "random": 2}, "(see --help)")
    text = str(err.value)
    assert "\n" not in text and text.startswith("invalid sweep sampler ")
    assert text.endswith("expected one of tpe, random (see --help)")
