"""The ``codesign`` command line (docs/architecture.md section 6): a thin front end.

Every command accepts ``--json`` and then prints one JSON object on stdout.
Bad input prints one line on stderr and exits with status 2; a valid but
impossible request (:class:`~codesign.errors.InfeasibleError`) exits with 1.
The library does the work; this module only parses arguments, calls it and
prints.  Heavy packages are imported inside the command handlers so that
``codesign --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from codesign.errors import CodesignError, InfeasibleError, InvalidSpecError, invalid
from codesign.files import (check_output_folder, check_output_path, load_yaml_text,
                             write_text_atomic)
from codesign.specs import check_choice
from codesign.units import BARE_BANDWIDTH_BPS, format_size, parse_bandwidth, parse_size

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line and exit 2."""

    #: Set by :func:`main` when the command line asks for ``--json``.
    json_errors = False

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        if _Parser.json_errors:
            print(json.dumps({"error": f"{message} (see --help)", "kind": "usage",
                              "field": None, "exit": 2}))
            self.exit(2)
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _emit(args: argparse.Namespace, payload: dict[str, Any], human: Callable[[], None] | None = None
          ) -> int:
    """Print ``payload`` (one JSON object with ``--json``, else ``human()`` or key: value
    lines); returns the exit status 0."""
    if args.json:
        print(json.dumps(_finite_json(payload), default=_json_default, allow_nan=False))
    elif human is not None:
        human()
    else:
        for key, value in payload.items():
            if isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
                print(f"{key}: {len(value)}")
                for item in value[:_HUMAN_ROWS]:
                    print("  " + _human_value(item))
                if len(value) > _HUMAN_ROWS:
                    print(f"  ... {len(value) - _HUMAN_ROWS} more (--json for all)")
            else:
                print(f"{key}: {_human_value(value)}")
    return 0


#: Rows of a list printed by the plain key: value output (the rest with --json).
_HUMAN_ROWS = 20


def _human_value(value: Any) -> str:
    """One value of the plain key: value output, as a reader wants it (no Python reprs:
    ``none`` for None, yes/no, dicts as ``k v`` pairs)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_human_value(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(_human_value(v) for v in value) or "none"
    return str(value)


def _finite_json(value: Any, notes: dict[str, str] | None = None, key: str = "") -> Any:
    """``value`` with every NaN/inf float replaced by None (JSON has neither).

    The top-level payload gets ``null_reasons: {field: "infinite" | "not a number"}``
    so that a null is never silent.
    """
    import math

    top = notes is None
    notes = {} if top else notes
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        try:
            f = float(value)
        except (TypeError, ValueError):
            return value
        if not math.isfinite(f):
            notes[key or "value"] = "not a number" if f != f else "infinite"
            return None
        return value
    if isinstance(value, dict):
        out = {k: _finite_json(v, notes, f"{key}.{k}" if key else str(k))
               for k, v in value.items()}
    elif isinstance(value, (list, tuple)):
        out = [_finite_json(v, notes, f"{key}[{i}]") for i, v in enumerate(value)]
    else:
        return value
    if top and notes and isinstance(out, dict):
        out["null_reasons"] = notes
    return out


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _parse_options(items: Sequence[str] | None) -> dict[str, Any]:
    """``--option key=value`` pairs; values are read as YAML (``rings=2``, ``order=[3,1,2,0]``)."""
    options: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise invalid("--option", item, "KEY=VALUE with a non-empty value, e.g. rings=2 or "
                          "order=[0,2,1,3]")
        try:  # the safe reader: alias bombs and deep nesting are refused here too
            options[key.strip()] = load_yaml_text(text, where=f"--option {key.strip()}")
        except InvalidSpecError as exc:
            raise invalid(f"--option {key.strip()}", text,
                          f"a YAML value (number, list, string): {exc}") from None
    return options


def _write_topology(topology, routes: dict, path: Path, routes_path: Path) -> None:
    """The topology YAML and its routes JSON (``{"src-dst": [[servers...], ...]}``)."""
    from topologies.yaml_io import dump_yaml_topology

    dump_yaml_topology(topology, path)
    write_text_atomic(routes_path, json.dumps({f"{s}-{d}": [list(map(int, p)) for p in paths]
                                               for (s, d), paths in sorted(routes.items())}),
                      what="routes file")


def _hardware_catalog(path: str | None):
    """The catalog of ``--hardware-file`` (``None``: the built-in one)."""
    if path is None:
        return None
    from codesign.workloads.hardware import load_hardware_catalog

    return load_hardware_catalog(path)


def _failure_study(text: str):
    """The failure what-if of ``--fail`` (``links=10%,seed=S,samples=N``)."""
    from search.failure_whatif import FailureStudy
    from topologies.failures import parse_failure_spec

    spec = parse_failure_spec(text)
    return FailureStudy(spec, spec.samples)


@contextlib.contextmanager
def _progress(args: argparse.Namespace, total: int, label: str = "trials"
              ) -> Iterator[Callable[..., None] | None]:
    """A rich progress bar on stderr (none with ``--json`` or ``--quiet``), done/total and an
    ETA (rich estimates it from the completion rate); yields the callback of one finished
    trial (``update()``) or of done of total (``update(done, total)``, a resumed sweep)."""
    if args.json or args.quiet:
        yield None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task(label, total=total)
    started = False

    def update(done: int | None = None, total: int | None = None, *_: Any) -> None:
        # The bar appears with the first progress report: input refused before any work
        # leaves stderr with its one error line (a started bar leaves a blank line).
        nonlocal started
        if not started:
            bar.start()
            started = True
        if done is None:
            bar.advance(task)
        else:
            bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if started:
            bar.stop()


# --------------------------------------------------------------------- topology
def _cmd_topology_show(args: argparse.Namespace) -> int:
    from topologies.registry import load_topology

    return _emit(args, load_topology(args.spec).summary())


def _cmd_topology_cost(args: argparse.Namespace) -> int:
    from topologies.cost import check_catalog, load_catalog, topology_cost
    from topologies.registry import load_topology

    topo = load_topology(args.spec)
    catalog = args.catalog if args.catalog is None else check_catalog(args.catalog,
                                                                      "--catalog")
    cost = topology_cost(topo, catalog=load_catalog(catalog) if catalog else None)
    payload = {"name": topo.name, "npus": topo.npus, **cost.to_dict()}

    def human() -> None:
        print(f"{topo.name}: {payload['cost_usd']:,.0f} USD")
        if cost.power_w is not None:
            print(f"  network power {cost.power_w:,.0f} W")
        for item, usd in sorted(cost.items.items(), key=lambda kv: -kv[1]):
            count = cost.counts.get(item)
            extra = f" ({count} units)" if count is not None else ""
            print(f"  {item:<28}{usd:>14,.0f} USD{extra}")
        for note in cost.notes:
            print(f"  note: {note}")

    return _emit(args, payload, human)


def _cmd_topology_families(args: argparse.Namespace) -> int:
    from topologies.registry import FAMILIES, family_names

    payload = {"families": [{"name": n, "shape": FAMILIES[n].shape, "keys": list(FAMILIES[n].keys),
                             "example": FAMILIES[n].example, "summary": FAMILIES[n].summary}
                            for n in family_names()]}

    def human() -> None:
        for f in payload["families"]:
            print(f"{f['name']:<12} {f['example']:<40} {f['summary']}")

    return _emit(args, payload, human)


def _cmd_topology_topoopt(args: argparse.Namespace) -> int:
    from codesign.specs import check_int
    from topologies.topoopt import topology_finder
    from topologies.topoopt.finder import MAX_DEGREE, MAX_SERVERS

    bw = parse_bandwidth(args.bandwidth, field="--bandwidth", bare=BARE_BANDWIDTH_BPS)
    # The finder's ranges, checked before the demand (one group of all servers) is built.
    n = check_int("--servers", args.servers, 2, MAX_SERVERS)
    check_int("--degree", args.degree, 1, MAX_DEGREE)
    if args.out:
        check_output_path(args.out, what="--out file")
    if (args.workload is None) != (args.strategy is None):
        raise invalid("--workload/--strategy", args.workload or args.strategy,
                      "both (the demand of a workload under a strategy) or neither")
    if args.workload:
        from codesign.workloads.demand import demand_for
        from codesign.workloads.placement import Placement
        from codesign.workloads.strategy import as_strategy

        strategy = as_strategy(args.strategy)
        if n < 1 or strategy.gpus % n:
            raise invalid("--servers", n, f"a divisor of the strategy's {strategy.gpus} GPUs")
        # (a model file as every other command takes it: _workload_arg)
        demand = demand_for(_workload_arg(args.workload, None, None), strategy, args.hardware,
                            Placement(servers=n, gpus_per_server=strategy.gpus // n),
                            check=False)
        groups, mp = demand.split()
        source = f"{args.workload} {args.strategy}"
    else:
        groups, mp = [(tuple(range(n)), 1.0)] if n >= 2 else [], None
        source = "one AllReduce group of all servers"
    result = topology_finder(n, args.degree, groups, mp, link_bandwidth=bw, seed=args.seed)
    payload = {"demand": source, **result.summary()}
    if args.out:
        out = Path(args.out)
        routes = out.with_suffix(".routes.json")
        _write_topology(result.topology, result.routes, out, routes)
        payload["out"], payload["routes"] = str(out), str(routes)

    def human() -> None:
        print(f"TopoOpt topology for {n} servers, degree {args.degree} ({source})")
        print(f"  degree split    allreduce {payload['degree_allreduce']}, "
              f"mp {payload['degree_mp']}")
        for i, g in enumerate(payload["groups"]):
            print(f"  group {i:<9} {g['servers']} servers, degree {g['degree']}, "
                  f"generators {g['generators']}")
        print(f"  diameter        {payload['diameter']}")
        print(f"  mean path       {payload['mean_path_length']:.3f} hops")
        print(f"  links           {payload['links']}")
        if args.out:
            print(f"  wrote {payload['out']} and {payload['routes']}")

    return _emit(args, payload, human)


# -------------------------------------------------------------------- collectives
def _collective(args: argparse.Namespace):
    """The topology of ``SPEC`` and the collective of ``--collective/--size/--chunks/--root``."""
    from evaluators.collectives import Collective
    from topologies.registry import load_topology

    topo = load_topology(args.spec)
    size = parse_size(args.size, field="--size")
    coll = Collective.on(args.collective, topo.npus, size, chunks_per_npu=args.chunks,
                         root=args.root)
    if coll.chunks_per_npu > 1 and coll.chunk_bytes < 1.0:
        # A schedule moves whole bytes; sub-byte chunks only multiply the work.
        shard = coll.chunk_bytes * coll.chunks_per_npu  # bytes one NPU's piece splits into
        raise invalid("--chunks", args.chunks,
                      f"at most {max(1, int(shard))} for a {args.size} {args.collective} over "
                      f"{coll.n} NPUs (chunks of at least one byte)")
    return topo, coll


def _cmd_synth(args: argparse.Namespace) -> int:
    from evaluators.algorithms.model_only import model_only_answer, wants_model_only
    from evaluators.bounds import lower_bound
    from evaluators.registry import ALGORITHMS, algorithm_names, synthesize
    from evaluators.validate import validate_schedule

    if args.out:
        check_output_path(args.out, what="--out file")  # fail before the work, not after
    topo, coll = _collective(args)
    options: dict[str, Any] = {}
    if args.seed is not None:
        algorithm_names()  # load the registry
        if args.algorithm in ALGORITHMS and "seed" in ALGORITHMS[args.algorithm].options:
            options["seed"] = args.seed
    options.update(_parse_options(args.option))
    full = bool(options.pop("schedule", False)) or bool(args.out)
    if wants_model_only(topo, coll, args.algorithm, options, full_schedule=full):
        # The algorithm's own model (Themis Sec. 4.4, closed forms): the full per-NPU
        # schedule would not fit or would take minutes.
        return _emit(args, model_only_answer(topo, coll, args.algorithm, options))
    t0 = time.perf_counter()
    # Validated below, so that an invalid schedule is reported (valid: false), not raised.
    schedule = synthesize(topo, coll, args.algorithm, validate=False, **options)
    synthesis_s = time.perf_counter() - t0
    report = validate_schedule(schedule, topo, schedule.collective)
    t = schedule.time_s
    payload = {"npus": topo.npus, "collective": coll.kind, "algorithm": args.algorithm,
               "size_bytes": coll.size_bytes, "chunks": schedule.collective.chunks_per_npu,
               "time_s": t, "algbw_Bps": coll.algbw(t), "busbw_Bps": coll.busbw(t),
               "lower_bound_s": lower_bound(topo, coll).time_s, "synthesis_s": synthesis_s,
               "valid": report.valid, "transfers": len(schedule)}
    # Proof and model details some methods record (mcf; tacos exact=true and logical times).
    for key in ("fluid_time_s", "optimal", "dual_gap", "within_epsilon", "exact", "mip_gap",
                "logical_time_s", "tree_lp_time_s", "relaxation_gap", "epsilon", "ratio",
                "route", "replays", "split", "window", "chunk_reason"):
        if key in schedule.metadata:
            payload[key] = schedule.metadata[key]
    if not report.valid:
        payload["errors"] = list(report.errors[:5])
    # mcf: a schedule that misses the requested epsilon is a failed request (exit 1);
    # chunk_reason says why and the payload has the best schedule it reached.
    missed = schedule.metadata.get("within_epsilon") is False
    if args.out:
        from evaluators.schedule_io import save_msccl_xml, save_schedule

        if str(args.out).endswith(".xml"):
            save_msccl_xml(schedule, topo, args.out)
        else:
            save_schedule(schedule, args.out)
        payload["out"] = str(args.out)
    _emit(args, payload)
    return 0 if report.valid and not missed else 1


def _cmd_bound(args: argparse.Namespace) -> int:
    from evaluators.bounds import lower_bound

    topo, coll = _collective(args)
    options = _parse_options(args.option)
    head = {"npus": topo.npus, "collective": coll.kind, "size_bytes": coll.size_bytes}
    if args.method == "mcf":
        # The fluid LP optimum (bandwidth only); a lower bound for every T when
        # steps_certified, else for the step counts searched.
        from evaluators.estimates import check_mcf
        from evaluators.mcf import fluid_optimum

        allowed = ("decomposition", "switch_model", "steps", "shares", "secondary",
                   "time_limit")
        for key in options:
            check_choice("--option", key, allowed, "for --method mcf")
        options.setdefault("secondary", False)
        check_mcf(topo, coll, decomposition=str(options.get("decomposition", "none")))
        r = fluid_optimum(topo, coll, **options)
        return _emit(args, {**head, "method": "mcf", "lower_bound_s": r.time_s,
                            "algbw_Bps": coll.algbw(r.time_s), "optimal": r.optimal,
                            "dual_gap": r.dual_gap, "steps": r.steps,
                            "steps_certified": r.steps_certified,
                            "decomposition": r.decomposition,
                            "decomposition_stats": r.decomposition_stats})
    if options:
        raise invalid("--option", ",".join(options), "no options with --method cut")
    bound = lower_bound(topo, coll)
    return _emit(args, {**head, "lower_bound_s": bound.time_s,
                        "algbw_Bps": coll.algbw(bound.time_s),
                        **{k: v for k, v in bound.to_dict().items() if k != "time_s"}})


def _parse_send(text: str, index: int) -> tuple[int, int, float]:
    field = f"--send #{index + 1}"
    parts = text.split(":")
    if len(parts) != 3:
        raise invalid(field, text, "SRC:DST:SIZE such as 0:5:1MiB")
    try:
        src, dst = int(parts[0]), int(parts[1])
    except ValueError:
        raise invalid(field, text, "integer SRC and DST node ids") from None
    return src, dst, parse_size(parts[2], field=f"{field} size")


def _cmd_simulate(args: argparse.Namespace) -> int:
    from evaluators.netsim import replay, simulate
    from topologies.registry import load_topology

    topo = load_topology(args.spec)
    options = _parse_options(args.option)
    if args.schedule and args.send:
        raise invalid("simulate --send", args.send[0], "no --send with --schedule (the "
                      "schedule's transfers are what is simulated)")
    if args.schedule:
        from evaluators.schedule_io import load_schedule

        # Schema, then the independent validator against this network, before simulating.
        schedule = replay(load_schedule(args.schedule, topology=topo), topo, model=args.model,
                          **options)
        payload = {
            "model": args.model,
            "transfers": [{"src": int(s), "dst": int(d), "chunk": int(c), "size_bytes":
                           schedule.chunk_bytes, "finish_s": float(e)}
                          for s, d, c, e in zip(schedule.src, schedule.dst, schedule.chunk,
                                                schedule.end)],
            "makespan_s": schedule.time_s,
        }
    else:
        from evaluators.estimates import check_simulation

        check_simulation(len(args.send or []), topo.n_links, field="--send")
        sends = [_parse_send(text, i) for i, text in enumerate(args.send or [])]
        if not sends:
            raise invalid("--send", [], "at least one SRC:DST:SIZE, or --schedule FILE")
        for i, (s, d, _) in enumerate(sends):
            for name, node in (("SRC", s), ("DST", d)):
                if not 0 <= node < topo.npus:
                    raise invalid(f"--send #{i + 1} {name}", node,
                                  f"an NPU id in 0..{topo.npus - 1}")
        payload = {"model": args.model, **simulate(topo, sends, model=args.model,
                                                   **options).to_dict()}
    return _emit(args, payload)


def _cmd_reorder(args: argparse.Namespace) -> int:
    from search.reorder.rank_order import load_cost_matrix, reorder

    matrix = load_cost_matrix(args.matrix)
    result = reorder(matrix.costs, args.algorithm, seed=args.seed, time_limit_s=args.time_limit)
    return _emit(args, {"algorithm": args.algorithm, "order": list(result.order),
                        "names": [matrix.names[i] for i in result.order] if matrix.names
                        else None, "cost_s": result.cost_s,
                        "baseline_cost_s": result.baseline_cost_s, "method": result.method})


def _cmd_probe(args: argparse.Namespace) -> int:
    import numpy as np

    from search.reorder.probe import probe_latencies, save_cost_matrix

    result = probe_latencies(nodes=args.nodes, rounds=args.rounds, ray_address=args.ray_address,
                             seed=args.seed)
    path = save_cost_matrix(args.out, result.matrix_s, result.names)
    off = result.matrix_s[~np.eye(len(result.names), dtype=bool)] if len(result.names) > 1 else []
    return _emit(args, {"nodes": list(result.names), "matrix": str(path),
                        "min_s": float(min(off)), "max_s": float(max(off))})


# --------------------------------------------------------------------- workloads
def _workload_arg(name: str, config: str | None, options: Sequence[str] | None):
    """A zoo name (with ``--config`` / ``--option`` overrides) or a model YAML file.

    The same rule for every command that takes a workload: a name ending in ``.yaml`` /
    ``.yml`` or naming an existing file is a model file (overrides go in the file)."""
    from codesign.workloads import get_workload, is_model_file, load_workload

    overrides = _parse_options(options)
    if is_model_file(name):
        if config or overrides:
            raise invalid("--config/--option", config or overrides,
                          "nothing with a model file (put overrides in the file)")
        return load_workload(name)
    return get_workload(name, config, **overrides)


def _cmd_workload_show(args: argparse.Namespace) -> int:
    workload = _workload_arg(args.name, args.config, args.option)
    payload = workload.to_dict()
    demand = None
    if args.strategy:
        from codesign.workloads.demand import demand_for

        # Memory is reported (``fits``), not enforced: ``show`` informs.
        demand = demand_for(workload, args.strategy, args.hardware, check=False)
        payload["demand"] = demand.summary()

    def human() -> None:
        mem = workload.memory
        print(f"{workload.name} [{workload.config or workload.builder}]: {workload.description}")
        print(f"  parameters      {workload.parameters:,}"
              + (f" ({workload.active_parameters:,.0f} active per token)"
                 if workload.active_parameters != workload.parameters else ""))
        if workload.lora_rank:
            print(f"  LoRA            rank {workload.lora_rank} on "
                  f"{'+'.join(workload.lora_modules)}: {workload.trainable_parameters:,} "
                  "trained, the rest frozen")
        print(f"  flops/sample    {workload.flops_per_sample:.4g} (forward "
              f"{workload.fwd_flops_per_sample:.4g})")
        print(f"  batch           {workload.batch_size}"
              + (f" (seq_len {workload.seq_len})" if workload.seq_len else ""))
        print(f"  memory          weights {format_size(mem.weights_bytes)}, gradients "
              f"{format_size(mem.gradients_bytes)}, optimizer {format_size(mem.optimizer_bytes)}"
              f", activations {format_size(mem.activation_bytes_per_sample)}/sample")
        print(f"  {'layer':<24}{'kind':<12}{'params':>16}{'fwd GFLOP':>14}{'activation':>14}")
        for layer in workload.layers:
            print(f"  {layer.name:<24}{layer.kind:<12}{layer.params:>16,}"
                  f"{layer.fwd_flops / 1e9:>14.4g}{format_size(layer.activation_bytes):>14}")
        print(f"  source: {workload.source}")
        if demand is not None:
            d = payload["demand"]
            print(f"  strategy {demand.strategy} on {d['placement']['servers']} x "
                  f"{d['placement']['gpus_per_server']} {demand.hardware}: bubble "
                  f"{d['bubble_fraction']:.3f}, inter-server "
                  f"{format_size(d['inter_server_bytes'])}/iteration (allreduce groups "
                  f"{d['allreduce_groups']}, MP {format_size(d['mp_bytes'])})")
            print(f"  memory/GPU      {demand.memory.message().split(' needs ', 1)[1]}"
                  + ("" if demand.memory.fits else "  -- does not fit"))

    return _emit(args, payload, human)


# --------------------------------------------------------------------- TopoOpt loop
def _cmd_optimize(args: argparse.Namespace) -> int:
    from search.topoopt.alternating import BASELINES, OptimizeSpec, optimize

    if args.out:
        check_output_folder(args.out, what="--out folder")  # fail before the work
    baselines = BASELINES if args.baselines is None else tuple(
        b for b in args.baselines.split(",") if b)
    spec = OptimizeSpec(workload=args.workload, config=args.config, servers=args.servers,
                        degree=args.degree, bandwidth_Bps=args.bandwidth,
                        gpus_per_server=args.gpus_per_server, hardware=args.hardware,
                        batch_size=args.batch_size, rounds=args.rounds, budget=args.budget,
                        initial_strategy=args.strategy, baselines=baselines, seed=args.seed,
                        hardware_file=args.hardware_file,
                        collective_method=args.collective_method,
                        comm_overlap=args.comm_overlap)
    result = optimize(spec, workers=args.workers, ray_address=args.ray_address)
    payload = result.to_dict()
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise invalid("--out", args.out, f"a folder that can be created ({exc.strerror})") \
                from None
        _write_topology(result.topology, result.routes, out / "topology.yaml",
                        out / "routes.json")
        payload["files"] = {"topology": str(out / "topology.yaml"),
                            "routes": str(out / "routes.json")}

    def human() -> None:
        print(f"{spec.workload} on {spec.servers} servers x {spec.gpus_per_server} "
              f"{spec.hardware}, d={spec.degree}, B={spec.bandwidth_Bps * 8 / 1e9:g} Gbps")
        print(f"  strategy        {payload['strategy']}")
        start = payload['initial_time_s']
        start = f"{start * 1e3:.3f} ms" if start != float("inf") else "did not fit in memory"
        print(f"  iteration       {payload['iteration_time_s'] * 1e3:.3f} ms (start: {start}), "
              f"{len(result.rounds)} rounds")
        print(f"  topology        diameter {payload['diameter']}, mean path length "
              f"{payload['mean_path_length']:.3f}, cost ${payload['cost_usd']:,.0f}")
        for name, b in payload["baselines"].items():
            t, usd = b["iteration_time_s"], b["cost_usd"]
            if not math.isfinite(usd):  # the fabric could not be built at this size
                print(f"  {name:<16}not built: {b['notes']}")
            elif not math.isfinite(t):
                print(f"  {name:<16}{'no time':>15}  ${usd:>12,.0f}  {b['notes']}")
            else:
                print(f"  {name:<16}{t * 1e3:>12.3f} ms  ${usd:>12,.0f}  {b['notes']}")
        for k, v in payload.get("files", {}).items():
            print(f"  {k}: {v}")

    return _emit(args, payload, human)


# ---------------------------------------------------------------- calibrate
def _cmd_calibrate(args: argparse.Namespace) -> int:
    import yaml

    from codesign.workloads.efficiency import carry_parameters
    from codesign.workloads.hardware import get_hardware, hardware_to_yaml
    from evaluators.iteration.calibrate import calibrate
    from evaluators.iteration.runs import load_runs

    if args.out:
        check_output_path(args.out, what="--out file")  # fail before the fit, not after
    catalog = _hardware_catalog(args.hardware_file)
    hw = get_hardware(args.hardware, catalog)
    targets = _carry_targets(args.carry_to, hw, catalog)   # refused before the fit
    runs = load_runs(args.runs, hardware=hw.name, catalog=catalog)
    names = [n.strip() for n in args.parameters.split(",") if n.strip()]
    progress = None if args.json else (lambda msg: print(f"  ... {msg}", file=sys.stderr))
    result = calibrate(runs, hw, parameters=names, prior_weight=args.prior_weight,
                       holdout=None if args.holdout == "none" else args.holdout,
                       balance=None if args.balance == "run" else args.balance,
                       progress=progress)
    payload = result.summary()
    # The next purchase from the cluster one has: the fit carried to other GPUs as the
    # catalog carries its H100 fit (each parameter x the catalog's target / source ratio).
    carried = {t.name: t.with_compute_parameters(
        **carry_parameters(result.parameters, hw.compute, t.compute)) for t in targets}
    if carried:
        payload["carried"] = {name: {k: getattr(c.compute, k) for k in result.parameters}
                              for name, c in carried.items()}
    # Held-out errors (--holdout): leave_one_run_out_mean_abs_error or leave_one_source_...
    held = [k for k in payload if k.startswith("leave_one_") and k.endswith("_mean_abs_error")]
    if args.out:
        doc = hardware_to_yaml(result.hardware)
        gpu = doc["gpus"][result.hardware.name]
        gpu["compute"]["source"] = (
            f"calibrated by codesign calibrate on {len(runs)} runs of {args.runs} "
            f"(fit mean |error| {payload['fit_mean_abs_error']:.1%}, worst "
            f"{payload['fit_worst_abs_error']:.1%})")
        # The held-out error of this fit is what results timed with it should carry; the
        # held-out error of the ratios of comparable runs (one source, model and format),
        # when the runs have such pairs, is what comparisons of two designs use.
        gpu["compute"]["validated_error"] = payload[held[0]] if held else None
        pair_key = held[0].replace("_mean_abs_error", "_comparison_mean_error") if held \
            else None
        gpu["compute"]["validated_comparison_error"] = payload.get(pair_key)
        for key in ("validated_error", "validated_comparison_error"):
            # A profile carries errors below 100 % (ComputeProfile): runs the model misses
            # by more are not a profile to write but measurements to check.
            err = gpu["compute"][key]
            if err is not None and not err < 1:
                worst = max(payload["per_run"], key=lambda r: abs(r["error"]))
                raise invalid("runs file", args.runs,
                              f"runs the model can fit: its held-out error is {err:.0%} "
                              f"(a profile holds errors below 100 %; worst run "
                              f"{worst['id']} {worst['error']:+.0%}); nothing written")
        for name, c in carried.items():
            entry = doc["gpus"][name] = hardware_to_yaml(c)["gpus"][name]
            # Its validated errors stay the catalog's: none of these runs were on it.
            entry["compute"]["source"] = (
                f"carried by codesign calibrate from the {result.hardware.name} calibration "
                f"on {len(runs)} runs of {args.runs}: each fitted parameter x this GPU's "
                f"catalog value over {result.hardware.name}'s "
                f"(codesign.workloads.efficiency.carry_parameters); not fitted on "
                f"{name} runs. Catalog profile: {c.compute.source}")
        header = (f"# Hardware profile of {result.hardware.name} written by "
                  f"`codesign calibrate {args.runs} --hardware {args.hardware}`.\n"
                  "# Use it with: codesign evaluate --hardware-file THIS_FILE "
                  f"--hardware {result.hardware.name} ...\n"
                  + (f"# Also carried to: {', '.join(carried)} (not fitted on their runs).\n"
                     if carried else ""))
        write_text_atomic(args.out, header + yaml.safe_dump(doc, sort_keys=False),
                          what="--out file")
        payload["out"] = args.out

    def human() -> None:
        print(f"{payload['hardware']}: {payload['runs']} runs, "
              f"{payload['evaluations']} model evaluations")
        for k, v in payload["parameters"].items():
            print(f"  {k:<24}{v:8.4f}   (start {payload['prior'][k]:.4f})")
        print(f"  fit error: mean |e| {payload['fit_mean_abs_error']:.1%}, "
              f"worst {payload['fit_worst_abs_error']:.1%}")
        for key in held:
            worst = payload[key.replace("mean", "worst")]
            label = key.removesuffix("_mean_abs_error").replace("_", "-")
            print(f"  {label} error: mean |e| {payload[key]:.1%}, worst {worst:.1%}")
        if payload["comparison_pairs"]:
            print(f"  ratios of {payload['comparison_pairs']} pairs of comparable runs "
                  f"(one source, model and format): mean error "
                  f"{payload['fit_comparison_mean_error']:.1%}, worst "
                  f"{payload['fit_comparison_worst_error']:.1%}")
            for key in held:
                ckey = key.replace("_mean_abs_error", "_comparison_mean_error")
                if ckey in payload:
                    label = key.removesuffix("_mean_abs_error").replace("_", "-")
                    print(f"  {label}: mean {payload[ckey]:.1%}, worst "
                          f"{payload[ckey.replace('mean', 'worst')]:.1%}")
        print(f"  {'run':<30}{'measured s':>12}{'predicted s':>13}{'error':>9}")
        for r in payload["per_run"]:
            print(f"  {r['id']:<30}{r['measured_s']:>12.4g}{r['predicted_s']:>13.4g}"
                  f"{r['error']:>9.1%}")
        for name, values in payload.get("carried", {}).items():
            print(f"  carried to {name}: " + ", ".join(f"{k} {v:.4f}"
                                                       for k, v in values.items()))
        if args.out:
            print(f"  wrote {args.out}")

    return _emit(args, payload, human)


def _carry_targets(text: str | None, hw, catalog) -> list:
    """The GPUs of ``--carry-to`` (comma-separated catalog names), each with a compute
    profile and other than the calibrated one."""
    from codesign.workloads.hardware import get_hardware

    out = []
    for name in (n.strip() for n in (text or "").split(",")):
        if not name:
            continue
        target = get_hardware(name, catalog)
        if target.name == hw.name:
            raise invalid("calibrate --carry-to", name,
                          f"a GPU other than the calibrated --hardware {hw.name}")
        if target.compute is None or hw.compute is None:
            raise invalid("calibrate --carry-to", name,
                          "a GPU with a compute profile (compute_profiles.yaml), as the "
                          "calibrated one")
        if target.name not in (t.name for t in out):
            out.append(target)
    return out


# ---------------------------------------------------------------- evaluate
def _cmd_evaluate(args: argparse.Namespace) -> int:
    from codesign.workloads import get_hardware
    from codesign.workloads.placement import Placement
    from codesign.workloads.strategy import as_strategy
    from topologies.registry import load_topology

    # --fail is input like the others: checked before the evaluation (a bad value was
    # reported as "infeasible ... memory" when the strategy did not fit).
    failures = None if args.fail is None else _failure_study(args.fail)
    topo = load_topology(args.topology)
    workload = _workload_arg(args.workload, args.config, args.option)
    hw = get_hardware(args.hardware, _hardware_catalog(args.hardware_file))
    per_server = args.gpus_per_server or hw.gpus_per_server
    strategy = as_strategy(args.strategy or f"dp={topo.npus * per_server}")
    placement = None
    if args.gpus_per_server is not None:
        placement = Placement.for_strategy(strategy, args.gpus_per_server)
    if args.closed_form:
        from codesign.workloads.demand import demand_for
        from evaluators.iteration import closed_form_estimate

        pl = placement or Placement.for_strategy(strategy, hw.gpus_per_server)
        demand = demand_for(workload, strategy, hw, pl)
        payload = {"workload": workload.name, "strategy": str(strategy),
                   "topology": topo.name, "hardware": hw.name, "model": "topoopt-eq1",
                   **closed_form_estimate(topo, demand).to_dict()}
    else:
        from evaluators.iteration import Cluster, Execution, comm_overlap_options, evaluate

        # The policy's knobs, each overridden by its own flag where given.
        knobs = comm_overlap_options(args.comm_overlap, strategy)
        if args.tp_comm_overlap is not None:
            knobs["tp_comm_overlap"] = {"false": False, "true": True}.get(
                args.tp_comm_overlap, args.tp_comm_overlap)
        for name in ("param_gather_overlap", "pp_comm_overlap"):
            if getattr(args, name) is not None:
                knobs[name] = getattr(args, name)
        execution = Execution(strategy, placement=placement,
                              collective_method=args.collective_method, routing=args.routing,
                              overlap=not args.no_overlap, **knobs,
                              ep_comm_overlap=args.ep_comm_overlap,
                              ep_dispatch=args.ep_dispatch,
                              attention_kernel=args.attention_kernel)
        payload = evaluate(Cluster(topo, hw), workload, execution,
                           network_model=args.network_model).to_dict()
    if failures is not None:
        import dataclasses

        from search.failure_whatif import fabric_failures
        from search.strategy.space import Candidate

        fhw = dataclasses.replace(hw, gpus_per_server=per_server)
        payload["failures"] = fabric_failures(
            topo, [(workload, 1.0, Candidate(strategy))], fhw, failures,
            collective_method=args.collective_method, comm_overlap=args.comm_overlap).to_dict()

    def human() -> None:
        print(f"{payload['workload']} {payload['strategy']} on {payload['topology']} "
              f"({payload['hardware']})")
        if payload.get("failures"):
            from search.failure_whatif import format_failure_summary

            print("  " + format_failure_summary(payload["failures"]))
        skip = ("workload", "strategy", "topology", "hardware", "by_purpose_s", "breakdown",
                "memory")
        for key, value in payload.items():
            if key in skip or isinstance(value, (dict, list, tuple)):
                continue
            if key.endswith("_s") and isinstance(value, float) and key != "flops_per_gpu_s":
                print(f"  {key:<26}{value * 1e3:>14.3f} ms")
            else:
                print(f"  {key:<26}{str(value):>14}" if not isinstance(value, float)
                      else f"  {key:<26}{value:>14.4g}")
        if payload.get("collectives"):
            # One line for the synthesizer tournament (the full record is in --json).
            from collections import Counter

            won = Counter(c["algorithm"] for c in payload["collectives"])
            print(f"  {'collectives':<26}{len(payload['collectives']):>14} timed: "
                  + ", ".join(f"{name} {n}" for name, n in won.most_common()))
        if payload.get("breakdown"):
            print("  breakdown (adds up to the iteration time):")
            for key, value in payload["breakdown"].items():
                if value:
                    print(f"    {key:<24}{value * 1e3:>14.3f} ms")
        # What the time is worth (issue 17): the validated errors of one time and of a
        # comparison with another design on this GPU and workload.
        if payload.get("model_error") is not None:
            print(f"  validated error: {payload['model_error']:.1%} for this time, "
                  f"{payload['comparison_error']:.1%} for its ratio to another design's on "
                  f"{payload['hardware']} (experiments/validation/validation.md)")
        else:
            print("  validated error: none for this case (a GPU without a calibrated "
                  "profile, the constant roofline, or a kind of model the validation does "
                  "not cover: mixture-of-experts, recommendation or MLP-only)")
        if payload.get("memory"):
            mem = payload["memory"]
            print("  memory per GPU (most loaded):")
            for key in ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                        "activations_bytes", "embedding_bytes", "total_bytes",
                        "capacity_bytes"):
                print(f"    {key:<24}{mem[key] / 2**30:>14.2f} GiB")
            if mem.get("offloaded_bytes"):     # offload_layers: what waits in host memory
                print(f"    {'offloaded_bytes':<24}{mem['offloaded_bytes'] / 2**30:>14.2f} GiB"
                      f" (host, of {(mem.get('host_capacity_bytes') or 0) / 2**30:.2f} GiB)")

    return _emit(args, payload, human)


# ---------------------------------------------------------------- pipeline
def _cmd_quickstart(args: argparse.Namespace) -> int:
    from codesign.app.report import write_report
    from search.sweeps.quickstart import QuickstartConfig, run_quickstart

    config = QuickstartConfig(**{k: v for k, v in (
        ("results_dir", args.results), ("trials", args.trials), ("seed", args.seed),
        ("servers", args.servers)) if v is not None})
    with _progress(args, config.spec().trials) as update:
        result = run_quickstart(config, progress=update)
    paths = write_report(result.results_dir)
    payload = {**result.to_dict(), "report": {k: str(v) for k, v in paths.items()}}

    def human() -> None:
        print(f"{result.complete} complete, {result.pruned} pruned, {result.failed} failed trials")
        print(f"results: {result.results_dir}")
        for k, v in paths.items():
            print(f"{k}: {v}")

    _emit(args, payload, human)
    if not result.complete:   # as a sweep: nothing to compare (the report says why)
        print(f"codesign: infeasible: no trial of the quickstart is complete ({result.pruned} "
              f"pruned, {result.failed} failed)", file=sys.stderr)
        return 1
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from search.sweeps.driver import planned_note, run_sweep
    from search.sweeps.spec import load_sweep_spec

    spec = load_sweep_spec(args.config)
    note = planned_note(spec)
    if note:
        print(f"codesign: note: {note}", file=sys.stderr)
    with _progress(args, spec.trials) as update:
        result = run_sweep(spec, results_dir=args.results, resume=args.resume,
                           ray_address=args.ray_address, progress=update,
                           notify=lambda line: print(f"codesign: note: {line}",
                                                     file=sys.stderr))
    reasons = ", ".join(f"{k}: {v}" for k, v in (result.reasons or {}).items())

    def human() -> None:
        print(f"{result.study}: {result.trials_run} trials run; {result.complete} complete, "
              f"{result.pruned} pruned, {result.failed} failed in total "
              f"({result.duration_s:.1f} s, {result.time_model})")
        if reasons:
            print(f"not complete: {reasons}")
        print(f"results: {result.results_dir}  (codesign report {result.results_dir})")

    _emit(args, result.to_dict(), human)
    if result.records and not result.complete:
        # Nothing to report: a valid but impossible study (exit 1, the reasons counted).
        print(f"codesign: infeasible: no trial of {result.study} is complete ({reasons})",
              file=sys.stderr)
        return 1
    return 0


def _cmd_whatif(args: argparse.Namespace) -> int:
    from search.sweeps.spec import with_options
    from search.whatif import format_whatif, parse_budgets, parse_mix, run_whatif

    if args.shared_cluster:
        from search.whatif import format_shared_cluster, shared_cluster

        # (TopoOpt Sec. 5.6's fixed study: its own jobs, fabrics and no budget)
        for flag in ("budget", "gpus", "workload", "mix", "families", "degrees", "report"):
            if getattr(args, flag) is not None:
                raise invalid(f"whatif --{flag}", getattr(args, flag),
                              "no value with --shared-cluster (it takes --servers, --degree "
                              "and --link-rate only)")

        rows = shared_cluster(servers=432 if args.servers is None else args.servers,
                              degree=args.degree,
                              link_rate_Bps=parse_bandwidth(args.link_rate, field="link rate",
                                                             bare=BARE_BANDWIDTH_BPS))
        return _emit(args, {"shared_cluster": [r.to_dict() for r in rows]},
                     lambda: print(format_shared_cluster(rows)))
    servers = args.servers
    if args.gpus is not None and servers is not None:
        raise invalid("whatif --servers/--gpus", f"{servers}/{args.gpus}",
                      "one of them (--gpus G means G / GPUs-per-server servers)")
    if args.gpus is not None:
        from codesign.workloads import get_hardware

        per = get_hardware(args.gpu, _hardware_catalog(args.hardware_file)).gpus_per_server
        if args.gpus < per or args.gpus % per:
            raise invalid("whatif --gpus", args.gpus, f"a multiple of {per} ({args.gpu} servers)")
        servers = args.gpus // per
    if not args.budget or servers is None:   # 0 is a value (run_whatif refuses it)
        raise invalid("whatif", "missing --budget or --servers/--gpus",
                      "--budget USD[,USD...] and --servers N or --gpus G (or --shared-cluster)")
    from codesign.resources import check_memory

    # The what-if builds server-by-server fabrics and traffic matrices: O(servers^2)
    # entries of 8 bytes (a 10^6-server request asked numpy for 7.28 TiB).
    check_memory("the procurement what-if", "--servers", servers, 64.0 * servers * servers,
                 "use fewer servers (a what-if per pod), or --shared-cluster")
    if args.mix is not None and args.workload is not None:
        raise invalid("whatif --workload", args.workload, "not with --mix (the mix names the "
                      "workloads: --mix NAME:WEIGHT,...)")
    mix = parse_mix(args.mix) if args.mix else parse_mix(args.workload or "resnet50")
    if args.option:
        if args.mix:
            raise invalid("whatif --option", args.option[0], "with --workload, not --mix (a "
                          "mix of re-configured workloads: a sweep YAML's per-workload options)")
        mix = (with_options(mix[0], _parse_options(args.option), "whatif --option"),)
    from dataclasses import replace

    from search.per_fabric import SearchBudget
    from search.whatif import DEFAULT_SEARCH, MAX_SEARCH_SHAPES

    evals = args.search_evaluations
    if evals is not None and (evals < 0):
        raise invalid("whatif --search-evaluations", evals, "an integer >= 0 (0: no search)")
    search = DEFAULT_SEARCH if evals is None else (SearchBudget(evals) if evals else None)
    if args.search_shapes is not None:
        if not 0 <= args.search_shapes <= MAX_SEARCH_SHAPES:
            raise invalid("whatif --search-shapes", args.search_shapes,
                          f"an integer from 0 to {MAX_SEARCH_SHAPES} (0: no shape screen)")
        if search is not None:
            search = replace(search, shapes=args.search_shapes)
    grid = {}   # the fabric grid's families and degrees, where given
    if args.families is not None:
        from search.sweeps.spec import SWEEP_FAMILIES

        names = tuple(f.strip() for f in args.families.split(","))
        bad = [f for f in names if f not in SWEEP_FAMILIES]
        if bad or not all(names) or len(set(names)) < len(names):
            raise invalid("whatif --families", args.families,
                          f"a comma list of {', '.join(SWEEP_FAMILIES)}, each once")
        grid["families"] = names
    if args.degrees is not None:
        from search.sweeps.spec import MAX_SERVER_DEGREE

        try:
            degrees = tuple(int(d) for d in args.degrees.split(","))
        except ValueError:
            degrees = ()
        if not degrees or len(set(degrees)) < len(degrees) or not all(
                1 <= d <= MAX_SERVER_DEGREE for d in degrees):
            raise invalid("whatif --degrees", args.degrees,
                          f"a comma list of integers from 1 to {MAX_SERVER_DEGREE}, each once")
        grid["degrees"] = degrees
    procurement = _procurement_options(args)
    if args.report:
        check_output_folder(args.report, what="--report folder")  # fail before the work
    with _progress(args, 1, label="fabrics") as update:
        result = run_whatif(parse_budgets(args.budget), servers=servers, workloads=mix,
                            gpu=args.gpu, collective_method=args.collective_method,
                            search=search, finalists=args.finalists, workers=args.workers,
                            progress=update, hardware_file=args.hardware_file,
                            catalog=args.catalog, comm_overlap=args.comm_overlap,
                            **grid, **procurement)
    if args.report:
        from codesign.app.procurement_report import write_whatif_report

        write_whatif_report(result, args.report)
    code = _emit(args, result.to_dict(), lambda: print(format_whatif(result)))
    if code == 0 and result.choices and not any(c.topology_spec for c in result.choices):
        # A valid request nothing answers (every budget below the cheapest fabric): exit 1,
        # as a sweep with no complete trial; the answer above says what would.
        print("codesign: infeasible: no budget buys a fabric that runs the mix (see the "
              "cheapest above)", file=sys.stderr)
        return 1
    return code


def _procurement_options(args: argparse.Namespace) -> dict[str, Any]:
    """``run_whatif`` keywords of the procurement options (goal, TCO, objective, failures)."""
    from codesign.tco import TcoParams, load_prices, server_price
    from search.time_to_train import parse_goal

    goal = parse_goal(tokens=args.tokens, samples=args.samples, epochs=args.epochs,
                      dataset_samples=args.dataset_samples)
    defaults = load_prices(args.prices)[1]
    rent = args.gpu_hour_usd
    if rent == "catalog":
        rent = server_price(args.gpu, args.prices).cloud_usd_per_gpu_hour
        if rent is None:
            raise invalid("--gpu-hour-usd catalog for", args.gpu,
                          "a GPU with a cloud price in the price catalog, or a number")
    elif rent is not None:
        try:
            rent = float(rent)
        except ValueError:
            raise invalid("--gpu-hour-usd", rent, "a price in USD > 0, or catalog") from None
    params = TcoParams(gpu_hour_usd=rent, **{  # the catalog's defaults where not given
        k: getattr(defaults if getattr(args, k) is None else args, k)
        for k in ("usd_per_kwh", "pue", "utilisation", "years")})
    failures = None if args.fail is None else _failure_study(args.fail)
    return {"goal": goal, "objective": args.objective, "tco_params": params,
            "prices": args.prices, "failures": failures}


def _cmd_report(args: argparse.Namespace) -> int:
    from codesign.app.report import write_report

    paths = write_report(args.results_dir, out_dir=args.out)
    return _emit(args, {k: str(v) for k, v in paths.items()})


# --------------------------------------------------------------------- parser
_ZOO = "zoo name (dlrm, candle, bert, resnet50, gpt3-175b, ...)"
_FAIL = ("links=10%%,seed=S,samples=N (kinds links, switches, servers, racks; N%% or a "
         "count; rack_size=K)")
#: Options several commands take, defined once: flag -> ``add_argument`` keywords (a
#: command may change some keywords, e.g. its own default or a longer help).
_COMMON: dict[str, dict[str, Any]] = {
    "--json": dict(action="store_true", help="print one JSON object on stdout"),
    "--max-memory": dict(metavar="SIZE", help="refuse work estimated to need more memory than "
                         "this (e.g. 4GiB; default: half of the memory available)"),
    "--seed": dict(type=int, default=0, help="random seed (default 0)"),
    "--quiet": dict(action="store_true", help="no progress bar"),
    "--ray-address": dict(help="join an existing Ray cluster (default: local Ray)"),
    "--results": dict(default="results", help="results folder (default results/)"),
    "--config": dict(help="zoo configuration (e.g. simulation, testbed, 5.6)"),
    "--hardware": dict(default="A100-80", help="GPU (default A100-80)"),
    "--hardware-file": dict(help="hardware catalog YAML (e.g. written by codesign calibrate) "
                            "to look the GPU up in instead of the built-in one"),
    "--collective-method": dict(
        default="best", help="algorithm of inter-server collectives: best (default: the "
        "fastest valid synthesizer per collective, chosen with the strategy, as in sweeps "
        "and whatif), auto (multiring on direct-connect fabrics as TopoOpt's NCCL, ring on "
        "switched ones) or a name (ring, multiring, tacos, ...)"),
    # evaluators.iteration.COMM_OVERLAPS spelled out: importing it here would load the
    # iteration model for every command (~0.25 s); a test keeps the two equal.
    "--comm-overlap": dict(
        default="framework", choices=("framework", "none"),
        help="communication overlap every strategy is timed with: framework (default: what "
        "Megatron-core stacks switch on -- ZeRO-1/2's parameter all-gather under the next "
        "forward, interleaved pipeline sends under a model chunk, TP collectives under "
        "the GEMMs with sequence parallelism) or none (gradient buckets only)"),
    "--servers": dict(type=int, required=True, help="servers of the job"),
    "--degree": dict(type=int, required=True, help="interfaces (links) per server, d"),
    "--bandwidth": dict(required=True, help="rate of one interface (link), e.g. 100Gbps"),
    "spec": dict(help="topology spec string (torus:4x4x4) or YAML file"),
}


def _add(p: Any, flag: str, **changes: Any) -> None:
    """Add one of the :data:`_COMMON` options to ``p`` (a parser or an argument group),
    with ``changes`` to its keywords."""
    p.add_argument(flag, **{**_COMMON[flag], **changes})


def _option(p: argparse.ArgumentParser, what: str) -> None:
    """The repeatable ``--option KEY=VALUE`` (read by :func:`_parse_options`)."""
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help=f"{what}, repeatable")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``codesign`` command."""
    from codesign import __version__
    from codesign.collective_kinds import KINDS
    from codesign.workloads.dispatch import DISPATCHERS
    from codesign.workloads.efficiency import ATTENTION_KERNELS

    parser = _Parser(prog="codesign", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"codesign {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(subparsers, name: str, fn, help_: str, *common: str) -> argparse.ArgumentParser:
        """A command with ``--json``, ``--max-memory`` and the ``common`` options (listed
        after the command's own in ``--help``)."""
        p = subparsers.add_parser(name, help=help_, description=help_)
        shared = p.add_argument_group("options shared with other commands")
        for flag in ("--json", "--max-memory", *common):
            _add(p if flag == "spec" else shared, flag)
        p.set_defaults(fn=fn)
        return p

    topo = sub.add_parser("topology", help="inspect topologies").add_subparsers(
        dest="topology_command", required=True, parser_class=_Parser)
    add(topo, "show", _cmd_topology_show, "counts, diameter, injection and bisection bandwidth",
        "spec")
    p = add(topo, "cost", _cmd_topology_cost, "fabric cost and its breakdown (TopoOpt Table 2 "
            "prices)", "spec")
    p.add_argument("--catalog", help="price catalog: a YAML file (TopoOpt Table 2 style or a "
                   "parts catalog) or the name parts-2026 (switch boxes, optics by reach, "
                   "power) or topoopt-2023 (default)")
    add(topo, "families", _cmd_topology_families, "list the registered topology families")
    p = add(topo, "topoopt", _cmd_topology_topoopt, "TopoOpt TopologyFinder: direct-connect "
            "topology and routes for a demand", "--servers", "--degree", "--bandwidth", "--seed")
    p.add_argument("--workload", help="zoo workload whose demand to serve (with --strategy)")
    p.add_argument("--strategy", help="dp=D,tp=T,pp=P[,...] for --workload")
    _add(p, "--hardware", help="GPU for --workload (default A100-80)")
    p.add_argument("--out", help="write the topology YAML (and FILE.routes.json next to it)")

    for name, fn, help_ in (
            ("synth", _cmd_synth, "synthesize a collective schedule and validate it"),
            ("bound", _cmd_bound, "lower bound on the collective's time")):
        p = add(sub, name, fn, help_, "spec")
        p.add_argument("--collective", required=True, choices=KINDS, help="collective kind")
        p.add_argument("--size", required=True, help="buffer size (nccl-tests convention), e.g. "
                       "1GiB")
        p.add_argument("--chunks", type=int, default=1, help="chunks per NPU (default 1)")
        p.add_argument("--root", type=int, default=None, help="root NPU for rooted collectives")
        if name == "synth":
            p.add_argument("--algorithm", default="ring", help="algorithm name (default ring)")
            _add(p, "--seed", default=None, help="random seed of algorithms that take one")
            _option(p, "algorithm option (e.g. rings=2, order=[0,2,1,3])")
            p.add_argument("--out", help="write the schedule: FILE.json, or FILE.xml (MSCCL)")
        else:
            p.add_argument("--method", default="cut", choices=("cut", "mcf"), help="cut bounds "
                           "(default) or the fluid multicommodity-flow LP optimum")
            _option(p, "mcf option (decomposition=none|dw|mirrored, switch_model=3.14, "
                       "steps=T, time_limit=S: seconds for its LPs, default 600)")

    p = add(sub, "simulate", _cmd_simulate, "simulate point-to-point sends or replay a schedule",
            "spec")
    p.add_argument("--send", action="append", metavar="SRC:DST:SIZE",
                   help="one point-to-point send, repeatable")
    p.add_argument("--schedule", help="schedule JSON file to replay")
    p.add_argument("--model", default="congestion", choices=("analytical", "congestion", "flow"),
                   help="network model (default congestion)")
    _option(p, "network model option (congestion: order=fifo|schedule)")

    p = add(sub, "reorder", _cmd_reorder, "rank order minimising a collective's cost over a "
            "pairwise latency matrix", "--seed")
    p.add_argument("matrix", help="square CSV of one-way costs in seconds (optional header row)")
    p.add_argument("--algorithm", required=True, choices=("ring", "hd", "dbt", "bcube"),
                   help="collective algorithm whose cost is minimised")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds (default 10)")

    p = add(sub, "probe", _cmd_probe, "measure pairwise one-way latencies between Ray nodes "
            "(UDP echo) into a CSV", "--ray-address", "--seed")
    p.add_argument("--out", required=True, help="CSV file to write (read by `codesign reorder`)")
    p.add_argument("--nodes", type=int, help="actors on the local machine, or first N cluster nodes")
    p.add_argument("--rounds", type=int, default=20, help="round trips per pair (default 20)")

    workload = sub.add_parser("workload", help="inspect training workloads").add_subparsers(
        dest="workload_command", required=True, parser_class=_Parser)
    p = add(workload, "show", _cmd_workload_show, "layers, parameter and FLOP totals, memory "
            "of a zoo model or model YAML file", "--config")
    p.add_argument("name", help="zoo name (resnet50, gpt3-175b, ...) or a model YAML file")
    _option(p, "override a hyper-parameter or setting (e.g. seq_len=4096, batch_size=512)")
    p.add_argument("--strategy", help="add the demand summary of this parallelization "
                   "strategy (dp=D,tp=T,pp=P[,key=value...]: the keys of `evaluate "
                   "--strategy`, docs/architecture.md section 6)")
    _add(p, "--hardware", help="GPU for --strategy (default A100-80; servers of its GPU count)")

    p = add(sub, "optimize", _cmd_optimize, "TopoOpt: alternate strategy search and "
            "TopologyFinder, compare with baselines", "--config", "--servers", "--degree",
            "--bandwidth", "--hardware", "--hardware-file", "--collective-method",
            "--comm-overlap", "--ray-address", "--seed")
    p.add_argument("--workload", required=True, help=_ZOO)
    p.add_argument("--gpus-per-server", type=int, default=4, help="default 4 (TopoOpt Sec. 5.1)")
    p.add_argument("--batch-size", type=int, help="global batch override")
    p.add_argument("--strategy", help="starting strategy (default pure data parallelism)")
    p.add_argument("--rounds", type=int, default=3, help="at most k alternating rounds")
    p.add_argument("--budget", type=int, default=24, help="strategy evaluations per round")
    p.add_argument("--baselines", help="comma list (default all: fattree,fattree-oversub,"
                   "ideal,expander,ocs-reconfig); empty for none")
    p.add_argument("--workers", type=int, default=1,
                   help="CPUs of the local Ray (0: no Ray; same answer for any)")
    p.add_argument("--out", help="folder for topology.yaml and routes.json")

    p = add(sub, "evaluate", _cmd_evaluate, "time one training iteration of a workload and "
            "strategy on a topology", "--config", "--hardware", "--hardware-file",
            "--collective-method", "--comm-overlap")
    p.add_argument("--topology", required=True,
                   help="spec string or YAML file; NPUs are the job's servers or its GPUs")
    p.add_argument("--workload", required=True, help=f"{_ZOO} or a model YAML file")
    _option(p, "override a workload hyper-parameter or setting (batch_size=512; transformers: "
            "layers, hidden, heads, kv_heads, head_dim, ffn, vocab, seq_len, experts, top_k, "
            "capacity_factor, shared_experts, window, global_every, doc_len, kv_lora_rank, "
            "q_lora_rank, rope_head_dim, v_head_dim, dense_layers, dense_ffn, precision; "
            "LoRA fine-tuning: lora_rank=16, lora_modules=linear_qkv+linear_proj+"
            "linear_fc1+linear_fc2)")
    p.add_argument("--strategy", help="dp=D,tp=T,pp=P[,cp=C][,microbatches=M][,zero=Z]"
                   "[,ep=E][,etp=1][,embedding=data|model][,sp=true]"
                   "[,recompute=none|selective|full]"
                   "[,recompute_layers=N]"
                   "[,schedule=1f1b|interleaved|gpipe][,vpp=V][,split=balanced|layers]"
                   "[,precision=...][,grad_precision=fp32|bf16|fp16][,cp_comm=ring|allgather]"
                   "[,recompute_modules=...][,offload_layers=N][,fp8_params=true] "
                   "(default: pure data parallel on every GPU)")
    p.add_argument("--gpus-per-server", type=int,
                   help="GPUs per server (default: the hardware's)")
    p.add_argument("--network-model", default="flow",
                   choices=("flow", "congestion", "analytical"),
                   help="network model (default flow)")
    p.add_argument("--routing", default="auto",
                   choices=("auto", "shortest", "ecmp", "dmodk", "spray"),
                   help="paths of transfers/all-to-alls: auto (default, as sweeps: ECMP on "
                        "switched fabrics, spray on multi-plane ones, shortest on "
                        "direct-connect ones), one minimum-hop path per pair, per-pair hashed "
                        "ECMP over all of them, D-mod-k up/down routing (Clos fabrics), or "
                        "spray: every pair split over the planes (multi-plane Clos; "
                        "collectives too)")
    p.add_argument("--no-overlap", action="store_true",
                   help="do not overlap gradient buckets with the backward pass")
    p.add_argument("--tp-comm-overlap", choices=("false", "true", "backward"),
                   help="TP collectives hide under their layer's GEMMs (true: Megatron-LM's "
                        "--tp-comm-overlap; backward: only the backward pass's, its "
                        "asynchronous TP all-reduce; default: --comm-overlap's)")
    p.add_argument("--param-gather-overlap", action="store_true", default=None,
                   help="ZeRO-1/2's weight all-gather overlaps the next forward "
                        "(Megatron-LM's --overlap-param-gather; on by default with "
                        "--comm-overlap framework)")
    p.add_argument("--ep-comm-overlap", action="store_true",
                   help="a micro-batch's expert all-to-alls run under another micro-batch's "
                        "compute of the same layer (DeepSeek-V3's DualPipe, Megatron-core's "
                        "overlap_moe_expert_parallel_comm)")
    p.add_argument("--ep-dispatch", default="alltoall", choices=DISPATCHERS,
                   help="how expert layers reach their experts: alltoall (default, "
                        "Megatron-core's all-to-all dispatcher), hierarchical (DeepSeek-V3 / "
                        "DeepEP: once per destination server over the network, then "
                        "NVLink) or hierarchical-fp8 (the same, dispatch in FP8)")
    p.add_argument("--pp-comm-overlap", action="store_true", default=None,
                   help="pipeline sends of the interleaved schedule run under one model "
                        "chunk's compute (Megatron-LM's overlap_p2p_comm; ignored without "
                        "schedule=interleaved; on by default with --comm-overlap framework)")
    p.add_argument("--attention-kernel", choices=ATTENTION_KERNELS,
                   help="the fused attention kernel the framework runs: cudnn (Transformer "
                        "Engine's choice on Hopper and later) or flash2 (FlashAttention-2: "
                        "PyTorch SDPA, stacks without Transformer Engine); default the "
                        "GPU's (its compute profile's attention_kernel)")
    p.add_argument("--fail", help=f"failure what-if: {_FAIL}: slowdown distribution of this "
                   "strategy's job")
    p.add_argument("--closed-form", action="store_true",
                   help="TopoOpt Eq. (1) estimate instead of the simulation")

    p = add(sub, "calibrate", _cmd_calibrate, "fit one GPU type's compute efficiencies to "
            "measured runs and write a hardware profile")
    p.add_argument("runs", help="runs CSV (format: experiments/validation/README.md)")
    _add(p, "--hardware", default=None, required=True,
         help="the GPU type whose rows are fitted")
    _add(p, "--hardware-file", help="start from this hardware catalog YAML instead of the "
         "built-in one")
    p.add_argument("--out", help="write the calibrated hardware profile (YAML) here")
    p.add_argument("--carry-to", metavar="GPU[,GPU...]",
                   help="also write these GPUs with the fit carried over as the catalog "
                        "carries its H100 fit to B200 / GB200 / H200 (each parameter x the "
                        "catalog's ratio of the two GPUs): what-ifs for the next purchase "
                        "from runs on the cluster one has, e.g. --hardware H100 "
                        "--carry-to B200,GB200-NVL72")
    p.add_argument("--parameters", default=",".join(("gemm_efficiency",
                   "attention_efficiency", "memory_efficiency")),
                   help="comma-separated efficiencies to fit (default: all three; also "
                        "fp8_gemm_speed, mxfp8_gemm_speed, given 16- and 8-bit runs of "
                        "comparable configurations)")
    p.add_argument("--prior-weight", type=float, default=0.01,
                   help="pull toward the starting values, per parameter (default 0.01)")
    p.add_argument("--holdout", default="run", choices=("run", "source", "none"),
                   help="held-out error: leave one run out (default), one source, or none")
    p.add_argument("--balance", default="run", choices=("run", "source"),
                   help="weigh every run equally (default) or every source once (the "
                        "built-in catalog's rule: experiments/validation/README.md)")

    p = add(sub, "quickstart", _cmd_quickstart,
            "run the small built-in design study and write its report", "--quiet")
    _add(p, "--results", default=None)
    p.add_argument("--trials", type=int, help="number of trials")
    _add(p, "--servers", required=False, help="number of servers")
    _add(p, "--seed", default=None, help="random seed")

    p = add(sub, "sweep", _cmd_sweep, "run a design-space sweep (Optuna on Ray) from a YAML "
            "specification", "--results", "--ray-address", "--quiet")
    p.add_argument("config", help="sweep YAML file (see experiments/sweeps/small.yaml)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted sweep up to its planned trials")

    p = add(sub, "whatif", _cmd_whatif, "procurement what-if: best fabric per budget for a "
            "server count and workload mix", "--hardware-file", "--collective-method",
            "--comm-overlap", "--quiet")
    p.add_argument("--budget", help="network budget(s) in USD, e.g. 1e6,2e6")
    _add(p, "--servers", required=False, help="number of servers")
    p.add_argument("--gpus", type=int, help="number of GPUs instead of --servers")
    p.add_argument("--workload",
                   help="zoo workload or model YAML file (default resnet50)")
    p.add_argument("--mix", help="weighted mix NAME:WEIGHT,NAME:WEIGHT of zoo names or model "
                                 "files (replaces --workload)")
    _option(p, "override a hyper-parameter or setting of --workload (seq_len=8192, "
               "lora_rank=16, precision=fp8 ...; as evaluate's --option)")
    p.add_argument("--gpu", default="A100-80", help="GPU type (default A100-80)")
    p.add_argument("--catalog",
                   help="network parts catalog the budgets buy from: parts-2026 (2025-2026 "
                        "switches, optics by reach, power), table2 (TopoOpt's 2023 prices, "
                        "the default) or a catalog YAML")
    p.add_argument("--families",
                   help="fabric families to compare, comma list (default fattree,leafspine,"
                        "ideal,expander,torus,perms,topoopt; also railopt, multiplane)")
    p.add_argument("--degrees",
                   help="server degrees (links per server) to price, comma list (default "
                        "1-8; for servers of more than 8 GPUs the divisors up to one link per "
                        "GPU, e.g. 1,2,4,8,9,18,36,72 for GB200-NVL72)")
    p.add_argument("--search-evaluations", type=int,
                   help="strategies timed per workload on each finalist fabric (default 12; "
                        "0: feasible starts only, no search)")
    p.add_argument("--search-shapes", type=int,
                   help="model-parallel shapes timed before each search (default 32; 0: the "
                        "search walks from the feasible start alone)")
    p.add_argument("--finalists", type=int, default=3,
                   help="fabrics per budget that get the strategy search at least (default 3;"
                        " more while the largest co-design gain seen could make another win)")
    p.add_argument("--workers", type=int, default=2,
                   help="processes timing fabrics in parallel (default 2; same answer for any)")
    p.add_argument("--shared-cluster", action="store_true",
                   help="TopoOpt Sec. 5.6 instead: mean/p99 iteration time vs load on a shared "
                        "cluster (--servers default 432, --degree, --link-rate)")
    _add(p, "--degree", required=False, default=8, help="--shared-cluster: server degree d")
    p.add_argument("--link-rate", default="100Gbps", help="--shared-cluster: link rate B")
    g = p.add_argument_group("procurement (days, dollars, failures)")
    g.add_argument("--tokens", help="training goal in tokens (language models), e.g. 15e12 or 15T")
    g.add_argument("--samples", help="training goal in samples")
    g.add_argument("--epochs", help="training goal in epochs (ImageNet models, or with "
                                    "--dataset-samples)")
    g.add_argument("--dataset-samples", help="samples per epoch for --epochs")
    g.add_argument("--objective", default="iteration_time_s",
                   help="what picks the answer per budget: iteration_time_s (default), "
                        "cost_usd, days_to_train, usd_per_run, tco_usd")
    g.add_argument("--usd-per-kwh", type=float, help="electricity price (default 0.08)")
    g.add_argument("--pue", type=float, help="power usage effectiveness (default 1.3)")
    g.add_argument("--utilisation", type=float,
                   help="fraction of the servers' maximum power drawn (default 0.8)")
    g.add_argument("--years", type=float, help="amortisation period (default 4)")
    g.add_argument("--gpu-hour-usd",
                   help="rent instead: USD per GPU-hour, or 'catalog' (the catalog's "
                        "on-demand reference price)")
    g.add_argument("--prices", help="price catalog YAML (default codesign/data/"
                                    "cluster-2026.yaml)")
    g.add_argument("--fail", help=f"failure what-if of every answer's fabric: {_FAIL}")
    g.add_argument("--report", metavar="DIR",
                   help="also write the procurement report (report.html, report.md, "
                        "plots) to DIR")

    p = add(sub, "report", _cmd_report, "write the HTML/Markdown report of a results folder")
    p.add_argument("results_dir", help="results folder (a study or a folder of studies)")
    p.add_argument("--out", help="output folder (default: the results folder)")
    return parser


#: Options whose empty value is documented (``optimize --baselines ''``: no baselines).
_EMPTY_ALLOWED = frozenset({"baselines"})


def _check_empty_values(args: argparse.Namespace) -> None:
    """An empty option value (``--strategy ''``) is an error, never a silent default."""
    for name, value in vars(args).items():
        if name in _EMPTY_ALLOWED:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and not v.strip():
                flag = name if name in ("spec", "config", "matrix", "name", "results_dir") \
                    else "--" + name.replace("_", "-")
                raise invalid(flag, v, "a non-empty value")


def _run(args: argparse.Namespace) -> int:
    from codesign.resources import memory_limit_scope
    from search.ray_session import set_status

    _check_empty_values(args)
    limit = None
    if args.max_memory is not None:
        limit = parse_size(args.max_memory, field="--max-memory")
    # The limit holds for this command only (main() may be called again in process);
    # it is exported to CODESIGN_MAX_MEMORY meanwhile, so local Ray workers inherit it.
    quiet = args.json or getattr(args, "quiet", False)
    set_status(None if quiet else lambda text: print(f"codesign: {text}", file=sys.stderr))
    try:
        with memory_limit_scope(limit) if limit is not None else contextlib.nullcontext():
            return int(args.fn(args) or 0)
    finally:
        set_status(None)


def _fail(args: argparse.Namespace | None, kind: str, exc: BaseException | str, code: int,
          field: str | None = None) -> int:
    """Report an error: one line on stderr, or with --json one object on stdout."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if args is not None and getattr(args, "json", False):
        print(json.dumps({"error": text, "kind": kind, "field": field, "exit": code}))
    else:
        label = "infeasible" if kind == "infeasible" else "error"
        print(f"codesign: {label}: {text}", file=sys.stderr)
    return code


def _error_field(text: str) -> str | None:
    """The field an error message names (``invalid FIELD VALUE: ...``, ``refused: ... with F=``)."""
    import re

    m = re.search(r" with ([\w\-.\[\] ]+?)=", text)
    if text.startswith("refused:") and m:
        return m.group(1)
    m = re.match(r"invalid (.+?) (?:'|\d|-|\[|\{|\(|None|True|False|<)", text)
    if m:
        return m.group(1)
    # Files (codesign.files): "cannot read|write WHAT 'path': why".
    m = re.match(r"cannot (?:read|write) (.+?) '", text)
    if m:
        return m.group(1)
    # Mappings (codesign.specs.check_keys): "unknown|missing key 'k' in WHERE...".
    m = re.match(r"(?:unknown|missing) key '([^']+)'", text)
    return m.group(1) if m else None


def _attach_negative_values(argv: list[str]) -> list[str]:
    """``--size -1MiB`` -> ``--size=-1MiB``, so that the value's own check answers.

    argparse takes a token such as ``-1MiB`` or ``-5%`` for an unknown option and says only
    "expected one argument"; attached to its long option it reaches the field's parser,
    which names the value and what is allowed.  Plain negative numbers (``-1``, ``-0.5``)
    argparse already passes as values; this leaves them as they are too.
    """
    out: list[str] = []
    for tok in argv:
        if (out and out[-1].startswith("--") and "=" not in out[-1] and out[-1] != "--"
                and len(tok) > 1 and tok[0] == "-" and (tok[1].isdigit() or tok[1] == ".")):
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``codesign`` console script; returns the exit status.

    Bad input exits 2 with one line on stderr (with ``--json``: one object
    ``{"error", "kind", "field", "exit"}`` on stdout); an infeasible request
    exits 1.  Library warnings (numpy overflow and the like) are not printed:
    results carry non-finite values as ``null`` with ``null_reasons``.
    """
    import warnings

    parser = build_parser()
    argv = _attach_negative_values(sys.argv[1:] if argv is None else list(argv))
    _Parser.json_errors = "--json" in argv
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = _run(args)
        sys.stdout.flush()  # a reader that went away (| head) fails here, handled below
        return code
    except BrokenPipeError:
        # Stop quietly, as a tool killed by SIGPIPE would (exit 128 + 13); stdout goes to
        # /dev/null so that the interpreter's final flush does not fail again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except InvalidSpecError as exc:
        return _fail(args, "invalid", exc, 2, _error_field(str(exc)))
    except InfeasibleError as exc:
        return _fail(args, "infeasible", exc, 1)
    except CodesignError as exc:
        return _fail(args, "error", exc, 1)
    except MemoryError:
        return _fail(args, "memory", "ran out of memory; the input is too large for this "
                     "machine (lower the sizes, or set --max-memory to refuse earlier)", 2)
    except RecursionError:
        return _fail(args, "invalid", "input nested too deeply", 2)
    except KeyboardInterrupt:
        print("codesign: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not type(exc).__module__.startswith("ray"):
            raise  # a bug: keep the traceback
        from search.ray_session import describe_ray_error

        return _fail(args, "ray", describe_ray_error(exc), 1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
