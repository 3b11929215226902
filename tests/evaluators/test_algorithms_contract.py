"""Contract tests over every registered algorithm x collective kind x topology.

Parametrised over ``evaluators.registry.ALGORITHMS`` after import, so that
algorithms registered later (TACOS, MCF, Themis...) are covered too.  A
schedule must be accepted by the independent validator (data, postcondition,
links, link occupancy), take a positive finite time and describe the same
collective (possibly split into more chunks).  An algorithm that does not
apply must raise InvalidSpecError: for the baselines written here the only
such case is ``hierarchical`` on a network without dimensions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.collectives import KINDS, Collective
from evaluators.algorithms.closed_form import closed_form_time
from evaluators.registry import ALGORITHMS, algorithm_names, closed_forms, synthesize
from evaluators.validate import validate_schedule
from topology_cases import cached_topology

algorithm_names()  # import the built-in algorithms so that ALGORITHMS is complete

BASELINES = {"ring", "bidir-ring", "direct", "rhd", "dbt", "hierarchical", "multiring"}

SPECS = ["ring:2", "ring:4", "ring:5", "fc:4", "switch:4", "torus:3x3", "hypercube:3", "mesh:2x3",
         "hier:ring2_fc2_switch2,bw=50GB/s:25GB/s:10GB/s", "uniring:3"]


topology = cached_topology



def _expected_invalid(alg: str, topo) -> bool:
    return alg == "hierarchical" and not topo.dims


def _check(alg, topo, coll):
    if coll.kind not in ALGORITHMS[alg].kinds:
        with pytest.raises(InvalidSpecError, match="expected one of"):
            synthesize(topo, coll, alg)
        return None
    try:
        sched = synthesize(topo, coll, alg)
    except InvalidSpecError:
        if alg in BASELINES and not _expected_invalid(alg, topo):
            raise
        return None
    assert not _expected_invalid(alg, topo), f"{alg} should reject {topo.name}"
    s = sched.collective
    assert (s.kind, s.npus, s.size_bytes, s.root) == (coll.kind, coll.npus, coll.size_bytes,
                                                      coll.root)
    assert s.chunks_per_npu % coll.chunks_per_npu == 0
    assert sched.algorithm == alg
    if alg in BASELINES:   # timed by the congestion model: one chunk per link, hop times
        assert sched.link_model == "exclusive" and sched.hop_start is not None
        assert sched.metadata["network_model"] == "congestion"
    assert math.isfinite(sched.time_s) and sched.time_s > 0
    report = validate_schedule(sched, topo)
    assert report.valid, report.errors[:3]
    return sched


#: MCF's fluid LP on the largest graphs takes 3-6 s per call: there it runs with one
#: chunk per NPU only (two chunks per NPU, 14 s of the suite, are checked on the others).
_MCF_ONE_CHUNK = {"torus:3x3", "hypercube:3", "hier:ring2_fc2_switch2,bw=50GB/s:25GB/s:10GB/s"}


def _contract_cases():
    for alg in sorted(ALGORITHMS):
        for spec in SPECS + ["irregular"]:
            for chunks in (1, 2):
                if not (alg == "mcf" and spec in _MCF_ONE_CHUNK and chunks == 2):
                    yield pytest.param(alg, spec, chunks, id=f"{alg}-{spec}-{chunks}")


@pytest.mark.parametrize("alg, spec, chunks", list(_contract_cases()))
def test_every_algorithm_kind_topology(alg, spec, chunks):
    topo = topology(spec)
    for kind in KINDS:
        coll = Collective.on(kind, topo.npus, 3e6, chunks_per_npu=chunks)
        _check(alg, topo, coll)


@pytest.mark.parametrize("alg", sorted(ALGORITHMS))
def test_subset_of_npus_and_other_root(alg):
    """Participants that are not all NPUs, in a scrambled rank order, root not first."""
    topo = topology("irregular")
    for kind in KINDS:
        root = 4 if kind in ("broadcast", "reduce", "scatter", "gather") else None
        coll = Collective(kind, (3, 1, 4, 0, 5), 5e6, 2, root)
        if alg == "hierarchical":
            if kind in ALGORITHMS[alg].kinds:
                with pytest.raises(InvalidSpecError):
                    synthesize(topo, coll, alg)
            continue
        _check(alg, topo, coll)


@pytest.mark.parametrize("alg", sorted(BASELINES - {"hierarchical"}))
def test_permuted_participants_on_torus(alg):
    topo = topology("torus:3x3")
    order = tuple(np.random.default_rng(7).permutation(9).tolist())
    for kind in ALGORITHMS[alg].kinds:
        root = order[3] if kind in ("broadcast", "reduce", "scatter", "gather") else None
        _check(alg, topo, Collective(kind, order, 9e6, 1, root))


def test_hierarchical_accepts_all_npus_in_any_order():
    topo = topology("hier:ring2_fc2_switch2,bw=50GB/s:25GB/s:10GB/s")
    order = tuple(np.random.default_rng(3).permutation(8).tolist())
    for kind in ("allreduce", "reducescatter", "allgather"):
        _check("hierarchical", topo, Collective(kind, order, 8e6, 2))


def test_unknown_algorithm_and_option_list_valid_ones():
    topo = topology("ring:4")
    coll = Collective.on("allreduce", 4, 1e6)
    with pytest.raises(InvalidSpecError) as err:
        synthesize(topo, coll, "rign")
    for name in BASELINES:
        assert name in str(err.value)
    with pytest.raises(InvalidSpecError, match="order"):
        synthesize(topo, coll, "ring", ordr=[0, 1, 2, 3])
    with pytest.raises(InvalidSpecError, match="generators, rings"):
        synthesize(topo, coll, "multiring", ring=2)
    with pytest.raises(InvalidSpecError, match="none"):
        synthesize(topo, coll, "rhd", seed=1)
    with pytest.raises(InvalidSpecError, match="allreduce, broadcast, reduce"):
        synthesize(topo, Collective.on("alltoall", 4, 1e6), "dbt")


# ------------------------------------------------------------- closed forms
def test_every_baseline_registers_its_closed_form():
    assert BASELINES <= set(closed_forms())


@pytest.mark.parametrize("alg", sorted(closed_forms()))
def test_algorithm_matches_its_registered_closed_form(alg):
    """Each algorithm, timed by the congestion model on the topologies its closed form
    names (ClosedForm.cases), against that formula, for every kind it covers."""
    form = ALGORITHMS[alg].closed_form
    bw, lat, size = 7.3e9, 1.7e-6, 3.1e6
    checked = 0
    for topo, params, options in form.cases(bw, lat):
        for kind in form.kinds:
            for chunks in (1, 2, 4):
                try:
                    want = closed_form_time(alg, kind, topo.npus, size, bw, lat,
                                            chunks=chunks, **params)
                except InvalidSpecError:
                    # The one case without a formula: a hierarchical all-reduce with too
                    # few pieces to hide the reduce-scatter tail (closed_form docstring).
                    assert (alg, kind) == ("hierarchical", "allreduce") and chunks < 4
                    continue
                coll = Collective.on(kind, topo.npus, size, chunks_per_npu=chunks)
                got = synthesize(topo, coll, alg, **options).time_s
                assert got == pytest.approx(want, rel=1e-9), (alg, kind, topo.name, chunks)
                checked += 1
    assert checked >= len(form.kinds)


# ---------------------------------------------------------- validate=True
def test_synthesize_validates_small_schedules_by_default():
    """A synthesizer that forgets a transfer: caught by the default validation (the
    schedule is far below VALIDATE_MAX_HOPS), returned as is with validate=False."""
    from evaluators.registry import VALIDATE_MAX_HOPS, register_algorithm

    name = "_test_broken_ring"

    @register_algorithm(name, kinds=("allgather",))
    def broken(topology, collective):
        return _drop_first(ALGORITHMS["ring"].fn(topology, collective))

    try:
        topo, coll = cached_topology("ring:4"), Collective.on("allgather", 4, 4e6)
        with pytest.raises(InvalidSpecError, match="invalid schedule"):
            synthesize(topo, coll, name)
        sched = synthesize(topo, coll, name, validate=False)
        assert sched.path_links.size < VALIDATE_MAX_HOPS
        assert not validate_schedule(sched, topo).valid
        assert validate_schedule(synthesize(topo, coll, "ring"), topo).valid
    finally:
        del ALGORITHMS[name]


def _drop_first(s):
    from evaluators.schedule import Schedule

    keep = np.arange(1, len(s))
    lens = np.diff(s.path_ptr)[keep]
    ptr = np.concatenate([[0], np.cumsum(lens)])
    links = np.concatenate([s.path_links[s.path_ptr[i]:s.path_ptr[i + 1]] for i in keep])
    hop = None if s.hop_start is None else np.concatenate(
        [s.hop_start[s.path_ptr[i]:s.path_ptr[i + 1]] for i in keep])
    return Schedule(s.collective, s.chunk[keep], s.src[keep], s.dst[keep], ptr, links,
                    s.start[keep], s.end[keep], s.op[keep], dict(s.metadata), hop)
