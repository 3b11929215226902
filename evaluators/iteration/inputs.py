"""The three inputs of :func:`evaluators.iteration.evaluate`: system, workload, execution.

Calculon (Isaev et al., SC'23) separates what is built (the *system*), what is trained
(the *application*) and how it is run (the *execution*), and evaluates a pure function
of the three; docs/architecture.md section 3 asks the same.  Here:

* :class:`Cluster` -- the system: the network (a :class:`~topologies.model.Topology`, its
  NPUs the job's servers or its GPUs) and the GPU type
  (:class:`~codesign.workloads.hardware.Hardware`: peak, memory, GPUs per server,
  intra-server fabric).
* the workload -- a :class:`~codesign.workloads.model.Workload` (or a zoo name).
* :class:`Execution` -- the strategy, where ranks go (:class:`Placement`), which
  algorithm times the collectives, how transfers are routed, and the overlap knobs of
  the training framework (gradient buckets, TP communication, ZeRO's parameter
  gather).

How the evaluator models all this (the network model, its ``rtol``, a forced compute
``efficiency``, the memory check) stays a keyword of :func:`evaluate`: it is not part of
the design being evaluated.

Examples
--------
>>> from evaluators.iteration import Cluster, Execution, evaluate
>>> r = evaluate(Cluster("ideal:16,degree=4,bw=100Gbps", "A100-80"), "resnet50",
...              Execution("dp=128", collective_method="ring"))
>>> r.gpus, r.servers
(128, 16)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from codesign.errors import invalid
from codesign.specs import check_choice

__all__ = ["Cluster", "Execution", "as_cluster", "as_execution", "EXECUTION_KEYS",
           "DEFAULT_HARDWARE", "COMM_OVERLAPS", "comm_overlap_options"]

#: GPU type of a system given without one.
DEFAULT_HARDWARE = "A100-80"


@dataclass(frozen=True, eq=False)
class Cluster:
    """The system: a network and the GPU type in its servers.

    Parameters
    ----------
    topology : topologies.Topology or str
        The network, or a spec string / YAML path (loaded by
        :func:`topologies.registry.load_topology`).
    hardware : codesign.workloads.Hardware or str, optional
        The GPU (a catalog name or an entry); default ``A100-80``.

    Notes
    -----
    Both are resolved when the cluster is made, so a bad spec or GPU name raises
    :class:`~codesign.errors.InvalidSpecError` here.  Scale-up domains whose spec leaves
    their bandwidth out (``railopt:2,gpus=8``, ``multiplane:..,scaleup=8``,
    ``fattree:servers=..,scaleup=8``, ``nvl:8``) take the GPU's own NVLink bandwidth,
    ``hardware.fabric_bandwidth_Bps``, and the topology is renamed with it
    (:func:`topologies.families.scaleup.with_gpu_scaleup`); one written in the spec is
    kept.
    """

    topology: Any
    hardware: Any = DEFAULT_HARDWARE

    def __post_init__(self) -> None:
        from codesign.workloads.hardware import get_hardware
        from topologies.model import Topology
        from topologies.registry import load_topology

        topo = self.topology
        if isinstance(topo, str):
            topo = load_topology(topo)
        elif not isinstance(topo, Topology):
            raise invalid("system topology", type(topo).__name__,
                          "a Topology or a topology spec string")
        hardware = get_hardware(self.hardware)
        from topologies.families.scaleup import with_gpu_scaleup

        object.__setattr__(self, "topology",
                           with_gpu_scaleup(topo, float(hardware.fabric_bandwidth_Bps)))
        object.__setattr__(self, "hardware", hardware)


@dataclass(frozen=True)
class Execution:
    """How the job runs on the system.

    Parameters
    ----------
    strategy : codesign.workloads.Strategy or str
        The parallelization (``"dp=D,tp=T,pp=P[,...]"``, docs/architecture.md section 6).
    placement : codesign.workloads.Placement, optional
        Ranks onto servers and tables onto GPUs; default
        :meth:`Placement.for_strategy` with the hardware's GPUs per server.
    collective_method : str, optional
        Registered algorithm for inter-node collectives (default ``ring``), ``auto`` or
        ``best`` (:mod:`evaluators.iteration.comm`).
    routing : str, optional
        Paths of transfers and all-to-alls: ``auto`` (default, as the command line and
        the searches: ECMP on switched fabrics, spraying on multi-plane ones, minimum-hop
        routes with host forwarding on direct-connect ones), ``shortest``, ``ecmp``,
        ``dmodk`` or ``spray``.
    overlap : bool, optional
        Gradient buckets overlap the backward pass (default True).
    bucket_bytes : float, optional
        Gradient bucket size, bytes (default 25 MiB, PyTorch DDP's).
    tp_comm_overlap : bool or "backward", optional
        TP collectives hide under their layer's GEMMs (Megatron-LM's
        ``--tp-comm-overlap``); ``"backward"``: only the backward pass's, under the
        weight-gradient GEMMs (Megatron-LM's asynchronous TP all-reduce).
    param_gather_overlap : bool, optional
        ZeRO-1/2's parameter all-gather overlaps the next forward (Megatron-LM's
        ``--overlap-param-gather``).
    pp_comm_overlap : bool, optional
        Pipeline sends and receives of the interleaved schedule run under one model
        chunk's compute (Megatron-LM's ``overlap_p2p_comm``, its default there; ignored
        without interleaving, as in Megatron-LM).
    ep_comm_overlap : bool, optional
        Expert all-to-alls run under another micro-batch's compute (DeepSeek-V3's
        DualPipe, Megatron-core's ``overlap_moe_expert_parallel_comm``;
        :func:`codesign.workloads.demand.demand_for`).
    ep_dispatch : str, optional
        How expert layers reach their experts: ``alltoall`` (default, Megatron-core's
        all-to-all dispatcher), ``hierarchical`` (DeepSeek-V3 / DeepEP: once per
        destination server over the network, then NVLink) or ``hierarchical-fp8``
        (:mod:`codesign.workloads.dispatch`).
    attention_kernel : str, optional
        The fused attention kernel the framework runs: ``cudnn`` (Transformer Engine's
        choice on Hopper and later) or ``flash2`` (FlashAttention-2: PyTorch SDPA, stacks
        without Transformer Engine); default the GPU's
        (:attr:`~codesign.workloads.efficiency.ComputeProfile.attention_kernel`).
    """

    strategy: Any
    placement: Any = None
    collective_method: str = "ring"
    routing: str = "auto"
    overlap: bool = True
    bucket_bytes: float | None = None
    tp_comm_overlap: bool | str = False
    param_gather_overlap: bool = False
    pp_comm_overlap: bool = False
    ep_comm_overlap: bool = False
    ep_dispatch: str = "alltoall"
    attention_kernel: str | None = None

    def __post_init__(self) -> None:
        from codesign.workloads.placement import Placement
        from codesign.workloads.strategy import as_strategy

        object.__setattr__(self, "strategy", as_strategy(self.strategy))
        if self.placement is not None and not isinstance(self.placement, Placement):
            raise invalid("execution placement", type(self.placement).__name__,
                          "a Placement or None")
        for name in ("collective_method", "routing", "ep_dispatch"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise invalid(f"execution {name}", value, "a name (string)")
        if self.attention_kernel is not None:
            from codesign.workloads.efficiency import ATTENTION_KERNELS

            check_choice("execution attention_kernel", self.attention_kernel,
                         ATTENTION_KERNELS)


#: Fields of :class:`Execution` that :func:`evaluate` also takes as keywords (old form).
EXECUTION_KEYS = tuple(f.name for f in fields(Execution) if f.name != "strategy")


#: Communication-overlap policies of the co-design commands (:func:`comm_overlap_options`).
COMM_OVERLAPS = ("framework", "none")


def comm_overlap_options(policy: str, strategy: Any) -> dict[str, Any]:
    """The :class:`Execution` overlap knobs a co-design command times ``strategy`` with.

    ``optimize``, ``whatif`` and sweeps choose strategies, not frameworks' flags, so they
    assume one policy for every candidate:

    * ``"framework"`` (their default): the overlap today's Megatron-core training stacks
      switch on for the strategy's features, as Megatron-Bridge's ``CommOverlapConfig``
      sets it (``src/megatron/bridge/training/comm_overlap.py``, commit 067f987df, and
      its ``docs/training/communication-overlap.md``): with data parallelism the
      distributed optimizer's parameter all-gather overlaps the next forward
      (``overlap_param_gather``; the model applies it to ZeRO-1/2); the interleaved
      schedule's pipeline sends overlap a model chunk (``overlap_p2p_comm``, chosen when
      ``VPP > 1``; the model ignores it otherwise); tensor-parallel collectives hide
      under the layer's GEMMs where the framework can do it -- ``TP >= 2`` with
      sequence parallelism ("TP overlap silently disables itself when sequence
      parallelism is off or TP < 2"), as the dense H100 recipes (GPT-3 175B, Llama 3)
      enable it.  Expert all-to-all overlap stays off: the same document measures it
      flat or slower on small expert-parallel runs.
    * ``"none"``: no overlap beyond the gradient buckets' (the knobs' own defaults,
      Megatron-LM's command-line defaults): the first phase's behaviour.

    Parameters
    ----------
    policy : str
        One of :data:`COMM_OVERLAPS`.
    strategy : Strategy or str

    Returns
    -------
    dict
        ``tp_comm_overlap``, ``param_gather_overlap`` and ``pp_comm_overlap`` for
        :func:`evaluators.iteration.evaluate`.
    """
    from codesign.workloads.strategy import as_strategy

    check_choice("comm_overlap", policy, COMM_OVERLAPS)
    if policy == "none":
        return {"tp_comm_overlap": False, "param_gather_overlap": False,
                "pp_comm_overlap": False}
    s = as_strategy(strategy)
    return {"tp_comm_overlap": bool(s.sp and s.tp > 1), "param_gather_overlap": True,
            "pp_comm_overlap": True}


def as_cluster(system: Any, hardware: Any = None) -> Cluster:
    """The :class:`Cluster` of ``system`` (a Cluster, a Topology or a spec string).

    ``hardware`` completes a bare topology (default ``A100-80``); given together with a
    Cluster it is an :class:`~codesign.errors.InvalidSpecError` (the cluster has its own).
    """
    if isinstance(system, Cluster):
        if hardware is not None:
            raise invalid("hardware", getattr(hardware, "name", hardware),
                          "no hardware keyword when the system is a Cluster (it has its own)")
        return system
    return Cluster(system, DEFAULT_HARDWARE if hardware is None else hardware)


def as_execution(execution: Any, **keywords: Any) -> Execution:
    """The :class:`Execution` of ``execution`` (an Execution, a Strategy or a string).

    ``keywords`` are the :data:`EXECUTION_KEYS` given to :func:`evaluate` beside the
    strategy (``None`` = not given); with an Execution any given one is an
    :class:`~codesign.errors.InvalidSpecError` (the execution already says it).
    """
    unknown = sorted(set(keywords) - set(EXECUTION_KEYS))
    if unknown:
        raise invalid("execution keyword", unknown[0], f"one of {', '.join(EXECUTION_KEYS)}")
    given = {k: v for k, v in keywords.items() if v is not None}
    if isinstance(execution, Execution):
        if given:
            name = sorted(given)[0]
            raise invalid(name, given[name],
                          "no execution keyword when the execution is an Execution "
                          "(use dataclasses.replace on it)")
        return execution
    return Execution(execution, **given)
