"""Device placement: GPU ranks onto servers, parallel groups, and embedding tables.

Rank layout
-----------
A strategy ``dp=D,tp=T,pp=P`` gives each GPU three coordinates ``(t, d, p)``.  The
global rank lists them with the **first axis of** ``order`` **varying fastest**; the
default ``order=("tp", "dp", "pp")`` is Megatron-LM's (``initialize_model_parallel``:
tensor-parallel innermost, then data-parallel, pipeline outermost)::

    rank = t + T * (d + D * p)

so a TP group is ``T`` consecutive ranks (on one server when ``T`` divides the GPUs per
server) and a pipeline stage is ``T x D`` consecutive ranks.  Ranks fill servers in
order: ``server(rank) = rank // gpus_per_server``.  Context parallelism (``cp=C``) splits
the data axis: its ``D x C`` positions are ``d' = c + C d`` (context-parallel index
innermost, Megatron-LM's ``tp-cp-dp-pp`` order), so a CP group is ``C`` neighbours on
the data axis and the gradient group of a stage is all ``D x C`` of them (CP ranks hold
the same weights).  Expert-parallel groups (``ep=E``)
are ``E`` neighbours on that data axis: ``d' = E * b + e`` with ``e`` the expert-parallel
index, ``b`` the expert-replica index (Megatron-LM's ``tp-ep-dp-pp`` order; with context
parallelism a group spans context-parallel ranks first, as Megatron-core's expert rank
generator lays ETP-EP-EDP over the ``tp x cp x dp`` ranks).

Embedding tables (``embedding=model``)
--------------------------------------
Table ``i`` goes whole onto server ``table_servers[i]``; by default round robin,
``i mod servers``.  An explicit list gives one server per table (TopoOpt Sec. 2.1 puts
``E0..E3`` on ``S0, S3, S8, S13``).  Inside its server a table goes to the server's GPUs
round robin in the order tables arrive there (the ``k``-th table placed on a server
sits on its GPU ``k mod gpus_per_server``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.errors import InvalidSpecError, invalid
from codesign.specs import check_int
from codesign.workloads.strategy import Strategy

__all__ = ["Placement", "AXES", "DEFAULT_ORDER"]

AXES = ("tp", "dp", "pp")
DEFAULT_ORDER = ("tp", "dp", "pp")
_MAX = 10**7


def _count(name: str, value: Any) -> int:
    return check_int(f"placement {name}", value, 1, _MAX)


@dataclass(frozen=True)
class Placement:
    """Where GPU ranks and embedding tables live.

    Parameters
    ----------
    servers : int
        Servers of the job (``S0 .. S{servers-1}``).
    gpus_per_server : int
        GPUs per server; ``servers x gpus_per_server`` must equal the strategy's GPUs.
    order : tuple of str
        A permutation of ``("tp", "dp", "pp")``, fastest-varying first (module docstring).
    table_servers : tuple of int or None
        Server of each embedding table for ``embedding=model``; ``None`` = round robin.

    Examples
    --------
    >>> p = Placement(servers=2, gpus_per_server=8)
    >>> int(p.server_array()[9])
    1
    """

    servers: int
    gpus_per_server: int = 1
    order: tuple[str, ...] = DEFAULT_ORDER
    table_servers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _count("servers", self.servers)
        _count("gpus_per_server", self.gpus_per_server)
        order = tuple(self.order) if isinstance(self.order, (list, tuple)) else self.order
        if not isinstance(order, tuple) or sorted(order) != sorted(AXES):
            raise invalid("placement order", self.order,
                          "a permutation of tp, dp, pp (fastest-varying first)")
        object.__setattr__(self, "order", order)
        if self.table_servers is not None:
            ts = self.table_servers
            if isinstance(ts, (str, bytes)) or not isinstance(ts, Sequence) or not ts:
                raise invalid("placement table_servers", ts, "a non-empty list of server ids")
            for s in ts:
                if isinstance(s, bool) or not isinstance(s, (int, np.integer)) \
                        or not 0 <= s < self.servers:
                    raise invalid("placement table_servers entry", s,
                                  f"a server id in 0..{self.servers - 1}")
            object.__setattr__(self, "table_servers", tuple(int(s) for s in ts))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def for_strategy(cls, strategy: Strategy, gpus_per_server: int, *,
                     order: Sequence[str] = DEFAULT_ORDER,
                     table_servers: Sequence[int] | None = None) -> Placement:
        """Pack the strategy's GPUs onto full servers of ``gpus_per_server`` GPUs.

        A job smaller than one server uses one server with ``dp x tp x pp`` GPUs.

        Raises
        ------
        InvalidSpecError
            The GPU count is not a multiple of ``gpus_per_server``.
        """
        _count("gpus_per_server", gpus_per_server)
        world = strategy.gpus
        per = min(world, gpus_per_server)
        if world % per:
            raise invalid("strategy dp*tp*pp*cp", world,
                          f"a multiple of gpus_per_server ({gpus_per_server}) to fill servers")
        return cls(servers=world // per, gpus_per_server=per, order=tuple(order),
                   table_servers=None if table_servers is None else tuple(table_servers))

    # ------------------------------------------------------------------ basics
    @property
    def gpus(self) -> int:
        """GPUs of the job: ``servers x gpus_per_server``."""
        return self.servers * self.gpus_per_server

    def server_array(self) -> np.ndarray:
        """``server_array()[rank]`` = server of every rank (int64 array)."""
        return np.arange(self.gpus, dtype=np.int64) // self.gpus_per_server

    def check(self, strategy: Strategy) -> None:
        """Raise unless this placement holds exactly the strategy's GPUs."""
        if strategy.gpus != self.gpus:
            raise InvalidSpecError(
                f"invalid placement {self.servers}x{self.gpus_per_server} GPUs: strategy "
                f"{strategy} uses dp*tp*pp*cp = {strategy.gpus} GPUs; use servers x "
                f"gpus_per_server = {strategy.gpus}")

    # ------------------------------------------------------------------ rank layout
    def rank_grid(self, strategy: Strategy) -> np.ndarray:
        """``grid[t, d, p]`` = global rank of TP index ``t``, data index ``d``, stage ``p``.

        The data axis has ``dp x cp`` positions (module docstring)."""
        self.check(strategy)
        data = strategy.data_ranks
        size = {"tp": strategy.tp, "dp": data, "pp": strategy.pp}
        stride, strides = 1, {}
        for axis in self.order:
            strides[axis] = stride
            stride *= size[axis]
        t = np.arange(strategy.tp)[:, None, None] * strides["tp"]
        d = np.arange(data)[None, :, None] * strides["dp"]
        p = np.arange(strategy.pp)[None, None, :] * strides["pp"]
        return (t + d + p).astype(np.int64)

    def rank(self, strategy: Strategy, *, t: int = 0, d: int = 0, p: int = 0) -> int:
        """Global rank of coordinates ``(t, d, p)``."""
        return int(self.rank_grid(strategy)[t, d, p])

    def tp_groups(self, strategy: Strategy, stage: int) -> list[tuple[int, ...]]:
        """Tensor-parallel groups of pipeline stage ``stage``, one per DP index."""
        g = self.rank_grid(strategy)
        return [tuple(int(r) for r in g[:, d, stage]) for d in range(strategy.data_ranks)]

    def cp_groups(self, strategy: Strategy, stage: int) -> list[tuple[int, ...]]:
        """Context-parallel groups of stage ``stage`` (ring order), one per (t, d)."""
        g = self.rank_grid(strategy)
        c = strategy.cp
        return [tuple(int(r) for r in g[t, d * c:(d + 1) * c, stage])
                for t in range(strategy.tp) for d in range(strategy.dp)]

    def dp_groups(self, strategy: Strategy, stage: int) -> list[tuple[int, ...]]:
        """Gradient groups of stage ``stage``: the ``dp x cp`` ranks of each TP index."""
        g = self.rank_grid(strategy)
        return [tuple(sorted(int(r) for r in g[t, :, stage])) for t in range(strategy.tp)]

    def _expert_grid(self, strategy: Strategy, stage: int) -> np.ndarray:
        """Ranks of stage ``stage`` as ``[etp index, ep index, expert-dp index]``.

        Without folding (``etp = tp``) every TP index has its own expert grid over the
        data axis (``ep`` consecutive DP indices form an expert-parallel group); with
        ``etp = 1`` the ``tp x dp`` ranks, TP index fastest, are laid out expert-parallel
        first, then expert-data-parallel (Megatron-core's expert rank order: ETP, EP,
        EDP)."""
        g = self.rank_grid(strategy)[:, :, stage]      # [tp, dp x cp]
        e = strategy.ep
        if strategy.expert_tp == strategy.tp:
            return g.reshape(strategy.tp, g.shape[1] // e, e).transpose(0, 2, 1)
        flat = g.T.reshape(-1)               # TP index fastest, then the dp x cp data axis
        return flat.reshape(flat.size // e, e).T[None, :, :]

    def ep_groups(self, strategy: Strategy, stage: int) -> list[tuple[int, ...]]:
        """Expert-parallel groups of stage ``stage`` (:meth:`_expert_grid`): without
        folding ``ep`` consecutive DP indices of each TP index, with ``etp = 1`` ``ep``
        consecutive ranks of the stage's ``tp x dp`` (TP index fastest)."""
        x = self._expert_grid(strategy, stage)
        return [tuple(sorted(int(r) for r in x[t, :, b]))
                for t in range(x.shape[0]) for b in range(x.shape[2])]

    def expert_dp_groups(self, strategy: Strategy, stage: int) -> list[tuple[int, ...]]:
        """Groups holding replicas of the same experts: same expert-parallel index,
        every expert-data-parallel one."""
        x = self._expert_grid(strategy, stage)
        return [tuple(sorted(int(r) for r in x[t, k, :]))
                for t in range(x.shape[0]) for k in range(x.shape[1])]

    def stage_ranks(self, strategy: Strategy, stage: int) -> tuple[int, ...]:
        """Every rank of pipeline stage ``stage`` (sorted)."""
        return tuple(sorted(int(r) for r in self.rank_grid(strategy)[:, :, stage].ravel()))

    # ------------------------------------------------------------------ tables
    def table_server_list(self, tables: int) -> tuple[int, ...]:
        """Server of each of ``tables`` embedding tables (explicit or round robin).

        Raises
        ------
        InvalidSpecError
            An explicit list whose length is not ``tables``.
        """
        if self.table_servers is None:
            return tuple(i % self.servers for i in range(tables))
        if len(self.table_servers) != tables:
            raise invalid("placement table_servers", list(self.table_servers),
                          f"one server per embedding table ({tables} tables)")
        return self.table_servers

    def table_ranks(self, tables: int) -> tuple[int, ...]:
        """GPU rank of each table: its server's GPUs round robin (module docstring)."""
        seen = [0] * self.servers
        out = []
        for s in self.table_server_list(tables):
            out.append(s * self.gpus_per_server + seen[s] % self.gpus_per_server)
            seen[s] += 1
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"servers": self.servers, "gpus_per_server": self.gpus_per_server,
                "order": list(self.order),
                "table_servers": None if self.table_servers is None
                else list(self.table_servers)}
