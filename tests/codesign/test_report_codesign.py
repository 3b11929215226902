"""Report: fixed-strategy vs co-designed time per family; duplicates counted once on the front."""

from __future__ import annotations

from codesign.records import RecordWriter
from codesign.app.report import codesign_by_family, write_report


def _rows():
    # (trial, family, degree, fixed time, co-designed time, cost)
    data = [(0, "torus", 4, 1.0, 0.6, 100.0), (1, "torus", 6, 0.9, 0.7, 150.0),
            (2, "fattree", 2, 0.8, 0.5, 300.0), (3, "fattree", 2, 0.8, 0.5, 300.0),
            (4, "ideal", 2, 0.7, 0.7, 400.0)]
    out = []
    for trial, fam, d, fixed, co, cost in data:
        out.append({"study": "s", "trial": trial, "status": "complete", "family": fam,
                    "servers": 16, "degree": d, "link_bandwidth_Bps": 12.5e9,
                    "topology_spec": f"{fam}:{d}", "iteration_time_s": co,
                    "start_iteration_time_s": fixed, "search_evaluations": 8,
                    "cost_usd": cost, "strategy": "dp=128,tp=1,pp=1"})
    return out


def test_codesign_by_family_by_hand():
    import pandas as pd

    rows = {r["family"]: r for r in codesign_by_family(pd.DataFrame(_rows()))}
    assert rows["torus"]["best_fixed_s"] == 0.9 and rows["torus"]["best_codesigned_s"] == 0.6
    assert rows["torus"]["median_gain"] == (1.0 / 0.6 + 0.9 / 0.7) / 2
    # Fixed: ideal 0.7 < fattree 0.8 < torus 0.9; co-designed: fattree 0.5 < torus < ideal.
    assert [rows[f]["rank_fixed"] for f in ("ideal", "fattree", "torus")] == [1, 2, 3]
    assert [rows[f]["rank_codesigned"] for f in ("fattree", "torus", "ideal")] == [1, 2, 3]
    assert rows["torus"]["evaluations"] == 16


def test_report_section_and_duplicate_designs_once_on_the_front(tmp_path):
    RecordWriter(tmp_path / "s" / "records").write(_rows())
    md = write_report(tmp_path / "s")["markdown"].read_text()
    assert "## Co-design per fabric family" in md
    front = md.split("## Pareto front (s)\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in front.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    # trials 2 and 3 are the same design: only trial 2 is on the front
    trials = [int(ln.split("|")[1]) for ln in lines]
    assert 2 in trials and 3 not in trials
    assert "designs on the Pareto front | 2 |" in md  # torus (100, 0.6), fattree (300, 0.5)
