"""Parsing of the shape and ``key=value`` options of topology spec strings.

Shared by every family so that the same key means the same thing everywhere:
``bw`` (bandwidth of one directed link, default 25GB/s) and ``lat`` (latency of
one link, default 1us) take one value or one per dimension separated by ``:``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from codesign.errors import invalid
from codesign.units import BARE_BANDWIDTH_BPS, BARE_LATENCY_S, parse_bandwidth, parse_time

__all__ = ["DEFAULT_BW", "DEFAULT_LAT", "parse_dims", "parse_int", "parse_float",
           "per_dim_bandwidth", "per_dim_latency", "bandwidth_option", "latency_option",
           "no_shape"]

#: Default bandwidth of one directed link, bytes/s (25GB/s).
DEFAULT_BW = 25e9
#: Default latency of one link, seconds (1us).
DEFAULT_LAT = 1e-6


def parse_int(text: str, field: str, *, minimum: int = 1) -> int:
    """Parse a decimal integer >= ``minimum`` (one-line error otherwise)."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise invalid(field, text, f"an integer >= {minimum}") from None
    if value < minimum:
        raise invalid(field, text, f"an integer >= {minimum}")
    return value


def parse_float(text: str, field: str, *, minimum: float = 0.0, strict: bool = False) -> float:
    """Parse a finite number >= ``minimum`` (> when ``strict``)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise invalid(field, text, "a number") from None
    if value != value or value in (float("inf"), float("-inf")) or value < minimum or (
            strict and value == minimum):
        raise invalid(field, text, f"a finite number {'>' if strict else '>='} {minimum:g}")
    return value


def parse_dims(shape: str, family: str, *, min_size: int = 1) -> tuple[int, ...]:
    """Parse ``"4x4x4"`` into ``(4, 4, 4)``; each size >= ``min_size``."""
    if not shape:
        raise invalid(f"{family} shape", shape, "sizes such as 8 or 4x4x4")
    parts = shape.lower().split("x")
    return tuple(parse_int(p, f"{family} shape {shape!r} size", minimum=min_size) for p in parts)


def _per_dim(options: Mapping[str, str], key: str, ndims: int, default: float, parse,
             family: str) -> tuple[float, ...]:
    if key not in options:
        return (default,) * ndims
    parts = options[key].split(":")
    if len(parts) not in (1, ndims):
        raise invalid(f"{family} {key}", options[key],
                      f"one value or {ndims} values separated by ':' (one per dimension)")
    values = tuple(parse(p, field=f"{family} {key}") for p in parts)
    return values * ndims if len(values) == 1 else values


def per_dim_bandwidth(options: Mapping[str, str], ndims: int, family: str,
                      default: float = DEFAULT_BW) -> tuple[float, ...]:
    """Per-dimension link bandwidth from ``bw=``, bytes/s."""
    return _per_dim(options, "bw", ndims, default,
                    partial(parse_bandwidth, bare=BARE_BANDWIDTH_BPS), family)


def per_dim_latency(options: Mapping[str, str], ndims: int, family: str,
                    default: float = DEFAULT_LAT) -> tuple[float, ...]:
    """Per-dimension link latency from ``lat=``, seconds."""
    return _per_dim(options, "lat", ndims, default, partial(parse_time, bare=BARE_LATENCY_S),
                    family)


def bandwidth_option(options: Mapping[str, str], family: str, key: str = "bw",
                     default: float = DEFAULT_BW) -> float:
    """A single bandwidth option (bytes/s)."""
    return (parse_bandwidth(options[key], field=f"{family} {key}", bare=BARE_BANDWIDTH_BPS)
            if key in options else default)


def latency_option(options: Mapping[str, str], family: str, key: str = "lat",
                   default: float = DEFAULT_LAT) -> float:
    """A single latency option (seconds)."""
    return (parse_time(options[key], field=f"{family} {key}", bare=BARE_LATENCY_S)
            if key in options else default)


def no_shape(shape: str, family: str, hint: str) -> None:
    """Reject a shape for families that take none (``dgx1``)."""
    if shape:
        raise invalid(f"{family} shape", shape, hint)
