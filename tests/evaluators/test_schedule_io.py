"""Schedule JSON round trip and MSCCL XML export.

The XML is checked by an independent reader written here from the format's
rules: structure and bounds, FIFO send/receive matching per connection,
dependencies pointing to existing steps of other threadblocks, no deadlock
(the happens-before graph is acyclic), no data race on a buffer slot, and a
symbolic execution whose final buffers must hold the collective's result.
"""

import gzip
import json
import math
from collections import Counter, defaultdict
from xml.etree import ElementTree as ET

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from evaluators.collectives import Collective
from evaluators.schedule import REDUCE, Schedule, Transfer
from evaluators.schedule_io import (load_schedule, save_msccl_xml, save_schedule,
                                    schedule_from_dict, schedule_to_dict, to_msccl_xml)
from evaluators.validate import validate_schedule
from topologies.registry import from_spec
from validate_cases import (direct_allgather_fc, direct_reducescatter_fc, hop_time, link,
                            ring_allgather, ring_allreduce, ring_reducescatter,
                            switch_allgather_shared, switch_broadcast)


# ------------------------------------------------------------------- JSON
def assert_same_schedule(a, b):
    assert a.collective == b.collective
    for name in ("chunk", "src", "dst", "path_ptr", "path_links", "op"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("start", "end"):   # bit for bit
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    if a.hop_start is None:
        assert b.hop_start is None
    else:
        assert a.hop_start.tobytes() == b.hop_start.tobytes()
    assert dict(a.metadata) == dict(b.metadata)


@pytest.mark.parametrize("build", [
    lambda: ring_allgather(4, 2)[:2], ring_allreduce, lambda: switch_broadcast(4),
    switch_allgather_shared])
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_file_round_trip_is_exact(tmp_path, build, suffix):
    topo, sched = build()
    path = save_schedule(sched, tmp_path / f"s{suffix}")
    back = load_schedule(path)
    assert_same_schedule(sched, back)
    assert validate_schedule(back, topo).valid
    if suffix.endswith(".gz"):
        with gzip.open(path, "rt") as fh:
            assert json.load(fh)["version"] == 1


def test_file_layout():
    _, sched = switch_broadcast(4)
    d = json.loads(json.dumps(schedule_to_dict(sched)))
    assert d["format"] == "codesign.schedule" and d["version"] == 1
    assert d["collective"] == {"kind": "broadcast", "npus": [0, 1, 2, 3], "size_bytes": 1e6,
                               "chunks_per_npu": 1, "root": 0}
    assert d["transfers"]["path_ptr"] == [0, 2, 4, 6]
    assert len(d["transfers"]["hop_start"]) == 6
    assert d["metadata"] == {"algorithm": "hand-bcast"}


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=0, max_size=12), finite)
def test_any_float_survives_the_json_text_exactly(times, meta):
    coll = Collective("allgather", (0, 1), 2e6, 1)
    rows = [Transfer(k % 2, k % 2, 1 - k % 2, (k % 2,), s, e) for k, (s, e) in enumerate(times)]
    sched = Schedule.from_transfers(coll, rows, algorithm="x", weight=meta, tags=["a", 1])
    back = schedule_from_dict(json.loads(json.dumps(schedule_to_dict(sched))))
    assert_same_schedule(sched, back)


def test_numpy_metadata_is_converted_and_objects_are_refused():
    _, sched, _ = ring_allgather(2)
    s2 = sched.retimed(sched.start, sched.end, lanes=np.int64(3), bw=np.array([1.5, 2.0]))
    d = schedule_to_dict(s2)
    assert d["metadata"]["lanes"] == 3 and d["metadata"]["bw"] == [1.5, 2.0]
    with pytest.raises(InvalidSpecError, match=r"schedule metadata\['bad'\]"):
        schedule_to_dict(sched.retimed(sched.start, sched.end, bad=object()))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(version=2), "version 2"),
    (lambda d: d.update(format="other"), "format 'other'"),
    (lambda d: d.update(extra=1), "unknown key 'extra'"),
    (lambda d: d.pop("transfers"), "missing key 'transfers'"),
    (lambda d: d["transfers"].update(chunk=[0.5, 1]), "chunk' entry 0.5"),
    (lambda d: d["transfers"].update(start=["a", 1.0]), "start' entry 'a'"),
    (lambda d: d["transfers"].update(op=[True, 0]), "op' entry True"),
    (lambda d: d["transfers"].update(src=[0]), "src length"),
    (lambda d: d["collective"].update(kind="allsum"), "allsum"),
    (lambda d: d["transfers"].update(oops=[]), "unknown key 'oops'"),
])
def test_bad_files_raise_one_line_errors(mutate, message):
    _, sched, _ = ring_allgather(2)
    d = json.loads(json.dumps(schedule_to_dict(sched)))
    mutate(d)
    with pytest.raises(InvalidSpecError, match=message):
        schedule_from_dict(d)


def test_missing_and_non_json_files(tmp_path):
    with pytest.raises(InvalidSpecError, match="no such file"):
        load_schedule(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidSpecError, match="invalid JSON"):
        load_schedule(bad)


# -------------------------------------------------------------------- XML
def parse(xml_text):
    """Parse the XML into plain dicts, checking the per-element rules."""
    algo = ET.fromstring(xml_text)
    assert algo.tag == "algo"
    a = algo.attrib
    ngpus, nch, nchan = int(a["ngpus"]), int(a["nchunksperloop"]), int(a["nchannels"])
    assert a["proto"] in ("Simple", "LL", "LL128") and a["inplace"] == "1"
    gpus = {}
    for g in algo.findall("gpu"):
        r = int(g.get("id"))
        sizes = {"i": int(g.get("i_chunks")), "o": int(g.get("o_chunks")),
                 "s": int(g.get("s_chunks"))}
        tbs = {}
        for tb in g.findall("tb"):
            t = int(tb.get("id"))
            assert t not in tbs
            send, recv, chan = int(tb.get("send")), int(tb.get("recv")), int(tb.get("chan"))
            assert -1 <= send < ngpus and -1 <= recv < ngpus and r not in (send, recv)
            assert 0 <= chan < nchan
            steps = []
            for k, st_ in enumerate(tb.findall("step")):
                s = {key: st_.get(key) for key in ("type", "srcbuf", "dstbuf")}
                s.update({key: int(st_.get(key)) for key in
                          ("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep")})
                assert s["s"] == k
                assert s["type"] in ("s", "r", "rrc", "nop")
                if s["type"] == "s":
                    assert send >= 0
                if s["type"] in ("r", "rrc"):
                    assert recv >= 0
                if s["type"] != "nop":
                    assert s["cnt"] == 1
                    for b, o in ((s["srcbuf"], s["srcoff"]), (s["dstbuf"], s["dstoff"])):
                        assert 0 <= o < sizes[b], (b, o, sizes)
                assert (s["depid"] == -1) == (s["deps"] == -1)
                steps.append(s)
            tbs[t] = {"send": send, "recv": recv, "chan": chan, "steps": steps}
        # A connection (peer, channel, direction) belongs to one threadblock.
        for d in ("send", "recv"):
            owners = Counter((tb[d], tb["chan"]) for tb in tbs.values() if tb[d] >= 0)
            assert max(owners.values(), default=1) == 1
        gpus[r] = {"tbs": tbs, "sizes": sizes}
    assert sorted(gpus) == list(range(ngpus))
    return a, nch, nchan, gpus


def happens_before(gpus):
    """Graph over steps (gpu, tb, s): program order, dependencies, send -> matching recv."""
    g = nx.DiGraph()
    referenced = set()
    sends, recvs = defaultdict(list), defaultdict(list)
    for r, gpu in gpus.items():
        for t, tb in gpu["tbs"].items():
            for s in tb["steps"]:
                node = (r, t, s["s"])
                g.add_node(node)
                if s["s"]:
                    g.add_edge((r, t, s["s"] - 1), node)
                if s["depid"] >= 0:
                    assert s["depid"] != t and s["depid"] in gpu["tbs"]
                    assert s["deps"] < len(gpu["tbs"][s["depid"]]["steps"])
                    dep = (r, s["depid"], s["deps"])
                    g.add_edge(dep, node)
                    referenced.add(dep)
                if s["type"] == "s":
                    sends[r, tb["send"], tb["chan"]].append((node, s))
                elif s["type"] in ("r", "rrc"):
                    recvs[tb["recv"], r, tb["chan"]].append((node, s))
    # hasdep marks exactly the steps some other step waits for.
    for r, gpu in gpus.items():
        for t, tb in gpu["tbs"].items():
            for s in tb["steps"]:
                assert bool(s["hasdep"]) == ((r, t, s["s"]) in referenced)
    # Every send has its receive, matched in FIFO order on its connection, same chunk.
    assert sorted(sends) == sorted(recvs)
    for conn, ss in sends.items():
        rr = recvs[conn]
        assert len(ss) == len(rr)
        for (sn, s), (rn, rv) in zip(ss, rr):
            assert s["srcoff"] == rv["dstoff"]
            g.add_edge(sn, rn)
    assert nx.is_directed_acyclic_graph(g), "deadlock: cyclic waits"
    return g, sends, recvs


def check_races(g, gpus):
    """Every two accesses of a slot on a GPU, one of them a write, are ordered."""
    reach = nx.transitive_closure_dag(g)
    for r, gpu in gpus.items():
        acc = defaultdict(list)
        for t, tb in gpu["tbs"].items():
            for s in tb["steps"]:
                node = (r, t, s["s"])
                if s["type"] == "s":
                    acc[s["srcbuf"], s["srcoff"]].append((node, False))
                elif s["type"] in ("r", "rrc"):
                    acc[s["dstbuf"], s["dstoff"]].append((node, True))
        for slot, lst in acc.items():
            for k, (u, wu) in enumerate(lst):
                for v, wv in lst[k + 1:]:
                    if wu or wv:
                        assert reach.has_edge(u, v) or reach.has_edge(v, u), (slot, u, v)


def execute(g, gpus, coll, sends, recvs):
    """Run the steps in a topological order on symbolic data; return the buffers."""
    n, c = coll.n, coll.chunks_per_npu
    buf = {}
    for r in range(n):
        for x in range(coll.n_chunks):
            if coll.kind == "allgather":
                buf[r, "o", x] = Counter({r: 1}) if x // c == r else None
            else:   # reducescatter and allreduce start with each rank's own contribution
                buf[r, "i", x] = Counter({r: 1})
    match = {}
    for conn, ss in sends.items():
        for (sn, _), (rn, _) in zip(ss, recvs[conn]):
            match[rn] = sn
    sent = {}
    for node in nx.topological_sort(g):
        r, t, k = node
        s = gpus[r]["tbs"][t]["steps"][k]
        if s["type"] == "s":
            val = buf[r, s["srcbuf"], s["srcoff"]]
            assert val is not None, f"rank {r} sends slot {s['srcoff']} before holding it"
            sent[node] = val
        elif s["type"] == "r":
            buf[r, s["dstbuf"], s["dstoff"]] = sent[match[node]]
        elif s["type"] == "rrc":
            mine = buf[r, s["srcbuf"], s["srcoff"]]
            buf[r, s["dstbuf"], s["dstoff"]] = mine + sent[match[node]]
    return buf


def check_result(buf, coll):
    n, c = coll.n, coll.chunks_per_npu
    everyone = Counter(range(n))
    for r in range(n):
        for x in range(coll.n_chunks):
            if coll.kind == "allgather":
                assert buf[r, "o", x] == Counter({x // c: 1})
            elif coll.kind == "allreduce" or x // c == r:
                assert buf[r, "i", x] == everyone, (r, x, buf[r, "i", x])


def check_xml(xml_text, sched):
    coll = sched.collective
    a, nch, nchan, gpus = parse(xml_text)
    assert int(a["ngpus"]) == coll.n and nch == coll.n_chunks
    assert a["coll"] == {"allgather": "allgather", "reducescatter": "reduce_scatter",
                         "allreduce": "allreduce"}[coll.kind]
    g, sends, recvs = happens_before(gpus)
    assert sum(len(v) for v in sends.values()) == len(sched)
    n_rrc = sum(s["type"] == "rrc" for gpu in gpus.values() for tb in gpu["tbs"].values()
                for s in tb["steps"])
    assert n_rrc == int((sched.op == REDUCE).sum())
    check_races(g, gpus)
    check_result(execute(g, gpus, coll, sends, recvs), coll)
    return a, gpus


def redundant_forward_allgather():
    """Allgather on fc:4 in which NPU 1 forwards chunk 0 to 2 and 3, then gets it again
    from 3: that receive must wait for both earlier sends (a nop carries the second)."""
    t = from_spec("fc:4")
    coll = Collective("allgather", range(4), 4e6)
    d = hop_time(coll)
    rows = [Transfer(0, 0, 1, (link(t, 0, 1),), 0, d),
            Transfer(0, 1, 2, (link(t, 1, 2),), d, 2 * d),
            Transfer(0, 1, 3, (link(t, 1, 3),), d, 2 * d),
            Transfer(0, 3, 1, (link(t, 3, 1),), 2 * d, 3 * d)]
    rows += [Transfer(p, p, q, (link(t, p, q),), 3 * d, 4 * d) for p in (1, 2, 3)
             for q in range(4) if q != p]
    return t, Schedule.from_transfers(coll, rows, algorithm="fwd")


def overtaking_allgather():
    """Shared model on fc:3: 0->1 sends chunk 0 slowly while chunk 2 (relayed by 0)
    overtakes it on the same connection: FIFO matching needs a second channel."""
    t = from_spec("fc:3")
    coll = Collective("allgather", range(3), 3e6)
    b = coll.chunk_bytes / 25e9
    lat = 1e-6
    rows = [Transfer(0, 0, 1, (link(t, 0, 1),), 0.0, lat + 5 * b),       # rate 1/5
            Transfer(2, 2, 0, (link(t, 2, 0),), 0.0, lat + b),
            Transfer(2, 0, 1, (link(t, 0, 1),), lat + b, 2 * lat + 3 * b),  # rate 1/2
            Transfer(0, 0, 2, (link(t, 0, 2),), 0.0, lat + b),
            Transfer(1, 1, 0, (link(t, 1, 0),), 0.0, lat + b),
            Transfer(1, 1, 2, (link(t, 1, 2),), 0.0, lat + b)]
    return t, Schedule.from_transfers(coll, rows, algorithm="overtake", link_model="shared")


@pytest.mark.parametrize("build", [
    lambda: ring_allgather(4)[:2], lambda: ring_allgather(5, 3)[:2], direct_allgather_fc,
    ring_reducescatter, direct_reducescatter_fc, ring_allreduce,
    lambda: ring_allreduce(2), switch_allgather_shared, redundant_forward_allgather,
    overtaking_allgather,
], ids=["ring-ag4", "ring-ag5x3", "direct-ag", "ring-rs", "direct-rs", "ring-ar4", "ring-ar2",
        "switch-2hop-ag", "nop-deps", "two-channels"])
def test_msccl_xml_is_consistent_and_computes_the_collective(build):
    topo, sched = build()
    assert validate_schedule(sched, topo).valid
    check_xml(to_msccl_xml(sched, topo), sched)


def test_xml_details_by_hand_on_ring_allgather():
    topo, sched, _ = ring_allgather(4)
    a, gpus = check_xml(to_msccl_xml(sched, topo, name="ring4"), sched)
    assert (a["name"], a["nchannels"], a["redop"]) == ("ring4", "1", "nop")
    # Rank 1 sends to 2 and receives from 0: two threadblocks, 3 steps each.
    tbs = gpus[1]["tbs"]
    assert sorted((tb["send"], tb["recv"]) for tb in tbs.values()) == [(-1, 0), (2, -1)]
    recv = next(tb for tb in tbs.values() if tb["recv"] == 0)["steps"]
    send = next(tb for tb in tbs.values() if tb["send"] == 2)["steps"]
    assert [s["dstoff"] for s in recv] == [0, 3, 2]          # chunks arriving at rank 1
    assert [s["srcoff"] for s in send] == [1, 0, 3]          # own chunk, then forwards
    assert [s["depid"] >= 0 for s in send] == [False, True, True]
    assert [s["hasdep"] for s in recv] == [1, 1, 0]
    assert gpus[1]["sizes"] == {"i": 1, "o": 4, "s": 0}


def test_nops_and_channels_appear_where_needed():
    topo, sched = redundant_forward_allgather()
    _, gpus = check_xml(to_msccl_xml(sched, topo), sched)
    assert any(s["type"] == "nop" for tb in gpus[1]["tbs"].values() for s in tb["steps"])
    topo, sched = overtaking_allgather()
    a, _ = check_xml(to_msccl_xml(sched, topo), sched)
    assert a["nchannels"] == "2"


def test_reductions_use_rrc_in_place_in_the_input_buffer():
    topo, sched = ring_reducescatter(4)
    a, gpus = check_xml(to_msccl_xml(sched, topo), sched)
    assert a["redop"] == "sum" and a["coll"] == "reduce_scatter"
    steps = [s for tb in gpus[0]["tbs"].values() for s in tb["steps"]]
    assert {s["type"] for s in steps} == {"s", "rrc"}
    assert {s["srcbuf"] for s in steps} == {"i"}
    assert gpus[0]["sizes"] == {"i": 4, "o": 1, "s": 0}


def test_export_refuses_what_msccl_cannot_express(tmp_path):
    topo, bc = switch_broadcast(4)
    with pytest.raises(InvalidSpecError, match="collective for MSCCL export 'broadcast'"):
        to_msccl_xml(bc, topo)
    topo, sched, _ = ring_allgather(4)
    broken = Schedule.from_transfers(sched.collective, list(sched)[1:])
    with pytest.raises(InvalidSpecError, match="invalid schedule"):
        to_msccl_xml(broken, topo)
    with pytest.raises(InvalidSpecError, match="proto"):
        to_msccl_xml(sched, topo, proto="Fast")
    # Relay through NPU 1, which is not a participant.
    t4 = from_spec("ring:4")
    coll = Collective("allgather", (0, 2), 2e6)
    d = hop_time(coll)
    rows = [Transfer(0, 0, 1, (link(t4, 0, 1),), 0.0, d),
            Transfer(0, 1, 2, (link(t4, 1, 2),), d, 2 * d),
            Transfer(1, 2, 0, (link(t4, 2, 3), link(t4, 3, 0)), 0.0, 2 * d)]
    relay = Schedule.from_transfers(coll, rows)
    assert validate_schedule(relay, t4).valid
    with pytest.raises(InvalidSpecError, match="transfer 0 dst for MSCCL export 1"):
        to_msccl_xml(relay, t4)
    out = save_msccl_xml(sched, topo, tmp_path / "a.xml")
    assert ET.parse(out).getroot().get("ngpus") == "4"


def test_participant_ranks_not_npu_ids():
    # Allgather among NPUs 3 and 1 of fc:4 (in that rank order): ranks 0 and 1.
    t = from_spec("fc:4")
    coll = Collective("allgather", (3, 1), 2e6)
    d = hop_time(coll)
    rows = [Transfer(0, 3, 1, (link(t, 3, 1),), 0.0, d),
            Transfer(1, 1, 3, (link(t, 1, 3),), 0.0, d)]
    sched = Schedule.from_transfers(coll, rows)
    a, gpus = check_xml(to_msccl_xml(sched, t), sched)
    assert a["ngpus"] == "2" and sorted(gpus) == [0, 1]
    assert math.isclose(sched.time_s, d)
