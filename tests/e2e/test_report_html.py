"""report.html: self-contained, deterministic, every section present; rendered by a real
headless Chromium without console errors and no wider than a 1400 px page (skipped when
Chromium is not installed). On real runs (a decode, a stream, an MoE inference, a DFModel
graph; each solved once per module): every table row's bound is the largest of the
columns it shows and those columns add up to the row's time; MoE routing kernels are not
called element-wise; nothing printed or shown uses exponent notation, 12+ significant
digits or fractional bytes."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from report_fixtures import assembled_plan, inference_plan, kernel, phase, system, training_plan

from mapshard.compare import compare_html, load_side
from mapshard.fmt import kernel_class_label
from mapshard.report.html import report_html
from mapshard.report.html_tables import MAX_CONFIG_ROWS
from mapshard.report.terminal import format_summary
from mapshard.report.totals import row_split
from mapshard.report.write import write_results
from mapshard.run import Result, run
from solver.api import config_latency
from solver.plan import SPLIT_PARTS, Plan, plan_rule

ROOT = Path(__file__).resolve().parents[2]
#: real runs, each solved once per module: (name, scenario folder)
RUNS = {
    "decode": ROOT / "scenarios" / "llama31_8b_decode_h100",
    "stream": ROOT / "scenarios" / "llama31_8b_stream_h100",
    "moe": ROOT / "scenarios" / "mixtral_8x7b_inference_8xmi300x",
    "dfmodel": ROOT / "tests" / "data" / "dfmodel" / "mlp_tp2_pp2",
}

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
    assert training_page.count("<svg") == 5  # config, class, roofline, memory, frontier
    assert "Iteration time" in training_page or "iteration time" in training_page
    assert "weights exceed HBM" in training_page  # the outer-choice table
    assert "example warning" in training_page


def test_page_is_deterministic_and_escapes_names():
    plan = replace(inference_plan(), scenario="<b>&x</b>")
    page = report_html(plan)
    assert page == report_html(plan)
    assert "<b>&x</b>" not in page and "&lt;b&gt;&amp;x&lt;/b&gt;" in page
    assert "TTFT" in page and "Request timing" in page


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
    assert html.count("<svg") >= 5
    assert "Roofline" in html and "Memory per chip" in html
    png = tmp_path / "page.png"
    shot = _run_chromium(exe, tmp_path / "profile", f"--screenshot={png}",
                         "--window-size=1400,3000", url)  # fmt: skip
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.stat().st_size > 50_000  # a rendered page, not a blank one


# ---- real runs: bound labels, columns that add up, MoE classes, number forms, page width


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    root = tmp_path_factory.mktemp("runs")
    return {name: run(folder, root / name) for name, folder in RUNS.items()}


def _plans(runs: dict[str, Result]) -> Iterator[tuple[str, Plan]]:
    yield "training fixture", training_plan()
    yield "inference fixture", inference_plan()
    for name, result in runs.items():
        yield name, result.plan


@pytest.mark.slow
def test_bound_is_the_largest_part_and_parts_sum_to_the_latency(runs) -> None:
    """Per kernel and configuration: the parts shown (overhead, compute, memory, network)
    add up to the latency the solver's rule gives (solver.api.config_latency, computed here
    from the raw times), and the bound names the largest part."""
    for name, plan in _plans(runs):
        overlap, serial = plan_rule(plan.overlap)
        for p in plan.phases:
            for row in (*p.kernels, *p.configs):
                split = row_split(plan, row)
                want = config_latency(row.compute_s, row.memory_s, row.network_s,
                                      row.overhead_s, overlap, serial,
                                      plan.network_hidden_share)  # fmt: skip
                assert sum(split) == pytest.approx(want, rel=1e-9, abs=1e-15), (name, row)
                assert min(split) >= 0, (name, row)
                assert split[SPLIT_PARTS.index(row.bound)] == max(split), (name, row, split)
            for c in p.configs:
                assert sum(row_split(plan, c)) == pytest.approx(c.latency_s, rel=1e-9)
            for k in p.kernels:  # every kernel has a class a chart can name (DFModel's: kind)
                assert kernel_class_label(k.kernel_class, k.kind), (name, k.name)


_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _seconds(cell: str) -> float:
    """A time cell as printed ("144 us", "1,234 s", "-" for none) in seconds."""
    if cell.strip() in ("-", ""):
        return 0.0
    value, unit = cell.split()
    return float(value.replace(",", "")) * _UNIT_S[unit]


def _close(a: float, b: float) -> bool:
    """Equal within three-significant-digit rounding of each printed figure: each is off
    by at most half a unit of its third digit (0.5 %), the parts together and the total
    by at most 1 % of the larger."""
    return abs(a - b) <= 0.01 * max(abs(a), abs(b)) + 1e-12


@pytest.mark.slow
def test_printed_and_shown_columns_add_up_and_name_the_bound(runs) -> None:
    """What a reader sees: in the terminal's table and report.html's configuration table,
    each configuration's overhead + compute + memory + network equal its time (within
    rounding) and its bound is the largest of them."""
    time = r"(-|[\d,.]+ (?:s|ms|us|ns))"
    term_row = re.compile(rf"^  config .{{15}}\s+\d+\s+{time}\s+{time}\s+(\w+)\s+"
                          rf"{time}\s+{time}\s+{time}\s+{time}\s+[\d.]+%$")  # fmt: skip
    html_row = re.compile(r"<tr>((?:<td[^>]*>[^<]*</td>){11})</tr>")
    for name, plan in _plans(runs):
        checked = 0
        for line in format_summary(plan, color=False).splitlines():
            m = term_row.match(line)
            if not m:
                continue
            _, per_step, bound, *parts = m.groups()
            values = [_seconds(x) for x in parts]
            assert _close(sum(values), _seconds(per_step)), (name, line)
            assert values[SPLIT_PARTS.index(bound)] == max(values), (name, line)
            checked += 1
        assert checked, name
        page = report_html(plan)
        configs = page.split("<h2>Configurations</h2>")[1].split("</table>")[0]
        for m in html_row.finditer(configs):
            cells = re.findall(r"<td[^>]*>([^<]*)</td>", m.group(1))
            bound, parts, latency = cells[3], cells[4:8], cells[8]
            values = [_seconds(x) for x in parts]
            assert _close(sum(values), _seconds(latency)), (name, cells)
            assert values[SPLIT_PARTS.index(bound)] == max(values), (name, cells)


@pytest.mark.slow
def test_moe_kernels_are_classed_as_routing_and_gemm(runs) -> None:
    plan = runs["moe"].plan
    kernels = {k.name: k for k in plan.kernels()}
    for name in ("dispatch", "combine", "topk"):
        k = kernels[name]
        assert kernel_class_label(k.kernel_class, k.kind).startswith("MoE routing"), name
    for name in ("expert_gate_up", "expert_down"):
        k = kernels[name]
        assert kernel_class_label(k.kernel_class, k.kind).startswith(("GEMM", "GEMV")), name
    page = (runs["moe"].out / "report.html").read_text()
    assert "MoE routing" in page  # the class chart and the kernel table
    rows = re.findall(r"<tr><td[^>]*>[^<]*/(?:dispatch|combine)</td>.*?</tr>", page)
    assert rows  # among the kernel table's heaviest rows
    for row in rows:
        assert "MoE routing" in row and "elementwise" not in row, row


#: forms no number printed for people may take (tables that document scientific notation
#: aside: none in these outputs)
EXPONENT = re.compile(r"\b\d+(?:\.\d+)?[eE][+-]?\d+\b")
FRACTIONAL_BYTES = re.compile(r"(?<![$\d.,])\d+\.\d+ B\b")
NUMBER = re.compile(r"\d[\d.]*")


def _significant(token: str) -> int:
    digits = token.replace(".", "").lstrip("0")
    return len(digits if "." in token else digits.rstrip("0"))


def _visible(html_text: str) -> str:
    html_text = re.sub(r"<style.*?</style>", " ", html_text, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html_text)


def _forbidden(text: str) -> list[str]:
    bad = EXPONENT.findall(text) + FRACTIONAL_BYTES.findall(text)
    return bad + [t for t in NUMBER.findall(text) if _significant(t.strip(".")) >= 12]


@pytest.mark.slow
def test_no_exponents_long_floats_or_fractional_bytes(runs) -> None:
    for name, result in runs.items():
        text = format_summary(result.plan, result.views, color=False)
        assert not _forbidden(text), (name, _forbidden(text))
        page = _visible((result.out / "report.html").read_text())
        assert not _forbidden(page), (name, _forbidden(page))
    for plan in (training_plan(), inference_plan()):
        assert not _forbidden(format_summary(plan, color=False))
        assert not _forbidden(_visible(report_html(plan, system())))


def test_forbidden_forms_are_caught() -> None:
    """The checker above finds what it looks for (and passes what is allowed)."""
    assert _forbidden("1.77572e+07 $") and _forbidden("x4.7e+02") and _forbidden("1e+03 MiB")
    assert _forbidden("0.000733 B") and _forbidden("0.017185199660385092")
    assert not _forbidden("$17.8 M, $1.25 B, x470, 1,234 s, 723 B, 124399000000 FLOP")


PROBE = """<script>addEventListener('load', () => {
  const page = document.documentElement; let widest = null, right = 0;
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect().right; if (r > right) { right = r; widest = e; } }
  const cls = widest ? (widest.getAttribute('class') || '') : '';
  const out = document.createElement('pre'); out.id = 'width-probe';
  out.textContent = `WIDTH ${page.scrollWidth} ${page.clientWidth} ${Math.ceil(right)} ` +
    `${widest ? widest.tagName : '-'}.${cls}`;
  document.body.appendChild(out); });</script>"""


def _page_width(exe: str, page: Path, tmp_path: Path) -> tuple[int, int, int, str]:
    """(scrollWidth, clientWidth, widest element's right edge, its tag.class) of `page` in
    a 1400 px window, from a copy with a probe script (the page itself has none)."""
    probe = tmp_path / f"probe-{page.parent.name}-{page.name}"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = _run_chromium(exe, tmp_path / "profile", "--window-size=1400,3000",
                        "--dump-dom", probe.as_uri())  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r"WIDTH (\d+) (\d+) (\d+) ([^<\s]*)", dom.stdout)
    assert m, dom.stdout[-2000:]
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install "
                    "chromium); the page-width test needs it")  # fmt: skip
def test_pages_fit_a_1400_px_window(runs, tmp_path: Path) -> None:
    exe = _chromium()
    assert exe is not None
    pages = [runs[name].out / "report.html" for name in RUNS]
    train = tmp_path / "training"
    write_results(training_plan(), train, system=system())
    pages.append(train / "report.html")
    sides = [load_side(runs["decode"].out), load_side(runs["moe"].out)]
    (tmp_path / "compare").mkdir()
    pages.append(tmp_path / "compare" / "compare.html")
    pages[-1].write_text(compare_html(sides))
    for page in pages:
        scroll, client, right, widest = _page_width(exe, page, tmp_path)
        # nothing widens the page (a table too wide to wrap scrolls inside its own box)
        assert scroll <= client <= 1400, (page, scroll, client, right, widest)


def test_a_plan_of_many_configurations_lists_the_busiest_and_says_how_many_more() -> None:
    """A kernel-by-kernel plan has a configuration per kernel: past MAX_CONFIG_ROWS the page
    lists the busiest per step (here the largest kernels: their busy time grows with the
    size) and names how many more configs.csv holds; a small plan lists every one."""
    count = MAX_CONFIG_ROWS + 57
    sizes = [(i * 7919) % count + 1 for i in range(count)]  # a shuffle of 1..count
    kernels = [
        kernel("graph", f"k{i}", "ELEMENTWISE", "Ma", "FWD", {"m": 4096 * s}, i, shards=1)
        for i, s in enumerate(sizes)
    ]
    many = assembled_plan("kbk", "graph", (phase("graph", "layer", 1, 1, kernels),), {}, 1, False)
    page = report_html(many, system())
    section = page.split("<h2>Configurations</h2>")[1].split("<h2>Kernels")[0]
    listed = set(re.findall(r"<td class=\"t\">k(\d+)</td>", section))
    assert len(listed) == MAX_CONFIG_ROWS
    largest = {str(i) for i, s in enumerate(sizes) if s > count - MAX_CONFIG_ROWS}
    assert listed == largest
    assert f"{count - MAX_CONFIG_ROWS} more configurations" in section
    small = inference_plan()
    page = report_html(small, system())
    section = page.split("<h2>Configurations</h2>")[1].split("<h2>Kernels")[0]
    assert "more configurations" not in section
    assert section.count("<tr>") == 1 + sum(len(p.configs) for p in small.phases)
