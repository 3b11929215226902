"""Units parsing and formatting (docs/architecture.md section 4): hand values and properties."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.units import (
    BARE_BANDWIDTH_BPS, BARE_LATENCY_S, BARE_MEMORY_BYTES, format_bandwidth, format_size,
    format_time, parse_bandwidth, parse_count, parse_money, parse_size, parse_time,
)

# ----------------------------------------------------------------- hand values


@pytest.mark.parametrize("text, value", [
    ("1GiB", 2.0 ** 30), ("100MB", 1e8), ("512", 512.0), ("512B", 512.0), ("8Gb", 1e9),
    ("8Gbit", 1e9), ("1.5KiB", 1536.0), ("1e3MB", 1e9), (" 2 TB ", 2e12), ("4kB", 4e3),
])
def test_parse_size_hand_values(text, value):
    assert parse_size(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text, value", [
    ("100Gbps", 12.5e9), ("100Gb/s", 12.5e9), ("50GB/s", 50e9), ("50GBps", 50e9),
    ("50GiB/s", 50 * 2.0 ** 30), ("200Gbit/s", 25e9), ("1e9", 1e9), ("400Gbps", 50e9),
])
def test_parse_bandwidth_hand_values(text, value):
    assert parse_bandwidth(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text, value", [
    ("700ns", 700e-9), ("0.5us", 0.5e-6), ("0.5µs", 0.5e-6), ("2ms", 2e-3), ("1s", 1.0),
    ("1min", 60.0), ("1h", 3600.0), ("0", 0.0), ("3", 3.0),
])
def test_parse_time_hand_values(text, value):
    assert parse_time(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text, value", [("$1200", 1200.0), ("1.2k", 1200.0), ("3M", 3e6),
                                         ("250 USD", 250.0)])
def test_parse_money_hand_values(text, value):
    assert parse_money(text) == pytest.approx(value)


def test_numbers_are_base_units_and_bools_are_rejected():
    assert parse_size(4096) == 4096.0
    assert parse_bandwidth(25e9) == 25e9
    assert parse_time(0) == 0.0
    for parser in (parse_size, parse_bandwidth, parse_time, parse_money):
        with pytest.raises(InvalidSpecError):
            parser(True)


@pytest.mark.parametrize("parser, text", [
    (parse_size, "-1GB"), (parse_size, "0"), (parse_size, "1XB"), (parse_size, "1kiB"),
    (parse_size, "1e400"), (parse_bandwidth, "5k"), (parse_bandwidth, "-5GB/s"),
    (parse_bandwidth, "abc"), (parse_bandwidth, "0"), (parse_time, "1 fortnight"),
    (parse_time, "-1ms"), (parse_money, "$-3"), (parse_size, None), (parse_time, [1]),
])
def test_bad_values_raise_one_line_invalid_spec(parser, text):
    with pytest.raises(InvalidSpecError) as info:
        parser(text)
    assert "\n" not in str(info.value)


def test_zero_only_where_allowed():
    assert parse_size("0B", allow_zero=True) == 0.0
    assert parse_time("0ns") == 0.0
    with pytest.raises(InvalidSpecError):
        parse_time("0ns", allow_zero=False)


def test_format_hand_values():
    assert format_size(2 ** 30) == "1GiB"
    assert format_size(1e6, binary=False) == "1MB"
    assert format_bandwidth(50e9) == "50GB/s"
    assert format_bandwidth(50e9, bits=True) == "400Gbps"
    assert format_time(1.5e-3) == "1.5ms"
    assert format_time(700e-9) == "700ns"


# ------------------------------------------------------------------ properties
_positive = st.floats(min_value=1e-6, max_value=1e18, allow_nan=False, allow_infinity=False)
_times = st.floats(min_value=1e-12, max_value=1e6, allow_nan=False, allow_infinity=False)


def _close(a, b):
    # format_* keeps 4 significant digits: relative error at most 5e-4.
    return math.isclose(a, b, rel_tol=5.001e-4)


@given(_positive, st.booleans())
def test_size_format_parse_round_trip(value, binary):
    assert _close(parse_size(format_size(value, binary=binary)), value)


@given(_positive, st.booleans())
def test_bandwidth_format_parse_round_trip(value, bits):
    assert _close(parse_bandwidth(format_bandwidth(value, bits=bits)), value)


@given(_times)
def test_time_format_parse_round_trip(value):
    assert _close(parse_time(format_time(value)), value)


@given(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False),
       st.sampled_from([("", 1.0), ("k", 1e3), ("K", 1e3), ("M", 1e6), ("B", 1e9),
                        ("G", 1e9), ("T", 1e12), ("P", 1e15)]))
def test_count_suffixes_scale_decimally(value, suffix):
    text, scale = suffix
    assert math.isclose(parse_count(f"{value!r}{text}"), value * scale, rel_tol=1e-12)
    assert parse_count(f" {value!r} {text} ") == parse_count(f"{value!r}{text}")


_garbage = st.one_of(
    st.text(max_size=20),
    st.text(alphabet="0123456789.eE+-kKMGTPibBpsun/µ$ ", max_size=12),
    st.none(), st.booleans(), st.lists(st.integers(), max_size=2),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10, max_value=10),
)


@settings(max_examples=400)
@given(_garbage, st.sampled_from([parse_size, parse_bandwidth, parse_time, parse_money,
                                  parse_count]))
def test_garbage_only_raises_invalid_spec(value, parser):
    try:
        out = parser(value)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(out, float) and math.isfinite(out) and out >= 0


@pytest.mark.parametrize("parse, bare, plausible, implausible", [
    (parse_bandwidth, BARE_BANDWIDTH_BPS, ["12.5e9", 12.5e9, "100Gbps", "1Mbps"], ["100", 400]),
    (parse_time, BARE_LATENCY_S, ["5e-7", 0, "0", "1s", "2min"], ["1", 0.5]),
    (parse_size, BARE_MEMORY_BYTES, ["85899345920", "80GiB", "1KiB"], ["80", 80.0]),
])
def test_a_bare_number_outside_its_plausible_range_names_the_missing_unit(
        parse, bare, plausible, implausible):
    # With a unit any value passes (the unit says what was meant); a bare number must be
    # plausible in base units, else the unit was forgotten (`bandwidth: 100` meaning Gbps).
    for value in plausible:
        assert parse(value, field="f", bare=bare) == parse(value, field="f")
    for value in implausible:
        with pytest.raises(InvalidSpecError, match=r"with its unit, such as .* \(a bare number"):
            parse(value, field="f", bare=bare)
        parse(value, field="f")  # without bare= (numbers computed in code) it is accepted


def test_user_written_fields_refuse_a_forgotten_unit(tmp_path):
    from codesign.workloads.hardware import load_hardware_catalog
    from search.sweeps.spec import parse_sweep_spec
    from topologies.registry import from_spec, load_topology

    for spec, field in (("ideal:4,bw=100", "ideal bw"), ("ring:4,lat=1", "ring lat"),
                        ("dgx-a100:2,nvlink=300", "dgx-a100 nvlink")):
        with pytest.raises(InvalidSpecError, match=f"invalid {field} "):
            from_spec(spec)
    topo = tmp_path / "t.yaml"
    topo.write_text("npus: 2\nbandwidth: 25\nlatency: 1us\nlinks:\n  - {src: 0, dst: 1}\n")
    with pytest.raises(InvalidSpecError, match="bandwidth '?25'?: expected a bandwidth with"):
        load_topology(str(topo))
    with pytest.raises(InvalidSpecError, match="link_rate"):
        parse_sweep_spec({"study": "u", "workloads": "bert", "trials": 1,
                          "space": {"families": ["ideal"], "servers": 4, "degree": 2,
                                    "link_rate": [100]}})
    hw = tmp_path / "h.yaml"
    hw.write_text("gpus:\n  MYGPU:\n    peak_flops: {fp16: 989TFLOP/s}\n    memory: 80\n"
                  "    memory_bandwidth: 3.35TB/s\n    gpus_per_server: 8\n"
                  "    fabric: nvlink\n    fabric_bandwidth: 450GB/s\n")
    with pytest.raises(InvalidSpecError, match="memory 80: expected a size with its unit"):
        load_hardware_catalog(str(hw))
