"""Front door of the fluid multicommodity-flow optimum: :func:`fluid_optimum`.

What it computes (thesis "Optimal collectives via multicommodity flow",
Chapters 3-4): the bandwidth-optimal completion time ``R`` of a collective in
the fluid model (CM3, infinitely divisible data, no latency), i.e. the
optimum of LP 4.2 over the time-expanded network with ``T`` steps -- by
Theorem 4 the infimum over step sizes of the step-based LP 3.10 -- and, at
that ``R``, the minimum secondary cost (by default the data uploaded from and
downloaded to NPUs, thesis Sec. 2.4: cost 1 per byte on links touching an
NPU).

Node roles (thesis Sec. 2.2): NPUs store, copy and reduce; switches only
route; *memory nodes* (``memory_nodes=`` or a boolean ``node_attrs["memory"]``
per NPU) store and copy but do not reduce and need not receive anything.
Non-participating NPUs relay, store and copy.

Per collective kind:

* allgather, broadcast -- LP 4.2 (copy blocks, one per origin);
* reducescatter, reduce -- the same on the reversed network, where the
  vertices that may "copy" are those that may reduce (thesis Sec. 3.2);
* alltoall, scatter, gather -- LP 3.16 (flow blocks, no copies);
* allreduce -- the joint reduce + gather LP sharing bandwidth, with the
  shares of the reduced buffer per NPU free (or equal), thesis Sec. 4.2.

Switches: ``switch_model="3.13"`` or ``"3.14"`` relaxes the no-copy rule at
switches (usage conservation, plus multiplicity conservation for 3.14);
every solution is then checked and failing switch regions are duplicated
until it is realisable (:mod:`evaluators.mcf.switches`), so the answer is
exact either way (``"3.14"`` usually needs fewer rounds).  ``"exact"``
duplicates every switch from the start; ``"multicast"`` lets switches copy
and reduce (in-network collectives), with no check.

**Choice of T.**  Paths longer than ``T`` steps cannot be used and ``R`` is
non-increasing in ``T`` (a solution for ``T`` waits one step at the origin
for ``T + 1``).  With ``steps=None`` we start at the largest hop distance of a
pair that must communicate (no smaller ``T`` is feasible) and increase ``T``
one step at a time until ``R`` has not improved (relative ``1e-6``) for
``patience`` steps, or ``R`` equals the cut lower bound of
:mod:`evaluators.bounds` (then no ``T`` can do better: ``steps_certified``).
Stopping when ``R`` stops improving is a heuristic: ``R`` can stay flat and
drop later (a relay through a switch needs two more steps; hence the default
``patience`` of 2 where nodes cannot copy); pass ``steps`` to be sure.  The
certificate is only used where that bound's model matches ours (no memory
nodes, link groups or multicast).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_choice, check_number
from evaluators.collectives import Collective
from evaluators.mcf.allreduce import allreduce_phases
from evaluators.mcf.dantzig_wolfe import DECOMPOSITIONS
from evaluators.mcf.fluid import DEFAULT_TIME_LIMIT_S, lp_deadline
from evaluators.mcf.alltoall import alltoall_phases, scatter_phases
from evaluators.mcf.problem import (Attempt, Phase, Settings, StepsTooSmall, solve_at,
                                    solve_secondary)
from evaluators.mcf.switches import edge_values
from evaluators.mcf.ten import UNREACHABLE, Graph, Network
from topologies.model import Topology

__all__ = ["fluid_optimum", "McfResult", "OriginFlow", "SWITCH_MODELS_API", "METHODS"]

SWITCH_MODELS_API = ("3.13", "3.14", "exact", "multicast")
METHODS = ("highs-ipm", "highs-ds", "highs")
#: R must drop by this much (relative) for a larger T to count as an improvement.
IMPROVE_TOL = 1e-6
#: Relative tolerance of the certificate R == lower bound.
CERT_TOL = 1e-6


@dataclass(frozen=True)
class OriginFlow:
    """The flows of one block (one origin), for the later discretisation.

    Attributes
    ----------
    phase : str
        ``"allgather"``, ``"broadcast"``, ``"reducescatter"``, ``"reduce"``,
        ``"alltoall"``, ``"scatter"`` or ``"gather"`` (allreduce has one
        ``"reducescatter"`` and one ``"allgather"`` block per owner).
    origin : int
        Physical origin of the block: for reversed phases, the NPU the data
        is reduced (or gathered) *into*.
    destinations : ndarray of int
        Physical destinations (for reversed phases: the contributors).
    reversed : bool
        Whether ``network`` runs on the reversed links: its step ``t`` edge
        over link ``l`` is the transfer over link ``l`` (forward) in step
        ``T - 1 - t`` of the real schedule.
    network : Network
        The block's time-expanded network (edge ``i`` over link
        ``network.link[i]``, :data:`~evaluators.mcf.ten.HOLD` for storage).
    usage_bytes : ndarray
        Bytes sent per network edge (``w``; hold-overs at copying nodes:
        the largest flow).
    flow_bytes : scipy.sparse.csr_array, shape (destinations, edges)
        Bytes of each destination's commodity per edge (``f``).
    """

    phase: str
    origin: int
    destinations: np.ndarray
    reversed: bool
    network: Network
    usage_bytes: np.ndarray
    flow_bytes: sp.csr_array


@dataclass(frozen=True)
class McfResult:
    """Outcome of :func:`fluid_optimum`.

    Attributes
    ----------
    kind : str
        Collective kind.
    size_bytes : float
        Collective size (nccl-tests convention).
    time_s : float
        Bandwidth-optimal completion time ``R``, seconds.
    optimal : bool
        The LPs solved to optimality and the solution passed the switch
        realisability check (so ``time_s`` is the exact optimum of the model).
    solver_status : str
        HiGHS' message for the phase-1 solve (minimum ``R``).
    dual_gap : float
        Largest relative primal-dual gap of the final solves (from HiGHS'
        duals; ``~1e-12`` when optimal).
    secondary_cost_bytes : float or None
        Secondary cost at ``time_s`` (default: bytes sent or received by
        NPUs); None when ``secondary=False``.
    steps : int
        ``T`` of the time-expanded networks used (allreduce: of each of its
        two phases; the reduction runs back to back with the gather).
    steps_certified : bool
        ``time_s`` equals a lower bound valid for every ``T`` (else ``T`` was
        increased until ``R`` stopped improving, or it was given).
    refinement_rounds : int
        Solves that added switch copies.
    switch_copies : int
        Labelled switch copies in the final networks (all blocks).
    switch_model : str
    flows : tuple of OriginFlow
        Per block, in bytes.
    shares : dict of int to float or None
        Allreduce: fraction of the reduced buffer each NPU owns between the
        phases.
    lp_shape : tuple of int
        (rows, columns) of the final LP.
    decomposition : str
        ``"none"``, ``"dw"`` or ``"mirrored"`` (how the LPs were solved).
    decomposition_stats : dict or None
        Dantzig-Wolfe: ``units`` (pricing problems per iteration), ``classes``
        (symmetry classes, mirrored), ``iterations``, ``columns``,
        ``pricing_solves``, ``pricing_s``, ``master_s``, ``lower_bound`` and
        ``gap`` (Lagrangian certificate of the last solve), ``converged``.
    """

    kind: str
    size_bytes: float
    time_s: float
    optimal: bool
    solver_status: str
    dual_gap: float
    secondary_cost_bytes: float | None
    steps: int
    steps_certified: bool
    refinement_rounds: int
    switch_copies: int
    switch_model: str
    flows: tuple[OriginFlow, ...] = field(repr=False)
    shares: dict[int, float] | None = None
    lp_shape: tuple[int, int] = (0, 0)
    decomposition: str = "none"
    decomposition_stats: dict | None = None

    @property
    def algbw_Bps(self) -> float:
        """Algorithm bandwidth, bytes/s: ``size / time``."""
        return self.size_bytes / self.time_s if self.time_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no flows)."""
        return {
            "kind": self.kind, "size_bytes": self.size_bytes, "time_s": self.time_s,
            "algbw_Bps": self.algbw_Bps, "optimal": self.optimal,
            "solver_status": self.solver_status, "dual_gap": self.dual_gap,
            "secondary_cost_bytes": self.secondary_cost_bytes, "steps": self.steps,
            "steps_certified": self.steps_certified,
            "refinement_rounds": self.refinement_rounds, "switch_copies": self.switch_copies,
            "switch_model": self.switch_model,
            "shares": None if self.shares is None else {str(k): v for k, v in self.shares.items()},
            "lp_shape": list(self.lp_shape), "decomposition": self.decomposition,
            "decomposition_stats": self.decomposition_stats,
        }


def fluid_optimum(topology, collective: Collective, *, steps: int | None = None,
                  secondary: bool = True, switch_model: str | None = None,
                  memory_nodes: Sequence[int] = (),
                  link_groups: Sequence[tuple[Sequence[int], float]] = (),
                  link_costs: Sequence[float] | None = None, shares: str = "free",
                  max_steps: int | None = None, patience: int | None = None,
                  max_rounds: int = 50, method: str = "highs-ipm",
                  decomposition: str = "none",
                  time_limit: float = DEFAULT_TIME_LIMIT_S) -> McfResult:
    """Bandwidth-optimal fluid time of a collective (thesis LP 4.2 / 3.16).

    Parameters
    ----------
    topology : topologies.Topology
        The network (bandwidths in bytes/s; latencies are ignored).
    collective : Collective
        Kind, participants, size in bytes (nccl-tests convention).
    steps : int, optional
        ``T``; default: searched (module docstring).
    secondary : bool, optional
        Also minimise the secondary cost at the optimal time (a second LP).
    switch_model : {"3.14", "3.13", "exact", "multicast"}, optional
        How switches are modelled (module docstring).  Default: ``"3.14"``
        for the whole LP, ``"3.13"`` for the decompositions (smaller pricing
        LPs; the refinement makes both exact).
    memory_nodes : sequence of int, optional
        Node ids (usually switch ids) that store and copy but do not reduce;
        they must not be participants.  ``None`` or empty (default): none.
    link_groups : sequence of (sequence of int, float), optional
        Extra bandwidth limits: the links of a group together carry at most
        the given bytes/s (the thesis' ``b(L)``, e.g. a memory's read+write
        bandwidth over all its links).  ``None`` or empty (default): none.
    link_costs : sequence of float, optional
        Secondary cost per byte on each link; default 1 on links with an NPU
        (that is not a memory node) at either end, else 0.
    shares : {"free", "equal"}, optional
        Allreduce: optimise each NPU's share of the reduced buffer, or fix
        them to ``1/N``.
    max_steps : int, optional
        Largest ``T`` the search may try (default: start + number of nodes).
    patience : int, optional
        The search stops after this many consecutive step counts without
        improvement (default 2 when some node cannot copy -- a relay through
        a switch costs two extra steps -- else 1).
    max_rounds : int, optional
        Largest number of switch-refinement rounds (``optimal`` is False if
        more would be needed).
    method : {"highs-ipm", "highs-ds", "highs"}, optional
        scipy HiGHS method (whole LP; the decompositions use ``"highs"``).
    decomposition : {"none", "dw", "mirrored"}, optional
        ``"none"`` solves each LP whole; ``"dw"`` by Dantzig-Wolfe column
        generation with one pricing LP per origin (thesis Sec. 5.1);
        ``"mirrored"`` with one pricing LP per symmetry class of origins
        (Sec. 5.2, classes from the topology's automorphisms,
        :mod:`topologies.symmetry`).  Same optimum (to the stopping gap,
        ``1e-8`` relative on ``R``); see :mod:`evaluators.mcf.dantzig_wolfe`.
    time_limit : float, optional
        Wall-clock seconds all the LPs of this call may take together (default
        :data:`~evaluators.mcf.fluid.DEFAULT_TIME_LIMIT_S`): their size is checked
        before they are built, their solve time cannot be (it depends on the LPs'
        degeneracy); past it the call is refused.

    Returns
    -------
    McfResult

    Raises
    ------
    InvalidSpecError
        On a ``topology`` that is not a Topology, a ``collective`` that is not a
        Collective, a bad option, participant, memory node, link group or link cost.
    InfeasibleError
        If a participant cannot reach another that it must, or ``steps`` is
        smaller than the hop distance of such a pair.
    ResourceLimitError
        The LPs would not fit in memory, or ran past ``time_limit``.

    Notes
    -----
    One LP per step count tried and per refinement round; their size is
    about ``origins x destinations x T x links`` flow variables.  torus:4x4
    allgather (16 x 15 commodities, ``T = 4``) solves in a few seconds.

    Examples
    --------
    >>> from topologies.families.multidim import ring
    >>> r = fluid_optimum(ring(4, bandwidth=1e9, latency=0.0),
    ...                   Collective.on("allgather", 4, 4e9))
    >>> round(r.time_s, 6), r.steps, r.optimal
    (1.5, 2, True)
    """
    if switch_model is None:
        # 3.14's multiplicity variables grow with the destinations per origin;
        # in a pricing LP that dominates (dgx-a100:8,links=all: 158 s against
        # 10 s with 3.13), and the refinement makes either exact.
        switch_model = "3.14" if decomposition == "none" else "3.13"
    opts = _validate(topology, collective, steps, secondary, switch_model, memory_nodes,
                     link_groups, link_costs, shares, max_steps, patience, max_rounds, method)
    check_choice("decomposition", decomposition, DECOMPOSITIONS)
    check_number("time_limit", time_limit)   # seconds
    if steps is not None or max_steps is not None:
        # Steps the caller sets size the LP (origins x links x steps): checked before it
        # is built (steps=20000 on ring:8 allocated for 14 s, then ran out of memory).
        from evaluators.estimates import check_mcf

        check_mcf(topology, collective, decomposition=decomposition,
                  steps=max(s for s in (steps, max_steps) if s is not None))
    memory, costs, groups = opts
    n, P, M = topology.n_nodes, np.array(collective.npus, dtype=np.int64), collective.size_bytes
    N = P.size
    npu = np.zeros(n, dtype=bool)
    npu[: topology.npus] = True
    npu &= ~memory
    store = npu | memory
    multicast = switch_model == "multicast"
    copy_fwd = store | multicast
    copy_rev = npu | multicast
    fwd = Graph.build(n, topology.src, topology.dst, store, copy_fwd)
    rev = None
    kind = collective.kind
    if kind in ("reducescatter", "reduce", "gather", "allreduce"):
        rev = Graph.build(n, topology.dst, topology.src, store, copy_rev, reversed=True)
    root = collective.root
    n_shares = 0
    if kind in ("allgather", "reducescatter"):
        g = fwd if kind == "allgather" else rev
        phases = [Phase(kind, "copy", g, tuple(int(o) for o in P), tuple(P[P != o] for o in P),
                        (1.0,) * N)]
        unit = M / N
    elif kind in ("broadcast", "reduce"):
        g = fwd if kind == "broadcast" else rev
        phases = [Phase(kind, "copy", g, (int(root),), (P[P != root],), (1.0,))]
        unit = M
    elif kind == "alltoall":
        phases, unit = alltoall_phases(fwd, P), M / N
    elif kind in ("scatter", "gather"):
        phases = scatter_phases(fwd if kind == "scatter" else rev, root, P, kind)
        unit = M / N
    else:  # allreduce
        phases, unit, n_shares = allreduce_phases(fwd, rev, P), M, N
    b_ref = float(topology.bandwidth.max())
    t_sym = time.perf_counter()
    settings = Settings(
        bandwidth=topology.bandwidth / b_ref,
        groups=tuple((np.asarray(l, dtype=np.int64), bw / b_ref) for l, bw in groups),
        link_cost=costs,
        switch_model="exact" if switch_model == "exact" else
        ("3.13" if switch_model == "3.13" else "3.14"),
        n_shares=n_shares,
        fixed_shares=np.full(N, 1.0 / N) if (n_shares and shares == "equal") else None,
        method=method, max_rounds=max_rounds, decomposition=decomposition,
        symmetry=_symmetry(topology, P, store, copy_fwd, copy_rev, costs, groups)
        if decomposition == "mirrored" else None)
    sym_s = time.perf_counter() - t_sym
    T0 = _min_steps(phases, topology, collective)
    scale = unit / b_ref                     # seconds per normalised R
    certificate = None
    if not memory.any() and not groups and not multicast:
        certificate = _bound_s(topology, collective)
    if patience is None:
        patience = 2 if any((~p.graph.copy).any() for p in phases) else 1
    what = (f"the fluid MCF LP ({kind} on {N} NPUs"
            + (f", steps={steps})" if steps is not None else ")"))
    instead = ("use fewer steps (the default searches them from the diameter up), "
               if steps is not None else "") + \
        "a larger time_limit, or `codesign bound --method cut`"
    with lp_deadline(time_limit, what, instead):
        att, certified = _search(phases, settings, T0, steps, max_steps or (T0 + n), patience,
                                 scale, certificate, collective)
        sol = att.solution
        gaps = [sol.dual_gap]
        cost = None
        status = sol.status
        final = sol
        if secondary and sol.success and att.realisable:
            final = solve_secondary(phases, att, settings)
            gaps.append(final.dual_gap)
            cost = final.objective * unit if final.success else None
    optimal = bool(sol.success and final.success and att.realisable)
    flows = _flows(phases, att, final, unit)
    share_map = None
    if n_shares:
        share_map = {int(p): max(0.0, float(v)) for p, v in zip(P, final.shares(att.lp))}
    dstats = None
    if decomposition != "none" and att.dw_stats is not None:
        dstats = att.dw_stats.to_dict()
        for k in ("lower_bound", "gap"):
            dstats.pop(k)
        lb = dstats.pop("r_lower_bound")
        dstats["lower_bound_s"] = None if lb is None else lb * scale
        if settings.symmetry is not None:
            dstats["classes"] = settings.symmetry.n_classes
            dstats["symmetry_s"] = sym_s
    return McfResult(kind, M, sol.R * scale, optimal, status, float(max(gaps)), cost,
                     att.steps, certified, att.rounds, att.switch_copies, switch_model,
                     flows, share_map, att.lp.shape, decomposition, dstats)


def _symmetry(topology, P, store, copy_fwd, copy_rev, costs, groups):
    """Symmetry classes of the participants (roles, bandwidths, costs, groups preserved)."""
    from topologies.symmetry import npu_classes

    part = np.zeros(topology.n_nodes, dtype=bool)
    part[P] = True
    labels = [(bool(part[v]), bool(store[v]), bool(copy_fwd[v]), bool(copy_rev[v]))
              for v in range(topology.n_nodes)]
    return npu_classes(topology, [int(p) for p in P], link_cost=costs, labels=labels,
                       groups=groups)


# ------------------------------------------------------------------ helpers
def _search(phases, settings, T0, steps, max_steps, patience, scale, certificate, collective):
    """Solve at the given ``T``, or search ``T`` upwards (module docstring)."""
    def at(T, splits=None) -> Attempt:
        try:
            return solve_at(phases, T, settings, splits)
        except StepsTooSmall:
            raise InfeasibleError(f"{collective.kind} needs at least {T0} steps "
                                  f"(a pair is {T0} hops apart); steps={T} is too few") from None

    def certifies(att: Attempt) -> bool:
        return certificate is not None and att.solution.success and \
            att.solution.R * scale <= certificate * (1 + CERT_TOL)

    if steps is not None:
        att = at(steps)
        return att, certifies(att)
    att = at(T0)
    T = T0
    while not certifies(att) and T < max_steps and T - att.steps < patience \
            and att.solution.success:
        T += 1
        nxt = at(T, att.splits)
        if nxt.solution.success and nxt.solution.R < att.solution.R * (1 - IMPROVE_TOL):
            att = nxt
    return att, certifies(att)


def _min_steps(phases: list[Phase], topology, collective) -> int:
    """Largest hop distance of a pair that must communicate (no smaller T works)."""
    T0 = 1
    for p in phases:
        for o, d in zip(p.origins, p.destinations):
            h = p.graph.hops[o, d]
            if h.max() >= UNREACHABLE:
                bad = int(d[np.argmax(h)])
                a, b = (bad, o) if p.graph.reversed else (o, bad)
                raise InfeasibleError(f"{collective.kind} on {topology.name!r} is impossible: "
                                      f"NPU {b} cannot be reached from NPU {a}")
            T0 = max(T0, int(h.max()))
    return T0


def _bound_s(topology, collective) -> float:
    """Largest bandwidth component of the cut lower bound, seconds."""
    from evaluators.bounds import lower_bound

    b = lower_bound(topology, collective)
    return max(v for k, v in b.components.items() if k != "latency")


def _flows(phases, att: Attempt, sol, unit: float) -> tuple[OriginFlow, ...]:
    out = []
    specs = [(p, o) for p in phases for o in p.origins]
    for i, ((p, o), block) in enumerate(zip(specs, att.lp.blocks)):
        w, f = edge_values(block, sol.block_x(att.lp, i))
        out.append(OriginFlow(p.name, int(o), block.net.destinations, p.graph.reversed,
                              block.net, w * unit, sp.csr_array(f * unit)))
    return tuple(out)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


#: Slowest link group the LP takes, as a fraction of the fastest link's bandwidth.
_GROUP_BANDWIDTH_RANGE = 1e-6


def _validate(topology, collective, steps, secondary, switch_model, memory_nodes, link_groups,
              link_costs, shares, max_steps, patience, max_rounds, method):
    if not isinstance(topology, Topology):
        raise invalid("topology", topology, "a Topology; build one with "
                      "topologies.registry.from_spec (or load_topology for a file)")
    if not isinstance(collective, Collective):
        raise invalid("collective", collective, "an evaluators.collectives.Collective")
    bad = [p for p in collective.npus if not 0 <= p < topology.npus]
    if bad:
        raise invalid("collective participant", bad[0], f"an NPU id in 0..{topology.npus - 1}")
    for name, value, low in (("steps", steps, 1), ("max_steps", max_steps, 1),
                             ("patience", patience, 1)):
        if value is not None and (not _is_int(value) or value < low):
            raise invalid(name, value, f"None or an integer >= {low}")
    if not _is_int(max_rounds) or max_rounds < 0:
        raise invalid("max_rounds", max_rounds, "an integer >= 0")
    if not isinstance(secondary, bool):
        raise invalid("secondary", secondary, "True or False")
    check_choice("switch_model", switch_model, SWITCH_MODELS_API)
    if shares not in ("free", "equal"):
        raise invalid("shares", shares, "'free' or 'equal'")
    check_choice("method", method, METHODS)
    n = topology.n_nodes
    memory = np.zeros(n, dtype=bool)
    attr = topology.node_attrs.get("memory")
    if attr is not None:
        memory[: topology.npus] = np.asarray(attr, dtype=bool)
    # None means none, as the empty default (the docstring's "optional").
    memory_nodes = () if memory_nodes is None else memory_nodes
    link_groups = () if link_groups is None else link_groups
    for name, value in (("memory_nodes", memory_nodes), ("link_groups", link_groups)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise invalid(name, value, "None or a sequence" + (
                " of node ids" if name == "memory_nodes" else
                " of pairs (link ids, bandwidth in bytes/s)"))
    for m in memory_nodes:
        if not _is_int(m) or not 0 <= m < n:
            raise invalid("memory node", m, f"a node id in 0..{n - 1}")
        memory[m] = True
    clash = [p for p in collective.npus if memory[p]]
    if clash:
        raise invalid("memory node", clash[0], "a node that is not a collective participant")
    L = topology.n_links
    groups = []
    for g in link_groups:
        try:
            links, bw = g
            links = list(links)
        except (TypeError, ValueError):
            raise invalid("link group", g, "a pair (link ids, bandwidth in bytes/s)") from None
        # Integer ids only: int() truncated link 0.5 to link 0.
        if not links or any(not _is_int(x) or not 0 <= x < L for x in links):
            raise invalid("link group links", links, f"a non-empty list of link ids in 0..{L - 1}")
        links = [int(x) for x in links]
        check_number("link group bandwidth", bw)   # bytes/s
        # HiGHS solves to relative tolerances near 1e-7: a group 1e11 times slower than
        # the links (1 B/s on ring:4) came back "infeasible" (time inf) although routing
        # around it is feasible.
        floor = _GROUP_BANDWIDTH_RANGE * float(np.max(topology.bandwidth))
        if float(bw) < floor:
            raise invalid("link group bandwidth", bw, f"at least {floor:.3g} bytes/s ("
                          f"{_GROUP_BANDWIDTH_RANGE:g} x the fastest link: the LP's "
                          "numerical range)")
        groups.append((links, float(bw)))
    if link_costs is None:
        npu = np.zeros(n, dtype=bool)
        npu[: topology.npus] = True
        npu &= ~memory
        costs = (npu[topology.src] | npu[topology.dst]).astype(float)
    else:
        try:
            costs = np.asarray(link_costs, dtype=float)
        except (TypeError, ValueError, OverflowError):   # 'x', None items, 10**400
            costs = None
        if isinstance(link_costs, (str, bytes)) or costs is None or costs.shape != (L,) \
                or not np.all(np.isfinite(costs)) or np.any(costs < 0):
            raise invalid("link_costs", link_costs, f"{L} finite values >= 0, one per link")
    return memory, costs, groups
