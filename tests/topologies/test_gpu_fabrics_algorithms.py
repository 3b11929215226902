"""Every registered collective algorithm on the new fabrics' examples
(docs/architecture.md section 8).

The same contract as tests/evaluators/test_algorithms_contract.py (whose topology list is
fixed): a schedule is accepted by the independent validator, takes a positive finite time
and describes the requested collective; an algorithm that does not apply raises
InvalidSpecError (only allowed for non-baselines and for ``hierarchical`` without
dimensions).
"""

import math

import pytest

from codesign.errors import InvalidSpecError
from evaluators.collectives import KINDS, Collective
from evaluators.registry import ALGORITHMS, algorithm_names, synthesize
from evaluators.validate import validate_schedule
from topologies.registry import FAMILIES, family_names, from_spec

algorithm_names()
family_names()
BASELINES = {"ring", "bidir-ring", "direct", "rhd", "dbt", "hierarchical", "multiring"}
NEW = ["railopt", "multiplane", "nvl", "tpu"]
SPECS = [FAMILIES[name].example for name in NEW] + ["fattree:servers=6,radix=4,oversub=1"]
# The LP-based MCF takes minutes on the 16-20-node examples; it gets 4-NPU instances of the
# same families (2 tiers, rails, planes, twist-free cube) instead.
MCF_SPECS = {"railopt:4,gpus=2,radix=4": "railopt:2,gpus=2,radix=4,tiers=2",
             "multiplane:8,planes=2,radix=4": "multiplane:4,planes=2,radix=4,tiers=2",
             "tpu:2x2x2,cubes=2,twist=true": "tpu:2x2x1", "nvl:8": "nvl:4",
             "fattree:servers=6,radix=4,oversub=1": "fattree:servers=4,radix=4,oversub=1"}
_CACHE = {}


def _topo(spec):
    if spec not in _CACHE:
        _CACHE[spec] = from_spec(spec)
    return _CACHE[spec]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("alg", sorted(ALGORITHMS))
def test_every_algorithm_is_valid_on_the_new_fabrics(alg, spec):
    topo = _topo(MCF_SPECS.get(spec, spec) if alg == "mcf" else spec)
    for kind in KINDS:
        coll = Collective.on(kind, topo.npus, 3e6)
        if kind not in ALGORITHMS[alg].kinds:
            continue
        try:
            sched = synthesize(topo, coll, alg)
        except InvalidSpecError:
            if alg in BASELINES and not (alg == "hierarchical" and not topo.dims):
                raise
            continue
        assert math.isfinite(sched.time_s) and sched.time_s > 0
        s = sched.collective
        assert (s.kind, s.npus, s.size_bytes) == (coll.kind, coll.npus, coll.size_bytes)
        report = validate_schedule(sched, topo)
        assert report.valid, (alg, kind, report.errors[:3])


@pytest.mark.parametrize("spec", SPECS[:-1] + ["fattree:servers=8,radix=4,oversub=1"])
@pytest.mark.parametrize("routing", ["shortest", "dmodk"])
def test_iteration_model_runs_on_the_new_fabrics(spec, routing):
    """`codesign evaluate` on each new fabric: GPUs are the topology's NPUs."""
    from evaluators.iteration import evaluate

    topo = _topo(spec)
    if routing == "dmodk" and "switch_levels" not in topo.params:
        pytest.skip("D-mod-k routes Clos fabrics only")
    n = topo.npus
    r = evaluate(topo, "resnet50", f"dp={n},microbatches=32", routing=routing)
    assert r.gpus == n and r.iteration_time_s > r.compute_time_s > 0
    assert 0 < r.dp_s < r.iteration_time_s
