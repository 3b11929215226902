"""Hand-built schedules for the validator and schedule-file tests.

Every schedule here is written from the textbook algorithm and the link model
(latency + bytes / bandwidth per hop), independently of any synthesizer, so
that the tests can tell a correct schedule from a broken one by hand.
"""

from __future__ import annotations

from evaluators.collectives import Collective
from evaluators.schedule import COPY, REDUCE, Schedule, Transfer
from topologies.registry import from_spec

BW = 25e9      # default link bandwidth of the built-in families, bytes/s
LAT = 1e-6     # default link latency, s


def link(t, u, v):
    """The (first) directed link u -> v."""
    ids = t.links_between(u, v)
    assert ids.size, f"no link {u}->{v}"
    return int(ids[0])


def hop_time(coll):
    """One hop on a default link: latency + chunk_bytes / bandwidth."""
    return LAT + coll.chunk_bytes / BW


def ring_allgather(n=4, chunks=1, size=4e6, gaps=None, extra=None):
    """Unidirectional ring allgather on ``ring:n``, list-scheduled.

    Step s, piece k, NPU p sends chunk ((p - s) mod n) * chunks + k to p + 1.
    Each transfer starts when its chunk has arrived at p and the link p->p+1
    is free, plus ``gaps[i]`` idle seconds, and lasts one hop plus ``extra[i]``.
    Returns (topology, schedule, dependency) where ``dependency[i]`` is the
    transfer that delivered the chunk to the sender (-1 for the owner's send).
    """
    t = from_spec(f"ring:{n}")
    coll = Collective("allgather", tuple(range(n)), size, chunks)
    d = hop_time(coll)
    free = [0.0] * n
    arrived = {}  # (chunk, npu) -> (end, transfer index)
    rows, dep = [], []
    for s in range(n - 1):
        for k in range(chunks):
            for p in range(n):
                c = ((p - s) % n) * chunks + k
                i = len(rows)
                ready, via = arrived.get((c, p), (0.0, -1))
                start = max(ready, free[p]) + (gaps[i] if gaps is not None else 0.0)
                end = start + d + (extra[i] if extra is not None else 0.0)
                q = (p + 1) % n
                rows.append(Transfer(c, p, q, (link(t, p, q),), start, end, COPY))
                dep.append(via)
                free[p] = end
                arrived[(c, q)] = (end, i)
    return t, Schedule.from_transfers(coll, rows, algorithm="hand-ring"), dep


def direct_allgather_fc(n=4, size=4e6):
    """Every NPU sends its shard straight to every other NPU on ``fc:n``, all at t=0."""
    t = from_spec(f"fc:{n}")
    coll = Collective("allgather", tuple(range(n)), size)
    d = hop_time(coll)
    rows = [Transfer(p, p, q, (link(t, p, q),), 0.0, d) for p in range(n) for q in range(n)
            if q != p]
    return t, Schedule.from_transfers(coll, rows, algorithm="hand-direct")


def ring_reducescatter(n=4, size=4e6):
    """Ring reducescatter: at step s NPU p reduces chunk (p - s - 1) mod n into p + 1."""
    t = from_spec(f"ring:{n}")
    coll = Collective("reducescatter", tuple(range(n)), size)
    d = hop_time(coll)
    rows = [Transfer((p - s - 1) % n, p, (p + 1) % n, (link(t, p, (p + 1) % n),), s * d,
                     (s + 1) * d, REDUCE) for s in range(n - 1) for p in range(n)]
    return t, Schedule.from_transfers(coll, rows, algorithm="hand-ring")


def ring_allreduce(n=4, size=4e6):
    """Ring allreduce: the reducescatter above, then a copy ring allgather."""
    t = from_spec(f"ring:{n}")
    coll = Collective("allreduce", tuple(range(n)), size)
    d = hop_time(coll)
    rows = [Transfer((p - s - 1) % n, p, (p + 1) % n, (link(t, p, (p + 1) % n),), s * d,
                     (s + 1) * d, REDUCE) for s in range(n - 1) for p in range(n)]
    base = (n - 1) * d
    rows += [Transfer((p - s) % n, p, (p + 1) % n, (link(t, p, (p + 1) % n),), base + s * d,
                      base + (s + 1) * d, COPY) for s in range(n - 1) for p in range(n)]
    return t, Schedule.from_transfers(coll, rows, algorithm="hand-ring")


def direct_reducescatter_fc(n=4, size=4e6):
    """Every NPU reduces chunk q straight into NPU q on ``fc:n``, all at t=0."""
    t = from_spec(f"fc:{n}")
    coll = Collective("reducescatter", tuple(range(n)), size)
    d = hop_time(coll)
    rows = [Transfer(q, p, q, (link(t, p, q),), 0.0, d, REDUCE) for p in range(n)
            for q in range(n) if q != p]
    return t, Schedule.from_transfers(coll, rows, algorithm="hand-direct")


def switch_broadcast(n=4, size=1e6, hop_timing=True):
    """Root 0 broadcasts through the switch of ``switch:n`` on 2-hop paths.

    With ``hop_timing`` the copies are pipelined store-and-forward (hop 0 of
    copy k on the uplink during [k d, (k+1) d], hop 1 on the downlink during
    [(k+1) d, (k+2) d]); without it each copy holds both links for its whole
    duration, so the copies run one after another.
    """
    t = from_spec(f"switch:{n}")
    coll = Collective("broadcast", tuple(range(n)), size)
    d = hop_time(coll)
    sw = n
    rows, hs = [], []
    for k, q in enumerate(range(1, n)):
        path = (link(t, 0, sw), link(t, sw, q))
        if hop_timing:
            rows.append(Transfer(0, 0, q, path, k * d, (k + 2) * d))
            hs += [k * d, (k + 1) * d]
        else:
            rows.append(Transfer(0, 0, q, path, 2 * k * d, 2 * (k + 1) * d))
    s = Schedule.from_transfers(coll, rows, algorithm="hand-bcast")
    return t, (s.retimed(s.start, s.end, hop_start=hs) if hop_timing else s)


def switch_allgather_shared(n=4, size=4e6, factor=1.0):
    """Direct allgather on ``switch:n`` under the fluid ("shared") link model.

    Each NPU's uplink carries n-1 copies at once, each at bandwidth / (n-1):
    the copies last ``2 lat + (n-1) chunk_bytes / bw`` (``factor`` < 1 makes
    them too fast for the links).
    """
    t = from_spec(f"switch:{n}")
    coll = Collective("allgather", tuple(range(n)), size)
    dur = 2 * LAT + factor * (n - 1) * coll.chunk_bytes / BW
    rows = [Transfer(p, p, q, (link(t, p, n), link(t, n, q)), 0.0, dur)
            for p in range(n) for q in range(n) if q != p]
    return t, Schedule.from_transfers(coll, rows, algorithm="hand-direct", link_model="shared")


def edit(schedule, drop=(), **changes):
    """A copy of ``schedule`` with transfers dropped or fields replaced.

    ``changes`` maps a field (chunk, src, dst, path, start, end, op) to
    ``{transfer index: new value}``.
    """
    rows = []
    for i, tr in enumerate(schedule):
        if i in drop:
            continue
        fields = tr._asdict()
        for name, mapping in changes.items():
            if i in mapping:
                fields[name] = mapping[i]
        rows.append(Transfer(**fields))
    return Schedule.from_transfers(schedule.collective, rows, **schedule.metadata)


def shifted(schedule, i, delta):
    """Move transfer ``i`` by ``delta`` seconds (start and end)."""
    return edit(schedule, start={i: schedule.start[i] + delta}, end={i: schedule.end[i] + delta})


__all__ = ["BW", "LAT", "link", "hop_time", "ring_allgather", "direct_allgather_fc",
           "ring_reducescatter", "ring_allreduce", "direct_reducescatter_fc", "switch_broadcast",
           "switch_allgather_shared", "edit", "shifted"]
