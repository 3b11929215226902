"""Built-in collective algorithms; importing this package registers them all.

Baselines (one module each): ``ring``, ``bidir-ring``, ``direct``, ``rhd``,
``dbt``, ``hierarchical``, ``multiring``; their shared pieces are
:mod:`~evaluators.algorithms.plan` (transfer lists, routing, timing) and
:mod:`~evaluators.algorithms.patterns` (ring, direct, halving-doubling, chain
and tree patterns over blocks of chunks); closed-form times are in
:mod:`~evaluators.algorithms.closed_form`.
"""

from evaluators.algorithms import (  # noqa: F401
    bidir_ring, dbt, direct, hierarchical, multiring, rhd, ring,
)
from evaluators.algorithms import tacos  # noqa: F401  (TACOS-GREEDY synthesizer)
from evaluators.algorithms import themis  # noqa: F401  (Themis ISCA'22 scheduler)
from evaluators.mcf import discretize as _mcf  # noqa: F401,E402  (fluid MCF optimum, Theorem 4)
