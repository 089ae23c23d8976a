"""What a whole `mapshard run` costs beside its solve (issue #39 item 4), in CPU seconds.

    python benchmarks/run_cost.py [SCENARIO ...] [--repeat 1]

For each scenario (default: DFModel's README case, scenarios/dfmodel_gpt3_1t_sn30):
  solve s    CPU of `pipeline.plan` alone (the search and its check), in this process
  run s      CPU of `python -m mapshard.cli run SCENARIO --out TMP --quiet` in a child
             process: imports, load, solve, what-if when the run computes it, every
             result file (trace.json, report.html, ...)
  ratio      run / solve (target: <= 1.5 on the README case)
  import s   CPU a child process spends importing every module such a run loads (the list
             taken from a run in another child; target: < 0.5, issue #39 item 5)
  peak MiB   the run's peak resident memory
CPU seconds (user + system) do not depend on what else the machine runs as wall time does;
the load average is printed beside them. Without cached bytecode every process compiles the
project's modules again (~0.4 CPU-s more): `./run.sh` compiles them when it installs, and
Python writes what is missing unless PYTHONDONTWRITEBYTECODE is set; the setting in force
and whether the project's bytecode is there are printed.

Measured on 2 idle cores (load 0.6-1.0), bytecode present, --repeat 3:
  scenario                 solve s  run s  ratio  import s  peak MiB
  llama31_8b_decode_h100      -      0.62    -      0.38       66
  dfmodel_gpt3_1t_sn30      14.09   17.74  1.26     0.37      232
Since the demand order of solver/fusion/demand.py the README case is proven (3
configurations, 72.66 s) sooner: 10.11 / 11.06 s, ratio 1.09, one run at load 1.2.
Without the project's bytecode (PYTHONDONTWRITEBYTECODE=1 on a tree never compiled) the
imports take ~0.8 CPU-s.
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


LIST_MODULES = (
    "import sys; from mapshard.cli import main\n"
    "try:\n    main(['run', sys.argv[1], '--out', sys.argv[2], '--quiet'])\n"
    "except SystemExit:\n    pass\n"
    "open(sys.argv[3], 'w').write('\\n'.join(sorted(sys.modules)))"
)
IMPORT_MODULES = (
    "import importlib, sys, time\n"
    "names = open(sys.argv[1]).read().split()\n"
    "t = time.process_time()\n"
    "for name in names:\n"
    "    try:\n        importlib.import_module(name)\n"
    "    except Exception:\n        pass\n"
    "print(time.process_time() - t)"
)


def imports_cpu(scenario: str, tmp: str) -> float:
    """CPU seconds a fresh process spends importing what a run of `scenario` imports."""
    names = str(Path(tmp) / "modules.txt")
    out = str(Path(tmp) / "listed")
    subprocess.run(
        [sys.executable, "-c", LIST_MODULES, scenario, out, names], cwd=ROOT, check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_MODULES, names], cwd=ROOT, check=True,
        capture_output=True, text=True,
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*", default=[DEFAULT])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    writes = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    cached = any((ROOT / "solver" / "__pycache__").glob("*.pyc"))
    print(
        f"bytecode writing {writes}, the project's bytecode {'present' if cached else 'absent'}"
        f"; load average {os.getloadavg()[0]:.2f} at start"
    )
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
                imports.append(imports_cpu(scenario, tmp))
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
