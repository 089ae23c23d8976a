"""A per-user cache of the measured tables' columns as numpy files, so a run that prices a few
kernels from NVIDIA's tables reads them without importing pyarrow (its import is about a
tenth of a default run's start-up, issue #39).

The cache holds what `kernel_db` derived from an installed Parquet file, never a copy the
repository ships: one `.npz` per (file, columns), named by a hash of the file's path, size
and modification time and of the column names, so a changed or reinstalled database is read
again. Where: $MAPSHARD_CACHE_DIR, else $XDG_CACHE_HOME/mapshard, else ~/.cache/mapshard
(`kernel_tables/` inside). Written atomically (a temporary file renamed into place); any
error reading or writing it (a read-only home, a damaged file) falls back to the Parquet
file, so the cache changes how fast a table is read, never what is read.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

FORMAT = "1"  # bump when what is stored changes


def cache_dir() -> Path:
    given = os.environ.get("MAPSHARD_CACHE_DIR")
    if given:
        return Path(given) / "kernel_tables"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mapshard" / "kernel_tables"


def key(source: Path, names: tuple[str, ...]) -> str:
    """The cache file name of `names` read from `source` (changes with its content)."""
    stat = source.stat()
    text = "\n".join((FORMAT, str(source.resolve()), str(stat.st_size), str(stat.st_mtime_ns)))
    return hashlib.sha256("\n".join((text, *names)).encode()).hexdigest()[:32] + ".npz"


def load(source: Path, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The cached columns, None when absent or unreadable."""
    import numpy as np  # loaded by a run's stages, not by importing the run (test_cli_startup)

    try:
        path = cache_dir() / key(source, names)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as stored:
            columns = {name: stored[name] for name in names}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return columns


def store(source: Path, names: tuple[str, ...], columns: dict[str, Any]) -> None:
    """Keep `columns` for the next process; silently nothing when it cannot be written or
    a column is not plain numbers or text (object arrays would need pickling)."""
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
                np.savez(f, **{name: columns[name] for name in names})
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        return
