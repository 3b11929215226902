"""The strategy search space: :class:`Candidate` and its random local changes.

A candidate is what the strategy search proposes and the iteration model evaluates: a
parallelization :class:`~codesign.workloads.Strategy` plus its device placement (the rank
order of :class:`~codesign.workloads.placement.Placement` and, for ``embedding=model``,
the server of every embedding table).  The GPU count is fixed by the job: every move
keeps ``dp x tp x pp`` equal to it.

Moves (:func:`propose`) are FlexFlow-style *random local changes*: FlexFlow's MCMC
(Jia et al., SysML'19, Sec. 6) changes the parallel configuration of one operator at a
time.  Our strategies are uniform over the model's layers (Megatron style), so a local
change alters one dimension of the configuration:

``axes``
    move one prime factor between two of ``dp``, ``tp``, ``pp`` and, for workloads with
    attention, ``cp`` (the GPU count stays);
``microbatches``
    double or halve the number of micro-batches (pipeline micro-batches, or gradient
    accumulation steps without pipelining);
``zero``
    ZeRO stage up or down by one (any stage, with or without pipelining);
``recompute``
    activation recomputation one step up or down (none, selective, partial --
    ``recompute_layers`` a quarter, half, three quarters of a chunk's blocks -- full);
``sp``
    sequence parallelism on or off (with ``tp > 1``);
``schedule``
    pipeline schedule: 1F1B, interleaved (``vpp`` doubled or halved), GPipe;
``ep``
    multiply or divide the expert-parallel degree by a prime (MoE workloads); beyond
    ``dp`` the experts fold ``tp x dp`` (``etp=1``);
``embedding``
    switch embedding tables between replicated (``data``) and placed (``model``, TopoOpt
    Sec. 2.1's hybrid);
``order``
    swap two axes of the placement's rank order (which groups share a server);
``table``
    move one embedding table to another server (``embedding=model``).

A proposal that breaks a rule of :func:`~codesign.workloads.strategy.check_applicable`
(batch divisibility, heads, ...) is redrawn, a bounded number of times; memory
feasibility is the evaluator's business (it raises
:class:`~codesign.errors.InfeasibleError`, which the search treats as an infinite time).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from codesign.workloads.model import Workload
from codesign.workloads.placement import DEFAULT_ORDER, Placement
from codesign.workloads.strategy import (
    Strategy, as_strategy, check_applicable, is_table, recompute_ladder,
    with_expert_parallelism)

__all__ = ["Candidate", "MOVES", "MOVES_BY_COST", "guided_moves", "workload_moves", "propose",
           "initial_candidate", "prime_factors", "divisors", "replica_batch"]

#: The kinds of local change, in the order :func:`propose` draws from.
MOVES = ("axes", "microbatches", "zero", "ep", "embedding", "order", "table", "recompute",
         "sp", "schedule")
_REDRAWS = 64
#: The moves that act on each part of an iteration's time (the keys of
#: :attr:`evaluators.iteration.IterationResult.breakdown`): what a bottleneck-guided
#: proposal draws from (:func:`guided_moves`).  Ours, from how each cost arises: gradient
#: traffic falls with a lower ZeRO stage (ZeRO-2/3 reduce every micro-batch), fewer
#: micro-batches, less data parallelism and, for mixture-of-experts models, another
#: expert-parallel degree (each expert's gradients are reduced over its own replicas;
#: ``ep`` is redrawn away for dense models); the bubble with more micro-batches or an
#: interleaved schedule; TP traffic with less tensor parallelism, sequence parallelism or
#: another rank order; recomputation with more memory headroom (micro-batches, ZeRO).
MOVES_BY_COST: dict[str, tuple[str, ...]] = {
    "dp_s": ("zero", "microbatches", "axes", "ep"),
    "zero_s": ("zero", "microbatches", "axes", "ep"),
    "tp_s": ("axes", "sp", "order"),
    "pp_s": ("schedule", "axes", "order"),
    "bubble_s": ("microbatches", "schedule", "axes"),
    "cp_s": ("axes", "order"),
    "ep_s": ("ep", "axes", "order"),
    "embedding_s": ("embedding", "table"),
    "recompute_s": ("recompute", "microbatches", "zero", "axes"),
}


@dataclass(frozen=True)
class Candidate:
    """A strategy with its placement (see the module docstring).

    Attributes
    ----------
    strategy : Strategy
    order : tuple of str
        Placement rank order, fastest-varying first (a permutation of tp, dp, pp).
    table_servers : tuple of int or None
        Server of each embedding table with ``embedding=model``; ``None`` = round robin.
    """

    strategy: Strategy
    order: tuple[str, ...] = DEFAULT_ORDER
    table_servers: tuple[int, ...] | None = None

    def placement(self, gpus_per_server: int) -> Placement:
        """The :class:`Placement` of this candidate on servers of ``gpus_per_server`` GPUs."""
        tables = self.table_servers if self.strategy.embedding == "model" else None
        return Placement.for_strategy(self.strategy, gpus_per_server, order=self.order,
                                      table_servers=tables)

    def key(self) -> str:
        """A canonical string (cache key, record column)."""
        text = f"{self.strategy};order={'-'.join(self.order)}"
        if self.strategy.embedding == "model" and self.table_servers is not None:
            text += ";tables=" + "-".join(map(str, self.table_servers))
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": str(self.strategy), "order": list(self.order),
                "table_servers": None if self.table_servers is None
                else list(self.table_servers)}


def prime_factors(n: int) -> list[int]:
    """Prime factors of ``n`` with multiplicity, ascending (``12 -> [2, 2, 3]``)."""
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def divisors(n: int) -> list[int]:
    """Divisors of ``n >= 1``, ascending, in O(sqrt n) (``12 -> [1, 2, 3, 4, 6, 12]``)."""
    low, high, d = [], [], 1
    while d * d <= n:
        if n % d == 0:
            low.append(d)
            if d * d != n:
                high.append(n // d)
        d += 1
    return low + high[::-1]


def _tables(workload: Workload) -> int:
    return sum(1 for layer in workload.layers if is_table(layer))


def _experts(workload: Workload) -> list[int]:
    return sorted({layer.experts for layer in workload.layers if layer.experts})


def initial_candidate(workload: Workload, gpus: int, strategy: Strategy | str | None = None
                      ) -> Candidate:
    """The search's starting point: ``strategy`` or pure data parallelism on ``gpus``.

    Raises
    ------
    InvalidSpecError
        ``strategy`` does not use ``gpus`` GPUs or does not apply to the workload.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise invalid("gpus", gpus, "a positive integer")
    s = Strategy(dp=gpus) if strategy is None else as_strategy(strategy)
    if s.gpus != gpus:
        raise invalid("strategy dp*tp*pp*cp", s.gpus, f"{gpus} (the GPUs of the job)")
    try:
        check_applicable(workload, s)
    except InvalidSpecError as exc:
        if strategy is not None:
            raise
        # Say that the start was the default, not the user's, and what to do.
        raise invalid("starting strategy", f"dp={gpus} (the default: pure data "
                      f"parallelism)", f"one that applies to {workload.name} ({exc}); "
                      "give one (codesign optimize --strategy)") from None
    return Candidate(s)


def _has_attention(w: Workload) -> bool:
    return any(layer.kind == "attention" for layer in w.layers)


def replica_batch(batch: int, dp: int) -> int:
    """Samples per data-parallel replica of a global ``batch`` (0: not known, or ``dp``
    does not divide it)."""
    return batch // dp if batch and batch % dp == 0 else 0


def _consistent(s: Strategy, batch: int = 0, **values: Any) -> Strategy:
    """``s`` with ``values`` (axis degrees, micro-batches) and the knobs that depend on
    them made valid again: micro-batches at least ``pp`` (1F1B fill) -- or, when a
    replica's share of the global ``batch`` (samples; 0: not known) is smaller than
    ``pp``, one sample per micro-batch, as the feasible start runs such replicas -- and a
    multiple of ``pp`` for the interleaved schedule, ``ep`` a divisor of ``dp`` (of
    ``tp x dp`` with folded experts, ``etp=1``; times ``cp``), ``sp`` only with ``tp > 1``,
    placed tables only without model parallelism."""
    new = {k: values.get(k, getattr(s, k)) for k in ("dp", "tp", "pp", "cp")}
    micro = values.get("microbatches", s.microbatches)
    schedule, vpp = s.schedule, s.vpp
    replica = replica_batch(batch, new["dp"])
    if new["pp"] == 1:
        schedule, vpp = ("gpipe" if schedule == "gpipe" else "1f1b"), 1
        if micro is not None and "microbatches" not in values and s.pp > 1:
            micro = None
    elif 0 < replica < new["pp"]:
        # pp micro-batches (the fill; also the default) would not divide the replica's
        # batch: from 2,048 replicas of one sample and two stages (Llama 3 405B on 32,768
        # GPUs) no deeper pipeline could be proposed at all.
        micro = replica
    elif micro is not None and micro < new["pp"]:
        micro = new["pp"]
    if schedule == "interleaved":
        m = micro if micro is not None else new["pp"]
        if m % new["pp"]:
            micro = -(-m // new["pp"]) * new["pp"]
    folded = s.etp == 1 and new["tp"] > 1 and s.sp
    ranks = new["dp"] * new["cp"] * (new["tp"] if folded else 1)
    ep = s.ep if ranks % s.ep == 0 else 1
    etp = 1 if folded and ep > 1 else None
    embedding = s.embedding if new["tp"] == new["pp"] == new["cp"] == 1 else "data"
    return replace(s, microbatches=micro, ep=ep, etp=etp, embedding=embedding,
                   sp=s.sp and new["tp"] > 1, schedule=schedule, vpp=vpp, **new)


def _move_axes(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    s = c.strategy
    axes = ("dp", "tp", "pp", "cp") if _has_attention(w) else ("dp", "tp", "pp")
    values = {a: getattr(s, a) for a in axes}
    donors = [a for a in axes if values[a] > 1]
    if not donors:
        return None
    src = donors[rng.integers(len(donors))]
    others = [a for a in axes if a != src]
    dst = others[rng.integers(len(others))]
    factors = prime_factors(values[src])
    p = factors[rng.integers(len(factors))]
    values[src] //= p
    values[dst] *= p
    return replace(c, strategy=_consistent(s, batch=w.batch_size, **values))


def _move_microbatches(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    s = c.strategy
    up = s.m * 2
    down = s.m // 2
    if s.schedule == "interleaved":
        down = down if down % s.pp == 0 else 0
    if down < max(1, s.pp):
        down = 0
    m = up if rng.random() < 0.5 or not down else down
    return replace(c, strategy=_consistent(s, microbatches=m))


def _move_zero(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    s = c.strategy
    # Any other stage: the stages are not ordered in time (ZeRO-1/2 expose a gather after
    # the step that ZeRO-3 hides under compute), so a +-1 walk could not leave 0 for 3.
    options = [z for z in range(4) if z != s.zero]
    if s.data_ranks == 1 or not options:
        return None
    return replace(c, strategy=replace(s, zero=options[rng.integers(len(options))]))


def _move_recompute(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    # One step along the recomputation ladder (none, selective, partial, full).
    s = c.strategy
    ladder = recompute_ladder(w, s)
    if s not in ladder:   # a count beyond this stage shape's rungs, or an idle mode
        i = len(ladder) - 1 if s.recompute == "full" else 0
        return replace(c, strategy=ladder[i])
    i = ladder.index(s)
    options = [ladder[j] for j in (i - 1, i + 1) if 0 <= j < len(ladder)]
    return replace(c, strategy=options[rng.integers(len(options))])


def _move_sp(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    s = c.strategy
    if s.tp == 1:
        return None
    return replace(c, strategy=replace(s, sp=not s.sp))


def _move_schedule(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    s = c.strategy
    if s.pp < 2:
        return None
    options: list[tuple[str, int]] = [(x, 1) for x in ("1f1b", "gpipe") if x != s.schedule]
    if s.schedule == "interleaved":
        options += [("interleaved", v) for v in (s.vpp * 2, s.vpp // 2) if v >= 2]
    else:
        options.append(("interleaved", 2))
    schedule, vpp = options[rng.integers(len(options))]
    micro = s.m
    if schedule == "interleaved" and micro % s.pp:
        micro = -(-micro // s.pp) * s.pp
    return replace(c, strategy=replace(s, schedule=schedule, vpp=vpp,
                                       microbatches=micro if micro != s.m else s.microbatches))


def _move_ep(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    # Multiply or divide ep by a prime; beyond dp x cp the experts fold tp x dp x cp
    # (etp=1).
    s = c.strategy
    experts = _experts(w)
    if not experts:
        return None
    ranks = s.tp * s.data_ranks
    options = []
    for p in sorted(set(prime_factors(ranks))):
        e = s.ep * p
        if ranks % e == 0 and all(x % e == 0 for x in experts):
            options.append(e)
    options += [s.ep // p for p in sorted(set(prime_factors(s.ep)))]
    if not options:
        return None
    placed = with_expert_parallelism(s, options[rng.integers(len(options))])
    return None if placed is None else replace(c, strategy=placed)


def _move_embedding(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    s = c.strategy
    if not _tables(w) or s.tp != 1 or s.pp != 1:
        return None
    other = "data" if s.embedding == "model" else "model"
    return replace(c, strategy=replace(s, embedding=other))


def _move_order(c: Candidate, rng: np.random.Generator, w: Workload) -> Candidate | None:
    i, j = rng.choice(3, size=2, replace=False)
    order = list(c.order)
    order[i], order[j] = order[j], order[i]
    return replace(c, order=tuple(order))


def _move_table(c: Candidate, rng: np.random.Generator, w: Workload, servers: int
                ) -> Candidate | None:
    n = _tables(w)
    if c.strategy.embedding != "model" or not n or servers < 2:
        return None
    current = list(c.table_servers) if c.table_servers is not None \
        else [i % servers for i in range(n)]
    t = int(rng.integers(n))
    choices = [s for s in range(servers) if s != current[t]]
    current[t] = choices[rng.integers(len(choices))]
    return replace(c, table_servers=tuple(current))


def workload_moves(workload: Workload, moves: tuple[str, ...]) -> tuple[str, ...]:
    """``moves`` without the kinds that cannot change ``workload``'s strategy (``ep``
    without experts; ``embedding`` and ``table`` without embedding tables), so that a
    guided draw (:func:`guided_moves`) spends its random numbers as an unguided one of
    the same moves would.

    >>> from codesign.workloads import get_workload
    >>> workload_moves(get_workload("llama3-8b"), ("zero", "ep", "table"))
    ('zero', 'table')
    """
    drop = set()
    if not _experts(workload):
        drop.add("ep")
    if not _tables(workload):
        drop |= {"embedding", "table"}
    return tuple(m for m in moves if m not in drop)


def guided_moves(breakdown: dict[str, float] | None, *, share: float = 0.05
                 ) -> tuple[str, ...] | None:
    """The moves acting on the largest part of an iteration's time other than its
    compute (:data:`MOVES_BY_COST`), when that part is at least ``share`` of the
    iteration; ``None`` otherwise (nothing to guide by: compute-bound, or no result).

    Examples
    --------
    >>> guided_moves({"compute_s": 10.0, "dp_s": 30.0, "tp_s": 1.0})
    ('zero', 'microbatches', 'axes', 'ep')
    >>> guided_moves({"compute_s": 10.0, "tp_s": 0.1}) is None
    True
    """
    if not breakdown:
        return None
    total = sum(v for v in breakdown.values() if v > 0)
    costs = [(v, k) for k, v in breakdown.items() if k in MOVES_BY_COST and v > 0]
    if not costs or total <= 0:
        return None
    v, k = max(costs)
    return MOVES_BY_COST[k] if v >= share * total else None


def propose(candidate: Candidate, workload: Workload, rng: np.random.Generator, *,
            gpus_per_server: int = 1, moves: tuple[str, ...] = MOVES) -> Candidate | None:
    """One random local change of ``candidate`` that the workload accepts.

    Parameters
    ----------
    candidate : Candidate
    workload : Workload
    rng : numpy.random.Generator
        Source of randomness (the same state gives the same proposal).
    gpus_per_server : int, optional
        GPUs per server, to know the servers a table may move to.
    moves : tuple of str, optional
        Subset of :data:`MOVES` to draw from.

    Returns
    -------
    Candidate or None
        ``None`` when no applicable change was found in a bounded number of draws
        (e.g. one GPU and nothing to change).
    """
    unknown = [m for m in moves if m not in MOVES]
    if unknown or not moves:
        raise invalid("moves", list(moves), f"a non-empty subset of {', '.join(MOVES)}")
    servers = max(1, candidate.strategy.gpus // gpus_per_server)
    for _ in range(_REDRAWS):
        move = moves[rng.integers(len(moves))]
        try:
            if move == "table":
                new = _move_table(candidate, rng, workload, servers)
            else:
                new = _MOVES[move](candidate, rng, workload)
            if new is None or new == candidate:
                continue
            check_applicable(workload, new.strategy)
        except InvalidSpecError:   # the change breaks a rule of the strategy or workload
            continue
        return new
    return None


_MOVES = {"axes": _move_axes, "microbatches": _move_microbatches, "zero": _move_zero,
          "ep": _move_ep, "embedding": _move_embedding, "order": _move_order,
          "recompute": _move_recompute, "sp": _move_sp, "schedule": _move_schedule}
