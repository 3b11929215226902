"""The procurement report of a what-if: days, dollars and failures per budget, with plots.

``codesign whatif ... --report DIR`` calls :func:`write_whatif_report`, which writes

* ``report.md`` and ``report.html`` -- a procurement section with one table per budget
  (fabric, strategy, days to train, USD per run, TCO with capex and opex per year,
  slowdown under failures), under it the fabrics too close to the answer for the model
  to rank (:func:`ranking_note`), and the assumptions (prices and how solid they are,
  power, PUE, amortisation);
* ``tco_breakdown.png`` -- stacked bars of the TCO per budget (servers, network, power,
  or the cloud rent);
* ``days_vs_budget.png`` -- days to train (or iteration time without a goal) against the
  network budget;
* ``slowdown_cdf.png`` -- with ``--fail``: the empirical CDF of the slowdown of every
  budget's fabric over the failure samples (samples in which training cannot continue
  are off the right edge: the curve ends below 1 by that fraction).

A top-layer front end (docs/architecture.md section 2): it reads a
:class:`search.whatif.WhatIfResult` as a dict and writes its pages, tables and plots
with the helpers of :mod:`codesign.app.report`.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from codesign.app.report import html_table, md_table, new_axes, save_axes, write_pages
from codesign.errors import InvalidSpecError
from codesign.files import check_output_folder

__all__ = ["write_whatif_report", "procurement_rows", "ranking_note",
           "sweep_procurement_section"]


def _usd(v: Any) -> str:
    return "-" if v is None else f"${v:,.0f}"


def _days(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}" if v < 1 else f"{v:,.2f}" if v < 10 \
        else f"{v:,.1f}"


def procurement_rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """One row of text per budget (the cells of the report's tables)."""
    rows = []
    for c in result["budgets"]:
        f = c.get("failures") or {}
        p = c.get("procurement") or {}
        if f.get("refused"):
            slow = f"not run: {f['refused']}"
        elif f:
            slow = ("-" if f.get("slowdown_mean") is None else
                    f"mean {f['slowdown_mean']:.3f}x, p99 {f['slowdown_p99']:.3f}x") + \
                f"; cannot continue {f['stopped_fraction']:.0%}"
        else:
            slow = "not asked (--fail)"
        strategy = c.get("strategy") or "; ".join(
            f"{k}: {v}" for k, v in (c.get("strategies") or {}).items())
        rows.append({
            "budget": _usd(c["budget_usd"]),
            "fabric": c.get("topology_spec") or c.get("note", "-"),
            "network (budget model)": _usd(c.get("cost_usd")),
            "strategy": strategy or "-",
            "iteration": "-" if c.get("iteration_time_s") is None
            else f"{c['iteration_time_s']:.4g} s",
            "MFU": "-" if c.get("mfu") is None else f"{c['mfu']:.1%}",
            "days to train": _days(c.get("days_to_train")),
            "USD per run": _usd(c.get("usd_per_run")),
            "TCO": _usd(c.get("tco_usd")),
            "capex": _usd(p.get("capex_usd")),
            "opex per year": _usd(p.get("opex_usd_per_year")),
            "slowdown under failures": slow,
        })
    return rows


def ranking_note(choice: dict[str, Any]) -> str:
    """What the model's validated error says about one budget's answer (issue 17): the
    other affordable fabrics too close to it to be ranked, or that there are none, or
    that no error is validated (a mix with a kind of model the validation does not
    cover, a GPU without a calibrated profile); empty for a budget that buys nothing."""
    if not choice.get("topology_spec"):
        return ""
    pair, one = choice.get("comparison_error"), choice.get("model_error")
    if pair is None:
        return choice.get("note") or ("The model's error is not validated for this GPU: "
                                      "fabrics are ranked on the predicted times alone.")
    close = list(choice.get("within_model_error") or ())
    errors = (f"the model's validated error of a comparison, {pair:.1%} (of one predicted "
              f"time: {one:.1%})")
    if not close:
        return ("Every other affordable fabric timed is slower than this answer by more "
                f"than {errors}.")
    shown = ", ".join(close[:5]) + (f" and {len(close) - 5} more" if len(close) > 5 else "")
    note = (f"Not ranked against this answer: {len(close)} other affordable fabric(s) "
            f"within {errors}: {shown}.")
    cheap = choice.get("cheapest_within_error")
    if cheap:
        # The model cannot tell these apart; what a buyer can tell apart is the price.
        note += (f" The cheapest of them is {cheap['topology_spec']} ({cheap['label']}): "
                 f"${cheap['cost_usd']:,.0f} of network against ${choice['cost_usd']:,.0f}, "
                 f"{cheap['iteration_time_s']:.3g} s per iteration against "
                 f"{choice['iteration_time_s']:.3g} s.")
    return note


def _plots(result: dict[str, Any], out: Path) -> list[tuple[str, str]]:
    """Write the plots; ``(file name, caption)`` of each written."""
    answered = [c for c in result["budgets"] if c.get("tco_usd") is not None]
    written = []
    if not answered:
        return written
    labels = [f"${c['budget_usd'] / 1e6:g}M" for c in answered]
    # TCO breakdown bars.
    fig, ax = new_axes()
    bottom = [0.0] * len(answered)
    parts = []
    for c in answered:
        for k in c["procurement"]["tco"]["breakdown_usd"]:
            if k not in parts:
                parts.append(k)
    for part in parts:
        vals = [c["procurement"]["tco"]["breakdown_usd"].get(part, 0.0) / 1e6 for c in answered]
        ax.bar(labels, vals, bottom=bottom, label=part)
        bottom = [b + v for b, v in zip(bottom, vals)]
    save_axes(fig, ax, out / "tco_breakdown.png", "network budget", "TCO, million USD",
              "Total cost of ownership per budget", legend=True)
    written.append(("tco_breakdown.png", "TCO per budget: servers, network, power (or the "
                                         "cloud rent) over the amortisation period"))
    # Days to train (or iteration time) against the budget.
    fig, ax = new_axes()
    has_days = all(c.get("days_to_train") is not None for c in answered)
    ys = [c["days_to_train"] if has_days else c["iteration_time_s"] for c in answered]
    ax.plot([c["budget_usd"] / 1e6 for c in answered], ys, marker="o")
    for c, y in zip(answered, ys):
        ax.annotate(c.get("family") or "", (c["budget_usd"] / 1e6, y),
                    textcoords="offset points", xytext=(4, 4))
    ax.set_xscale("log")
    save_axes(fig, ax, out / "days_vs_budget.png", "network budget, million USD",
              "days to train" if has_days else "iteration time, s",
              "Days to train vs budget" if has_days else "Iteration time vs budget")
    written.append(("days_vs_budget.png", "days to train of each budget's answer" if has_days
                    else "iteration time of each budget's answer (no training goal given)"))
    # Slowdown CDF under failures.
    with_f = [c for c in answered if c.get("failures") and not c["failures"].get("refused")]
    if with_f:
        fig, ax = new_axes()
        seen = set()
        for c in with_f:
            f = c["failures"]
            if c["topology_spec"] in seen:
                continue
            seen.add(c["topology_spec"])
            xs = sorted(f["slowdowns"])
            n = f["samples"]
            ys = [(i + 1) / n for i in range(len(xs))]
            ax.step(xs, ys, where="post", label=f"{c['family']} d={c['degree']} "
                                                f"({f['stopped_fraction']:.0%} stop)")
        ax.set_ylim(0, 1.02)
        save_axes(fig, ax, out / "slowdown_cdf.png", "slowdown (time per sample after / "
                  "before)", "fraction of samples",
                  f"Slowdown under failures: {with_f[0]['failures']['failures']}", legend=True)
        written.append(("slowdown_cdf.png", "empirical CDF of the slowdown over the failure "
                                            "samples (a curve ending below 1: samples in "
                                            "which training cannot continue)"))
    return written


def _assumptions(result: dict[str, Any]) -> list[str]:
    out = []
    c = next((c for c in result["budgets"] if c.get("procurement")), None)
    if c is None:
        return out
    p, t = c["procurement"], c["procurement"]["tco"]
    out.append(f"TCO model: {t['model']}; amortisation {t['years']:g} years; power at the wall "
               f"{t['power_w'] / 1e3:,.0f} kW (PUE included); network priced with the "
               f"{p.get('network_catalog', 'parts-2026')} catalog (budgets use the "
               f"what-if's own cost model).")
    out.append(f"Prices of {result['gpu']}: {p.get('price_solidity', '')}.")
    if result.get("goal"):
        goal = ", ".join(f"{v:.4g} {k}" for k, v in result["goal"].items())
        out.append(f"Training goal: {goal}; days = iterations x iteration time / 86400; a "
                   f"run costs its hours at TCO / (years x 8760) per hour.")
    out.append(f"Answer per budget chosen by {result.get('objective', 'iteration_time_s')}; "
               f"strategies timed with collectives {result.get('collective_method', 'best')} "
               f"and communication overlap {result.get('comm_overlap', 'framework')}.")
    return out


def write_whatif_report(result, out_dir: str | Path) -> dict[str, Path]:
    """Write the procurement report of ``result`` (a ``WhatIfResult`` or its dict).

    Returns
    -------
    dict
        ``{"html": path, "md": path, <plot name>: path ...}``.
    """
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    out = Path(out_dir)
    check_output_folder(out, what="report folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidSpecError(f"cannot write report folder {str(out)!r}: "
                               f"{exc.strerror or exc}") from None
    plots = _plots(data, out)
    mix = ", ".join(f"{w['name']} x{w['weight']:g}" for w in data["workloads"])
    title = f"Procurement what-if: {data['servers']} servers of {data['gpu']} ({mix})"
    lines = _assumptions(data)
    md = ["\n".join(f"- {line}" for line in lines)]
    hs = [f"<p>{html.escape(line)}</p>" for line in lines]
    for row, choice in zip(procurement_rows(data), data["budgets"], strict=True):
        head, body = list(row), [list(row.values())]
        note = ranking_note(choice)
        md.append(f"### Budget {row['budget']}\n\n{md_table(head, body)}"
                  + (f"\n\n{note}" if note else ""))
        hs.append(f"<h3>Budget {html.escape(row['budget'])}</h3>\n{html_table(head, body)}"
                  + (f"\n<p>{html.escape(note)}</p>" if note else ""))
    figures = [(f"![{caption}]({name})\n\n*{caption}*",
                f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>")
               for name, caption in plots]
    paths = {"md": out / "report.md", "html": out / "report.html"}
    write_pages(paths["md"], paths["html"], title,
                [("Procurement", "\n\n".join(md), "\n".join(hs)),
                 ("Plots", "\n\n".join(f[0] for f in figures),
                  "\n".join(f[1] for f in figures))])
    paths.update({name: out / name for name, _ in plots})
    return paths


def sweep_procurement_section(best: list[dict[str, Any]], out_dir: str | Path
                              ) -> tuple[str, str] | None:
    """The procurement section of a sweep report: per budget (rows of
    :func:`codesign.app.report.best_per_budget`, the fastest affordable design) its days to
    train, USD per run and TCO, with a plot ``procurement.png`` (days to train and TCO
    against the budget).  ``None`` when the records carry no procurement columns.

    Returns
    -------
    (markdown, html) or None
    """
    rows = [r for r in best if isinstance(r.get("tco_usd"), float)
            and math.isfinite(r["tco_usd"])]
    if not rows:
        return None

    def num(v: Any) -> float | None:
        return None if v is None or not math.isfinite(float(v)) else float(v)

    head = ["budget", "design", "strategy", "iteration", "days to train", "USD per run", "TCO"]
    body = [[_usd(r["budget_usd"]), str(r.get("topology_spec") or r.get("family")),
             str(r.get("strategy") or "-"), f"{float(r['iteration_time_s']):.4g} s",
             _days(num(r.get("days_to_train"))), _usd(num(r.get("usd_per_run"))),
             _usd(num(r.get("tco_usd")))] for r in rows]
    fig, ax = new_axes()
    xs = [r["budget_usd"] / 1e6 for r in rows]
    ax.bar([f"${x:.3g}M" for x in xs], [num(r["tco_usd"]) / 1e6 for r in rows],
           color="#9ecae1", label="TCO, million USD")
    days = [num(r.get("days_to_train")) for r in rows]
    if all(d is not None for d in days):
        ax2 = ax.twinx()
        ax2.plot(range(len(rows)), days, color="#d62728", marker="o")
        ax2.set_ylabel("days to train", color="#d62728")
    save_axes(fig, ax, Path(out_dir) / "procurement.png", "network budget", "TCO, million USD",
              "Best design per budget: TCO and days to train")
    note = ("Per budget the fastest affordable design (as in 'Best design per budget') with "
            "its days to train, USD per training run and total cost of ownership "
            "(search.time_to_train, codesign.tco).")
    md = (f"{note}\n\n{md_table(head, body)}\n\n"
          "![TCO and days to train per budget](procurement.png)")
    htm = (f"<p>{html.escape(note)}</p>\n{html_table(head, body)}\n"
           '<img src="procurement.png" alt="TCO and days to train per budget" width="640">')
    return md, htm
