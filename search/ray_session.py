"""Start (or join) Ray for a search loop, and leave other people's Ray alone.

docs/architecture.md section 7: by default Ray runs embedded on the local machine, sized to
it; an address joins an existing cluster.  A loop wraps its work in
:func:`ray_session`; if Ray is already initialised in the process (a notebook,
a test fixture, an outer sweep) that instance is used and is *not* shut down on
exit, otherwise the session starts one and shuts it down afterwards.

Robustness (issue 18)
---------------------
* **Memory cap.**  A local Ray gets an object store of at most
  :data:`OBJECT_STORE_FRACTION` of the memory limit of :mod:`codesign.resources`
  (between Ray's 75 MiB minimum and 2 GiB), and Ray's memory monitor kills the
  newest task once the node uses :data:`MEMORY_USAGE_THRESHOLD` of its memory
  (``RAY_memory_usage_threshold``, Ray's default is 0.95), so one runaway
  evaluation cannot take the machine down.  Both only when the user has not
  set them.
* **Start-up.**  A local start shows one status line (through :func:`set_status`,
  which the CLI points at stderr; the library stays quiet), and Ray's own wait
  for the raylet is bounded (30 s in Ray 2.x).  If the start fails it is retried
  once after a pause that grows with the machine's load (``os.getloadavg``),
  then :class:`RayStartError` says in one line what failed and what to do.
* **Joining.**  Connection and authentication failures become one line naming
  the address and the remedies (the address, ``RAY_AUTH_TOKEN``, no address).
* **Lost workers.**  :func:`describe_ray_error` turns Ray's worker-death,
  out-of-memory and actor errors into one line; :func:`retry_lost_worker` runs a
  deterministic job again once when its worker died.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from codesign.errors import CodesignError, invalid

__all__ = ["ray_session", "RayStartError", "RayWorkerError", "set_status", "describe_ray_error",
           "is_lost_worker", "retry_lost_worker", "OBJECT_STORE_FRACTION",
           "MEMORY_USAGE_THRESHOLD"]

T = TypeVar("T")

#: Share of the memory limit (codesign.resources) given to a local object store.
OBJECT_STORE_FRACTION = 0.25
#: Node memory use at which Ray's memory monitor starts killing tasks (local Ray).
MEMORY_USAGE_THRESHOLD = 0.85
_MIN_STORE = 80 * 2 ** 20        # Ray refuses less than 75 MiB
_MAX_STORE = 2 * 2 ** 30

_status: Callable[[str], None] | None = None


class RayStartError(CodesignError):
    """Ray could not be started locally or joined at an address."""


class RayWorkerError(CodesignError):
    """A Ray worker died (out of memory, crash, node lost) and the retry failed too."""


def set_status(printer: Callable[[str], None] | None) -> None:
    """Where status lines go (``None``: nowhere, the library default)."""
    global _status
    _status = printer


def _say(text: str) -> None:
    if _status is not None:
        _status(text)


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).strip().splitlines()[:1]) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _load_factor() -> float:
    """1 on an idle machine, more when the run queue is longer than the CPUs."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def _local_options(num_cpus: int | None) -> dict[str, Any]:
    from codesign.resources import memory_limit

    store = int(min(max(OBJECT_STORE_FRACTION * memory_limit(), _MIN_STORE), _MAX_STORE))
    return dict(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False, object_store_memory=store)


def _start_local(num_cpus: int | None, quiet: dict[str, Any], *, attempts: int = 2) -> None:
    import ray

    os.environ.setdefault("RAY_memory_usage_threshold", str(MEMORY_USAGE_THRESHOLD))
    options = _local_options(num_cpus)
    _say(f"starting a local Ray ({options['num_cpus']} CPUs, object store "
         f"{options['object_store_memory'] / 2 ** 20:.0f} MiB)...")
    last: BaseException | None = None
    for attempt in range(attempts):
        t0 = time.monotonic()
        try:
            ray.init(**options, **quiet)
            if attempt:
                _say(f"local Ray started on the retry ({time.monotonic() - t0:.0f} s)")
            return
        except Exception as exc:  # Ray raises bare Exception on a start-up timeout
            last = exc
            with contextlib.suppress(Exception):
                ray.shutdown()
            if attempt + 1 < attempts:
                pause = min(30.0, 5.0 * _load_factor())
                _say(f"local Ray did not start ({_first_line(exc)}); retrying once in "
                     f"{pause:.0f} s")
                time.sleep(pause)
    raise RayStartError(
        f"could not start a local Ray after {attempts} attempts ({_first_line(last)}); the "
        f"machine may be overloaded or out of memory: retry when it is quieter, run "
        f"`ray stop` to clear stale Ray processes, or use fewer workers (--workers 0 runs "
        f"without Ray where offered)") from None


#: Seconds to wait for a TCP connection to a cluster address before calling Ray
#: (Ray itself retries an unreachable GCS for minutes).
CONNECT_PROBE_S = 5.0
_CHECK_ADDRESS = ("check the address (`ray status` on the head node prints it; ray://HOST:10001 "
                  "for Ray Client, HOST:6379 on a cluster node)")
_NO_ADDRESS = "or omit --ray-address to run on a local Ray"


def _probe(address: str) -> str | None:
    """Why ``address`` cannot be reached over TCP, or None (also for ``auto``)."""
    import socket

    text = address.split("://", 1)[-1]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None  # "auto" or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)),
                                      timeout=CONNECT_PROBE_S * _load_factor()):
            return None
    except socket.timeout:
        return f"no answer from {host}:{port} within {CONNECT_PROBE_S * _load_factor():.0f} s"
    except OSError as exc:
        return f"{exc.strerror or exc} at {host}:{port}"


def _join(address: str, quiet: dict[str, Any]) -> None:
    import ray

    _say(f"joining the Ray cluster at {address}...")
    unreachable = _probe(address)
    if unreachable:
        raise RayStartError(f"could not join the Ray cluster at {address!r} ({unreachable}); "
                            f"{_CHECK_ADDRESS}, {_NO_ADDRESS}")
    try:
        ray.init(address=address, **quiet)
    except Exception as exc:
        with contextlib.suppress(Exception):
            ray.shutdown()
        text = _first_line(exc)
        auth = any(w in text.lower() for w in ("auth", "token", "unauthenticated",
                                               "permission"))
        hint = ("set RAY_AUTH_TOKEN to the cluster's token (ray get-auth-token on the head "
                "node)" if auth else
                f"{_CHECK_ADDRESS}, set RAY_AUTH_TOKEN if the cluster uses token "
                "authentication")
        raise RayStartError(f"could not join the Ray cluster at {address!r} ({text}); {hint}, "
                            f"{_NO_ADDRESS}") from None


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[bool]:
    """Make sure Ray is initialised for the duration of the ``with`` block.

    Parameters
    ----------
    address : str, optional
        Address of an existing Ray cluster (``"ray://host:10001"``,
        ``"host:6379"`` or ``"auto"``).  ``None`` starts a new local instance
        (never silently joins a cluster found on the machine).
    num_cpus : int, optional
        CPUs of a new local instance (default: every CPU of the machine).
        Ignored when joining a cluster.

    Yields
    ------
    bool
        Whether this session started Ray (and will shut it down).

    Raises
    ------
    RayStartError
        The local start failed twice, or the cluster refused the connection
        (one line: what failed, where, what to try).

    Notes
    -----
    The dashboard is off and Ray's own logging is reduced to errors; worker
    output is not forwarded, so the library stays quiet (docs/architecture.md section 4).
    """
    import ray

    if ray.is_initialized():
        yield False
        return
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int)
                                 or num_cpus < 1):
        raise invalid("num_cpus", num_cpus, "an integer >= 1 or None (all CPUs)")
    quiet = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address:
        _join(address, quiet)
    else:
        _start_local(num_cpus, quiet)
    try:
        with _sigterm_as_interrupt():
            yield True
    finally:
        ray.shutdown()


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler or ``timeout`` stopping the job) unwinds like Ctrl-C.

    ``ray.init`` installs its own fatal-signal handler in this process, which on SIGTERM
    prints native stack dumps and dies without running ``finally`` blocks, so a sweep
    stopped that way lost its pending records.  Raised as ``KeyboardInterrupt`` instead,
    the callers write what they hold and shut Ray down.  Only the main thread can set a
    handler; elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


# ------------------------------------------------------------------ worker errors
_LOST = ("WorkerCrashedError", "OutOfMemoryError", "RayActorError", "ActorDiedError",
         "NodeDiedError", "ObjectLostError", "OwnerDiedError", "ActorUnavailableError",
         "ObjectStoreFullError", "LocalRayletDiedError")


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def is_lost_worker(exc: BaseException) -> bool:
    """Whether ``exc`` says a Ray worker, actor or node died (rather than the job failed)."""
    if _names(exc) & set(_LOST):
        return True
    cause = getattr(exc, "cause", None)
    return isinstance(cause, BaseException) and bool(_names(cause) & set(_LOST))


def describe_ray_error(exc: BaseException) -> str:
    """One line for a Ray error: what failed and what to try."""
    names = _names(exc)
    text = _first_line(exc)
    if "OutOfMemoryError" in names or "ObjectStoreFullError" in names:
        return (f"a Ray worker ran out of memory ({text}); use fewer workers, smaller "
                f"designs, or a lower --max-memory so oversized work is refused up front")
    if is_lost_worker(exc):
        return (f"a Ray worker died ({text}); it was retried where possible; check memory "
                f"(dmesg, `ray memory`) and use fewer workers")
    if "GetTimeoutError" in names:
        return f"a Ray worker did not answer in time ({text}); use fewer workers or designs"
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"a Ray task failed: {type(cause).__name__}: {_first_line(cause)}"
    return f"Ray failed: {type(exc).__name__}: {text}"


def retry_lost_worker(job: Callable[[], T], *, what: str, retries: int = 1) -> T:
    """Run ``job()``; if a Ray worker dies under it, run it again (``retries`` times).

    For deterministic jobs only (the same result on every run), such as the
    alternating optimisation, whose result does not depend on which worker ran
    which evaluation.

    Raises
    ------
    RayWorkerError
        The worker died on the last attempt too (one line, from
        :func:`describe_ray_error`).
    """
    for attempt in range(retries + 1):
        try:
            return job()
        except Exception as exc:
            if not is_lost_worker(exc):
                raise
            if attempt == retries:
                raise RayWorkerError(f"{what}: {describe_ray_error(exc)}") from None
            _say(f"{what}: {describe_ray_error(exc)}; retrying")
    raise AssertionError("unreachable")  # pragma: no cover
