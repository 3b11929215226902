"""Bad arguments to the evaluators' public functions raise one-line InvalidSpecError.

A fuzzing pass found bare TypeError / AttributeError / ValueError / OverflowError /
MemoryError, a hang (NaN capacity in max-min filling) and silent truncation (NPU id 0.5
read as 0).  Every case here must raise :class:`~codesign.errors.InvalidSpecError` whose
message is one line naming the field; valid inputs keep their answers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators.collectives import Collective
from topologies.families.clos import MAX_NODES


# ------------------------------------------------------------------ collectives
@pytest.mark.parametrize("npus, needle", [
    (None, "collective NPUs None"),
    (4.0, "collective NPUs 4.0"),
    ("abcd", "collective NPUs 'abcd'"),
    ([None, 1], r"collective participants \[None, 1\]"),
    ([[0], [1]], "collective participants"),
    ([0.5, 1.5], r"collective participants \[0.5, 1.5\]"),       # int() truncated them
    (np.array([0.0, 1.0]), "collective participants"),
    ([0, -1], "collective participants"),
    ([0, MAX_NODES], "collective participants"),
    (10 ** 12, f"collective NPU count 1000000000000: expected an integer in "
               rf"\[2, {MAX_NODES}\]"),                          # was a MemoryError
    (1, "collective NPU count 1"),
    (True, "collective NPUs True"),
    (range(10 ** 30), "collective participants"),
    ([0, 1, 1], "distinct NPU ids"),
])
def test_collective_npusrefused(refused, npus, needle):
    refused(Collective.on, "allgather", npus, 1e6, match=needle)


@pytest.mark.parametrize("size", ["1GB", "4096", None, [1], 1j, np.array([1.0]), 10 ** 400,
                                  math.nan, math.inf, 0, -1.0, True])
def test_collective_sizerefused(refused, size):
    refused(Collective.on, "allreduce", 4, size, match="invalid collective size")


@pytest.mark.parametrize("chunks", [None, math.nan, math.inf, [2], 0, 2.5, "2", True])
def test_collective_chunksrefused(refused, chunks):
    refused(Collective.on, "allreduce", 4, 1e6, chunks_per_npu=chunks,
             match="invalid chunks per NPU")


@pytest.mark.parametrize("root", ["a", [0], math.nan, 1.5, 9, True, np.float64(1.0)])
def test_collective_rootrefused(refused, root):
    # 1.5 was truncated to NPU 1.
    refused(Collective.on, "broadcast", 4, 1e6, root=root, match="invalid collective root")


def test_collective_accepts_numpy_integers_and_keeps_its_answers():
    c = Collective.on("allgather", np.int64(4), np.float64(4096), chunks_per_npu=np.int64(2))
    assert c.npus == (0, 1, 2, 3) and all(type(p) is int for p in c.npus)
    assert (c.size_bytes, c.chunks_per_npu, c.n_chunks, c.chunk_bytes) == (4096.0, 2, 8, 512.0)
    b = Collective("broadcast", np.arange(2, 6), 10 ** 3, root=np.int64(3))
    assert b.npus == (2, 3, 4, 5) and b.root == 3 and type(b.root) is int
    assert Collective.on("reduce", [3, 1], 8).root == 3
    assert Collective.on("allreduce", (i for i in range(3)), 1e9).npus == (0, 1, 2)


# ------------------------------------------------------------ synthesize
@pytest.fixture(scope="module")
def ring4():
    from topologies.registry import from_spec

    return from_spec("ring:4,bw=1GB/s,lat=1us")


@pytest.mark.parametrize("which, value, needle", [
    ("topology", None, "invalid topology None: expected a Topology; build one with "
                       "topologies.registry.from_spec"),
    ("topology", "ring:4", "invalid topology 'ring:4'"),
    ("collective", None, "invalid collective None: expected an evaluators.collectives"),
    ("collective", "allgather", "invalid collective 'allgather'"),
    ("method", ["ring"], r"invalid algorithm \['ring'\]: expected one of .*ring"),  # TypeError
    ("method", None, "invalid algorithm None"),
])
def test_synthesize_refuses_what_is_not_a_topology_collective_or_algorithm(refused, 
        ring4, which, value, needle):
    from evaluators.registry import synthesize

    args = {"topology": ring4, "collective": Collective.on("allgather", 4, 4e6),
            "method": "ring"}
    args[which] = value
    refused(synthesize, args["topology"], args["collective"], args["method"], match=needle)


# -------------------------------------------------------- simulate, replay
@pytest.mark.parametrize("topology, messages, needle", [
    (None, [(0, 1, 1e6)], "invalid topology None"),
    ("ring:4", [(0, 1, 1e6)], "invalid topology 'ring:4'"),
    (4, [(0, 1, 1e6)], "invalid topology 4"),
    ("RING", None, "invalid messages None: expected a sequence"),
    ("RING", "0:1:1e6", "invalid messages '0:1:1e6'"),
    ("RING", 5, "invalid messages 5"),
])
def test_simulate_refuses_bad_topology_and_messages(refused, ring4, topology, messages, needle):
    from evaluators.netsim import simulate

    refused(simulate, ring4 if topology == "RING" else topology, messages, match=needle)


@pytest.mark.parametrize("model", [["flow"], None, 3, "fluid"])
def test_network_model_names_are_checked(refused, ring4, model):
    from evaluators.netsim import simulate
    from evaluators.netsim.simulator import get_model

    refused(get_model, model, match="invalid network model")
    refused(simulate, ring4, [(0, 1, 1e6)], model=model, match="invalid network model")


@pytest.mark.parametrize("fn", ["replay", "replay_time"])
@pytest.mark.parametrize("which, value, needle", [
    ("schedule", None, "invalid schedule None: expected an evaluators.schedule.Schedule"),
    ("schedule", "s.json", "invalid schedule 's.json'"),
    ("schedule", 3, "invalid schedule 3"),
    ("topology", None, "invalid topology None"),
    ("topology", "ring:4", "invalid topology 'ring:4'"),
    ("topology", 4, "invalid topology 4"),
])
def test_replay_refuses_bad_schedule_and_topology(refused, ring4, fn, which, value, needle):
    import evaluators.netsim as netsim
    from evaluators.registry import synthesize

    args = {"schedule": synthesize(ring4, Collective.on("allgather", 4, 4e6), "ring"),
            "topology": ring4}
    args[which] = value
    refused(getattr(netsim, fn), args["schedule"], args["topology"], match=needle)


def test_simulate_and_replay_keep_their_answers(ring4):
    from evaluators.netsim import replay, replay_time, simulate
    from evaluators.registry import synthesize

    r = simulate(ring4, [(0, 1, 1e6), (0, 1, 1e6)], model="congestion")
    assert [round(x * 1e6, 3) for x in r.finish_s.tolist()] == [1001.0, 2002.0]
    s = synthesize(ring4, Collective.on("allgather", 4, 4e6), "ring")
    assert replay_time(s, ring4) == float(replay(s, ring4).end.max()) > 0


# ------------------------------------------------------------ max_min_rates
def _rates(capacity=(1.0, 2.0), hop_flow=(0, 0, 1, 2), hop_link=(0, 1, 0, 1), n_flows=3):
    from evaluators.netsim import max_min_rates

    return max_min_rates(capacity, hop_flow, hop_link, n_flows)


@pytest.mark.parametrize("kwargs, needle", [
    ({"capacity": np.array([np.nan, 2.0])}, r"invalid capacity array\(\[nan,"),   # hung
    ({"capacity": np.array([np.inf, 2.0])}, "invalid capacity"),
    ({"capacity": np.array([-1.0, 2.0])}, "invalid capacity"),        # a negative rate
    ({"capacity": None}, "invalid capacity None"),
    ({"capacity": "12"}, "invalid capacity '12'"),
    ({"capacity": [[1.0, 2.0]]}, "invalid capacity"),
    ({"hop_link": [0, 1, 0, 2]}, r"invalid hop_link \[0, 1, 0, 2\]: expected .* in 0\.\.1"),
    ({"hop_link": [0, 1, 0, -1]}, "invalid hop_link"),
    ({"hop_flow": [0, 0, 1, 3]}, r"invalid hop_flow .* in 0\.\.2"),               # IndexError
    ({"hop_flow": [0.0, 0.0, 1.0, 2.0]}, "invalid hop_flow"),
    ({"hop_flow": [True, False, True, True]}, "invalid hop_flow"),
    ({"hop_flow": None}, "invalid hop_flow None"),
    ({"hop_link": [0, 1, 0]}, "invalid hop_link length 3: expected 4"),
    ({"n_flows": -1}, "invalid n_flows -1: expected an integer >= 0"),          # ValueError
    ({"n_flows": 3.0}, "invalid n_flows 3.0"),
    ({"n_flows": None}, "invalid n_flows None"),
])
def test_max_min_rates_refuses_bad_arrays(refused, kwargs, needle):
    from evaluators.netsim import max_min_rates

    args = {"capacity": np.array([1.0, 2.0]), "hop_flow": np.array([0, 0, 1, 2]),
            "hop_link": np.array([0, 1, 0, 1]), "n_flows": 3, **kwargs}
    refused(max_min_rates, args["capacity"], args["hop_flow"], args["hop_link"],
             args["n_flows"], match=needle)


def test_max_min_rates_accepts_lists_and_keeps_its_answers():
    assert _rates().tolist() == [0.5, 0.5, 1.5]                       # lists (AttributeError)
    assert _rates(np.array([1.0, 2.0]), np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]),
                  np.int64(3)).tolist() == [0.5, 0.5, 1.5]
    assert _rates(hop_flow=[], hop_link=[]).tolist() == [0.0, 0.0, 0.0]
    assert _rates(capacity=[0.0], hop_flow=[0], hop_link=[0], n_flows=1).tolist() == [0.0]
    assert _rates(capacity=[4], hop_flow=[0, 1], hop_link=[0, 0], n_flows=2).tolist() \
        == [2.0, 2.0]


# ------------------------------------------------------------- fluid_optimum
@pytest.fixture(scope="module")
def mcf_ring():
    from topologies.families.multidim import ring

    return ring(4, bandwidth=1e9, latency=0.0), Collective.on("allgather", 4, 4e9)


def test_fluid_optimum_reads_none_as_no_memory_nodes_or_link_groups(mcf_ring):
    from evaluators.mcf.api import fluid_optimum

    topo, coll = mcf_ring
    r = fluid_optimum(topo, coll, memory_nodes=None, link_groups=None)   # TypeError before
    assert (round(r.time_s, 6), r.steps, r.optimal) == (1.5, 2, True)


@pytest.mark.parametrize("args, kwargs, needle", [
    ((None, "COLL"), {}, "invalid topology None: expected a Topology"),
    (("ring:4", "COLL"), {}, "invalid topology 'ring:4'"),
    (("TOPO", None), {}, "invalid collective None"),
    (("TOPO", "COLL"), {"link_costs": "x"}, "invalid link_costs 'x': expected 8 finite"),
    (("TOPO", "COLL"), {"link_costs": [None] * 8}, "invalid link_costs"),
    (("TOPO", "COLL"), {"link_costs": [10 ** 400] * 8}, "invalid link_costs"),
    (("TOPO", "COLL"), {"memory_nodes": 5}, "invalid memory_nodes 5: expected None or"),
    (("TOPO", "COLL"), {"link_groups": "ab"}, "invalid link_groups 'ab'"),
    (("TOPO", "COLL"), {"link_groups": 3}, "invalid link_groups 3"),
    (("TOPO", "COLL"), {"link_groups": [([0.5], 1e9)]}, r"invalid link group links \[0.5\]"),
    (("TOPO", "COLL"), {"link_groups": [([0], "1e9")]}, "invalid link group bandwidth '1e9'"),
    (("TOPO", "COLL"), {"link_groups": [([0], 10 ** 400)]}, "invalid link group bandwidth"),
    (("TOPO", "COLL"), {"link_groups": [([0], None)]}, "invalid link group bandwidth None"),
])
def test_fluid_optimum_refuses_bad_arguments(refused, mcf_ring, args, kwargs, needle):
    from evaluators.mcf.api import fluid_optimum

    topo, coll = mcf_ring
    real = [topo if a == "TOPO" else coll if a == "COLL" else a for a in args]
    refused(fluid_optimum, *real, match=needle, **kwargs)


# ----------------------------------------------------------------- calibrate
@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    from evaluators.iteration.runs import load_runs
    from runs_cases import write_runs

    row = {"id": 1, "source": "s", "gpu": "A100-80", "gpus": 8, "workload": "gpt3-175b",
           "options": "layers=2 hidden=1024 heads=16 ffn=4096 vocab=32000 seq_len=512 "
                      "batch_size=8", "strategy": "dp=1,tp=8", "measured": "iteration_s",
           "value": "1"}
    return load_runs(write_runs(tmp_path_factory.mktemp("runs") / "r.csv", [row]))


@pytest.mark.parametrize("runs, kwargs, needle", [
    (None, {}, "invalid calibrate runs None: expected a sequence of Run"),    # TypeError
    ("runs.csv", {}, "invalid calibrate runs 'runs.csv'"),
    (["x"], {}, "invalid calibrate run 'x': expected a Run"),               # AttributeError
    ("RUNS", {"max_rounds": "x"}, "invalid max_rounds 'x': expected an integer >= 0"),
    ("RUNS", {"max_rounds": -1}, "invalid max_rounds -1"),
    ("RUNS", {"max_rounds": 2.0}, "invalid max_rounds 2.0"),
    ("RUNS", {"progress": "x"}, "invalid progress 'x': expected None or a function"),
])
def test_calibrate_refuses_bad_runs_rounds_and_progress(refused, one_run, runs, kwargs, needle):
    from codesign.workloads.hardware import get_hardware
    from evaluators.iteration.calibrate import calibrate

    refused(calibrate, one_run if runs == "RUNS" else runs, get_hardware("A100-80"),
             match=needle, **kwargs)
