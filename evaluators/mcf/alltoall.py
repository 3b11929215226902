"""All-to-all (thesis LP 3.16) and its one-origin cousins scatter and gather.

All-to-all needs neither copies nor reductions (thesis Sec. 3.2.1): every
ordered pair ``(o, d)`` is its own commodity with distinct data, so the usage
of an edge is the *sum* of the flows on it, and the LP is a standard
multicommodity flow on the time-expanded network with the bandwidth
constraint (3.15) -- aggregated over time as in LP 4.2.  Blocks are the
origins (:func:`evaluators.mcf.fluid.flow_block`).  Scatter is the same LP
with the root as the only origin; gather is scatter on the reversed graph.

Units: one commodity carries ``M / N`` bytes (``M`` the per-rank send
buffer, nccl-tests convention).
"""

from __future__ import annotations

import numpy as np

from evaluators.mcf.problem import Phase
from evaluators.mcf.ten import Graph

__all__ = ["alltoall_phases", "scatter_phases"]


def alltoall_phases(graph: Graph, participants: np.ndarray) -> list[Phase]:
    """One flow block per participant, to every other participant (demand 1 each)."""
    P = np.asarray(participants, dtype=np.int64)
    return [Phase("alltoall", "flow", graph, tuple(int(o) for o in P),
                  tuple(P[P != o] for o in P), (1.0,) * P.size)]


def scatter_phases(graph: Graph, root: int, participants: np.ndarray, name: str) -> list[Phase]:
    """One flow block from ``root`` (on the reversed graph: gather into it)."""
    P = np.asarray(participants, dtype=np.int64)
    return [Phase(name, "flow", graph, (int(root),), (P[P != root],), (1.0,))]
