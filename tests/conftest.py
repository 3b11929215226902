"""Shared fixtures of the test suite.

``ray_shared``: one local Ray (2 CPUs) for the whole session.  Starting Ray
costs seconds on an idle machine and far more on a loaded CI box (issue 18:
"The current node timed out during startup"), so every test that needs Ray
requests this fixture (directly or through a module fixture) instead of
starting its own; :func:`search.ray_session.ray_session` reuses an
initialised Ray and leaves it running.  Ray is shut down once, at the end.

With pytest-xdist (the README's ``pytest -n auto``) each worker is its own
session, so the test files that use Ray must all run on one worker for the run to
start one Ray.  :func:`pytest_xdist_make_scheduler` does that: the files whose text
requests ``ray_shared`` form one work unit, every other test is a unit of its own
(as ``--dist load``).  xdist's ``xdist_group`` marks would say the same per test, but
xdist 3.8 groups them by rewriting a node id attribute that pytest 9 no longer
reads, so they are silently ignored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codesign.errors import InvalidSpecError

TESTS = Path(__file__).resolve().parent
#: The work unit of the test files that use Ray.
RAY_UNIT = "ray"


def ray_test_files(root: Path = TESTS) -> frozenset[str]:
    """Paths, relative to the repository as in node ids, of the test files that use Ray."""
    return frozenset(
        path.relative_to(root.parent).as_posix() for path in sorted(root.rglob("test_*.py"))
        if "ray_shared" in path.read_text(encoding="utf-8"))


def work_unit(nodeid: str, ray_files: frozenset[str]) -> str:
    """The xdist work unit of a test: ``"ray"`` for the tests of a Ray file, else itself."""
    return RAY_UNIT if nodeid.split("::", 1)[0] in ray_files else nodeid


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - pytest-xdist is in the test extras
    LoadScopeScheduling = None
else:
    class RayTogetherScheduling(LoadScopeScheduling):
        """``--dist load``, except that the tests of the Ray files go to one worker."""

        ray_files = ray_test_files()

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid, self.ray_files)

    def pytest_xdist_make_scheduler(config, log):
        """Schedule ``-n`` runs with :class:`RayTogetherScheduling` (the default
        ``--dist load`` only; an explicit other ``--dist`` keeps xdist's own)."""
        if config.getvalue("dist") == "load":
            return RayTogetherScheduling(config, log)
        return None


@pytest.fixture(scope="session")
def ray_shared():
    """A local Ray shared by every test that uses it; shut down after the session."""
    pytest.importorskip("ray")
    from search.ray_session import ray_session

    with ray_session(num_cpus=2):
        yield


def _refused(fn, *args, match: str | None = None, **kwargs) -> str:
    with pytest.raises(InvalidSpecError, match=match) as info:
        fn(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    return text


@pytest.fixture(scope="session")   # (a pure function: hypothesis tests may use it)
def refused():
    """``refused(fn, *args, match=None, **kwargs)``: calls ``fn``, asserts it raises a
    one-line :class:`~codesign.errors.InvalidSpecError` (matching ``match``) and returns
    the message (the bad-input tests of the library)."""
    return _refused
