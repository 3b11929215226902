"""Schedule files: a JSON round trip and export to MSCCL's XML algorithm format.

JSON (``save_schedule`` / ``load_schedule``)
--------------------------------------------
One object::

    {"format": "codesign.schedule", "version": 1,
     "collective": {"kind", "npus", "size_bytes", "chunks_per_npu", "root"},
     "transfers": {"chunk", "src", "dst", "start", "end", "op",
                   "path_ptr", "path_links", "hop_start"},
     "metadata": {...}}

Arrays are JSON lists in the order of the :class:`~evaluators.schedule.Schedule`
struct of arrays (``op``: 0 copy, 1 reduce; ``hop_start`` is ``null`` without
per-hop timing).  Floats are written with Python's ``repr`` (what :mod:`json`
does), which reads back bit for bit, so the round trip is exact.  Metadata
must be JSON data (numbers, strings, booleans, None, lists, string-keyed dicts;
numpy scalars and arrays are converted; tuples come back as lists).  A path
ending in ``.gz`` is gzip-compressed.

MSCCL XML (``to_msccl_xml`` / ``save_msccl_xml``)
-------------------------------------------------
The algorithm format loaded by MSCCL (msccl-executor-nccl, RCCL) and produced
by msccl-tools: ``<algo>`` with ``<gpu>`` elements holding threadblocks
``<tb id send recv chan>`` whose ``<step s type srcbuf srcoff dstbuf dstoff
cnt depid deps hasdep>`` run in order.  Facts of the format this export relies
on (from msccl-tools' IR writer and the MSCCL/SCCL XML parser):

* ranks are ``0..ngpus-1``; ``coll`` is ``allgather``, ``reduce_scatter`` or
  ``allreduce``; buffers are ``i`` (input), ``o`` (output), ``s`` (scratch)
  and offsets/counts are in units of ``size / nchunksperloop``;
* a threadblock talks to at most one send peer and one recv peer on one
  channel; sends and receives on a (sender, receiver, channel) connection
  match in FIFO order;
* ``s`` sends, ``r`` receives into ``dstbuf[dstoff]``, ``rrc`` receives,
  reduces with ``srcbuf[srcoff]`` and writes ``dstbuf[dstoff]``;
* ``depid``/``deps`` make a step wait for step ``deps`` of threadblock
  ``depid`` on the same GPU (-1 for none); one dependency per step, further
  ones go on preceding ``nop`` steps; ``hasdep=1`` marks steps others wait on.

Mapping (our chunk ids equal MSCCL's buffer indices, ``cnt=1``):

* in place (``inplace="1"``), as msccl-tools' in-place collectives:
  allgather uses the output buffer ``o`` (the input aliases
  ``o[rank*c:(rank+1)*c]``); reducescatter and allreduce use the input buffer
  ``i`` (reducescatter's output aliases ``i[rank*c:(rank+1)*c]``, allreduce's
  output is the input); partial sums accumulate in place.
* each transfer becomes a send step on the sender and, on the receiver, a
  ``r`` (copy) or ``rrc`` (reduce) step.  MSCCL addresses peers, not links: a
  multi-hop path through switches or relays becomes one send from ``src`` to
  ``dst`` and the runtime routes it, so both ends must be participants.
* one threadblock per (GPU, peer, channel), steps in the validator's event
  order (:func:`evaluators.validate.event_order`: time, arrivals first).  On
  a connection whose transfers would arrive in a different order than they
  were sent (possible under the shared link model) later transfers move to
  further channels so that FIFO matching holds.
* dependencies across threadblocks of a GPU, per chunk slot: a send waits for
  the latest earlier receive into that slot (read after write); a receive
  waits for the previous receive into the slot (write after write; reduces
  must not race) and for the sends of the slot since then (write after read).
  Every dependency points to an earlier event, and every threadblock runs in
  event order, so the program cannot deadlock on dependencies.

Runtime limits of MSCCL (threadblocks per GPU, steps per threadblock, 32
channels) are not enforced here.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_choice, check_keys
from evaluators.collectives import Collective
from evaluators.schedule import REDUCE, Schedule

__all__ = ["FORMAT", "VERSION", "schedule_to_dict", "schedule_from_dict", "save_schedule",
           "load_schedule", "to_msccl_xml", "save_msccl_xml", "MSCCL_KINDS"]

FORMAT = "codesign.schedule"
VERSION = 1
_INT_ARRAYS = ("chunk", "src", "dst", "op", "path_ptr", "path_links")
_FLOAT_ARRAYS = ("start", "end")
_TRANSFER_KEYS = _INT_ARRAYS + _FLOAT_ARRAYS + ("hop_start",)
_COLL_KEYS = ("kind", "npus", "size_bytes", "chunks_per_npu", "root")

#: Collective kinds :func:`to_msccl_xml` exports, with MSCCL's ``coll`` names.
MSCCL_KINDS = {"allgather": "allgather", "reducescatter": "reduce_scatter",
               "allreduce": "allreduce"}


# ----------------------------------------------------------------------- JSON
def _jsonable(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{k}]") for k, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise invalid(f"{where} key", k, "a string (JSON object keys are strings)")
            out[k] = _jsonable(v, f"{where}[{k!r}]")
        return out
    raise invalid(where, type(value).__name__,
                  "JSON data: numbers, strings, booleans, None, lists or string-keyed dicts")


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    """A JSON-ready dict of a schedule (format in the module docstring).

    Raises
    ------
    InvalidSpecError
        If the metadata holds something JSON cannot represent.
    """
    c = schedule.collective
    transfers = {name: getattr(schedule, name).tolist() for name in _INT_ARRAYS + _FLOAT_ARRAYS}
    transfers["hop_start"] = None if schedule.hop_start is None else schedule.hop_start.tolist()
    return {
        "format": FORMAT,
        "version": VERSION,
        "collective": {"kind": c.kind, "npus": list(c.npus), "size_bytes": c.size_bytes,
                       "chunks_per_npu": c.chunks_per_npu, "root": c.root},
        "transfers": transfers,
        "metadata": _jsonable(dict(schedule.metadata), "schedule metadata"),
    }


#: Largest integer accepted in a schedule file (ids, offsets): int64 with room to spare.
MAX_INT = 2 ** 62
#: Largest schedule file, bytes (a million transfers is ~60 MB of JSON).
MAX_SCHEDULE_BYTES = 512 * 2 ** 20


def _finite(v: int | float) -> bool:
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer beyond the float range
        return False


def _array(values: Any, name: str, integer: bool) -> np.ndarray:
    where = f"schedule transfers key {name!r}"
    if not isinstance(values, list):
        raise invalid(where, type(values).__name__, "a list of numbers")
    for k, v in enumerate(values):
        ok = (isinstance(v, int) if integer else isinstance(v, (int, float)))
        if not ok or isinstance(v, bool):
            raise invalid(f"{where} entry", v, ("an integer" if integer else "a number")
                          + f" (at position {k})")
        if integer and not -MAX_INT <= v <= MAX_INT:
            raise invalid(f"{where} entry", v, f"an integer of magnitude <= 2^62 (at position {k})")
        if not integer and not _finite(v):
            raise invalid(f"{where} entry", v, f"a finite number (at position {k})")
    return np.array(values, dtype=np.int64 if integer else np.float64)


def _collective_from_dict(cd: Mapping[str, Any]) -> Collective:
    where = "schedule collective"
    if not isinstance(cd["kind"], str):
        raise invalid(f"{where} kind", cd["kind"], "a collective name such as allreduce")
    npus = cd["npus"]
    if not isinstance(npus, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_INT for x in npus):
        raise invalid(f"{where} npus", npus, "a list of NPU ids (integers >= 0)")
    size = cd["size_bytes"]
    if isinstance(size, bool) or not isinstance(size, (int, float)):
        raise invalid(f"{where} size_bytes", size, "a number of bytes")
    chunks = cd.get("chunks_per_npu", 1)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= MAX_INT:
        raise invalid(f"{where} chunks_per_npu", chunks, "an integer >= 1")
    root = cd.get("root")
    if root is not None and (isinstance(root, bool) or not isinstance(root, int)):
        raise invalid(f"{where} root", root, "an NPU id or null")
    return Collective(cd["kind"], tuple(npus), size, chunks, root)


def schedule_from_dict(data: Mapping[str, Any]) -> Schedule:
    """Rebuild a schedule from :func:`schedule_to_dict` output, checking the schema.

    Checks types and ranges of every field (integers where ids belong, finite
    times, ops 0/1, chunk ids of the stated collective, a
    known link model).  Completeness and the data and timing checks against a
    network are :func:`load_schedule`'s ``topology`` argument (the independent
    validator).

    Raises
    ------
    InvalidSpecError
        On a wrong format or version, unknown or missing keys, non-numeric,
        huge or non-finite entries, arrays of inconsistent lengths, or the
        first violation found.
    """
    from evaluators.validate import LINK_MODELS

    check_keys(data, allowed=("format", "version", "collective", "transfers", "metadata"),
               required=("format", "version", "collective", "transfers"), where="schedule file")
    if data["format"] != FORMAT:
        raise invalid("schedule format", data["format"], repr(FORMAT))
    if data["version"] != VERSION or isinstance(data["version"], bool):
        raise invalid("schedule format version", data["version"],
                      f"{VERSION} (the version this codesign reads)")
    cd = check_keys(data["collective"], allowed=_COLL_KEYS,
                    required=("kind", "npus", "size_bytes"), where="schedule collective")
    coll = _collective_from_dict(cd)
    td = check_keys(data["transfers"], allowed=_TRANSFER_KEYS,
                    required=_INT_ARRAYS + _FLOAT_ARRAYS, where="schedule transfers")
    arrays = {name: _array(td[name], name, True) for name in _INT_ARRAYS}
    arrays.update({name: _array(td[name], name, False) for name in _FLOAT_ARRAYS})
    hop_start = td.get("hop_start")
    if hop_start is not None:
        hop_start = _array(hop_start, "hop_start", False)
    metadata = data.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise invalid("schedule metadata", type(metadata).__name__, "a JSON object")
    model = metadata.get("link_model", "exclusive")
    check_choice("schedule metadata link_model", model, LINK_MODELS)
    n = len(arrays["chunk"])
    for name in ("src", "dst", "op", "start", "end"):
        if len(arrays[name]) != n:
            raise invalid(f"schedule {name} length", len(arrays[name]),
                          f"{n}, one entry per transfer like 'chunk'")
    bad = np.flatnonzero((arrays["chunk"] < 0) | (arrays["chunk"] >= coll.n_chunks))
    if bad.size:
        raise invalid(f"schedule transfer {bad[0]} chunk", int(arrays["chunk"][bad[0]]),
                      f"a chunk id of the stated {coll.kind} in 0..{coll.n_chunks - 1}")
    bad = np.flatnonzero((arrays["op"] != 0) & (arrays["op"] != 1))
    if bad.size:
        raise invalid(f"schedule transfer {bad[0]} op", int(arrays["op"][bad[0]]),
                      "0 (copy) or 1 (reduce)")
    return Schedule(coll, metadata=dict(metadata), hop_start=hop_start, **arrays)


def save_schedule(schedule: Schedule, path: str | Path) -> Path:
    """Write a schedule as JSON (gzip-compressed if ``path`` ends in ``.gz``), atomically.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    InvalidSpecError
        Missing folder, a directory target or an OS error (no partial file is left).
    """
    from codesign.files import check_output_path, write_bytes_atomic, write_text_atomic

    p = check_output_path(path, what="schedule file")
    text = json.dumps(schedule_to_dict(schedule), separators=(",", ":"), allow_nan=False)
    if p.suffix == ".gz":
        write_bytes_atomic(p, gzip.compress(text.encode("utf-8")), what="schedule file")
    else:
        write_text_atomic(p, text, what="schedule file")
    return p


def load_schedule(path: str | Path, topology=None) -> Schedule:
    """Read a schedule written by :func:`save_schedule`; with ``topology``, validate it.

    The file is read with :mod:`codesign.files` (regular file, bounded size,
    UTF-8, bounded nesting, no NaN/Infinity literals) and checked by
    :func:`schedule_from_dict`.  With ``topology`` the independent validator
    (:func:`evaluators.validate.check_schedule`) then replays it against the
    network and the collective the file states: structure, data,
    postcondition and link occupancy.

    Raises
    ------
    InvalidSpecError
        If the file is missing, is not JSON, is not a schedule, or (with
        ``topology``) names the first violation.
    """
    from codesign.files import load_json_file, load_json_text, read_bytes

    p = Path(path)
    where = f"schedule file {str(p)!r}"
    if p.suffix == ".gz":
        raw = read_bytes(p, what="schedule file", max_bytes=MAX_SCHEDULE_BYTES)
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
                text = fh.read(MAX_SCHEDULE_BYTES + 1)
        except (OSError, EOFError) as exc:
            raise InvalidSpecError(f"invalid {where}: not gzip ({exc})") from None
        if len(text) > MAX_SCHEDULE_BYTES:
            raise InvalidSpecError(f"invalid {where}: more than {MAX_SCHEDULE_BYTES} bytes "
                                   f"uncompressed")
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidSpecError(f"invalid {where}: not UTF-8 text inside the gzip") from None
        data = load_json_text(decoded, where=where)
    else:
        data = load_json_file(p, what="schedule file", max_bytes=MAX_SCHEDULE_BYTES)
    try:
        schedule = schedule_from_dict(data)
    except InvalidSpecError as exc:
        raise InvalidSpecError(f"{where}: {exc}") from None
    if topology is not None:
        from evaluators.estimates import min_transfers
        from evaluators.validate import check_schedule

        bad = [x for x in schedule.collective.npus if x >= topology.npus]
        if bad:
            raise invalid(f"{where} collective NPU", bad[0],
                          f"an NPU id of {topology.name!r} in 0..{topology.npus - 1}")
        coll = schedule.collective
        need = min_transfers(coll.kind, coll.n, coll.chunks_per_npu)
        if len(schedule) < need:  # before the replay, which walks every chunk
            raise invalid(f"{where} transfers count", len(schedule),
                          f"at least {need} for a {coll.kind} of {coll.n} NPUs x "
                          f"{coll.chunks_per_npu} chunks (the collective is incomplete)")
        try:
            check_schedule(schedule, topology, schedule.collective)
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"{where} on {topology.name!r}: {exc}") from None
    return schedule


# ----------------------------------------------------------------- MSCCL XML
def to_msccl_xml(schedule: Schedule, topology, *, name: str | None = None,
                 proto: str = "Simple", validate: bool = True, min_bytes: int = 0,
                 max_bytes: int | None = None) -> str:
    """Export a schedule as an MSCCL XML algorithm (mapping in the module docstring).

    Parameters
    ----------
    schedule : Schedule
        An allgather, reducescatter or allreduce schedule whose transfers go
        between participants (any path: MSCCL addresses peers, not links).
    topology : topologies.Topology
        The network, used to validate the schedule first.
    name : str, optional
        ``<algo name>`` (default: the schedule's algorithm name or ``"codesign"``).
    proto : str, optional
        ``Simple``, ``LL`` or ``LL128`` (default ``Simple``).
    validate : bool, optional
        Run :func:`evaluators.validate.check_schedule` first (default True):
        exporting a broken schedule would give a wrong program.
    min_bytes, max_bytes : int, optional
        Message size range the runtime may pick the algorithm for, bytes
        (default 0 and unbounded, written as 2^40).

    Returns
    -------
    str
        The XML document.

    Raises
    ------
    InvalidSpecError
        For other collective kinds, a transfer from or to a non-participant,
        an unknown ``proto``, or (with ``validate``) an invalid schedule.
    """
    coll = schedule.collective
    if coll.kind not in MSCCL_KINDS:
        raise invalid("collective for MSCCL export", coll.kind,
                      "allgather, reducescatter or allreduce")
    if proto not in ("Simple", "LL", "LL128"):
        raise invalid("MSCCL proto", proto, "Simple, LL or LL128")
    if validate:
        from evaluators.validate import check_schedule
        check_schedule(schedule, topology)
    from evaluators.validate import event_order

    n = len(schedule)
    pos = {p: r for r, p in enumerate(coll.npus)}
    members = np.array(coll.npus)
    src_out, dst_out = ~np.isin(schedule.src, members), ~np.isin(schedule.dst, members)
    outside = np.flatnonzero(src_out | dst_out)
    if outside.size:
        i = int(outside[0])
        end_, node = ("src", schedule.src[i]) if src_out[i] else ("dst", schedule.dst[i])
        raise invalid(f"transfer {i} {end_} for MSCCL export", int(node),
                      "a participant of the collective (MSCCL ranks exchange data directly; "
                      "relays through non-participant NPUs cannot be expressed)")
    src_r = [pos[u] for u in schedule.src.tolist()]
    dst_r = [pos[v] for v in schedule.dst.tolist()]
    chunk = schedule.chunk.tolist()
    reduce_ = (schedule.op == REDUCE).tolist()

    # Rank of every event in replay order: sends at 'start', receives at 'end'.
    order = event_order(schedule)
    rank_of = np.empty(2 * n, np.int64)
    rank_of[order] = np.arange(2 * n)
    recv_key = rank_of[:n].tolist()
    send_key = rank_of[n:].tolist()

    # Channels: FIFO matching per connection needs send order == receive order.
    chan = [0] * n
    by_conn: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i in sorted(range(n), key=send_key.__getitem__):
        by_conn[src_r[i], dst_r[i]].append(i)
    for items in by_conn.values():
        last: list[int] = []  # last receive key per channel
        for i in items:
            c = next((k for k, key in enumerate(last) if key < recv_key[i]), len(last))
            if c == len(last):
                last.append(recv_key[i])
            else:
                last[c] = recv_key[i]
            chan[i] = c
    nchannels = max(chan, default=-1) + 1

    # Operations per GPU in event order: (key, is_send, transfer).
    ops: list[list[tuple[int, bool, int]]] = [[] for _ in range(coll.n)]
    for i in range(n):
        ops[src_r[i]].append((send_key[i], True, i))
        ops[dst_r[i]].append((recv_key[i], False, i))
    gpus = []
    for r in range(coll.n):
        ops[r].sort()
        gpus.append(_gpu_program(ops[r], src_r, dst_r, chan, chunk, reduce_))

    if coll.kind == "allgather":
        buf, i_chunks, o_chunks = "o", coll.chunks_per_npu, coll.n_chunks
    elif coll.kind == "reducescatter":
        buf, i_chunks, o_chunks = "i", coll.n_chunks, coll.chunks_per_npu
    else:
        buf, i_chunks, o_chunks = "i", coll.n_chunks, coll.n_chunks
    algo = ET.Element("algo", {
        "name": name or schedule.algorithm or "codesign", "proto": proto,
        "nchannels": str(max(nchannels, 1)), "nchunksperloop": str(coll.n_chunks),
        "ngpus": str(coll.n), "coll": MSCCL_KINDS[coll.kind], "inplace": "1",
        "outofplace": "0", "redop": "nop" if coll.kind == "allgather" else "sum",
        "minBytes": str(int(min_bytes)),
        "maxBytes": str(int(max_bytes) if max_bytes is not None else 1 << 40)})
    for r, tbs in enumerate(gpus):
        g = ET.SubElement(algo, "gpu", {"id": str(r), "i_chunks": str(i_chunks),
                                        "o_chunks": str(o_chunks), "s_chunks": "0"})
        for tb in tbs:
            t = ET.SubElement(g, "tb", {"id": str(tb["id"]), "send": str(tb["send"]),
                                        "recv": str(tb["recv"]), "chan": str(tb["chan"])})
            for s, step in enumerate(tb["steps"]):
                kind, i, dep, hasdep = step
                if kind == "nop":
                    attrs = {"type": "nop", "srcbuf": "i", "srcoff": "-1", "dstbuf": "o",
                             "dstoff": "-1", "cnt": "0"}
                else:
                    off = str(chunk[i])
                    attrs = {"type": kind, "srcbuf": buf, "srcoff": off, "dstbuf": buf,
                             "dstoff": off, "cnt": "1"}
                attrs["depid"], attrs["deps"] = (str(dep[0]), str(dep[1])) if dep else ("-1", "-1")
                attrs["hasdep"] = "1" if hasdep else "0"
                ET.SubElement(t, "step", {"s": str(s), **attrs})
    ET.indent(algo, space="  ")
    return ET.tostring(algo, encoding="unicode") + "\n"


def _gpu_program(ops: list[tuple[int, bool, int]], src_r: list[int], dst_r: list[int],
                 chan: list[int], chunk: list[int], reduce_: list[bool]) -> list[dict]:
    """Threadblocks of one GPU: steps, nops and cross-threadblock dependencies."""
    # Threadblock per (peer, channel), ids in sorted order (msccl-tools sorts by peer).
    keys = sorted({(dst_r[i] if is_send else src_r[i], chan[i]) for _, is_send, i in ops})
    tb_of = {k: t for t, k in enumerate(keys)}
    tbs = [{"id": t, "send": -1, "recv": -1, "chan": k[1], "steps": []}
           for t, k in enumerate(keys)]
    # Dependencies per chunk slot, in event order (each op: its tb and the ops it waits for).
    last_recv: dict[int, tuple[int, bool, int]] = {}
    sends_since: dict[int, list[tuple[int, bool, int]]] = defaultdict(list)
    where: dict[tuple[int, bool, int], tuple[int, int]] = {}
    waited: set[tuple[int, bool, int]] = set()
    for op in ops:
        _, is_send, i = op
        peer = dst_r[i] if is_send else src_r[i]
        t = tb_of[peer, chan[i]]
        tb = tbs[t]
        tb["send" if is_send else "recv"] = peer
        c = chunk[i]
        if is_send:
            deps = [last_recv[c]] if c in last_recv else []
            sends_since[c].append(op)
        else:
            deps = ([last_recv[c]] if c in last_recv else []) + sends_since.pop(c, [])
            last_recv[c] = op
        deps = [d for d in deps if where[d][0] != t]  # same threadblock: already in order
        for d in deps[1:]:  # extra dependencies ride on preceding nops
            tb["steps"].append(["nop", -1, where[d], False])
            waited.add(d)
        if deps:
            waited.add(deps[0])
        kind = "s" if is_send else ("rrc" if reduce_[i] else "r")
        tb["steps"].append([kind, i, where[deps[0]] if deps else None, False])
        where[op] = (t, len(tb["steps"]) - 1)
    for op in waited:
        t, s = where[op]
        tbs[t]["steps"][s][3] = True
    return tbs


def save_msccl_xml(schedule: Schedule, topology, path: str | Path, **options: Any) -> Path:
    """Write :func:`to_msccl_xml` output to ``path``; returns the path."""
    from codesign.files import check_output_path, write_text_atomic

    p = check_output_path(path, what="MSCCL XML file")
    return write_text_atomic(p, to_msccl_xml(schedule, topology, **options),
                             what="MSCCL XML file")
