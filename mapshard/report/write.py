"""The result folder, written atomically: everything is built in a hidden sibling folder and
renamed into place, so a reader never sees half a result and a failed run leaves the old one.

A folder is only ever replaced when it holds nothing but a previous MapShard result (its
marker file lists the files MapShard wrote); anything else there is the user's, and we stop.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from generator.graph import Workload
from hardware.system import System
from mapshard.report.dot import mapping_dot, render_svg
from mapshard.report.html import report_html
from mapshard.report.summary import summary_json
from mapshard.report.tables import configs_csv, kernels_csv
from mapshard.report.trace import trace_json
from schema.errors import SetupError
from solver.plan import Plan

MARKER = ".mapshard-results"


def _marker_text(names: list[str]) -> str:
    return "MapShard result folder; MapShard may replace it. Files:\n" + "".join(
        f"{n}\n" for n in sorted(names)
    )


def _marked_files(folder: Path) -> set[str] | None:
    """Names listed in the folder's marker, or None when there is no marker."""
    marker = folder / MARKER
    if not marker.is_file():
        return None
    lines = marker.read_text(errors="replace").splitlines()[1:]
    return {line.strip() for line in lines if line.strip()}


def check_replaceable(out_dir: Path) -> None:
    """Raise SetupError unless out_dir is absent, empty, or a previous MapShard result."""
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if out_dir.is_symlink() or not out_dir.is_dir():
        raise SetupError(
            f"{out_dir}: the output path exists and is not a folder; choose another --out"
        )
    entries = {p.name for p in out_dir.iterdir()}
    if not entries:
        return
    marked = _marked_files(out_dir)
    foreign = sorted(entries - {MARKER} - (marked or set()))
    if marked is None or foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise SetupError(
            f"{out_dir}: the output folder holds files MapShard did not write "
            f"({shown}); it will not overwrite them: choose another --out or "
            "remove the folder"
        )


def result_files(
    plan: Plan,
    setup_text_with_plan: str | None = None,
    system: System | None = None,
    workload: Workload | None = None,
) -> dict[str, str]:
    """File name -> content of everything in a result folder (no disk access)."""
    dot = mapping_dot(plan, workload)
    svg = render_svg(dot, sum(len(p.kernels) for p in plan.phases))
    files = {
        "summary.json": summary_json(plan),
        "kernels.csv": kernels_csv(plan),
        "configs.csv": configs_csv(plan),
        "trace.json": trace_json(plan),
        "mapping.dot": dot,
        "report.html": report_html(plan, system, workload, svg),
    }
    if svg is not None:
        files["mapping.svg"] = svg
    if setup_text_with_plan is not None:
        files["plan.txt"] = setup_text_with_plan.rstrip("\n") + "\n"
    return files


def write_results(
    plan: Plan,
    out_dir: Path | str,
    setup_text_with_plan: str | None = None,
    system: System | None = None,
    workload: Workload | None = None,
) -> list[Path]:
    """Write the result folder atomically; returns the paths written, sorted.

    `system` gives the roofline its DRAM bandwidth and the frontier the chip's SRAM;
    `workload` gives mapping.dot the graph's edges and the frontier exact GEMM shapes.
    Raises SetupError when out_dir holds anything MapShard did not write.
    """
    out = Path(out_dir).absolute()
    check_replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    files = result_files(plan, setup_text_with_plan, system, workload)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    old = tmp.with_name(tmp.name.replace(".tmp-", ".old-", 1))
    try:
        for name, text in sorted(files.items()):
            (tmp / name).write_bytes(text.encode("utf-8"))
        (tmp / MARKER).write_bytes(_marker_text(list(files)).encode("utf-8"))
        os.chmod(tmp, 0o755)
        check_replaceable(out)
        if out.exists():
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:  # Ctrl-C included: one whole result stays, no temp folder
        if old.exists():
            if out.exists():  # the new result is in place: finish removing the old one
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(old, out)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(out / name for name in files)
