"""Bad arguments to codesign's public helpers raise one-line InvalidSpecError.

Found by fuzzing: the unit formatters raised TypeError / ValueError / OverflowError and
printed 'nanB', 'infPiB', '-1B' and an unparseable 'infGbps' spec; parse_count accepted
1e300; the file readers raised TypeError from os.stat for a non-path (so did
load_catalog(5), load_hardware_catalog({}), load_workload(None), load_cost_matrix(None));
is_model_file(None) raised AttributeError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.units import (MAX_BANDWIDTH_BPS, MAX_COUNT, MIN_BANDWIDTH_BPS, format_bandwidth,
                            format_size, format_time, parse_bandwidth, parse_count, spec_rate)


NOT_NUMBERS = [None, "x", "1", [1], 1j, True, {}, np.array([1.0])]


# ------------------------------------------------------------------ formatters
@pytest.mark.parametrize("value", NOT_NUMBERS + [10 ** 400, math.nan, math.inf, -1, -1e-9])
@pytest.mark.parametrize("fmt, field", [(format_size, "size"), (format_bandwidth, "bandwidth")])
def test_size_and_bandwidth_formatters_refuse_what_is_not_a_finite_amount(refused, fmt, field,
                                                                          value):
    refused(fmt, value, match=f"invalid {field} .*: expected a finite number >= 0")


@pytest.mark.parametrize("value", NOT_NUMBERS + [10 ** 400, math.nan, -1, -math.inf])
def test_format_time_refuses_what_is_not_a_duration(refused, value):
    refused(format_time, value, match=r"invalid time .*: expected a number >= 0 or inf")


def test_formatters_keep_their_output():
    assert format_size(2 ** 30) == "1GiB" and format_size(np.int64(2 ** 30)) == "1GiB"
    assert format_size(0) == "0B" and format_size(1e6, binary=False) == "1MB"
    assert format_bandwidth(np.float64(50e9), bits=True) == "400Gbps"
    assert format_bandwidth(50e9) == "50GB/s"
    assert format_time(1.5e-3) == "1.5ms" and format_time(0) == "0ns"
    # An unbounded time stays printable (a measured quantity may be unbounded).
    assert format_time(math.inf) == "infs"


@pytest.mark.parametrize("value", NOT_NUMBERS + [10 ** 400, math.nan, math.inf, -1, 0,
                                                 MIN_BANDWIDTH_BPS / 2, MAX_BANDWIDTH_BPS * 2])
def test_spec_rate_refuses_what_no_spec_can_hold(refused, value):
    # 'infGbps' and '0.0' were returned: neither parses back.
    refused(spec_rate, value, match=r"invalid spec bandwidth .*: expected a number of bytes/s "
                                     r"in \[1e-06, 1e\+18\]")


@given(st.floats(min_value=MIN_BANDWIDTH_BPS, max_value=MAX_BANDWIDTH_BPS),
       st.sampled_from(["Gbps", "GB/s"]))
def test_spec_rate_output_parses_back(bps, unit):
    assert math.isclose(parse_bandwidth(spec_rate(bps, unit)), bps, rel_tol=1e-5)


@given(st.one_of(st.none(), st.text(max_size=8), st.booleans(), st.complex_numbers(),
                 st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                 st.lists(st.integers(), max_size=2)),
       st.sampled_from([format_size, format_bandwidth, format_time, spec_rate]))
@example(-0.0, format_size)    # negative zero printed '-0B' (found by this test)
@example(-0.0, format_bandwidth)
@example(-0.0, format_time)
def test_formatters_return_a_string_or_refuse_with_one_line(value, fmt):
    try:
        out = fmt(value)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(out, str) and "nan" not in out and not out.startswith("-")


# ------------------------------------------------------------------ parse_count
@pytest.mark.parametrize("value", [1e300, "1e300", 10 ** 400, "2e24", MAX_COUNT * 1.01])
def test_parse_count_is_bounded(refused, value):
    refused(parse_count, value, field="--tokens", match="invalid --tokens")


def test_parse_count_keeps_fractions_and_large_goals():
    # Fractions stay: epochs are counted with it (--epochs 0.5), and a fractional
    # token goal is rounded up to whole iterations by its user.
    assert parse_count(3.5) == 3.5 and parse_count("0.5") == 0.5
    assert parse_count("1000000P") == 1e21 and parse_count(MAX_COUNT) == MAX_COUNT


@given(st.floats(min_value=0, max_value=1e30, allow_nan=False, exclude_min=True))
def test_parse_count_accepts_exactly_the_counts_up_to_its_bound(refused, value):
    if value <= MAX_COUNT:
        assert parse_count(value) == value == parse_count(repr(value))
    else:
        refused(parse_count, value)
        refused(parse_count, repr(value))


# ------------------------------------------------------------------ file readers
@pytest.mark.parametrize("value", [5, {}, None, 3.5, [1], b"spec.yaml"])
def test_readers_refuse_a_non_path_naming_what_they_read(refused, value):
    from codesign.files import load_json_file, load_yaml_file, read_bytes, read_text

    for reader in (read_bytes, read_text):
        refused(reader, value, what="hardware catalog",
                 match=r"invalid hardware catalog .*: expected a file path")
    refused(load_yaml_file, value, match="expected a file path")
    refused(load_json_file, value, match="expected a file path")


@pytest.mark.parametrize("loader, value", [
    ("topologies.cost:load_catalog", 5),
    ("codesign.workloads.hardware:load_hardware_catalog", {}),
    ("codesign.workloads:load_workload", None),
    ("search.reorder.rank_order:load_cost_matrix", None),
    ("search.reorder.rank_order:load_cost_matrix", 5),
])
def test_file_loaders_refuse_a_non_path(refused, loader, value):
    import importlib

    module, name = loader.split(":")
    refused(getattr(importlib.import_module(module), name), value,
             match="expected a file path")


def test_readers_still_read_paths(refused, tmp_path):
    from codesign.files import read_bytes, read_text

    (tmp_path / "a.txt").write_text("hello\n")
    assert read_text(tmp_path / "a.txt") == read_text(str(tmp_path / "a.txt")) == "hello\n"
    assert read_bytes(tmp_path / "a.txt") == b"hello\n"
    refused(read_text, tmp_path / "missing.txt", match="no such file")


# ------------------------------------------------------------------ is_model_file
@pytest.mark.parametrize("value", [None, 5, ["x.yaml"], b"x.yaml"])
def test_is_model_file_refuses_a_non_name(refused, value):
    from codesign.workloads import is_model_file

    refused(is_model_file, value, match=r"invalid workload .*: expected a zoo model name "
                                         r"or the path of a model file")


def test_is_model_file_reads_names_and_paths(tmp_path):
    from pathlib import Path

    from codesign.workloads import is_model_file

    assert is_model_file("my.yaml") and is_model_file(Path("my.yml"))
    assert not is_model_file("gpt3-175b")
    (tmp_path / "model").write_text("name: m\n")
    assert is_model_file(str(tmp_path / "model")) and is_model_file(tmp_path / "model")


# ----------------------------------------------------------- the iteration model's knobs
@pytest.mark.parametrize("kw, needle", [
    ({"bucket_bytes": 1.0}, "bucket_bytes 1.0: expected at least 1,022 bytes"),
    ({"efficiency": 1e-300}, "efficiency"), ({"time_bound": float("nan")}, "time_bound"),
    ({"time_bound": -1}, "time_bound"), ({"time_bound": "1"}, "time_bound")])
def test_iteration_knobs_that_could_not_be_timed_arerefused(refused, kw, needle):
    # 1-byte buckets: 10^8 gradient ops (MemoryError); efficiency 1e-300: 8e298 s with
    # overflow warnings; a nan time bound was ignored, -1 raised AboveBound
    from evaluators.iteration import evaluate

    with pytest.raises(InvalidSpecError, match=needle):
        evaluate("ideal:16,degree=4,bw=100Gbps", "resnet50", "dp=128", **kw)


def test_a_layer_batch_beyond_the_largest_batch_isrefused(refused):
    from codesign.workloads import get_workload
    from codesign.workloads.compute import layer_time

    with pytest.raises(InvalidSpecError, match="batch"):   # (inf seconds before)
        layer_time(get_workload("gpt3-175b").layer("block0.mlp"), "A100-80", 1e300)


def test_numbers_too_large_for_a_float_are_refused_not_overflowed():
    from codesign.specs import check_number

    with pytest.raises(InvalidSpecError, match="finite number"):
        check_number("x", 10 ** 400)


# --------------------------------------------------- money, days and network prices
def test_training_days_and_tco_refuse_nonsense_instead_of_answering_it():
    # batch -1 gave -5651 days, network power nan a nan opex, -1 a lower one
    from codesign.tco import TcoParams, cluster_tco, run_cost_usd, server_price
    from search.time_to_train import TrainingGoal, days_to_train, parse_goal

    goal = parse_goal(tokens=1e12)
    for kw, needle in ((dict(batch_size=-1), "batch_size"), (dict(batch_size=0), "batch_size"),
                       (dict(seq_len=-1), "seq_len"), (dict(iteration_time_s=None), "time")):
        with pytest.raises(InvalidSpecError, match=needle):
            days_to_train(goal, **{**dict(batch_size=8, seq_len=2048, iteration_time_s=1),
                                   **kw})
    for bad in (-1, float("nan"), "x"):
        with pytest.raises(InvalidSpecError, match="--tokens"):
            TrainingGoal(tokens=bad)
    sp = server_price("H100")
    ok = dict(network_usd=1e5, network_power_w=1e3, params=TcoParams())
    for kw, needle in ((dict(network_power_w=float("nan")), "network_power_w"),
                       (dict(network_power_w=-1), "network_power_w"),
                       (dict(gpus_per_server=0), "gpus_per_server"),
                       (dict(network_usd="x"), "network_usd"), (dict(params=None), "params")):
        with pytest.raises(InvalidSpecError, match=needle):
            cluster_tco(4, sp, **{**ok, **kw})
    with pytest.raises(InvalidSpecError, match="training days"):
        run_cost_usd(cluster_tco(4, sp, **ok), None)


@pytest.mark.parametrize("args, kw, needle", [
    ((16, "16"), {}, "link rate"), ((16, 12.5e9), {"oversub": "2"}, "oversub"),
    ((10 ** 30, 12.5e9), {}, "servers"), ((16, 1e300), {}, "link rate"),
    ((16, 12.5e9), {"tiers": 10}, "tiers")])
def test_network_prices_take_numbers_in_range_only(args, kw, needle):
    # ('16' was 16 B/s, 1e300 B/s cost $3e294, 10^30 servers $2.7e33)
    from topologies.cost import fattree_cost

    with pytest.raises(InvalidSpecError, match=needle):
        fattree_cost(*args, **kw)


def test_flags_are_booleans_not_truthy_values(refused):
    # ('no' and 'x' were read as True)
    from codesign.workloads import get_workload
    from codesign.workloads.demand import demand_for
    from evaluators.collectives import Collective
    from evaluators.iteration import evaluate
    from evaluators.registry import synthesize
    from topologies.registry import from_spec

    refused(evaluate, "ideal:16,degree=4,bw=100Gbps", "resnet50", "dp=128", check_memory="no",
            match="check_memory 'no'")
    refused(demand_for, get_workload("resnet50"), "dp=8", "A100-80", check="x", match="check")
    refused(synthesize, from_spec("ring:4"), Collective.on("allgather", 4, 1e6),
            validate="x", match="validate 'x'")


def test_failure_studies_and_price_catalogs_check_what_they_are_given(refused):
    # (a FailureStudy of 'x' failed later with an AttributeError; a price catalog path of
    # '' or [] silently gave the built-in catalog)
    from codesign.tco import load_prices
    from search.failure_whatif import FailureStudy

    refused(FailureStudy, "x", match="failure spec 'x'")
    for bad in ("", [], {}):
        refused(load_prices, bad, match="prices")
    assert load_prices(None)[0]   # the built-in catalog
