"""Shared fixtures of the test suite.

``ray_shared``: one local Ray (2 CPUs) for the whole session.  Starting Ray
costs seconds on an idle machine and far more on a loaded CI box (issue 18:
"The current node timed out during startup"), so every test that needs Ray
requests this fixture (directly or through a module fixture) instead of
starting its own; :func:`search.ray_session.ray_session` reuses an
initialised Ray and leaves it running.  Ray is shut down once, at the end.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_shared():
    """A local Ray shared by every test that uses it; shut down after the session."""
    pytest.importorskip("ray")
    from search.ray_session import ray_session

    with ray_session(num_cpus=2):
        yield
