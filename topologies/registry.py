"""Registry of topology families and the spec-string front door.

A spec string is ``FAMILY[:SHAPE][,key=value...]`` (docs/architecture.md section 6), for
example ``torus:4x4x4,bw=50GB/s,lat=1us``, ``fattree:k=8`` or ``dgx1``.  Each
family registers one parser with :func:`register_family`; the parser receives
the shape text (``""`` when absent) and the options as strings, and builds the
topology.  :func:`load_topology` also accepts a path to a YAML file.

Unknown families and unknown keys raise
:class:`~codesign.errors.InvalidSpecError` listing what is valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from codesign.errors import invalid
from codesign.files import is_file
from topologies.model import Topology

__all__ = ["Family", "FAMILIES", "register_family", "parse_spec", "from_spec", "load_topology",
           "family_names"]

SpecBuilder = Callable[[str, Mapping[str, str]], Topology]


@dataclass(frozen=True)
class Family:
    """A registered topology family.

    Attributes
    ----------
    name : str
        Spec-string name (``"torus"``).
    build : callable
        ``build(shape, options) -> Topology`` from spec-string pieces.
    keys : tuple of str
        Option keys the family accepts.
    shape : str
        Human description of the shape syntax, for help and error messages.
    example : str
        A valid spec string, used by contract tests and help.
    summary : str
        One line describing the family.
    """

    name: str
    build: SpecBuilder
    keys: tuple[str, ...]
    shape: str
    example: str
    summary: str


FAMILIES: dict[str, Family] = {}


def register_family(name: str, *, keys: tuple[str, ...] = (), shape: str = "",
                    example: str, summary: str) -> Callable[[SpecBuilder], SpecBuilder]:
    """Decorator registering ``build(shape, options)`` as the family ``name``."""
    def deco(fn: SpecBuilder) -> SpecBuilder:
        if name in FAMILIES:
            raise ValueError(f"topology family {name!r} registered twice")
        FAMILIES[name] = Family(name, fn, tuple(keys), shape, example, summary)
        return fn
    return deco


def _ensure_loaded() -> None:
    # Importing the package registers every built-in family.
    import topologies.families  # noqa: F401


def family_names() -> list[str]:
    """Names of every registered family, sorted."""
    _ensure_loaded()
    return sorted(FAMILIES)


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """Split a spec string into ``(family, shape, options)``.

    Examples
    --------
    >>> parse_spec("mesh:7x10,bw=16GiB/s:73GiB/s,lat=1.5us")
    ('mesh', '7x10', {'bw': '16GiB/s:73GiB/s', 'lat': '1.5us'})
    >>> parse_spec("fattree:k=8")
    ('fattree', '', {'k': '8'})
    """
    if not isinstance(spec, str) or not spec.strip():
        raise invalid("topology spec", spec, "a string FAMILY:SHAPE[,key=value...] or a YAML path")
    text = spec.strip()
    family, _, rest = text.partition(":")
    if not family or "," in family or "=" in family:
        head = family.split(",")[0]
        if "=" in head or not head:
            raise invalid("topology spec", spec, "FAMILY:SHAPE[,key=value...], e.g. torus:4x4")
        family, rest = head, text[len(head):].lstrip(",:")
    parts = [p.strip() for p in rest.split(",")] if rest else []
    shape = ""
    options: dict[str, str] = {}
    for i, part in enumerate(parts):
        if not part:
            raise invalid("topology spec", spec, "no empty items between commas")
        if "=" not in part:
            if i != 0:
                raise invalid(f"topology spec item {part!r} in", spec,
                              "key=value after the shape")
            shape = part
            continue
        key, _, value = part.partition("=")
        key = key.strip()
        if key in options:
            raise invalid(f"topology spec key {key!r} in", spec, "each key at most once")
        options[key] = value.strip()
    return family.strip().lower(), shape, options


def from_spec(spec: str) -> Topology:
    """Build a topology from a spec string.

    Parameters
    ----------
    spec : str
        ``FAMILY[:SHAPE][,key=value...]``.

    Returns
    -------
    Topology
        Named after the spec string.

    Raises
    ------
    InvalidSpecError
        Unknown family or key, or a value breaking the family's rules.
    """
    _ensure_loaded()
    family, shape, options = parse_spec(spec)
    fam = FAMILIES.get(family)
    if fam is None:
        raise invalid("topology family", family, f"one of {', '.join(sorted(FAMILIES))}")
    failed = options.pop("fail", None)
    unknown = [k for k in options if k not in fam.keys]
    if unknown:
        allowed = ", ".join(fam.keys + ("fail",))
        raise invalid(f"{family} key", unknown[0], f"one of: {allowed}")
    topology = fam.build(shape, options)
    if failed is None:
        return topology
    # Any family: fail=7+9 removes those NPUs (an irregular network, TACOS Sec. VIII-E);
    # fail=link:0-16+switch:130+server:2+rack:0 names other components
    # (topologies.failures).
    if ":" in failed:
        from topologies.failures import degrade, parse_named_failures, partitioned

        left = degrade(topology, parse_named_failures(topology, failed), name=spec.strip())
        if partitioned(left):
            raise invalid("fail", failed, "failures that leave every NPU connected to every "
                                          "other (this set partitions the network)")
        return left
    try:
        ids = [int(v) for v in failed.split("+")]
    except ValueError:
        raise invalid("fail", failed, "NPU ids joined by '+' (fail=7+9), or kind:id items "
                                      "(fail=link:0-16+switch:130)") from None
    return topology.without_npus(ids, name=spec.strip())


def load_topology(spec: str | Path) -> Topology:
    """Build a topology from a spec string or a YAML file path.

    A string ending in ``.yaml``/``.yml`` or naming an existing file is read as
    YAML (explicit graph or ASTRA-sim analytical network file).
    """
    text = str(spec)
    if text.endswith((".yaml", ".yml")) or (is_file(text) and ":" not in text):
        from topologies.yaml_io import load_yaml_topology

        return load_yaml_topology(text)
    return from_spec(text)
