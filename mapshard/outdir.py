"""Folders MapShard owns: written atomically (built in a hidden sibling folder and renamed
into place, so a reader never sees half of one and a failed run leaves the old one), and
replaced only while they hold nothing but what MapShard wrote there.

A marker file lists each file MapShard wrote with a hash of its content; anything else in
the folder, or a file edited since (the README invites editing plan.txt), is the user's, and
MapShard stops with one line instead of overwriting it. Result folders, generated graphs and
bounds all go through `replace_folder`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from schema.errors import SetupError

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


def replace_folder(out_dir: Path | str, files: dict[str, str | bytes]) -> list[Path]:
    """Write `files` (name -> content) as the whole folder `out_dir`, atomically; returns the
    paths written, sorted. Raises SetupError (one line) when the folder holds the user's
    files or cannot be written."""
    out = Path(out_dir).absolute()
    data = {n: c.encode("utf-8") if isinstance(c, str) else c for n, c in files.items()}
    try:
        _replace_atomically(out, data)
    except OSError as exc:
        raise SetupError(_os_problem(out, exc)) from None
    return sorted(out / name for name in data)


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
