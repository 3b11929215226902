"""The sweep specification parser: valid files, one-line errors, and fuzzed bad values."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from search.sweeps.spec import OBJECTIVES, load_sweep_spec, parse_sweep_spec

ROOT = Path(__file__).resolve().parents[2]
BASE = {"study": "s", "workloads": "resnet50",
        "space": {"families": ["torus", "ideal"], "servers": 16, "degree": {"low": 2, "high": 4},
                  "link_rate": ["100Gbps", "400Gbps"]}}


def _with(path: tuple, value):
    raw = copy.deepcopy(BASE)
    node = raw
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return raw


def test_small_yaml_parses_with_defaults():
    spec = load_sweep_spec(ROOT / "experiments" / "sweeps" / "small.yaml")
    assert spec.study == "quickstart" and spec.trials == 12 and spec.sampler == "nsga2"
    assert spec.space.degrees == (2, 3, 4, 5, 6, 7, 8) and spec.space.degree_is_range
    assert spec.space.link_rates_Bps == (25e9 / 8, 100e9 / 8, 200e9 / 8, 400e9 / 8)
    assert spec.directions == ["minimize", "minimize"] and spec.storage is None


def test_defaults_ranges_mix_and_constraints():
    spec = parse_sweep_spec(BASE)
    assert spec.sampler == "nsga2" and spec.objectives == ("iteration_time_s", "cost_usd")
    one = parse_sweep_spec({**BASE, "objectives": ["throughput_per_usd"]})
    assert one.sampler == "tpe" and one.directions == ["maximize"]
    rng = parse_sweep_spec(_with(("space", "link_rate"),
                                 {"low": "100Gbps", "high": "400Gbps", "step": "100Gbps"}))
    assert rng.space.link_rates_Bps == pytest.approx([12.5e9, 25e9, 37.5e9, 50e9])
    mix = parse_sweep_spec({**BASE, "workloads": [
        {"name": "resnet50", "weight": 2}, {"name": "dlrm", "config": "simulation",
                                            "strategy": "dp=128"}]})
    assert [(w.name, w.weight, w.strategy) for w in mix.workloads] == [
        ("resnet50", 2.0, None), ("dlrm", 1.0, "dp=128")]
    capped = parse_sweep_spec({**BASE, "constraints": {"budget_usd": 1e6, "max_degree": 3}})
    assert capped.space.degrees == (2, 3) and capped.budget_usd == 1e6
    from search.per_fabric import SearchBudget

    assert spec.space.strategy_search == SearchBudget() and spec.space.collective_methods == (
        "best",)
    assert spec.space.comm_overlap == "framework"
    assert parse_sweep_spec(_with(("space", "comm_overlap"), "none")).space.comm_overlap == "none"
    on = parse_sweep_spec(_with(("space", "strategy_search"), "on"))
    assert on.space.strategy_search == SearchBudget()
    assert parse_sweep_spec(_with(("space", "strategy_search"), False)).space.strategy_search \
        is None
    custom = parse_sweep_spec(_with(("space", "strategy_search"),
                                    {"evaluations": 40, "restarts": 4}))
    assert custom.space.strategy_search == SearchBudget(40, 4)
    # The network parts catalog: a name, kept as given, on every trial's point.
    parts = parse_sweep_spec(_with(("space", "catalog"), "parts-2026"))
    assert parts.space.catalog == "parts-2026" and spec.space.catalog is None
    # Money as on the command line.
    assert parse_sweep_spec({**BASE, "constraints": {"budget_usd": "10M"}}).budget_usd == 1e7
    assert parse_sweep_spec({**BASE, "constraints": {"budget_usd": "$500k"}}).budget_usd == 5e5
    # The hash ignores the planned trial count and storage, not the seed.
    assert spec.config_hash() == spec.replace(trials=99, storage="sqlite:///x.db").config_hash()
    assert spec.config_hash() != spec.replace(seed=1).config_hash()


@pytest.mark.parametrize("path,value,needle", [
    (("study",), "../x", "sweep study"),
    (("workloads",), "gpt5", "name"),
    (("workloads",), [{"name": "resnet50", "weight": -1}], "weight"),
    (("workloads",), [{"name": "resnet50", "cfg": "x"}], "unknown key 'cfg'"),
    (("workloads",), [{"name": "resnet50", "strategy": "dp=x"}], "strategy"),
    (("space", "families"), ["dragonfly"], "families"),
    (("space", "servers"), 1, "servers"),
    (("space", "degree"), {"low": 4, "high": 2}, "high"),
    (("space", "link_rate"), ["fast"], "link"),
    (("space", "gpu"), ["TPU"], "gpu"),
    (("space", "collective_method"), ["magic"], "collective_method"),
    (("space", "strategy_search"), "maybe", "strategy_search"),
    (("space", "strategy_search"), {"evaluations": 0}, "evaluations"),
    (("space", "strategy_search"), {"evaluations": 4, "restarts": 8}, "restarts"),
    (("space", "strategy_search"), {"budget": 4}, "unknown key 'budget'"),
    (("space", "gpus_per_server"), 0, "gpus_per_server"),
    (("space", "catalog"), "parts-1999", "catalog"),
    (("space", "catalog"), 7, "catalog"),
    (("space", "comm_overlap"), "always", "comm_overlap"),
    (("space", "comm_overlap"), True, "comm_overlap"),
    (("space", "bandwith"), 1, "unknown key 'bandwith'"),
    (("objectives",), ["speed"], "objectives"),
    (("constraints",), {"budget_usd": 0}, "budget_usd"),
    (("constraints",), {"budget_usd": "ten"}, "budget_usd"),
    (("constraints",), {"max_degree": 1}, "max_degree"),
    (("sampler",), "cmaes", "sampler"),
    (("trials",), 0, "trials"),
    (("max_in_flight",), True, "max_in_flight"),
    (("storage",), "journal.log", "storage"),
    (("trial_timeout_s",), -1, "trial_timeout_s"),
])
def test_bad_values_raise_one_line(path, value, needle):
    with pytest.raises(InvalidSpecError) as info:
        parse_sweep_spec(_with(path, value))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_bad_yaml_file(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("study: [unclosed\n")
    with pytest.raises(InvalidSpecError, match="line"):
        load_sweep_spec(p)
    p.write_text(yaml.safe_dump({**BASE, "trials": "many"}))
    with pytest.raises(InvalidSpecError, match="trials"):
        load_sweep_spec(p)


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=6)
_paths = st.sampled_from([
    ("study",), ("workloads",), ("space",), ("objectives",), ("constraints",), ("sampler",),
    ("population_size",), ("trials",), ("max_in_flight",), ("seed",), ("storage",),
    ("batch_size",), ("trial_timeout_s",), ("space", "families"), ("space", "servers"),
    ("space", "degree"), ("space", "link_rate"), ("space", "gpu"),
    ("space", "collective_method"), ("space", "strategy_search"),
    ("space", "leafspine_oversub"), ("space", "gpus_per_server"), ("constraints", "budget_usd"),
    ("constraints", "max_degree")])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_paths, _values)
def test_fuzzed_values_give_a_spec_or_invalid_spec_error(path, value):
    try:
        spec = parse_sweep_spec(_with(path, value))
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
    else:
        assert spec.trials >= 1 and all(o in OBJECTIVES for o in spec.objectives)


def test_a_given_strategy_must_fit_some_design_of_the_space():
    """`strategy: dp=7` on 16 servers of 8 GPUs was found only when every trial was
    pruned ('strategy: 2', exit 1); it is now refused when the spec is read."""
    from codesign.errors import InvalidSpecError
    from search.sweeps.spec import parse_sweep_spec

    def spec(strategy, servers):
        return {"study": "s", "workloads": [{"name": "resnet50", "strategy": strategy}],
                "space": {"families": ["torus"], "servers": servers, "degree": [2],
                          "link_rate": ["100Gbps"]}}

    with pytest.raises(InvalidSpecError, match=r"workloads\[0\] strategy 'dp=7'.*\(128\), "
                                               r"not 7"):
        parse_sweep_spec(spec("dp=7", [16]))
    # one server count of the space is enough (the others' trials are pruned, as before)
    assert parse_sweep_spec(spec("dp=128", [16, 32])).workloads[0].strategy == "dp=128"


def test_strategy_search_bounds_are_the_sweep_points_own():
    # the spec took 100,000 evaluations and shapes; every SweepPoint refuses more than
    # MAX_SEARCH_EVALUATIONS / MAX_SEARCH_SHAPES, so the study could not run
    from codesign.errors import InvalidSpecError
    from search.per_fabric import MAX_SEARCH_EVALUATIONS, MAX_SEARCH_SHAPES
    from search.sweeps.spec import parse_sweep_spec
    from search.sweeps.trial import SweepPoint

    def spec(search):
        return {"study": "s", "workloads": [{"name": "resnet50"}],
                "space": {"families": ["torus"], "servers": [16], "degree": [2],
                          "link_rate": ["100Gbps"], "strategy_search": search}}

    ok = parse_sweep_spec(spec({"evaluations": MAX_SEARCH_EVALUATIONS,
                                "shapes": MAX_SEARCH_SHAPES})).space.strategy_search
    SweepPoint("torus", 16, 2, 12.5e9, search_evaluations=ok.evaluations,
               search_shapes=ok.shapes)
    for key, bound in (("evaluations", MAX_SEARCH_EVALUATIONS), ("shapes", MAX_SEARCH_SHAPES)):
        with pytest.raises(InvalidSpecError, match=f"strategy_search {key}"):
            parse_sweep_spec(spec({key: bound + 1}))
