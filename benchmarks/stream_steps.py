"""Request-stream step table (issue #16 item 4): how far the interpolated step time is from
the step solved directly, and what the grid and a whole stream cost in time.

    python benchmarks/stream_steps.py [--scenario scenarios/llama31_8b_stream_h100]
                                      [--points 40] [--seed 3]

Builds the scenario's step grid exactly as `mapshard run` does (mapshard/analyses/stream_steps.py),
then solves --points random off-grid steps (decode sequences D, KV length C, prompt tokens
P: no prompt, a chunk of the mean prompt, or whole mean prompts) and prints each direct
and interpolated time, their ratio, then the median and largest |error| and the seconds
spent on the grid and on the whole stream (grid + simulation).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mapshard import pipeline  # noqa: E402  (after the repository is on sys.path)
from mapshard.analyses.stream import requests_of, run_stream  # noqa: E402
from mapshard.analyses.stream_steps import StepShape, build_table, point_setup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "llama31_8b_stream_h100"))
    ap.add_argument("--points", type=int, default=40)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    loaded = pipeline.load(args.scenario)
    system = pipeline.resolve(loaded)
    t0 = time.perf_counter()
    view, _, _ = run_stream(loaded, system)
    stream_s = time.perf_counter() - t0
    s = view.settings
    budget, capacity, stats = s["max_num_tokens"], view.kv_capacity_tokens, view.stats
    rows = view.step_points
    contexts = sorted({r["context"] for r in rows if r["decode"]})
    memo: dict = {}

    def solve(shape: StepShape):  # noqa: ANN202
        if shape not in memo:
            one = pipeline.load_message(point_setup(loaded.setup, shape), loaded.path)
            memo[shape] = pipeline.plan(pipeline.assemble(one, system))
        return memo[shape]

    d_max = max(r["decode"] for r in rows)
    mean_prompt = round(sum(r.input_len for r in _requests(loaded)) / s["num_requests"])
    t0 = time.perf_counter()
    table, solved = build_table(
        solve, d_max, budget, mean_prompt, (int(contexts[0]), int(contexts[-1])), capacity
    )
    grid_s = time.perf_counter() - t0
    rng = random.Random(args.seed)
    errors = []
    print("D      C      P    direct_ms  interp_ms  ratio")
    for _ in range(args.points):
        d = rng.randint(1, d_max)
        c = min(rng.randint(int(contexts[0]), int(contexts[-1])), (capacity - budget) // d)
        pick = rng.random()
        if pick < 0.3 or budget - d < mean_prompt:
            p = 0
        elif pick < 0.6:
            p = rng.randint(32, mean_prompt)
        else:
            p = mean_prompt * rng.randint(1, (budget - d) // mean_prompt)
        direct = solve(StepShape(d, c, p, mean_prompt)).latency_s
        interp = table(d, c, p)
        errors.append(abs(interp / direct - 1))
        print(
            f"{d:<6} {c:<6} {p:<5} {direct * 1e3:9.3f}  {interp * 1e3:9.3f}  {interp / direct:.4f}"
        )
    print(
        f"\n|error|: median {statistics.median(errors):.2%}, mean {statistics.mean(errors):.2%}, "
        f"max {max(errors):.2%} over {len(errors)} steps; grid of {solved} points in "
        f"{grid_s:.2f} s; whole stream ({s['num_requests']} requests, {stats.steps} steps) in "
        f"{stream_s:.2f} s (prompts of the mean length {mean_prompt})"
    )


def _requests(loaded):  # noqa: ANN001, ANN202
    return requests_of(loaded.setup.workload.llm_inference)


if __name__ == "__main__":
    main()
