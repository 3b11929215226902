"""The test-suite plumbing of tests/conftest.py: the tests that use Ray share one worker.

Oracle: the files found by scanning for ``ray_shared`` are the files whose collected
tests request the fixture (pytest's own fixture closure), and the xdist work units put
exactly those files' tests in the ``"ray"`` unit.
"""

from __future__ import annotations

from conftest import RAY_UNIT, ray_test_files, work_unit


def test_ray_files_are_the_ones_that_request_the_fixture(request):
    files = ray_test_files()
    assert {"tests/search/test_sweep.py", "tests/codesign/test_cli_sweep.py",
            "tests/search/test_quickstart.py"} <= files
    assert "tests/codesign/test_units.py" not in files
    # Every collected test that requests ray_shared lives in one of those files (all of
    # them in a full run; only this session's when run alone).
    users = {item.nodeid.split("::")[0] for item in request.session.items
             if "ray_shared" in getattr(item, "fixturenames", ())}
    assert users <= files


def test_work_units():
    files = frozenset({"tests/search/test_sweep.py"})
    assert work_unit("tests/search/test_sweep.py::test_x[a-b]", files) == RAY_UNIT
    other = "tests/codesign/test_units.py::test_parse[1GiB]"
    assert work_unit(other, files) == other
