"""Resource estimates before work: refuse what would not fit, in one line.

Every entry point that grows with its input (topology build, schedule
synthesis, bounds, the network simulator, sweeps) estimates the memory it will
allocate from the sizes it was given, *before* allocating, and calls
:func:`check_memory`.  Above the limit it raises :class:`ResourceLimitError`
(an :class:`~codesign.errors.InvalidSpecError`: the CLI prints one line and
exits 2; a sweep records the trial as pruned with the message).

The limit
---------
``--max-memory SIZE`` on the command line (:func:`set_memory_limit`), else the
environment variable ``CODESIGN_MAX_MEMORY`` (so Ray workers started from the
CLI inherit it), else :data:`DEFAULT_FRACTION` of the memory available to the
process: the smaller of the machine's ``MemAvailable`` (``/proc/meminfo``) and
the address-space limit ``RLIMIT_AS`` minus what the process already maps.
Estimates are deliberately rough (within a small factor): their job is to stop
a request that would need 100 GB before it starts, not to account for bytes.

Sizes also have absolute sanity bounds (:data:`MAX_ELEMENTS`), independent of
the machine: no array of more than 2^31 entries is ever planned.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from codesign.errors import InvalidSpecError

__all__ = ["ResourceLimitError", "DEFAULT_FRACTION", "MAX_ELEMENTS", "ENV_VAR",
           "available_memory", "memory_limit", "set_memory_limit", "memory_limit_scope",
           "check_memory", "check_count", "check_local_workers", "format_bytes",
           "WORKERS_PER_CPU"]

#: Fraction of the available memory one command may plan to use by default.
DEFAULT_FRACTION = 0.5
#: Largest number of entries of any one planned array (int32 indices elsewhere).
MAX_ELEMENTS = 2 ** 31 - 1
#: Environment variable carrying the limit in bytes to child processes (Ray workers).
ENV_VAR = "CODESIGN_MAX_MEMORY"
#: Most local worker processes per CPU.  Results never depend on the worker count, so
#: processes beyond the CPUs only time-share them, and each holds its own interpreter
#: with numpy, scipy and the model (~80 MB measured before any work): 4 per CPU leaves
#: room for processes that wait on I/O, and 10^6 (a typo) never starts.
WORKERS_PER_CPU = 4

_limit: float | None = None


class ResourceLimitError(InvalidSpecError):
    """A request whose estimated memory (or element count) exceeds the limit."""


def format_bytes(n: float) -> str:
    """``1.5 GiB`` style text for a byte count (any magnitude, never raises)."""
    if not math.isfinite(n):
        return "an unbounded amount"
    for unit, scale in (("EiB", 2.0 ** 60), ("PiB", 2.0 ** 50), ("TiB", 2.0 ** 40),
                        ("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20), ("KiB", 2.0 ** 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if value < 1e6 else f"{value:.3e} {unit}"
    return f"{n:.0f} B"


def _meminfo_available() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_left() -> float | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = 0.0
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            mapped = float(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    return max(float(soft) - mapped, 0.0)


_cached: tuple[float, float] | None = None   # (monotonic time, bytes)
#: Seconds a reading of the available memory is reused (topology builds check often).
_CACHE_S = 1.0


def available_memory() -> float:
    """Bytes this process could still allocate: min(MemAvailable, RLIMIT_AS headroom).

    Read from ``/proc`` at most once per second (cached).
    """
    global _cached
    now = time.monotonic()
    if _cached is not None and now - _cached[0] < _CACHE_S:
        return _cached[1]
    value = _read_available()
    _cached = (now, value)
    return value


def _read_available() -> float:
    candidates = [v for v in (_meminfo_available(), _address_space_left()) if v is not None]
    if not candidates:
        try:
            candidates.append(float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
        except (ValueError, OSError, AttributeError):
            candidates.append(8.0 * 2 ** 30)
    return min(candidates)


def memory_limit() -> float:
    """The current limit in bytes (see the module docstring for where it comes from)."""
    if _limit is not None:
        return _limit
    env = os.environ.get(ENV_VAR)
    if env:
        try:
            value = float(env)
            if math.isfinite(value) and value > 0:
                return value
        except ValueError:
            pass
    return DEFAULT_FRACTION * available_memory()


def set_memory_limit(limit_bytes: float | None, *, export: bool = True) -> None:
    """Set the process-wide limit (``None``: back to the default).

    With ``export`` the value is also put in ``CODESIGN_MAX_MEMORY`` so that
    worker processes started afterwards (local Ray) use the same limit.
    """
    global _limit
    if limit_bytes is not None and (not math.isfinite(limit_bytes) or limit_bytes <= 0):
        raise InvalidSpecError(f"invalid memory limit {limit_bytes!r}: expected a size > 0")
    _limit = None if limit_bytes is None else float(limit_bytes)
    if export:
        if limit_bytes is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = repr(float(limit_bytes))


@contextmanager
def memory_limit_scope(limit_bytes: float | None) -> Iterator[None]:
    """Temporarily use ``limit_bytes`` (tests, nested calls); restores the previous limit."""
    global _limit
    saved, saved_env = _limit, os.environ.get(ENV_VAR)
    set_memory_limit(limit_bytes)
    try:
        yield
    finally:
        _limit = saved
        if saved_env is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = saved_env


def check_memory(what: str, field: str, value: object, estimate_bytes: float,
                 instead: str) -> None:
    """Refuse ``what`` if it would need more than the memory limit.

    Parameters
    ----------
    what : str
        The work about to be done (``"building the topology"``).
    field, value : str, object
        The input that drives the size (``"npus"``, ``10**9``).
    estimate_bytes : float
        Planned allocation, bytes (may be ``inf`` or astronomically large).
    instead : str
        What the user can do instead, one clause.

    Raises
    ------
    ResourceLimitError
        ``refused: <what> with <field>=<value> needs about X (limit Y, --max-memory); <instead>``.
    """
    limit = memory_limit()
    if not (estimate_bytes <= limit):  # also catches NaN
        shown = _short(value)
        raise ResourceLimitError(
            f"refused: {what} with {field}={shown} needs about {format_bytes(estimate_bytes)} "
            f"of memory (limit {format_bytes(limit)}, set with --max-memory); {instead}")


def check_count(what: str, field: str, value: object, count: float, instead: str,
                *, maximum: float = MAX_ELEMENTS) -> None:
    """Refuse ``what`` if ``count`` planned entries exceed ``maximum`` (sanity bound)."""
    if not (count <= maximum):
        raise ResourceLimitError(
            f"refused: {what} with {field}={_short(value)} plans {count:.3g} entries "
            f"(at most {maximum:.3g}); {instead}")


def check_local_workers(field: str, workers: int) -> int:
    """Refuse more local worker processes than :data:`WORKERS_PER_CPU` per CPU of this
    machine (at least 2, the commands' default, so a 1-CPU machine runs the defaults).

    Raises
    ------
    InvalidSpecError
        ``invalid <field> <workers>: expected at most N worker processes on this machine``.
    """
    from codesign.errors import invalid

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    most = max(2, WORKERS_PER_CPU * cpus)
    if workers > most:
        raise invalid(field, workers, f"at most {most} worker processes on this machine "
                      f"({WORKERS_PER_CPU} per CPU; results do not depend on the count)")
    return workers


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
