"""report.html: self-contained, deterministic, every section present; rendered by a real
headless Chromium without console errors (skipped when Chromium is not installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from mapshard.report.bounds import frontier_function
from mapshard.report.html import report_html
from mapshard.report.write import write_results

try:
    from tests.test_report_helpers import inference_plan, system, training_plan
except ImportError:
    from test_report_helpers import inference_plan, system, training_plan

SECTIONS = ("Where the time goes", "Roofline", "Memory per chip",
            "Data-movement frontier of the heaviest GEMMs", "Configurations", "Solver",
            "Outer choices")  # fmt: skip
EXTERNAL = re.compile(
    r"""(src|href)\s*=\s*["']?\s*(https?:|//)|url\(\s*["']?(https?:|//)|@import"""
)


@pytest.fixture(scope="module")
def training_page() -> str:
    return report_html(training_plan(), system())


def test_page_is_self_contained(training_page):
    assert training_page.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(training_page)
    assert "<script" not in training_page
    assert "<?xml" not in training_page and "<!DOCTYPE svg" not in training_page


def test_page_has_every_section_and_plot(training_page):
    for title in SECTIONS:
        assert f"<h2>{title}</h2>" in training_page or f"<h3>{title}</h3>" in training_page
    plots = 5 if frontier_function() else 4  # config, class, roofline, memory, frontier
    assert training_page.count("<svg") == plots
    assert "Iteration time" in training_page or "iteration time" in training_page
    assert "weights exceed HBM" in training_page  # the outer-choice table
    assert "example warning" in training_page


def test_page_is_deterministic_and_escapes_names():
    plan = replace(inference_plan(), scenario="<b>&x</b>")
    page = report_html(plan)
    assert page == report_html(plan)
    assert "<b>&x</b>" not in page and "&lt;b&gt;&amp;x&lt;/b&gt;" in page
    assert "TTFT" in page and "Request timing" in page


def test_frontier_section_notes_a_missing_solver_module(monkeypatch):
    monkeypatch.setattr("mapshard.report.bounds.frontier_function", lambda: None)
    page = report_html(training_plan())
    assert "solver.cost.frontier is not available" in page
    assert page.count("<svg") == 4


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run_chromium(exe: str, profile, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install "
                    "chromium); the browser rendering test needs it")  # fmt: skip
def test_report_renders_in_headless_chromium(tmp_path):
    exe = _chromium()
    assert exe is not None
    out = tmp_path / "result"
    write_results(training_plan(), out, system=system())
    url = (out / "report.html").as_uri()
    dom = _run_chromium(exe, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    html = dom.stdout
    assert "<h1>MapShard plan: train-test</h1>" in html
    assert html.count("<svg") >= (5 if frontier_function() else 4)
    assert "Roofline" in html and "Memory per chip" in html
    png = tmp_path / "page.png"
    shot = _run_chromium(exe, tmp_path / "profile", f"--screenshot={png}",
                         "--window-size=1400,3000", url)  # fmt: skip
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.stat().st_size > 50_000  # a rendered page, not a blank one
