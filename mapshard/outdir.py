"""Folders MapShard owns: written atomically (built in a hidden sibling folder and renamed
into place, so a reader never sees half of one and a failed run leaves the old one), and
replaced only while they hold nothing but what MapShard wrote there.

A marker file lists each file MapShard wrote with a hash of its content (timing.json, whose
wall-clock figures differ every run, is listed without one); anything else in the folder —
a sub-folder, a link, a file edited since (the README invites editing plan.txt) — is the
user's, and MapShard stops with one line instead of overwriting it, whatever a hand-written
or stale marker says: a marker not in the exact form MapShard writes (its header line, one
plain file name and SHA-256 per line) vouches for nothing. Result folders, generated
graphs, bounds, comparisons, validation and sweep outputs all go through `replace_folder`.

The hidden sibling folders a write uses carry the writer's process id; one left by a killed
run (SIGKILL, power loss) is removed by the next write beside it once that process is gone.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from schema.errors import SetupError

MARKER = ".mapshard-results"
#: files listed in the marker without a hash: their content differs on every run
UNHASHED = frozenset({"timing.json"})


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_HEADER = "MapShard result folder; MapShard may replace it. Files:\n"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_MAX_MARKER_BYTES = 1 << 24  # far above any result folder's list


def _marker_text(files: dict[str, bytes]) -> str:
    return _HEADER + "".join(
        f"{name}\n" if name in UNHASHED else f"{name} {_digest(files[name])}\n"
        for name in sorted(files)
    )


def _plain_name(name: str) -> bool:
    """A name MapShard can have written in the folder itself: no path, no NUL, not . or .."""
    return (
        name not in ("", ".", "..", MARKER)
        and not any(c in name for c in "/\\\x00\n\r")
        and len(name.encode("utf-8", "surrogateescape")) <= 255
    )


def _marked_files(folder: Path) -> dict[str, str] | None:
    """Name -> content hash ('' for UNHASHED names) of the files the folder's marker lists,
    or None when there is no marker or it is not one MapShard wrote (its header, one plain
    name with a SHA-256 per line, UNHASHED names without): a hand-written or damaged marker
    vouches for nothing."""
    marker = folder / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        if marker.stat().st_size > _MAX_MARKER_BYTES:
            return None
        text = marker.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith(_HEADER) or not text.endswith("\n"):
        return None
    body = text[len(_HEADER) : -1]
    marked: dict[str, str] = {}
    for line in body.split("\n") if body else []:
        name, _, digest = line.rpartition(" ") if line not in UNHASHED else (line, "", "")
        if not _plain_name(name) or name in marked:
            return None
        if (name in UNHASHED) != (digest == "") or (digest and not _DIGEST.fullmatch(digest)):
            return None
        marked[name] = digest
    return marked


def _not_ours(folder: Path, marked: dict[str, str]) -> list[str]:
    """Entries the marker lists that MapShard cannot have left as they are: anything but a
    plain file (a folder, a link)."""
    out = []
    for name in marked:
        path = folder / name
        if not (path.exists() or path.is_symlink()):
            continue
        if path.is_symlink() or not path.is_file():
            out.append(name)
    return sorted(out)


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
    if marked is not None:
        foreign = sorted({*foreign, *_not_ours(out_dir, marked)})
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
        shutil.rmtree(tempfile.mkdtemp(prefix=_prefix(out, "probe"), dir=out.parent))
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
    _remove_stale_siblings(out)
    tmp = Path(tempfile.mkdtemp(prefix=_prefix(out, "tmp"), dir=out.parent))
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


def _prefix(out: Path, kind: str) -> str:
    """The hidden sibling's name prefix: the folder, what it is for, the writer's pid."""
    return f".{out.name}.{kind}-{os.getpid()}-"


def _remove_stale_siblings(out: Path) -> None:
    """Remove hidden siblings of `out` left by a writer that is gone (killed mid-write)."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(tmp|old|probe)-(\d+)-[^/]*")
    for entry in out.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if not match or entry.is_symlink() or not entry.is_dir():
            continue
        pid = int(match.group(2))
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
