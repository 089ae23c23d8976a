"""Test layout: unit/ (one module, hand-derived numbers), solver/ (MILP against brute force,
time limits, scale), e2e/ (the CLI, reports, sweeps, validation), corpus/ (malformed and
fuzzed inputs). Shared fixtures live beside this file. `-m "not slow"` skips the slow ones."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fixture modules beside this file
