"""Exact cut problems on a topology, used by :mod:`evaluators.bounds`.

Three problems, all on the directed graph of a :class:`~topologies.model.Topology`
(NPUs and switches; a set ``S`` of nodes is cut by the links leaving it,
``delta+(S)``, whose capacity is the sum of their bandwidths):

* :func:`max_ratio_cut` -- maximise ``|S & P| / cap(delta+(S))`` over sets
  ``S`` that hold at least one member of ``P`` and miss at least one *sink*
  (the allgather cut bound and, on the reversed graph, the reduce-scatter,
  scatter and gather ones).  Solved exactly by Dinkelbach's method for
  fractional programs: at ratio ``lambda = p/q`` the parametric problem
  ``max |S & P| - lambda cap(delta+(S))`` with a fixed sink ``t`` outside
  ``S`` is one minimum s-t cut (a super source with an arc of capacity 1 to
  every member other than ``t``, every link with capacity ``lambda * b``,
  sink ``t``); a set with positive value has a strictly larger ratio, and a
  zero optimum certifies ``lambda`` as the maximum.
* :func:`min_pair_cuts` -- the smallest of several s-t minimum cuts (broadcast
  and reduce min-cut bounds, the allreduce separating cut).
* :func:`max_product_cut` -- maximise ``|S & P| |P - S| / cap(delta+(S))``
  (the all-to-all cut bound) by exhaustive enumeration when that is small.

**Exact arithmetic.**  Link bandwidths are floats, hence dyadic rationals;
:class:`CutNetwork` rescales them to exact Python integers (common
denominator, then divided by their gcd), so every capacity of the parametric
problems above (``q`` on member arcs, ``p * w`` on links, with
``lambda = p/q`` in lowest terms) is an integer and comparisons are exact.
Max-flows run in scipy's C Dinic (``scipy.sparse.csgraph.maximum_flow``),
which only takes int32 capacities.  When the exact capacities of a problem
sum to less than 2^31 (the usual case: equal or simply related bandwidths
become small integers) scipy's answer is exact.  Otherwise the capacities
are shifted right by ``k`` bits, and the rounded problem is used only where
its answer is provably the exact one:

* Dinkelbach certificate (:func:`max_ratio_cut`): links rounded *down*,
  member arcs rounded *up*.  If the trivial cut (all member arcs) is still a
  minimum of the rounded problem then for every ``S``:
  ``p w(S) >= 2^k floor-sum >= 2^k ceil-sum >= q |S & P|``, i.e. no set beats
  the ratio ``p/q``.  Otherwise the rounded cut's set is taken if its exact
  ratio improves, else the step is re-solved exactly.
* Pair cuts (:func:`min_pair_cuts`): the rounded-down min cut times ``2^k``
  is a lower bound on the exact one, the exact capacity of the set it returns
  an upper bound; only pairs whose interval could hold the minimum are
  re-solved exactly.

Exact re-solves use networkx's Boykov-Kolmogorov max-flow on the Python
integers.  No result depends on floating-point tolerances.

Complexity: :func:`max_ratio_cut` solves one max-flow per sink (orbit
representative) plus one per improvement of the ratio (Dinkelbach converges
superlinearly; a handful in practice), each ``O(V^2 E)`` worst case for Dinic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = ["CutNetwork", "RatioCut", "PairCut", "ProductCut", "max_ratio_cut",
           "min_pair_cuts", "max_product_cut", "min_cut"]

#: Largest capacity sum scipy's int32 max-flow is given.
_INT32_MAX = 2**31 - 1
#: Rounded problems are scaled to capacity sums below 2^_SCALED_BITS.
_SCALED_BITS = 29


class CutNetwork:
    """A directed graph with parallel links merged and exact integer capacities.

    Parameters
    ----------
    n_nodes : int
        Number of nodes (ids ``0 .. n_nodes-1``).
    src, dst : array_like of int
        Link endpoints (parallel links allowed, no self-loops).
    bandwidth : array_like of float
        Link bandwidths, bytes/s (> 0).

    Attributes
    ----------
    u, v : numpy.ndarray
        Endpoints of the merged arcs (one per ordered node pair with links).
    weight : list of int
        Exact integer capacity of each arc: ``bandwidth = weight * unit``.
    unit : fractions.Fraction
        Bytes/s per capacity unit.
    bandwidth : numpy.ndarray
        Float capacity of each arc, bytes/s.
    """

    def __init__(self, n_nodes: int, src, dst, bandwidth) -> None:
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        bw = np.asarray(bandwidth, dtype=np.float64)
        self.n = int(n_nodes)
        key = src * self.n + dst
        uniq, inv = np.unique(key, return_inverse=True)
        self.u = (uniq // self.n).astype(np.int64)
        self.v = (uniq % self.n).astype(np.int64)
        self.bandwidth = np.bincount(inv, weights=bw, minlength=uniq.size)
        link_w, self.unit = _integer_weights(bw)
        w = [0] * uniq.size
        for i, x in zip(inv.tolist(), link_w):
            w[i] += x
        self.weight: list[int] = w
        self._w_obj = np.array(w, dtype=object)

    @classmethod
    def from_topology(cls, topology) -> "CutNetwork":
        """The network of ``topology``."""
        return cls(topology.n_nodes, topology.src, topology.dst, topology.bandwidth)

    def reversed(self) -> "CutNetwork":
        """The same network with every arc reversed."""
        net = object.__new__(CutNetwork)
        net.n = self.n
        order = np.lexsort((self.u, self.v))  # keep arcs sorted by (new src, new dst)
        net.u, net.v = self.v[order], self.u[order]
        net.bandwidth = self.bandwidth[order]
        net.weight = [self.weight[i] for i in order.tolist()]
        net._w_obj = np.array(net.weight, dtype=object)
        net.unit = self.unit
        return net

    @property
    def n_arcs(self) -> int:
        """Number of merged arcs."""
        return int(self.u.size)

    def crossing(self, mask: np.ndarray) -> np.ndarray:
        """Boolean mask of the arcs leaving the node set ``mask``."""
        return mask[self.u] & ~mask[self.v]

    def cut_weight(self, mask: np.ndarray) -> int:
        """Exact integer capacity of ``delta+(S)`` for the node set ``mask``."""
        return int(self._w_obj[self.crossing(mask)].sum())

    def to_Bps(self, weight: int | Fraction) -> float:
        """Convert an integer capacity to bytes/s."""
        return float(weight * self.unit)

    def node_weights(self) -> tuple[list[int], list[int]]:
        """Exact out- and in-capacity of every node."""
        out, inn = [0] * self.n, [0] * self.n
        for a, b, w in zip(self.u.tolist(), self.v.tolist(), self.weight):
            out[a] += w
            inn[b] += w
        return out, inn


def _integer_weights(bw: np.ndarray) -> tuple[list[int], Fraction]:
    """Exact integers ``w`` and a unit with ``bw[i] == w[i] * unit`` exactly."""
    if bw.size == 0:
        return [], Fraction(1)
    if np.all(bw == np.floor(bw)) and float(bw.max()) < 2.0**62:
        ints = [int(x) for x in bw.astype(np.int64).tolist()]
        den = 1
    else:
        fracs = [Fraction(float(x)) for x in bw.tolist()]
        den = max(f.denominator for f in fracs)  # float denominators are powers of two
        ints = [f.numerator * (den // f.denominator) for f in fracs]
    g = 0
    for x in ints:
        g = math.gcd(g, x)
    return [x // g for x in ints], Fraction(g, den)


# ------------------------------------------------------------------ max-flow
def _scipy_flow(n: int, u: np.ndarray, v: np.ndarray, caps: np.ndarray, source: int, sink: int,
                side: bool) -> tuple[int, np.ndarray | None]:
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    g = csr_array((caps.astype(np.int32), (u, v)), shape=(n, n))
    res = maximum_flow(g, source, sink)
    value = int(res.flow_value)
    if not side:
        return value, None
    residual = csr_array((g - res.flow) > 0)
    reach = breadth_first_order(residual, source, directed=True, return_predecessors=False)
    mask = np.zeros(n, dtype=bool)
    mask[reach] = True
    return value, mask


def _networkx_flow(n: int, u: np.ndarray, v: np.ndarray, caps: Sequence[int], source: int,
                   sink: int) -> tuple[int, np.ndarray]:
    import networkx as nx
    from networkx.algorithms.flow import boykov_kolmogorov

    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((int(a), int(b), {"capacity": c})
                     for a, b, c in zip(u.tolist(), v.tolist(), caps) if c > 0)
    value, (reach, _) = nx.minimum_cut(g, source, sink, flow_func=boykov_kolmogorov)
    mask = np.zeros(n, dtype=bool)
    mask[list(reach)] = True
    return int(value), mask


def fits_int32(caps: Sequence[int]) -> bool:
    """Whether scipy's int32 max-flow solves these capacities exactly."""
    return sum(caps) <= _INT32_MAX


def scaled_caps(caps: Sequence[int], round_up: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Capacities shifted right by ``k`` bits to fit int32: floor, or ceil where ``round_up``.

    Returns the scaled capacities and ``k`` (so ``c ~ scaled << k``).
    """
    total = sum(caps)
    k = max(0, total.bit_length() - _SCALED_BITS)
    low = [c >> k for c in caps]
    if round_up is not None:
        mask = (1 << k) - 1
        for i in np.flatnonzero(round_up).tolist():
            if caps[i] & mask:
                low[i] += 1
    return np.array(low, dtype=np.int64), k


def min_cut(n: int, u: np.ndarray, v: np.ndarray, caps: Sequence[int], source: int,
            sink: int) -> tuple[int, np.ndarray]:
    """Exact minimum s-t cut of a graph with integer capacities.

    Parameters
    ----------
    n : int
        Number of nodes.
    u, v : numpy.ndarray
        Arc endpoints (distinct ordered pairs).
    caps : sequence of int
        Non-negative integer capacities (Python ints, any size).
    source, sink : int
        Terminals.

    Returns
    -------
    value : int
        The min-cut capacity.
    source_side : numpy.ndarray of bool
        The nodes on the source side of a minimum cut.

    Notes
    -----
    scipy's Dinic (C, int32) when the capacities sum below 2^31, otherwise
    networkx's Boykov-Kolmogorov on Python integers (exact, slower).
    """
    if fits_int32(caps):
        return _scipy_flow(n, u, v, np.asarray(caps, dtype=np.int64), source, sink, True)
    return _networkx_flow(n, u, v, caps, source, sink)


# ---------------------------------------------------------- max ratio cut
@dataclass(frozen=True)
class RatioCut:
    """Result of :func:`max_ratio_cut`.

    Attributes
    ----------
    count : int
        ``|S & P|`` of the best set.
    weight : int
        Its exact integer cut capacity (see :attr:`CutNetwork.unit`).
    capacity_Bps : float
        The same in bytes/s.
    mask : numpy.ndarray of bool
        The best set ``S`` over the network's nodes.
    exact : bool
        Whether every sink was certified (the ratio is the maximum).
    flows : int
        Max-flow problems solved.
    """

    count: int
    weight: int
    capacity_Bps: float
    mask: np.ndarray
    exact: bool
    flows: int

    @property
    def ratio(self) -> float:
        """``count / capacity``, seconds per byte of one member's share."""
        return self.count / self.capacity_Bps


def max_ratio_cut(net: CutNetwork, members: np.ndarray, sinks: Iterable[int], *,
                  max_flows: int | None = None,
                  start: Iterable[np.ndarray] = ()) -> RatioCut:
    """Maximise ``|S & P| / cap(delta+(S))`` exactly (Dinkelbach + min cuts).

    Parameters
    ----------
    net : CutNetwork
        The graph; every member must reach every sink (positive cuts).
    members : numpy.ndarray of bool
        The set ``P`` (length ``net.n``).
    sinks : iterable of int
        Nodes of which at least one must lie outside ``S``.  For symmetric
        inputs, one representative per orbit (:func:`topologies.symmetry.participant_orbits`).
    max_flows : int, optional
        Budget of max-flow problems; when it runs out the best set found so
        far is returned with ``exact=False`` (still a valid set, so its ratio
        is a valid lower bound on the maximum).
    start : iterable of bool arrays, optional
        Extra candidate sets to seed the ratio with.

    Returns
    -------
    RatioCut

    Notes
    -----
    Dinkelbach (1967): with the current best ratio ``p/q`` and a sink ``t``,
    the min cut of (super source -> each member except ``t``: capacity ``q``;
    each arc: ``p * w``; sink ``t``) is below ``q * |P - t|`` exactly when
    some ``S`` not holding ``t`` has ``|S & P| / w(S) > p/q``, and its source
    side is such a set.  Each sink is iterated until certified; the ratio only
    grows, so certified sinks stay certified.  Sinks are visited in increasing
    order of in-capacity (the usual binding ones first).

    Examples
    --------
    >>> from topologies.families.multidim import ring
    >>> t = ring(4, bandwidth=1.0)
    >>> net = CutNetwork.from_topology(t)
    >>> r = max_ratio_cut(net, np.ones(4, bool), range(4))
    >>> r.count, r.capacity_Bps, r.exact
    (3, 2.0, True)
    """
    members = np.asarray(members, dtype=bool)
    sinks = [int(t) for t in sinks]
    n = net.n
    out_w, in_w = net.node_weights()
    member_ids = np.flatnonzero(members)
    best: tuple[int, int, np.ndarray] | None = None

    n_members = int(members.sum())
    sink_set = set(sinks)

    def offer(count: int, w: int, make_mask) -> None:
        nonlocal best
        if count == 0 or w <= 0:
            return
        if best is None or count * best[1] > best[0] * w:
            best = (count, w, make_mask())

    def consider(mask: np.ndarray) -> None:
        if any(not mask[t] for t in sinks):
            offer(int(members[mask].sum()), net.cut_weight(mask), mask.copy)

    def everything_but(t: int) -> np.ndarray:
        mask = np.ones(n, dtype=bool)
        mask[t] = False
        return mask

    def only(x: int) -> np.ndarray:
        mask = np.zeros(n, dtype=bool)
        mask[x] = True
        return mask

    # Seeds: the complement of each sink (cut = its ingress) and each single
    # member other than a lone sink (cut = its egress); both in O(1) each.
    for t in sinks:
        offer(n_members - int(members[t]), in_w[t], lambda t=t: everything_but(t))
    for x in member_ids.tolist():
        if sink_set != {x}:
            offer(1, out_w[x], lambda x=x: only(x))
    for mask in start:
        consider(np.asarray(mask, dtype=bool))
    if best is None:
        raise ValueError("no set holds a member and misses a sink")

    # Parametric network: nodes 0..n-1, super source n.
    s = n
    arc_u = np.concatenate([net.u, np.full(member_ids.size, s)])
    arc_v = np.concatenate([net.v, member_ids])
    is_member_arc = np.concatenate([np.zeros(net.n_arcs, bool), np.ones(member_ids.size, bool)])

    def _improves(mask: np.ndarray, cur: tuple[int, int, np.ndarray]) -> bool:
        count = int(members[mask].sum())
        if count == 0:
            return False
        return count * cur[1] > cur[0] * net.cut_weight(mask)

    flows = 0
    exact = True
    for t in sorted(sinks, key=lambda x: in_w[x]):
        certified = False
        while not certified:
            if max_flows is not None and flows >= max_flows:
                exact = False
                break
            frac = Fraction(best[0], best[1])
            p, q = frac.numerator, frac.denominator
            caps = [p * w for w in net.weight] + [0 if x == t else q for x in member_ids.tolist()]
            threshold = q * int(members.sum() - members[t])
            flows += 1
            if fits_int32(caps):
                value, side = _scipy_flow(n + 1, arc_u, arc_v, np.array(caps, np.int64), s, t,
                                          True)
            else:
                # Certificate on rounded capacities: links rounded down, member
                # arcs rounded up.  If the trivial cut {s} is still minimum,
                # every S has p*w(S) >= q*|S & P| exactly (see module notes).
                low, _ = scaled_caps(caps, round_up=is_member_arc)
                value, side = _scipy_flow(n + 1, arc_u, arc_v, low, s, t, True)
                if value >= int(low[is_member_arc].sum()):
                    certified = True
                    continue
                if not _improves(side[:n], best):
                    value, side = _networkx_flow(n + 1, arc_u, arc_v, caps, s, t)
                else:
                    value = -1  # the rounded cut's set already improves the ratio
            if value >= threshold:
                certified = True
                continue
            mask = side[:n]
            count, w = int(members[mask].sum()), net.cut_weight(mask)
            # A cut below the threshold is a set with a strictly larger ratio.
            if not count * best[1] > best[0] * w:
                raise RuntimeError("internal error: Dinkelbach step did not improve the ratio")
            best = (count, w, mask.copy())
        if not exact:
            break
    count, w, mask = best
    return RatioCut(count, w, net.to_Bps(w), mask, exact, flows)


# ------------------------------------------------------------ pair min cuts
@dataclass(frozen=True)
class PairCut:
    """Result of :func:`min_pair_cuts`.

    Attributes
    ----------
    weight : int
        Exact integer capacity of the smallest cut found.
    capacity_Bps : float
        The same in bytes/s.
    mask : numpy.ndarray of bool
        Source side of that cut.
    pair : tuple of int
        The ``(source, sink)`` it separates.
    exact : bool
        Whether every requested pair was solved.
    flows : int
        Max-flow problems solved.
    """

    weight: int
    capacity_Bps: float
    mask: np.ndarray
    pair: tuple[int, int]
    exact: bool
    flows: int


def min_pair_cuts(net: CutNetwork, pairs: Iterable[tuple[int, int]], *,
                  max_flows: int | None = None) -> PairCut:
    """The smallest minimum s-t cut over ``pairs`` (exact integer max-flows).

    Pairs are solved in increasing order of ``min(out(s), in(t))`` (an upper
    bound on their cut), so a truncated run (``max_flows``) still tries the
    likeliest ones; it then returns ``exact=False``.  ``max_flows=0`` solves
    none and returns the smallest single-node cut (an upper bound on the
    minimum cut).
    """
    out_w, in_w = net.node_weights()
    pairs = sorted({(int(a), int(b)) for a, b in pairs if a != b},
                   key=lambda ab: (min(out_w[ab[0]], in_w[ab[1]]), ab))
    if not pairs:
        raise ValueError("no pair to cut")
    if max_flows == 0:
        # No max-flow at all (graphs too large to solve in bounded time): the smallest
        # single-node cut, {a} or all-but-{b}.  Its capacity is at least the minimum cut,
        # so a bound M / capacity stays a valid (weaker) lower bound.
        a, b = pairs[0]
        mask = np.zeros(net.n, dtype=bool)
        if out_w[a] <= in_w[b]:
            mask[a] = True
        else:
            mask[:] = True
            mask[b] = False
        w = net.cut_weight(mask)
        return PairCut(w, net.to_Bps(w), mask, (a, b), False, 0)
    limit = len(pairs) if max_flows is None else max(1, min(len(pairs), max_flows))
    todo = pairs[:limit]
    found: list[tuple[int, np.ndarray, tuple[int, int]]] = []
    if fits_int32(net.weight):
        for a, b in todo:
            value, side = _scipy_flow(net.n, net.u, net.v, np.array(net.weight, np.int64), a, b,
                                      True)
            found.append((value, side, (a, b)))
    else:
        # Rounded-down capacities bound each pair's cut from below (lo); the
        # exact capacity of the set found bounds it from above (hi).  Only pairs
        # whose lo could beat the best hi are solved exactly.
        low, k = scaled_caps(net.weight)
        bounds = []
        for a, b in todo:
            value, side = _scipy_flow(net.n, net.u, net.v, low, a, b, True)
            bounds.append((value << k, net.cut_weight(side), side, (a, b)))
        best_hi = min(hi for _, hi, _, _ in bounds)
        for lo, hi, side, ab in bounds:
            if lo == hi:
                found.append((hi, side, ab))
            elif lo < best_hi:
                value, side = _networkx_flow(net.n, net.u, net.v, net.weight, *ab)
                found.append((value, side, ab))
            else:
                found.append((hi, side, ab))
    value, side, pair = min(found, key=lambda x: x[0])
    return PairCut(value, net.to_Bps(value), side, pair, limit == len(pairs), limit)


# -------------------------------------------------------- max product cut
@dataclass(frozen=True)
class ProductCut:
    """Result of :func:`max_product_cut`: ``|S & P| * |P - S| / cap(delta+(S))``."""

    inside: int
    outside: int
    capacity_Bps: float
    mask: np.ndarray
    exact: bool
    method: str

    @property
    def ratio(self) -> float:
        """``inside * outside / capacity``, seconds per byte of one pair's block."""
        return self.inside * self.outside / self.capacity_Bps


def _enumerate_masks(n: int, lo: int, hi: int) -> np.ndarray:
    codes = np.arange(lo, hi, dtype=np.int64)
    return ((codes[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(bool)


def max_product_cut(net: CutNetwork, members: np.ndarray, *, enum_nodes: int = 18,
                    enum_members: int = 10, max_flows: int | None = None,
                    candidates: Iterable[np.ndarray] = ()) -> ProductCut:
    """Maximise ``|S & P| |P - S| / cap(delta+(S))`` (the all-to-all cut).

    Parameters
    ----------
    net : CutNetwork
    members : numpy.ndarray of bool
        The participants ``P``.
    enum_nodes : int
        Enumerate every node subset (``2^n``, vectorised) when the network has
        at most this many nodes: exact.
    enum_members : int
        Otherwise, when ``|P|`` is at most this (and ``2^|P|`` max-flows fit in
        ``max_flows``), enumerate every split of ``P`` and place the other
        nodes by a min cut: exact.
    max_flows : int, optional
        Budget of max-flow problems.
    candidates : iterable of bool arrays
        Sets tried when neither exact method applies (``exact=False``); each
        one's participant split gets its other nodes placed by a min cut.

    Returns
    -------
    ProductCut
        ``method`` is ``"enumerate-nodes"``, ``"enumerate-splits"`` or
        ``"candidates"``.

    Notes
    -----
    The product objective is not a ratio of a modular function, so the
    parametric trick of :func:`max_ratio_cut` does not apply (at a fixed
    ``|S & P|`` it is a balanced min cut, NP-hard); hence enumeration for
    small inputs and candidates otherwise.  Cost: ``O(2^n * arcs)`` numpy
    work, or ``2^|P|`` max-flows.
    """
    members = np.asarray(members, dtype=bool)
    n, n_p = net.n, int(members.sum())
    bw = net.bandwidth
    best: tuple[float, np.ndarray] | None = None

    def take(masks: np.ndarray) -> None:
        nonlocal best
        inside = masks[:, members].sum(axis=1)
        prod = inside * (n_p - inside)
        cap = (masks[:, net.u] & ~masks[:, net.v]) @ bw
        ok = prod > 0
        if not ok.any():
            return
        ratio = np.where(ok, prod / np.where(cap > 0, cap, 1.0), -1.0)
        k = int(np.argmax(ratio))
        if best is None or ratio[k] > best[0]:
            best = (float(ratio[k]), masks[k].copy())

    if n <= enum_nodes:
        block = 1 << 14
        for lo in range(1, 1 << n, block):
            take(_enumerate_masks(n, lo, min(lo + block, 1 << n)))
        method, exact = "enumerate-nodes", True
    else:
        extra = np.flatnonzero(~members)
        member_ids = np.flatnonzero(members)
        placing = extra.size > 0
        budget = max_flows if max_flows is not None else float("inf")
        if n_p <= enum_members and (not placing or (1 << n_p) - 2 <= budget):
            splits = _enumerate_masks(n_p, 1, (1 << n_p) - 1)
            masks = np.zeros((splits.shape[0], n), dtype=bool)
            masks[:, member_ids] = splits
            if placing:
                masks = np.array([_place_others(net, m, members) for m in masks])
            take(masks)
            method, exact = "enumerate-splits", True
        else:
            cands = [np.asarray(c, dtype=bool) for c in candidates]
            if cands:
                take(np.array(cands))
            if placing and cands:
                # Re-place the other nodes of the most promising splits by a min cut.
                arr = np.array(cands)
                inside = arr[:, members].sum(axis=1)
                cap = (arr[:, net.u] & ~arr[:, net.v]) @ bw
                score = inside * (n_p - inside) / np.where(cap > 0, cap, np.inf)
                room = int(min(len(cands), budget, 64))
                top = np.argsort(-score, kind="stable")[:room]
                if room:  # a budget of 0 max-flows (huge graphs) re-places nothing
                    take(np.array([_place_others(net, arr[i], members) for i in top]))
            method, exact = "candidates", False
    if best is None:
        raise ValueError("no set splits the participants")
    mask = best[1]
    inside = int(members[mask].sum())
    w = net.cut_weight(mask)
    return ProductCut(inside, n_p - inside, net.to_Bps(w), mask, exact, method)


def _place_others(net: CutNetwork, mask: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Keep the participant split of ``mask``; put the other nodes where the cut is smallest."""
    inside = mask & members
    outside = ~mask & members
    if not inside.any() or not outside.any():
        return mask
    n = net.n
    s, t = n, n + 1
    big = sum(net.weight) + 1
    ins, outs = np.flatnonzero(inside), np.flatnonzero(outside)
    u = np.concatenate([net.u, np.full(ins.size, s), outs])
    v = np.concatenate([net.v, ins, np.full(outs.size, t)])
    caps = list(net.weight) + [big] * (ins.size + outs.size)
    _, side = min_cut(n + 2, u, v, caps, s, t)
    return side[:n]
