"""Every script under ``experiments/`` still imports: its imports name modules that exist.

The scripts are run by hand (benchmarks, reproductions, validation), not by the suite, so
a module moved inside the packages could leave one broken unnoticed
(``bench_reconfig.py`` imported ``search.alternating`` months after it had become
``search.topoopt.alternating``).  Importing a script runs its top level only; each guards
its work with ``if __name__ == "__main__"``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
SCRIPTS = sorted(EXPERIMENTS.rglob("*.py"))


def test_there_are_scripts():
    assert len(SCRIPTS) >= 40


@pytest.mark.parametrize("path", SCRIPTS, ids=[str(p.relative_to(EXPERIMENTS))
                                               for p in SCRIPTS])
def test_script_imports(path, monkeypatch):
    name = f"_experiment_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # As ``python script.py`` would: its folder first on the path (helpers beside it),
    # and registered so that dataclasses can find their module.
    monkeypatch.syspath_prepend(str(path.parent))
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    assert module.__name__ != "__main__"
