"""Input validation and result fields of evaluators.mcf.fluid_optimum."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InfeasibleError, InvalidSpecError
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topologies.builder import LinkBuilder
from topology_cases import cached_topology

M = 1e9


def ring4():
    return cached_topology("ring:4")


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3),
                 st.booleans()))
def test_bad_steps_rejected(value):
    with pytest.raises(InvalidSpecError, match="steps"):
        fluid_optimum(ring4(), Collective.on("allgather", 4, M), steps=value)


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=8).filter(lambda s: s not in ("3.13", "3.14", "exact", "multicast")))
def test_bad_switch_model_rejected(value):
    with pytest.raises(InvalidSpecError, match="switch_model"):
        fluid_optimum(ring4(), Collective.on("allgather", 4, M), switch_model=value)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(min_value=-50, max_value=-1), st.integers(min_value=4, max_value=99)))
def test_memory_node_out_of_range_rejected(node):
    with pytest.raises(InvalidSpecError, match="memory node"):
        fluid_optimum(ring4(), Collective.on("allgather", 3, M), memory_nodes=(node,))


@pytest.mark.parametrize("kwargs, field", [
    ({"memory_nodes": (0,)}, "memory node"),
    ({"link_groups": [([0, 99], 1e9)]}, "link group links"),
    ({"link_groups": [([0], -1.0)]}, "link group bandwidth"),
    ({"link_groups": [5]}, "link group"),
    ({"link_costs": [1.0, 2.0]}, "link_costs"),
    ({"shares": "random"}, "shares"),
    ({"method": "simplex"}, "method"),
    ({"max_rounds": -1}, "max_rounds"),
    ({"patience": 0}, "patience"),
    ({"secondary": "yes"}, "secondary"),
])
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(InvalidSpecError, match=field):
        fluid_optimum(ring4(), Collective.on("allgather", 4, M), **kwargs)


def test_participant_outside_topology():
    with pytest.raises(InvalidSpecError, match="participant"):
        fluid_optimum(ring4(), Collective.on("allgather", (0, 7), M))


def test_unreachable_participant_is_infeasible():
    lb = LinkBuilder(3)
    lb.links([0, 1], [1, 2], 1e9, 0.0)
    topo = lb.build(require_connected=False)
    with pytest.raises(InfeasibleError, match="cannot be reached"):
        fluid_optimum(topo, Collective.on("allgather", 3, M))


def test_memory_attribute_marks_memory():
    # NPU 3 flagged as memory by node_attrs: it copies for the others and is
    # not charged as a GPU, exactly like memory_nodes=(3,).
    lb = LinkBuilder(4)
    lb.cable([0, 1, 2], [3, 3, 3], 1e9, 0.0)
    flagged = lb.build(node_attrs={"memory": [False, False, False, True]})
    plain = lb.build()
    coll = Collective("broadcast", (0, 1, 2), M, root=0)
    a = fluid_optimum(flagged, coll)
    b = fluid_optimum(plain, coll, memory_nodes=(3,))
    assert a.time_s == pytest.approx(b.time_s) and a.secondary_cost_bytes == pytest.approx(3 * M)
    with pytest.raises(InvalidSpecError, match="memory node"):
        fluid_optimum(flagged, Collective.on("allgather", 4, M))


def test_custom_link_costs():
    # Cost only on link 0: at the optimum every in-link of the ring is full
    # (each NPU takes 3 shards over two links in R = 1.5 shard-times), so the
    # cost is exactly that link's load, b * R.
    topo = ring4()
    costs = [0.0] * topo.n_links
    costs[0] = 1.0
    r = fluid_optimum(topo, Collective.on("allgather", 4, M), link_costs=costs)
    assert r.secondary_cost_bytes == pytest.approx(float(topo.bandwidth[0]) * r.time_s, rel=1e-6)


def test_result_fields_and_json():
    r = fluid_optimum(ring4(), Collective.on("allgather", 4, M))
    d = r.to_dict()
    json.dumps(d)
    assert d["time_s"] == r.time_s and d["steps"] == 2 and d["optimal"] is True
    assert r.algbw_Bps == pytest.approx(M / r.time_s)
    assert r.dual_gap < 1e-8
    assert "Optimal" in r.solver_status
    assert len(r.flows) == 4 and {f.origin for f in r.flows} == {0, 1, 2, 3}
    assert r.lp_shape[0] > 0 and r.lp_shape[1] > 0
    assert fluid_optimum(ring4(), Collective.on("allgather", 4, M),
                         secondary=False).secondary_cost_bytes is None


def test_steps_that_would_not_fit_are_refused_before_the_lp_is_built():
    # Fuzzing: `bound ring:8 --method mcf --option steps=20000` allocated for 14 s and
    # ended "ran out of memory" without naming the field; now one line naming steps.
    import time

    from codesign.resources import ResourceLimitError, memory_limit_scope
    from topologies.registry import from_spec

    t0 = time.perf_counter()
    with memory_limit_scope(2 ** 30), \
            pytest.raises(ResourceLimitError, match=r"fluid MCF LP \(5.12e\+06 flow variables\) "
                                                    r"with steps=20000 needs about"):
        fluid_optimum(from_spec("ring:8"), Collective.on("allreduce", 8, 2 ** 30), steps=20000)
    assert time.perf_counter() - t0 < 0.5


def test_lps_that_run_past_the_time_limit_are_refused_in_one_line(capsys):
    """Fuzzing: `bound torus:4x4 --method mcf --option steps=25` fits in memory and ran
    for more than ten minutes (the LP's degeneracy, not its size): every LP of one call
    shares a wall-clock budget (time_limit), and past it the call is refused naming it."""
    import time

    from codesign.app.cli import main
    from codesign.resources import ResourceLimitError
    from evaluators.mcf.fluid import (DEFAULT_TIME_LIMIT_S, LP_MIN_TIME_S, lp_deadline,
                                      lp_options)
    from topologies.registry import from_spec

    coll = Collective.on("allreduce", 16, 2 ** 30)
    t0 = time.perf_counter()
    with pytest.raises(ResourceLimitError, match=r"^refused: the fluid MCF LP \(allreduce on "
                                                 r"16 NPUs, steps=8\) ran past its time limit "
                                                 r"of 1 s \(option time_limit\); use fewer "
                                                 r"steps"):
        fluid_optimum(from_spec("torus:4x4"), coll, steps=8, time_limit=1)
    # Every LP gets at least LP_MIN_TIME_S (HiGHS ignores a limit its presolve used up).
    assert time.perf_counter() - t0 < 60     # 169 s without the limit
    # Within the default limit the answer is as before (torus:4x4 at its 4 steps: 3 s).
    assert fluid_optimum(ring4(), Collective.on("allgather", 4, M)).optimal
    assert DEFAULT_TIME_LIMIT_S == 600
    with lp_deadline(100.0, "x", "y"):
        assert 99 < lp_options({"presolve": True})["time_limit"] <= 100
    with lp_deadline(0.5, "x", "y"):
        assert lp_options()["time_limit"] == LP_MIN_TIME_S
    assert "time_limit" not in lp_options()   # no deadline outside a call
    for bad in (0, -1, float("inf"), "10", True):
        with pytest.raises(InvalidSpecError, match="time_limit"):
            fluid_optimum(ring4(), Collective.on("allgather", 4, M), time_limit=bad)
    assert main(["bound", "torus:4x4", "--collective", "allreduce", "--size", "1GiB",
                 "--method", "mcf", "--option", "steps=8", "--option", "time_limit=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ran past its time limit of 1 s" in err


def test_dantzig_wolfe_pricing_lps_keep_the_calls_time_limit(monkeypatch):
    """The pricing LPs (a persistent HiGHS model each, hundreds per round) neither took
    the call's time left nor checked its deadline: a 20 s limit on dgx-a100:16 allreduce
    (mirrored) ran 52 s.  Each pricing solve now gets the time left, added to the run
    time HiGHS has summed over the model's earlier solves (its limit counts all of them:
    a plain per-solve limit refused calls well inside their budget)."""
    import evaluators.mcf.dantzig_wolfe as dw
    from topologies.registry import from_spec

    limits = []
    real = dw._Pricer.price

    def price(self, p_eff, phase2):
        out = real(self, p_eff, phase2)
        if self.highs is not None:
            limits.append((self.highs.getOptionValue("time_limit")[1],
                           self.highs.getRunTime()))
        return out

    monkeypatch.setattr(dw._Pricer, "price", price)
    r = fluid_optimum(from_spec("torus:4x4"), Collective.on("allgather", 16, 2 ** 30),
                      decomposition="dw", time_limit=100)
    assert r.optimal and limits
    # every solve had the time left (<= 100 s) beyond the model's summed run time
    assert all(run <= limit <= run + 100 for limit, run in limits)


def test_link_groups_slower_than_the_lps_numerical_range_are_refused():
    """A 1 B/s group on ring:4 (links 2.5e10 B/s) came back 'infeasible' (time inf)
    though routing around it is feasible: HiGHS's tolerances are relative.  Within the
    range the group is routed around: the optimum no longer depends on its bandwidth."""
    from topologies.registry import from_spec

    ring, coll = from_spec("ring:4"), Collective.on("allgather", 4, 1e6)
    with pytest.raises(InvalidSpecError, match=r"link group bandwidth 1.0: expected at least "
                                               r"2.5e\+04 bytes/s"):
        fluid_optimum(ring, coll, link_groups=[([0], 1.0)])
    free = fluid_optimum(ring, coll).time_s
    slow, slower = (fluid_optimum(ring, coll, link_groups=[([0], bw)]) for bw in (1e6, 1e5))
    assert slow.optimal and slower.optimal and slow.time_s > free
    assert slower.time_s == pytest.approx(slow.time_s, rel=1e-3)
