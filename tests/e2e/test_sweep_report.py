"""The sweep report (#38 item 6): a System Cost is a price only when its chips are priced;
tokens/s per $ is null otherwise and tokens/s / price by hand when a list price is known;
front points are labelled without overlaps (their estimated boxes); the page fits a 1400 px
window in headless Chromium (skipped when Chromium is not installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from mapshard.sweeps import load_sweep, metrics, run_sweep
from mapshard.sweeps.front_svg import front_figure
from mapshard.sweeps.outputs import REPORT_NAME, best_rows
from mapshard.sweeps.pareto import PLOTS, front_rows
from mapshard.sweeps.store import read_rows
from tests.e2e.test_sweep import write_sweep

# One chip with a cited library list price (Gaudi3: Intel's $125,000 kit of 8 = $15,625)
# and one without (H100), each on one chip, with DFModel's DRAM unit price of $1 per GB/s.
SWEEP = """inline {
  name: "tiny"
  workload { llm_inference {
    model { inline { name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 2
      num_heads: 4 num_kv_heads: 2 intermediate_size: 512 vocab_size: 1024 ffn: SWIGLU
      norm: RMSNORM } }
    phase: DECODE batch: 4 input_len: 64 output_len: 16 } }
  system { chip: "Gaudi3" num_chip: 1 }
  cost { dram_unit_price: 1 }
}
axis { field: "system.chip" name: "chip" values: ["Gaudi3", "H100-SXM5-80GB"] }
axis { field: "workload.llm_inference.batch" name: "batch" values: ["1", "4"] }
"""
# by hand: Gaudi3 $15,625 + 3670 GB/s x $1 = $19,295 (a price: the chip is priced);
# H100 3350 GB/s x $1 = $3,350 of unit prices only (hardware/chips/*.txt dram_bw)
GAUDI3_COST_USD = 15625 + 3670 * 1.0
H100_UNIT_COST_USD = 3350 * 1.0
PAGE_WIDTH_PX = 1400


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep_report")
    spec = load_sweep(write_sweep(folder, SWEEP))
    run_sweep(spec, out=folder / "out", workers=1, quiet=True)
    return folder / "out"


def _rows(out: Path) -> list[dict[str, str]]:
    return read_rows(out / "results.csv")


@pytest.mark.slow  # the module's sweep: 4 solves, ~8 s on 2 busy cores
def test_per_usd_only_for_priced_chips(swept: Path) -> None:
    rows = _rows(swept)
    assert len(rows) == 4 and all(r["status"] == "optimal" for r in rows)
    for r in rows:
        cost = float(r["system_cost"])
        if r["chip"] == "Gaudi3":
            assert r["cost_basis"] == metrics.LIBRARY_PRICE
            assert cost == pytest.approx(GAUDI3_COST_USD)
            per_usd = float(r["tokens_per_s"]) / GAUDI3_COST_USD
            assert float(r["tokens_per_s_per_usd"]) == pytest.approx(per_usd, rel=1e-12)
        else:
            assert r["cost_basis"] == metrics.UNIT_PRICES_ONLY
            assert cost == pytest.approx(H100_UNIT_COST_USD)
            assert r["tokens_per_s_per_usd"] == ""  # null: no price to divide by


@pytest.mark.slow  # the module's sweep: 4 solves, ~8 s on 2 busy cores
def test_cheapest_point_and_cost_fronts_use_prices_only(swept: Path) -> None:
    rows = _rows(swept)
    best = best_rows(rows, ("system_cost", "tokens_per_s_per_usd"))
    # the H100's $3,350 is not a cheaper system: its chip has no price
    assert best["system_cost"]["chip"] == "Gaudi3"
    assert best["tokens_per_s_per_usd"]["chip"] == "Gaudi3"
    for plot in PLOTS:
        if "system_cost" in (plot.x, plot.y):
            assert {r["chip"] for r in front_rows(rows, plot, ("chip", "batch"))} == {"Gaudi3"}
            fig = front_figure(rows, plot, ("chip", "batch"))
            assert fig is not None and "chips at their price" in fig.xlabel
    page = (swept / REPORT_NAME).read_text()
    assert "unit prices only" in page and "not priced" in page


def test_cost_basis_by_hand() -> None:
    def system(setup_usd: float, library_usd: float) -> SimpleNamespace:
        chip = SimpleNamespace(price_usd=library_usd)
        return SimpleNamespace(cost=SimpleNamespace(accelerator_price=setup_usd), chip=chip)

    assert metrics.cost_basis(system(15625, 15625), 19295) == metrics.LIBRARY_PRICE
    assert metrics.cost_basis(system(1000, 0), 1100) == metrics.SETUP_PRICE
    assert metrics.cost_basis(system(0, 0), 116800) == metrics.UNIT_PRICES_ONLY
    assert metrics.cost_basis(system(0, 0), 0) == metrics.NOT_PRICED


def test_front_labels_do_not_overlap() -> None:
    """Twelve front points close together (costs 1% apart): every label drawn stays inside
    the axes and clear of every other label, measured on the drawn figure."""
    rows = [
        {
            "index": str(i),
            "status": "optimal",
            "chip": f"chip-{i}",
            "link": str(100 + i),
            "system_cost": repr(1000.0 + 10 * i),
            "latency_s": repr(0.01 - 0.0002 * i),
            "cost_basis": metrics.SETUP_PRICE,
        }  # fmt: skip
        for i in range(12)
    ]
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    fig = front_figure(rows, plot, ("chip", "link"))
    assert fig is not None
    f = fig.frame
    boxes = fig.label_boxes
    assert len(boxes) >= 6  # most points named on the plot, the rest in the table
    assert all(t.startswith("#") for t in fig.labels)
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        assert f[0] <= x0 and x1 <= f[2] and f[1] <= y0 and y1 <= f[3]
        for b in boxes[i + 1 :]:
            assert not (x0 <= b[2] and b[0] <= x1 and y0 <= b[3] and b[1] <= y1)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# writes the page's widths into the DOM, read back with --dump-dom
_MEASURE = """<script>window.addEventListener('load', () => {
  const right = Math.max(0, ...[...document.querySelectorAll('table, svg, figure, p, h1')]
    .map(e => e.getBoundingClientRect().right));
  const out = document.createElement('pre');
  out.id = 'measured';
  out.textContent = document.documentElement.scrollWidth + ' ' + Math.ceil(right);
  document.body.appendChild(out);
});</script>"""


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_report_fits_1400_px_in_chromium(swept: Path, tmp_path: Path) -> None:
    exe = _chromium()
    assert exe is not None
    page = (swept / REPORT_NAME).read_text()
    copy = tmp_path / "measured.html"  # a copy: the report itself carries no script
    copy.write_text(page.replace("</body>", _MEASURE + "</body>"))
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={PAGE_WIDTH_PX},1000",
           "--dump-dom", copy.as_uri()]  # fmt: skip
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    marker = '<pre id="measured">'
    assert marker in dom.stdout
    scroll_px, right_px = (int(v) for v in dom.stdout.split(marker)[1].split("<")[0].split())
    print(f"measured: scrollWidth {scroll_px} px, rightmost element {right_px} px")
    assert 0 < scroll_px <= PAGE_WIDTH_PX
    assert 0 < right_px <= PAGE_WIDTH_PX  # tables and plots end inside the window


@pytest.mark.slow  # the module's sweep, resumed once (nothing solved again)
def test_an_edited_best_folder_is_kept(swept: Path, tmp_path: Path) -> None:
    """A user's edit of best_<objective>/setup.txt survives the next sweep over the same
    folder (said in `kept`), a `mapshard run` result beside it is left alone, and the
    untouched best folders are rewritten."""
    out = tmp_path / "out"
    shutil.copytree(swept, out)
    spec = load_sweep(write_sweep(tmp_path, SWEEP))
    folders = sorted(p for p in out.iterdir() if p.is_dir() and p.name.startswith("best_"))
    assert len(folders) >= 2
    edited, other = folders[0], folders[1]
    (edited / "setup.txt").write_text("# my own edit\n", encoding="utf-8")
    (edited / "results").mkdir()
    (edited / "results" / "summary.json").write_text("{}", encoding="utf-8")
    before = (other / "setup.txt").read_bytes()
    (other / "setup.txt").unlink()  # a sweep's own file removed: written again
    outcome = run_sweep(spec, out=out, workers=1, quiet=True)
    assert outcome.ran == 0
    assert (edited / "setup.txt").read_text(encoding="utf-8") == "# my own edit\n"
    assert (edited / "results" / "summary.json").read_text(encoding="utf-8") == "{}"
    assert len(outcome.kept) == 1 and str(edited) in outcome.kept[0]
    assert (other / "setup.txt").read_bytes() == before


def test_the_report_is_the_same_at_any_load(swept: Path, tmp_path: Path) -> None:
    """The page held the run's wall time ("This run: 4 points in 1.6s"), so two runs of the
    same sweep differed; a second sweep into another folder writes the same page."""
    spec = load_sweep(write_sweep(tmp_path, SWEEP))
    run_sweep(spec, out=tmp_path / "out", workers=1, quiet=True)
    first = (swept / REPORT_NAME).read_text(encoding="utf-8")
    again = (tmp_path / "out" / REPORT_NAME).read_text(encoding="utf-8")
    assert first.replace(str(swept.parent), "") == again.replace(str(tmp_path), "")
