"""One op per set of concurrent groups (``Demand.op_sets``) against one op per group.

Oracle: the same demand with every set expanded to one op per group (``Demand.ops``, the
representation the demand had before sets) gives the same matrices, totals and summary,
and the iteration model times both to the same bits."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest

import codesign.workloads.demand as demand_module
from codesign.workloads import get_workload
from codesign.workloads.demand import CollectiveOp, GroupSet, demand_for
from evaluators.iteration import evaluate
from topologies.registry import from_spec

CASES = [
    ("llama3-70b", "H100", "dp=32,tp=4,microbatches=8,zero=2,sp=true"),
    ("llama3-70b", "H100", "dp=8,tp=4,pp=2,cp=2,microbatches=16,zero=3,sp=true"),
    ("llama3-70b", "H100",
     "dp=8,tp=2,pp=4,microbatches=16,zero=1,recompute=full,schedule=interleaved,vpp=2"),
    ("mixtral-8x7b", "A100-80", "dp=8,tp=2,pp=4,microbatches=4,ep=4,zero=2"),
    ("mixtral-8x7b", "A100-80", "dp=4,tp=4,pp=4,microbatches=4,ep=8,etp=1,zero=1,sp=true"),
    ("gpt3-175b", "A100-80", "dp=4,tp=8,pp=8,microbatches=32,zero=1"),
]


def _expanded(d):
    """The demand with one op per group (what ``demand_for`` built before sets)."""
    return replace(d, op_sets=d.ops)


@pytest.mark.parametrize("wl,hw,strategy", CASES)
def test_sets_expand_to_one_op_per_group(wl, hw, strategy):
    d = demand_for(get_workload(wl), strategy, hw, check=False)
    sets = [op for op in d.op_sets if isinstance(op, CollectiveOp)]
    assert any(op.groups for op in sets)           # the strategies have concurrent groups
    per_group = [op for op in d.ops if isinstance(op, CollectiveOp)]
    assert len(per_group) == sum(len(op.all_groups) for op in sets) > len(sets)
    assert all(not op.groups for op in per_group)
    for op in sets:
        assert op.members == op.all_groups[0]
        assert len({len(g) for g in op.all_groups}) == 1   # a set: groups of one size
    e = _expanded(d)
    assert np.array_equal(d.gpu_matrix(), e.gpu_matrix())
    assert np.array_equal(d.server_matrix(), e.server_matrix())
    assert d.split()[0] == e.split()[0]
    assert np.array_equal(d.split()[1], e.split()[1])
    assert d.split_totals() == e.split_totals()
    assert d.bytes_by_purpose() == e.bytes_by_purpose()
    assert d.summary() == e.summary()
    assert d.summary()["ops"]["collectives"] == len(per_group)


@pytest.mark.parametrize("wl,hw,strategy", CASES)
@pytest.mark.parametrize("family", ["leafspine:{n},oversub=2,hosts_per_leaf={h},bw=200Gbps",
                                    "torus:2x{h},bw=400Gbps"])
def test_iteration_model_times_sets_as_their_groups(wl, hw, strategy, family, monkeypatch):
    w = get_workload(wl)
    servers = demand_for(w, strategy, hw, check=False).placement.servers
    spec = family.format(n=servers, h=servers // 2)
    topo = from_spec(spec)
    grouped = evaluate(topo, w, strategy, hardware=hw, collective_method="best",
                       check_memory=False)
    build = demand_module.demand_for
    monkeypatch.setattr(demand_module, "demand_for", lambda *a, **k: _expanded(build(*a, **k)))
    one_by_one = evaluate(from_spec(spec), w, strategy, hardware=hw, collective_method="best",
                          check_memory=False)
    assert grouped.to_dict() == one_by_one.to_dict()


def test_group_set_is_its_tuple():
    groups = ((0, 1), (2, 3))
    g = GroupSet(groups)
    assert g == groups and hash(g) == hash(groups) and hash(g) == hash(g)
    assert {groups: 1}[g] == 1
    back = pickle.loads(pickle.dumps(g))
    assert back == groups and hash(back) == hash(groups) and isinstance(back, GroupSet)


def test_stage_group_sets_are_shared_across_evaluations():
    """Two demands with the same groups share one GroupSet object (identity): the iteration
    model's cache lookups then compare keys by identity, not member by member."""
    w = get_workload("llama3-70b")
    a = demand_for(w, "dp=32,tp=4,microbatches=8,zero=2,sp=true", "H100", check=False)
    b = demand_for(w, "dp=32,tp=4,microbatches=16,zero=1,sp=true", "H100", check=False)
    tp = [op.groups for d in (a, b) for op in d.op_sets
          if isinstance(op, CollectiveOp) and op.purpose == "tp"]
    assert len(tp) > 2 and all(g is tp[0] for g in tp)
