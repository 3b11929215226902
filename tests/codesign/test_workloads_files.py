"""User model files: the three forms, strict keys, and no exception but InvalidSpecError."""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codesign.app.cli import main
from codesign.errors import InvalidSpecError
from codesign.workloads import BUILDERS, Workload, get_workload, load_workload
from codesign.workloads.registry import workload_from_dict


def test_layers_form(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "name: tiny\nbatch_size: 32\ndtype_bytes: 2\noptimizer_bytes_per_param: 0\n"
        "layers:\n"
        "  - {name: emb, kind: embedding, params: 1000, fwd_flops: 64, activation_bytes: 128,"
        " table_rows: 10, table_dim: 100, lookups: 1}\n"
        "  - {name: fc1, kind: dense, params: 1048576, fwd_flops: 2.5e6, activation_bytes: 2KiB}\n"
        "  - {name: fc2, kind: dense, params: 1024, fwd_flops: '2048', bwd_flops: 1,"
        " activation_bytes: 2}\n")
    w = load_workload(path)
    assert (w.name, w.batch_size, w.builder, w.parameters) == ("tiny", 32, "layers", 1050600)
    assert w.layer("fc1").bwd_flops == 5e6          # default 2 x forward
    assert w.layer("emb").bwd_flops == 64           # embeddings: backward = forward
    assert w.layer("fc1").activation_bytes == 2048
    assert w.layer("fc2").fwd_flops == 2048 and w.layer("fc2").bwd_flops == 1
    assert w.memory.optimizer_bytes == 0
    assert w.memory.weights_bytes == 2 * 1050600


def test_builder_and_base_forms():
    w = workload_from_dict({"name": "mini-llm", "builder": "transformer", "batch_size": 8,
                            "params": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 100,
                                       "seq_len": 16}})
    h = 64
    assert w.parameters == 2 * (12 * h * h + 13 * h) + 100 * h + 2 * h + 100 * h
    long = workload_from_dict({"name": "long8b", "base": "llama3-8b",
                               "params": {"seq_len": 32768}, "batch_size": 64})
    ref = get_workload("llama3-8b", seq_len=32768, batch_size=64)
    assert (long.name, long.seq_len, long.batch_size) == ("long8b", 32768, 64)
    assert long.flops_per_sample == ref.flops_per_sample
    dlrm6 = workload_from_dict({"name": "d", "base": "dlrm", "config": "6"})
    assert dlrm6.batch_size == 512 * 12


@pytest.mark.parametrize("spec, needle", [
    ({"name": "x"}, "exactly one of builder"),
    ({"name": "x", "builder": "transformer", "base": "gpt3-175b"}, "exactly one"),
    ({"name": "x", "builder": "cnn", "batch_size": 1}, "one of resnet"),
    ({"name": "x", "builder": "transformer", "params": {"hiden": 4}, "batch_size": 1},
     "unknown parameter 'hiden'"),
    ({"name": "x", "builder": "transformer", "params": {"layers": 2}}, "batch_size"),
    # No hyper-parameters: the builder's defaults (GPT-2 small) are not the user's model.
    ({"name": "x", "builder": "transformer", "batch_size": 1}, "params None.*defaults"),
    ({"name": "x", "builder": "transformer", "params": {}, "batch_size": 1},
     r"params \{\}.*layers, hidden"),
    ({"name": "x", "base": "gpt3-175b", "dtype_bytes": 4}, "under params"),
    ({"name": "x", "layers": [], "batch_size": 1}, "non-empty list"),
    ({"name": "x", "layers": [{"name": "a", "kind": "dense", "params": 1}],
      "batch_size": 1}, "missing key 'fwd_flops'"),
    ({"name": "x", "layers": [{"name": "a", "kind": "dense", "params": 1, "fwd_flops": 1,
                               "flops": 2}], "batch_size": 1}, "unknown key 'flops'"),
    ({"name": "x", "layers": [{"name": "a", "kind": "dense", "params": 1, "fwd_flops": 1}] * 2,
      "batch_size": 1}, "unique names"),
    ({"name": "x", "layers": [{"name": "a", "kind": "dense", "params": 1, "fwd_flops": "x"}],
      "batch_size": 1}, "fwd_flops"),
    ({"name": "x", "base": "dlrm", "params": {"interaction": "dot"}}, "dot interaction"),
    ({"nam": "x"}, "unknown key 'nam'"),
])
def test_bad_files(spec, needle):
    with pytest.raises(InvalidSpecError, match=needle):
        workload_from_dict(spec)


# --------------------------------------------------------------- property test
_PARAM_KEYS = sorted({k for b in BUILDERS.values() for k in b.params})
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 5000),
                     st.floats(allow_nan=True, allow_infinity=True, width=32),
                     st.sampled_from(["", "x", "layernorm", "v1", "cat", "1e9", "2KiB", "lm",
                                      "16", "dense", "embedding", "50"]))
_VALUES = st.one_of(_SCALARS, st.lists(st.integers(-2, 300), max_size=4),
                    st.lists(_SCALARS, max_size=3))
_LAYER = st.dictionaries(
    st.sampled_from(["name", "kind", "params", "fwd_flops", "bwd_flops", "activation_bytes",
                     "io_bytes", "experts", "top_k", "expert_params", "dtype_bytes",
                     "tp_shardable", "signature", "bogus"]),
    _VALUES, max_size=8)
_FORMS = st.one_of(
    st.fixed_dictionaries({"builder": st.sampled_from(list(BUILDERS) + ["nope"]),
                           "params": st.dictionaries(st.sampled_from(_PARAM_KEYS + ["junk"]),
                                                     _VALUES, max_size=5)}),
    st.fixed_dictionaries({"base": st.sampled_from(["gpt3-175b", "dlrm", "bert", "mixtral-8x7b",
                                                    "resnet50", "nope"]),
                           "params": st.dictionaries(st.sampled_from(_PARAM_KEYS + ["junk"]),
                                                     _VALUES, max_size=4)}),
    st.fixed_dictionaries({"layers": st.lists(_LAYER, max_size=3)}),
    st.dictionaries(st.sampled_from(["builder", "base", "layers", "params", "config"]),
                    _VALUES, max_size=3))
_EXTRA = st.dictionaries(
    st.sampled_from(["config", "batch_size", "batch_per_gpu", "reference_gpus",
                     "optimizer_bytes_per_param", "dtype_bytes", "seq_len", "description",
                     "source"]),
    st.one_of(st.integers(1, 64), _VALUES), max_size=3)
_NAME = st.one_of(st.just({"name": "m"}), st.just({"name": "m", "extra": 1}), st.just({}),
                  st.fixed_dictionaries({"name": _VALUES}))
_SPEC = st.builds(lambda name, form, extra, batch: {**extra, **batch, **form, **name},
                  st.one_of(st.just({"name": "m"}), _NAME), _FORMS, _EXTRA,
                  st.one_of(st.just({"batch_size": 4}), st.just({})))


@given(_SPEC)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_spec_gives_a_workload_or_invalid_spec_error(spec):
    try:
        w = workload_from_dict(spec)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(w, Workload) and w.batch_size >= 1 and w.parameters >= 0


@given(st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_builder_parameters_give_a_workload_or_invalid_spec_error(data):
    name = data.draw(st.sampled_from(sorted(BUILDERS)))
    keys = sorted(BUILDERS[name].params)
    params = data.draw(st.dictionaries(
        st.sampled_from(keys), st.one_of(st.integers(0, 64), st.lists(st.integers(0, 64),
                                                                      max_size=3), _VALUES),
        max_size=6))
    try:
        w = workload_from_dict({"name": "m", "builder": name, "params": params,
                                "batch_size": 2})
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert w.flops_per_sample >= 0 and w.memory.state_bytes >= 0


@given(st.text(max_size=200))
@settings(max_examples=100, deadline=None)
def test_any_yaml_text_gives_a_workload_or_invalid_spec_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("y") / "m.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_workload(path)
    except InvalidSpecError:
        pass


# ----------------------------------------------------------------------- CLI
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_show_json(capsys):
    code, out, err = run(capsys, "workload", "show", "resnet50", "--json")
    data = json.loads(out)
    assert code == 0 and err == ""
    assert data["parameters"] == 25_557_032
    assert data["flops_per_sample"] == pytest.approx(3 * 2 * 4.089e9, rel=0.01)
    assert len(data["layers"]) == data["layer_count"]
    assert {"weights_bytes", "gradients_bytes", "optimizer_bytes",
            "activation_bytes_per_sample"} <= set(data["memory"])


def test_cli_show_config_options_and_human_output(capsys):
    code, out, _ = run(capsys, "workload", "show", "dlrm", "--config", "5.6", "--option",
                       "batch_per_gpu=32", "--json")
    data = json.loads(out)
    assert code == 0 and data["config"] == "shared" and data["batch_size"] == 32 * 64
    code, out, _ = run(capsys, "workload", "show", "mixtral-8x7b")
    assert code == 0 and "active per token" in out and "block31.mlp" in out


def test_cli_show_file(capsys, tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nbase: vgg16\nconfig: testbed\n")
    code, out, _ = run(capsys, "workload", "show", str(path), "--json")
    assert code == 0 and json.loads(out)["parameters"] == 138_357_544


@pytest.mark.parametrize("argv, needle", [
    (["workload", "show", "resnet51"], "one of resnet50"),
    (["workload", "show", "bert", "--config", "huge"], "config 'huge'"),
    (["workload", "show", "bert", "--option", "layers=0"], "layers"),
    (["workload", "show", "missing.yaml"], "cannot read"),
])
def test_cli_bad_input_exits_2_with_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err
