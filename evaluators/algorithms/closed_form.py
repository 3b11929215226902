"""Closed-form times of the baseline algorithms on the topologies they match.

Every formula is derived for the ``congestion`` network model (docs/architecture.md
section 5), the model the baselines are timed with: a link carries one chunk
at a time, a chunk crosses a hop in ``T = a + m / B`` (latency ``a`` s, chunk
``m`` bytes, bandwidth ``B`` bytes/s per directed link) and is forwarded only
after it has fully arrived.  The schedule IR moves one chunk per transfer, so
latency is paid per chunk and per hop: with ``c`` chunks per NPU the alpha
term grows with ``c`` while pipelining shortens the fill.  The textbook
alpha-beta forms are the special cases noted below (e.g. ring all-reduce with
``c = 1``: ``2(n-1) a + 2 (n-1)/n * S/B``, Patarasuk & Yuan 2009).

Each schedule uses the algorithm's own chunk count: ``bidir-ring`` and
``dbt`` split every shard into ``2c`` chunks, ``multiring`` into ``k c``.
Sizes follow nccl-tests (docs/architecture.md section 4): ``S`` is the whole buffer for
allgather/reducescatter, one rank's buffer for allreduce/broadcast/reduce.
Below ``n`` is the number of NPUs and ``c`` the ``chunks`` per NPU.

Matching topologies and formulas (derivations in each function's docstring):

==============  ======================  =============================================
algorithm       topology                time
==============  ======================  =============================================
ring            ring / uniring          AG, RS: (n-1) c T;  AR: 2 (n-1) c T,
                                        m = S/(n c);  bcast, reduce: (n+c-2) T, m = S/c
bidir-ring      ring (n >= 3)           as ring with m halved;  n = 2: twice the chunks
direct          fc                      AG, RS, alltoall, scatter, gather: c T
                                        (m = S/(n c));  AR: 2 c T;  bcast, reduce: c T
                                        (m = S/c)
rhd             hypercube (n = 2^k)     AG, RS: (n c / 2) T;  AR: n c T
rhd             switch (n = 2^k)        AG, RS: (c (n-1) + 1) T;
                                        AR: (2 c (n-1) + 1 + max(0, 2-c)) T
dbt             fc                      bcast, reduce: (1 + floor(log2(n-1)) + c - 1) T,
                                        m = S/(2c) (n = 2: 2 c T);  AR: 2 n c T,
                                        m = S/(2 n c)
hierarchical    torus / hier, uniform   AG: L0 T;  RS: (L0 + tail) T;  AR: 2 L0 T
                                        (if 2(c-1) >= tail);  L0 = (d0-1) n c / d0
multiring       one link set per ring   AG, RS: (n-1) c T;  AR: 2 (n-1) c T,
                                        m = S/(n k c)
==============  ======================  =============================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_choice
from evaluators.registry import ClosedForm, closed_forms

__all__ = ["closed_form_time", "hierarchical_terms", "RING", "BIDIR_RING", "DIRECT", "RHD",
           "DBT", "HIERARCHICAL", "MULTIRING"]


def _hop(size_bytes: float, bandwidth: float, latency: float) -> float:
    return latency + size_bytes / bandwidth


def _ring(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1) -> float:
    """Unidirectional ring on a ring or uniring of ``n`` NPUs.

    All-gather: every link is busy from time 0 - an NPU first sends its own
    ``c`` chunks, and the chunk it forwards next arrived one slot earlier - so
    each link carries its ``(n-1) c`` chunks back to back:
    ``(n-1) c (a + S/(n c B))``.  Reduce-scatter is the same with reductions;
    all-reduce appends the all-gather, whose first chunk is ready before the
    link finishes the reduce-scatter: ``2 (n-1) c T``.  Broadcast / reduce: a
    pipelined chain of ``n-1`` hops with ``c`` chunks: ``(n-1 + c-1) T``,
    ``m = S/c``.  With ``c = 1`` these are the classic ring costs
    (Patarasuk & Yuan, JPDC 69(2), 2009; Thakur et al., IJHPCA 19(1), 2005).
    """
    c = chunks
    if kind in ("broadcast", "reduce"):
        return (n + c - 2) * _hop(S / c, B, a)
    steps = {"allgather": 1, "reducescatter": 1, "allreduce": 2}[kind]
    return steps * (n - 1) * c * _hop(S / (n * c), B, a)


def _bidir_ring(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1) -> float:
    """Bidirectional ring on a ring of ``n`` NPUs: two unidirectional rings on
    opposite directed links, each with ``c`` of the ``2c`` chunks per shard:
    the ring formulas with ``m`` halved.  For ``n = 2`` the ring is a single
    cable and both directions share its two links: every link carries twice
    the chunks (AG, RS, bcast, reduce ``2 c T``; AR ``4 c T``).  Halving the
    per-direction data is the usual bidirectional-ring gain (e.g. the
    bidirectional rings of NCCL and ASTRA-sim)."""
    c = chunks
    if kind in ("broadcast", "reduce"):
        T = _hop(S / (2 * c), B, a)
        return 2 * c * T if n == 2 else (n + c - 2) * T
    T = _hop(S / (2 * n * c), B, a)
    steps = {"allgather": 1, "reducescatter": 1, "allreduce": 2}[kind]
    return steps * (2 * c if n == 2 else (n - 1) * c) * T


def _direct(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1) -> float:
    """Direct algorithm on a fully-connected network: every (sender, receiver)
    pair has its own link, which carries the ``c`` chunks of one block back to
    back: ``c T``.  All-reduce: the owner of shard ``j`` has all ``n-1``
    contributions to chunk ``k`` at ``(k+1) T`` and its links are free at
    ``c T``, so the all-gather follows without a gap: ``2 c T``.  Chunk size
    ``S/(n c)`` except broadcast and reduce (``S/c``).  (Themis Table 1:
    "Direct" is the contention-free algorithm of a fully-connected dimension.)"""
    c = chunks
    if kind in ("broadcast", "reduce"):
        return c * _hop(S / c, B, a)
    T = _hop(S / (n * c), B, a)
    return (2 if kind == "allreduce" else 1) * c * T


def _rhd(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1,
         topology: str = "hypercube") -> float:
    """Recursive halving-doubling for ``n = 2^k`` NPUs, ``m = S/(n c)``.

    Hypercube (NPUs in id order, one link per dimension): the step with
    distance ``d`` uses only the dimension-``log2 d`` links, so the steps
    overlap; chunks are sent in the order the partner forwards them, and the
    first halving step (``n c / 2`` chunks on one link) bounds everything:
    reduce-scatter ``(n c / 2) T``; recursive doubling is its mirror (its last
    step's link is busy from time 0): all-gather ``(n c / 2) T``; all-reduce
    uses that link for both, ``n c T``.

    Switch (one up- and one down-link per NPU, 2 hops per exchange): every
    step goes through the NPU's uplink, which carries ``c (n-1)`` chunks back
    to back; the last one needs one more hop: ``(c (n-1) + 1) T``.  In an
    all-reduce the doubling starts when the first reduced chunk is back,
    ``max(0, 2-c)`` slots after the uplink finished the halving:
    ``(2 c (n-1) + 1 + max(0, 2-c)) T``.  (The algorithm is Thakur,
    Rabenseifner & Gropp 2005, Sec. 4; with one message per step instead of
    one per chunk their cost is ``log2(n) a + (n-1)/n S/B`` per phase.)
    """
    if n & (n - 1):
        raise invalid("rhd closed form n", n, "a power of two (non-powers fold: simulate them)")
    c = chunks
    T = _hop(S / (n * c), B, a)
    if topology == "hypercube":
        return (n * c if kind == "allreduce" else n * c / 2) * T
    if topology == "switch":
        if kind == "allreduce":
            return (2 * c * (n - 1) + 1 + max(0, 2 - c)) * T
        return (c * (n - 1) + 1) * T
    raise invalid("rhd closed form topology", topology, "'hypercube' or 'switch'")


def _dbt(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1) -> float:
    """Double binary tree on a fully-connected network (``2c`` chunks per shard).

    Broadcast / reduce: the root feeds both trees (``n-1`` other NPUs, height
    ``floor(log2(n-1))``) over different links, every tree edge is its own
    link and the two trees never use the same directed link, so ``c`` chunks
    of ``S/(2c)`` pipeline over ``H = 1 + floor(log2(n-1))`` hops:
    ``(H + c - 1) T``; for ``n = 2`` both trees are the single other NPU and
    one link carries ``2c`` chunks.

    All-reduce: both trees span all ``n`` NPUs; the mirrored/shifted trees
    always share a cable used in opposite directions (a tree-1 child is the
    tree-2 parent), so one directed link carries the ``n c`` reductions of one
    tree and the ``n c`` broadcasts of the other; it is the bottleneck and
    stays busy from time 0: ``2 n c T`` with ``m = S/(2 n c)``, i.e.
    ``2 n c a + S/B`` (checked by simulation for n <= 47).  Trees: Sanders,
    Speck & Traeff, Parallel Computing 35(12), 2009.
    """
    c = chunks
    if kind == "allreduce":
        return 2 * n * c * _hop(S / (2 * n * c), B, a)
    T = _hop(S / (2 * c), B, a)
    if n == 2:
        return 2 * c * T
    height = 1 + (n - 1).bit_length() - 1
    return (height + c - 1) * T


_TAIL: dict[str, Callable[[int], int]] = {
    "ring": lambda d: d - 1, "uniring": lambda d: d - 1, "fc": lambda d: 1,
    "switch": lambda d: 2 * int(math.log2(d)),
}


def hierarchical_terms(dims: Sequence[tuple[str, int]], chunks: int = 1) -> tuple[int, int]:
    """``(L0, tail)`` of the hierarchical closed form, in hop slots ``T``.

    ``L0 = (d0 - 1) n c / d0`` chunks cross each dimension-0 link per
    reduce-scatter (and per all-gather); ``tail`` is the number of hops the
    last reduced chunk still makes after leaving dimension 0: ``d - 1`` for a
    ring, 1 for a fully-connected dimension, ``2 log2 d`` for a switch
    (halving-doubling, 2 hops per exchange; sizes 2 and 4 only - from 8 on
    the halving stage no longer keeps up with dimension 0 and is exposed).
    """
    dims = [(str(k), int(d)) for k, d in dims if int(d) > 1]
    if not dims:
        raise invalid("hierarchical closed form dims", dims, "at least one dimension of size > 1")
    k0, d0 = dims[0]
    all_rings = all(k in ("ring", "uniring") for k, _ in dims)
    if k0 not in ("ring", "uniring") or (d0 < 3 and not all_rings):
        raise invalid("hierarchical closed form first dimension", dims[0],
                      "a ring or uniring dimension of size >= 3 (or a torus: all rings), "
                      "so that dimension 0 is the bottleneck")
    for k, d in dims[1:]:
        if k not in _TAIL or (k == "switch" and d not in (2, 4)):
            raise invalid("hierarchical closed form dimension", (k, d),
                          "ring, uniring, fc or a switch of size 2 or 4 (larger switches "
                          "leave the halving stage exposed: simulate them)")
    n = int(np.prod([d for _, d in dims]))
    return (d0 - 1) * n * chunks // d0, sum(_TAIL[k](d) for k, d in dims[1:])


def _hierarchical(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1,
                  dims: Sequence[tuple[str, int]] = ()) -> float:
    """Themis' static hierarchical baseline on a multi-dimensional network
    whose links all have bandwidth ``B`` and latency ``a`` and whose
    dimension 0 is a ring (``dims`` = ``[(kind, size), ...]``, fastest first).

    Dimension 0 carries the most data: each of its links carries
    ``L0 = (d0-1) n c / d0`` chunks of ``S/(n c)`` per reduce-scatter or
    all-gather, and the later stages deliver (all-gather) or absorb
    (reduce-scatter) chunks at least as fast as it does, so it never idles:
    all-gather ``L0 T`` (it starts at time 0 with the NPU's own shard);
    reduce-scatter ``(L0 + tail) T`` (the chunk dimension 0 reduces last still
    crosses the other stages, see :func:`hierarchical_terms`); all-reduce
    ``2 L0 T`` when the pieces are enough to hide that tail,
    ``2 (c-1) >= tail`` (a sufficient condition found by simulating tori and
    hier networks; with fewer pieces a gap of up to ``tail`` slots opens and
    there is no closed form).  Valid when dimension 0 is a ring of size >= 3
    (or every dimension is a ring, as in a torus or hypercube) and the other
    dimensions are rings, fully connected, or switches of size 2 or 4.
    (Themis, ISCA'22, Sec. 3: in the baseline the stage with the most load,
    here dimension 0, sets the pace of the pipeline.)
    """
    L0, tail = hierarchical_terms(dims, chunks)
    if int(np.prod([d for _, d in dims])) != n:
        raise invalid("hierarchical closed form dims", list(dims), f"sizes whose product is n={n}")
    T = _hop(S / (n * chunks), B, a)
    if kind == "allgather":
        return L0 * T
    if kind == "reducescatter":
        return (L0 + tail) * T
    if 2 * (chunks - 1) < tail:
        raise invalid("hierarchical all-reduce closed form chunks", chunks,
                      f"at least {1 + (tail + 1) // 2} pieces for dims {list(dims)} "
                      "(the reduce-scatter tail must be hidden); simulate otherwise")
    return 2 * L0 * T


def _multiring(kind: str, n: int, S: float, B: float, a: float, *, chunks: int = 1,
               rings: int = 1) -> float:
    """``k`` rings on a topology that gives every ring its own links (a
    TopoOpt permutation topology with one link ``i -> i+p`` per generator):
    ``k`` independent unidirectional rings with chunks of ``S/(n k c)``:
    AG, RS ``(n-1) c T``; AR ``2 (n-1) c T`` (TopoOpt, NSDI'23, Sec. 4.3: the
    rings share the all-reduce load)."""
    return _ring(kind, n, S / rings, B, a, chunks=chunks)


# ------------------------------------------------------------------ registration
# Each algorithm registers its closed form (``register_algorithm(..., closed_form=...)``);
# ``cases`` are the small uniform topologies the contract test times it on.
def _multidim():
    from topologies.families import multidim

    return multidim


def _spec(spec: str, bw: float, lat: float):
    from topologies.registry import from_spec

    return from_spec(f"{spec},bw={bw!r}B/s,lat={lat!r}s")


def _ring_cases(bw: float, lat: float) -> list:
    m = _multidim()
    return [(build(n, bandwidth=bw, latency=lat), {}, {})
            for build in (m.ring, m.uniring) for n in (2, 3, 5)]


def _bidir_cases(bw: float, lat: float) -> list:
    return [(_multidim().ring(n, bandwidth=bw, latency=lat), {}, {}) for n in (2, 3, 4)]


def _fc_cases(sizes):
    def cases(bw: float, lat: float) -> list:
        return [(_multidim().fully_connected(n, bandwidth=bw, latency=lat), {}, {})
                for n in sizes]
    return cases


def _rhd_cases(bw: float, lat: float) -> list:
    m = _multidim()
    return [(m.hypercube(k, bandwidth=bw, latency=lat), {"topology": "hypercube"}, {})
            for k in (1, 2, 3)] + \
        [(m.switch(2 ** k, bandwidth=bw, latency=lat), {"topology": "switch"}, {})
         for k in (1, 2, 3)]


def _hierarchical_cases(bw: float, lat: float) -> list:
    out = []
    for spec in ("torus:3x3", "torus:2x4", "hier:ring4_fc2_switch4", "hier:uniring3_fc4"):
        t = _spec(spec, bw, lat)
        out.append((t, {"dims": [(d.kind, d.size) for d in t.dims]}, {}))
    return out


def _multiring_cases(bw: float, lat: float) -> list:
    return [(_spec("perms:7,p=1:2:3", bw, lat), {"rings": 3}, {}),
            (_spec("perms:12,p=1:5", bw, lat), {"rings": 2}, {"generators": [5, 1]})]


_SHARDED = ("allgather", "reducescatter", "allreduce")
RING = ClosedForm(_ring, _SHARDED + ("broadcast", "reduce"), (), _ring_cases)
BIDIR_RING = ClosedForm(_bidir_ring, _SHARDED + ("broadcast", "reduce"), (), _bidir_cases)
DIRECT = ClosedForm(_direct, _SHARDED + ("alltoall", "broadcast", "reduce", "scatter",
                                         "gather"), (), _fc_cases((2, 3, 6)))
RHD = ClosedForm(_rhd, _SHARDED, ("topology",), _rhd_cases)
DBT = ClosedForm(_dbt, ("allreduce", "broadcast", "reduce"), (), _fc_cases((2, 3, 6, 9)))
HIERARCHICAL = ClosedForm(_hierarchical, _SHARDED, ("dims",), _hierarchical_cases)
MULTIRING = ClosedForm(_multiring, _SHARDED, ("rings",), _multiring_cases)


def closed_form_time(name: str, kind: str, n: int, size_bytes: float, bandwidth_Bps: float,
                     latency_s: float, **params: Any) -> float:
    """Closed-form completion time of a baseline on its matching topology, seconds.

    Parameters
    ----------
    name : str
        Algorithm (``ring``, ``bidir-ring``, ``direct``, ``rhd``, ``dbt``,
        ``hierarchical``, ``multiring``).
    kind : str
        Collective kind the algorithm supports on that topology.
    n : int
        Number of NPUs (all of them participate, in id order).
    size_bytes : float
        Collective size, bytes (nccl-tests convention).
    bandwidth_Bps : float
        Bandwidth of every directed link, bytes/s.
    latency_s : float
        Latency of every link, seconds.
    **params
        ``chunks`` (chunks per NPU the user asked for, default 1) for all;
        ``topology`` (``"hypercube"`` or ``"switch"``) for rhd; ``dims``
        (``[(kind, size), ...]``) for hierarchical; ``rings`` (``k``) for
        multiring.

    Returns
    -------
    float
        Seconds, as the ``congestion`` model times the algorithm's schedule
        (module docstring for the formulas and the topologies they hold on).

    Raises
    ------
    InvalidSpecError
        Unknown algorithm, kind or parameter, or a case without a closed form.

    Examples
    --------
    >>> closed_form_time("ring", "allreduce", 4, 4e9, 1e9, 0.0)   # 2*3 steps of 1 GB
    6.0
    >>> closed_form_time("ring", "allreduce", 8, 8e6, 1e9, 1e-6, chunks=2)
    0.014028
    """
    forms = closed_forms()
    entry = forms.get(name)
    if entry is None:
        raise invalid("closed-form algorithm", name, f"one of {', '.join(forms)}")
    fn, kinds, extra = entry.fn, entry.kinds, entry.params
    check_choice(f"collective for the {name} closed form", kind, kinds)
    allowed = ("chunks",) + extra
    for key in params:
        if key not in allowed:
            raise invalid(f"parameter of the {name} closed form", key,
                          f"one of: {', '.join(allowed)}")
    if isinstance(n, bool) or int(n) != n or n < 2:
        raise invalid("closed form n", n, "an integer >= 2")
    chunks = params.get("chunks", 1)
    if isinstance(chunks, bool) or int(chunks) != chunks or chunks < 1:
        raise invalid("closed form chunks", chunks, "an integer >= 1")
    params["chunks"] = int(chunks)
    if "rings" in params and (isinstance(params["rings"], bool) or int(params["rings"]) < 1):
        raise invalid("closed form rings", params["rings"], "an integer >= 1")
    for field_, value, rule in (("size", size_bytes, lambda v: v > 0),
                                ("bandwidth", bandwidth_Bps, lambda v: v > 0),
                                ("latency", latency_s, lambda v: v >= 0)):
        if not np.isfinite(value) or not rule(value):
            raise invalid(f"closed form {field_}", value,
                          "a finite number >= 0" if field_ == "latency" else "a finite number > 0")
    if name == "hierarchical" and "dims" not in params:
        raise invalid("hierarchical closed form dims", None, "[(kind, size), ...] per dimension")
    return float(fn(kind, int(n), float(size_bytes), float(bandwidth_Bps), float(latency_s),
                    **params))
