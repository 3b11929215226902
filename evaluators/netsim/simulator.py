"""Front door of the network simulator: the model registry and :func:`simulate`.

The three models of docs/architecture.md section 5 are registered here by name
(``--model`` on the command line):

* ``analytical`` - ASTRA-sim's congestion-unaware formula
  (:mod:`evaluators.netsim.analytical`);
* ``congestion`` - FIFO store-and-forward per hop
  (:mod:`evaluators.netsim.congestion`);
* ``flow`` - max-min fair bandwidth sharing (:mod:`evaluators.netsim.flow`).

A new model registers ``run(topology, batch, **options) -> SimResult`` with
:func:`register_model`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from codesign.errors import invalid
from codesign.specs import check_choice
from evaluators.netsim import analytical, congestion, flow
from evaluators.netsim.core import Message, Messages, SimResult, check_topology

__all__ = ["NetworkModel", "MODELS", "register_model", "model_names", "simulate"]


@dataclass(frozen=True)
class NetworkModel:
    """A registered network model.

    Attributes
    ----------
    name : str
        ``--model`` name.
    run : callable
        ``run(topology, batch, **options) -> SimResult``.
    options : tuple of str
        Keyword options ``run`` accepts.
    link_model : str
        ``Schedule.metadata["link_model"]`` of schedules it re-times:
        ``"exclusive"``, ``"shared"`` or ``"none"`` (no contention modelled).
    summary : str
        One line for help texts.
    """

    name: str
    run: Callable[..., SimResult]
    options: tuple[str, ...]
    link_model: str
    summary: str


MODELS: dict[str, NetworkModel] = {}


def register_model(name: str, run: Callable[..., SimResult], *, options: Iterable[str] = (),
                   link_model: str, summary: str = "") -> None:
    """Register ``run`` as the network model ``name``."""
    if name in MODELS:
        raise ValueError(f"network model {name!r} registered twice")
    MODELS[name] = NetworkModel(name, run, tuple(options), link_model, summary)


register_model("analytical", analytical.run, link_model="none",
               summary="ASTRA-sim congestion-unaware: hops * latency + size / bandwidth")
register_model("congestion", congestion.run, options=("order",), link_model="exclusive",
               summary="store-and-forward per hop, one message per link at a time "
                       "(order: fifo or schedule)")
register_model("flow", flow.run, options=("on_rates",), link_model="shared",
               summary="max-min fair sharing of link bandwidth among active flows")


def model_names() -> list[str]:
    """Names of the registered network models, sorted."""
    return sorted(MODELS)


def get_model(name: str, options: Iterable[str] = ()) -> NetworkModel:
    """The registered model ``name``; raises InvalidSpecError listing valid names/options."""
    # check_choice: an unhashable name (a list) is refused, not a TypeError of dict.get.
    m = MODELS[check_choice("network model", name, model_names())]
    unknown = [k for k in options if k not in m.options]
    if unknown:
        allowed = ", ".join(m.options) if m.options else "none"
        raise invalid(f"option for network model {name!r}", unknown[0], f"one of: {allowed}")
    return m


def simulate(topology, messages: Messages | Sequence[Message | Sequence[Any]], *,
             model: str = "congestion", **options: Any) -> SimResult:
    """Simulate point-to-point messages on a network.

    Parameters
    ----------
    topology : topologies.Topology
        The network.
    messages : Messages or sequence of Message or tuple
        What to send: :class:`Message` objects or tuples ``(src, dst,
        size_bytes[, ready_s[, path[, deps]]])`` (sizes in bytes, times in
        seconds; ``path`` defaults to ``topology.route(src, dst)``; ``deps``
        are indices of messages that must finish first), or a prebuilt
        :class:`Messages` batch.
    model : str
        ``"analytical"``, ``"congestion"`` (default) or ``"flow"``.
    **options
        Model options (``congestion``: ``order`` = ``"fifo"`` | ``"schedule"``
        | per-hop keys; ``flow``: ``on_rates``); unknown options are errors.

    Returns
    -------
    SimResult
        Per-message ready/start/finish times (s), makespan (s), per-link busy
        time (s), bytes and utilisation.

    Raises
    ------
    InvalidSpecError
        Unknown model or option, a ``topology`` that is not a Topology, ``messages``
        that are not a sequence, bad messages (endpoints, sizes, paths), or cyclic
        dependencies.

    Examples
    --------
    >>> from topologies.registry import from_spec
    >>> t = from_spec("ring:4,bw=1GB/s,lat=1us")
    >>> r = simulate(t, [(0, 1, 1e6), (0, 1, 1e6)], model="congestion")
    >>> [round(x * 1e6, 3) for x in r.finish_s.tolist()]   # second waits for the first
    [1001.0, 2002.0]
    """
    m = get_model(model, options)
    check_topology(topology)
    batch = messages if isinstance(messages, Messages) else Messages.from_list(topology, messages)
    return m.run(topology, batch, **options)
