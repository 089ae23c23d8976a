"""Test layout: unit/ (one module, hand-derived numbers), solver/ (MILP against brute force,
time limits, scale), e2e/ (the CLI, reports, sweeps, validation), corpus/ (malformed and
fuzzed inputs). Shared fixtures live beside this file. `-m "not slow"` skips the slow ones."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fixture modules beside this file
# the measured tables' column cache (hardware/table_cache.py) in a folder of the run's own,
# not the user's: every test process starts cold and writes nothing outside a temp folder
os.environ.setdefault("MAPSHARD_CACHE_DIR", tempfile.mkdtemp(prefix="mapshard_test_cache_"))
