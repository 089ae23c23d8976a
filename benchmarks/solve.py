"""Solver benchmark: model size, build time, solve time and gap on four reference problems.

    python benchmarks/solve.py [--repeat 1] [--time-limit 60]

Cases (targets on a 2-core machine, from the solver issue):
  dfmodel_gpt3_1t   DFModel's GPT-3 1T / 1024 SN30 example, DATAFLOW   (<= 1% gap in <= 10 s)
  gpt3_175b_a100    GPT-3 175B training on 1024 A100, kernel-by-kernel, degrees searched (<= 5 s)
  llama70b_8xh100   Llama-3.1-70B inference (decode) on 8 H100                        (<= 5 s)
  synthetic_200     a 200-kernel synthetic chain with 8 configurations, DATAFLOW     (<= 5 s)
  dfmodel_80mib     the DFModel example with 80 MiB of SRAM per chip (no target: the regime
                    where the SRAM forces a training layer into several configurations, so
                    forward->backward skip edges couple their layouts; tracked, not promised)
Prints one row per case with medians over --repeat runs.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from generator.graph import Phase, Workload  # noqa: E402
from mapshard import pipeline  # noqa: E402
from solver.api import solve_workload as plan  # noqa: E402
from solver.options import ExecutionOptions, SolverOptions  # noqa: E402

SCENARIOS = {
    "dfmodel_gpt3_1t": ("scenarios/dfmodel_gpt3_1t_sn30", 10.0),
    "gpt3_175b_a100": ("scenarios/gpt3_175b_train_a100", 5.0),
    "llama70b_8xh100": ("scenarios/llama31_70b_decode_8xh100", 5.0),
}


def run_scenario(path: str, time_limit: float):
    scenario = pipeline.load_scenario(ROOT / path)
    t0 = time.perf_counter()
    result = pipeline.solve(scenario, time_limit)
    return result, time.perf_counter() - t0


def run_small_sram(time_limit: float):
    scenario = pipeline.load_scenario(ROOT / SCENARIOS["dfmodel_gpt3_1t"][0])
    system = scenario.system
    system = replace(system, chip=replace(system.chip, sram_bytes=80 * 2**20))
    t0 = time.perf_counter()
    result = plan(
        scenario.workload,
        system,
        pipeline.execution_options(scenario.setup),
        pipeline.solver_options(scenario.setup, time_limit),
        "dfmodel_80mib",
    )
    return result, time.perf_counter() - t0


def run_synthetic(time_limit: float):
    from solver_fixtures import random_chain, small_system

    graph = random_chain(random.Random(5), 200)
    system = small_system(num_chips=2, sram_bytes=2e4)
    system = replace(system, network=(replace(system.network[0], parallelism=("TP",)),))
    workload = Workload(kind="graph", phases=(Phase("graph", graph),))
    t0 = time.perf_counter()
    result = plan(
        workload,
        system,
        ExecutionOptions(dataflow=True, num_config=8),
        SolverOptions(time_limit_s=time_limit, gap=0.01),
        "synthetic_200",
    )
    return result, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--only", help="run one case")
    args = parser.parse_args()
    header = (
        f"{'case':18} {'status':10} {'gap':>7} {'solve s':>8} {'target s':>8} "
        f"{'ratio':>6} {'vars':>7} {'bins':>6} {'rows':>6} {'milps':>6} {'build s':>8} "
        f"{'latency':>11}"
    )
    print(header)
    print("-" * len(header))
    cases = list(SCENARIOS) + ["synthetic_200", "dfmodel_80mib"]
    for name in cases:
        if args.only and name != args.only:
            continue
        times, result = [], None
        for _ in range(args.repeat):
            if name == "synthetic_200":
                result, seconds = run_synthetic(args.time_limit)
                target = 5.0
            elif name == "dfmodel_80mib":
                result, seconds = run_small_sram(args.time_limit)
                target = math.nan
            else:
                path, target = SCENARIOS[name]
                result, seconds = run_scenario(path, args.time_limit)
            times.append(seconds)
        med = statistics.median(times)
        s = result.stats
        print(
            f"{name:18} {s.status:10} {s.gap:7.2%} {med:8.2f} {target:8.1f} "
            f"{med / target:6.2f} {s.num_vars:7d} {s.num_binaries:6d} {s.num_rows:6d} "
            f"{s.milps_solved:6d} {s.build_time_s:8.2f} {result.latency_s:11.4g}"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
