"""Markov-chain Monte Carlo search over parallelization strategies (FlexFlow-style).

TopoOpt's Comp. x Comm. plane (NSDI'23, Sec. 4.1) searches parallelization strategies with
FlexFlow's MCMC (Jia et al., SysML'19, Sec. 6): start from a strategy, propose a random
local change, evaluate it on the *current* topology with the simulator, accept it by the
Metropolis criterion, and keep the best strategy seen, within a search budget and with
restarts.  :func:`mcmc_search` does that with :mod:`search.strategy.space`'s moves.

Acceptance (Metropolis-Hastings with a symmetric proposal, as FlexFlow)::

    accept new  if  t_new <= t_cur,  else with probability  exp(-beta (t_new - t_cur) / t_cur)

We divide by ``t_cur`` so that ``beta`` does not depend on the time scale: with the default
``beta = 20`` a move 5 % slower is accepted with probability ``e^-1``.  An infeasible
candidate (it does not fit in memory, or the evaluator cannot time it) has an infinite
time and is never accepted from a feasible state (from an infeasible one, every move is).

Parallel evaluation, same result for any number of workers
------------------------------------------------------------
Every step draws ``batch`` proposals from the current state with the chain's own random
generator, evaluates them together (``evaluate_many``: a plain loop over the candidates,
:mod:`search.strategy.chains`), then applies the Metropolis test to them
in proposal order and moves to the first accepted one (the others are discarded but their
times still count for the best-so-far).  The proposals and the acceptance draws depend only
on the seed and on the times, never on which worker finished first, so the search gives
the same result with 1 or 8 workers.  Evaluations are cached by candidate.

Budget and restarts
-------------------
``budget`` is the number of distinct candidates evaluated (cache hits are free);
``restarts`` splits it over independent chains, chain ``r`` starting from the initial
candidate with seed ``(seed, r)``; FlexFlow's "stop when the best has not improved for
half the budget" is the per-chain ``patience`` (default: half the chain's budget).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_int
from codesign.workloads.model import Workload
from search.strategy.space import MOVES, Candidate, propose

__all__ = ["SearchResult", "mcmc_search", "accept_probability"]

EvaluateMany = Callable[[Sequence[Candidate]], Sequence[float]]


@dataclass(frozen=True)
class SearchResult:
    """What :func:`mcmc_search` returns.

    Attributes
    ----------
    best : Candidate
        The fastest candidate evaluated.
    best_time_s : float
        Its iteration time, seconds.
    initial_time_s : float
        The initial candidate's time, seconds (``inf`` if infeasible).
    evaluations : int
        Distinct candidates evaluated.
    accepted, proposed : int
        Metropolis steps taken and proposals tested.
    history : tuple of float
        Best time after each step (for convergence plots), seconds.
    times : dict of str to float
        Every evaluated candidate's key and time.
    """

    best: Candidate
    best_time_s: float
    initial_time_s: float
    evaluations: int
    accepted: int
    proposed: int
    history: tuple[float, ...] = ()
    times: dict[str, float] = field(default_factory=dict, repr=False)


def accept_probability(t_new: float, t_cur: float, beta: float) -> float:
    """Metropolis acceptance probability of moving from ``t_cur`` to ``t_new`` (seconds).

    From an infeasible state (``t_cur`` infinite) every move is accepted, so a chain that
    starts where nothing fits walks until it finds a feasible region; into an infeasible
    state from a feasible one never.
    """
    if not math.isfinite(t_cur):
        return 1.0
    if not math.isfinite(t_new):
        return 0.0
    if t_new <= t_cur:
        return 1.0
    if t_cur <= 0.0:  # nothing is relatively close to a zero time: only improvements
        return 0.0
    return math.exp(-beta * (t_new - t_cur) / t_cur)


def mcmc_search(workload: Workload, initial: Candidate, evaluate_many: EvaluateMany, *,
                budget: int = 64, restarts: int = 1, batch: int = 4, beta: float = 20.0,
                patience: int | None = None, gpus_per_server: int = 1,
                moves: tuple[str, ...] = MOVES, seed: int = 0,
                repair: Callable[[Candidate], Candidate] | None = None,
                guide: Callable[[Candidate], tuple[str, ...] | None] | None = None
                ) -> SearchResult:
    """Search strategies by MCMC (module docstring) and return the best found.

    Parameters
    ----------
    workload : Workload
    initial : Candidate
        Starting point of every chain (e.g. :func:`~search.strategy.space.initial_candidate`).
    evaluate_many : callable
        ``evaluate_many(candidates) -> times`` in seconds, ``inf`` for infeasible ones; must
        be deterministic.
    budget : int, optional
        Distinct evaluations in total (>= 1).
    restarts : int, optional
        Independent chains sharing the budget (>= 1).
    batch : int, optional
        Proposals evaluated together per step (>= 1); part of the algorithm, not of the
        hardware: the same ``batch`` gives the same result for any number of workers.
    beta : float, optional
        Inverse temperature on relative time differences (> 0).
    patience : int, optional
        A chain stops after this many evaluations without improving its best
        (default: half its budget, FlexFlow's rule).
    gpus_per_server : int, optional
        For table moves.
    moves : tuple of str, optional
        Allowed local changes (:data:`~search.strategy.space.MOVES`).
    seed : int, optional
    repair : callable, optional
        ``repair(proposal) -> candidate``, applied to every proposal before it is timed
        (deterministic); e.g. :func:`search.strategy.feasible.fit_to_memory`, which adds
        the memory a proposal needs instead of letting it fail.  ``None``: proposals are
        timed as drawn (FlexFlow's MCMC).
    guide : callable, optional
        ``guide(current) -> moves or None``: the moves that act on the current state's
        largest cost (:func:`search.strategy.space.guided_moves` of its time breakdown);
        each proposal is drawn from them with probability 1/2 (from the chain's own
        generator), else from ``moves``, so every move stays possible.  ``None``: every
        proposal from ``moves``.

    Returns
    -------
    SearchResult

    Examples
    --------
    >>> from codesign.workloads import get_workload
    >>> from search.strategy.space import initial_candidate
    >>> w = get_workload("resnet50")
    >>> toy = lambda cs: [1 + abs(c.strategy.dp - 8) for c in cs]
    >>> r = mcmc_search(w, initial_candidate(w, 64), toy, budget=40, moves=("axes",), seed=1)
    >>> r.best.strategy.dp
    8
    """
    check_int("budget", budget, 1)
    check_int("restarts", restarts, 1)
    check_int("batch", batch, 1)
    if patience is not None:
        check_int("patience", patience, 1)
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0 \
            or not math.isfinite(beta):
        raise invalid("beta", beta, "a positive number")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise invalid("seed", seed, "an integer")

    cache: dict[Candidate, float] = {}

    def times_of(cands: Sequence[Candidate]) -> list[float]:
        todo = list(dict.fromkeys(c for c in cands if c not in cache))
        if todo:
            got = list(evaluate_many(todo))
            if len(got) != len(todo):
                raise ValueError(f"evaluate_many returned {len(got)} times for "
                                 f"{len(todo)} candidates")
            for c, t in zip(todo, got):
                t = float(t)
                cache[c] = t if t == t else math.inf  # NaN counts as infeasible
        return [cache[c] for c in cands]

    t0 = times_of([initial])[0]
    best, best_t = initial, t0
    accepted = proposed = 0
    history: list[float] = []
    # The start is one of the budget's evaluations; the chains share the rest.
    rest = budget - 1
    per_chain = [rest // restarts + (1 if r < rest % restarts else 0)
                 for r in range(restarts)]
    for r, chain_budget in enumerate(per_chain):
        rng = np.random.default_rng([seed, r])
        cur, cur_t = initial, t0
        chain_best_t, since = t0, 0
        stop_after = patience if patience is not None else max(1, chain_budget // 2)
        start = len(cache)
        while len(cache) - start < chain_budget and since < stop_after:
            before = len(cache)
            hint = tuple(m for m in (guide(cur) or ()) if m in moves) if guide else ()
            props = [p for p in (propose(cur, workload, rng, gpus_per_server=gpus_per_server,
                                         moves=hint if hint and rng.random() < 0.5
                                         else moves)
                                 for _ in range(batch)) if p is not None]
            if not props:
                break
            if repair is not None:
                props = [repair(p) for p in props]
            # Never evaluate more than the chain has left: trim the batch.
            fresh = [p for p in dict.fromkeys(props) if p not in cache]
            left = chain_budget - (len(cache) - start)
            if len(fresh) > left:
                keep = set(fresh[:left])
                props = [p for p in props if p in cache or p in keep]
            ts = times_of(props)
            draws = rng.random(len(props))
            # Every timed proposal counts for the best-so-far, also those after the one
            # the chain moves to (the loop below stops there).
            for p, t in zip(props, ts):
                if t < best_t:
                    best, best_t = p, t
            for p, t, u in zip(props, ts, draws):
                proposed += 1
                if u < accept_probability(t, cur_t, beta):
                    cur, cur_t = p, t
                    accepted += 1
                    break
            if min(ts) < chain_best_t:
                chain_best_t, since = min(ts), 0
            else:
                since += max(1, len(cache) - before)
            history.append(best_t)
    return SearchResult(best=best, best_time_s=best_t, initial_time_s=t0,
                        evaluations=len(cache), accepted=accepted, proposed=proposed,
                        history=tuple(history),
                        times={c.key(): t for c, t in cache.items()})
