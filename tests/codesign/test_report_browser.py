"""The procurement report in a real headless browser: the page renders, every image loads.

Chromium (Debian's ``chromium``) is driven through its command line: ``--dump-dom`` of a
probe page that frames the report and records, on load, each ``<img>``'s
``naturalWidth``; ``--screenshot`` of the report itself, checked to be a non-blank PNG.
The report is served from a local HTTP server (a file:// frame could not be inspected).
Without chromium the test fails in CI (``.ci/run`` installs it and sets
``CODESIGN_REQUIRE_BROWSER=1``) and is skipped, with that reason, elsewhere.
"""

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading

import numpy as np
import pytest

from codesign.app.procurement_report import write_whatif_report

# Flags that work headless as root on a closed network (no background connections).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars")

PROBE = """<!doctype html><html><body><iframe id="r" src="report.html" width="1200"
height="2000"></iframe><script>
window.addEventListener("load", function () {
  var doc = document.getElementById("r").contentDocument;
  var imgs = Array.prototype.slice.call(doc.images);
  var out = {title: doc.title, h2: doc.getElementsByTagName("h2").length,
             images: imgs.map(function (i) { return {src: i.getAttribute("src"),
                 complete: i.complete, width: i.naturalWidth}; })};
  var pre = document.createElement("pre");
  pre.id = "result";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body></html>"""


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CODESIGN_REQUIRE_BROWSER"):
        pytest.fail("chromium is not installed but CODESIGN_REQUIRE_BROWSER is set "
                    "(.ci/run installs it with apt-get install -y chromium)")
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI requires it")


def _result():
    """A what-if result dict with every field the report reads (no timing needed)."""
    budgets = []
    for i, (budget, fam) in enumerate(((5e6, "perms"), (2e7, "fattree"))):
        tco = {"capex_usd": 4e7 + i * 1e6, "opex_usd_per_year": 2e6, "years": 4.0,
               "tco_usd": 4.8e7 + i * 1e6, "power_w": 1.5e6, "energy_kwh_per_year": 1.3e7,
               "cost_per_hour_usd": 1400.0, "model": "owned",
               "breakdown_usd": {"servers": 3.84e7, "network": 1.6e6 + i * 1e6,
                                 "power": 8e6}}
        budgets.append({
            "budget_usd": budget, "family": fam, "degree": 8, "link_bandwidth_Bps": 5e10,
            "topology_spec": f"{fam}:128", "cost_usd": 3e6 + i * 5e6,
            "iteration_time_s": 15.0 - i, "mfu": 0.5, "strategy": "dp=128,tp=8",
            "days_to_train": 40.0 - 3 * i, "usd_per_run": 1.3e6, "tco_usd": tco["tco_usd"],
            "procurement": {"capex_usd": tco["capex_usd"], "opex_usd_per_year": 2e6,
                            "tco": tco, "price_solidity": "estimate",
                            "network_catalog": "parts-2026"},
            "failures": {"failures": "links=10%", "samples": 4, "slowdown_mean": 1.05,
                         "slowdown_p50": 1.04, "slowdown_p99": 1.1, "partitioned": 1,
                         "cannot_fit": 0, "stopped_fraction": 0.25,
                         "slowdowns": [1.0, 1.04, 1.1]}})
    return {"servers": 128, "gpu": "H100", "objective": "iteration_time_s",
            "goal": {"tokens": 15e12}, "workloads": [{"name": "llama3-70b", "weight": 1.0}],
            "budgets": budgets}


@pytest.fixture()
def served(tmp_path):
    paths = write_whatif_report(_result(), tmp_path)
    (tmp_path / "probe.html").write_text(PROBE, encoding="utf-8")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", paths, tmp_path
    finally:
        server.shutdown()


def _chromium(browser, tmp_path, *args):
    return subprocess.run([browser, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_report_renders_and_every_image_loads(served):
    browser = _browser()
    url, _, tmp_path = served
    proc = _chromium(browser, tmp_path, "--virtual-time-budget=10000", "--dump-dom",
                     f"{url}/probe.html")
    m = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert m, f"the probe did not run: {proc.stderr[-500:]}"
    result = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["title"].startswith("Procurement what-if") and result["h2"] >= 2
    srcs = sorted(i["src"] for i in result["images"])
    assert srcs == ["days_vs_budget.png", "slowdown_cdf.png", "tco_breakdown.png"]
    for img in result["images"]:
        assert img["complete"] and img["width"] > 0, img


def test_screenshot_of_the_report_is_not_blank(served):
    from matplotlib.image import imread

    browser = _browser()
    url, _, tmp_path = served
    shot = tmp_path / "screenshot.png"
    _chromium(browser, tmp_path, "--window-size=1280,2400", f"--screenshot={shot}",
              "--virtual-time-budget=10000", f"{url}/report.html")
    assert shot.is_file() and shot.stat().st_size > 0
    pixels = imread(str(shot))
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1200
    assert float(np.std(pixels[..., :3])) > 0.05     # text, tables and plots, not blank


def test_sweep_report_procurement_section(tmp_path):
    """A sweep with procurement columns gets the section and its plot (the browser test
    above covers the what-if report's images; this one checks the sweep report's)."""
    from codesign.records import RecordWriter
    from codesign.app.report import write_report

    rows = [{"study": "p", "trial": i, "status": "complete", "family": "torus", "degree": 4,
             "link_bandwidth_Bps": 12.5e9, "servers": 16, "cost_usd": 100.0 * (i + 1),
             "iteration_time_s": 1.0 / (i + 1), "gpu": "A100-80", "strategy": "dp=128",
             "tco_usd": 4e6 + i, "days_to_train": 10.0 / (i + 1), "usd_per_run": 1e5 / (i + 1)}
            for i in range(4)]
    RecordWriter(tmp_path / "p" / "records").write(rows)
    paths = write_report(tmp_path / "p")
    md = paths["markdown"].read_text()
    assert "## Procurement" in md and "$4,000,003" in md
    assert paths["procurement_plot"].stat().st_size > 1000
    assert "procurement.png" in paths["html"].read_text()
