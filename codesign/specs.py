"""Strict loading of user specs (YAML files and dicts).

Unknown keys are errors, never silently dropped: a typo such as ``bandwith``
must not fall back to a default.  Every helper here raises
:class:`~codesign.errors.InvalidSpecError` with a one-line message naming the
field, the value and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real
from typing import Any, TypeVar

from codesign.errors import InvalidSpecError, invalid
from codesign.files import load_yaml_file as load_yaml  # noqa: F401 - the spec files' reader

__all__ = ["load_yaml", "check_keys", "get_int", "get_str", "get_bool",
           "check_int", "check_number", "check_choice"]

T = TypeVar("T")


def check_keys(spec: object, *, allowed: Iterable[str], required: Iterable[str] = (),
               where: str = "spec") -> Mapping[str, Any]:
    """Check that ``spec`` is a mapping whose keys are all known.

    Parameters
    ----------
    spec : object
        The loaded YAML value.
    allowed : iterable of str
        Every key that may appear.
    required : iterable of str, optional
        Keys that must appear.
    where : str, optional
        What the mapping is, for the message (``"topology file"``, ``"links[3]"``).

    Returns
    -------
    Mapping
        ``spec`` itself, for chaining.
    """
    if not isinstance(spec, Mapping):
        raise InvalidSpecError(f"invalid {where}: expected a mapping of keys to values, "
                               f"got {type(spec).__name__}")
    allowed = list(allowed)
    unknown = [k for k in spec if k not in allowed]
    if unknown:
        raise InvalidSpecError(f"unknown key {unknown[0]!r} in {where}: allowed keys are "
                               f"{', '.join(allowed)}")
    for key in required:
        if key not in spec:
            raise InvalidSpecError(f"missing key {key!r} in {where}: required keys are "
                                   f"{', '.join(required)}")
    return spec


def _get(spec: Mapping[str, Any], key: str, default: Any, where: str,
         convert: Callable[[Any], T], rule: str) -> T:
    if key not in spec:
        if default is _REQUIRED:
            raise InvalidSpecError(f"missing key {key!r} in {where}")
        return default
    value = spec[key]
    try:
        return convert(value)
    except InvalidSpecError:
        raise
    except (TypeError, ValueError):
        raise invalid(f"{where} key {key!r}", value, rule) from None


_REQUIRED = object()


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError
    return int(value)


def get_int(spec: Mapping[str, Any], key: str, default: Any = _REQUIRED, *, where: str = "spec",
            minimum: int | None = None) -> int:
    """Read an integer, optionally bounded below."""
    value = _get(spec, key, default, where, _to_int, "an integer")
    if minimum is not None and isinstance(value, int) and value < minimum:
        raise invalid(f"{where} key {key!r}", value, f"an integer >= {minimum}")
    return value


def get_str(spec: Mapping[str, Any], key: str, default: Any = _REQUIRED, *, where: str = "spec",
            choices: Iterable[str] | None = None) -> str:
    """Read a string, optionally one of ``choices``."""
    def conv(v: Any) -> str:
        if not isinstance(v, str):
            raise TypeError
        return v
    value = _get(spec, key, default, where, conv, "a string")
    if choices is not None and value is not default:
        choices = list(choices)
        if value not in choices:
            raise invalid(f"{where} key {key!r}", value, f"one of {', '.join(choices)}")
    return value


def get_bool(spec: Mapping[str, Any], key: str, default: Any = _REQUIRED, *,
             where: str = "spec") -> bool:
    """Read a boolean (YAML true/false only)."""
    def conv(v: Any) -> bool:
        if not isinstance(v, bool):
            raise TypeError
        return v
    return _get(spec, key, default, where, conv, "true or false")


# ------------------------------------------------------- argument validators
# The one home of the checks every library entry point makes on its numeric arguments
# (the one-line error names the field, the value and what is allowed).

def check_int(field: str, value: Any, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """``value`` as an ``int`` if it is an integer (Python or numpy, not a bool) in
    ``[minimum, maximum]`` (either bound optional).

    Raises
    ------
    InvalidSpecError
        ``invalid <field> <value>: expected an integer [>= minimum | in [min, max]]``.

    Examples
    --------
    >>> check_int("servers", 8, 1)
    8
    >>> check_int("servers", 0, 1)
    Traceback (most recent call last):
    ...
    codesign.errors.InvalidSpecError: invalid servers 0: expected an integer >= 1
    """
    if isinstance(value, bool) or not isinstance(value, Integral) \
            or (minimum is not None and value < minimum) \
            or (maximum is not None and value > maximum):
        if maximum is not None:
            rule = f"an integer in [{minimum}, {maximum}]" if minimum is not None \
                else f"an integer <= {maximum}"
        else:
            rule = f"an integer >= {minimum}" if minimum is not None else "an integer"
        raise invalid(field, value, rule)
    return int(value)


def check_choice(field: str, value: Any, choices: Iterable[Any], note: str = "") -> Any:
    """``value`` if it is one of ``choices`` (the keys of a mapping), else
    ``invalid <field> <value>: expected one of <choices>[ <note>]``.

    Examples
    --------
    >>> check_choice("sampler", "tpe", ("tpe", "random"))
    'tpe'
    >>> check_choice("sampler", "grid", ("tpe", "random"))
    Traceback (most recent call last):
    ...
    codesign.errors.InvalidSpecError: invalid sampler 'grid': expected one of tpe, random
    """
    try:
        ok = value in choices
    except TypeError:   # an unhashable value (a YAML list or mapping) is none of them
        ok = False
    if not ok:
        raise invalid(field, value, f"one of {', '.join(map(str, choices))}"
                      + (f" {note}" if note else ""))
    return value


def _finite(value: Real) -> bool:
    """``math.isfinite`` that says no to an int too large for a float (10**400 raised
    OverflowError)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_number(field: str, value: Any, *, minimum: float = 0.0, inclusive: bool = False,
                 maximum: float | None = None) -> float:
    """``value`` as a ``float`` if it is a finite real number (not a bool) ``> minimum``
    (``>= minimum`` with ``inclusive``) and, when given, ``<= maximum``.

    Raises
    ------
    InvalidSpecError
        ``invalid <field> <value>: expected a finite number > minimum`` (with a maximum:
        ``expected a number in (minimum, maximum]``).

    Examples
    --------
    >>> check_number("latency_s", 0, inclusive=True)
    0.0
    >>> check_number("efficiency", 1.5, maximum=1)
    Traceback (most recent call last):
    ...
    codesign.errors.InvalidSpecError: invalid efficiency 1.5: expected a number in (0, 1]
    """
    if isinstance(value, bool) or not isinstance(value, Real) or not _finite(value) \
            or value < minimum or (value == minimum and not inclusive) \
            or (maximum is not None and value > maximum):
        rule = (f"a number in {'[' if inclusive else '('}{minimum:g}, {maximum:g}]"
                if maximum is not None
                else f"a finite number {'>=' if inclusive else '>'} {minimum:g}")
        raise invalid(field, value, rule)
    return float(value)
