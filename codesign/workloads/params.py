"""Typed hyper-parameters of the model builders, checked before a builder runs.

Every builder declares its parameters as :class:`Param` objects; :func:`coerce` turns
a mapping from YAML or keyword arguments into checked values, or raises
:class:`~codesign.errors.InvalidSpecError` naming the field, the value and the rule.
Bounds keep a builder's run time and output small (no million-layer models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codesign.errors import InvalidSpecError, invalid

__all__ = ["Param", "coerce"]

_BIG = 10**13  # largest accepted integer hyper-parameter (embedding rows of 10^13 ...)


@dataclass(frozen=True)
class Param:
    """One hyper-parameter.

    Parameters
    ----------
    kind : str
        ``int``, ``float``, ``bool``, ``choice``, ``int_list`` or ``subset`` (a
        ``+``-joined string or a list of ``choices``, each at most once; returned as a
        tuple in the order of ``choices``).
    default : object
        Used when the value is not given; ``None`` with ``required`` unset means
        "optional, absent".
    minimum, maximum : float
        Bounds for ``int``, ``float`` and the items of ``int_list``.
    choices : tuple of str
        Allowed values of a ``choice``.
    max_len : int
        Longest ``int_list``.
    doc : str
        One line for error messages and ``--help``.
    """

    kind: str
    default: Any = None
    minimum: float = 0
    maximum: float = _BIG
    choices: tuple[str, ...] = ()
    max_len: int = 4096
    doc: str = ""

    def rule(self) -> str:
        if self.kind == "int":
            return f"an integer in {int(self.minimum)}..{int(self.maximum)}"
        if self.kind == "float":
            return f"a number in [{self.minimum}, {self.maximum}]"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        if self.kind == "subset":
            return f"'+'-joined names from {', '.join(self.choices)}, each at most once"
        return (f"a list of 1..{self.max_len} integers in "
                f"{int(self.minimum)}..{int(self.maximum)}")

    def check(self, field: str, value: Any) -> Any:
        """Return ``value`` converted, or raise :class:`InvalidSpecError`."""
        if self.kind == "int":
            return self._int(field, value, value)
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not self.minimum <= value <= self.maximum:
                raise invalid(field, value, self.rule())
            return float(value)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise invalid(field, value, self.rule())
            return value
        if self.kind == "choice":
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)  # numeric choices such as a ResNet depth
            if not isinstance(value, str) or value not in self.choices:
                raise invalid(field, value, self.rule())
            return value
        if self.kind == "subset":
            items = value.split("+") if isinstance(value, str) else value
            if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence) \
                    or not items or any(item not in self.choices for item in items) \
                    or len(set(items)) != len(items):
                raise invalid(field, value, self.rule())
            return tuple(c for c in self.choices if c in items)
        if self.kind == "int_list":
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) \
                    or not 1 <= len(value) <= self.max_len:
                raise invalid(field, value, self.rule())
            return tuple(self._int(field, item, value) for item in value)
        raise AssertionError(f"unknown parameter kind {self.kind}")  # programming error

    def _int(self, field: str, item: Any, shown: Any) -> int:
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) \
                or not self.minimum <= item <= self.maximum:
            raise invalid(field, shown, self.rule())
        return item


def coerce(spec: Mapping[str, Param], values: Mapping[str, Any], *, where: str
           ) -> dict[str, Any]:
    """Check ``values`` against ``spec`` and fill in defaults.

    Raises
    ------
    InvalidSpecError
        Unknown key (the message lists the allowed ones), bad value, or a missing
        parameter that has no default.
    """
    if not isinstance(values, Mapping):
        raise InvalidSpecError(f"invalid {where}: expected a mapping of parameters, "
                               f"got {type(values).__name__}")
    unknown = [k for k in values if k not in spec]
    if unknown:
        raise InvalidSpecError(f"unknown parameter {unknown[0]!r} in {where}: allowed "
                               f"parameters are {', '.join(spec)}")
    return {key: param.check(f"{where} {key}", values[key])
            if values.get(key) is not None else param.default for key, param in spec.items()}
