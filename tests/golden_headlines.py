"""Headline figures of every gallery scenario, pinned before a refactor so that a change in
structure that moves a number is caught. Regenerate only on purpose:
`python tests/golden_headlines.py` (writes tests/data/golden/gallery_headlines.json)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden" / "gallery_headlines.json"
HEADLINE_KEYS = (
    "status",
    "latency_s",
    "iteration_time_s",
    "ttft_s",
    "tpot_s",
    "tokens_per_s",
    "parallelism",
    "num_chips",
    "system_cost",
    "system_power_W",
    "workload_flop",
    "flops_utilization",
    "memory_per_chip_bytes",
    "num_params",
    "num_active_params",
    "num_configs",
    "num_kernels",
)


def headlines(summary: dict) -> dict:
    out = {k: summary[k] for k in HEADLINE_KEYS if k in summary}
    stream = summary.get("stream")
    if stream:  # a request-stream scenario: its own figures, flat (floats compared approx)
        out["stream_output_tokens_per_s"] = stream["output_tokens_per_s"]
        out["stream_ttft_p50_s"] = stream["ttft_s"]["p50"]
        out["stream_tpot_p50_s"] = stream["tpot_s"]["p50"]
        out["stream_max_concurrency"] = stream["max_concurrency"]
        out["stream_steps"] = stream["steps"]
    return out


def _regenerate() -> None:
    # local: run as a script, ROOT is put on sys.path (below) before mapshard can import
    from mapshard.cli import main

    golden = {}
    for setup in sorted((ROOT / "scenarios").glob("*/setup.txt")):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "r"
            code = main(["run", str(setup.parent), "--out", str(out), "--quiet"])
            assert code == 0, setup
            golden[setup.parent.name] = headlines(json.loads((out / "summary.json").read_text()))
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"written: {GOLDEN}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    _regenerate()
