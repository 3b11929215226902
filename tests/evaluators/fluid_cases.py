"""Cases for the one fluid loop (:func:`evaluators.netsim.flow.fluid_loop`) and the numbers
the three loops it replaced gave on them (plain module, imported by test files).

Before issue 22 the ``flow`` model (:func:`evaluators.netsim.flow.run`), the iteration
model's phases (:func:`evaluators.iteration.phase.flow_phase`) and the reconfigurable
fabric (:class:`evaluators.netsim.reconfigurable.ReconfigurableFabric`) each had their own
event loop.  ``fluid_cases_before.json`` holds what those loops returned on the cases
below (recorded with ``python tests/evaluators/fluid_cases.py OUT.json`` on commit
17f84eb, the last one with three loops); the test compares the one loop against it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

BEFORE = Path(__file__).with_name("fluid_cases_before.json")
TOPOLOGIES = ("ring:8,bw=1GB/s,lat=1us", "torus:4x4", "fattree:k=4", "expander:16,degree=3,seed=1")


def run_cases():
    """``flow`` model: random messages with release times and a random dependency DAG."""
    from evaluators.netsim import Message
    from topologies.registry import from_spec

    for k, spec in enumerate(TOPOLOGIES):
        t = from_spec(spec)
        rng = np.random.default_rng(k)
        m = 40
        msgs = []
        for i in range(m):
            s = int(rng.integers(t.npus))
            d = int((s + rng.integers(1, t.npus)) % t.npus)
            deps = [int(j) for j in rng.choice(i, size=min(i, int(rng.integers(0, 3))),
                                               replace=False)] if i else []
            # a few equal sizes and zero release times make exact ties
            size = 1e6 if i % 5 == 0 else float(rng.uniform(1e5, 4e6))
            ready = 0.0 if i % 3 == 0 else float(rng.uniform(0, 2e-3))
            msgs.append(Message(s, d, size, ready_s=ready, deps=deps))
        yield f"run/{spec}", t, msgs


def phase_cases():
    """Iteration-model phases: random sizes, and all-to-alls of equal sizes (exact ties)."""
    from topologies.registry import from_spec

    for k, spec in enumerate(TOPOLOGIES):
        t = from_spec(spec)
        rng = np.random.default_rng(100 + k)
        m = 60
        src = rng.integers(0, t.npus, m)
        dst = (src + rng.integers(1, t.npus, m)) % t.npus
        yield f"phase/{spec}/random", t, (src, dst, rng.uniform(1e5, 1e7, m))
        n = t.npus
        s, d = np.divmod(np.arange(n * n), n)
        off = s != d
        yield f"phase/{spec}/alltoall", t, (s[off], d[off], np.full(int(off.sum()), 1e6))


def greedy(demand: np.ndarray, d: int) -> np.ndarray:
    """One circuit per demanded pair, largest demand first, within the degree."""
    n = len(demand)
    c = np.zeros((n, n), dtype=np.int64)
    for flat in np.argsort(-demand, axis=None, kind="stable"):
        u, v = divmod(int(flat), n)
        if demand[u, v] <= 0:
            break
        if c[u].sum() < d and c[:, v].sum() < d:
            c[u, v] += 1
    return c


def fabric_cases():
    """Reconfigurable fabric: two transfers (random releases) per case, greedy circuits
    re-decided every epoch, with and without forwarding, degree 1 and 2."""
    for k, (n, degree, forwarding) in enumerate([(6, 1, True), (6, 2, True), (8, 2, False),
                                                 (5, 1, False)]):
        rng = np.random.default_rng(200 + k)
        calls = []
        for _ in range(2):
            m = 30
            src = rng.integers(0, n, m)
            dst = (src + rng.integers(1, n, m)) % n
            size = np.where(np.arange(m) % 4 == 0, 5e6, rng.uniform(1e6, 3e7, m))
            calls.append((src, dst, size, rng.uniform(0, 0.05, m)))
        yield f"fabric/n={n},d={degree},fw={forwarding}", (n, degree, forwarding), calls


def fabric(params, rtol):
    from evaluators.netsim.reconfigurable import ReconfigurableFabric

    n, degree, forwarding = params
    return ReconfigurableFabric(n, degree, 1e9, policy=greedy, epoch_s=0.02, delay_s=0.004,
                                latency_s=1e-6, forwarding=forwarding, rtol=rtol)


def outcomes() -> dict:
    """What the current code returns on every case (the recorded quantities)."""
    from evaluators.iteration.phase import flow_phase
    from evaluators.netsim import simulate

    out = {}
    for name, t, msgs in run_cases():
        r = simulate(t, msgs, model="flow")
        out[name] = {"ready": r.ready_s.tolist(), "finish": r.finish_s.tolist()}
    for name, t, (src, dst, size) in phase_cases():
        for rtol in (0.0, 0.05):
            r = flow_phase(t, src, dst, size, rtol=rtol)
            out[f"{name}/rtol={rtol}"] = {"finish": r.finish_s.tolist()}
    for name, params, calls in fabric_cases():
        for rtol in (0.0, 0.05):
            f = fabric(params, rtol)
            fin = [f.transfer(*call).tolist() for call in calls]
            out[f"{name}/rtol={rtol}"] = {
                "finish": fin, "reconfigurations": f.reconfigurations, "paused": f.paused_s,
                "carried": f.bytes_carried}
    return out


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(outcomes(), indent=0))
