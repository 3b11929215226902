"""Start (or join) Ray for a search loop, and leave other people's Ray alone.

DESIGN.md section 7: by default Ray runs embedded on the local machine, sized to
it; an address joins an existing cluster.  A loop wraps its work in
:func:`ray_session`; if Ray is already initialised in the process (a notebook,
a test fixture, an outer sweep) that instance is used and is *not* shut down on
exit, otherwise the session starts one and shuts it down afterwards.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from codesign.errors import invalid

__all__ = ["ray_session"]


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

    Notes
    -----
    The dashboard is off and Ray's own logging is reduced to errors; worker
    output is not forwarded, so the library stays quiet (DESIGN.md section 4).
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
        ray.init(address=address, **quiet)
    else:
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                 include_dashboard=False, **quiet)
    try:
        yield True
    finally:
        ray.shutdown()
