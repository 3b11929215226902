"""TopoOpt Section 5.6's shared cluster: iteration time of concurrent jobs against load.

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
every job's per-iteration server-to-server bytes (its :class:`codesign.workloads.Demand`'s server
matrix) are spread evenly over all minimum-hop paths (ideal ECMP, a fluid
split), every link's load is the sum over the jobs using it, and a job's
communication time is its most loaded link's total load / capacity (all jobs
communicate during the same period: the steady state of long-running jobs).
Iteration time = compute time (the iteration model's ``compute_time_s`` on the
job's own fabric) + that
communication time (no overlap: conservative, the same for every fabric).
Reported per fabric and load: mean and 99th-percentile iteration time over the
jobs (linear interpolation; with 27 jobs the p99 is close to the slowest job).

Paths: :func:`topologies.routing.ecmp_split_loads` (``"ecmp_split"``).  The fabrics
come from the caller (``fabric_spec``), so that this model needs nothing from
:mod:`search`; :func:`search.whatif.shared_cluster` passes the design families.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_choice, check_int
from codesign.workloads import demand_for, get_hardware, get_workload
from topologies.cost import topology_cost, topoopt_cost
from topologies.registry import from_spec
from topologies.routing import ecmp_split_loads, path_counts

__all__ = ["SharedClusterRow", "shared_cluster", "format_shared_cluster", "FabricSpec",
           "SHARED_MIX", "SHARED_FABRICS"]

#: ``fabric_spec(family, servers, degree, link_rate_Bps, seed) -> topology spec string``.
FabricSpec = Callable[[str, int, int, float, int], str]

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


def _largest_remainder(total: int, shares: list[float]) -> list[int]:
    raw = [total * w / sum(shares) for w in shares]
    counts = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (counts[i] - raw[i], i))[:total - sum(counts)]:
        counts[i] += 1
    return counts


def shared_cluster(fabric_spec: FabricSpec, *, servers: int = 432, degree: int = 8,
                   link_rate_Bps: float = 100e9 / 8, job_servers: int = 16, gpus_per_server: int = 4, gpu: str = "A100-80",
                   jobs: tuple[int, ...] = (5, 10, 15, 20, 27),
                   fabrics: tuple[str, ...] = SHARED_FABRICS, config: str = "5.6",
                   mix: tuple[tuple[str, float, str], ...] = SHARED_MIX,
                   seed: int = 0) -> list[SharedClusterRow]:
    """TopoOpt Section 5.6's shared cluster (module docstring): iteration time against load.

    Parameters
    ----------
    fabric_spec : callable
        ``fabric_spec(family, servers, degree, link_rate_Bps, seed) -> topology spec``
        (:data:`FabricSpec`; :func:`search.whatif.shared_cluster` passes the design
        families); families ``perms``, ``fattree``, ``leafspine`` and ``ideal`` are
        asked for.
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
    from evaluators import iteration

    for fab in fabrics:
        check_choice("shared cluster fabric", fab, SHARED_FABRICS)
    # The cluster holds one job at least (0 servers was reported as a bad job count).
    check_int("shared cluster servers", servers, job_servers)
    for k in jobs:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise invalid("shared cluster jobs", k, "an integer >= 1")
    if max(jobs) * job_servers > servers:   # (the CLI's user gave the servers, not the jobs)
        raise invalid("shared cluster servers", servers,
                      f"at least {max(jobs) * job_servers} for {max(jobs)} jobs of "
                      f"{job_servers} servers")
    hw = dataclasses.replace(get_hardware(gpu), gpus_per_server=gpus_per_server)
    # Sizes and degrees a fabric cannot have are the caller's values, refused before any
    # work (a 2:1 leaf-spine of a prime number of servers, a job's perms partition d <=
    # its rings).
    for fab, n, field, value in [("perms", job_servers, "degree", degree)] + [
            (f.split("-")[0], servers, "servers", servers) for f in fabrics if f != "topoopt"]:
        try:
            fabric_spec(fab, n, degree, link_rate_Bps, seed)
        except InfeasibleError as exc:
            raise invalid(f"shared cluster {field}", value, f"one the {fab} fabric can have "
                          f"({exc})") from None
    part_spec = fabric_spec("perms", job_servers, degree, link_rate_Bps, seed)
    partition = from_spec(part_spec)
    part_counts = path_counts(partition)
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
        load = ecmp_split_loads(partition, pairs, part_counts)
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
                         if r <= link_rate_Bps and topology_cost(from_spec(fabric_spec(
                             "fattree", servers, degree, r, 0))).total_usd
                         <= budget]
                if not rates:
                    raise InfeasibleError(f"no Fat-tree of {servers} servers costs at most the "
                                          f"TopoOpt fabric (${budget:,.0f})")
                rate = max(rates)
            spec = fabric_spec(fab.split("-")[0], servers, degree, rate, seed)
            topo = from_spec(spec)
            counts = path_counts(topo)
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
                    job_load = ecmp_split_loads(topo, pairs, counts)
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
