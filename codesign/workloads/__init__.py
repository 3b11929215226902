"""Training workloads: the model zoo, the hardware catalog and per-layer compute time.

Bottom layer of the framework (docs/architecture.md section 2): imports nothing from
``topologies``, ``evaluators`` or ``search``.

* :mod:`~codesign.workloads.model` -- :class:`Layer`, :class:`Workload` and the
  counting conventions (FLOPs, bytes, tensor/expert parallel sizes).
* :mod:`~codesign.workloads.registry` -- the zoo (:func:`get_workload`,
  :func:`workload_names`) and user model files (:func:`load_workload`).
* :mod:`~codesign.workloads.hardware` -- GPUs (:func:`get_hardware`,
  :func:`load_hardware_catalog`).
* :mod:`~codesign.workloads.compute` -- :func:`layer_time` (kernel model or roofline);
  :mod:`~codesign.workloads.efficiency` -- the kernel model (:class:`ComputeProfile`,
  GEMM tile/wave quantisation, fused attention, HBM-bound work);
  :mod:`~codesign.workloads.profile` -- measured times (:func:`load_profile`).
* :mod:`~codesign.workloads.strategy` -- :class:`Strategy`, :func:`parse_strategy`;
  :mod:`~codesign.workloads.placement` -- :class:`Placement` (ranks, groups, tables);
  :mod:`~codesign.workloads.sharding` -- :class:`LayerShard` (one home of how a strategy
  shards a layer: per-GPU parameters, FLOPs, activations, collective sizes);
  :mod:`~codesign.workloads.memory` -- :func:`check_memory`;
  :mod:`~codesign.workloads.demand` -- :class:`Demand`, :func:`demand_for`.

Example
-------
>>> from codesign.workloads import get_workload, get_hardware, layer_times
>>> w = get_workload("resnet50")
>>> round(w.parameters / 1e6, 1)
25.6
>>> t = layer_times(w, get_hardware("A100-80"), batch=128, efficiency=0.5)
"""

from codesign.workloads.compute import DEFAULT_EFFICIENCY, LayerTime, layer_time, layer_times
from codesign.workloads.demand import CollectiveOp, Compute, Demand, Transfer, demand_for
from codesign.workloads.efficiency import ComputeProfile
from codesign.workloads.hardware import (
    Hardware, HardwareCatalog, get_hardware, hardware_names, load_hardware_catalog)
from codesign.workloads.memory import MemoryBreakdown, check_memory, memory_per_gpu
from codesign.workloads.model import KINDS, Layer, MemorySummary, Workload
from codesign.workloads.placement import Placement
from codesign.workloads.profile import Profile, load_profile
from codesign.workloads.registry import (
    BUILDERS, get_workload, is_model_file, load_workload, workload_configs,
    workload_from_dict, workload_names)
from codesign.workloads.sharding import LayerShard, shard_layer
from codesign.workloads.strategy import Strategy, as_strategy, parse_strategy

__all__ = [
    "KINDS", "Layer", "Workload", "MemorySummary",
    "BUILDERS", "get_workload", "workload_names", "workload_configs", "load_workload",
    "workload_from_dict", "is_model_file",
    "Hardware", "HardwareCatalog", "get_hardware", "hardware_names", "load_hardware_catalog",
    "DEFAULT_EFFICIENCY", "LayerTime", "layer_time", "layer_times", "ComputeProfile",
    "Profile", "load_profile",
    "Strategy", "parse_strategy", "as_strategy", "Placement", "LayerShard", "shard_layer",
    "MemoryBreakdown", "memory_per_gpu", "check_memory",
    "Demand", "Compute", "CollectiveOp", "Transfer", "demand_for",
]
