"""Procurement what-if: the best fabric per budget for a server count and a workload mix.

``codesign whatif --budget 1e5,5e5 --servers 128 --mix resnet50:2,dlrm:1`` calls
:func:`run_whatif`.  For a fixed number of servers (of one GPU type) and a
weighted workload mix it evaluates *every* fabric of a small grid -- topology
family x server degree x link rate (default: the quickstart families and
``topoopt``, TopologyFinder on the mix's demand; degree 1-8, 25/100/200/400 Gbps) -- once with :func:`search.sweep.evaluate_trial`
(the same evaluation as the sweeps), and then, for each budget, picks the
fabric with the smallest weighted iteration time among those whose network
costs at most the budget (ties: the cheaper one).  The search is exhaustive
over the grid, so the answer is exact for it; a budget below every buildable
fabric has no answer.

Reported per budget: the fabric, its network cost (TopoOpt Table 2 prices),
the weighted iteration time, the training throughput in iterations per second
(1 / iteration time) and the **cost per unit of training throughput**
``cost_usd x iteration_time_s`` (USD per iteration/s: what one more iteration
per second costs in network at this design point; lower is better).

Shared cluster (TopoOpt Section 5.6, :func:`shared_cluster`)
-----------------------------------------------------------
A cluster of ``servers`` (432) runs ``jobs`` jobs of ``job_servers`` (16) servers of
4 GPUs each (64 GPUs, as in the paper), drawn from the mix 40 % DLRM, 30 % BERT,
20 % CANDLE, 10 % VGG16 at their Sec. 5.6 configurations; 5, 10, 15, 20 and 27
jobs are 20-100 % load.  The fabrics (d = 8, B = 100 Gbps): a full-bisection
Fat-tree with ``d x B`` server links, the 2:1 oversubscribed Fat-tree, the Ideal
Switch, and TopoOpt, *sharded*: every job gets its own partition, a degree-``d``
ring-permutation fabric on its servers (Appendix C: partitions are disjoint, so
a job never shares a link) whose all-reduce is split evenly over its ``d``
permutation rings (TotientPerms, Sec. 4.2) while model-parallel traffic is
forwarded over minimum-hop paths through other servers (host-based forwarding).
``fattree-samecost`` is the paper's "similar-cost Fat-tree": the fastest server
link rate ``d x B'`` (``B'`` in 10/25/40/50/100 Gbps) whose Fat-tree costs at most
the TopoOpt fabric.  On the switched fabrics jobs share links; their
servers are chosen at random (seeded; a scheduler with no topology awareness).

The model, stated because it is ours (the paper uses packet simulation):
every job's per-iteration server-to-server bytes (its :class:`Demand`'s server
matrix) are spread evenly over all minimum-hop paths (ideal ECMP, a fluid
split), every link's load is the sum over the jobs using it, and a job's
communication time is its most loaded link's total load / capacity (all jobs
communicate during the same period: the steady state of long-running jobs).
Iteration time = compute time (the iteration model's ``compute_time_s`` on the
job's own fabric) + that
communication time (no overlap: conservative, the same for every fabric).
Reported per fabric and load: mean and 99th-percentile iteration time over the
jobs (linear interpolation; with 27 jobs the p99 is close to the slowest job).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codesign.errors import InfeasibleError, invalid
from search.sweep_trial import SweepPoint, TrialOutcome, evaluate_trial
from search.sweep_spec import WorkloadItem

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

__all__ = ["WhatIfChoice", "WhatIfResult", "parse_budgets", "parse_mix", "run_whatif",
           "format_whatif", "SharedClusterRow", "shared_cluster", "ecmp_link_loads",
           "format_shared_cluster"]

DEFAULT_FAMILIES = ("fattree", "leafspine", "ideal", "expander", "torus", "perms", "topoopt")
DEFAULT_DEGREES = tuple(range(1, 9))
DEFAULT_LINK_RATES_BPS = (25e9 / 8, 100e9 / 8, 200e9 / 8, 400e9 / 8)

_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9}
_BUDGET_RE = re.compile(r"^\$?([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([kmb]?)$", re.IGNORECASE)


def parse_budgets(text: str | float | list) -> tuple[float, ...]:
    """Parse ``"1e6,2.5M,$500k"`` into ascending distinct budgets in USD (> 0).

    Examples
    --------
    >>> parse_budgets("500k,1e6,$2M")
    (500000.0, 1000000.0, 2000000.0)
    """
    items = text if isinstance(text, list) else [text] if not isinstance(text, str) \
        else text.split(",")
    out = []
    for item in items:
        if isinstance(item, bool):
            raise invalid("budget", item, "an amount in USD such as 1e6, 500k or $2M")
        if isinstance(item, (int, float)):
            value = float(item)
        else:
            m = _BUDGET_RE.match(str(item).strip().replace("_", "").replace(",", ""))
            if not m:
                raise invalid("budget", item, "an amount in USD such as 1e6, 500k or $2M")
            value = float(m.group(1)) * _SCALE[m.group(2).lower()]
        if not math.isfinite(value) or value <= 0:
            raise invalid("budget", item, "an amount in USD > 0")
        out.append(value)
    if not out:
        raise invalid("budget", text, "one or more amounts in USD")
    return tuple(sorted(set(out)))


def parse_mix(text: str) -> tuple[WorkloadItem, ...]:
    """Parse ``"resnet50:2,dlrm:1"`` (weights default to 1) into a workload mix.

    Raises
    ------
    InvalidSpecError
        Unknown workload, a weight that is not a number > 0, or a repeated name.
    """
    from codesign.workloads import workload_names

    names = workload_names()
    if not isinstance(text, str) or not text.strip():
        raise invalid("workload mix", text, "NAME[:WEIGHT][,NAME[:WEIGHT]...]")
    items = []
    for part in text.split(","):
        name, _, weight = part.strip().partition(":")
        if name not in names:
            raise invalid("workload", name, f"one of {', '.join(names)}")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise invalid(f"workload {name} weight", weight, "a number > 0") from None
        if not math.isfinite(w) or w <= 0:
            raise invalid(f"workload {name} weight", weight, "a number > 0")
        items.append(WorkloadItem(name, w))
    if len({i.name for i in items}) != len(items):
        raise invalid("workload mix", text, "each workload at most once")
    return tuple(items)


@dataclass(frozen=True)
class WhatIfChoice:
    """The answer for one budget (fabric fields ``None`` when nothing fits)."""

    budget_usd: float
    family: str | None = None
    degree: int | None = None
    link_bandwidth_Bps: float | None = None
    topology_spec: str | None = None
    cost_usd: float | None = None
    iteration_time_s: float | None = None
    iterations_per_s: float | None = None
    cost_per_throughput_usd: float | None = None
    per_workload: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class WhatIfResult:
    """What :func:`run_whatif` returns: one :class:`WhatIfChoice` per budget, ascending."""

    servers: int
    gpu: str
    workloads: tuple[WorkloadItem, ...]
    choices: tuple[WhatIfChoice, ...]
    evaluated: int
    complete: int
    pruned_reasons: dict[str, int] = field(default_factory=dict)
    time_model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"servers": self.servers, "gpu": self.gpu,
                "workloads": [w.__dict__ for w in self.workloads],
                "choices": [c.to_dict() for c in self.choices], "evaluated": self.evaluated,
                "complete": self.complete, "pruned_reasons": dict(self.pruned_reasons),
                "time_model": self.time_model}


def run_whatif(budgets: tuple[float, ...] | list[float], *, servers: int,
               workloads: tuple[WorkloadItem, ...] | str = "resnet50", gpu: str = "A100-80",
               families: tuple[str, ...] = DEFAULT_FAMILIES,
               degrees: tuple[int, ...] = DEFAULT_DEGREES,
               link_rates_Bps: tuple[float, ...] = DEFAULT_LINK_RATES_BPS,
               collective_method: str = "auto", leafspine_oversub: float = 2.0,
               seed: int = 0) -> WhatIfResult:
    """Best fabric per budget (see the module docstring).

    Parameters
    ----------
    budgets : sequence of float
        Network budgets, USD (:func:`parse_budgets` parses strings).
    servers : int
        Servers of the cluster (each with the GPU type's ``gpus_per_server`` GPUs).
    workloads : tuple of WorkloadItem or str
        The weighted mix, or a mix string for :func:`parse_mix`.
    gpu : str
        GPU type (hardware catalog name).
    families, degrees, link_rates_Bps : tuples
        The fabric grid (link rates in bytes/s).
    collective_method, leafspine_oversub, seed
        As in :class:`search.sweep.SweepPoint`.

    Returns
    -------
    WhatIfResult

    Raises
    ------
    InvalidSpecError
        Bad servers, GPU, budgets or mix.
    InfeasibleError
        No fabric of the grid can run the mix (e.g. it does not fit in GPU memory).
    """
    from codesign.workloads import get_hardware
    from search.sweep_trial import time_model_name

    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 2:
        raise invalid("whatif servers", servers, "an integer >= 2")
    get_hardware(gpu)
    budgets = parse_budgets(list(budgets))
    mix = parse_mix(workloads) if isinstance(workloads, str) else tuple(workloads)
    outcomes: list[tuple[SweepPoint, TrialOutcome]] = []
    reasons: dict[str, int] = {}
    for family in families:
        for degree in degrees:
            for rate in link_rates_Bps:
                point = SweepPoint(family, servers, degree, float(rate), gpu=gpu,
                                   collective_method=collective_method, workloads=mix,
                                   seed=seed, oversub=leafspine_oversub)
                out = evaluate_trial(point)
                if out.status == "complete":
                    outcomes.append((point, out))
                else:
                    key = out.reason.split(":", 1)[0]
                    reasons[key] = reasons.get(key, 0) + 1
    evaluated = len(families) * len(degrees) * len(link_rates_Bps)
    if not outcomes:
        raise InfeasibleError(f"no fabric of the grid can run the mix on {servers} servers of "
                              f"{gpu} (pruned: {reasons})")
    # Fastest first, then cheapest, then a fixed order: the choice is deterministic.
    outcomes.sort(key=lambda po: (po[1].metrics["iteration_time_s"], po[1].metrics["cost_usd"],
                                  po[0].family, po[0].degree, po[0].link_bandwidth_Bps))
    choices = []
    for budget in budgets:
        pick = next(((p, o) for p, o in outcomes if o.metrics["cost_usd"] <= budget), None)
        if pick is None:
            choices.append(WhatIfChoice(budget))
            continue
        p, o = pick
        m = o.metrics
        choices.append(WhatIfChoice(
            budget, p.family, p.degree, p.link_bandwidth_Bps, m["topology_spec"], m["cost_usd"],
            m["iteration_time_s"], 1.0 / m["iteration_time_s"], m["cost_usd"] *
            m["iteration_time_s"], tuple(json.loads(m["per_workload_json"]))))
    return WhatIfResult(servers, gpu, mix, tuple(choices), evaluated, len(outcomes), reasons,
                        time_model_name())


def format_whatif(result: WhatIfResult) -> str:
    """A plain-text table of the result (what ``codesign whatif`` prints)."""
    from codesign.units import format_bandwidth, format_time

    mix = ", ".join(f"{w.name} x{w.weight:g}" for w in result.workloads)
    lines = [f"{result.servers} servers of {result.gpu}; mix: {mix}; {result.complete} of "
             f"{result.evaluated} fabrics buildable and feasible ({result.time_model})",
             f"{'budget':>14}  {'fabric':<52} {'cost':>12} {'iteration':>10} "
             f"{'USD per it/s':>13}"]
    for c in result.choices:
        if c.family is None:
            lines.append(f"{c.budget_usd:>14,.0f}  no fabric of the grid fits this budget")
            continue
        fabric = f"{c.family} d={c.degree} {format_bandwidth(c.link_bandwidth_Bps, bits=True)}"
        lines.append(f"{c.budget_usd:>14,.0f}  {fabric:<52} {c.cost_usd:>12,.0f} "
                     f"{format_time(c.iteration_time_s):>10} {c.cost_per_throughput_usd:>13,.0f}")
    return "\n".join(lines)




# ------------------------------------------------------------- shared cluster
#: TopoOpt Sec. 5.6's job mix: (workload, share, strategy on 16 servers x 4 GPUs).
SHARED_MIX = (("dlrm", 0.4, "dp=64,embedding=model"), ("bert", 0.3, "dp=64"),
              ("candle", 0.2, "dp=64"), ("vgg16", 0.1, "dp=64"))
SHARED_FABRICS = ("fattree", "fattree-samecost", "leafspine", "ideal", "topoopt")


@dataclass(frozen=True)
class SharedClusterRow:
    """One (fabric, load) point of :func:`shared_cluster`."""

    fabric: str
    jobs: int
    load: float
    mean_iteration_s: float
    p99_iteration_s: float
    max_iteration_s: float
    cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _path_counts(topo) -> tuple["np.ndarray", "np.ndarray"]:
    """All-pairs hop matrix and number of minimum-hop paths (parallel links count once)."""
    import numpy as np

    n = topo.n_nodes
    hops = np.asarray(topo.hop_matrix, dtype=np.int64)
    adj = np.zeros((n, n))
    adj[topo.src, topo.dst] = 1.0
    sigma = np.eye(n)
    for d in range(1, int(hops[np.isfinite(hops)].max()) + 1 if hops.size else 1):
        nxt = (sigma * (hops == d - 1)) @ adj
        sigma += nxt * (hops == d)
    return hops, sigma


def ecmp_link_loads(topo, pairs: list[tuple[int, int, float]], counts=None) -> "np.ndarray":
    """Bytes per link when every pair's bytes are split evenly over its minimum-hop paths.

    Parameters
    ----------
    topo : topologies.Topology
        The network.
    pairs : list of (src node, dst node, bytes)
        Traffic.
    counts : tuple, optional
        Cached :func:`_path_counts` of ``topo``.

    Returns
    -------
    numpy.ndarray, shape (n_links,)
        Load of every directed link, bytes.  Link ``(u, v)`` carries the fraction
        ``sigma(s, u) sigma(v, t) / sigma(s, t)`` of pair ``(s, t)`` when it lies on a
        minimum-hop path (``h(s, u) + 1 + h(v, t) = h(s, t)``); parallel links share
        their hop's fraction in proportion to their bandwidth.
    """
    import numpy as np

    hops, sigma = counts if counts is not None else _path_counts(topo)
    src, dst, bw = topo.src, topo.dst, np.asarray(topo.bandwidth, dtype=float)
    # Parallel links between the same (u, v) split their hop's share by bandwidth.
    key = src.astype(np.int64) * topo.n_nodes + dst
    _, inverse = np.unique(key, return_inverse=True)
    share = bw / np.bincount(inverse, weights=bw)[inverse]
    load = np.zeros(len(src))
    for s, t, b in pairs:
        if s == t or b <= 0:
            continue
        on = hops[s, src] + 1 + hops[dst, t] == hops[s, t]
        frac = np.where(on, sigma[s, src] * sigma[dst, t], 0.0) / sigma[s, t]
        load += b * frac * share
    return load


def _largest_remainder(total: int, shares: list[float]) -> list[int]:
    raw = [total * w / sum(shares) for w in shares]
    counts = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (counts[i] - raw[i], i))[:total - sum(counts)]:
        counts[i] += 1
    return counts


def shared_cluster(*, servers: int = 432, degree: int = 8, link_rate_Bps: float = 100e9 / 8,
                   job_servers: int = 16, gpus_per_server: int = 4, gpu: str = "A100-80",
                   jobs: tuple[int, ...] = (5, 10, 15, 20, 27),
                   fabrics: tuple[str, ...] = SHARED_FABRICS, config: str = "5.6",
                   mix: tuple[tuple[str, float, str], ...] = SHARED_MIX,
                   seed: int = 0) -> list[SharedClusterRow]:
    """TopoOpt Section 5.6's shared cluster (module docstring): iteration time against load.

    Parameters
    ----------
    servers : int
        Servers of the cluster (432 in the paper: a k = 12 Fat-tree).
    degree, link_rate_Bps : int, float
        Server degree ``d`` and link rate ``B`` (bytes/s).
    job_servers, gpus_per_server : int
        Servers per job and GPUs per server (16 x 4 in the paper).
    gpu : str
        GPU type.
    jobs : tuple of int
        Numbers of concurrent jobs (load = jobs x job_servers / servers).
    fabrics : tuple of str
        Among ``fattree``, ``fattree-samecost``, ``leafspine``, ``ideal``, ``topoopt``.
    config : str
        Zoo configuration of the workloads.
    mix : tuple of (name, share, strategy)
        Job types; the counts of each load follow the shares (largest remainder),
        shuffled with ``seed``.
    seed : int
        Job order and server placement on the switched fabrics.

    Returns
    -------
    list of SharedClusterRow
        One row per (fabric, jobs), fabrics in the given order.

    Raises
    ------
    InvalidSpecError
        Unknown fabric, or more jobs than fit (``jobs x job_servers > servers``).
    """
    import dataclasses

    import numpy as np

    from codesign.workloads import demand_for, get_hardware, get_workload
    from search.design_point import DesignPoint, topology_spec_for
    from evaluators import iteration
    from topologies.cost import topology_cost, topoopt_cost
    from topologies.registry import from_spec

    for fab in fabrics:
        if fab not in SHARED_FABRICS:
            raise invalid("shared cluster fabric", fab, f"one of {', '.join(SHARED_FABRICS)}")
    for k in jobs:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k * job_servers <= servers:
            raise invalid("shared cluster jobs", k,
                          f"an integer in [1, {servers // job_servers}] ({servers} servers / "
                          f"{job_servers} per job)")
    hw = dataclasses.replace(get_hardware(gpu), gpus_per_server=gpus_per_server)
    part_spec = topology_spec_for(DesignPoint("perms", job_servers, degree, link_rate_Bps,
                                              seed=seed))
    partition = from_spec(part_spec)
    part_counts = _path_counts(partition)
    gens_all = tuple(int(g) for g in part_spec.split(",p=")[1].split(",")[0].split(":"))
    types = {}
    for name, _, strategy in mix:  # per job type: compute time and server matrix
        w = get_workload(name, config)
        d = demand_for(w, strategy, hw)
        compute = float(iteration.evaluate(partition, w, strategy, hardware=hw).compute_time_s)
        groups, mp = d.split()
        ring = [(a, b, v) for members, v in groups
                for a, b in zip(members, members[1:] + members[:1])]
        # TopoOpt's TotientPerms all-reduce (Sec. 4.2): a ring collective over the whole
        # partition is split evenly over the d permutation rings i -> i + g of the fabric.
        perm_ring = []
        for members, v in groups:
            gens = gens_all if len(members) == job_servers else (1,)
            for g in gens:
                perm_ring += [(members[i], members[(i + g) % len(members)], v / len(gens))
                              for i in range(len(members))]
        nz = np.nonzero(mp)
        mp_pairs = [(int(a), int(b), float(mp[a, b])) for a, b in zip(*nz)]
        types[name] = (compute, ring + mp_pairs, perm_ring + mp_pairs)
    # TopoOpt: a dedicated partition per job, so its time does not depend on the load.
    dedicated = {}
    for name, (compute, _, pairs) in types.items():
        load = ecmp_link_loads(partition, pairs, part_counts)
        dedicated[name] = compute + float(np.max(load / partition.bandwidth))
    rng = np.random.default_rng(seed)
    rows = []
    for fab in fabrics:
        if fab == "topoopt":
            topo, counts = None, None
            cost = float(topoopt_cost(servers, degree, link_rate_Bps).total_usd)
        else:
            rate = link_rate_Bps
            if fab == "fattree-samecost":
                budget = float(topoopt_cost(servers, degree, link_rate_Bps).total_usd)
                rates = [r for r in (10e9 / 8, 25e9 / 8, 40e9 / 8, 50e9 / 8, 100e9 / 8)
                         if r <= link_rate_Bps and topology_cost(from_spec(topology_spec_for(
                             DesignPoint("fattree", servers, degree, r)))).total_usd
                         <= budget]
                if not rates:
                    raise InfeasibleError(f"no Fat-tree of {servers} servers costs at most the "
                                          f"TopoOpt fabric (${budget:,.0f})")
                rate = max(rates)
            spec = topology_spec_for(DesignPoint(fab.split("-")[0], servers, degree, rate,
                                                 seed=seed))
            topo = from_spec(spec)
            counts = _path_counts(topo)
            cost = float(topology_cost(topo).total_usd)
        for k in jobs:
            kinds = [n for (n, _, _), c in zip(mix, _largest_remainder(
                k, [sh for _, sh, _ in mix])) for _ in range(c)]
            kinds = [kinds[i] for i in rng.permutation(len(kinds))]
            if topo is None:
                times = [dedicated[n] for n in kinds]
            else:
                place = rng.permutation(servers)[:k * job_servers].reshape(k, job_servers)
                loads, per_job = np.zeros(topo.n_links), []
                for n, hosts in zip(kinds, place):
                    pairs = [(int(hosts[a]), int(hosts[b]), v) for a, b, v in types[n][1]]
                    job_load = ecmp_link_loads(topo, pairs, counts)
                    loads += job_load
                    per_job.append(job_load > 0)
                util = loads / topo.bandwidth
                times = [types[n][0] + (float(util[used].max()) if used.any() else 0.0)
                         for n, used in zip(kinds, per_job)]
            arr = np.asarray(times)
            rows.append(SharedClusterRow(fab, k, k * job_servers / servers, float(arr.mean()),
                                         float(np.percentile(arr, 99)), float(arr.max()), cost))
    return rows


def format_shared_cluster(rows: list[SharedClusterRow]) -> str:
    """A plain-text table of :func:`shared_cluster`'s rows."""
    lines = [f"{'fabric':<17} {'jobs':>4} {'load':>5} {'mean it. s':>11} {'p99 it. s':>10} "
             f"{'cost USD':>12}"]
    for r in rows:
        lines.append(f"{r.fabric:<17} {r.jobs:>4} {r.load:>5.0%} {r.mean_iteration_s:>11.3f} "
                     f"{r.p99_iteration_s:>10.3f} {r.cost_usd:>12,.0f}")
    return "\n".join(lines)
