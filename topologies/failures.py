"""Failed links, switches, servers and racks: the network that is left.

Two ways to say what failed:

* **named** (``fail=`` in a topology spec, :func:`parse_named_failures`): items joined by
  ``+``, each optionally prefixed by its kind, which then holds for the items after it:
  ``fail=7+9`` (NPUs 7 and 9, the original form), ``fail=link:0-16+3-17`` (every link
  between nodes 0 and 16 and between 3 and 17, both directions), ``fail=switch:130``,
  ``fail=server:2`` (every NPU of server 2: the NPU itself on server-level fabrics),
  ``fail=rack:0``; kinds mix: ``fail=switch:130+link:0-16``.  Ids are the intact
  network's.
* **random** (``--fail links=10%,seed=S,samples=N``, :func:`parse_failure_spec` and
  :func:`sample_failures`): a fraction (``10%``) or a count (``3``) of the cables
  (a directed link and its reverse partner fail together; a one-way link is a cable of
  its own), switches, servers or racks, drawn uniformly without replacement with a seeded
  generator; kinds combine (``links=5%,switches=1``).

**Racks.**  On switched fabrics a rack is the servers under one first-hop (leaf)
switch: the switch an NPU's lowest-id link to a switch reaches.  Fabrics without
switches (tori, TopoOpt's direct-connect) have no leaf: ``rack_size=K`` groups ``K``
consecutive servers (an assumption the caller states); a ``scaleup`` domain is a rack.
A failed rack loses its servers (and, on switched fabrics, its leaf switch).

The result (:func:`degrade`) keeps the original numbering rule of
:meth:`Topology.without_npus` (surviving NPUs renumbered in order, switches after them),
drops the family's closed forms and Clos description (``diameter``,
``mean_path_length``, ``bisection_Bps``, ``switch_levels``, ``scaleup_switches``: they
describe the intact network), so routes are rebuilt on what is left by the topology's
own minimum-hop computation (:meth:`Topology.route`, per-flow ECMP over the surviving
minimum-hop paths).  It is built without the connectivity check: :func:`partitioned`
says whether the surviving NPUs can still all reach each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from codesign.errors import invalid
from topologies.model import Topology

__all__ = ["Failures", "FailureSpec", "degrade", "partitioned", "cable_ids", "racks",
           "parse_named_failures", "parse_failure_spec", "sample_failures", "FAILURE_KINDS"]

#: Kinds of random failures (``--fail KIND=AMOUNT``).
FAILURE_KINDS = ("links", "switches", "servers", "racks")
#: Params that describe the intact network only (dropped after a failure).
_INTACT_ONLY = ("diameter", "mean_path_length", "bisection_Bps", "switch_levels",
                "scaleup_switches")


@dataclass(frozen=True)
class Failures:
    """What failed, in the intact network's ids: NPUs, directed link ids, switch node ids."""

    npus: tuple[int, ...] = ()
    links: tuple[int, ...] = ()
    switches: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.npus or self.links or self.switches)

    def describe(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in (("NPUs", self.npus), ("links", self.links),
                                               ("switches", self.switches)) if v]
        return ", ".join(parts) or "nothing"


def degrade(topology: Topology, failures: Failures, *, name: str = "") -> Topology:
    """The network without the failed NPUs, links and switches (module docstring).

    Raises
    ------
    InvalidSpecError
        An id out of range, or every NPU failed.
    """
    if failures.empty:
        return topology   # nothing failed: the intact network, with its structure
    npus = sorted({int(v) for v in failures.npus})
    sw = sorted({int(v) for v in failures.switches})
    links = np.asarray(sorted({int(v) for v in failures.links}), dtype=np.int64)
    if any(v < 0 or v >= topology.npus for v in npus) or len(npus) >= topology.npus:
        raise invalid("failed NPUs", npus, f"NPU ids in 0..{topology.npus - 1}, fewer than "
                                           f"{topology.npus}")
    if any(v < topology.npus or v >= topology.n_nodes for v in sw):
        raise invalid("failed switches", sw,
                      f"switch node ids in {topology.npus}..{topology.n_nodes - 1}"
                      if topology.switches else "none: this network has no switches")
    if links.size and (links.min() < 0 or links.max() >= topology.n_links):
        raise invalid("failed links", links.tolist()[:5],
                      f"link ids in 0..{topology.n_links - 1}")
    keep_node = np.ones(topology.n_nodes, dtype=bool)
    keep_node[npus] = False
    keep_node[sw] = False
    keep_link = keep_node[topology.src] & keep_node[topology.dst]
    keep_link[links] = False
    new_id = np.cumsum(keep_node) - 1
    survivors = np.flatnonzero(keep_node[:topology.npus])
    params = {k: v for k, v in topology.params.items() if k not in _INTACT_ONLY}
    params.update(failed=failures.describe(), failed_npus=npus, failed_switches=sw,
                  failed_links=int(links.size), npu_ids=survivors.tolist())
    from topologies.routing import grid_coordinates

    sizes, ids = grid_coordinates(topology)
    params.pop("grid_sizes", None)
    if sizes is not None:
        # What is left of a torus or mesh keeps its grid coordinates (npu_ids: the intact
        # grid's ids, also when an already degraded grid loses more), so collective rings
        # can still sweep it (topologies.routing.grid_ring_order).
        params.update(grid_sizes=sizes, npu_ids=ids[survivors].tolist())
    attrs = {k: v[survivors] for k, v in topology.node_attrs.items()}
    return Topology(len(survivors), topology.switches - len(sw),
                    new_id[topology.src[keep_link]], new_id[topology.dst[keep_link]],
                    topology.bandwidth[keep_link], topology.latency[keep_link],
                    name=name or f"{topology.name} without {failures.describe()}",
                    family=topology.family, params=params, node_attrs=attrs,
                    require_connected=False)


def partitioned(topology: Topology) -> bool:
    """Whether some surviving NPU cannot reach another (both ways) any more."""
    if topology.npus < 2:
        return False
    labels = topology.component_labels()
    return bool(np.any(labels[:topology.npus] != labels[0]))


def cable_ids(topology: Topology) -> np.ndarray:
    """Cable number of every directed link: between two nodes the ``i``-th link one way
    and the ``i``-th the other way (by link id) are one cable; shape ``(n_links,)``."""
    src, dst = topology.src, topology.dst
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    direction = (src > dst).astype(np.int64)
    pair = lo * topology.n_nodes + hi
    order = np.lexsort((np.arange(src.size), direction, pair))
    grp = pair[order] * 2 + direction[order]
    starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    rank = np.empty(src.size, dtype=np.int64)
    rank[order] = np.arange(grp.size) - np.repeat(starts, np.diff(np.r_[starts, grp.size]))
    _, cable = np.unique(pair * (int(rank.max()) + 1 if rank.size else 1) + rank,
                         return_inverse=True)
    return cable.astype(np.int64)


def _servers(topology: Topology) -> np.ndarray:
    """Server of every NPU (``node_attrs["server"]``, else each NPU is a server)."""
    if "server" in topology.node_attrs:
        return np.asarray(topology.node_attrs["server"], dtype=np.int64)
    return np.arange(topology.npus)


def racks(topology: Topology, rack_size: int | None = None) -> list[tuple[list[int], list[int]]]:
    """The racks as ``(NPUs, switches that fail with them)`` (module docstring rule).

    Raises
    ------
    InvalidSpecError
        A fabric without switches or scale-up domains and no ``rack_size``.
    """
    server = _servers(topology)
    if rack_size is not None:
        if isinstance(rack_size, bool) or not isinstance(rack_size, int) or rack_size < 1:
            raise invalid("rack_size", rack_size, "an integer >= 1 (servers per rack)")
        groups: dict[int, list[int]] = {}
        for npu, s in enumerate(server.tolist()):
            groups.setdefault(s // rack_size, []).append(npu)
        return [(v, []) for _, v in sorted(groups.items())]
    if topology.switches == 0:
        raise invalid("rack failures on", topology.name,
                      "a switched fabric (racks are leaf switches), or rack_size=K servers")
    leaf = np.full(topology.npus, -1, dtype=np.int64)
    for npu in range(topology.npus):
        out = topology.out_links(npu)
        to_sw = topology.dst[out][topology.dst[out] >= topology.npus]
        leaf[npu] = int(to_sw.min()) if to_sw.size else -1
    groups = {}
    for npu, sw in enumerate(leaf.tolist()):
        groups.setdefault(sw, []).append(npu)
    return [(v, [k] if k >= 0 else []) for k, v in sorted(groups.items())]


_ITEM_RE = re.compile(r"^(?:(npu|link|switch|server|rack):)?(.+)$")


def parse_named_failures(topology: Topology, text: str) -> Failures:
    """``fail=`` items (module docstring) as :class:`Failures` of ``topology``.

    Raises
    ------
    InvalidSpecError
        A malformed item, an unknown id, or a link between nodes that are not linked.
    """
    rule = ("items joined by '+', each NPU id or kind:id with kind npu, link (u-v), switch, "
            "server or rack, e.g. fail=7+9 or fail=link:0-16+switch:130")
    kind = "npu"
    npus: set[int] = set()
    links: set[int] = set()
    switches: set[int] = set()
    all_racks = None
    for item in str(text).split("+"):
        m = _ITEM_RE.match(item.strip())
        if not m:
            raise invalid("fail", text, rule)
        kind = m.group(1) or kind
        value = m.group(2)
        if kind == "link":
            try:
                u, v = (int(x) for x in value.split("-"))
            except ValueError:
                raise invalid("fail", text, rule) from None
            ids = np.concatenate([topology.links_between(u, v),
                                  topology.links_between(v, u)]) \
                if 0 <= u < topology.n_nodes and 0 <= v < topology.n_nodes else []
            if len(ids) == 0:
                raise invalid("fail link", value, f"two linked nodes u-v of {topology.name}")
            links.update(int(i) for i in ids)
            continue
        try:
            ident = int(value)
        except ValueError:
            raise invalid("fail", text, rule) from None
        if kind == "npu":
            npus.add(ident)
        elif kind == "switch":
            switches.add(ident)
        elif kind == "server":
            members = np.flatnonzero(_servers(topology) == ident)
            if members.size == 0:
                raise invalid("fail server", ident, f"a server of {topology.name}")
            npus.update(members.tolist())
        else:
            all_racks = all_racks if all_racks is not None else racks(topology)
            if not 0 <= ident < len(all_racks):
                raise invalid("fail rack", ident, f"a rack in 0..{len(all_racks) - 1}")
            npus.update(all_racks[ident][0])
            switches.update(all_racks[ident][1])
    return Failures(tuple(sorted(npus)), tuple(sorted(links)), tuple(sorted(switches)))


@dataclass(frozen=True)
class FailureSpec:
    """Random failures: per kind a fraction (``0.1`` of ``10%``) or a count, and a seed.

    ``amounts`` maps a kind of :data:`FAILURE_KINDS` to ``("fraction", f)`` or
    ``("count", n)``; ``rack_size`` groups servers into racks on switchless fabrics.
    """

    amounts: tuple[tuple[str, str, float], ...] = ()
    seed: int = 0
    rack_size: int | None = None
    text: str = field(default="", compare=False)
    samples: int = 20

    @property
    def empty(self) -> bool:
        return all(v == 0 for _, _, v in self.amounts)


def parse_failure_spec(text: str) -> FailureSpec:
    """Parse ``links=10%,seed=3`` (kinds ``links``, ``switches``, ``servers``, ``racks``;
    ``N%`` or a count; ``seed=S``; ``rack_size=K``; ``samples=N`` draws, default 20).

    Examples
    --------
    >>> parse_failure_spec("links=10%,switches=2,seed=3").amounts
    (('links', 'fraction', 0.1), ('switches', 'count', 2.0))
    """
    rule = ("KIND=N% or KIND=COUNT with KIND in links, switches, servers, racks, plus "
            "seed=S, samples=N and rack_size=K, e.g. links=10%,seed=1,samples=20")
    if not isinstance(text, str) or not text.strip():
        raise invalid("--fail", text, rule)
    amounts, seed, rack_size, seen, samples = [], 0, None, set(), 20
    for part in text.split(","):
        key, eq, value = part.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value or key in seen:
            raise invalid("--fail", text, rule + " (each key once)")
        seen.add(key)
        if key in ("seed", "rack_size", "samples"):
            if not value.isdigit() or (key != "seed" and int(value) < 1) \
                    or (key == "samples" and int(value) > 100_000):
                raise invalid(f"--fail {key}", value, "an integer >= 0" if key == "seed"
                              else "an integer in [1, 100000]" if key == "samples"
                              else "an integer >= 1")
            if key == "seed":
                seed = int(value)
            elif key == "samples":
                samples = int(value)
            else:
                rack_size = int(value)
            continue
        if key not in FAILURE_KINDS:
            raise invalid("--fail kind", key, f"one of {', '.join(FAILURE_KINDS)} (or seed, "
                                              f"samples, rack_size)")
        try:
            if value.endswith("%"):
                f = float(value[:-1]) / 100.0
                if not 0 <= f < 1:
                    raise ValueError
                amounts.append((key, "fraction", f))
            else:
                n = int(value)
                if n < 0:
                    raise ValueError
                amounts.append((key, "count", float(n)))
        except ValueError:
            raise invalid(f"--fail {key}", value, "a percentage in [0%, 100%) or a count "
                                                  ">= 0") from None
    if not amounts:
        raise invalid("--fail", text, rule)
    return FailureSpec(tuple(amounts), seed, rack_size, text, samples)


def sample_failures(topology: Topology, spec: FailureSpec,
                    rng: np.random.Generator) -> Failures:
    """One random draw of ``spec``'s failures on ``topology`` (module docstring).

    A fraction ``f`` of ``n`` components fails ``round(f n)`` of them; a count larger
    than there are components is refused.  The draw may fail every NPU (the caller
    reports that the job cannot continue).
    """
    npus: set[int] = set()
    links: set[int] = set()
    switches: set[int] = set()

    def draw(kind: str, how: str, amount: float, n: int) -> np.ndarray:
        k = int(round(amount * n)) if how == "fraction" else int(amount)
        if k > n:
            raise invalid(f"--fail {kind}", int(amount), f"at most {n} ({topology.name} has "
                                                         f"{n} {kind})")
        return np.sort(rng.choice(n, size=k, replace=False)) if k else np.zeros(0, int)

    for kind, how, amount in spec.amounts:
        if kind == "links":
            cable = cable_ids(topology)
            pick = draw(kind, how, amount, int(cable.max()) + 1 if cable.size else 0)
            links.update(np.flatnonzero(np.isin(cable, pick)).tolist())
        elif kind == "switches":
            pick = draw(kind, how, amount, topology.switches)
            switches.update((pick + topology.npus).tolist())
        elif kind == "servers":
            server = _servers(topology)
            ids = np.unique(server)
            pick = ids[draw(kind, how, amount, ids.size)]
            npus.update(np.flatnonzero(np.isin(server, pick)).tolist())
        else:
            groups = racks(topology, spec.rack_size)
            for i in draw(kind, how, amount, len(groups)).tolist():
                npus.update(groups[i][0])
                switches.update(groups[i][1])
    return Failures(tuple(sorted(npus)), tuple(sorted(links)), tuple(sorted(switches)))
