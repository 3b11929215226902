"""`codesign synth --algorithm mcf` and `codesign bound --method mcf`."""

from __future__ import annotations

import json
import math

from codesign.app.cli import main
from evaluators.collectives import Collective
from evaluators.mcf import fluid_optimum
from topologies.registry import from_spec


def _run(capsys, argv):
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_synth_mcf_reports_optimum(capsys):
    code, out = _run(capsys, ["synth", "ring:4", "--collective", "allgather", "--size", "4MB",
                              "--algorithm", "mcf", "--option", "epsilon=0.05", "--json"])
    assert code == 0 and out["valid"] is True
    r = fluid_optimum(from_spec("ring:4"), Collective.on("allgather", 4, 4e6))
    assert math.isclose(out["fluid_time_s"], r.time_s, rel_tol=1e-9)
    assert out["optimal"] is True and out["dual_gap"] < 1e-6
    # within 5% of R plus one latency (1 us) per step (T = 2)
    assert out["time_s"] <= r.time_s * 1.05 + 2e-6 + 1e-12


def test_bound_mcf_and_default_cut(capsys):
    code, out = _run(capsys, ["bound", "torus:3x3", "--collective", "alltoall", "--size", "9MB",
                              "--method", "mcf", "--json"])
    assert code == 0 and out["method"] == "mcf"
    r = fluid_optimum(from_spec("torus:3x3"), Collective.on("alltoall", 9, 9e6))
    assert math.isclose(out["lower_bound_s"], r.time_s, rel_tol=1e-12)
    assert out["optimal"] is True and out["dual_gap"] < 1e-6
    code, cut = _run(capsys, ["bound", "torus:3x3", "--collective", "alltoall", "--size", "9MB",
                              "--json"])
    assert "method" not in cut
    assert cut["lower_bound_s"] <= out["lower_bound_s"] * (1 + 1e-9)


def test_bound_rejects_unknown_method(capsys):
    import pytest

    with pytest.raises(SystemExit) as err:
        main(["bound", "ring:4", "--collective", "allgather", "--size", "1MB", "--method", "x"])
    assert err.value.code == 2


def test_bound_mcf_mirrored_option(capsys):
    code, out = _run(capsys, ["bound", "torus:3x3", "--collective", "allgather", "--size", "9MB",
                              "--method", "mcf", "--option", "decomposition=mirrored", "--json"])
    assert code == 0 and out["decomposition"] == "mirrored"
    r = fluid_optimum(from_spec("torus:3x3"), Collective.on("allgather", 9, 9e6))
    assert math.isclose(out["lower_bound_s"], r.time_s, rel_tol=1e-6)
    st = out["decomposition_stats"]
    assert st["classes"] == 1 and st["units"] == 1 and st["r_gap"] <= 1e-6
    assert out["optimal"] is True


def test_bound_bad_options_exit_2(capsys):
    for argv in (["--method", "mcf", "--option", "decomposition=magic"],
                 ["--method", "mcf", "--option", "colour=red"],
                 ["--option", "decomposition=dw"]):
        code = main(["bound", "ring:4", "--collective", "allgather", "--size", "1MB", *argv])
        assert code == 2
        assert "Traceback" not in capsys.readouterr().err
