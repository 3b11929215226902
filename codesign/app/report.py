"""The report of a results folder: cost-vs-time Pareto front, plot, Markdown and HTML.

``codesign report RESULTS_DIR`` calls :func:`write_report`.  It reads the
records (:func:`codesign.records.load_records`), finds, per study, the designs
that no other design beats on both iteration time and network cost (both
minimised, :func:`pareto_mask`), and writes next to the records (or into
``out_dir``):

* ``pareto.png`` -- every complete design, cost (x) against iteration time (y),
  coloured by topology family, the front joined by a step line;
* ``report.md`` and ``report.html`` -- the same content: summary, the plot,
  the Pareto front, the best design per budget, the sensitivity of each
  objective to each parameter, per-workload tables (sweeps), every trial
  (pruned and failed ones with their reason) and the provenance (seeds,
  configuration hashes, samplers, objectives, package versions, time range);
* with procurement columns (a sweep with a ``procurement`` mapping): a
  "Procurement" section, per budget the fastest affordable design's days to train,
  USD per run and TCO, and ``procurement.png``
  (:func:`codesign.app.procurement_report.sweep_procurement_section`).

Best design per budget: for each budget ``B`` (the studies' ``budget_usd`` and
the 25/50/75/100 % quantiles of the complete designs' costs), the complete
design with the smallest iteration time among those costing at most ``B``.

Sensitivity (:func:`sensitivity`): for every parameter and objective, the
median of the objective over the complete designs grouped by the parameter's
value (with counts), and for numeric parameters (degree, link rate, servers)
Spearman's rank correlation between parameter and objective (Pearson on
average ranks; ties share their mean rank).  Medians say *how much* each value
changes the objective, the rank correlation says whether it moves
monotonically; both are descriptive (the sampler decides which designs exist).

This is a top-layer front end (docs/architecture.md section 2): it only reads records.
matplotlib is driven through its object API with the Agg canvas, so no global
backend is changed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import CodesignError, InvalidSpecError, invalid
from codesign.files import check_output_folder
from codesign.units import format_bandwidth, format_time

__all__ = ["pareto_mask", "sensitivity", "spearman", "best_per_budget", "write_report",
           "codesign_by_family", "DESIGN_KEY", "md_table", "html_table", "new_axes",
           "save_axes", "write_pages"]

#: Objective columns of the front: (x, y) = (cost, time), both minimised.
OBJECTIVES = ("cost_usd", "iteration_time_s")
#: Columns that identify a design: records equal in all of them are one design.
DESIGN_KEY = ("study", "family", "servers", "degree", "link_bandwidth_Bps", "gpu",
              "collective_method", "topology_spec", "workload_mix_json", "params_json")


def pareto_mask(points: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Which points are Pareto-optimal when both coordinates are minimised.

    Point ``a`` dominates ``b`` if ``a <= b`` in both coordinates and ``a < b``
    in at least one.  A point is on the front if no point dominates it; equal
    points do not dominate each other, so duplicates on the front are all kept.
    Rows with a non-finite coordinate are never on the front (and dominate
    nothing).

    Parameters
    ----------
    points : array_like, shape (n, 2)
        For example ``(cost_usd, iteration_time_s)`` per design.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        True for the non-dominated points.

    Notes
    -----
    Exact, O(n log n): sort by x then y; a point is dominated iff some point
    with a strictly smaller x has y <= its y (prefix minimum) or a point with
    the same x has a strictly smaller y.

    Examples
    --------
    >>> pareto_mask([[1, 5], [2, 2], [3, 3], [2, 2], [0, 9]]).tolist()
    [True, True, False, True, True]
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise invalid("points shape", pts.shape, "(n, 2): one (x, y) pair per design")
    mask = np.zeros(len(pts), dtype=bool)
    ok = np.flatnonzero(np.isfinite(pts).all(axis=1))
    if ok.size == 0:
        return mask
    x, y = pts[ok, 0], pts[ok, 1]
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    new_group = np.r_[True, xs[1:] != xs[:-1]]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(xs.size), 0))
    group_min_y = ys[group_start]  # sorted by y within equal x: first is the minimum
    prefix_min = np.minimum.accumulate(ys)
    # Minimum y over points with strictly smaller x: the prefix minimum just before the group.
    before = np.where(group_start > 0, prefix_min[np.maximum(group_start - 1, 0)], np.inf)
    dominated = (before <= ys) | (ys > group_min_y)
    mask[ok[order]] = ~dominated
    return mask


# ---------------------------------------------------------------- formatting
def _finite(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _if_finite(fmt: Callable[[float], str]) -> Callable[[Any], str]:
    """A cell formatter: ``fmt`` of a finite number, an empty cell otherwise."""
    return lambda v: fmt(float(v)) if _finite(v) else ""


_fmt_time = _if_finite(format_time)
_fmt_usd = _if_finite(lambda v: f"${v:,.0f}")
_fmt_rate = _if_finite(lambda v: format_bandwidth(v, bits=True))
_fmt_num = _if_finite(lambda v: f"{v:.3g}")
_fmt_tput = _if_finite(lambda v: f"{v:.3e}")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    try:
        import pandas as pd

        if pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    return str(v)


#: The report's table columns, defined once: heading -> (record key, cell formatter).
_COLUMNS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "budget": ("budget_usd", _fmt_usd), "trial": ("trial", _cell),
    "status": ("status", _cell), "family": ("family", _cell), "degree": ("degree", _cell),
    "link rate": ("link_bandwidth_Bps", _fmt_rate),
    "per server": ("server_bandwidth_Bps", _fmt_rate), "topology": ("topology_spec", _cell),
    "strategy": ("strategy", _cell), "iteration time": ("iteration_time_s", _fmt_time),
    "compute": ("compute_time_s", _fmt_time),
    "exposed comm.": ("exposed_communication_s", _fmt_time),
    "bandwidth tax": ("bandwidth_tax", _fmt_num), "cost": ("cost_usd", _fmt_usd),
    "switches": ("switches", _cell), "links": ("links", _cell),
    "diameter": ("diameter", _cell), "Pareto": ("pareto", lambda v: "yes" if v else ""),
    "reason": ("reason", _cell), "others within model error": ("close", _cell)}
_FRONT_COLUMNS = ("trial", "family", "degree", "link rate", "per server", "topology",
                  "strategy", "iteration time", "cost", "switches", "links", "diameter")
_ALL_COLUMNS = ("trial", "status", "family", "degree", "link rate", "topology",
                "iteration time", "cost", "Pareto", "reason")


def _rows(records, headings) -> tuple[list[str], list[list[str]]]:
    """Head and text cells of a table of ``records`` (dicts) in the columns ``headings``."""
    return list(headings), [[_COLUMNS[h][1](rec.get(_COLUMNS[h][0])) for h in headings]
                            for rec in records]


# ------------------------------------------- pages, tables, plots (both reports)
def md_table(head: list[str], body: list[list[str]]) -> str:
    """A Markdown table of text cells (``|`` escaped, newlines folded)."""
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def html_table(head: list[str], body: list[list[str]]) -> str:
    """The same table in HTML (cells escaped)."""
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "\n".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                    for row in body)
    return f"<table>\n<thead><tr>{th}</tr></thead>\n<tbody>\n{trs}\n</tbody>\n</table>"


# ------------------------------------------------------ budgets, sensitivity
#: Parameters whose influence the sensitivity section reports: (column, label, numeric).
PARAMETERS = (("family", "family", False), ("degree", "degree", True),
              ("link_bandwidth_Bps", "link rate", True), ("servers", "servers", True),
              ("gpu", "GPU", False), ("collective_method", "collective method", False),
              ("strategy", "strategy", False), ("workload", "workload", False))


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of two equally long samples.

    Pearson correlation of the average ranks (ties share the mean of their ranks).
    ``nan`` when fewer than 3 pairs are finite or either sample is constant.

    Examples
    --------
    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40])
    1.0
    >>> spearman([1, 2, 3, 4], [4, 3, 2, 1])
    -1.0
    """
    import pandas as pd

    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    ra = pd.Series(a[ok]).rank(method="average").to_numpy()
    rb = pd.Series(b[ok]).rank(method="average").to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _objectives(frame) -> list[str]:
    cols = ["iteration_time_s", "cost_usd", "throughput_per_usd", "exposed_communication_s"]
    return [c for c in cols if c in frame and frame[c].notna().any()]


def sensitivity(frame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Grouped medians and rank correlations of the objectives against the parameters.

    Parameters
    ----------
    frame : pandas.DataFrame
        Records (only ``status == "complete"`` rows are used).

    Returns
    -------
    medians : list of dict
        One row per (parameter, value): ``parameter``, ``value``, ``designs`` and the
        median of each objective column.
    correlations : list of dict
        One row per numeric parameter that varies: ``parameter`` and Spearman's rho
        against each objective column.
    """
    done = frame[frame["status"] == "complete"]
    objectives = _objectives(done)
    medians: list[dict[str, Any]] = []
    correlations: list[dict[str, Any]] = []
    for col, label, numeric in PARAMETERS:
        if col not in done or done[col].dropna().nunique() < 2:
            continue
        for value, group in sorted(done.groupby(col), key=lambda g: str(g[0]) if not numeric
                                   else float(g[0])):
            medians.append({"parameter": label, "column": col, "value": value,
                            "designs": len(group),
                            **{o: float(group[o].astype(float).median()) for o in objectives}})
        if numeric:
            correlations.append({"parameter": label, **{
                o: spearman(done[col].astype(float), done[o].astype(float))
                for o in objectives}})
    return medians, correlations


def best_per_budget(frame) -> list[dict[str, Any]]:
    """For each budget, the fastest complete design whose network costs at most that much.

    Budgets: the distinct ``budget_usd`` values of the records and the 25, 50, 75 and
    100 % quantiles of the complete designs' costs, ascending.
    """
    done = frame[(frame["status"] == "complete") & frame["cost_usd"].notna()
                 & frame["iteration_time_s"].notna()]
    if len(done) == 0:
        return []
    costs = done["cost_usd"].astype(float)
    budgets = set(float(b) for b in np.quantile(costs.to_numpy(), [0.25, 0.5, 0.75, 1.0]))
    if "budget_usd" in frame:
        budgets |= set(float(b) for b in frame["budget_usd"].dropna())
    from search.budget import best_per_budget as pick

    times = done["iteration_time_s"].astype(float)
    trials = done["trial"].tolist() if "trial" in done else [None] * len(done)
    # Key (trial, row position): ties in time and cost go to the smaller trial.
    keys = list(zip(trials, range(len(done))))
    designs = list(zip(keys, costs.tolist(), times.tolist()))
    budgets = sorted(budgets)
    # Designs of one GPU type and one workload mix differ as the validation's comparable
    # runs do (evaluators.iteration.uncertainty): the error of a comparison applies;
    # across GPUs or studies, the error of one predicted time.
    one_kind = all(c not in done or done[c].nunique() <= 1
                   for c in ("gpu", "workload_mix_json", "study"))
    out = []
    for budget, p in zip(budgets, pick(designs, budgets)):
        if p.best is None:
            out.append({"budget_usd": budget})
            continue
        best = done.iloc[p.best[1]].to_dict()
        err = _model_error(best.get("gpu"), comparison=one_kind,
                           mix_json=best.get("workload_mix_json"))
        close = None
        if err is not None:
            # Other designs within the model's validated error of the best are not ranked
            # against it (search.budget, issue 17).
            close = len(pick(designs, [budget], err)[0].close)
        out.append({**best, "budget_usd": budget, "model_error": err,
                    "within_model_error": close})
    return out


def _model_error(gpu: Any, *, comparison: bool = False,
                 mix_json: Any = None) -> float | None:
    """The validated relative error of the compute model for GPU ``gpu`` (built-in
    catalog) -- of one predicted time, or with ``comparison`` of comparing two designs
    on that GPU and workload -- or None when it has no calibrated profile, or when the
    design's workload mix (``mix_json``, the records' ``workload_mix_json``) holds a
    workload the validation does not cover (mixture-of-experts, recommendation or
    MLP-only models: :func:`evaluators.iteration.uncertainty.validation_gap`) or that cannot be
    rebuilt (a model file gone since the sweep): no error is claimed for those."""
    import json

    from codesign.workloads import get_hardware
    from evaluators.iteration.uncertainty import comparison_error, validated_error
    from search.sweeps.spec import WorkloadItem

    try:
        workloads = []
        if isinstance(mix_json, str) and mix_json:
            workloads = [WorkloadItem(**{**item, "options": tuple(
                tuple(kv) for kv in item.get("options") or ())}).load()
                for item in json.loads(mix_json)]
        return (comparison_error if comparison else validated_error)(get_hardware(gpu),
                                                                     workloads)
    except (CodesignError, TypeError, ValueError, OSError):
        return None


def _per_workload(frame) -> dict[str, list[dict[str, Any]]]:
    """Rows per workload from the ``per_workload_json`` column of complete records."""
    import json

    if "per_workload_json" not in frame:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    done = frame[(frame["status"] == "complete") & frame["per_workload_json"].notna()]
    for rec in done.to_dict("records"):
        for item in json.loads(rec["per_workload_json"]):
            name = item.get("workload", "?") + (f" ({item['config']})" if item.get("config")
                                                else "")
            out.setdefault(name, []).append({
                "trial": rec["trial"], "study": rec["study"], "family": rec["family"],
                "degree": rec["degree"], "link_bandwidth_Bps": rec["link_bandwidth_Bps"],
                "cost_usd": rec["cost_usd"], **{k: v for k, v in item.items()
                                                if k not in ("workload", "config")}})
    return out


def new_axes(width_in: float = 6.4, height_in: float = 4.0, dpi: int = 100):
    """A matplotlib figure on the Agg canvas (no global backend is changed) and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def save_axes(fig, ax, path: Path, xlabel: str, ylabel: str, title: str, *,
              legend: bool = False) -> None:
    """Label ``ax`` (and draw its legend), lay the figure out and write it to ``path``."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)


#: Style of the HTML pages.
_STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
          "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
          "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
          "th{background:#f3f3f3}")


def write_pages(md_path: Path, html_path: Path, title: str,
                sections: Sequence[tuple[str, str, str]]) -> None:
    """Write a report as Markdown and HTML: the title, then per section
    ``(heading, markdown, html)`` the heading and its text."""
    md = [f"# {title}", ""]
    for heading, text, _ in sections:
        md += [f"## {heading}", "", text, ""]
    md_path.write_text("\n".join(md), encoding="utf-8")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for heading, _, text in sections:
        parts += [f"<h2>{html.escape(heading)}</h2>", text]
    parts.append("</body></html>")
    html_path.write_text("\n".join(parts), encoding="utf-8")


# ---------------------------------------------------------------------- plot
def _usd_tick(value: float, _pos: object = None) -> str:
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"${value / scale:g}{suffix}"
    return f"${value:g}"


def _plot(frame, path: Path) -> None:
    from matplotlib.ticker import FuncFormatter

    fig, ax = new_axes(7.5, 5.0, dpi=110)
    done = frame[frame["status"] == "complete"]
    if len(done) == 0:
        ax.text(0.5, 0.5, "no complete trials", ha="center", va="center", transform=ax.transAxes)
    else:
        cmap = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf"]
        for i, (family, group) in enumerate(sorted(done.groupby("family"), key=lambda g: g[0])):
            ax.scatter(group["cost_usd"], group["iteration_time_s"], s=36, alpha=0.85,
                       color=cmap[i % len(cmap)], label=str(family), zorder=3)
        for study, group in done.groupby("study"):
            front = group[group["pareto"]].sort_values(["cost_usd", "iteration_time_s"])
            ax.step(front["cost_usd"], front["iteration_time_s"], where="post", color="black",
                    linewidth=1.0, zorder=2, label=f"Pareto front ({study})")
            ax.scatter(front["cost_usd"], front["iteration_time_s"], s=90, facecolors="none",
                       edgecolors="black", linewidths=1.2, zorder=4)
        costs = done["cost_usd"].astype(float)
        times = done["iteration_time_s"].astype(float)
        if costs.min() > 0 and costs.max() / costs.min() > 20:
            ax.set_xscale("log")
        if times.min() > 0 and times.max() / times.min() > 20:
            ax.set_yscale("log")
        ax.legend(fontsize=8, loc="best")
        ax.xaxis.set_major_formatter(FuncFormatter(_usd_tick))
    ax.grid(True, alpha=0.3)
    save_axes(fig, ax, path, "network cost (USD)", "iteration time (s)",
              "cost vs iteration time (both minimised)")


# -------------------------------------------------------------------- report
_OBJ_FMT = {"iteration_time_s": ("iteration time", _fmt_time), "cost_usd": ("cost", _fmt_usd),
            "throughput_per_usd": ("iterations/s per USD", _fmt_tput),
            "exposed_communication_s": ("exposed comm.", _fmt_time)}


def _section(heading: str, note: str, head: list[str], body: list[list[str]]
             ) -> tuple[str, str, str]:
    if not body:
        return heading, "Nothing to show.", "<p>Nothing to show.</p>"
    return (heading, f"{note}\n\n{md_table(head, body)}",
            f"<p>{html.escape(note)}</p>\n{html_table(head, body)}")


def _sweep_sections(frame) -> list[tuple[str, str, str]]:
    """Best design per budget, sensitivity and per-workload sections (module docstring)."""
    out = []
    budget_rows = [{**r, "close": "-" if r.get("within_model_error") is None else
                    f"{r['within_model_error']} (error {r['model_error']:.1%})"}
                   for r in best_per_budget(frame)]
    head, body = _rows(budget_rows, ("budget", "trial", "family", "degree", "link rate",
                                     "topology", "iteration time", "cost",
                                     "others within model error"))
    out.append(_section("Best design per budget",
                        "For each network budget (the study's budget and the 25/50/75/100 % "
                        "cost quantiles of the complete designs), the fastest complete design "
                        "costing at most that much (all studies together). The last column "
                        "counts the other affordable designs whose predicted time is within "
                        "the model's validated error of it (GPUs with a calibrated profile; "
                        "the error of comparing two designs where all designs share one GPU "
                        "type and workload mix, else the error of one predicted time): "
                        "the model does not rank those against it. `-`: no validated error "
                        "(a GPU without a calibrated profile, or a mix with a kind of model "
                        "the validation does not cover: mixture-of-experts, recommendation "
                        "or MLP-only), ranked on the predicted times alone.", head, body))
    medians, correlations = sensitivity(frame)
    objs = _objectives(frame[frame["status"] == "complete"])
    head = ["parameter", "value", "designs"] + [f"median {_OBJ_FMT[o][0]}" for o in objs]
    body = [[m["parameter"], _fmt_rate(m["value"]) if m["column"] == "link_bandwidth_Bps"
             else _cell(m["value"]), str(m["designs"])] + [_OBJ_FMT[o][1](m.get(o))
                                                           for o in objs] for m in medians]
    out.append(_section("Sensitivity: grouped medians",
                        "Median of each objective over the complete designs, grouped by one "
                        "parameter at a time (parameters that take a single value are left "
                        "out).", head, body))
    head = ["parameter"] + [f"rho vs {_OBJ_FMT[o][0]}" for o in objs]
    body = [[c["parameter"]] + [_fmt_num(c.get(o)) for o in objs] for c in correlations]
    out.append(_section("Sensitivity: rank correlation",
                        "Spearman's rank correlation (rho in [-1, 1]) between each numeric "
                        "parameter and each objective over the complete designs; blank when "
                        "undefined (fewer than 3 designs or a constant column).", head, body))
    for name, rows in sorted(_per_workload(frame).items()):
        rows = sorted(rows, key=lambda r: (r.get("iteration_time_s") is None,
                                           r.get("iteration_time_s") or 0.0))[:15]
        head, body = _rows(rows, ("trial", "family", "degree", "link rate", "strategy",
                                  "iteration time", "compute", "exposed comm.",
                                  "bandwidth tax", "cost"))
        out.append(_section(f"Workload {name}",
                            "The fastest complete designs for this workload (at most 15).",
                            head, body))
    return out


def codesign_by_family(frame) -> list[dict[str, Any]]:
    """Per fabric family: fixed-strategy vs co-designed iteration time.

    The fixed-strategy time of a trial is ``start_iteration_time_s`` (the feasible start
    of every workload, timed on the trial's fabric: what a sweep without strategy search
    reports); the co-designed one is ``iteration_time_s`` (the searched strategies).
    Rows: designs, best and median of both, the median gain, and each family's rank
    among the families by its best time, fixed and co-designed (a rank that changes is
    a family whose standing depends on co-design).
    """
    cols = ("start_iteration_time_s", "iteration_time_s", "family")
    if any(c not in frame for c in cols):
        return []
    done = frame[(frame["status"] == "complete") & frame["start_iteration_time_s"].notna()
                 & frame["iteration_time_s"].notna()]
    if len(done) == 0:
        return []
    rows = []
    for family, sub in done.groupby("family"):
        fixed = sub["start_iteration_time_s"].astype(float)
        co = sub["iteration_time_s"].astype(float)
        rows.append({"family": family, "designs": len(sub), "best_fixed_s": float(fixed.min()),
                     "best_codesigned_s": float(co.min()),
                     "median_fixed_s": float(fixed.median()),
                     "median_codesigned_s": float(co.median()),
                     "median_gain": float((fixed / co).median()),
                     "evaluations": int(sub["search_evaluations"].fillna(0).sum())
                     if "search_evaluations" in sub else 0})
    for key, rank in (("best_fixed_s", "rank_fixed"), ("best_codesigned_s", "rank_codesigned")):
        for i, r in enumerate(sorted(rows, key=lambda r: (r[key], r["family"]))):
            r[rank] = i + 1
    return sorted(rows, key=lambda r: (r["best_codesigned_s"], r["family"]))


def _codesign_section(frame) -> tuple[str, str, str]:
    rows = codesign_by_family(frame)
    head = ["family", "designs", "best fixed", "best co-designed", "median fixed",
            "median co-designed", "median gain", "rank fixed", "rank co-designed",
            "strategies timed"]
    body = [[r["family"], str(r["designs"]), _fmt_time(r["best_fixed_s"]),
             _fmt_time(r["best_codesigned_s"]), _fmt_time(r["median_fixed_s"]),
             _fmt_time(r["median_codesigned_s"]), f"{r['median_gain']:.3f}x",
             str(r["rank_fixed"]), str(r["rank_codesigned"]), str(r["evaluations"])]
            for r in rows]
    return _section("Co-design per fabric family",
                    "Fixed strategy (each workload's feasible start: the least model "
                    "parallelism that fits in memory, timed on the trial's fabric) against "
                    "co-designed (the best strategy the per-trial search found on that "
                    "fabric), over the complete trials.  Ranks order the families by their "
                    "best time; a family whose rank changes is one a fixed-strategy sweep "
                    "would misplace.", head, body)


def _provenance(frame, results_dir: Path) -> list[tuple[str, str]]:
    from codesign import __version__

    def values(col: str) -> str:
        if col not in frame:
            return ""
        return ", ".join(sorted({_cell(v) for v in frame[col] if _cell(v)}))

    started = frame["started_at"].dropna() if "started_at" in frame else []
    span = (f"{started.min().isoformat()} .. {started.max().isoformat()}" if len(started) else "")
    return [("results folder", str(results_dir)), ("studies", values("study")),
            ("seeds", values("seed")), ("config hashes", values("config_hash")),
            ("package versions (records)", values("package_version")),
            ("time models", values("time_model")), ("samplers", values("sampler")),
            ("objectives", values("objectives")), ("workloads", values("workload")),
            ("budgets (USD)", values("budget_usd")), ("evaluations (UTC)", span),
            ("report written", f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} "
                               f"by codesign {__version__}")]


def write_report(results_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write the report of a results folder.

    Parameters
    ----------
    results_dir : str or pathlib.Path
        A study folder (``results/quickstart``) or a folder of study folders.
    out_dir : str or pathlib.Path, optional
        Where to write; created if missing.  Default: ``results_dir``, or its
        parent when ``results_dir`` itself holds part files (a records folder
        stays pure Parquet so that ``pandas.read_parquet`` can read it).

    Returns
    -------
    dict of str to pathlib.Path
        ``{"markdown": .../report.md, "html": .../report.html, "plot": .../pareto.png}``.

    Raises
    ------
    InvalidSpecError
        If ``results_dir`` is not a folder or holds no records.

    Notes
    -----
    The front is computed per study (designs of different studies are not
    comparable in general: other servers, message size or time model).
    """
    from codesign.records import load_records

    src = Path(results_dir)
    frame = load_records(src)
    if len(frame) == 0:
        raise InvalidSpecError(f"invalid results folder {str(src)!r}: it holds no records "
                               f"(part-*.parquet files); run `codesign quickstart` or a sweep first")
    if out_dir is not None:
        out = Path(out_dir)
    else:
        out = src.parent if any(src.glob("part-*.parquet")) else src
    check_output_folder(out, what="report folder")  # a file in the way: named, one line
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidSpecError(f"cannot create report folder {str(out)!r}: {exc.strerror}") from None

    frame = frame.copy()
    frame["pareto"] = False
    done = frame["status"] == "complete"
    # The same design sampled twice (a sampler may propose it again) is one point: only
    # its first trial can be on the front.
    key = [c for c in DESIGN_KEY if c in frame]
    first = ~frame[key].astype(str).duplicated(keep="first") if key else done
    for _, idx in frame[done & first].groupby("study").groups.items():
        sub = frame.loc[idx, list(OBJECTIVES)].astype(float).to_numpy()
        frame.loc[idx, "pareto"] = pareto_mask(sub)
    paths = {"markdown": out / "report.md", "html": out / "report.html", "plot": out / "pareto.png"}
    _plot(frame, paths["plot"])

    counts = frame["status"].value_counts().to_dict()
    studies = sorted(frame["study"].unique())
    summary = [("records", str(len(frame)))] + [
        (status, str(counts.get(status, 0))) for status in ("complete", "pruned", "failed")]
    summary.append(("designs on the Pareto front", str(int(frame["pareto"].sum()))))
    servers = sorted(set(frame["servers"].dropna())) if "servers" in frame else []
    if servers:
        summary.append(("servers", ", ".join(_cell(v) for v in servers)))
    front = frame[frame["pareto"]].sort_values(["study", "cost_usd", "iteration_time_s"])
    prov = _provenance(frame, src)
    title = f"codesign report: {', '.join(studies)}"
    rel_plot = paths["plot"].name if out == paths["plot"].parent else str(paths["plot"])

    sections: list[tuple[str, str, str]] = []  # (heading, markdown, html)
    head, body = ["quantity", "value"], [[k, v] for k, v in summary]
    sections.append(("Summary", md_table(head, body), html_table(head, body)))
    sections.append(("Cost vs iteration time",
                     f"![Pareto plot: cost vs iteration time]({rel_plot})",
                     f'<img src="{html.escape(rel_plot)}" alt="Pareto plot: cost vs iteration '
                     f'time" width="720">'))
    for study in studies:
        head, body = _rows(front[front["study"] == study].to_dict("records"), _FRONT_COLUMNS)
        note = ("Designs that no other design of the study beats on both iteration time and "
                "cost, cheapest first.")
        if not body:
            md = htm = "No complete trials: no front."
        else:
            md, htm = f"{note}\n\n{md_table(head, body)}", \
                f"<p>{note}</p>\n{html_table(head, body)}"
        sections.append((f"Pareto front ({study})", md, htm))
    sections += _sweep_sections(frame)
    if "tco_usd" in frame and frame["tco_usd"].notna().any():
        from codesign.app.procurement_report import sweep_procurement_section

        procurement = sweep_procurement_section(best_per_budget(frame), out)
        if procurement is not None:
            sections.append(("Procurement", *procurement))
            paths["procurement_plot"] = out / "procurement.png"
    if codesign_by_family(frame):
        sections.append(_codesign_section(frame))
    for study in studies:
        sub = frame[frame["study"] == study]
        head, body = _rows(sub.to_dict("records"), _ALL_COLUMNS)
        sections.append((f"All trials ({study})", md_table(head, body), html_table(head, body)))
    head, body = ["item", "value"], [[k, v] for k, v in prov]
    sections.append(("Provenance", md_table(head, body), html_table(head, body)))

    write_pages(paths["markdown"], paths["html"], title, sections)
    return paths
