"""The result folder, written atomically: everything is built in a hidden sibling folder and
renamed into place, so a reader never sees half a result and a failed run leaves the old one.

A folder is only ever replaced when it holds nothing but a previous MapShard result (its
marker file lists the files MapShard wrote with a hash of each); anything else there, or a
result file edited since (the README invites editing plan.txt), is the user's, and we stop.
"""

from __future__ import annotations

import hashlib
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


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _marker_text(files: dict[str, bytes]) -> str:
    return "MapShard result folder; MapShard may replace it. Files:\n" + "".join(
        f"{name} {_digest(files[name])}\n" for name in sorted(files)
    )


def _marked_files(folder: Path) -> dict[str, str] | None:
    """Name -> content hash ('' when the marker predates hashes) of the files the folder's
    marker lists, or None when there is no marker."""
    marker = folder / MARKER
    if not marker.is_file():
        return None
    lines = marker.read_text(errors="replace").splitlines()[1:]
    marked = {}
    for line in lines:
        name, _, digest = line.strip().partition(" ")
        if name:
            marked[name] = digest
    return marked


def _edited(folder: Path, marked: dict[str, str]) -> list[str]:
    """Result files whose content differs from what MapShard wrote."""
    return sorted(
        name
        for name, digest in marked.items()
        if digest and (folder / name).is_file() and _digest((folder / name).read_bytes()) != digest
    )


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
    foreign = sorted(entries - {MARKER} - set(marked or {}))
    if marked is None or foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise SetupError(
            f"{out_dir}: the output folder holds files MapShard did not write "
            f"({shown}); it will not overwrite them: choose another --out or "
            "remove the folder"
        )
    edited = _edited(out_dir, marked)
    if edited:
        raise SetupError(
            f"{out_dir}: {', '.join(edited)} changed since MapShard wrote it; it will not "
            "overwrite your edit: copy it elsewhere (a plan.txt edit runs as its own "
            "scenario), or choose another --out"
        )


def check_writable(out_dir: Path | str) -> None:
    """Before a long solve: the result folder could be written (its parent can be made and
    takes a temporary folder, and the folder itself is replaceable). Raises SetupError."""
    out = Path(out_dir).absolute()
    check_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tempfile.mkdtemp(prefix=f".{out.name}.probe-", dir=out.parent))
    except OSError as exc:
        raise SetupError(_os_problem(out, exc)) from None


def _os_problem(out: Path, exc: OSError) -> str:
    where = exc.filename or out
    return (
        f"{out}: cannot write the results ({where}: {exc.strerror or exc}); "
        "give a writable --out folder"
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
    files = {
        name: text.encode("utf-8")
        for name, text in result_files(plan, setup_text_with_plan, system, workload).items()
    }
    try:
        _replace_atomically(out, files)
    except OSError as exc:
        raise SetupError(_os_problem(out, exc)) from None
    return sorted(out / name for name in files)


def _replace_atomically(out: Path, files: dict[str, bytes]) -> None:
    check_replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    old = tmp.with_name(tmp.name.replace(".tmp-", ".old-", 1))
    try:
        for name, data in sorted(files.items()):
            (tmp / name).write_bytes(data)
        (tmp / MARKER).write_bytes(_marker_text(files).encode("utf-8"))
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
