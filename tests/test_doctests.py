"""Every docstring example (``>>>``) in the packages runs and gives the output it shows.

Docstring examples are documentation a reader copies (docs/architecture.md section 8), so
they are tests: one test per module that has examples, run with :mod:`doctest`
(``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``, as ``pytest --doctest-modules`` would with
those flags).  Modules are found by scanning the source text, so collecting this file
imports nothing; a module is imported only when its test runs.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codesign", "topologies", "evaluators", "search")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules_with_examples(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Dotted names of the modules under ``packages`` whose source has a ``>>>`` line."""
    names = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if any(line.lstrip().startswith(">>>") for line in text.splitlines()):
                parts = path.relative_to(root).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                names.append(".".join(parts))
    return names


MODULES = modules_with_examples()


def run_examples(module_name: str) -> doctest.TestResults:
    """Run the examples of one module; return doctest's (failed, attempted) counts."""
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in finder.find(module, module_name):
        runner.run(test)
    return runner.summarize(verbose=False)


def test_examples_are_found():
    # The scan must see the packages' examples (a broken scan would pass vacuously).
    assert len(MODULES) >= 50
    assert "codesign.units" in MODULES and "evaluators.registry" in MODULES


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    failed, attempted = run_examples(module_name)
    assert attempted > 0, f"{module_name}: its >>> lines are in no docstring doctest finds"
    assert failed == 0, f"{failed} of {attempted} docstring examples of {module_name} failed"


def test_a_wrong_example_fails(tmp_path, monkeypatch):
    # The runner reports a failing example (so the tests above can fail).
    (tmp_path / "doctest_probe_mod.py").write_text(
        'def f():\n    """\n    >>> 1 + 1\n    3\n    """\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    failed, attempted = run_examples("doctest_probe_mod")
    assert (failed, attempted) == (1, 1)
