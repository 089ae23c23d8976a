"""The result folder of a plan and its terminal views.

write_results (write.py) writes summary.json, kernels.csv, configs.csv, trace.json,
mapping.dot/.svg, report.html and plan.txt; format_summary (terminal.py) and format_explain
(explain.py) are what `mapshard run` and `mapshard explain` print; bounds_files (bounds.py)
is `mapshard bounds`. Imports are lazy so `mapshard --help` does not load matplotlib.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "write_results": "mapshard.report.write",
    "result_files": "mapshard.report.write",
    "summary_dict": "mapshard.report.summary",
    "format_summary": "mapshard.report.terminal",
    "format_explain": "mapshard.report.explain",
    "bounds_files": "mapshard.report.bounds",
    "report_html": "mapshard.report.html",
    "trace_dict": "mapshard.report.trace",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mapshard.report' has no attribute {name!r}")
