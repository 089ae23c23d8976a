"""A per-user cache of the measured tables' columns as numpy files, so a run that prices a few
kernels from NVIDIA's tables reads them without importing pyarrow (its import is about a
tenth of a default run's start-up, issue #39).

The cache holds what `kernel_db` derived from an installed Parquet file, never a copy the
repository ships: one compressed `.npz` per (file, columns), named
`v<format>-<which>-<version>.npz`: `which` hashes the file's path and the column names,
`version` its size and modification time, so a changed or reinstalled database is read
again and its older entry removed when the new one is written, as are entries of another
format. Where: $MAPSHARD_CACHE_DIR/kernel_tables, else
$XDG_CACHE_HOME/mapshard/kernel_tables (an absolute $XDG_CACHE_HOME), else
~/.cache/mapshard/kernel_tables. Written atomically (a temporary file renamed into place);
any error finding, reading or writing it (no home directory, a read-only one, a damaged
file) falls back to the Parquet file, so the cache changes how fast a table is read, never
what is read.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

FORMAT = "3"  # bump when what is stored changes
STALE_TMP_S = 3600.0  # a temporary file this old was left by a killed process
# what can go wrong finding, reading or writing an entry (Path.home raises RuntimeError
# where the user has no home directory)
FAILURES = (OSError, RuntimeError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def cache_dir() -> Path:
    given = os.environ.get("MAPSHARD_CACHE_DIR")
    if given:
        return Path(given) / "kernel_tables"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "mapshard" / "kernel_tables"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def key(source: Path, names: tuple[str, ...]) -> str:
    """The cache file name of `names` read from `source` (its version part changes with the
    file's size and modification time)."""
    stat = source.stat()
    which = _digest(str(source.resolve()), *names)
    return f"v{FORMAT}-{which}-{_digest(str(stat.st_size), str(stat.st_mtime_ns))}.npz"


def load(source: Path, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The cached columns, None when absent or unreadable."""
    import numpy as np  # loaded by a run's stages, not by importing the run (test_cli_startup)

    try:
        path = cache_dir() / key(source, names)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as stored:
            return {name: stored[f"c{i}"] for i, name in enumerate(names)}
    except FAILURES:
        return None


def store(source: Path, names: tuple[str, ...], columns: dict[str, Any]) -> None:
    """Keep `columns` for the next process, removing older versions of the same entry and
    temporary files killed processes left; silently nothing when it cannot be written or a
    column is not plain numbers or text (object arrays would need pickling)."""
    import numpy as np

    if any(columns[name].dtype == object for name in names):
        return
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / key(source, names)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npz.tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez_compressed(f, **{f"c{i}": columns[n] for i, n in enumerate(names)})
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _prune(folder, target)
    except FAILURES:
        return


def _prune(folder: Path, kept: Path) -> None:
    """Remove the other versions of `kept`'s entry, entries of another format and stale
    temporary files."""
    entry = kept.name.rsplit("-", 1)[0] + "-"  # "v<format>-<which>-"
    now = time.time()
    for path in folder.iterdir():
        name = path.name
        if name.endswith(".tmp"):
            drop = now - path.stat().st_mtime > STALE_TMP_S
        else:
            drop = path != kept and (name.startswith(entry) or not name.startswith(f"v{FORMAT}-"))
        if drop:
            path.unlink(missing_ok=True)
