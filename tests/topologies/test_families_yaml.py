"""YAML topology files: explicit graph and ASTRA-sim file (docs/architecture.md section 6)."""

import textwrap

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from topologies.registry import from_spec, load_topology
from topologies.yaml_io import dump_yaml_topology, load_yaml_topology, topology_from_dict


def _write(tmp_path, text, name="topo.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


EXPLICIT = """
    npus: 8
    switches: 1            # ids 8.. ; optional
    bandwidth: 25GB/s      # defaults for links that do not say
    latency: 1us
    links:
      - {src: 0, dst: 8}
      - {src: 1, dst: 8, bandwidth: 50GB/s, count: 2}
      - {src: 2, dst: 8, latency: 700ns}
      - {src: 3, dst: 8}
      - {src: 4, dst: 8}
      - {src: 5, dst: 8}
      - {src: 6, dst: 8}
      - {src: 7, dst: 8, bandwidth: 800000000}
      - {src: 0, dst: 1, bidirectional: false}
"""


def test_explicit_form_from_design_doc(tmp_path):
    t = load_topology(str(_write(tmp_path, EXPLICIT)))
    assert t.name == "topo"
    # 8 cables to the switch, NPU 1's doubled: 9 cables = 18 links, plus one one-way link.
    assert (t.npus, t.switches, t.n_links) == (8, 1, 19)
    assert sorted(t.bandwidth[t.links_between(1, 8)].tolist()) == [50e9, 50e9]
    assert t.bandwidth[t.links_between(0, 8)].tolist() == [25e9]
    assert t.bandwidth[t.links_between(8, 7)].tolist() == [8e8]   # numbers are bytes/s
    assert t.latency[t.links_between(2, 8)].tolist() == [pytest.approx(700e-9)]
    assert t.latency[t.links_between(0, 8)].tolist() == [pytest.approx(1e-6)]
    assert len(t.links_between(0, 1)) == 1 and len(t.links_between(1, 0)) == 0
    assert t.diameter == 2


def test_explicit_name_and_numbers(tmp_path):
    t = topology_from_dict({"name": "pair", "npus": 2, "bandwidth": 1e9, "latency": 0,
                            "links": [{"src": 0, "dst": 1}]})
    assert t.name == "pair" and t.n_links == 2 and t.latency.tolist() == [0.0, 0.0]


ASTRA = """
    topology: [Ring, FullyConnected, Switch]
    npus_count: [4, 2, 4]
    bandwidth: [50.0, 25.0, 12.5]
    latency: [500.0, 500.0, 500.0]
"""


def test_astra_sim_file_units_and_shape(tmp_path):
    t = load_yaml_topology(_write(tmp_path, ASTRA, "astra.yml"))
    assert [d.kind for d in t.dims] == ["ring", "fc", "switch"]
    assert [d.size for d in t.dims] == [4, 2, 4]
    # ASTRA-sim GB/s is 2^30 bytes/s, latency in ns.
    assert [d.bandwidth_Bps for d in t.dims] == [50 * 2**30, 25 * 2**30, 12.5 * 2**30]
    assert all(d.latency_s == 500e-9 for d in t.dims)
    # Same network as the hier spec with the converted values.
    ref = from_spec("hier:ring4_fc2_switch4,bw=50GiB/s:25GiB/s:12.5GiB/s,lat=500ns")
    np.testing.assert_array_equal(t.src, ref.src)
    np.testing.assert_array_equal(t.dst, ref.dst)
    np.testing.assert_allclose(t.bandwidth, ref.bandwidth)
    np.testing.assert_allclose(t.latency, ref.latency)
    # 32 NPUs, one switch per switch line (8); a switch hop is two links.
    assert (t.npus, t.switches) == (32, 8)
    assert t.hop_matrix[0, 8] == 2  # NPUs 0 and 8 differ only in the switch dimension


def test_astra_two_npu_ring_has_one_cable(tmp_path):
    t = load_yaml_topology(_write(tmp_path, """
        topology: [Ring]
        npus_count: [2]
        bandwidth: [1]
        latency: [0]
    """))
    assert t.n_links == 2 and t.bandwidth[0] == 2**30


@pytest.mark.parametrize("make", [
    lambda: from_spec("dgx-a100:2"),
    lambda: from_spec("torus:3x4,bw=10GB/s:20GB/s,lat=1us:2.5us"),
    lambda: from_spec("perms:12,p=1:5"),
    lambda: from_spec("hier:ring4_fc2_switch4,links=2"),
])
def test_dump_then_load_round_trip(tmp_path, make):
    t = make()
    path = tmp_path / "dump.yaml"
    dump_yaml_topology(t, path)
    back = load_topology(str(path))
    assert (back.npus, back.switches, back.name) == (t.npus, t.switches, t.name)
    for key in ("src", "dst", "bandwidth", "latency"):
        np.testing.assert_array_equal(getattr(back, key), getattr(t, key))
    assert back.diameter == t.diameter


@pytest.mark.parametrize("text, match", [
    ("npus: 2\nbandwith: 1GB/s\nlinks: [{src: 0, dst: 1}]\n", "unknown key 'bandwith'"),
    ("npus: 2\nbandwidth: 1GB/s\nlatency: 0\nlinks: [{src: 0, dst: 1, cnt: 2}]\n",
     "unknown key 'cnt'"),
    ("npus: 3\nbandwidth: 1GB/s\nlatency: 0\nlinks: [{src: 0, dst: 1}]\n", "not connected"),
    ("npus: 2\nbandwidth: 1GB/s\nlatency: 0\nlinks: [{src: 0, dst: 1, bidirectional: false}]\n",
     "not connected"),
    ("npus: 2\nbandwidth: -1GB/s\nlatency: 0\nlinks: [{src: 0, dst: 1}]\n", "bandwidth"),
    ("npus: 2\nlatency: 0\nlinks: [{src: 0, dst: 1}]\n", "missing key 'bandwidth'"),
    ("npus: 2\nbandwidth: 1GB/s\nlinks: [{src: 0, dst: 1}]\n", "missing key 'latency'"),
    ("npus: 2\nbandwidth: 1GB/s\nlatency: 0\nlinks: [{src: 0, dst: 2}]\n", "dst"),
    ("npus: 2\nbandwidth: 1GB/s\nlatency: 0\nlinks: [{src: 1, dst: 1}]\n", "self-loops"),
    ("npus: 2\nbandwidth: 1GB/s\nlatency: 0\nlinks: [{src: 0, dst: 1, count: 0}]\n", "count"),
    ("npus: 2\nbandwidth: 1GB/s\nlatency: 0\nlinks: {src: 0, dst: 1}\n", "links"),
    ("npus: two\nbandwidth: 1GB/s\nlatency: 0\nlinks: []\n", "npus"),
    ("- 1\n- 2\n", "mapping"),
    ("npus: [2\n", "invalid YAML"),
    ("topology: [Ring, Torus]\nnpus_count: [2, 2]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
     "Torus"),
    ("topology: [Ring]\nnpus_count: [4, 2]\nbandwidth: [1]\nlatency: [1]\n", "lengths"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [-1]\nlatency: [1]\n", "bandwidth"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: ['50GB/s']\nlatency: [1]\n", "ASTRA-sim"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\nunits: GB\n",
     "unknown key 'units'"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\n", "missing key 'latency'"),
])
def test_bad_files_raise_one_line_invalid_spec(tmp_path, text, match):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(InvalidSpecError, match=match) as info:
        load_topology(str(p))
    assert "\n" not in str(info.value)


def test_missing_file_is_invalid_spec(tmp_path):
    with pytest.raises(InvalidSpecError, match="cannot read"):
        load_topology(str(tmp_path / "nope.yaml"))


@pytest.mark.parametrize("bandwidth, latency, match", [
    ("1.0e-320", "0", r"bandwidth\[0\] 1e-320: expected a number of ASTRA-sim GB/s .* from "
                      r"9.31e-16 to 9.31e\+08"),
    ("1.0e308", "0", r"bandwidth\[0\] '1.0e308': expected a number .* to 9.31e\+08"),
    ("1", "1.0e300", r"latency\[0\] '1.0e300': expected a number of ASTRA-sim ns from 0 to "
                     r"1e\+18"),
])
def test_astra_sim_numbers_have_the_spec_strings_range(tmp_path, bandwidth, latency, match):
    # Fuzzing: 1.0e-320 GB/s was accepted (a NaN iteration time in `evaluate`), and
    # 1.0e308 (a string to YAML 1.1) was refused as "not a number in ASTRA-sim units".
    p = _write(tmp_path, f"topology: [Ring]\nnpus_count: [8]\nbandwidth: [{bandwidth}]\n"
                         f"latency: [{latency}]\n")
    with pytest.raises(InvalidSpecError, match=match):
        load_topology(str(p))


def test_astra_sim_number_written_without_exponent_sign_is_a_number(tmp_path):
    p = _write(tmp_path, "topology: [Ring]\nnpus_count: [4]\nbandwidth: [5.0e1]\n"
                         "latency: [5.0e2]\n")
    t = load_yaml_topology(p)
    assert t.bandwidth[0] == 50 * 2 ** 30 and t.latency[0] == pytest.approx(5e-7)
