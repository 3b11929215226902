"""Parallelization-strategy search: the feasible start (:mod:`~search.strategy.feasible`),
the search space and its moves (:mod:`~search.strategy.space`) and the MCMC search
(:mod:`~search.strategy.mcmc`, FlexFlow-style)."""
