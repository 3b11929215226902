"""Several seeded TACOS-GREEDY instances, the fastest kept.

TACOS (Won et al., MICRO 2024), Section VI-C "Jitter in Search Result": the
greedy matching is randomized, so the quality of one synthesized algorithm
fluctuates; because one search is fast, several independent instances are run
concurrently and the best algorithm is kept.

:func:`best_instance` runs ``synth(seed)`` for every seed in this process
(``workers=1``), as Ray tasks when Ray is already initialised in the process
(it is never started here), or in a :class:`concurrent.futures.ProcessPoolExecutor`
otherwise.  Each instance is deterministic for its seed, and the winner is the
minimum ``(time_s, seed)``, so the result does not depend on the number of
workers or on completion order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

__all__ = ["best_instance"]


def _better(candidate, seed: int, best, best_seed: int | None) -> bool:
    """Whether ``candidate`` (from ``seed``) beats ``best``: faster, ties to the lower seed."""
    return best is None or (candidate.time_s, seed) < (best.time_s, best_seed)


def _ray():
    """The ``ray`` module if it is imported and initialised in this process, else None."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return ray
    return None


def _call(synth: Callable, seed: int):
    return synth(seed)


def _ray_results(ray, synth: Callable, seeds: list[int], workers: int):
    """``(seed, schedule)`` pairs from Ray tasks, at most ``workers`` in flight."""
    task = ray.remote(_call)
    todo, running = list(seeds), {}
    while todo or running:
        while todo and len(running) < workers:
            seed = todo.pop(0)
            running[task.remote(synth, seed)] = seed
        done, _ = ray.wait(list(running), num_returns=1)
        for ref in done:
            yield running.pop(ref), ray.get(ref)


def _pool_results(synth: Callable, seeds: list[int], workers: int):
    """``(seed, schedule)`` pairs from a process pool of ``workers`` processes."""
    with ProcessPoolExecutor(max_workers=min(workers, len(seeds))) as pool:
        futures = [pool.submit(synth, s) for s in seeds]
        for i, seed in enumerate(seeds):
            sched = futures[i].result()
            futures[i] = None            # keep only the best schedule alive
            yield seed, sched


def best_instance(synth: Callable, seeds: Sequence[int], *, workers: int = 1):
    """Run ``synth(seed)`` for each seed and keep the fastest schedule.

    Parameters
    ----------
    synth : callable
        ``synth(seed) -> Schedule``; picklable (a module-level function or a
        :func:`functools.partial` of one) when ``workers > 1``.
    seeds : sequence of int
        Seeds, one instance each (non-empty).
    workers : int, optional
        1 runs the instances one after the other in this process (only the
        best schedule is kept in memory); more runs up to ``workers`` at once,
        as Ray tasks (one CPU each) if Ray is initialised, else in worker
        processes.

    Returns
    -------
    tuple
        ``(schedule, seed)`` of the fastest instance (smallest ``time_s``,
        seconds; ties to the lowest seed).
    """
    best, best_seed = None, None
    seeds = [int(s) for s in seeds]
    if workers <= 1 or len(seeds) == 1:
        results = ((s, synth(s)) for s in seeds)
    elif (ray := _ray()) is not None:
        results = _ray_results(ray, synth, seeds, workers)
    else:
        results = _pool_results(synth, seeds, workers)
    for s, sched in results:
        if _better(sched, s, best, best_seed):
            best, best_seed = sched, s
    return best, best_seed
