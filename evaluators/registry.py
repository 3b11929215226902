"""Registry of collective algorithms and the front door :func:`synthesize`.

Every algorithm (baselines, TACOS, MCF, Themis...) registers a function
``fn(topology, collective, **options) -> Schedule`` with the collective kinds
it supports and the options it accepts.  Unknown algorithm names, kinds and
options raise :class:`~codesign.errors.InvalidSpecError` listing the valid
ones (docs/architecture.md section 2: "a family of interchangeable algorithms has a front
door and a registry in the library").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from codesign.errors import invalid

__all__ = ["Algorithm", "ALGORITHMS", "register_algorithm", "synthesize", "algorithm_names"]

SynthFn = Callable[..., Any]


@dataclass(frozen=True)
class Algorithm:
    """A registered collective algorithm.

    Attributes
    ----------
    name : str
        ``--algorithm`` name (``"ring"``, ``"tacos"``...).
    fn : callable
        ``fn(topology, collective, **options) -> Schedule``.
    kinds : frozenset of str
        Collective kinds it can synthesize.
    options : tuple of str
        Keyword options it accepts (``seed``, ``generators``...).
    summary : str
        One line for help texts.
    """

    name: str
    fn: SynthFn
    kinds: frozenset[str]
    options: tuple[str, ...]
    summary: str


ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(name: str, *, kinds: Iterable[str], options: Iterable[str] = (),
                       summary: str = "") -> Callable[[SynthFn], SynthFn]:
    """Decorator registering a synthesizer under ``name``."""
    def deco(fn: SynthFn) -> SynthFn:
        if name in ALGORITHMS:
            raise ValueError(f"algorithm {name!r} registered twice")
        ALGORITHMS[name] = Algorithm(name, fn, frozenset(kinds), tuple(options), summary)
        return fn
    return deco


def _ensure_loaded() -> None:
    # Importing the package registers the built-in algorithms.
    import evaluators.algorithms  # noqa: F401


def algorithm_names() -> list[str]:
    """Names of every registered algorithm, sorted."""
    _ensure_loaded()
    return sorted(ALGORITHMS)


def synthesize(topology, collective, method: str = "ring", **options: Any):
    """Synthesize a schedule for ``collective`` on ``topology`` with ``method``.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    collective : evaluators.collectives.Collective
        What to run; its participants must be NPUs of ``topology``.
    method : str
        A registered algorithm name (see :func:`algorithm_names`).
    **options
        Algorithm options (keyword only); unknown options are errors.

    Returns
    -------
    evaluators.schedule.Schedule
        Timed under the algorithm's link model; ``metadata["algorithm"] == method``.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> from evaluators.collectives import Collective
    >>> s = synthesize(from_spec("ring:4"), Collective.on("allgather", 4, 4e6), "ring")
    >>> s.algorithm
    'ring'
    """
    _ensure_loaded()
    alg = ALGORITHMS.get(method)
    if alg is None:
        raise invalid("algorithm", method, f"one of {', '.join(sorted(ALGORITHMS))}")
    if collective.kind not in alg.kinds:
        raise invalid(f"collective for algorithm {method!r}", collective.kind,
                      f"one of {', '.join(sorted(alg.kinds))}")
    unknown = [k for k in options if k not in alg.options]
    if unknown:
        allowed = ", ".join(alg.options) if alg.options else "none"
        raise invalid(f"option for algorithm {method!r}", unknown[0], f"one of: {allowed}")
    bad = [p for p in collective.npus if not 0 <= p < topology.npus]
    if bad:
        raise invalid("collective participant", bad[0], f"an NPU id in 0..{topology.npus - 1}")
    # Refuse before allocating what would not fit (codesign.resources limit).
    from evaluators.estimates import check_synthesis

    check_synthesis(topology, collective, method, options)
    return alg.fn(topology, collective, **options)
