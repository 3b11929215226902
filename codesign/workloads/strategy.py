"""Parallelization strategies: :class:`Strategy`, :func:`parse_strategy` and pipeline stages.

The strategy string is fixed by DESIGN.md section 6::

    dp=D,tp=T,pp=P[,microbatches=M][,zero=Z][,ep=E][,embedding=data|model]

* ``dp`` data-parallel replicas, ``tp`` Megatron tensor-parallel ranks (Shoeybi et al.
  2019), ``pp`` pipeline stages run with the 1F1B schedule (PipeDream-Flush; Narayanan
  et al. SC'21, Sec. 2.2) over ``microbatches`` micro-batches per iteration.  The job
  uses ``dp x tp x pp`` GPUs.
* ``zero`` is the ZeRO stage (Rajbhandari et al. SC'20, Sec. 5): 0 none, 1 optimizer
  state sharded over the data-parallel group, 2 also gradients, 3 also parameters.
* ``ep`` expert-parallel ranks for mixture-of-experts layers.  As in Megatron-LM and
  DeepSpeed-MoE, the expert-parallel group is carved out of the data-parallel group
  (``ep`` divides ``dp``): the ``ep`` ranks of a group hold different experts, and the
  ``dp / ep`` groups hold replicas of them.
* ``embedding=data`` replicates embedding tables (their gradients join the DP
  all-reduce); ``embedding=model`` places each table whole on one server (TopoOpt
  Sec. 2.1, the DLRM hybrid), see :mod:`codesign.workloads.placement`.

Decisions where the string is silent (stated here, tested): ``dp``, ``tp`` and ``pp``
default to 1 when omitted (``"dp=64"`` is pure data parallelism); ``microbatches``
defaults to 1 without pipelining and to ``pp`` with it (the fewest that fill the
1F1B pipeline); keys may appear in any order, at most once, lowercase, with optional
spaces around ``,`` and ``=``.  :func:`format_strategy` gives the canonical string.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from codesign.errors import InvalidSpecError, invalid

__all__ = ["Strategy", "parse_strategy", "as_strategy", "format_strategy", "STRATEGY_KEYS",
           "pipeline_stages", "bubble_fraction", "is_table", "layer_params_per_gpu",
           "check_applicable", "stage_bounds"]

#: Keys of the strategy string, in canonical order.
STRATEGY_KEYS = ("dp", "tp", "pp", "microbatches", "zero", "ep", "embedding")
_MAX_DEGREE = 10**7          # far above any cluster
_MAX_MICROBATCHES = 10**9
_EMBEDDING = ("data", "model")
_FORM = "dp=D,tp=T,pp=P[,microbatches=M][,zero=Z][,ep=E][,embedding=data|model]"


def positive_int(field: str, value: Any, maximum: int) -> int:
    """``value`` if it is an int in ``1..maximum``, else the one-line InvalidSpecError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise invalid(field, value, f"an integer in 1..{maximum}")
    return value


def _degree(name: str, value: Any, maximum: int = _MAX_DEGREE) -> int:
    return positive_int(f"strategy {name}", value, maximum)


@dataclass(frozen=True)
class Strategy:
    """A hybrid parallelization strategy (see the module docstring).

    Parameters
    ----------
    dp, tp, pp : int
        Data-, tensor- and pipeline-parallel degrees (>= 1).
    microbatches : int or None
        Micro-batches per iteration; ``None`` = 1 without pipelining, ``pp`` with it
        (:attr:`m` gives the effective value).
    zero : int
        ZeRO stage, 0..3.
    ep : int
        Expert-parallel degree; divides ``dp``.
    embedding : str
        ``"data"`` (replicated tables) or ``"model"`` (tables placed on servers).

    Raises
    ------
    InvalidSpecError
        A field out of range; the message names it.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    microbatches: int | None = None
    zero: int = 0
    ep: int = 1
    embedding: str = "data"

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "ep"):
            _degree(name, getattr(self, name))
        if self.microbatches is not None:
            _degree("microbatches", self.microbatches, _MAX_MICROBATCHES)
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise invalid("strategy zero", self.zero, "0, 1, 2 or 3 (the ZeRO stage)")
        if self.embedding not in _EMBEDDING:
            raise invalid("strategy embedding", self.embedding, "data or model")
        if self.dp % self.ep:
            raise invalid("strategy ep", self.ep,
                          f"a divisor of dp ({self.dp}): expert-parallel groups are carved "
                          "out of the data-parallel group")
        if self.gpus > _MAX_DEGREE:
            raise invalid("strategy dp*tp*pp", self.gpus, f"at most {_MAX_DEGREE} GPUs")

    @property
    def gpus(self) -> int:
        """GPUs the strategy uses: ``dp x tp x pp``."""
        return self.dp * self.tp * self.pp

    @property
    def m(self) -> int:
        """Effective micro-batches per iteration (see ``microbatches``)."""
        if self.microbatches is not None:
            return self.microbatches
        return self.pp

    @property
    def bubble_fraction(self) -> float:
        """1F1B pipeline bubble ``(p - 1) / (m + p - 1)`` (Narayanan et al. SC'21, Sec. 2.2)."""
        return bubble_fraction(self.pp, self.m)

    def __str__(self) -> str:
        return format_strategy(self)

    def to_dict(self) -> dict[str, Any]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "microbatches": self.m,
                "zero": self.zero, "ep": self.ep, "embedding": self.embedding,
                "gpus": self.gpus, "text": str(self)}


def bubble_fraction(pp: int, microbatches: int) -> float:
    """Idle fraction of a 1F1B (or GPipe) pipeline: ``(p - 1) / (m + p - 1)``.

    With ``m`` micro-batches of forward+backward time ``t`` per stage, an iteration
    takes ``(m + p - 1) t`` of which ``(p - 1) t`` is bubble (Narayanan et al. SC'21,
    Sec. 2.2: bubble time over ideal time is ``(p - 1) / m``).
    """
    _degree("pp", pp)
    _degree("microbatches", microbatches, _MAX_MICROBATCHES)
    return (pp - 1) / (microbatches + pp - 1)


def format_strategy(strategy: Strategy) -> str:
    """Canonical string: ``dp,tp,pp`` always; the others only when not the default."""
    parts = [f"dp={strategy.dp}", f"tp={strategy.tp}", f"pp={strategy.pp}"]
    if strategy.microbatches is not None:
        parts.append(f"microbatches={strategy.microbatches}")
    if strategy.zero:
        parts.append(f"zero={strategy.zero}")
    if strategy.ep != 1:
        parts.append(f"ep={strategy.ep}")
    if strategy.embedding != "data":
        parts.append(f"embedding={strategy.embedding}")
    return ",".join(parts)


def parse_strategy(text: str) -> Strategy:
    """Parse ``"dp=D,tp=T,pp=P[,microbatches=M][,zero=Z][,ep=E][,embedding=data|model]"``.

    Parameters
    ----------
    text : str
        The strategy string (DESIGN.md section 6).

    Returns
    -------
    Strategy

    Raises
    ------
    InvalidSpecError
        Empty string, a part without ``=``, an unknown or repeated key, a value that is
        not a decimal integer in range (or not ``data``/``model``); one line naming the
        field.

    Examples
    --------
    >>> parse_strategy("dp=4,tp=8,pp=2,microbatches=16,zero=1")
    Strategy(dp=4, tp=8, pp=2, microbatches=16, zero=1, ep=1, embedding='data')
    """
    if not isinstance(text, str) or not text.strip():
        raise invalid("strategy", text, _FORM)
    values: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, raw = part.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise invalid("strategy part", part, f"key=value in {_FORM}")
        if key not in STRATEGY_KEYS:
            raise InvalidSpecError(f"invalid strategy key {key!r}: expected one of "
                                   f"{', '.join(STRATEGY_KEYS)}")
        if key in values:
            raise invalid(f"strategy {key}", raw, "each key at most once")
        if key == "embedding":
            if raw not in _EMBEDDING:
                raise invalid("strategy embedding", raw, "data or model")
            values[key] = raw
            continue
        # Plain decimal digits only: no signs, floats, underscores or other numerals.
        if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
            allowed = "0, 1, 2 or 3" if key == "zero" else "a positive integer"
            raise invalid(f"strategy {key}", raw, allowed)
        values[key] = int(raw)
    return Strategy(**values)


def as_strategy(value: Strategy | str) -> Strategy:
    """A :class:`Strategy` passes through; a string is parsed with :func:`parse_strategy`."""
    if isinstance(value, Strategy):
        return value
    if isinstance(value, str):
        return parse_strategy(value)
    raise invalid("strategy", value, f"a Strategy or a string {_FORM}")


def pipeline_stages(costs: Any, pp: int) -> tuple[tuple[int, int], ...]:
    """Split layers (in forward order) into ``pp`` contiguous stages of balanced cost.

    The partition minimises the largest stage cost (the pipeline's bottleneck, which
    sets the 1F1B step time), as PipeDream's partitioner does for compute; ties keep
    earlier stages as full as possible.  Every stage gets at least one layer.

    Parameters
    ----------
    costs : sequence of float
        Per-layer cost (the demand uses forward + backward FLOPs per sample).
    pp : int
        Stages, ``1 <= pp <= len(costs)``.

    Returns
    -------
    tuple of (start, stop)
        Half-open layer index ranges, one per stage.

    Notes
    -----
    Exact: binary search on the bottleneck over the O(L^2) candidate stage sums would
    be exact but slow, so the search runs on floats to a relative 1e-12 and then packs
    greedily; O(L log(1/eps)).
    """
    c = [float(x) for x in costs]
    n = len(c)
    _degree("pp", pp)
    if pp > n:
        raise invalid("strategy pp", pp, f"at most the number of layers ({n})")

    def pack(limit: float) -> list[tuple[int, int]] | None:
        # Greedy fill, but leave at least one layer for every remaining stage.
        out, start = [], 0
        for s in range(pp):
            remaining_stages = pp - s - 1
            stop, total = start, 0.0
            while stop < n - remaining_stages and (stop == start or total + c[stop] <= limit):
                total += c[stop]
                stop += 1
            if total > limit:
                return None
            out.append((start, stop))
            start = stop
        return out if start == n else None

    lo, hi = max(c) if c else 0.0, sum(c)
    if hi <= 0:
        # No cost information: equal layer counts.
        bounds = [round(i * n / pp) for i in range(pp + 1)]
        return tuple((bounds[i], bounds[i + 1]) for i in range(pp))
    best = pack(hi)
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = (lo + hi) / 2
        got = pack(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
    if best is None or not math.isfinite(hi):  # pragma: no cover - pack(sum) always fits
        raise InvalidSpecError("invalid layer costs: cannot partition into stages")
    return tuple(best)


# --------------------------------------------------------------------------------------
# A strategy applied to a workload: checks, sharding and stages (used by memory and demand)
# --------------------------------------------------------------------------------------
def is_table(layer: Any) -> bool:
    """Whether ``layer`` is an embedding table that ``embedding=model`` places whole."""
    return layer.kind == "embedding" and layer.lookups > 0 and layer.table_rows > 0


def layer_params_per_gpu(layer: Any, strategy: Strategy) -> tuple[float, float]:
    """Parameters of ``layer`` one GPU holds before ZeRO: ``(shared, expert)``.

    Megatron tensor parallelism divides a ``tp_shardable`` layer by ``tp``; expert
    parallelism divides the experts by ``ep`` (each GPU hosts ``experts / ep`` of
    them, each still split by ``tp`` when the layer is shardable).
    """
    t = strategy.tp if layer.tp_shardable else 1
    expert = float(layer.expert_params)
    shared = float(layer.params) - expert
    return shared / t, expert / (t * strategy.ep)


def check_applicable(workload: Any, strategy: Strategy) -> None:
    """Raise unless ``strategy`` can run ``workload`` (divisibility and support rules).

    Rules: the global batch divides into ``dp x microbatches`` micro-batches of whole
    samples; ``pp`` is at most the layer count; ``tp`` divides the attention heads when
    the workload gives them; ``ep > 1`` needs expert layers whose expert count it
    divides; ZeRO stages 2 and 3 are not combined with pipelining (1F1B accumulates
    gradients over micro-batches; DeepSpeed refuses the combination);
    ``embedding=model`` needs tables and ``tp = pp = 1`` (TopoOpt's hybrid: tables on
    servers, the rest data parallel).

    Raises
    ------
    InvalidSpecError
        The first rule broken, naming the field and what would work.
    """
    s = strategy
    per = s.dp * s.m
    if workload.batch_size % per:
        raise invalid(f"strategy dp*microbatches for {workload.name} (batch_size "
                      f"{workload.batch_size})", per,
                      "a divisor of the global batch (whole samples per micro-batch)")
    if s.pp > len(workload.layers):
        raise invalid("strategy pp", s.pp,
                      f"at most the layer count of {workload.name} ({len(workload.layers)})")
    heads = workload.hyperparameters.get("heads")
    if isinstance(heads, int) and heads % s.tp:
        raise invalid("strategy tp", s.tp, f"a divisor of the attention heads ({heads})")
    if s.ep > 1:
        experts = {layer.experts for layer in workload.layers if layer.experts}
        if not experts:
            raise invalid("strategy ep", s.ep, f"1: {workload.name} has no expert layers")
        bad = sorted(e for e in experts if e % s.ep)
        if bad:
            raise invalid("strategy ep", s.ep, f"a divisor of the expert count ({bad[0]})")
    if s.zero >= 2 and s.pp > 1:
        raise invalid("strategy zero", s.zero,
                      "0 or 1 with pipeline parallelism (stages 2-3 shard gradients that 1F1B "
                      "accumulates over micro-batches)")
    if s.embedding == "model":
        if not any(is_table(layer) for layer in workload.layers):
            raise invalid("strategy embedding", "model",
                          f"data: {workload.name} has no embedding tables")
        if s.tp != 1 or s.pp != 1:
            raise invalid("strategy embedding", "model",
                          "only with tp=1 and pp=1 (tables on servers, the rest data parallel)")


def stage_bounds(workload: Any, strategy: Strategy) -> tuple[tuple[int, int], ...]:
    """Pipeline stages of ``workload``: :func:`pipeline_stages` on training FLOPs per sample."""
    return pipeline_stages([layer.flops for layer in workload.layers], strategy.pp)
