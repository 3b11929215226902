"""The ``analytical`` network model: ASTRA-sim's congestion-unaware backend.

docs/architecture.md section 5: a message takes ``hops * link_latency + size /
link_bandwidth`` and never waits for another message (no contention).  As in
ASTRA-sim's analytical network (``congestion_unaware``: ``BasicTopology::send``
and ``MultiDimTopology::send``):

* **multi-dimensional topologies** (``topology.dims`` set, e.g. ``hier:``,
  ``torus:``, or an ASTRA-sim network YAML): NPU ids are split into
  coordinates (fastest-varying dimension first) and the message uses *only
  the first dimension where source and destination coordinates differ*, with
  that dimension's hop count, bandwidth and latency.  Hop counts: ``ring`` the
  shorter way round, ``uniring`` the forward distance, ``mesh`` ``|dx|``,
  ``fc`` 1, ``switch`` 2 (NPU -> switch -> NPU).  The dimension's bandwidth is
  ``bandwidth_Bps * links`` (Themis' parallel links per NPU pair act as one
  fatter link; ``links`` is 1 for ASTRA-sim files and ``hier:`` specs without
  ``links=``).  Like ASTRA-sim, a message whose endpoints differ in several
  dimensions is timed on the first one only: collectives are expected to send
  within one dimension at a time.
* **other topologies**: along the message's path, ``hops = len(path)``,
  bandwidth = the smallest link bandwidth on the path, latency = the sum of the
  per-hop latencies (which is ``hops * link_latency`` on uniform links).

A message's finish is ``ready + time`` where ``ready = max(ready_s, finish of
its dependencies)``; ``start_s`` is the ready time.  Per-link accounting
(``link_busy_s``) charges every link of the message's path with ``latency +
size / bandwidth`` of that link; since nothing is serialised, utilisation
above 1 means the links are oversubscribed (which this model ignores).
Schedules replayed with this model carry ``metadata["link_model"] = "none"``:
they are not meant to respect exclusive link occupancy.

Complexity: O(M + H) numpy work for M messages and H hops, plus an O(M + E)
Python pass when there are E dependencies.
"""

from __future__ import annotations

import numpy as np

from evaluators.netsim.core import Messages, SimResult, release_dependents, unfinished_error

__all__ = ["message_times", "dag_times", "run"]

NAME = "analytical"


def _dims_times(topology, batch: Messages) -> np.ndarray:
    dims = topology.dims
    sizes = np.array([d.size for d in dims], dtype=np.int64)
    strides = np.concatenate([[1], np.cumprod(sizes[:-1])]).astype(np.int64)
    cs = (batch.src[:, None] // strides) % sizes          # (M, D) coordinates
    cd = (batch.dst[:, None] // strides) % sizes
    differ = cs != cd
    moving = differ.any(axis=1)
    k = np.argmax(differ, axis=1)                          # first differing dimension
    rows = np.arange(len(batch))
    xs, xd, s = cs[rows, k], cd[rows, k], sizes[k]
    fwd = (xd - xs) % s
    kind = np.array([d.kind for d in dims])[k]
    hops = np.select(
        [kind == "ring", kind == "uniring", kind == "mesh", kind == "fc", kind == "switch"],
        [np.minimum(fwd, s - fwd), fwd, np.abs(xd - xs), np.ones_like(fwd), np.full_like(fwd, 2)],
    )
    bw = np.array([d.bandwidth_Bps * d.links for d in dims], dtype=np.float64)[k]
    lat = np.array([d.latency_s for d in dims], dtype=np.float64)[k]
    return np.where(moving, hops * lat + batch.size / bw, 0.0)


def _path_times(topology, batch: Messages) -> np.ndarray:
    out = np.zeros(len(batch), dtype=np.float64)
    has = np.flatnonzero(np.diff(batch.path_ptr) > 0)
    if has.size:
        starts = batch.path_ptr[has]
        bw = np.minimum.reduceat(topology.bandwidth[batch.path_links], starts)
        lat = np.add.reduceat(topology.latency[batch.path_links], starts)
        # reduceat segments run to the next start; empty messages were skipped, so
        # the segments of `has` are exactly their paths.
        out[has] = lat + batch.size[has] / bw
    return out


def message_times(topology, batch: Messages) -> np.ndarray:
    """Congestion-free time of each message, seconds (module docstring rules)."""
    if topology.dims:
        return _dims_times(topology, batch)
    return _path_times(topology, batch)


def dag_times(batch: Messages, duration: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ready and finish times when message ``i`` takes ``duration[i]`` once ready.

    ``ready[i] = max(batch.ready[i], finish[j] for j in deps(i))`` and
    ``finish = ready + duration``.

    Raises
    ------
    InvalidSpecError
        If the dependencies contain a cycle.
    """
    n = len(batch)
    if batch.dep_idx.size == 0:
        ready = batch.ready.copy()
        return ready, ready + duration
    ready = batch.ready.tolist()
    finish = [0.0] * n
    dur = duration.tolist()
    dptr = batch.dep_ptr.tolist()
    didx = batch.dep_idx.tolist()
    owner = np.repeat(np.arange(n), np.diff(batch.dep_ptr))
    if np.all(batch.dep_idx < owner):
        # Dependencies point backwards (replayed schedules): index order is topological.
        for i in range(n):
            r = ready[i]
            for j in didx[dptr[i]:dptr[i + 1]]:
                f = finish[j]
                if f > r:
                    r = f
            ready[i] = r
            finish[i] = r + dur[i]
        return np.array(ready), np.array(finish)
    # General case: Kahn's algorithm over the dependency DAG.
    rptr, ridx = (a.tolist() for a in batch.dependents())
    waiting = np.diff(batch.dep_ptr).tolist()
    stack = [i for i in range(n) if waiting[i] == 0]
    done = np.zeros(n, dtype=bool)
    while stack:
        i = stack.pop()
        done[i] = True
        finish[i] = ready[i] + dur[i]
        release_dependents(ridx[rptr[i]:rptr[i + 1]], finish[i], ready, waiting, stack)
    if not done.all():
        raise unfinished_error(done)
    return np.array(ready), np.array(finish)


def run(topology, batch: Messages) -> SimResult:
    """Simulate ``batch`` on ``topology`` with the analytical model.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    batch : Messages
        Validated messages.

    Returns
    -------
    SimResult
        ``hop_start`` is None (the model has no per-hop timing).

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("ring:8,bw=1GB/s,lat=1us")
    >>> r = run(t, Messages.from_list(t, [(0, 3, 1e6)]))
    >>> round(float(r.finish_s[0]) * 1e6, 3)    # 3 hops * 1us + 1MB / 1GB/s
    1003.0
    """
    ready, finish = dag_times(batch, message_times(topology, batch))
    links = batch.path_links
    busy = np.bincount(links, weights=topology.latency[links]
                       + batch.size[batch.hop_msg] / topology.bandwidth[links],
                       minlength=topology.n_links)
    return SimResult.build(NAME, batch, ready, ready, finish, None, busy, topology.n_links)
