"""The command line: parse arguments, call one pipeline function, print. It never computes.

Each subcommand's function is named in COMMANDS and imported only when that command runs
(`importlib.import_module` at dispatch): start-up cost. Importing every command's modules up
front (pipeline, solver, sweeps, validation) took about a second before `--help` printed."""

from __future__ import annotations

import argparse
import importlib
import math
import signal
import sys
import threading
from typing import TextIO

from mapshard.fmt import terminal_safe
from schema.errors import InfeasibleError, NoPlanError, SetupError, Terminated

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_NO_PLAN = 0, 2, 3, 4

#: subcommand -> (module, function): `function(args) -> exit code`, imported at dispatch
COMMANDS = {
    "run": ("mapshard.commands", "cmd_run"),
    "generate": ("mapshard.commands", "cmd_generate"),
    "explain": ("mapshard.commands", "cmd_explain"),
    "bounds": ("mapshard.commands", "cmd_bounds"),
    "hardware": ("mapshard.commands_library", "cmd_hardware"),
    "models": ("mapshard.commands_library", "cmd_models"),
    "sweep": ("mapshard.sweeps.cli", "run_sweep_command"),
    "compare": ("mapshard.commands_compare", "cmd_compare"),
    "validate": ("mapshard.validate_cases", "run_validation_command"),
    "profile": ("mapshard.profile", "run_profile_command"),
}

EXAMPLES = {
    "run": "mapshard run scenarios/llama31_8b_decode_h100 --out /tmp/result",
    "generate": "mapshard generate scenarios/gpt3_175b_train_a100 --out /tmp/graph",
    "explain": "mapshard explain scenarios/llama31_8b_decode_h100",
    "bounds": "mapshard bounds scenarios/llama31_8b_decode_h100 --out /tmp/bounds",
    "hardware": "mapshard hardware list; mapshard hardware show H100-SXM5-80GB",
    "models": "mapshard models",
    "sweep": "mapshard sweep scenarios/sweep_llama70b/sweep.txt --workers 2 --out /tmp/sweep",
    "validate": "mapshard validate tests/data/validation/validation_dev_structured.csv "
    "--out /tmp/val",
    "compare": "mapshard compare scenarios/jgs_llama31_8b_1024_1024 "
    "scenarios/nvlax_llama31_8b_1024_1024 --out /tmp/cmp",
    "profile": (
        "mapshard profile compare tests/data/profiles/llama_2layer_prefill_h100 "
        "tests/data/profiles/sample_ncu_raw.csv"
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2 (no abbreviations)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise SetupError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _seconds(text: str) -> float:
    """A time limit: a finite number of seconds >= 0 (0 = none)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _sub(subparsers, name: str, help_text: str) -> argparse.ArgumentParser:
    return subparsers.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=f"example: {EXAMPLES[name]}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mapshard",
        description="Optimal mapping and sharding of workloads onto accelerator systems.",
        epilog="example: " + EXAMPLES["run"],
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = _sub(sub, "run", "Solve a scenario and write its result folder.")
    p.add_argument("scenario", help="scenario folder holding setup.txt (or a setup file)")
    p.add_argument("--out", help="result folder (default: SCENARIO/results)")
    p.add_argument("--time-limit", type=_seconds, help="solver time limit in seconds")
    p.add_argument(
        "--cost-model",
        choices=("native", "dfmodel"),
        help="whose equations price a mapping (default: the setup's execution.cost_model, "
        "NATIVE): dfmodel = DFModel's own equations, solved by the same search",
    )
    p.add_argument("--quiet", action="store_true", help="no progress or summary on the terminal")
    what_if = p.add_mutually_exclusive_group()
    what_if.add_argument(
        "--no-sensitivity",
        action="store_true",
        help="skip the what-if table (each resource x0.5 and x2, re-solved)",
    )
    what_if.add_argument(
        "--what-if",
        action="store_true",
        help="compute the what-if table also for large DATAFLOW graphs (skipped by default)",
    )

    p = _sub(sub, "generate", "Write a scenario's kernel graph and per-kernel breakdown.")
    p.add_argument("scenario")
    p.add_argument("--out", help="output folder (default: SCENARIO/graph)")

    p = _sub(sub, "explain", "Why the plan is what it is: binding bounds and the outer choices.")
    p.add_argument("scenario")
    p.add_argument("--time-limit", type=_seconds)

    p = _sub(sub, "bounds", "Data-movement frontier (DRAM traffic vs buffer) of the GEMMs.")
    p.add_argument("scenario")
    p.add_argument("--out", help="output folder (default: SCENARIO/bounds)")
    p.add_argument("--kernel", help="only this kernel")

    p = _sub(sub, "hardware", "List or show the hardware library.")
    p.add_argument("action", choices=["list", "show"])
    p.add_argument("name", nargs="?")

    _sub(sub, "models", "List the shipped models (hf_model names) with their parameter counts.")

    p = _sub(sub, "sweep", "Run a design-space sweep (local processes or a Dask cluster).")
    p.add_argument("sweep_file")
    p.add_argument("--workers", type=int, default=0, help="local worker processes (0 = cores)")
    p.add_argument("--cluster", help="Dask scheduler address tcp://HOST:PORT")
    p.add_argument("--out", help="results folder (default: beside the sweep file)")
    p.add_argument("--quiet", action="store_true")

    p = _sub(
        sub, "compare", "Scenarios or result folders side by side (the first is the reference)."
    )
    p.add_argument("items", nargs="+", metavar="DIR", help="scenario or result folders (>= 2)")
    p.add_argument("--out", help="folder for compare.html and compare.csv (default: ./compare)")
    p.add_argument("--time-limit", type=_seconds, help="solver time limit per scenario")

    p = _sub(sub, "validate", "Predict published measurements and report the error.")
    p.add_argument("cases", help="CSV in the structured validation format")
    p.add_argument("--out", help="output folder (default: validation_results)")
    p.add_argument("--check", action="store_true", help="exit 1 when error bounds are exceeded")
    p.add_argument(
        "--single-pass",
        action="store_true",
        help="predict each row once (skip the measured kernel tables vs physical model "
        "comparison, validation_sources.csv)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")

    p = _sub(sub, "profile", "Compare a plan with a measured profile, or calibrate a chip.")
    p.add_argument("action", choices=["compare", "calibrate"])
    p.add_argument("scenario")
    p.add_argument("profile", help="Nsight Compute CSV or Chrome/Perfetto trace JSON")
    p.add_argument("--out")
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


class _TerminalSafe:
    """A text stream that escapes control characters from what it is given (names from a
    setup, a CSV, a chip table), keeping only those MapShard prints itself."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(terminal_safe(text, own_controls=True))

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _TerminalSafe(sys.stdout), _TerminalSafe(sys.stderr)  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


def _one_line(problem: str) -> str:
    """An error as one terminal line: a carriage return or newline from a name in it (a
    file, a chip) escaped like every other control character."""
    return terminal_safe(problem).replace("\n", "\\n")


def _main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
        module, function = COMMANDS[args.command]
        return getattr(importlib.import_module(module), function)(args)
    except SetupError as exc:
        for problem in exc.problems:
            print(f"error: {_one_line(problem)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except InfeasibleError as exc:
        print(f"infeasible: {_one_line(f'{exc.resource}: {exc}')}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except NoPlanError as exc:
        print(f"no plan: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_NO_PLAN
    except KeyboardInterrupt as exc:
        print("interrupted: nothing was written", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
