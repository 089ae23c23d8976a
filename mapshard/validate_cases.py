"""`mapshard validate CASES.csv [--out DIR] [--check]`: predict every case of a CSV in the
structured validation format and report the error.

Stages, one function each: read the cases -> predict each usable one with MapShard's own
model (mapshard.fidelity.predict) -> write validation.csv, validation_summary.csv and
validation.svg -> print the summary -> with --check, exit 1 when a group's mean |error|
exceeds its bound (gemm, memory_copy, collective 5 %; training 8 %; inference 15 %).
Rows with usable=0 and rows that cannot be modelled are listed with their reason, never
dropped, and do not count towards the means.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hardware import library
from hardware.calibration import calibration_of
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.predict import predict
from mapshard.fidelity.report import Outcome, format_summary, output_files, summarize
from mapshard.fidelity.scenarios import Unmodelable
from mapshard.fidelity.sources import compare, format_sources, sources_csv
from mapshard.outdir import check_writable, replace_folder
from mapshard.progress import Progress
from schema.errors import InfeasibleError, NoPlanError, SetupError

EXIT_OK, EXIT_BOUNDS = 0, 1
# what a row predicted on an uncalibrated chip carries in its reason (hardware.calibration)
UNCALIBRATED_NOTE = (
    "uncalibrated chip: every kernel at 100% of peak, collectives after their kernels"
)


def _skip_reason(case: Case) -> str:
    notes = case.text("notes")
    first = notes.split(". ")[0].strip().rstrip(".") if notes else "no reason given"
    return f"skipped: usable=0 ({first})"


def validate_case(case: Case, where: Path) -> Outcome:
    """One case's outcome: a prediction, or the reason there is none."""
    base = dict(
        id=case.id,
        kind=case.kind,
        group=case.group,
        metric=case.metric,
        measured=case.measured,
        chip=case.text("chip"),
    )
    if not case.usable:
        return Outcome(**base, predicted=None, reason=_skip_reason(case))
    if case.measured is None:
        return Outcome(**base, predicted=None, reason="no measured value")
    try:
        pred = predict(case, where)
    except Unmodelable as exc:
        return Outcome(**base, predicted=None, reason=f"not modelled: {exc}")
    except SetupError as exc:
        return Outcome(
            **base, predicted=None, reason="scenario rejected: " + "; ".join(exc.problems)
        )
    except (InfeasibleError, NoPlanError) as exc:
        return Outcome(**base, predicted=None, reason=f"no plan: {exc}")
    except ValueError as exc:
        return Outcome(**base, predicted=None, reason=f"malformed row: {exc}")
    except Exception as exc:  # a defect on one row must not stop the others: recorded
        why = f"failed: {type(exc).__name__}: {exc} (a MapShard defect; please report it)"
        return Outcome(**base, predicted=None, reason=why)
    spec = library.find_chip(case.text("chip"))
    if spec is not None and not calibration_of(spec.accelerator.efficiency).calibrated:
        # the row's own line says it: a bound on speed, not a forecast
        return Outcome(**base, predicted=pred.value, reason=f"{pred.detail}; {UNCALIBRATED_NOTE}")
    return Outcome(**base, predicted=pred.value, reason=pred.detail)


def validate_cases(
    cases: Sequence[Case], where: Path, on_case: Callable[[int, Case], None] | None = None
) -> list[Outcome]:
    """Every case's outcome, in order; `on_case(i, case)` before the i-th (progress)."""
    out = []
    for i, case in enumerate(cases):
        if on_case is not None:
            on_case(i, case)
        out.append(validate_case(case, where))
    return out


def row_progress(progress: Progress, total: int, what: str) -> Callable[[int, Case], None]:
    """The heartbeat's line for the i-th of `total` rows."""
    return lambda i, case: progress.say(f"{what} row {i + 1} of {total}: {case.id} ({case.kind})")


def uncalibrated_chips(cases: Sequence[Case], outcomes: Sequence[Outcome]) -> dict[str, int]:
    """{library chip: predicted rows} for the chips whose efficiency is not calibrated: their
    predictions run every kernel at peak, an upper bound on speed, not a forecast."""
    predicted = {o.id for o in outcomes if o.predicted is not None}
    out: dict[str, int] = {}
    for c in cases:
        spec = library.find_chip(c.text("chip"))
        if c.id in predicted and spec is not None:
            if not calibration_of(spec.accelerator.efficiency).calibrated:
                out[spec.name] = out.get(spec.name, 0) + 1
    return dict(sorted(out.items()))


def run_validation_command(args: argparse.Namespace) -> int:
    """The CLI entry point (mapshard.cli.COMMANDS["validate"])."""
    path = Path(args.cases)
    cases = read_cases(path)
    out = Path(args.out or "validation_results")
    check_writable(out)  # before minutes of predictions: a user's folder is refused now
    with Progress(enabled=not getattr(args, "quiet", False)) as progress:
        outcomes = validate_cases(cases, path, row_progress(progress, len(cases), "predicting"))
    summary = summarize(outcomes)
    files = output_files(outcomes, summary)
    print(format_summary(summary))
    # the CLI compares by default (--single-pass skips it); a caller's Namespace without the
    # flag (the e2e fixtures) gets one pass, keeping the suite's time
    compare_sources = not getattr(args, "single_pass", True)
    if compare_sources:
        with Progress(enabled=not getattr(args, "quiet", False)) as progress:
            again = row_progress(progress, len(cases), "with the other kernel source:")
            seen = {c.id: i for i, c in enumerate(cases)}

            def other(c: Case) -> Outcome:
                again(seen.get(c.id, 0), c)
                return validate_case(c, path)

            lines = compare(cases, outcomes, other)
        files["validation_sources.csv"] = sources_csv(lines)
        print("\nmean |error| with the measured kernel tables and with the physical model alone:")
        print(format_sources(lines))
    flagged = uncalibrated_chips(cases, outcomes)
    if flagged:
        rows = ", ".join(f"{chip} ({n})" for chip, n in flagged.items())
        print(f"\npredicted on uncalibrated chips (every kernel at 100% of peak): {rows}")
    skipped = [o for o in outcomes if o.predicted is None]
    if skipped:
        print("\nnot predicted:")
        for o in skipped:
            print(f"  {o.id}: {o.reason}")
    replace_folder(out, files)  # one folder MapShard owns (mapshard/outdir.py)
    print(
        f"\nwritten: {out / 'validation.csv'}, validation_summary.csv, validation.svg"
        + (", validation_sources.csv" if compare_sources else "")
    )
    if args.check:
        failed = [s for s in summary if s.within_bound is False]
        for s in failed:
            print(
                f"check: {s.group} mean |error| {s.mean_abs_pct:.2f}% exceeds {s.bound_pct:g}%",
                file=sys.stderr,
            )
        return EXIT_BOUNDS if failed else EXIT_OK
    return EXIT_OK
