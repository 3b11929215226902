"""Independent validation of collective schedules (docs/architecture.md sections 3 and 5).

:func:`validate_schedule` checks a :class:`~evaluators.schedule.Schedule`
against a topology and a collective without sharing any code with the
synthesizers, in the spirit of msccl-tools' self-checking algorithms (replay
the sends, check the postcondition).  It checks, in this order:

1. **Structure.**  Every transfer goes between two different NPUs of the
   topology (participants or relay NPUs; switches never store), its path is a
   non-empty chain of existing links from ``src`` to ``dst`` (intermediate
   nodes, switches or NPUs, only forward), ``0 <= start < end`` (finite), the
   chunk id exists and the op is :data:`COPY` or :data:`REDUCE` (reduce only
   for reducing collectives).  If any of this fails the data and timing checks
   are skipped: they would index out of range.
2. **Data.**  ``state[chunk][node]`` is a contribution bitset over participant
   positions, initialised from ``collective.precondition()``.  Events are
   replayed in time order; at equal times arrivals (``end``) come before
   departures (``start``), so a chunk may be forwarded the instant it has
   fully arrived (TACOS, docs/architecture.md section 5: "a chunk can be forwarded only
   after it has fully arrived"; TACOS Fig. 12(c): a sender must hold the chunk
   it sends).  A departure requires the sender to hold the chunk and carries
   the sender's bitset at that moment.  An arrival with :data:`COPY` replaces
   the receiver's bitset by the carried one (an error if that would discard
   contributions the receiver holds and the carried data lacks); with
   :data:`REDUCE` it adds the carried bitset (an error if the two overlap:
   a contribution would be counted twice).
3. **Postcondition.**  Every required holder of every chunk ends with the
   full bitset (for non-reducing kinds: holds the chunk at all).
4. **Link occupancy**, by ``schedule.link_model``:

   * ``"exclusive"`` (TACOS link model): a transfer lasts at least
     ``sum(path latency) + chunk_bytes / min(path bandwidth)``.  With
     ``schedule.hop_start`` hop ``h`` occupies its link during
     ``[hop_start_h, hop_start_h + latency_h + chunk_bytes / bandwidth_h]``,
     hops follow each other (store-and-forward: hop ``h+1`` starts after hop
     ``h`` ends, hop 0 not before ``start``) and the last hop ends at ``end``;
     without it every link of the path is occupied during ``[start, end]``.
     No two occupations of a link may overlap (touching is fine).
   * ``"shared"`` (fluid model, e.g. max-min fair flows): a transfer also
     lasts at least ``sum(path latency) + chunk_bytes / min(path bandwidth)``,
     and every link must be able to carry the bytes of the transfers that use
     it within their ``[start, end]`` intervals at any rates summing to at
     most its bandwidth (latency is propagation and uses no capacity).  A
     constant rate ``chunk_bytes / (end - start)`` per transfer is tried first
     (a sweep over sorted interval endpoints, vectorised); links it overloads
     get the exact test, earliest-deadline-first on that link.  Checking only
     constant rates would reject valid fluid schedules whose rates change
     over time (a flow alone at full rate, then sharing with a newcomer), so
     the test is per-link feasibility: necessary for any fluid schedule,
     exact for a link in isolation.  ``hop_start`` is ignored in this model.
   * ``"none"``: no link model (e.g. the congestion-unaware analytical
     network model); only structure, data and postcondition are checked.

Tolerances: times are compared with an absolute slack ``tol * T`` where ``T``
is the largest time in the schedule (float sums in synthesizers drift), and
durations and loads with a relative ``tol``.

Cost: the structure and timing checks are vectorised numpy (sorts, O(H log H)
for H hops; the EDF fallback is a Python heap loop over the hops of
overloaded links only); the data replay is one Python pass over the 2n
sorted events with Python ints as bitsets, about a microsecond per event
(10^6 transfers validate in a few seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from evaluators.collectives import REDUCING_KINDS, Collective
from evaluators.schedule import COPY, REDUCE, Schedule

__all__ = ["ValidationReport", "validate_schedule", "check_schedule", "event_order",
           "LINK_MODELS"]

#: Link models a schedule may declare in ``metadata["link_model"]``.
LINK_MODELS = ("exclusive", "shared", "none")


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of :func:`validate_schedule`.

    Attributes
    ----------
    valid : bool
        True when no rule is broken.
    errors : list of str
        The first ``max_errors`` messages, each naming the transfer index,
        chunk, nodes and times (or the link, or the NPU for postcondition
        failures).
    n_errors : int
        Total number of violations found (may exceed ``len(errors)``).
    time_s : float
        The schedule's completion time, seconds (``max(end)``).
    n_transfers : int
        Number of transfers checked.
    n_hops : int
        Total number of link hops over all transfers.
    link_model : str
        The link model the occupancy was checked under.
    """

    valid: bool
    errors: list[str] = field(default_factory=list)
    n_errors: int = 0
    time_s: float = 0.0
    n_transfers: int = 0
    n_hops: int = 0
    link_model: str = "exclusive"

    def raise_if_invalid(self) -> None:
        """Raise :class:`InvalidSpecError` with the first error, if any."""
        if not self.valid:
            more = f" (and {self.n_errors - 1} more)" if self.n_errors > 1 else ""
            raise InvalidSpecError(f"invalid schedule: {self.errors[0]}{more}")


class _Errors:
    """Counts every violation, keeps the text of the first ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.messages: list[str] = []
        self.count = 0

    @property
    def room(self) -> bool:
        return len(self.messages) < self.limit

    def add(self, message: str) -> None:
        self.count += 1
        if self.room:
            self.messages.append(message)

    def add_mask(self, mask: np.ndarray, fmt: Callable[[int], str]) -> None:
        """Count the True entries of ``mask``; format the first ones."""
        idx = np.flatnonzero(mask)
        self.count += int(idx.size)
        for i in idx[: max(0, self.limit - len(self.messages))].tolist():
            self.messages.append(fmt(i))


def _t(x: float) -> str:
    return f"{float(x):.9g}s"


def _npu_list(bits: int, npus: tuple[int, ...], limit: int = 8) -> str:
    ids = [npus[p] for p in range(len(npus)) if bits >> p & 1]
    text = ", ".join(str(x) for x in ids[:limit])
    return f"[{text}{', ...' if len(ids) > limit else ''}]"


def _slack(schedule: Schedule, tol: float) -> float:
    if not len(schedule):
        return 0.0
    scale = max(float(np.abs(schedule.start).max()), float(np.abs(schedule.end).max()))
    return tol * scale if np.isfinite(scale) else 0.0


def event_order(schedule: Schedule, *, tol: float = 1e-9) -> np.ndarray:
    """The order in which :func:`validate_schedule` replays a schedule's events.

    Parameters
    ----------
    schedule : Schedule
        Transfers with finite times and ``end > start``.
    tol : float, optional
        Relative time tolerance: an arrival up to ``tol * max time`` seconds
        after a departure still counts as before it.

    Returns
    -------
    numpy.ndarray of int64, shape (2n,)
        Event ids in replay order: ``e < n`` is the arrival (end) of transfer
        ``e``, ``e >= n`` the departure (start) of transfer ``e - n``.  Sorted
        by time; at equal times arrivals first, then by transfer index; a
        transfer's arrival always follows its own departure.
    """
    n = len(schedule)
    start, end = schedule.start, schedule.end
    # Arrivals are moved earlier by the slack so that float drift between a
    # computed arrival and the next departure does not flip their order, but
    # never before (or at) their own departure.
    arrive = np.maximum(end - _slack(schedule, tol), np.nextafter(start, np.inf))
    times = np.concatenate([arrive, start])
    kind = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])
    return np.lexsort((kind, times)).astype(np.int64)


def validate_schedule(schedule: Schedule, topology, collective: Collective | None = None, *,
                      tol: float = 1e-9, max_errors: int = 20) -> ValidationReport:
    """Check a schedule against a topology and a collective.

    Parameters
    ----------
    schedule : Schedule
        The schedule to check (from any synthesizer, a file or by hand).
    topology : topologies.Topology
        The network the schedule runs on; link ids refer to its links.
    collective : Collective, optional
        Defaults to ``schedule.collective``; if given it must equal it.
    tol : float, optional
        Relative tolerance on times, durations and link loads (default 1e-9).
    max_errors : int, optional
        How many error messages to keep (all violations are counted).

    Returns
    -------
    ValidationReport
        ``valid`` plus the first errors; see the module docstring for the rules.

    Raises
    ------
    InvalidSpecError
        If ``collective`` differs from the schedule's, or ``tol`` or
        ``max_errors`` is out of range.  Broken schedules do not raise: they
        give ``valid=False`` (use :func:`check_schedule` to raise).

    Notes
    -----
    Complexity O(H log H) vectorised for the structure and timing checks
    (H hops) plus one Python pass over 2n events for the data replay.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> from evaluators.collectives import Collective
    >>> from evaluators.schedule import Schedule, Transfer
    >>> t = from_spec("ring:2")                       # links 0: 0->1, 1: 1->0
    >>> c = Collective.on("allgather", 2, 2e3)        # 1 kB chunks
    >>> d = 1e-6 + 1e3 / 25e9                          # latency + bytes / bandwidth
    >>> s = Schedule.from_transfers(c, [Transfer(0, 0, 1, (0,), 0.0, d),
    ...                                 Transfer(1, 1, 0, (1,), 0.0, d)])
    >>> validate_schedule(s, t).valid
    True
    """
    if collective is not None and collective != schedule.collective:
        raise invalid("collective", collective,
                      f"the schedule's own collective {schedule.collective!r} (or None)")
    coll = schedule.collective
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < 1:
        raise invalid("tol", tol, "a relative tolerance in [0, 1)")
    if isinstance(max_errors, bool) or not isinstance(max_errors, (int, np.integer)) \
            or max_errors < 1:
        raise invalid("max_errors", max_errors, "an integer >= 1")
    tol = float(tol)
    errs = _Errors(int(max_errors))
    model = schedule.link_model
    n = len(schedule)

    def report() -> ValidationReport:
        return ValidationReport(errs.count == 0, list(errs.messages), errs.count,
                                schedule.time_s, n, int(schedule.path_links.size), model)

    if model not in LINK_MODELS:
        errs.add(f"schedule metadata link_model {model!r} is unknown: expected one of "
                 f"{', '.join(LINK_MODELS)}")
    outside = [p for p in coll.npus if p >= topology.npus]
    if outside:
        errs.add(f"collective participant {outside[0]} is not an NPU of the topology "
                 f"(NPU ids 0..{topology.npus - 1})")
    if errs.count or not _check_structure(schedule, topology, errs):
        return report()
    slack = _slack(schedule, tol)
    state = _replay(schedule, topology, tol, errs)
    _check_postcondition(coll, state, topology.n_nodes, errs)
    if model == "exclusive":
        _check_exclusive(schedule, topology, tol, slack, errs)
    elif model == "shared":
        _check_shared(schedule, topology, tol, slack, errs)
    return report()


def check_schedule(schedule: Schedule, topology, collective: Collective | None = None, *,
                   tol: float = 1e-9) -> ValidationReport:
    """Like :func:`validate_schedule` but raise on the first violation.

    Returns
    -------
    ValidationReport
        The (valid) report.

    Raises
    ------
    InvalidSpecError
        ``"invalid schedule: <first error> (and k more)"``.
    """
    rep = validate_schedule(schedule, topology, collective, tol=tol, max_errors=1)
    rep.raise_if_invalid()
    return rep


# ------------------------------------------------------------------ structure
def _describer(schedule: Schedule) -> Callable[[int], str]:
    def desc(i: int) -> str:
        return (f"transfer {i} (chunk {int(schedule.chunk[i])}, "
                f"{int(schedule.src[i])}->{int(schedule.dst[i])}, "
                f"[{_t(schedule.start[i])}, {_t(schedule.end[i])}])")
    return desc


def _check_structure(schedule: Schedule, topology, errs: _Errors) -> bool:
    """Vectorised structural checks; True when the schedule is well formed."""
    coll = schedule.collective
    desc = _describer(schedule)
    chunk, src, dst, op = schedule.chunk, schedule.src, schedule.dst, schedule.op
    start, end = schedule.start, schedule.end
    before = errs.count
    nc, npus, nl = coll.n_chunks, topology.npus, topology.n_links

    errs.add_mask((chunk < 0) | (chunk >= nc), lambda i: (
        f"{desc(i)}: chunk {int(chunk[i])} does not exist: the collective has chunks "
        f"0..{nc - 1}"))
    errs.add_mask((op != COPY) & (op != REDUCE), lambda i: (
        f"{desc(i)}: op {int(op[i])} is unknown: expected {COPY} (copy) or {REDUCE} (reduce)"))
    if coll.kind not in REDUCING_KINDS:
        errs.add_mask(op == REDUCE, lambda i: (
            f"{desc(i)}: reduce op in a {coll.kind}, which reduces nothing: use copy"))
    for name, arr in (("src", src), ("dst", dst)):
        errs.add_mask((arr < 0) | (arr >= npus), lambda i, name=name, arr=arr: (
            f"{desc(i)}: {name} {int(arr[i])} is not an NPU (NPU ids 0..{npus - 1}; "
            f"switches only forward)"))
    errs.add_mask(src == dst, lambda i: f"{desc(i)}: src and dst are the same NPU")
    finite = np.isfinite(start) & np.isfinite(end)
    errs.add_mask(~finite, lambda i: f"{desc(i)}: times must be finite")
    errs.add_mask(finite & (start < 0), lambda i: f"{desc(i)}: starts before time 0")
    errs.add_mask(finite & (end <= start), lambda i: (
        f"{desc(i)}: end {_t(end[i])} is not after start {_t(start[i])}"))

    ptr, links = schedule.path_ptr, schedule.path_links
    lengths = np.diff(ptr)
    errs.add_mask(lengths == 0, lambda i: f"{desc(i)}: empty path (a transfer needs links)")
    hop_t = np.repeat(np.arange(len(schedule)), lengths)
    ok_id = (links >= 0) & (links < nl)
    bad_t = np.zeros(len(schedule), bool)
    bad_t[hop_t[~ok_id]] = True
    first_bad = {}
    for h in np.flatnonzero(~ok_id)[: errs.limit].tolist():
        first_bad.setdefault(int(hop_t[h]), int(links[h]))
    errs.add_mask(bad_t, lambda i: (
        f"{desc(i)}: link {first_bad.get(i, '?')} in its path does not exist "
        f"(link ids 0..{nl - 1})"))
    if nl and links.size:
        lk = np.where(ok_id, links, 0)
        lsrc, ldst = topology.src[lk], topology.dst[lk]
        nonempty = lengths > 0
        first = ptr[:-1][nonempty]
        last = ptr[1:][nonempty] - 1
        t_ne = np.flatnonzero(nonempty)
        m = ok_id[first] & (lsrc[first] != src[t_ne])
        errs.add_mask(m, lambda k: (
            f"{desc(int(t_ne[k]))}: path starts with link {int(links[first[k]])} "
            f"({int(lsrc[first[k]])}->{int(ldst[first[k]])}), which does not leave its src "
            f"{int(src[t_ne[k]])}"))
        m = ok_id[last] & (ldst[last] != dst[t_ne])
        errs.add_mask(m, lambda k: (
            f"{desc(int(t_ne[k]))}: path ends with link {int(links[last[k]])} "
            f"({int(lsrc[last[k]])}->{int(ldst[last[k]])}), which does not enter its dst "
            f"{int(dst[t_ne[k]])}"))
        same = hop_t[1:] == hop_t[:-1]
        gap = same & ok_id[1:] & ok_id[:-1] & (ldst[:-1] != lsrc[1:])
        errs.add_mask(gap, lambda h: (
            f"{desc(int(hop_t[h]))}: path is not contiguous: link {int(links[h])} "
            f"({int(lsrc[h])}->{int(ldst[h])}) is followed by link {int(links[h + 1])} "
            f"({int(lsrc[h + 1])}->{int(ldst[h + 1])})"))
    if schedule.hop_start is not None:
        hs = schedule.hop_start
        errs.add_mask(~np.isfinite(hs), lambda h: (
            f"{desc(int(hop_t[h]))}: hop_start of hop {h - int(ptr[hop_t[h]])} is not finite"))
    return errs.count == before


# ----------------------------------------------------------------------- data
def _replay(schedule: Schedule, topology, tol: float, errs: _Errors) -> dict[int, int]:
    """Replay departures and arrivals; return ``{chunk * n_nodes + node: bitset}``."""
    coll = schedule.collective
    n = len(schedule)
    stride = topology.n_nodes
    state: dict[int, int] = {}
    for c, holders in coll.precondition().items():
        base = c * stride
        for node, bits in holders.items():
            state[base + node] = bits
    chunk_l = schedule.chunk.tolist()
    src_l = schedule.src.tolist()
    dst_l = schedule.dst.tolist()
    reduce_l = (schedule.op == REDUCE).tolist()
    carried = [0] * n
    # (chunk, node) -> a transfer that should have delivered it but sent nothing,
    # so that the errors it causes downstream point back to it.
    void: dict[int, int] = {}
    desc = _describer(schedule)
    get = state.get
    for e in event_order(schedule, tol=tol).tolist():
        if e >= n:  # departure: the sender must hold the chunk now
            i = e - n
            key = chunk_l[i] * stride + src_l[i]
            bits = get(key, 0)
            if bits:
                carried[i] = bits
            else:
                errs.count += 1
                if errs.room:
                    errs.messages.append(
                        f"{desc(i)}: NPU {src_l[i]} sends chunk {chunk_l[i]} but does not hold "
                        f"it: transfer {void[key]}, which should have delivered it, sent nothing"
                        if key in void else _not_held(schedule, i, desc))
            continue
        key = chunk_l[e] * stride + dst_l[e]
        car = carried[e]
        if not car:  # the send itself was already reported
            void.setdefault(key, e)
            continue
        cur = get(key, 0)
        if reduce_l[e]:
            if cur & car:
                errs.add(f"{desc(e)}: reduce double-counts the contributions of NPUs "
                         f"{_npu_list(cur & car, coll.npus)} already held by NPU {dst_l[e]}")
            state[key] = cur | car
        else:
            if cur & ~car:
                errs.add(f"{desc(e)}: copy overwrites a partial sum at NPU {dst_l[e]} that "
                         f"holds contributions of NPUs {_npu_list(cur & ~car, coll.npus)} the "
                         f"copied data lacks")
            state[key] = car
    return state


def _not_held(schedule: Schedule, i: int, desc: Callable[[int], str]) -> str:
    c, u, s = int(schedule.chunk[i]), int(schedule.src[i]), float(schedule.start[i])
    msg = f"{desc(i)}: NPU {u} sends chunk {c} at {_t(s)} but does not hold it then"
    arrivals = np.flatnonzero((schedule.chunk == c) & (schedule.dst == u))
    if arrivals.size:
        k = int(arrivals[np.argmin(schedule.end[arrivals])])
        msg += f" (it first arrives there at {_t(schedule.end[k])} by transfer {k})"
    else:
        msg += " (no transfer ever delivers it there)"
    return msg


def _check_postcondition(coll: Collective, state: dict[int, int], stride: int,
                         errs: _Errors) -> None:
    full = coll.full_mask
    reducing = coll.kind in REDUCING_KINDS
    for c, holders in coll.postcondition().items():
        base = c * stride
        for p in sorted(holders):
            bits = state.get(base + p, 0)
            if bits == full:
                continue
            if not bits:
                errs.add(f"postcondition: chunk {c} is missing at NPU {p} at the end")
            elif reducing:
                errs.add(f"postcondition: chunk {c} at NPU {p} is not fully reduced at the end: "
                         f"missing the contributions of NPUs {_npu_list(full & ~bits, coll.npus)}")
            else:  # cannot happen for sane preconditions; kept for completeness
                errs.add(f"postcondition: chunk {c} at NPU {p} is incomplete at the end")


# --------------------------------------------------------------------- timing
def _path_sums(schedule: Schedule, topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-hop transfer index, per-transfer path latency sum and min bandwidth."""
    lengths = np.diff(schedule.path_ptr)
    hop_t = np.repeat(np.arange(len(schedule)), lengths)
    links = schedule.path_links
    heads = schedule.path_ptr[:-1]
    lat_sum = np.add.reduceat(topology.latency[links], heads)
    min_bw = np.minimum.reduceat(topology.bandwidth[links], heads)
    return hop_t, lat_sum, min_bw


def _link_name(topology, link: int) -> str:
    return f"link {link} ({int(topology.src[link])}->{int(topology.dst[link])})"


def _check_duration(schedule: Schedule, lat_sum: np.ndarray, min_bw: np.ndarray, tol: float,
                    slack: float, errs: _Errors) -> None:
    """Every transfer lasts at least its path latency plus bytes over the bottleneck."""
    desc = _describer(schedule)
    nbytes = schedule.chunk_bytes
    need = lat_sum + nbytes / min_bw
    dur = schedule.end - schedule.start
    errs.add_mask(dur < need * (1 - tol) - slack, lambda i: (
        f"{desc(i)}: lasts {_t(dur[i])} but needs at least {_t(need[i])} (path latency "
        f"{_t(lat_sum[i])} + {nbytes:.9g} B / {min_bw[i]:.9g} B/s)"))


def _check_exclusive(schedule: Schedule, topology, tol: float, slack: float,
                     errs: _Errors) -> None:
    n = len(schedule)
    if not n:
        return
    desc = _describer(schedule)
    nbytes = schedule.chunk_bytes
    start, end, links, ptr = schedule.start, schedule.end, schedule.path_links, schedule.path_ptr
    hop_t, lat_sum, min_bw = _path_sums(schedule, topology)
    _check_duration(schedule, lat_sum, min_bw, tol, slack, errs)
    if schedule.hop_start is None:
        beg, fin = start[hop_t], end[hop_t]
    else:
        hs = schedule.hop_start
        hop_dur = topology.latency[links] + nbytes / topology.bandwidth[links]
        fin_h = hs + hop_dur
        heads, tails = ptr[:-1], ptr[1:] - 1
        errs.add_mask(hs[heads] < start - slack, lambda i: (
            f"{desc(i)}: its first hop starts at {_t(hs[heads[i]])}, before the transfer "
            f"starts"))
        same = hop_t[1:] == hop_t[:-1]
        errs.add_mask(same & (hs[1:] < fin_h[:-1] - slack), lambda h: (
            f"{desc(int(hop_t[h]))}: hop {h + 1 - int(ptr[hop_t[h]])} on "
            f"{_link_name(topology, int(links[h + 1]))} starts at {_t(hs[h + 1])} before hop "
            f"{h - int(ptr[hop_t[h]])} ends at {_t(fin_h[h])} (store-and-forward)"))
        off = np.abs(fin_h[tails] - end) > slack + tol * np.abs(end)
        errs.add_mask(off, lambda i: (
            f"{desc(i)}: its last hop ends at {_t(fin_h[tails[i]])}, not at its end "
            f"(hop start + latency + bytes / bandwidth)"))
        beg, fin = hs, fin_h
    order = np.lexsort((beg, links))
    lk, b, f, tr = links[order], beg[order], fin[order], hop_t[order]
    clash = (lk[1:] == lk[:-1]) & (b[1:] < f[:-1] - slack)

    def fmt(k: int) -> str:
        i, j = int(tr[k]), int(tr[k + 1])
        return (f"{_link_name(topology, int(lk[k]))} is double-booked: transfer {i} (chunk "
                f"{int(schedule.chunk[i])}, {int(schedule.src[i])}->{int(schedule.dst[i])}) "
                f"occupies it during [{_t(b[k])}, {_t(f[k])}] and transfer {j} (chunk "
                f"{int(schedule.chunk[j])}, {int(schedule.src[j])}->{int(schedule.dst[j])}) "
                f"during [{_t(b[k + 1])}, {_t(f[k + 1])}]")
    errs.add_mask(clash, fmt)


def _check_shared(schedule: Schedule, topology, tol: float, slack: float,
                  errs: _Errors) -> None:
    """Fluid model: can every link move the bytes of its transfers within their intervals?

    Each hop needs ``chunk_bytes / bandwidth`` seconds of its link somewhere in
    its transfer's ``[start, end]`` (latency is propagation and does not use
    capacity), at any rate.  For one link this is preemptive single-machine
    scheduling with release times and deadlines, which earliest-deadline-first
    solves exactly (Horn 1974): feasible iff EDF meets every deadline.  The
    constant-rate allocation ``bytes / (end - start)`` is tried first on all
    links at once (vectorised sweep); EDF runs only on links where it
    overloads, since rates that vary over time (max-min fair flows
    re-allocated when flows start and end) can be feasible although their
    averages overlap.
    """
    n = len(schedule)
    if not n:
        return
    start, end, links = schedule.start, schedule.end, schedule.path_links
    hop_t, lat_sum, min_bw = _path_sums(schedule, topology)
    _check_duration(schedule, lat_sum, min_bw, tol, slack, errs)
    work = schedule.chunk_bytes / topology.bandwidth[links]   # link-seconds per hop
    r, d = start[hop_t], end[hop_t]
    h = links.size
    # Constant-rate witness: sweep per link, ends before starts at equal times.
    t = np.concatenate([r, d])
    delta = np.concatenate([work / (d - r), -work / (d - r)])
    kind = np.concatenate([np.ones(h, np.int8), np.zeros(h, np.int8)])
    lk = np.concatenate([links, links])
    order = np.lexsort((kind, t, lk))
    lk, delta, kind = lk[order], delta[order], kind[order]
    cs = np.cumsum(delta)
    head = np.r_[True, lk[1:] != lk[:-1]]
    load = cs - (cs - delta)[head][np.cumsum(head) - 1]
    suspects = np.unique(lk[(kind == 1) & (load > 1 + tol)])
    if not suspects.size:
        return
    by_link = np.argsort(links, kind="stable")
    bounds = np.searchsorted(links[by_link], suspects, side="left")
    ends = np.searchsorted(links[by_link], suspects, side="right")
    for link, lo, hi in zip(suspects.tolist(), bounds.tolist(), ends.tolist()):
        hops = by_link[lo:hi]
        miss = _edf_miss(r[hops], d[hops], work[hops], slack)
        if miss is None:
            continue
        errs.count += 1
        if errs.room:
            errs.messages.append(_overload_message(schedule, topology, link, hops, hop_t,
                                                   r, d, work, miss, tol, slack))


def _edf_miss(release: np.ndarray, deadline: np.ndarray, work: np.ndarray,
              slack: float) -> int | None:
    """Preemptive EDF on one link; the index of the first job that finishes late, or None."""
    import heapq

    rel, dl, rem = release.tolist(), deadline.tolist(), work.tolist()
    order = np.lexsort((deadline, release)).tolist()
    m = len(order)
    heap: list[tuple[float, int]] = []
    t = -np.inf
    k = 0
    while k < m or heap:
        if not heap:
            t = max(t, rel[order[k]])
        while k < m and rel[order[k]] <= t:
            j = order[k]
            heapq.heappush(heap, (dl[j], j))
            k += 1
        due, j = heap[0]
        nxt = rel[order[k]] if k < m else np.inf
        run = min(rem[j], nxt - t)
        t += run
        rem[j] -= run
        if rem[j] <= 0.0:
            heapq.heappop(heap)
            if t > due + slack:
                return j
    return None


def _overload_message(schedule: Schedule, topology, link: int, hops: np.ndarray,
                      hop_t: np.ndarray, r: np.ndarray, d: np.ndarray, work: np.ndarray,
                      miss: int, tol: float, slack: float) -> str:
    """Name a window [a, b] in which the link's transfers need more time than it has."""
    bw = float(topology.bandwidth[link])
    rr, dd, ww = r[hops], d[hops], work[hops]
    b = float(dd[miss])
    for a in np.unique(rr[rr < b]).tolist():
        inside = (rr >= a) & (dd <= b)
        need = float(ww[inside].sum())
        if need > (b - a) * (1 + tol) + slack:
            users = sorted(int(x) for x in hop_t[hops[inside]].tolist())
            shown = ", ".join(str(u) for u in users[:8]) + (", ..." if len(users) > 8 else "")
            return (f"{_link_name(topology, link)} is over capacity: transfers [{shown}] must "
                    f"move {need * bw:.9g} B within [{_t(a)}, {_t(b)}] but it carries at most "
                    f"{(b - a) * bw:.9g} B at {bw:.9g} B/s")
    i = int(hop_t[hops[miss]])  # fallback, should not happen: EDF misses imply such a window
    return (f"{_link_name(topology, link)} is over capacity: transfer {i} cannot move its "
            f"{float(ww[miss]) * bw:.9g} B by {_t(b)}")
