"""Registry of collective algorithms and the front door :func:`synthesize`.

Every algorithm (baselines, TACOS, MCF, Themis...) registers a function
``fn(topology, collective, **options) -> Schedule`` with the collective kinds
it supports, the options it accepts and, where its time has one, its closed form
(:class:`ClosedForm`, which the contract test checks the algorithm against).  Unknown algorithm names, kinds and
options raise :class:`~codesign.errors.InvalidSpecError` listing the valid
ones (docs/architecture.md section 2: "a family of interchangeable algorithms has a front
door and a registry in the library").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from codesign.errors import invalid
from codesign.specs import check_choice
from evaluators.collectives import Collective
from topologies.model import Topology

__all__ = ["Algorithm", "ALGORITHMS", "ClosedForm", "register_algorithm", "synthesize",
           "algorithm_names", "closed_forms", "VALIDATE_MAX_HOPS"]

#: :func:`synthesize` runs the independent validator by default on schedules of at most
#: this many hops (transfer x link).  Measured on this machine (experiments/benchmarks
#: are the record): about 0.7 us per hop, so at most ~0.15 s, and 15-40 % of the
#: synthesis time of the baselines (ring on fattree:k=8, 683 k hops: 1.15 s synthesis,
#: 0.46 s validation).
VALIDATE_MAX_HOPS = 200_000

SynthFn = Callable[..., Any]


@dataclass(frozen=True)
class ClosedForm:
    """The closed-form completion time of an algorithm on the topologies it matches.

    Attributes
    ----------
    fn : callable
        ``fn(kind, n, size_bytes, bandwidth_Bps, latency_s, *, chunks=1, **params) -> s``
        (:mod:`evaluators.algorithms.closed_form` states every formula).
    kinds : tuple of str
        Collective kinds the formula covers.
    params : tuple of str
        Extra formula parameters besides ``chunks`` (``topology``, ``dims``, ``rings``).
    cases : callable
        ``cases(bandwidth_Bps, latency_s) -> [(topology, params, options), ...]``: small
        uniform topologies the formula holds on, with its ``params`` and the
        :func:`synthesize` options; the contract test times the algorithm on each.
    """

    fn: Callable[..., float]
    kinds: tuple[str, ...]
    params: tuple[str, ...]
    cases: Callable[[float, float], list]


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
    closed_form : ClosedForm or None
        Its closed-form time, if it has one.
    """

    name: str
    fn: SynthFn
    kinds: frozenset[str]
    options: tuple[str, ...]
    summary: str
    closed_form: ClosedForm | None = None


ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(name: str, *, kinds: Iterable[str], options: Iterable[str] = (),
                       summary: str = "", closed_form: ClosedForm | None = None
                       ) -> Callable[[SynthFn], SynthFn]:
    """Decorator registering a synthesizer under ``name`` (with its closed form, if any)."""
    def deco(fn: SynthFn) -> SynthFn:
        if name in ALGORITHMS:
            raise ValueError(f"algorithm {name!r} registered twice")
        ALGORITHMS[name] = Algorithm(name, fn, frozenset(kinds), tuple(options), summary,
                                     closed_form)
        return fn
    return deco


def _ensure_loaded() -> None:
    # Importing the package registers the built-in algorithms.
    import evaluators.algorithms  # noqa: F401


def algorithm_names() -> list[str]:
    """Names of every registered algorithm, sorted."""
    _ensure_loaded()
    return sorted(ALGORITHMS)


def closed_forms() -> dict[str, ClosedForm]:
    """``name -> closed form`` of every registered algorithm that has one."""
    _ensure_loaded()
    return {n: a.closed_form for n, a in sorted(ALGORITHMS.items()) if a.closed_form}


def synthesize(topology, collective, method: str = "ring", *, validate: bool | None = None,
               **options: Any):
    """Synthesize a schedule for ``collective`` on ``topology`` with ``method``.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    collective : evaluators.collectives.Collective
        What to run; its participants must be NPUs of ``topology``.
    method : str
        A registered algorithm name (see :func:`algorithm_names`).
    validate : bool or None, optional
        Check the schedule with the independent validator
        (:func:`evaluators.validate.check_schedule`: data, postcondition, links, link
        occupancy) and raise if it breaks a rule.  ``None`` (default): when it is cheap,
        i.e. for schedules of at most :data:`VALIDATE_MAX_HOPS` hops; ``True``: always;
        ``False``: never (callers that validate themselves).
    **options
        Algorithm options (keyword only); unknown options are errors.

    Returns
    -------
    evaluators.schedule.Schedule
        Timed under the algorithm's link model; ``metadata["algorithm"] == method``.

    Raises
    ------
    InvalidSpecError
        ``topology`` not a Topology (a spec string included) or ``collective`` not a
        Collective; unknown algorithm, kind, option or participant; or, when validated,
        a schedule that breaks a rule (``"invalid schedule: <first error>"``).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> from evaluators.collectives import Collective
    >>> s = synthesize(from_spec("ring:4"), Collective.on("allgather", 4, 4e6), "ring")
    >>> s.algorithm
    'ring'
    """
    if not isinstance(topology, Topology):
        raise invalid("topology", topology, "a Topology; build one with "
                      "topologies.registry.from_spec (or load_topology for a file)")
    if not isinstance(collective, Collective):
        raise invalid("collective", collective, "an evaluators.collectives.Collective; "
                      "build one with Collective.on(kind, npus, size_bytes)")
    if validate is not None and not isinstance(validate, bool):   # ('x' was read as True)
        raise invalid("validate", validate, "True, False or None (by size)")
    _ensure_loaded()
    # check_choice: an unhashable method (a list) is refused, not a TypeError of dict.get.
    alg = ALGORITHMS[check_choice("algorithm", method, sorted(ALGORITHMS))]
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
    schedule = alg.fn(topology, collective, **options)
    if validate or (validate is None and schedule.path_links.size <= VALIDATE_MAX_HOPS):
        from evaluators.validate import check_schedule

        check_schedule(schedule, topology)
    return schedule
