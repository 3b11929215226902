"""Allreduce as a joint reduce-scatter + allgather fluid LP (thesis Sec. 4.2).

The exact allreduce formulations of Sec. 4.2 index flows by subsets of
sources and destinations and are far too large; the thesis instead lets every
piece of data be reduced before it is copied (Theorem 5) and combines the
reduce-scatter and allgather formulations, "only linked by the shared
bandwidth constraints and shared costs", in the fluid model of LP 4.2:

* owner ``j`` ends the reduce phase with a share ``s_j`` of the reduced
  buffer ("an additional variable that describes what portion of the total
  reductions is completed on each vertex"; ``s_j >= 0``, ``sum_j s_j = 1``);
* reduce phase: for each owner ``j`` a copy block on the *reversed* graph
  (a broadcast from ``j`` there is a reduction into ``j`` here; copying
  vertices of the reversed graph are the vertices that can reduce: NPUs, not
  memory or switches) with demand ``s_j``;
* gather phase: for each owner ``j`` a copy block on the forward graph with
  demand ``s_j``;
* both phases' usage shares the bandwidth rows ``<= R b(L)``, so the end of
  the reduction and the start of the gather overlap -- per piece of data the
  reduction still precedes the copies (Theorem 4's staggering runs the two
  time-expanded networks back to back, ``T1 + T2`` steps).

With ``shares="equal"`` the shares are fixed to ``1/N`` (the usual
reduce-scatter then allgather split); the joint LP is then still at most
``RS + AG`` because the phases share capacity.
"""

from __future__ import annotations

import numpy as np

from evaluators.mcf.problem import Phase
from evaluators.mcf.ten import Graph

__all__ = ["allreduce_phases"]


def allreduce_phases(forward: Graph, reverse: Graph, participants: np.ndarray) -> list[Phase]:
    """Reduce blocks (reversed) then gather blocks (forward), owner ``j`` -> share column ``j``."""
    P = np.asarray(participants, dtype=np.int64)
    dests = tuple(P[P != o] for o in P)
    owners = tuple(int(o) for o in P)
    shares = tuple(range(P.size))
    return [Phase("reducescatter", "copy", reverse, owners, dests, shares),
            Phase("allgather", "copy", forward, owners, dests, shares)]
