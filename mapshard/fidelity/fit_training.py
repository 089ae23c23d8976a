"""Fitting the FP8 split-accumulation GEMM plateau and the TP comm overlap's hidden share
to measured FP8 training runs.

Transformer Engine runs an FP8 linear layer's forward GEMM with cuBLASLt's fast (imprecise)
accumulation and its dgrad and wgrad GEMMs with split accumulation (partial sums promoted to
FP32; TE's _2X_ACC_DGRAD / _2X_ACC_WGRAD), which Hopper runs slower: 1.1x-1.2x (pytorch/ao
issue #2377, H100). The GEMM microbenchmarks behind the chip's FP8 plateau (Azure's
superbench cublaslt_gemm) use fast accumulation, so the split-accumulation plateau has no
kernel measurement of its own; it is fitted here to the chip's FP8 training FIT rows
(end-to-end NeMo steps), everything else held at the chip file's values:
- each usable FIT row of the chip with precision fp8, kind training_step and a dense model
  (no experts: fp8_training_rows) is planned with
  `efficiency.fp8_split_accumulate_util = u` and `efficiency.tp_comm_hidden_share = h` set
  in its setup (the chip's other numbers untouched), for (u, h) on GRID x HIDDEN_GRID;
- (u, h) minimises the mean |relative error| of the predicted step time over the rows.
The hidden share is the chip's contention of any collective run beside compute: it acts on
the TP collectives of the rows whose recipe overlaps them with the GEMMs (extra_params
tp_comm_overlap=1, Transformer Engine userbuffers: the chunked collective runs beside the
GEMM and the two contend for the SMs, so less than all of the shorter one hides) and on
every row's step-level overlaps (the DP gradient reduce-scatter and parameter all-gather,
the interleaved pipeline's and the CP ring's transfers; solver.cost.latency.exposed_under).
Grid point h = 0 is "nothing hides" (the share is set to NO_HIDING, since a 0 in the chip
message means "uncalibrated", which the step-level overlaps read as perfect).
The step time is re-planned at each point (not rescaled from one plan): the step is a
max/sum of overlapped terms (pipeline p2p, DP collectives) that do not scale linearly.
Run: `python -m mapshard.fidelity.fit_training` (H100, about 30 minutes on one core);
`python -m mapshard.fidelity.fit_training --no-split B200 GB200` fits the Blackwell share alone
(no split plateau), jointly over both chips' rows (a few minutes).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mapshard import pipeline
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.scenarios import Unmodelable, build_setup, load_setup_scenario
from schema import setup_pb2
from schema.errors import InfeasibleError

# fraction of the FP8 peak; H100's fast-accumulation plateau is 0.694 (chip file)
GRID = tuple(round(0.450 + 0.01 * i, 3) for i in range(12))  # 0.45 .. 0.56
HIDDEN_GRID = tuple(round(0.1 * i, 1) for i in range(11))  # 0 .. 1
NO_HIDING = 1e-6  # the share grid point 0 sets: positive, so it is read, and nothing hides
SPLIT_NONE = (0.0,)  # the plateau grid of a chip with no split plateau (0 = none in the file)


@dataclass(frozen=True)
class PlateauFit:
    util: float
    mean_abs_err: float
    max_abs_err: float
    rows: tuple[str, ...]
    hidden: float = 0.0  # tp_comm_hidden_share


def fit_plateau(
    step_times: Callable[[float, float], Sequence[float]],
    measured_s: Sequence[float],
    rows: Sequence[str],
    grid: Sequence[float] = GRID,
    hidden_grid: Sequence[float] = HIDDEN_GRID,
) -> PlateauFit:
    """The grid point (u, h) whose predicted step times (`step_times(u, h)`, one per row)
    have the least mean |predicted / measured - 1|; ties go to the first (lowest u, then
    lowest h)."""
    assert measured_s and len(measured_s) == len(rows), "no rows to fit"
    best: PlateauFit | None = None
    for u in grid:
        for h in hidden_grid:
            times = step_times(u, h)
            errs = [abs(t / m - 1) for t, m in zip(times, measured_s, strict=True)]
            mean = sum(errs) / len(errs)
            if best is None or mean < best.mean_abs_err - 1e-12:
                best = PlateauFit(u, mean, max(errs), tuple(rows), h)
    assert best is not None
    return best


def fp8_training_rows(cases: list[Case], chip: str) -> list[Case]:
    """The chip's usable FP8 training-step rows of dense models: an MoE row's step also
    carries expert costs (routing, token permutation, grouped GEMMs of narrow experts) that
    a dense GEMM plateau and a collective share must not absorb."""
    return [
        c
        for c in cases
        if c.usable
        and c.kind == "training_step"
        and c.text("chip") == chip
        and c.text("precision") == "fp8"
        and c.int("experts") == 0
    ]


def fit_setup(case: Case, util: float, hidden: float) -> tuple[setup_pb2.Setup, list]:
    """The row's setup (and its levels) at plateau `util` and hidden share `hidden`."""
    setup, levels = build_setup(case)
    setup.system.accelerator.efficiency.fp8_split_accumulate_util = util
    # 0 in the message means "the chip file's": grid point 0 sets NO_HIDING instead
    setup.system.accelerator.efficiency.tp_comm_hidden_share = max(hidden, NO_HIDING)
    return setup, levels


def step_time(case: Case, where: Path, util: float, hidden: float = 0.0) -> float:
    """The row's predicted step time with the split-accumulation plateau at `util` and the
    TP comm overlap's hidden share at `hidden`."""
    setup, _ = fit_setup(case, util, hidden)
    plan = pipeline.plan(load_setup_scenario(setup, where))
    return plan.iteration_time_s or plan.latency_s


def measured_step_s(case: Case) -> float:
    """Seconds per step of a tokens-per-second-per-chip training row."""
    tokens = case.float("global_batch") * case.float("seq_len")
    value = case.measured or 0.0
    if case.metric == "tokens_per_s_per_chip":
        return tokens / (value * max(case.int("num_chips", 1), 1))
    if case.metric == "iteration_time_s":
        return value
    raise ValueError(f"{case.id}: metric {case.metric} is not a step time")


def fit_split_accumulate(
    path: Path, chips: Sequence[str], grid: Sequence[float] = GRID
) -> PlateauFit:
    """fp8_split_accumulate_util and tp_comm_hidden_share fitted together to the FP8 training
    rows of `path` on `chips` (one chip, or a family that shares its SMs and links).
    `grid` = SPLIT_NONE fits the share alone, for chips without a fast-accumulation mode to
    lose (Blackwell: no split plateau, split_accumulate_factor is 1)."""
    rows = []
    cases = read_cases(path)
    for c in (c for chip in chips for c in fp8_training_rows(cases, chip)):
        try:
            step_time(c, path.parent, grid[-1])
        except (Unmodelable, InfeasibleError):  # no plan at any plateau: nothing to fit
            continue
        rows.append(c)

    def times(u: float, h: float) -> list[float]:
        return [step_time(c, path.parent, u, h) for c in rows]

    return fit_plateau(times, [measured_step_s(c) for c in rows], [c.id for c in rows], grid)


if __name__ == "__main__":  # pragma: no cover - the fit's command line
    # python -m mapshard.fidelity.fit_training [--no-split] CHIP [CHIP ...]
    no_split = "--no-split" in sys.argv
    names = [a for a in sys.argv[1:] if a != "--no-split"] or ["H100-SXM5-80GB"]
    fit_path = Path("tests/data/validation/validation_public_fit.csv")
    result = fit_split_accumulate(fit_path, names, SPLIT_NONE if no_split else GRID)
    print(
        f"{', '.join(names)}: fp8_split_accumulate_util {result.util}, tp_comm_hidden_share "
        f"{result.hidden} (mean |err| "
        f"{100 * result.mean_abs_err:.2f}%, max {100 * result.max_abs_err:.2f}%) over "
        f"{', '.join(result.rows)}"
    )
