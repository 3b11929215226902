"""How fast: collectives, schedules, synthesizers, bounds, network simulator, iteration model.

The training-iteration front door is exported lazily (importing :mod:`evaluators` stays
light): ``evaluators.evaluate``, ``evaluators.IterationResult`` and
``evaluators.closed_form_estimate`` come from :mod:`evaluators.iteration`.
"""

_LAZY = {"evaluate", "IterationResult", "closed_form_estimate", "ClosedFormEstimate"}


def __getattr__(name: str):
    if name in _LAZY:
        import evaluators.iteration as _iteration

        return getattr(_iteration, name)
    raise AttributeError(f"module 'evaluators' has no attribute {name!r}")
