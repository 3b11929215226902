"""Model-only answers: an algorithm's time without materialising its per-NPU schedule.

A full schedule holds at least one transfer per chunk delivery
(:func:`evaluators.estimates.min_transfers`): ``2 c N (N-1)`` for an
all-reduce, 1.3e8 for Themis' 64 chunks on a 1024-NPU Table 2 platform.  Where
an algorithm has an exact model of its own time, ``codesign synth`` answers
from it instead when the schedule is not asked for (``--out`` or
``--option schedule=true``) and would be too large (:func:`wants_model_only`),
and marks the answer ``model_only: true``:

* ``themis`` and ``hierarchical`` (its static baseline) on multi-dimensional
  networks: Themis ISCA'22 Algorithm 1 plus the Sec. 4.4 event model
  (:func:`evaluators.algorithms.themis.themis_model`), with the per-dimension
  bandwidth time and load, and the static baseline's time for the speed-up
  (the comparison of Themis Sec. 6.1 / Fig. 8);
* ``ring`` and ``bidir-ring`` on rings, ``direct`` on fully-connected
  networks with uniform links: the closed forms of
  :mod:`evaluators.algorithms.closed_form`, which equal the ``congestion``
  replay of the schedule (tests/evaluators/test_algorithms_closed_form.py).

No schedule exists to validate, so ``valid`` and ``transfers`` are ``None``.
"""

from __future__ import annotations

import time
from typing import Any

from evaluators.collectives import Collective

__all__ = ["MODEL_ONLY_TRANSFERS", "wants_model_only", "model_only_answer"]

#: Above this many transfers (a lower bound) a full schedule takes more than ~10 s to
#: build, validate and report (measured: 2.1e6 transfers, 36 s for the hierarchical
#: schedule of a 1024-NPU Table 2 platform), so ``codesign synth`` answers from the model.
MODEL_ONLY_TRANSFERS = 500_000
#: Largest nodes + links for which the answer includes the cut lower bound (one networkx
#: max-flow on the whole graph: < 1 s on the Table 2 platforms, 15-30k; ~12 s for the full
#: bound on ring:20000, 60k, on the benchmark machine).
BOUND_MAX_SIZE = 40_000

#: Algorithm -> options the model honours (any other option needs the real schedule).
_THEMIS_OPTIONS = {"themis": ("chunks", "policy", "baseline", "link_order"), "hierarchical": ()}
#: Closed-form algorithm -> (dimension kinds it is exact on, collective kinds).
_CLOSED = {"ring": (("ring", "uniring"), ("allgather", "reducescatter", "allreduce",
                                           "broadcast", "reduce")),
           "bidir-ring": (("ring",), ("allgather", "reducescatter", "allreduce", "broadcast",
                                      "reduce")),
           "direct": (("fc",), ("allgather", "reducescatter", "allreduce", "alltoall",
                                "broadcast", "reduce", "scatter", "gather"))}


def _has_model(topology, collective: Collective, algorithm: str, options: dict) -> bool:
    if not topology.dims:
        return False
    if algorithm in _THEMIS_OPTIONS:
        return (collective.kind in ("allreduce", "reducescatter", "allgather")
                and sorted(collective.npus) == list(range(topology.npus))
                and all(k in _THEMIS_OPTIONS[algorithm] for k in options))
    if algorithm in _CLOSED:
        dim_kinds, kinds = _CLOSED[algorithm]
        uniform = (topology.bandwidth.min() == topology.bandwidth.max()
                   and topology.latency.min() == topology.latency.max())
        root_ok = collective.root in (None, 0)
        return (not options and collective.npus == tuple(range(topology.npus))
                and len(topology.dims) == 1 and topology.dims[0].links == 1
                and topology.dims[0].kind in dim_kinds and collective.kind in kinds
                and uniform and root_ok and topology.switches == 0)
    return False


def wants_model_only(topology, collective: Collective, algorithm: str, options: dict, *,
                     full_schedule: bool) -> bool:
    """Whether ``synth`` should answer from the algorithm's model instead of a schedule.

    True when no per-NPU schedule is asked for (``full_schedule``), the
    algorithm has an exact model on this network (module docstring), and the
    full schedule would need more than :data:`MODEL_ONLY_TRANSFERS` transfers or
    more memory than the limit (:mod:`codesign.resources`).  Otherwise the full
    schedule is built (and :func:`evaluators.estimates.check_synthesis` refuses
    it if it would not fit).
    """
    from codesign.resources import memory_limit
    from evaluators.estimates import estimate_schedule_bytes

    if full_schedule or not _has_model(topology, collective, algorithm, options):
        return False
    transfers, nbytes = estimate_schedule_bytes(collective, algorithm, options, topology)
    return transfers > MODEL_ONLY_TRANSFERS or nbytes > memory_limit()


def model_only_answer(topology, collective: Collective, algorithm: str,
                      options: dict | None = None) -> dict[str, Any]:
    """The JSON fields of ``codesign synth --json`` from the algorithm's model.

    Returns
    -------
    dict
        ``npus, collective, algorithm, size_bytes, chunks, time_s, algbw_Bps,
        busbw_Bps, lower_bound_s, synthesis_s`` as for a schedule, ``valid`` and
        ``transfers`` None, ``model_only: true`` and ``model`` (which model);
        ``lower_bound_s`` is None (with ``lower_bound_note``) above
        :data:`BOUND_MAX_SIZE` nodes + links;
        Themis/hierarchical add ``baseline_time_s``, ``speedup_over_baseline``,
        ``mean_utilization`` and per-dimension ``dimensions``.
    """
    from evaluators.bounds import lower_bound

    options = dict(options or {})
    t0 = time.perf_counter()
    if algorithm in _THEMIS_OPTIONS:
        extra = _themis(topology, collective, algorithm, options)
    else:
        extra = _closed(topology, collective, algorithm)
    t = extra.pop("time_s")
    synthesis_s = time.perf_counter() - t0
    bound: float | None = None
    if topology.n_nodes + topology.n_links <= BOUND_MAX_SIZE:
        # A smaller max-flow budget keeps the answer in seconds at 1024 NPUs; the bound
        # stays a valid lower bound (the same value on the Table 2 platforms).
        bound = lower_bound(topology, collective, exact_node_limit=64).time_s
    else:
        extra["lower_bound_note"] = (f"not computed: the cut bound runs max-flows on all "
                                     f"{topology.n_nodes} nodes (minutes)")
    return {
        "npus": topology.npus, "collective": collective.kind, "algorithm": algorithm,
        "size_bytes": collective.size_bytes, "chunks": extra.pop("chunks"), "time_s": t,
        "algbw_Bps": collective.algbw(t), "busbw_Bps": collective.busbw(t),
        "lower_bound_s": bound,
        "synthesis_s": synthesis_s, "valid": None, "transfers": None, "model_only": True,
        **extra,
    }


def _themis(topology, collective: Collective, algorithm: str, options: dict) -> dict:
    from evaluators.algorithms.themis import themis_model

    if algorithm == "themis":
        c0 = collective.chunks_per_npu
        chunks = options.get("chunks", 64)
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            from codesign.errors import invalid

            raise invalid("themis chunks", chunks, "an integer >= 1")
        chunks = -(-chunks // c0) * c0
        policy = options.get("policy", "scf")
        baseline = bool(options.get("baseline", False))
    else:  # the static hierarchical baseline: its own chunking, FIFO
        chunks, policy, baseline = collective.chunks_per_npu, "fifo", True
    kind, size = collective.kind, collective.size_bytes
    model = themis_model(topology.dims, kind, size, chunks=chunks, policy=policy,
                         baseline=baseline)
    base = model if baseline else themis_model(topology.dims, kind, size, chunks=chunks,
                                               policy="fifo", baseline=True)
    t = model["time_s"]
    dims = [{"kind": d.kind, "size": d.size, "bandwidth_Bps": bw, "busy_s": busy,
             "utilization": u, "load_s": load}
            for d, bw, busy, u, load in zip(topology.dims, model["bandwidth_Bps"],
                                             model["busy_s"], model["utilization"],
                                             model["load_s"])]
    return {"time_s": t, "chunks": chunks,
            "model": "Themis ISCA'22 Sec. 4.4 event model (no per-NPU schedule; pass --out "
                     "or --option schedule=true for one)",
            "policy": policy, "baseline": baseline, "baseline_time_s": base["time_s"],
            "speedup_over_baseline": base["time_s"] / t if t > 0 else None,
            "mean_utilization": model["mean_utilization"], "dimensions": dims}


def _closed(topology, collective: Collective, algorithm: str) -> dict:
    from evaluators.algorithms.closed_form import closed_form_time

    t = closed_form_time(algorithm, collective.kind, collective.n, collective.size_bytes,
                         float(topology.bandwidth[0]), float(topology.latency[0]),
                         chunks=collective.chunks_per_npu)
    # bidir-ring splits every shard into 2c chunks (one half per direction).
    chunks = collective.chunks_per_npu * (2 if algorithm == "bidir-ring" else 1)
    return {"time_s": t, "chunks": chunks,
            "model": f"closed form of {algorithm} on {topology.dims[0].kind} "
                     f"(evaluators.algorithms.closed_form; equals the congestion replay)"}
