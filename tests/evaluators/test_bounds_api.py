"""Options, errors and large-input behaviour of evaluators.bounds."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from evaluators.bounds import lower_bound
from evaluators.collectives import Collective
from topologies.families.multidim import ring, torus
from topologies.model import Topology

R4 = ring(4, bandwidth=1e9, latency=0.0)
AG4 = Collective.on("allgather", 4, 1e6)


@given(st.one_of(st.integers(max_value=0), st.booleans(), st.floats(), st.text(max_size=3)))
def test_bad_exact_node_limit_rejected(value):
    with pytest.raises(InvalidSpecError, match="exact_node_limit"):
        lower_bound(R4, AG4, exact_node_limit=value)


@given(st.one_of(st.integers(min_value=25, max_value=10**6), st.integers(max_value=0)))
def test_bad_alltoall_enumeration_limit_rejected(value):
    with pytest.raises(InvalidSpecError, match="alltoall_enum_nodes"):
        lower_bound(R4, AG4, alltoall_enum_nodes=value)


def test_other_bad_inputs():
    with pytest.raises(InvalidSpecError, match="alltoall_enum_participants"):
        lower_bound(R4, AG4, alltoall_enum_participants=21)
    with pytest.raises(InvalidSpecError, match="seed"):
        lower_bound(R4, AG4, seed=-1)
    with pytest.raises(InvalidSpecError, match="participant"):
        lower_bound(R4, Collective("allgather", (0, 7), 1e6))


def test_disconnected_participants_are_infeasible():
    # Two separate pairs (the topology allows it when asked not to check).
    t = Topology(4, 0, [0, 1, 2, 3], [1, 0, 3, 2], 1e9, 0.0, require_connected=False)
    with pytest.raises(InfeasibleError, match="cannot be reached"):
        lower_bound(t, Collective.on("allgather", 4, 1e6))
    # Within one pair it is fine.
    b = lower_bound(t, Collective("allgather", (0, 1), 2e6))
    assert b.time_s == pytest.approx(1e6 / 1e9)


def test_large_symmetric_graph_is_exact_and_quick():
    # 1024 nodes > exact_node_limit, but one orbit: a handful of max-flows.
    t = torus([32, 32], bandwidth=1e9, latency=0.0)
    b = lower_bound(t, Collective.on("allgather", t.npus, 1e9), exact_node_limit=256)
    assert b.exact
    assert b.time_s == pytest.approx(1023 / 1024 * 1e9 / 4e9, rel=1e-12)


def test_alltoall_candidates_on_large_torus():
    # 4x4x4 torus: too large to enumerate; the half-torus slab is among the
    # candidates: (M/64) * 32 * 32 / (32 links * B) = M / (2B).
    t = torus([4, 4, 4], bandwidth=1e9, latency=0.0)
    b = lower_bound(t, Collective.on("alltoall", 64, 1e9))
    assert not b.exact
    assert b.components["cut"] == pytest.approx(0.5, rel=1e-12)
    S = np.zeros(t.n_nodes, bool)
    S[list(b.cut_nodes)] = True
    assert S.sum() == 32
    # Deterministic for a given seed.
    again = lower_bound(t, Collective.on("alltoall", 64, 1e9))
    assert again.cut_nodes == b.cut_nodes


def test_bound_is_monotone_in_size():
    # Bandwidth components scale linearly with the size, latency does not.
    t = ring(6, bandwidth=1e9, latency=1e-6)
    small = lower_bound(t, Collective.on("allreduce", 6, 1e6))
    big = lower_bound(t, Collective.on("allreduce", 6, 1e9))
    assert big.components["cut"] == pytest.approx(1000 * small.components["cut"])
    assert big.components["latency"] == small.components["latency"]
    assert big.time_s > small.time_s
