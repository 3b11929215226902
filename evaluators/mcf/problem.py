"""Assemble a fluid LP from phases, solve it at one step count, refine switches.

A collective is a list of :class:`Phase` objects (one for allgather,
broadcast, all-to-all...; two for the allreduce joint LP).  A phase routes
blocks of one kind (copy or flow) on one :class:`~evaluators.mcf.ten.Graph`
(forward, or reversed for reductions), one block per origin.  :func:`solve_at`
builds every block's time-expanded network for ``T`` steps, solves phase 1
(minimum ``R``), checks the switches (:mod:`evaluators.mcf.switches`) and
splits failing regions until the solution is realisable; :func:`solve_secondary`
then minimises the secondary cost at that ``R`` with the same loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evaluators.mcf.fluid import (Block, FluidLP, LPSolution, Unreachable, copy_block,
                                  flow_block)
from evaluators.mcf.switches import RegionCheck, check_blocks
from evaluators.mcf.ten import Graph, time_expanded

__all__ = ["Phase", "Settings", "Attempt", "solve_at", "solve_secondary", "StepsTooSmall"]


class StepsTooSmall(Exception):
    """Some destination cannot be reached in ``T`` steps (internal)."""


@dataclass(frozen=True)
class Phase:
    """One family of blocks.

    Attributes
    ----------
    name : str
        ``"allgather"``, ``"reducescatter"``, ... (for reports).
    kind : str
        ``"copy"`` (LP 4.2 with usage) or ``"flow"`` (LP 3.16).
    graph : Graph
        Physical graph in the phase's direction.
    origins : tuple of int
        One block per origin.
    destinations : tuple of ndarray
        Destinations of each origin.
    demands : tuple
        Per origin: a fixed demand (float, units of the collective's unit)
        or the index of a share column (int).
    """

    name: str
    kind: str
    graph: Graph
    origins: tuple[int, ...]
    destinations: tuple[np.ndarray, ...]
    demands: tuple


@dataclass(frozen=True)
class Settings:
    """Everything but the phases and ``T`` that defines the LP."""

    bandwidth: np.ndarray            # normalised, per link
    groups: tuple = ()               # ((links, normalised bandwidth), ...)
    link_cost: np.ndarray = field(default_factory=lambda: np.zeros(0))
    switch_model: str = "3.14"       # "3.13", "3.14" or "exact"
    n_shares: int = 0
    fixed_shares: np.ndarray | None = None
    method: str = "highs-ipm"
    max_rounds: int = 50
    options: dict | None = None
    decomposition: str = "none"      # "none", "dw" or "mirrored" (dantzig_wolfe.py)
    symmetry: object = None          # SymmetryClasses of the origins ("mirrored")


@dataclass
class Attempt:
    """The state of one step count: LP, solution and switch splits."""

    steps: int
    lp: FluidLP
    solution: LPSolution | None
    splits: list[set]                # per block: split (phys, t) nodes
    rounds: int = 0
    realisable: bool = True
    checks: list[RegionCheck] = field(default_factory=list)
    block_keys: list = field(default_factory=list)   # (phase index, origin) per block
    dw_units: list | None = None     # Dantzig-Wolfe columns of the current ``lp``
    dw_stats: object = None          # DWStats summed over this step count's solves

    @property
    def blocks(self) -> list[Block]:
        return self.lp.blocks

    @property
    def switch_copies(self) -> int:
        """Labelled switch copies over all blocks."""
        return sum(b.net.n_copies for b in self.lp.blocks)


def _block_specs(phases: list[Phase]):
    for p in phases:
        for o, d, q in zip(p.origins, p.destinations, p.demands):
            yield p, o, d, q


def _build(phases: list[Phase], steps: int, settings: Settings, splits: list[set]) -> FluidLP:
    blocks, demands = [], []
    for i, (p, o, d, q) in enumerate(_block_specs(phases)):
        T1 = steps + 1
        if p.kind == "copy" and settings.switch_model == "exact":
            nc = np.flatnonzero(~p.graph.copy)
            keys = frozenset((nc[:, None] * T1 + np.arange(T1)[None, :]).ravel().tolist())
        else:
            keys = frozenset(v * T1 + t for v, t in splits[i] if t <= steps)
        net = time_expanded(p.graph, o, d, steps, keys)
        try:
            if p.kind == "copy":
                model = "3.13" if settings.switch_model == "3.13" else "3.14"
                blocks.append(copy_block(net, settings.link_cost, model))
            else:
                blocks.append(flow_block(net, settings.link_cost))
        except Unreachable:
            raise StepsTooSmall() from None
        demands.append(q)
    return FluidLP(blocks, demands, settings.bandwidth, settings.groups, settings.n_shares,
                   settings.fixed_shares)


def _solve(lp: FluidLP, settings: Settings, R_max: float | None = None,
           att: Attempt | None = None) -> LPSolution:
    if settings.decomposition == "none" or att is None:
        opts = dict(settings.options or {})
        return lp.solve(R_max=R_max, method=settings.method, options=opts)
    from evaluators.mcf.dantzig_wolfe import DWStats, block_units, solve_dw

    if att.dw_stats is None:
        att.dw_stats = DWStats(settings.decomposition)
    if att.dw_units is None:
        sym = settings.symmetry if settings.decomposition == "mirrored" else None
        att.dw_units = block_units(lp, att.block_keys, sym)
        att.dw_stats.units = len(att.dw_units)
    return solve_dw(lp, att.dw_units, R_max=R_max, stats=att.dw_stats)


def _block_keys(phases: list[Phase]) -> list:
    return [(i, int(o)) for i, p in enumerate(phases) for o in p.origins]


def _refine(att: Attempt, checks: list[RegionCheck], settings: Settings | None = None) -> bool:
    """Add the failing regions to the splits; whether anything failed.

    Mirrored Dantzig-Wolfe: a region split in one block is split, mapped by
    the symmetry, in every block of its class, so the blocks stay isomorphic.
    """
    failed = [c for c in checks if not c.passed]
    T1 = att.steps + 1
    mirrored = settings is not None and settings.decomposition == "mirrored" \
        and settings.symmetry is not None
    for c in failed:
        if mirrored:
            from evaluators.mcf.dantzig_wolfe import mirror_keys

            for b2, keys in mirror_keys(settings.symmetry, att.block_keys, c.block, c.keys,
                                        att.steps):
                att.splits[b2].update((k // T1, k % T1) for k in keys)
        else:
            att.splits[c.block].update((k // T1, k % T1) for k in c.keys)
    return bool(failed)


def _check(lp: FluidLP, sol: LPSolution) -> list[RegionCheck]:
    return check_blocks(lp.blocks, [sol.block_x(lp, b) for b in range(len(lp.blocks))])


def _until_realisable(phases: list[Phase], att: Attempt, settings: Settings,
                      R_max: float | None) -> LPSolution:
    """Solve ``att.lp``; split failing switch regions and re-solve until none fail."""
    while True:
        sol = _solve(att.lp, settings, R_max, att)
        if not sol.success:
            att.realisable = False
            return sol
        att.checks = _check(att.lp, sol)
        if not _refine(att, att.checks, settings):
            return sol
        if att.rounds >= settings.max_rounds:
            att.realisable = False
            return sol
        att.rounds += 1
        att.lp = _build(phases, att.steps, settings, att.splits)
        att.dw_units = None


def solve_at(phases: list[Phase], steps: int, settings: Settings,
             splits: list[set] | None = None) -> Attempt:
    """Minimum ``R`` at ``T = steps``, refined until the switches are realisable.

    Raises
    ------
    StepsTooSmall
        If a destination is more than ``steps`` hops from its origin.
    """
    n_blocks = sum(len(p.origins) for p in phases)
    splits = [set(s) for s in splits] if splits is not None else [set() for _ in range(n_blocks)]
    att = Attempt(steps, _build(phases, steps, settings, splits), None, splits,
                  block_keys=_block_keys(phases))
    att.solution = _until_realisable(phases, att, settings, None)
    return att


def solve_secondary(phases: list[Phase], att: Attempt, settings: Settings,
                    slack: float = 1e-7) -> LPSolution:
    """Minimum secondary cost with ``R <= R* (1 + slack)``, refined like phase 1.

    Updates ``att`` (LP, splits, rounds) in place and returns the phase-2
    solution; the phase-1 solution stays in ``att.solution``.  A refinement
    keeps the phase-1 solution feasible (it passed the check, so it is
    expressible on the split networks), hence ``R*`` stays the optimum.
    """
    return _until_realisable(phases, att, settings, att.solution.R * (1.0 + slack))
