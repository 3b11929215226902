"""evaluate(system, workload, execution): the Calculon-style inputs and the short form.

Oracle: the short form (topology, strategy and keywords) is the reference; the same
design given as a Cluster and an Execution must give the identical result, field by
field, and a keyword given twice must be refused in one line naming it.
"""

from __future__ import annotations

import dataclasses

import pytest

from codesign.errors import InvalidSpecError
from codesign.workloads import Placement, get_hardware, parse_strategy
from evaluators.iteration import Cluster, Execution, evaluate
from evaluators.iteration.inputs import EXECUTION_KEYS, as_cluster, as_execution
from topologies.registry import from_spec

SPEC = "torus:4x4,bw=100Gbps"


@pytest.mark.parametrize("strategy, keywords", [
    ("dp=128", {}),
    ("dp=32,tp=4", {"collective_method": "multiring", "routing": "ecmp"}),
    ("dp=32,pp=2,microbatches=4", {"overlap": False, "bucket_bytes": 4e6,
                                   "placement": Placement(servers=16, gpus_per_server=4)}),
    ("dp=32,tp=4,zero=1", {"tp_comm_overlap": True, "param_gather_overlap": True}),
    ("dp=32,pp=4,microbatches=4,schedule=interleaved,vpp=2", {"pp_comm_overlap": True}),
])
def test_cluster_and_execution_give_the_short_forms_result(strategy, keywords):
    short = evaluate(SPEC, "bert", strategy, hardware="H100", **keywords)
    full = evaluate(Cluster(from_spec(SPEC), get_hardware("H100")), "bert",
                    Execution(parse_strategy(strategy), **keywords))
    assert full.to_dict() == short.to_dict()
    if keywords and "placement" not in keywords:   # the keywords reached the model
        plain = evaluate(SPEC, "bert", strategy, hardware="H100")
        assert plain.iteration_time_s != short.iteration_time_s


def test_defaults_are_the_old_defaults_but_routing_is_the_command_lines():
    ex = Execution("dp=8")
    assert (ex.collective_method, ex.routing, ex.overlap, ex.bucket_bytes, ex.placement,
            ex.tp_comm_overlap, ex.param_gather_overlap, ex.pp_comm_overlap) == (
        "ring", "auto", True, None, None, False, False, False)
    # The library routes as ``codesign evaluate`` and the searches do (it was
    # ``shortest``, which pins every pair between two leaves of a Clos on one uplink).
    from codesign.app.cli import build_parser

    args = build_parser().parse_args(["evaluate", "--topology", "ring:4", "--workload", "bert"])
    assert args.routing == ex.routing
    assert Cluster("ring:4").hardware.name == "A100-80"
    assert set(EXECUTION_KEYS) == {f.name for f in dataclasses.fields(Execution)} - {"strategy"}


def test_inputs_are_resolved_when_made():
    c = Cluster("ring:4", "H100")
    assert c.topology.npus == 4 and c.hardware.name == "H100"
    assert as_cluster(c) is c
    ex = Execution("dp=8,tp=2")
    assert ex.strategy == parse_strategy("dp=8,tp=2")
    assert as_execution(ex) is ex


@pytest.mark.parametrize("make, field", [
    (lambda: Cluster(42), "system topology"),
    (lambda: Cluster("nosuch:4"), "topology family"),
    (lambda: Cluster("ring:4", "NOPE"), "hardware"),
    (lambda: Execution("dp=0"), "dp"),
    (lambda: Execution("dp=8", placement="here"), "execution placement"),
    (lambda: Execution("dp=8", routing=3), "execution routing"),
    (lambda: evaluate(Cluster("ring:4"), "bert", "dp=16", hardware="H100"), "hardware"),
    (lambda: evaluate("ring:4", "bert", Execution("dp=16"), routing="ecmp"), "routing"),
    (lambda: as_execution("dp=8", colective_method="ring"), "execution keyword"),
])
def test_bad_or_doubled_inputs_are_one_line_errors(make, field):
    with pytest.raises(InvalidSpecError, match=field) as info:
        make()
    assert "\n" not in str(info.value)
