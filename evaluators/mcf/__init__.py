"""Optimal collectives via multicommodity flow (thesis Chapters 2-4): the fluid LPs.

Modules: :mod:`~evaluators.mcf.ten` (time-expanded networks, switch copies),
:mod:`~evaluators.mcf.fluid` (LP 4.2 / 3.16 blocks and their assembly),
:mod:`~evaluators.mcf.switches` (realisability check), :mod:`~evaluators.mcf.problem`
(solve at one step count with refinement), :mod:`~evaluators.mcf.alltoall`,
:mod:`~evaluators.mcf.allreduce`, the front door :mod:`~evaluators.mcf.api`, the
decompositions (thesis Chapter 5) :mod:`~evaluators.mcf.dantzig_wolfe` and
:mod:`topologies.symmetry`, the discretisation :mod:`~evaluators.mcf.discretize` and
its tree-column master :mod:`~evaluators.mcf.tree_master`.
"""

from evaluators.mcf.api import McfResult, OriginFlow, fluid_optimum

__all__ = ["fluid_optimum", "McfResult", "OriginFlow"]
