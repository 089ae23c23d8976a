"""The measured tables' column cache (hardware/table_cache.py): the same arrays as the
Parquet file, read by a later process without importing pyarrow, read again when the file
changes, and ignored when damaged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hardware import kernel_db, table_cache

TABLE = ("h200_sxm", "attention", "trtllm", "1.3.0rc20", "generation_attention_perf")
NAMES = ("batch_size", "step", "latency", "kv_cache_dtype")

needs_db = pytest.mark.skipif(not kernel_db.installed(), reason="aiconfigurator-core not installed")


@needs_db
def test_the_cache_returns_the_parquet_columns_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("MAPSHARD_CACHE_DIR", str(tmp_path))
    read = kernel_db._columns.__wrapped__  # past the per-process memo
    first = read(*TABLE, NAMES)
    assert first is not None and len(list((tmp_path / "kernel_tables").iterdir())) == 1
    again = read(*TABLE, NAMES)
    for name in NAMES:
        assert again[name].dtype == first[name].dtype
        assert np.array_equal(again[name], first[name])
    assert set(first["kv_cache_dtype"]) >= {"bfloat16"}


@needs_db
def test_a_warm_cache_is_read_without_pyarrow(tmp_path):
    code = (
        "import sys; from hardware import kernel_db; "
        "g = kernel_db.generation_attention_grid('h200_sxm', 'trtllm', '1.3.0rc20', 32, 8, 128, "
        "'bfloat16'); print(g is not None, 'pyarrow' in sys.modules)"
    )
    env = {**os.environ, "MAPSHARD_CACHE_DIR": str(tmp_path)}
    root = Path(__file__).resolve().parents[2]
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True)
        for _ in range(2)
    ]
    assert [r.stdout.decode().split() for r in runs] == [["True", "True"], ["True", "False"]]


def test_a_changed_file_gets_a_new_key_and_a_damaged_entry_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("MAPSHARD_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "t.parquet"
    source.write_bytes(b"one")
    names = ("a",)
    table_cache.store(source, names, {"a": np.arange(3)})
    assert np.array_equal(table_cache.load(source, names)["a"], np.arange(3))
    before = table_cache.key(source, names)
    os.utime(source, ns=(1, 1))
    assert table_cache.key(source, names) != before
    assert table_cache.load(source, names) is None
    for damaged in (b"not a zip", b"PK\x03\x04 cut short"):
        (table_cache.cache_dir() / table_cache.key(source, names)).write_bytes(damaged)
        assert table_cache.load(source, names) is None
    # a newer version of the entry replaces the older file; a stale temporary file goes
    table_cache.store(source, names, {"a": np.arange(4)})
    stale = table_cache.cache_dir() / "x.npz.tmp"
    stale.write_bytes(b"")
    os.utime(stale, (0, 0))
    (table_cache.cache_dir() / "v0-old-format.npz").write_bytes(b"")  # another format's
    os.utime(source, ns=(2, 2))
    table_cache.store(source, names, {"a": np.arange(5)})
    assert [p.name for p in table_cache.cache_dir().iterdir()] == [table_cache.key(source, names)]
    # no home directory: no cache, no error
    monkeypatch.delenv("MAPSHARD_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    assert table_cache.load(source, names) is None
    table_cache.store(source, names, {"a": np.arange(3)})  # nothing written, nothing raised
    monkeypatch.setenv("MAPSHARD_CACHE_DIR", str(tmp_path / "cache"))
    # object columns are not cached (they would need pickling)
    os.utime(source, ns=(3, 3))
    table_cache.store(source, names, {"a": np.array([None, 1], dtype=object)})
    assert table_cache.load(source, names) is None
