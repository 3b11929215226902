"""Network simulator (docs/architecture.md section 5): three models, message and schedule replay.

Models (``--model``):

* ``analytical`` - ASTRA-sim's congestion-unaware backend: ``hops * latency +
  size / bandwidth``, first differing dimension on multi-dimensional networks;
* ``congestion`` - every link a FIFO queue, store-and-forward per hop
  (``order="schedule"``: each link keeps a replayed schedule's own order);
* ``flow`` - max-min fair sharing of link bandwidth, recomputed at every flow
  start and end.

Entry points: :func:`simulate` (point-to-point messages, as ``codesign
simulate SPEC --send SRC:DST:SIZE``), :func:`replay` / :func:`replay_time`
(re-time a :class:`~evaluators.schedule.Schedule`).  ASTRA-sim network YAML
files are read as topologies by :mod:`topologies.yaml_io` and simulated like
any other topology.

Examples
--------
>>> from topologies.registry import from_spec
>>> t = from_spec("ring:8,bw=1GB/s,lat=1us")
>>> simulate(t, [(0, 2, 1e6)], model="congestion").makespan_s   # 2 * (1us + 1ms)
0.002002
"""

from evaluators.netsim.core import Message, Messages, SimResult
from evaluators.netsim.flow import max_min_rates
from evaluators.netsim.schedule_replay import (
    dependency_levels, replay, replay_time, schedule_hop_order, schedule_messages,
    transfer_dependencies,
)
from evaluators.netsim.simulator import MODELS, NetworkModel, model_names, register_model, simulate

__all__ = ["Message", "Messages", "SimResult", "MODELS", "NetworkModel", "model_names",
           "register_model", "simulate", "replay", "replay_time", "schedule_hop_order",
           "schedule_messages", "transfer_dependencies", "dependency_levels", "max_min_rates"]
