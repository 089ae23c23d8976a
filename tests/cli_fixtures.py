"""Running `mapshard` in a child process and signalling it while the solver runs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

# The child blocks inside the solver's first progress callback (after it has said so on
# stdout), so the signal provably lands mid-solve, however fast the solve has become; later
# callbacks (a report made while the interrupt unwinds) return at once.
_CHILD = """
import math, sys, time
from mapshard import cli, progress

AFTER_FIRST_PLAN = {after_first_plan}
IN_WHAT_IF = {in_what_if}
BLOCKED = []  # block once: a report made while the signal unwinds must not block again

def update(self, state):
    if BLOCKED:
        return
    if IN_WHAT_IF:  # the what-if stage's report: the plan is solved, the table not yet
        if not str(getattr(state, "text", "")).startswith("what-if"):
            return
    elif not hasattr(state, "best_latency_s"):  # a stage report, not the solver's
        return
    elif AFTER_FIRST_PLAN and not math.isfinite(state.best_latency_s):
        return
    BLOCKED.append(True)
    print("inside the solve", flush=True)
    time.sleep(120)

progress.Progress.update = update
sys.exit(cli.main(sys.argv[1:]))
"""


def _default_signals() -> None:
    """In the child before exec: SIGINT and SIGTERM at their defaults, whatever the test
    process set (a disposition of SIG_IGN survives exec, and the child would sleep on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def signal_mid_solve(
    scenario: Path,
    out: Path,
    signum: int,
    after_first_plan: bool = False,
    in_what_if: bool = False,
) -> tuple[int, str]:
    """`mapshard run scenario --out out`, sent `signum` inside the solve (before its first
    plan, or with `after_first_plan` once the search holds one; with `in_what_if`, once the
    plan is solved, as the what-if table starts, which the run then asks for): (exit code,
    stderr)."""
    child_code = _CHILD.format(after_first_plan=after_first_plan, in_what_if=in_what_if)
    cmd = [sys.executable, "-c", child_code, "run", str(scenario), "--out", str(out), "--quiet"]
    cmd += ["--what-if"] if in_what_if else []
    child = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,  # an ignored SIGINT would be inherited across exec
    )
    try:
        assert child.stdout.readline() == "inside the solve\n", child.stderr.read()
        child.send_signal(signum)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    return child.returncode, stderr
