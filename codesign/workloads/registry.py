"""The model zoo and user model files: :func:`get_workload`, :func:`load_workload`.

The zoo is data (``codesign/workloads/data/models.yaml``: hyper-parameters and batch
sizes from the papers, one entry per name with named configurations) plus builders
(:data:`BUILDERS`) that turn hyper-parameters into layers.

User model files (YAML, strict keys) come in three forms::

    name: my-llm                   # a builder with its hyper-parameters (required)
    builder: transformer
    params: {layers: 40, hidden: 5120, heads: 40, vocab: 32000, seq_len: 4096}
    batch_size: 512

    name: llama3-8b-long            # a zoo model with overrides
    base: llama3-8b
    config: published               # optional
    params: {seq_len: 32768}
    batch_size: 256

    name: tiny                      # explicit layers (per-sample numbers)
    batch_size: 32
    dtype_bytes: 2
    layers:
      - {name: fc1, kind: dense, params: 1048576, fwd_flops: 2097152, activation_bytes: 2KiB}

Optional keys in every form: ``description``, ``source``, ``batch_size``,
``batch_per_gpu``, ``reference_gpus``, ``optimizer_bytes_per_param``, ``precision``
(``fp32|tf32|bf16|fp16|fp8|fp8-cs|mxfp8``, the number format of the matrix math),
``lora_rank`` and ``lora_modules`` (LoRA fine-tuning, :mod:`codesign.workloads.lora`);
the layers form also takes ``dtype_bytes`` and ``seq_len``.  In a layer, ``bwd_flops`` defaults to
``fwd_flops`` for embeddings and to 2 x ``fwd_flops`` otherwise; byte fields accept
size strings (``2KiB``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_choice, check_keys, get_str, load_yaml
from codesign.workloads.lora import DEFAULT_LORA_MODULES, LORA_MODULES, apply_lora
from codesign.workloads.model import MAX_BATCH_SIZE, PRECISIONS, Layer, Workload
from codesign.workloads.params import Param, coerce
from codesign.workloads.recommendation import (
    CANDLE_PARAMS, DLRM_PARAMS, NCF_PARAMS, build_candle, build_dlrm, build_ncf)
from codesign.workloads.rnn import GNMT_PARAMS, build_gnmt
from codesign.workloads.transformer import TRANSFORMER_PARAMS, build_transformer
from codesign.workloads.vision import RESNET_PARAMS, VGG_PARAMS, build_resnet, build_vgg

__all__ = ["Builder", "BUILDERS", "get_workload", "workload_names", "workload_configs",
           "load_workload", "workload_from_dict", "build_workload", "SETTINGS",
           "is_model_file"]


@dataclass(frozen=True)
class Builder:
    """A model builder: typed hyper-parameters and the function that makes the layers."""

    name: str
    params: Mapping[str, Param]
    build: Callable[..., list[Layer]]
    summary: str


BUILDERS: dict[str, Builder] = {
    b.name: b for b in (
        Builder("resnet", RESNET_PARAMS, build_resnet, "ResNet (He et al. 2016)"),
        Builder("vgg", VGG_PARAMS, build_vgg, "VGG (Simonyan & Zisserman 2015)"),
        Builder("dlrm", DLRM_PARAMS, build_dlrm, "DLRM (Naumov et al. 2019)"),
        Builder("ncf", NCF_PARAMS, build_ncf, "NeuMF (He et al. 2017)"),
        Builder("candle", CANDLE_PARAMS, build_candle, "CANDLE Uno"),
        Builder("transformer", TRANSFORMER_PARAMS, build_transformer,
                "dense or MoE transformer (GPT, Llama, Mixtral, BERT)"),
        Builder("gnmt", GNMT_PARAMS, build_gnmt, "GNMT (Wu et al. 2016)"),
    )
}

#: Workload settings (not builder hyper-parameters) accepted in configs and overrides.
SETTINGS = {
    "batch_size": Param("int", None, minimum=1, maximum=MAX_BATCH_SIZE,
                        doc="global batch (samples)"),
    "batch_per_gpu": Param("int", None, minimum=1, maximum=10**9),
    "reference_gpus": Param("int", None, minimum=1, maximum=10**8),
    "optimizer_bytes_per_param": Param("float", None, minimum=0, maximum=1024),
    "precision": Param("choice", None, choices=PRECISIONS,
                       doc="number format of the matrix math the model trains with"),
    "lora_rank": Param("int", 0, minimum=0, maximum=65536,
                       doc="LoRA fine-tuning: the adapters' rank (0 = train all weights)"),
    "lora_modules": Param("subset", DEFAULT_LORA_MODULES, choices=LORA_MODULES,
                          doc="linear modules with LoRA adapters"),
}

_ENTRY_KEYS = ("builder", "description", "source", "params", "settings", "default_config",
               "configs")


# ---------------------------------------------------------------------------- zoo
@lru_cache(maxsize=1)
def _zoo() -> tuple[dict[str, Any], dict[str, str]]:
    from importlib.resources import as_file, files

    with as_file(files("codesign.workloads") / "data" / "models.yaml") as path:
        data = load_yaml(path)
    check_keys(data, allowed=("config_aliases", "models"), required=("models",),
               where="models.yaml")
    for name, entry in data["models"].items():
        where = f"models.yaml entry {name!r}"
        check_keys(entry, allowed=_ENTRY_KEYS, required=("builder", "configs",
                                                         "default_config"), where=where)
        check_choice(f"{where} builder", entry["builder"], BUILDERS)
        if entry["default_config"] not in entry["configs"]:
            raise invalid(f"{where} default_config", entry["default_config"],
                          f"one of {', '.join(entry['configs'])}")
    return data["models"], dict(data.get("config_aliases") or {})


def workload_names() -> list[str]:
    """Names of the zoo models, in the order of ``models.yaml``."""
    return list(_zoo()[0])


def workload_configs(name: str) -> list[str]:
    """Configuration names of zoo model ``name`` (the default first)."""
    entry = _entry(name)
    default = entry["default_config"]
    return [default] + [c for c in entry["configs"] if c != default]


def _entry(name: str) -> Mapping[str, Any]:
    models, _ = _zoo()
    check_choice("workload", name, models, "(or a model YAML file)")
    return models[name]


def _split(values: Mapping[str, Any], builder: Builder, where: str
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a mapping into builder hyper-parameters and workload settings."""
    params, settings = {}, {}
    for key, value in values.items():
        if key in SETTINGS:
            settings[key] = value
        elif key in builder.params:
            params[key] = value
        else:
            # A configuration is not a parameter: say where it goes (--config in the CLI).
            hint = " (a zoo configuration is chosen by --config)" if key == "config" else ""
            raise InvalidSpecError(
                f"unknown parameter {key!r} in {where}{hint}: allowed parameters are "
                f"{', '.join([*builder.params, *SETTINGS])}")
    return params, settings


def get_workload(name: str, config: str | None = None, /, **overrides: Any) -> Workload:
    """A zoo model.

    Parameters
    ----------
    name : str
        One of :func:`workload_names` (``"resnet50"``, ``"gpt3-175b"`` ...).
    config : str, optional
        One of :func:`workload_configs` (TopoOpt's sections also work as aliases:
        ``"5.3"``, ``"5.4"``, ``"5.6"``, ``"6"``); default: the entry's default.
    **overrides
        Builder hyper-parameters (``seq_len=4096``, ``tables=32``) and settings
        (``batch_size``, ``batch_per_gpu``, ``reference_gpus``,
        ``optimizer_bytes_per_param``, ``precision``, ``lora_rank``, ``lora_modules``).
        ``batch_per_gpu`` alone rescales the global
        batch by the config's ``reference_gpus``.

    Returns
    -------
    Workload

    Raises
    ------
    InvalidSpecError
        Unknown name, config or override (the message lists the valid ones), or a bad
        value.

    Examples
    --------
    >>> get_workload("dlrm", "testbed").batch_size
    6144
    """
    entry = _entry(name)
    _, aliases = _zoo()
    builder = BUILDERS[entry["builder"]]
    config = entry["default_config"] if config is None else aliases.get(config, config)
    if config not in entry["configs"]:
        raise invalid(f"{name} config", config, f"one of {', '.join(entry['configs'])}")
    where = f"workload {name!r}"
    base_params = dict(entry.get("params") or {})
    base_settings = dict(entry.get("settings") or {})
    cfg_params, cfg_settings = _split(entry["configs"][config] or {}, builder,
                                      f"{where} config {config!r}")
    over_params, over_settings = _split(overrides, builder, where)
    settings = {**base_settings, **cfg_settings}
    if "batch_per_gpu" in over_settings and "batch_size" not in over_settings:
        settings.pop("batch_size", None)  # recompute from the new per-GPU batch
    settings.update(over_settings)
    return build_workload(
        name, builder.name, {**base_params, **cfg_params, **over_params}, settings,
        config=config, description=str(entry.get("description", "")),
        source=str(entry.get("source", "")))


def build_workload(name: str, builder: str, params: Mapping[str, Any],
                   settings: Mapping[str, Any], *, config: str = "", description: str = "",
                   source: str = "") -> Workload:
    """Run builder ``builder`` on checked ``params`` and wrap the layers in a Workload.

    ``settings`` holds ``batch_size`` or ``batch_per_gpu`` x ``reference_gpus``, and
    ``optimizer_bytes_per_param`` (default 12, Adam in mixed precision).
    """
    check_choice("builder", builder, BUILDERS)
    spec = BUILDERS[builder]
    where = f"workload {name!r}"
    values = coerce(spec.params, params, where=f"{where} params")
    return _workload(name, spec.build(**values), settings, where, values.get("dtype_bytes", 2),
                     values.get("seq_len"), config=config, builder=builder,
                     description=description, source=source,
                     hyperparameters={k: (list(v) if isinstance(v, tuple) else v)
                                      for k, v in values.items()})


def _workload(name: str, layers: list[Layer], settings: Mapping[str, Any], where: str,
              dtype_bytes: int, seq_len: int | None, **fields: Any) -> Workload:
    """The Workload of ``layers`` with the checked ``settings`` (every form of model)."""
    checked = coerce(SETTINGS, settings, where=f"{where} settings")
    if checked["batch_size"] is not None:
        batch = checked["batch_size"]
    elif checked["batch_per_gpu"] is not None and checked["reference_gpus"] is not None:
        batch = checked["batch_per_gpu"] * checked["reference_gpus"]
    else:
        raise invalid(f"{where} batch_size", None,
                      "batch_size, or batch_per_gpu together with reference_gpus")
    opt = checked["optimizer_bytes_per_param"]
    rank, modules = checked["lora_rank"], checked["lora_modules"]
    if rank:
        layers = apply_lora(layers, rank, modules, where=where)
    elif "lora_modules" in settings and settings["lora_modules"] is not None:
        raise invalid(f"{where} lora_modules", settings["lora_modules"],
                      "only with lora_rank >= 1")
    return Workload(name=name, layers=tuple(layers), batch_size=batch, dtype_bytes=dtype_bytes,
                    optimizer_bytes_per_param=12.0 if opt is None else opt, seq_len=seq_len,
                    batch_per_gpu=checked["batch_per_gpu"],
                    reference_gpus=checked["reference_gpus"], precision=checked["precision"],
                    lora_rank=rank, lora_modules=modules if rank else (), **fields)


# ------------------------------------------------------------------ user model files
_FILE_KEYS = ("name", "description", "source", "builder", "base", "config", "params",
              "layers", "dtype_bytes", "seq_len", *SETTINGS)
_LAYER_KEYS = tuple(f for f in Layer.__dataclass_fields__)
_BYTE_FIELDS = {"activation_bytes", "io_bytes", "saved_bytes", "tp_allreduce_bytes",
                "tp_bwd_allreduce_bytes", "ep_alltoall_bytes", "attn_core_saved_bytes",
                "sp_saved_bytes", "checkpoint_bytes", "kv_bytes", "norm_saved_bytes",
                "act_saved_bytes", "up_proj_saved_bytes", "gemm_in_saved_bytes",
                "gemm_in_sp_bytes"}


def is_model_file(name: str | Path) -> bool:
    """Whether a workload argument names a user model file rather than a zoo entry: it
    ends in ``.yaml`` / ``.yml`` or names an existing file (the rule of every command
    and of sweep and what-if mixes).  A name no file system could hold (too long, a NUL
    byte) is not a file: the zoo lookup then refuses it with one line.

    Raises
    ------
    InvalidSpecError
        ``name`` is neither a string nor a path (None, a number: ``invalid workload``).
    """
    from codesign.files import is_file

    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str):
        raise invalid("workload", name, "a zoo model name or the path of a model file")
    return name.endswith((".yaml", ".yml")) or is_file(name)


def load_workload(path: str | Path) -> Workload:
    """Load a user model file (see the module docstring for its three forms).

    Raises
    ------
    InvalidSpecError
        Missing file, bad YAML, unknown or missing keys, bad values.
    """
    return workload_from_dict(load_yaml(path), source=str(path))


def workload_from_dict(spec: Any, *, source: str = "") -> Workload:
    """Build a :class:`Workload` from the structure of a user model file."""
    where = f"model file {source}".strip()
    check_keys(spec, allowed=_FILE_KEYS, required=("name",), where=where)
    name = spec["name"]
    if not isinstance(name, str) or not name:
        raise invalid(f"{where} name", name, "a non-empty string")
    forms = [k for k in ("builder", "base", "layers") if k in spec]
    if len(forms) != 1:
        raise invalid(f"{where} form", forms or None,
                      "exactly one of builder (with params), base (a zoo model) or layers")
    text = {k: get_str(spec, k, "", where=where) for k in ("description", "source")}
    settings = {k: spec[k] for k in SETTINGS if k in spec}
    form = forms[0]
    if form != "layers":
        for key in ("dtype_bytes", "seq_len"):
            if key in spec:
                raise invalid(f"{where} {key}", spec[key],
                              f"to be given under params with {form}")
    params = spec.get("params") or {}
    if not isinstance(params, Mapping):
        raise invalid(f"{where} params", params, "a mapping of hyper-parameters")
    if form == "builder":
        if "config" in spec:
            raise invalid(f"{where} config", spec["config"], "only with base")
        check_choice(f"{where} builder", spec["builder"], BUILDERS)
        if not params:   # the builder's defaults are a toy (transformer: GPT-2 small)
            names = ", ".join(list(BUILDERS[spec["builder"]].params)[:4])
            raise invalid(f"{where} params", spec.get("params"),
                          f"the {spec['builder']} builder's hyper-parameters ({names}, ...); "
                          f"without them it would build its defaults, not your model")
        return build_workload(name, spec["builder"], params, settings,
                              description=text["description"], source=text["source"] or source)
    if form == "base":
        if not isinstance(spec["base"], str):
            raise invalid(f"{where} base", spec["base"], f"one of {', '.join(workload_names())}")
        config = spec.get("config")
        if config is not None and not isinstance(config, str):
            raise invalid(f"{where} config", config, "a configuration name")
        base = get_workload(spec["base"], config, **{**params, **settings})
        return replace(base, name=name, description=text["description"] or base.description,
                       source=text["source"] or base.source)
    if "params" in spec or "config" in spec:
        raise invalid(f"{where} params", params, "builder or base (not layers)")
    return _from_layers(spec, name, settings, text, where)


def _from_layers(spec: Mapping[str, Any], name: str, settings: Mapping[str, Any],
                 text: Mapping[str, str], where: str) -> Workload:
    from codesign.units import parse_size

    dtype = coerce({"dtype_bytes": Param("int", 2, minimum=1, maximum=8),
                    "seq_len": Param("int", None, minimum=1, maximum=10**9)},
                   {k: spec[k] for k in ("dtype_bytes", "seq_len") if k in spec}, where=where)
    rows = spec["layers"]
    if not isinstance(rows, list) or not rows:
        raise invalid(f"{where} layers", rows, "a non-empty list of layer mappings")
    if len(rows) > 100_000:
        raise invalid(f"{where} layers", f"{len(rows)} layers", "at most 100000 layers")
    layers = []
    for i, row in enumerate(rows):
        lw = f"{where} layers[{i}]"
        check_keys(row, allowed=_LAYER_KEYS, required=("name", "kind", "params", "fwd_flops"),
                   where=lw)
        values = dict(row)
        for key in _BYTE_FIELDS & values.keys():
            if isinstance(values[key], str):
                values[key] = parse_size(values[key], field=f"{lw} {key}", allow_zero=True)
        for key in ("fwd_flops", "bwd_flops"):
            if isinstance(values.get(key), str):
                values[key] = _number(values[key], f"{lw} {key}")
        values.setdefault("dtype_bytes", dtype["dtype_bytes"])
        values.setdefault("activation_bytes", 0.0)
        if "bwd_flops" not in values:
            fwd = values["fwd_flops"]
            factor = 1.0 if values.get("kind") == "embedding" else 2.0
            values["bwd_flops"] = fwd * factor if _is_number(fwd) else fwd
        layers.append(Layer(**values))
    return _workload(name, layers, settings, where, dtype["dtype_bytes"], dtype["seq_len"],
                     builder="layers", description=text["description"], source=text["source"])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(text: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise invalid(field, text, "a number such as 2.5e9") from None
    if not math.isfinite(value) or value < 0:
        raise invalid(field, text, "a finite number >= 0")
    return value
