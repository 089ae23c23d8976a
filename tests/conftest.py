"""Test layout: unit/ (one module, hand-derived numbers), solver/ (MILP against brute force,
time limits, scale), e2e/ (the CLI, reports, sweeps, validation), corpus/ (malformed and
fuzzed inputs). Shared fixtures live beside this file. `-m "not slow"` skips the slow ones."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fixture modules beside this file
# the measured tables' column cache (hardware/table_cache.py) in a folder of each test
# process's own, removed when it exits: every test process starts cold, and nothing is
# written to the user's cache (whatever MAPSHARD_CACHE_DIR the shell sets)
_CACHE = tempfile.mkdtemp(prefix="mapshard_test_cache_")
os.environ["MAPSHARD_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
