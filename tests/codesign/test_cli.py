"""Command-line contract: --json output, one-line errors and exit code 2 on bad input."""

import json
import subprocess
import sys

import pytest

from codesign.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topology_show_json_counts(capsys):
    code, out, _ = run(capsys, "topology", "show", "torus:4x4x4", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["npus"], data["switches"], data["links"], data["diameter"]) == (64, 0, 384, 6)
    assert data["injection_Bps"] == pytest.approx(6 * 25e9)


@pytest.mark.parametrize("spec, needle", [
    ("torus:0x4", "torus shape"),
    ("ring:abc", "ring shape"),
    ("ring:8,bw=-5Gbps", "ring bw"),
    ("nosuchfamily:4", "topology family"),
    ("ring:8,colour=red", "ring key"),
    ("mesh:4x4,bw=1GB/s:2GB/s:3GB/s", "mesh bw"),
])
def test_bad_specs_exit_2_with_one_line(capsys, spec, needle):
    code, out, err = run(capsys, "topology", "show", spec)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_usage_errors_are_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["topology", "show"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1


def test_console_script_runs():
    proc = subprocess.run([sys.executable, "-m", "codesign", "topology", "show", "ring:4",
                           "--json"], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["links"] == 8
