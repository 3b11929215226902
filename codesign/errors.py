"""Error hierarchy of the framework (docs/architecture.md section 4).

Every error the library raises on purpose derives from :class:`CodesignError`.
Bad input raises :class:`InvalidSpecError`, whose message names the field, the
value, the rule and (where there is one) the fix.  Valid requests that cannot
be satisfied raise :class:`InfeasibleError`.
"""

from __future__ import annotations

__all__ = ["CodesignError", "InvalidSpecError", "InfeasibleError", "INFEASIBLE_REASONS",
           "invalid", "shorten"]

#: Why a valid request cannot be satisfied (:attr:`InfeasibleError.reason`): the workload
#: does not fit in GPU memory; no member of a family has the requested size or shape;
#: a destination cannot be reached; a time limit ran out; anything else.
INFEASIBLE_REASONS = ("memory", "shape", "connectivity", "time", "other")


class CodesignError(Exception):
    """Root of every error raised on purpose by the framework."""


class InvalidSpecError(CodesignError, ValueError):
    """Bad input: a spec, a value or an option that breaks a documented rule."""


class InfeasibleError(CodesignError):
    """A valid request that cannot be satisfied (memory, budget, connectivity...).

    Parameters
    ----------
    message : str
        One line for the user.
    reason : str, optional
        One of :data:`INFEASIBLE_REASONS` (default ``"other"``), for code that reacts to
        the kind of failure (e.g. a sweep records memory-pruned trials) instead of
        matching message text.  Kept through pickling (Ray workers): it lives in the
        instance ``__dict__``, which ``BaseException.__reduce__`` carries.

    Examples
    --------
    >>> InfeasibleError("needs 90 GiB, has 80", reason="memory").reason
    'memory'
    """

    def __init__(self, *args: object, reason: str = "other") -> None:
        if reason not in INFEASIBLE_REASONS:
            raise ValueError(f"InfeasibleError reason {reason!r} is not one of "
                             f"{', '.join(INFEASIBLE_REASONS)}")
        super().__init__(*args)
        self.reason = reason


def invalid(field: str, value: object, allowed: str) -> InvalidSpecError:
    """Build the one-line message used for bad input everywhere.

    Parameters
    ----------
    field : str
        Name of the offending field or option (``"bandwidth"``, ``"torus shape"``).
    value : object
        The value that was given.
    allowed : str
        What is allowed instead, phrased so the user can fix the input.

    Returns
    -------
    InvalidSpecError
        To be raised by the caller: ``raise invalid("degree", d, "an integer >= 1")``.
    """
    return InvalidSpecError(f"invalid {field} {shorten(value)}: expected {allowed}")


#: Longest rendering of a value in a message: a hostile input (a YAML alias
#: bomb, a 400-digit number) must not be echoed whole.
MAX_VALUE_CHARS = 80


def shorten(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (with the total length noted).

    Containers are rendered lazily through :func:`reprlib.repr`-style limits so
    that a deeply shared structure is never expanded in full.
    """
    import reprlib

    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = 8
    r.maxlevel = 3
    try:
        text = r.repr(value)
    except Exception:  # a hostile __repr__; never fail while reporting an error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
