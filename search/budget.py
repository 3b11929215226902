"""The best design per budget: one rule for the what-if answer and the sweep report.

For every budget, the *fastest* design whose cost is at most the budget (relative
tolerance 1e-12, so a budget equal to a design's printed cost affords it); ties go to
the cheaper design, then to the smaller key.  Where the compute model has a validated
relative error, the other affordable designs whose predicted time is within that error
of the best one are listed, not ranked against it
(:func:`evaluators.iteration.uncertainty.compare`): designs are scanned from fastest to
slowest and the list stops at the first one beyond the error (the difference only grows).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from evaluators.iteration.uncertainty import compare

__all__ = ["BudgetPick", "best_per_budget"]

#: Relative slack of "cost at most the budget".
BUDGET_RTOL = 1e-12


@dataclass(frozen=True)
class BudgetPick:
    """The answer for one budget.

    Attributes
    ----------
    budget_usd : float
        The budget.
    best : hashable or None
        Key of the fastest affordable design (None: nothing is affordable).
    close : tuple or None
        Keys of the other affordable designs within the model error of ``best``, fastest
        first (None when the model error is unknown).
    """

    budget_usd: float
    best: Hashable | None
    close: tuple | None


def best_per_budget(designs: Iterable[tuple[Hashable, float, float]],
                    budgets: Sequence[float], model_error: float | None = None
                    ) -> list[BudgetPick]:
    """For each budget, the fastest affordable design (module docstring).

    Parameters
    ----------
    designs : iterable of (key, cost_usd, iteration_time_s)
        Candidate designs (times > 0 s, costs in USD).
    budgets : sequence of float
        Budgets, USD, in the order the answers are wanted.
    model_error : float, optional
        Validated relative error of the time model (None: unknown).

    Returns
    -------
    list of BudgetPick
        One per budget, in the order of ``budgets``.

    Examples
    --------
    >>> picks = best_per_budget([("a", 10.0, 2.0), ("b", 20.0, 1.0), ("c", 15.0, 1.02)],
    ...                         [12.0, 25.0], model_error=0.05)
    >>> [(p.best, p.close) for p in picks]
    [('a', ()), ('b', ('c',))]
    """
    ranked = sorted(designs, key=lambda d: (d[2], d[1], d[0]))
    out = []
    for budget in budgets:
        fit = [d for d in ranked if d[1] <= budget * (1 + BUDGET_RTOL)]
        if not fit:
            out.append(BudgetPick(float(budget), None, None))
            continue
        best, t0 = fit[0][0], fit[0][2]
        close = None
        if model_error is not None:
            close = []
            for key, _, t in fit[1:]:
                if t > 0 and compare(t0, t, model_error).significant:
                    break
                if t > 0:
                    close.append(key)
            close = tuple(close)
        out.append(BudgetPick(float(budget), best, close))
    return out
