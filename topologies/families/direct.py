"""Direct-connect (switchless) server fabrics: random expanders and permutation graphs.

* :func:`expander` -- a random ``d``-regular graph over the servers, the
  "Expander" baseline of TopoOpt (NSDI'23, Section 5.1: "each server is
  connected to d other servers", Jellyfish-like).
* :func:`direct_connect` -- the union of permutations and matchings, which is
  what TopoOpt's TopologyFinder produces (Algorithm 1): TotientPerms /
  SelectPermutations ring permutations for AllReduce traffic (Section 4.3,
  generator ``p`` meaning ``S_i -> S_(i+p) mod n``) and Blossom maximum-weight
  matchings for model-parallel traffic (Step 3).

Direction of permutation links
------------------------------
A permutation adds the **directed** links ``i -> p[i]`` only, and a matching
adds cables (both directions).  Reasons, all from the TopoOpt paper:

* each permutation consumes one interface of every server (its transmit fibre
  goes to ``p[i]``, its receive fibre comes from ``p^-1[i]``); the patch panel
  "grabs a fiber on the transmit side and connects it to a fiber on the receive
  side" (Appendix C), so the two directions of an interface can go to different
  servers;
* CoinChangeMod routing (Appendix E.3) reaches ``S_j`` from ``S_i`` as a sum of
  the *positive* generators modulo ``n``, i.e. it only moves forward along the
  rings;
* with this rule a degree-``d`` server has exactly ``d`` outgoing and ``d``
  incoming links of bandwidth ``B`` whether its interfaces are used by
  permutations or by matchings (a matched pair uses one interface at each end).

Pass ``bidirectional=True`` (spec ``bidir=true``) to add the reverse links of
every permutation as well (each permutation then uses two interfaces per
server).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.errors import InfeasibleError, invalid
from codesign.specs import check_int
from topologies.builder import LinkBuilder
from topologies.families.clos import MAX_NODES, check_link, link_options
from topologies.families.options import DEFAULT_BW, DEFAULT_LAT, parse_int
from topologies.model import Topology
from topologies.registry import register_family

__all__ = ["expander", "direct_connect"]

#: Regular graphs drawn before :func:`expander` gives up finding a connected one.
EXPANDER_MAX_TRIES = 100


def expander(n: int, *, degree: int, seed: int = 0, bandwidth: float = DEFAULT_BW,
             latency: float = DEFAULT_LAT, name: str = "") -> Topology:
    """Random ``degree``-regular graph over ``n`` servers (TopoOpt's Expander baseline).

    Every edge is a cable of ``bandwidth`` per direction.  For ``degree >= 3``
    graphs are drawn with :func:`networkx.random_regular_graph`, seeded from a
    ``numpy`` generator created with ``seed``, until one is connected (at most
    ``EXPANDER_MAX_TRIES`` draws; random regular graphs of degree >= 3 are
    connected with high probability).  ``degree == 2`` draws a uniformly random
    Hamiltonian cycle (the only connected 2-regular graphs); ``degree == 1``
    is only connected for ``n == 2``.

    Parameters
    ----------
    n : int
        Servers (NPUs), >= 2.
    degree : int
        Cables per server, ``1 <= degree < n``; ``n * degree`` must be even.
    seed : int, optional
        Same seed, same graph (for a given networkx version).
    bandwidth : float, optional
        Bytes/s per direction of each cable.
    latency : float, optional
        Seconds per link.
    name : str, optional
        Display name.

    Returns
    -------
    Topology
        ``n`` NPUs, no switches, ``n * degree`` directed links.  ``params``:
        ``servers``, ``degree``, ``seed``, ``link_bandwidth_Bps``, ``attempts``
        (graphs drawn).

    Raises
    ------
    InvalidSpecError
        ``degree >= n``, ``n * degree`` odd, or ``degree == 1`` with ``n > 2``.
    InfeasibleError
        No connected graph in ``EXPANDER_MAX_TRIES`` draws.

    Examples
    --------
    >>> t = expander(16, degree=4, seed=1)
    >>> t.n_links, sorted(set(np.bincount(t.src).tolist()))
    (64, [4])
    """
    import networkx as nx

    n = check_int("expander servers", n, 2)
    d = check_int("expander degree", degree, 1)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise invalid("expander seed", seed, "an integer >= 0")
    if d >= n:
        raise invalid("expander degree", d, f"less than the number of servers ({n})")
    if (n * d) % 2:
        raise invalid("expander degree", d, f"an even degree: servers x degree ({n} x {d}) is odd")
    if d == 1 and n > 2:
        raise invalid("expander degree", d, "at least 2 (a 1-regular graph is a matching, "
                      "disconnected for more than 2 servers)")
    if n > MAX_NODES:
        raise invalid("expander servers", n, f"at most {MAX_NODES}")
    bw, lat = check_link(bandwidth, latency, "expander")
    rng = np.random.default_rng(int(seed))
    attempts = 1
    if d == 1:
        edges = np.array([[0, 1]])
    elif d == 2:
        order = rng.permutation(n)
        edges = np.stack([order, np.roll(order, -1)], axis=1)
    else:
        for attempts in range(1, EXPANDER_MAX_TRIES + 1):
            g = nx.random_regular_graph(d, n, seed=int(rng.integers(2 ** 32)))
            if nx.is_connected(g):
                break
        else:
            raise InfeasibleError(f"no connected {d}-regular graph on {n} servers found in "
                                  f"{EXPANDER_MAX_TRIES} draws (seed {seed}); raise the degree",
                                  reason="shape")
        edges = np.array(sorted(tuple(sorted(e)) for e in g.edges()), dtype=np.int64)
    b = LinkBuilder(n)
    b.cable(edges[:, 0], edges[:, 1], bw, lat)
    params = {"servers": n, "degree": d, "seed": int(seed), "link_bandwidth_Bps": bw,
              "attempts": attempts}
    return b.build(name=name or f"expander:{n},degree={d},seed={seed}", family="expander",
                   params=params)


def _permutation(perm: object, n: int, index: int) -> np.ndarray:
    """Targets ``p[i]`` of permutation ``index`` (an int generator or a sequence)."""
    field = f"direct_connect permutations[{index}]"
    if isinstance(perm, (int, np.integer)) and not isinstance(perm, bool):
        if perm % n == 0:
            raise invalid(field, perm, f"a generator g with g mod {n} != 0 (g = 0 is a self-loop)")
        return (np.arange(n) + int(perm)) % n
    try:
        arr = np.asarray(perm)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (n,) or arr.dtype.kind not in "iu" or sorted(arr.tolist()) != list(range(n)):
        raise invalid(field, perm, f"an integer generator or a permutation of 0..{n - 1}")
    return arr.astype(np.int64)


def _matching(pairs: object, n: int, index: int) -> np.ndarray:
    """The pairs of matching ``index`` as an ``(m, 2)`` array."""
    field = f"direct_connect matchings[{index}]"
    try:
        arr = np.asarray(pairs)
    except (TypeError, ValueError):
        arr = np.zeros((0, 3))
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iu":
        raise invalid(field, pairs, "a list of server pairs (i, j)")
    if arr.min() < 0 or arr.max() >= n or np.any(arr[:, 0] == arr[:, 1]):
        raise invalid(field, pairs, f"pairs of two different servers in 0..{n - 1}")
    if np.unique(arr).size != arr.size:
        raise invalid(field, pairs, "a matching: each server in at most one pair")
    return arr.astype(np.int64)


def direct_connect(n: int, *, permutations: Sequence[object] = (),
                   matchings: Sequence[object] = (), bidirectional: bool = False,
                   bandwidth: float = DEFAULT_BW, latency: float = DEFAULT_LAT,
                   name: str = "") -> Topology:
    """A direct-connect graph built from permutations and matchings (TopoOpt TopologyFinder).

    Parameters
    ----------
    n : int
        Servers (NPUs), >= 2.
    permutations : sequence, optional
        Each item is an int generator ``g`` (``i -> (i + g) mod n``, a
        TotientPerms ring when ``gcd(g, n) = 1``) or a sequence ``p`` of length
        ``n`` that permutes ``0..n-1``.  It adds the directed links ``i -> p[i]``
        for every ``i`` with ``p[i] != i`` (fixed points are servers that do not
        take part, e.g. outside an AllReduce group); see the module docstring
        for why one direction.
    matchings : sequence, optional
        Each item is a list of pairs ``(i, j)``, each server at most once; it
        adds the cables ``i <-> j`` (Blossom matchings for MP traffic).
    bidirectional : bool, optional
        Also add ``p[i] -> i`` for every permutation link.
    bandwidth : float, optional
        Bytes/s of every directed link.
    latency : float, optional
        Seconds per link.
    name : str, optional
        Display name.

    Returns
    -------
    Topology
        ``n`` NPUs, no switches; parallel links are kept (two permutations that
        connect the same ordered pair give two links).  ``params``: ``servers``,
        ``degree`` (largest number of links leaving a server), ``generators``
        (the int permutations, in order), ``permutations`` (count),
        ``matchings`` (count), ``bidirectional``, ``link_bandwidth_Bps``.

    Raises
    ------
    InvalidSpecError
        Malformed permutations or matchings, or a graph that is not strongly
        connected (e.g. generators sharing a factor with ``n``).

    Examples
    --------
    >>> t = direct_connect(12, permutations=[1, 5])
    >>> t.n_links, t.diameter
    (24, 5)
    """
    n = check_int("direct_connect servers", n, 2)
    if n > MAX_NODES:
        raise invalid("direct_connect servers", n, f"at most {MAX_NODES}")
    if not isinstance(bidirectional, bool):
        raise invalid("direct_connect bidirectional", bidirectional, "true or false")
    bw, lat = check_link(bandwidth, latency, "direct_connect")
    if isinstance(permutations, (str, bytes)) or isinstance(matchings, (str, bytes)):
        raise invalid("direct_connect permutations/matchings", (permutations, matchings),
                      "lists of generators, permutations or pairs")
    perms = list(permutations) if not isinstance(permutations, (int, np.integer)) \
        else [permutations]
    b = LinkBuilder(n)
    ids = np.arange(n)
    out_degree = np.zeros(n, dtype=np.int64)
    for idx, perm in enumerate(perms):
        target = _permutation(perm, n, idx)
        moved = target != ids
        if bidirectional:
            b.cable(ids[moved], target[moved], bw, lat)
            out_degree += np.bincount(target[moved], minlength=n)
        else:
            b.links(ids[moved], target[moved], bw, lat)
        out_degree += moved
    mats = list(matchings)
    for idx, pairs in enumerate(mats):
        arr = _matching(pairs, n, idx)
        b.cable(arr[:, 0], arr[:, 1], bw, lat)
        out_degree += np.bincount(arr.ravel(), minlength=n)
    generators = [int(p) for p in perms if isinstance(p, (int, np.integer))]
    params = {"servers": n, "degree": int(out_degree.max()), "generators": generators,
              "permutations": len(perms), "matchings": len(mats),
              "bidirectional": bidirectional, "link_bandwidth_Bps": bw}
    if not name:
        only_generators = generators and len(generators) == len(perms) and not mats
        name = (f"perms:{n},p=" + ":".join(map(str, generators))) if only_generators \
            else f"direct:{n}"
    return b.build(name=name, family="perms", params=params)


# ---------------------------------------------------------------- spec strings
@register_family("expander", keys=("degree", "seed", "bw", "lat"), shape="SERVERS",
                 example="expander:16,degree=4",
                 summary="random regular graph (seeded), TopoOpt's Expander baseline")
def _expander_spec(shape, options):
    n = parse_int(shape, "expander servers", minimum=2)
    if "degree" not in options:
        raise invalid("expander spec", f"expander:{shape}", "a degree, e.g. expander:128,degree=4")
    d = parse_int(options["degree"], "expander degree", minimum=1)
    seed = parse_int(options.get("seed", "0"), "expander seed", minimum=0)
    return expander(n, degree=d, seed=seed, **link_options("expander", shape, options))


_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@register_family("perms", keys=("p", "bidir", "bw", "lat"), shape="SERVERS",
                 example="perms:12,p=1:5",
                 summary="direct-connect union of ring permutations i -> i+p mod N (TotientPerms)")
def _perms_spec(shape, options):
    n = parse_int(shape, "perms servers", minimum=2)
    if "p" not in options:
        raise invalid("perms spec", f"perms:{shape}", "generators, e.g. perms:12,p=1:5")
    gens = [parse_int(g, "perms generator", minimum=1) for g in options["p"].split(":")]
    bidir = _TRUE.get(options.get("bidir", "false").lower())
    if bidir is None:
        raise invalid("perms bidir", options["bidir"], "true or false")
    return direct_connect(n, permutations=gens, bidirectional=bidir,
                          **link_options("perms", shape, options))
