"""What a whole `mapshard run` costs beside its solve (issue #39 item 4), in CPU seconds.

    python benchmarks/run_cost.py [SCENARIO ...] [--repeat 1]

For each scenario (default: DFModel's README case, scenarios/dfmodel_gpt3_1t_sn30):
  solve s    CPU of `pipeline.plan` alone (the search and its check), in this process
  run s      CPU of `python -m mapshard.cli run SCENARIO --out TMP --quiet` in a child
             process: imports, load, solve, what-if when the run computes it, every
             result file (trace.json, report.html, ...)
  ratio      run / solve (target: <= 1.5 on the README case)
  import s   CPU of `python -c "import mapshard.cli"` in a child process
  peak MiB   the run's peak resident memory
CPU seconds (user + system) do not depend on what else the machine runs as wall time does;
the load average is printed beside them. PYTHONDONTWRITEBYTECODE=1 (no cached bytecode)
makes every process compile the project's ~200 modules again: about 0.7 CPU-s more per
process; the setting in force is printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mapshard import pipeline  # noqa: E402

DEFAULT = "scenarios/dfmodel_gpt3_1t_sn30"


def child_cpu(args: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak MiB) of one child process running `args` from the repository."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, after.ru_maxrss / 1024  # the largest child so far (KiB on Linux)


def solve_cpu(scenario: str) -> float:
    setup = pipeline.load_scenario(ROOT / scenario)
    t0 = time.process_time()
    pipeline.plan(setup)
    return time.process_time() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*", default=[DEFAULT])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    bytecode = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"cached bytecode: {bytecode}; load average {os.getloadavg()[0]:.2f} at start")
    header = (
        f"{'scenario':32} {'solve s':>8} {'run s':>8} {'ratio':>6} {'import s':>8} {'peak MiB':>8}"
    )
    print(header)
    print("-" * len(header))
    python = sys.executable
    for scenario in args.scenarios:
        solves, runs, imports, peak = [], [], [], 0.0
        for _ in range(args.repeat):
            solves.append(solve_cpu(scenario))
            with tempfile.TemporaryDirectory() as tmp:
                out = str(Path(tmp) / "out")
                cpu, peak = child_cpu(
                    [python, "-m", "mapshard.cli", "run", scenario, "--out", out, "--quiet"]
                )
            runs.append(cpu)
            imports.append(child_cpu([python, "-c", "import mapshard.cli"])[0])
        solve, run = statistics.median(solves), statistics.median(runs)
        print(
            f"{Path(scenario).name:32} {solve:8.2f} {run:8.2f} {run / solve:6.2f} "
            f"{statistics.median(imports):8.2f} {peak:8.0f}"
        )
        sys.stdout.flush()
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
