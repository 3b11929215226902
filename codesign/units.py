"""Parsing and formatting of physical quantities at the edges (docs/architecture.md section 4).

Inside the framework every quantity is a float in SI base units: bytes,
seconds, bytes per second, US dollars.  Strings are parsed only here.

Rules
-----
* Sizes: ``1GiB`` (2^30 bytes), ``100MB`` (10^6 bytes), ``512`` or ``512B``
  (bytes), ``8Gb``/``8Gbit`` (bits, 10^9, divided by 8).
* Bandwidths: ``100Gbps`` / ``100Gb/s`` (bits per second, 10^9),
  ``50GB/s`` / ``50GBps`` (10^9 bytes per second), ``50GiB/s`` (2^30 bytes per
  second).  A bare number is bytes per second.
* Times: ``700ns``, ``0.5us`` (also ``µs``), ``2ms``, ``1s``, ``1min``, ``1h``.
  A bare number is seconds.
* Money: ``$1200``, ``1200``, ``1.2k``, ``3M``, ``1.5B``, ``2_000_000`` (US dollars;
  ``k``/``M``/``B`` in either case, ``_`` and ``,`` separators ignored).
* Counts (tokens, samples): ``15T``, ``1.2M``, ``175B`` (decimal: k, M, B or G, T, P).

Numbers may use exponents (``1e3MB``).  Negative or non-finite values are
rejected; zero is accepted only where the caller allows it.  Where a user writes the
value (topology specs and files, hardware catalogs, sweep link rates) a number without a
unit must also be plausible in base units (``bare=``, :data:`BARE_BANDWIDTH_BPS` ...):
``bw=100`` is 100 bytes/s, a forgotten ``Gbps``, and is refused saying so.
"""

from __future__ import annotations

import math
import re
from numbers import Real

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_number

__all__ = [
    "parse_size",
    "parse_bandwidth",
    "parse_time",
    "parse_money",
    "parse_count",
    "format_size",
    "format_bandwidth",
    "format_time",
    "spec_rate",
    "BARE_BANDWIDTH_BPS",
    "BARE_LATENCY_S",
    "BARE_MEMORY_BYTES",
]

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

_SIZE_RE = re.compile(rf"^\s*{_NUMBER}\s*(?:([kKMGTP]i?)?(B|b|bit|bits|byte|bytes)?)\s*$")
_BW_RE = re.compile(
    rf"^\s*{_NUMBER}\s*(?:([kKMGTP]i?)?(B/s|Bps|b/s|bps|bit/s))?\s*$"
)
_TIME_RE = re.compile(rf"^\s*{_NUMBER}\s*(ns|us|µs|ms|s|sec|min|h)?\s*$")
_MONEY_RE = re.compile(rf"^\s*\$?\s*{_NUMBER}\s*([kKmMbB])?\s*(?:USD|usd)?\s*$")
_MONEY_SCALE = {None: 1.0, "k": 1e3, "m": 1e6, "b": 1e9}
_TIME_SCALE = {None: 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6,
               "ns": 1e-9, "min": 60.0, "h": 3600.0}


def _prefix(p: str | None, field: str, text: str) -> float:
    if not p:
        return 1.0
    if p in _BINARY:
        return _BINARY[p]
    if p in _DECIMAL:
        return _DECIMAL[p]
    raise invalid(field, text, "a known prefix (k, M, G, T, P, Ki, Mi, Gi, Ti, Pi)")


#: Sanity bounds (issue 18): a value outside them is a typo or an attack, and would
#: turn into inf/NaN downstream.  1 EiB is ~10^6 times the memory of the largest
#: training clusters; 10^18 B/s is 8 Ebps; 10^-6 B/s keeps 1 EiB / bandwidth finite.
MAX_SIZE_BYTES = 2.0 ** 60
MIN_BANDWIDTH_BPS = 1e-6
MAX_BANDWIDTH_BPS = 1e18
MAX_TIME_S = 1e9
MAX_MONEY_USD = 1e15
#: Largest count :func:`parse_count` reads (10^24): every suffix with a mantissa up to
#: 10^6 (``1000000P``) fits, and it is 10^8 times the largest training goal of
#: search.time_to_train (10^16 tokens); 1e300 tokens is a typo, not a run.
MAX_COUNT = 1e24


#: Plausible ranges of a *bare* number (no unit) where a forgotten unit is the likely
#: mistake: ``bandwidth: 100`` meaning Gbps (100 B/s, the slowest real link is ~10^8),
#: ``latency: 1`` meaning us (a one-second link), ``memory: 80`` meaning GiB (80 bytes).
#: Passed as ``bare=`` by the parsers of user-written fields (topology specs and files,
#: hardware catalogs, sweep link rates); numbers computed in code are not checked.
BARE_BANDWIDTH_BPS = (1e6, math.inf)
BARE_LATENCY_S = (0.0, 1e-2)
BARE_MEMORY_BYTES = (2.0 ** 30, math.inf)


def _is_bare(value: object) -> bool:
    """A number, or a string that is only a number (no unit)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and re.fullmatch(rf"\s*{_NUMBER}\s*", value) is not None


def _check_bare(number: float, value: object, field: str, bare, quantity: str,
                base: str, example: str) -> float:
    if bare is not None and _is_bare(value) and not bare[0] <= number <= bare[1]:
        raise invalid(field, value, f"a {quantity} with its unit, such as {example} (a bare "
                      f"number is {base}, and {number:g} {base} is not a plausible {quantity})")
    return number


def _check(value: float, field: str, text: object, allow_zero: bool,
           upper: float | None = None, lower: float = 0.0, unit: str = "") -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        rule = "a finite value >= 0" if allow_zero else "a finite value > 0"
        raise invalid(field, text, rule)
    if (upper is not None and value > upper) or (0 < value < lower):
        raise invalid(field, text, f"a value between {lower:g} and {upper:g} {unit}".rstrip()
                      + " (a larger or smaller value is almost certainly a typo)")
    return value


def _numeric(value: object, field: str, allow_zero: bool, **bounds) -> float | None:
    # Numbers (not bools) pass straight through as base units.
    if isinstance(value, bool):
        raise invalid(field, value, "a number or a string with a unit")
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            number = math.inf
        return _check(number, field, value, allow_zero, **bounds)
    if not isinstance(value, str):
        raise invalid(field, value, "a number or a string with a unit")
    return None


def _parse(value: object, field: str, allow_zero: bool, pattern: re.Pattern, rule: str,
           to_base, *, clean: bool = False, **bounds) -> float:
    """The one shape of the parsers: a number is already in base units; a string must
    match ``pattern`` (``clean``: after dropping ``_`` and ``,``; else ``rule`` says what
    is allowed) and ``to_base(*groups)`` converts it; both are checked against ``bounds``."""
    num = _numeric(value, field, allow_zero, **bounds)
    if num is not None:
        return num
    m = pattern.match(value.replace("_", "").replace(",", "") if clean else value)
    if not m:
        raise invalid(field, value, rule)
    return _check(to_base(*m.groups()), field, value, allow_zero, **bounds)


def parse_size(value: str | float, *, field: str = "size", allow_zero: bool = False,
               bare: tuple[float, float] | None = None) -> float:
    """Parse a data size into bytes.

    Parameters
    ----------
    value : str or float
        ``"1GiB"``, ``"100MB"``, ``"8Gb"`` (bits) or a number of bytes.
    field : str, optional
        Field name used in the error message.
    allow_zero : bool, optional
        Accept zero.
    bare : (float, float), optional
        Range a number without a unit must lie in (e.g. :data:`BARE_MEMORY_BYTES`);
        outside it the unit was most likely forgotten and the value is refused.

    Returns
    -------
    float
        Bytes.

    Examples
    --------
    >>> parse_size("1GiB")
    1073741824.0
    >>> parse_size("100MB")
    100000000.0
    """
    def to_bytes(number: str, prefix: str | None, unit: str | None) -> float:
        bits = unit in ("b", "bit", "bits")
        return float(number) * (_prefix(prefix, field, value) / (8.0 if bits else 1.0))

    return _check_bare(
        _parse(value, field, allow_zero, _SIZE_RE, "a size such as 1GiB, 100MB, 4096 or "
               "8Gb (bits)", to_bytes, upper=MAX_SIZE_BYTES, unit="bytes"),
        value, field, bare, "size", "bytes", "80GiB")


def parse_bandwidth(value: str | float, *, field: str = "bandwidth",
                    allow_zero: bool = False, bare: tuple[float, float] | None = None
                    ) -> float:
    """Parse a bandwidth into bytes per second.

    ``Gbps``/``Gb/s`` are bits (10^9 bits/s); ``GB/s``/``GBps`` are 10^9 bytes/s;
    ``GiB/s`` are 2^30 bytes/s.  A bare number is bytes per second; with ``bare`` (e.g.
    :data:`BARE_BANDWIDTH_BPS`) it must lie in that range.

    Examples
    --------
    >>> parse_bandwidth("100Gbps")
    12500000000.0
    >>> parse_bandwidth("50GiB/s") == 50 * 2**30
    True
    """
    def to_bytes_per_s(number: str, prefix: str | None, unit: str | None) -> float:
        if prefix and not unit:
            raise invalid(field, value, "a unit after the prefix: Gbps, GB/s or GiB/s")
        bits = unit in ("b/s", "bps", "bit/s")
        return float(number) * (_prefix(prefix, field, value) / (8.0 if bits else 1.0))

    return _check_bare(
        _parse(value, field, allow_zero, _BW_RE, "a bandwidth such as 100Gbps (bits), "
               "50GB/s (10^9 bytes) or 50GiB/s", to_bytes_per_s, upper=MAX_BANDWIDTH_BPS,
               lower=MIN_BANDWIDTH_BPS, unit="bytes/s"),
        value, field, bare, "bandwidth", "bytes/s", "100Gbps or 50GB/s")


def parse_time(value: str | float, *, field: str = "time", allow_zero: bool = True,
               bare: tuple[float, float] | None = None) -> float:
    """Parse a duration into seconds (``700ns``, ``0.5us``, ``2ms``, ``1s``); with
    ``bare`` (e.g. :data:`BARE_LATENCY_S`) a number without a unit must lie in that range.

    Examples
    --------
    >>> parse_time("0.5us")
    5e-07
    """
    def to_seconds(number: str, unit: str | None) -> float:
        scale = _TIME_SCALE[unit]
        # Divide by the inverse for sub-second units: 5 / 1e6 is exactly 5e-06, 5 * 1e-6 is
        # not.
        return float(number) / round(1.0 / scale) if scale < 1.0 else float(number) * scale

    return _check_bare(
        _parse(value, field, allow_zero, _TIME_RE, "a time such as 700ns, 0.5us, 2ms or 1s",
               to_seconds, upper=MAX_TIME_S, unit="s"),
        value, field, bare, "latency", "seconds", "500ns or 1us")


def parse_money(value: str | float, *, field: str = "cost", allow_zero: bool = True) -> float:
    """Parse an amount of US dollars (``$1200``, ``1.2k``, ``3M``, ``1.5B``): the one money
    parser of catalogs, sweep budgets and the CLI.

    Examples
    --------
    >>> parse_money("10M"), parse_money("$500k"), parse_money(2e6), parse_money("2_000")
    (10000000.0, 500000.0, 2000000.0, 2000.0)
    """
    return _parse(value, field, allow_zero, _MONEY_RE, "an amount in US dollars such as 1200, "
                  "$1.2k or 3M", lambda n, p: float(n) * _MONEY_SCALE[p and p.lower()],
                  clean=True, upper=MAX_MONEY_USD, unit="USD")


_COUNT_RE = re.compile(rf"^\s*{_NUMBER}\s*([kKMBGTP])?\s*$")
#: Decimal count suffixes (``B`` = billion, as in model sizes; ``G`` the same).
_COUNT_SCALE = {None: 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12,
                "P": 1e15}


def parse_count(value: str | float, *, field: str = "count", allow_zero: bool = False
                ) -> float:
    """Parse a count of things (tokens, samples): a number, or one with a decimal suffix
    (``15T`` tokens, ``1.2M`` samples, ``175B``; ``_`` and ``,`` separators ignored).

    At most :data:`MAX_COUNT`.  Fractions are accepted: the training goals read with it
    include epochs (``--epochs 0.5``), and a fractional token or sample goal is rounded
    up to whole iterations by its user.

    Examples
    --------
    >>> parse_count("15T"), parse_count("1.2M"), parse_count("2_000"), parse_count(90)
    (15000000000000.0, 1200000.0, 2000.0, 90.0)
    """
    return _parse(value, field, allow_zero, _COUNT_RE, "a number > 0, e.g. 15e12 or 15T",
                  lambda n, p: float(n) * _COUNT_SCALE[p], clean=True, upper=MAX_COUNT)


def _format(value: float, unit: str, binary: bool) -> str:
    if binary:
        steps = [("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10)]
    else:
        steps = [("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)]
    for name, scale in steps:
        if abs(value) >= scale:
            return f"{value / scale:.4g}{name}{unit}"
    return f"{value:.4g}{unit}"


def _amount(value: object, field: str, *, unbounded: bool = False) -> float:
    """``value`` as a float if it is a real number >= 0 (not a bool), finite unless
    ``unbounded`` (then inf too), else the one-line InvalidSpecError.  The formatters
    printed 'nanB', '-1B' and 'infPiB' and raised TypeError or OverflowError."""
    if unbounded and isinstance(value, Real) and not isinstance(value, bool) \
            and value == math.inf:
        return math.inf
    try:
        # + 0.0 turns IEEE negative zero into zero: -0.0 passes ">= 0" but printed '-0B'
        return check_number(field, value, inclusive=True) + 0.0
    except InvalidSpecError:
        if not unbounded:
            raise
        raise invalid(field, value, "a number >= 0 or inf (unbounded)") from None


def format_size(nbytes: float, *, binary: bool = True) -> str:
    """Format bytes for people: ``format_size(2**30) == '1GiB'``.

    Raises
    ------
    InvalidSpecError
        ``nbytes`` not a finite number >= 0.
    """
    return _format(_amount(nbytes, "size"), "B", binary)


def format_bandwidth(bps: float, *, bits: bool = False) -> str:
    """Format bytes/s as ``'50GB/s'`` or, with ``bits=True``, as ``'400Gbps'``.

    Raises
    ------
    InvalidSpecError
        ``bps`` not a finite number >= 0.
    """
    bps = _amount(bps, "bandwidth")
    if bits:
        return _format(bps * 8.0, "bps", False)
    return _format(bps, "B/s", False)


def spec_rate(bps: float, unit: str = "Gbps") -> str:
    """A bandwidth (bytes/s) as a spec-string value: ``100Gbps`` (``unit="Gbps"``) or
    ``900GB/s`` (``unit="GB/s"``) when exact in that unit, else bytes/s as a plain number.

    Raises
    ------
    InvalidSpecError
        ``bps`` outside what :func:`parse_bandwidth` reads back (a number in
        [:data:`MIN_BANDWIDTH_BPS`, :data:`MAX_BANDWIDTH_BPS`]: 'infGbps' or '0.0' is
        no spec), or an unknown ``unit``.

    >>> spec_rate(12.5e9), spec_rate(900e9, "GB/s"), spec_rate(1e9 + 1)
    ('100Gbps', '900GB/s', '1000000001.0')
    """
    try:
        x = _amount(bps, "spec bandwidth")
    except InvalidSpecError:
        x = math.nan   # one message for every bad value: the range a spec can hold
    if not MIN_BANDWIDTH_BPS <= x <= MAX_BANDWIDTH_BPS:
        raise invalid("spec bandwidth", bps, f"a number of bytes/s in [{MIN_BANDWIDTH_BPS:g}, "
                      f"{MAX_BANDWIDTH_BPS:g}] (what a spec string can hold)")
    if unit == "Gbps":
        g = bps * 8 / 1e9
        exact = g > 0 and float(f"{g:g}") * 1e9 / 8 == bps
    elif unit == "GB/s":
        g = float(bps) / 1e9
        exact = g > 0 and float(f"{g:g}") * 1e9 == float(bps)
    else:
        raise invalid("spec_rate unit", unit, "Gbps or GB/s")
    return f"{g:g}{unit}" if exact else repr(float(bps))


def format_time(seconds: float) -> str:
    """Format seconds as ``'1.5ms'``, ``'700ns'``...; an unbounded time (inf) as ``'infs'``.

    Raises
    ------
    InvalidSpecError
        ``seconds`` not a number >= 0 (NaN, negative, not a number).
    """
    s = _amount(seconds, "time", unbounded=True)
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.4g}{name}"
    return f"{s / 1e-9:.4g}ns"
