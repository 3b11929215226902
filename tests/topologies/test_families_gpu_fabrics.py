"""Today's GPU fabrics: sized Clos (fattree servers=, railopt, multiplane), nvl, tpu.

Oracles: vendor reference-design counts (NVIDIA DGX SuperPOD), Google's published TPU v4
counts, closed forms, exact bisection by enumeration on small cases, brute-force port
counting.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from topologies.families.gpu_clos import clos_fattree, multiplane, railopt
from topologies.families.tpu import optical_mask, tpu_torus
from topologies.model import Topology
from topologies.registry import FAMILIES, family_names, from_spec
from topologies.yaml_io import dump_yaml_topology, load_yaml_topology

family_names()


def _levels(t):
    lev = np.full(t.n_nodes, -1)
    lev[:t.npus] = 0
    for i, (first, count) in enumerate(t.params["switch_levels"]):
        lev[first:first + count] = i + 1
    return lev


def _cables_per_boundary(t):
    lev = _levels(t)
    return [int(((lev[t.src] == i) & (lev[t.dst] == i + 1)).sum())
            for i in range(len(t.params["switch_levels"]))]


# --------------------------------------------------------------- published counts
# NVIDIA DGX SuperPOD reference architectures, compute fabric (rail-optimised, NDR 400G,
# 64-port QM9700 switches, 8 GPUs = 8 rails per node):
# * H100 RA (docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-h100,
#   "Network Fabrics", Table 4): 1/2/3/4 SUs -> leaves 8/16/24/32, spines 4/8/16/16,
#   spine-leaf cables 256/512/768/1024 (nodes 31/63/95/127 + UFM ports; we count full SUs
#   of 32 nodes, which the RA says the fabric is built for).
# * B200 RA (.../reference-architecture-scalable-infrastructure-b200, "DGX SuperPOD
#   Architecture" table): 2/4/8/16/32/64 SUs -> leaf/spine/core 16/8/-, 32/16/-, 64/32/-,
#   128/128/64, 256/256/128, 512/512/256; node-leaf = leaf-spine (= spine-core) cables =
#   GPU count.
SUPERPOD = [  # (SUs, leaves, spines, cores)
    (1, 8, 4, None), (2, 16, 8, None), (3, 24, 16, None), (4, 32, 16, None),
    (8, 64, 32, None), (16, 128, 128, 64), (32, 256, 256, 128), (64, 512, 512, 256),
]


@pytest.mark.parametrize("sus,leaves,spines,cores", SUPERPOD)
def test_railopt_matches_dgx_superpod_reference_counts(sus, leaves, spines, cores):
    t = railopt(32 * sus, gpus=8, radix=64, bandwidth=50e9)
    counts = [c for _, c in t.params["switch_levels"]]
    assert counts == [leaves, spines] + ([cores] if cores else [])
    gpus = 256 * sus
    assert _cables_per_boundary(t) == [gpus] * len(counts)
    # Every GPU's NIC is one transceiver at each end of its leaf cable; the fabric has a
    # transceiver pair per cable: 2 x cables in all.
    assert t.npus == gpus


def test_railopt_leaves_hold_one_rail_of_one_scalable_unit():
    t = railopt(64, gpus=8, radix=64)
    rail = t.node_attrs["rail"]
    server = t.node_attrs["server"]
    first, count = t.params["switch_levels"][0]
    for leaf in range(first, first + count):
        npus = t.src[(t.dst == leaf) & (t.src < t.npus)]
        assert len(set(rail[npus].tolist())) == 1          # one rail
        assert len(npus) == 32 and len(set((server[npus] // 32).tolist())) == 1  # one SU


def test_fattree_servers_equals_k_ary_counts_when_full():
    a, b = from_spec("fattree:servers=128,radix=8"), from_spec("fattree:k=8")
    assert (a.npus, a.switches, a.n_links, a.diameter) == (b.npus, b.switches, b.n_links,
                                                          b.diameter)
    assert [c for _, c in a.params["switch_levels"]] == [32, 32, 16]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 2000), radix=st.sampled_from([8, 16, 64]),
       oversub=st.sampled_from([1, 3]))
def test_any_server_count_builds_within_radix_and_non_blocking_above_leaves(n, radix, oversub):
    t = clos_fattree(n, radix=radix, oversub=oversub)
    lev = _levels(t)
    deg = np.bincount(t.src, minlength=t.n_nodes)            # cables per node
    assert deg[t.npus:].max() <= radix
    assert np.all(deg[:t.npus] == 1)
    d = radix * oversub // (oversub + 1)
    assert t.params["leaves"] == math.ceil(n / d) or t.params["tiers"] == 1
    up = np.bincount(t.src[lev[t.dst] == lev[t.src] + 1], minlength=t.n_nodes)
    down = np.bincount(t.src[(lev[t.dst] == lev[t.src] - 1) & (lev[t.src] > 0)],
                       minlength=t.n_nodes)
    top = t.params["tiers"]
    mid = (lev >= 2) & (lev < top)
    assert np.all(up[mid] >= down[mid])                      # full bisection above the leaves
    leaves = lev == 1
    if top > 1:
        assert np.all(down[leaves] <= d) and np.all(up[leaves] == radix - d)


@pytest.mark.parametrize("spec", ["fattree:servers=12,radix=4", "fattree:servers=10,radix=8",
                                  "multiplane:6,planes=2,radix=4",
                                  "fattree:servers=9,radix=4"])
def test_bisection_closed_form_equals_exact_enumeration(spec):
    t = from_spec(spec)
    bare = Topology(t.npus, t.switches, t.src, t.dst, t.bandwidth, t.latency)
    value, method = bare.bisection_bandwidth()
    assert method == "exact"
    assert t.params["bisection_Bps"] == pytest.approx(value)


def test_multiplane_is_disjoint_planes():
    t = multiplane(64, planes=4, radix=8)
    import networkx as nx
    g = nx.Graph()
    g.add_edges_from(zip(t.src[(t.src >= t.npus) & (t.dst >= t.npus)].tolist(),
                         t.dst[(t.src >= t.npus) & (t.dst >= t.npus)].tolist()))
    assert nx.number_connected_components(g) == 4
    assert t.injection_bandwidth().min() == pytest.approx(4 * t.params["link_bandwidth_Bps"])


# ---------------------------------------------------------------------- nvl, scaleup
def test_nvl72_domain_and_scaleup_key():
    t = from_spec("nvl:72")
    assert (t.npus, t.switches, t.n_links) == (72, 1, 144)
    assert t.injection_bandwidth().min() == pytest.approx(900e9)   # NVLink 5: 18 x 50 GB/s
    # 8 NVL72 racks of 4-GPU trays on a rail-optimised 800G fabric.
    r = from_spec("railopt:144,gpus=4,scaleup=72,scaleup_bw=900GB/s,bw=800Gbps")
    assert r.npus == 576 and r.params["scaleup_switches"][1] == 8
    assert set(np.bincount(r.node_attrs["server"]).tolist()) == {72}


# ---------------------------------------------------------------------------- tpu
def test_tpu_v4_pod_matches_published_counts():
    # Jouppi et al., ISCA'23 / Google Cloud TPU v4 docs: 64 cubes of 4x4x4 = 4096 chips,
    # 48 OCSes x 128 used ports = 6144 optical link ends ("1.5 optical transceivers per
    # TPU"), 16x16x16 torus.
    t = from_spec("tpu:4x4x4,cubes=64")
    assert t.params["torus"] == [16, 16, 16] and t.npus == 4096
    assert t.params["ocs_ports"] == 48 * 128 == 6144
    assert t.params["optical_cables"] * 2 / t.npus == 1.5
    assert int(optical_mask(t).sum()) == 2 * 3072
    assert np.all(np.bincount(t.src, minlength=t.npus) == 6)        # 6 ICI links per chip


def test_tpu_v4_bisection_against_published():
    # Google Cloud TPU v4 docs: "Bisection bandwidth per Pod 24 TB/s".  Closed form of the
    # 16^3 torus: 2 x 256 links x 50 GB/s = 25.6 TB/s (one direction); within 10 %.
    t = from_spec("tpu:4x4x4,cubes=64")
    assert t.params["bisection_Bps"] == pytest.approx(24e12, rel=0.10)


def test_tpu_single_cube_wraps_through_the_ocs_and_twist_shortens_paths():
    one = from_spec("tpu:4x4x4")
    assert one.params["ocs_ports"] == 6 * 16                       # 16 links per face
    plain = tpu_torus((4, 4, 4), 2)
    twisted = tpu_torus((4, 4, 4), 2, twist=True)
    assert plain.params["torus"] == twisted.params["torus"] == [4, 4, 8]
    assert twisted.diameter < plain.diameter
    assert twisted.mean_path_length < plain.mean_path_length
    assert twisted.n_links == plain.n_links


def test_tpu_bisection_closed_form_small_exact():
    t = from_spec("tpu:2x2x2,cubes=2,grid=1x1x2,bw=1GB/s")   # 2x2x4 torus, 16 chips
    bare = Topology(t.npus, 0, t.src, t.dst, t.bandwidth, t.latency)
    assert t.params["bisection_Bps"] == pytest.approx(bare.bisection_bandwidth()[0])


# -------------------------------------------------------------------- specs, yaml
@pytest.mark.parametrize("spec,field", [
    ("fattree:servers=10,k=4", "fattree spec"),
    ("fattree:radix=8", "fattree servers"),
    ("railopt:8,radix=7", "railopt radix"),
    ("multiplane:8", "multiplane planes"),
    ("tpu:4x4x4,cubes=3,twist=true", "tpu twist"),
    ("tpu:4x4,cubes=2", "tpu cube shape"),
    ("nvl:1", "nvl GPUs"),
    ("fattree:servers=100,radix=4,tiers=2", "fattree tiers"),
    ("railopt:4,gpus=8,scaleup=3", "railopt scaleup"),
    ("fattree:servers=8,scaleup_bw=900GB/s", "fattree scaleup_bw"),
])
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises(InvalidSpecError, match=field) as err:
        from_spec(spec)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["railopt", "multiplane", "nvl", "tpu"])
def test_examples_round_trip_through_yaml(tmp_path, name):
    t = from_spec(FAMILIES[name].example)
    path = tmp_path / f"{name}.yaml"
    dump_yaml_topology(t, path)
    back = load_yaml_topology(path)
    for key in ("src", "dst", "bandwidth", "latency"):
        np.testing.assert_array_equal(getattr(back, key), getattr(t, key))


def test_fattree_servers_from_yaml_round_trip(tmp_path):
    t = from_spec("fattree:servers=35,radix=8,oversub=3")
    dump_yaml_topology(t, tmp_path / "f.yaml")
    back = load_yaml_topology(tmp_path / "f.yaml")
    assert (back.npus, back.switches, back.n_links) == (t.npus, t.switches, t.n_links)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 300), radix=st.sampled_from([4, 8, 16]), planes=st.integers(1, 3),
       rails=st.sampled_from([0, 2, 4]))
def test_closed_form_diameter_and_mean_path_match_bfs(n, radix, planes, rails):
    """params["diameter"/"mean_path_length"] (used by Topology for any size) against an
    all-pairs BFS of the same graph without the closed forms."""
    try:
        if rails:
            t = railopt(max(1, n // rails), gpus=rails, radix=radix, scaleup=1)
        else:
            t = multiplane(n, planes=planes, radix=radix)
    except InvalidSpecError:
        return                                          # too many endpoints for the radix
    bare = Topology(t.npus, t.switches, t.src, t.dst, t.bandwidth, t.latency)
    assert t.diameter == bare.diameter
    assert t.mean_path_length == pytest.approx(bare.mean_path_length, rel=1e-12)


def test_100k_server_summary_is_closed_form():
    t = from_spec("fattree:servers=100000,radix=64")
    assert (t.diameter, t.params["tiers"]) == (8, 4)
    assert t.bisection_bandwidth() == (50000 * t.params["link_bandwidth_Bps"], "closed-form")
    assert "_paths" not in t.__dict__


@settings(max_examples=200, deadline=None)
@given(family=st.sampled_from(["fattree", "railopt", "multiplane", "nvl", "tpu"]),
       shape=st.text(alphabet="0123456789x", max_size=5),
       options=st.dictionaries(
           st.sampled_from(["servers", "radix", "oversub", "tiers", "gpus", "planes", "scaleup",
                            "scaleup_bw", "scaleup_lat", "cubes", "grid", "twist", "bw", "lat",
                            "k"]),
           st.text(alphabet="0123456789.xGBbps/truefals-", min_size=0, max_size=5), max_size=4))
def test_new_family_specs_only_raise_one_line_invalid_spec(family, shape, options):
    items = ([shape] if shape else []) + [f"{k}={v}" for k, v in options.items()]
    spec = family + (":" + ",".join(items) if items else "")
    try:
        t = from_spec(spec)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
        return
    assert t.npus >= 2
