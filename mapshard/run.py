"""The one composition of a run: load -> resolve -> analysis -> what-if -> write. The CLI,
`mapshard.solve`, sweeps, validation and benchmarks call this (or the stages in
pipeline.py); none of them assembles a run of its own.

The analysis is what the setup asks for: the serving view (one solve per batch and input
length), the request stream (a step grid solved, the stream simulated) or one plan.

What a run calls beyond the pipeline's stages (those analyses, the what-if re-solves, the
result folder's writers, the tables of the Python API) is named in STEPS and imported when
first called (`importlib.import_module`), not with this module: `mapshard run` imports it
before reading the setup, and most runs need one analysis of the two, or none.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from hardware.system import System
from mapshard.outdir import check_writable
from mapshard.pipeline import Stage, assemble, check, load, plan, resolve
from mapshard.scenario import Loaded, Scenario, with_cost_model
from mapshard.views import Views
from schema import lazy, setup_pb2
from schema.errors import Interrupted
from solver.plan import Plan

#: what a run calls beyond the pipeline -> (module, function), imported on first use. The
#: analyses are named by the workload.llm_inference field that asks for them (ANALYSES).
STEPS: dict[str, tuple[str, str]] = {
    "serving": ("mapshard.analyses.serving", "serve"),
    "stream": ("mapshard.analyses.stream", "run_stream"),
    "what_if": ("mapshard.analyses.sensitivity", "sensitivity"),
    "write": ("mapshard.report.write", "write_result_folder"),
    "summary": ("mapshard.report.summary", "summary_dict"),
    "kernels_csv": ("mapshard.report.tables", "kernels_csv"),
    "configs_csv": ("mapshard.report.tables", "configs_csv"),
}

#: the analyses in the order they are looked for: llm_inference.serving (one solve per batch
#: and input length), then llm_inference.stream (a step grid solved, the stream simulated)
ANALYSES = ("serving", "stream")


def step(name: str) -> Callable[..., Any]:
    """The function STEPS names `name`, its module imported now."""
    return lazy.load(STEPS[name])


def analysis_wanted(setup: setup_pb2.Setup) -> str | None:
    """The analysis the setup asks for (a name in ANALYSES), None for one plan: an
    llm_inference workload with `serving` or `stream` set (serving first)."""
    w = setup.workload
    if w.WhichOneof("kind") != "llm_inference":
        return None
    return next((name for name in ANALYSES if w.llm_inference.HasField(name)), None)


@dataclass(frozen=True)
class Result:
    """A solved scenario: its checked plan, the views computed beside it and, once written,
    the result folder. `summary`, `kernels` and `configs` are summary.json (a dict),
    kernels.csv and configs.csv (DataFrames) without touching the disk."""

    scenario: Scenario
    plan: Plan
    views: Views = Views()
    out: Path | None = None
    files: tuple[Path, ...] = ()

    @cached_property
    def summary(self) -> dict[str, Any]:
        return step("summary")(self.plan, self.views)

    @cached_property
    def kernels(self):  # -> pandas.DataFrame
        return csv_frame(step("kernels_csv")(self.plan))

    @cached_property
    def configs(self):  # -> pandas.DataFrame
        return csv_frame(step("configs_csv")(self.plan))

    @cached_property
    def serving(self):  # -> pandas.DataFrame | None
        """TTFT / TPOT / tokens/s per batch (llm_inference.serving), one row per point."""
        if self.views.serving is None:
            return None
        import pandas as pd

        return pd.DataFrame([p.__dict__ for p in self.views.serving.points])

    def what_if(self, time_limit_s: float | None = None):  # -> pandas.DataFrame
        """Each resource x0.5 and x2, re-solved (the table `mapshard run` prints); the
        binding resource in words is `.attrs["binding"]`."""
        import pandas as pd

        table = step("what_if")(self.scenario, self.plan, time_limit_s, force=True)
        frame = pd.DataFrame(table.as_dict()["rows"])
        frame.attrs["binding"] = table.binding()
        return frame

    def write(self, out_dir: str | Path) -> list[Path]:
        """The result folder `mapshard run` writes (atomically, never over your files)."""
        return step("write")(self.scenario, self.plan, out_dir, self.views)


def analyse(
    loaded: Loaded,
    system: System,
    time_limit_s: float | None = None,
    progress: Callable[..., None] | None = None,
    cost_model: str | None = None,
) -> Result:
    """The analysis the setup asks for, not written. Interrupted after a first plan (the
    plain plan only), it re-raises schema.errors.Interrupted with `.result` set to that
    plan, checked."""
    say = progress or (lambda stage: None)
    wanted = analysis_wanted(loaded.setup)
    if wanted == "serving":  # one solve per batch / input length
        view, sc, p = step("serving")(loaded, system, time_limit_s)
        return Result(sc, p, Views(serving=view))
    if wanted == "stream":  # step grid solved, request stream simulated
        say(Stage("solving engine steps and simulating the request stream"))
        flow, sc, p = step("stream")(loaded, system, time_limit_s)
        return Result(sc, p, Views(stream=flow))
    sc = with_cost_model(assemble(loaded, system), cost_model)
    try:
        return Result(sc, plan(sc, time_limit_s, progress))
    except Interrupted as stop:  # Ctrl-C / SIGTERM after a first plan
        stop.result = Result(sc, check(sc, stop.plan))  # type: ignore[arg-type]
        raise


def run(
    scenario: str | Path,
    out: str | Path,
    time_limit_s: float | None = None,
    progress: Callable[..., None] | None = None,
    sensitivity: bool | None = False,
    cost_model: str | None = None,
) -> Result:
    """`mapshard run`: load -> resolve -> analysis [-> what-if] -> write.
    `sensitivity`: True computes the what-if table, None computes it unless the graph is a
    large DATAFLOW one (the table then says why), False leaves it out. `cost_model`
    (--cost-model) replaces the setup's execution.cost_model.
    The result folder is checked before the solve, so a bad --out costs no solver time.
    Interrupted after a first plan, it writes that plan (status "interrupted") and re-raises
    schema.errors.Interrupted with `.result` set to the written Result."""
    say = progress or (lambda stage: None)
    loaded = load(scenario, cost_model)
    system = resolve(loaded)
    check_writable(out)
    say(Stage("generating the kernel graph"))
    try:
        result = analyse(loaded, system, time_limit_s, progress, cost_model)
    except Interrupted as stop:
        if isinstance(stop.result, Result):  # write the best plan found
            stop.result = _written(stop.result, out)
        raise
    if result.views.stream is not None and sensitivity is None:
        sensitivity = False  # a stream's plan is one of many steps: --what-if asks for it
    if sensitivity is not False:  # None: unless the graph is too large (sensitivity.py)
        what_if = step("what_if")
        try:
            say(Stage("what-if: re-solving with each resource x0.5 and x2"))
            table = what_if(result.scenario, result.plan, time_limit_s, sensitivity is True)
        except KeyboardInterrupt as signal:  # Ctrl-C / SIGTERM in a re-solve: the plan stands
            # (an Interrupted here carries a re-solve's plan, not this one: not written)
            cause = signal.__cause__ if isinstance(signal, Interrupted) else signal
            stop = Interrupted(result.plan, during_what_if=True)
            stop.result = _written(result, out)
            raise stop from cause
        result = replace(result, views=replace(result.views, sensitivity=table))
    say(Stage("writing the report"))
    return _written(result, out)


def _written(result: Result, out: str | Path) -> Result:
    files = step("write")(result.scenario, result.plan, out, result.views)
    return replace(result, out=Path(out), files=tuple(files))


def csv_frame(csv_text: str):  # -> pandas.DataFrame
    import pandas as pd

    return pd.read_csv(io.StringIO(csv_text))
