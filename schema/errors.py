"""The three kinds of failure: bad input, infeasible design, no plan in time."""

from __future__ import annotations


class SetupError(Exception):
    """Bad input. Carries every problem found, each a one-line message naming the file and
    the line:column or field path, and what would be valid."""

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class InfeasibleError(Exception):
    """A valid design that cannot run the workload: names the binding resource, the demand,
    the capacity and the smallest change that would make it feasible."""

    def __init__(self, resource: str, reason: str, suggestion: str = ""):
        self.resource = resource
        self.reason = reason
        self.suggestion = suggestion
        super().__init__(reason + (f"; {suggestion}" if suggestion else ""))


class NoPlanError(Exception):
    """The solver stopped at its limit before finding any plan."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (no half-written or
    hidden temporary result is left behind)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during the search after a first plan: carries the best plan found
    (status "interrupted", its gap to the proven bound) so the caller can still write it.
    The signal's own exception is the __cause__."""

    def __init__(self, plan: object, during_what_if: bool = False):
        super().__init__("interrupted")
        self.plan = plan
        self.result: object | None = None  # set once the plan has been written
        # the search had ended: the what-if table's re-solves were cut short, and the plan
        # (with its own status) was written without that table
        self.during_what_if = during_what_if
