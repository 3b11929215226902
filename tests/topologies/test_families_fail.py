"""The generic ``fail=`` spec key: a family's network with failed NPUs removed."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from codesign.errors import InvalidSpecError
from topologies.registry import from_spec


def test_mesh_with_two_failed_npus():
    full = from_spec("mesh:4x4,bw=100GB/s")
    t = from_spec("mesh:4x4,bw=100GB/s,fail=7+9")
    assert t.npus == 14 and t.switches == 0 and t.dims == ()
    assert t.params["failed_npus"] == [7, 9]
    assert t.params["npu_ids"] == [v for v in range(16) if v not in (7, 9)]
    # Mesh 4x4: 24 cables; NPU 7 (edge) has 3, NPU 9 (inner) 4, they share none.
    assert full.n_links == 48 and t.n_links == 48 - 2 * (3 + 4)
    # Hop distances equal those of the induced subgraph of the original mesh.
    g = full.to_networkx().subgraph(t.params["npu_ids"])
    dist = dict(nx.all_pairs_shortest_path_length(nx.Graph(g)))
    ids = t.params["npu_ids"]
    expect = np.array([[dist[a][b] for b in ids] for a in ids])
    assert np.array_equal(t.hop_matrix, expect)
    assert t.name == "mesh:4x4,bw=100GB/s,fail=7+9"


def test_switch_family_keeps_its_switch():
    t = from_spec("switch:5,fail=0")
    assert (t.npus, t.switches, t.n_links) == (4, 1, 8)


@pytest.mark.parametrize("spec, field", [
    ("ring:4,fail=1+3", "disconnected|connected"),      # two opposite NPUs cut the ring
    ("ring:4,fail=4", "failed NPUs"),
    ("ring:4,fail=1+1", "failed NPUs"),
    ("ring:4,fail=0+1+2+3", "failed NPUs"),
    ("ring:4,fail=x", "fail"),
    ("ring:4,fail=", "fail"),
])
def test_bad_fail_values(spec, field):
    with pytest.raises(InvalidSpecError, match=field):
        from_spec(spec)


def test_unknown_key_lists_fail():
    with pytest.raises(InvalidSpecError, match="fail"):
        from_spec("ring:4,nope=1")


@settings(max_examples=40, deadline=None)
@given(st.sets(st.integers(0, 24), max_size=6))
def test_random_failures_on_a_torus(failed):
    """Removing any NPUs of a 5x5 torus either gives a connected network with the
    right counts or a one-line InvalidSpecError, never another exception."""
    spec = "torus:5x5" + (",fail=" + "+".join(map(str, sorted(failed))) if failed else "")
    try:
        t = from_spec(spec)
    except InvalidSpecError as err:
        assert "\n" not in str(err)
        return
    assert t.npus == 25 - len(failed)
    full = from_spec("torus:5x5")
    gone = np.isin(full.src, list(failed)) | np.isin(full.dst, list(failed))
    assert t.n_links == int((~gone).sum())
