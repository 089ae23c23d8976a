"""The Python API, for notebooks and scripts: the same spine as `mapshard run`, with the
results as a dict and pandas DataFrames instead of files.

    import mapshard
    r = mapshard.solve("scenarios/llama31_8b_decode_h100")
    r.summary["tpot_s"], r.kernels.groupby("bound")["memory_s"].sum()
    r.write("/tmp/llama")                      # the same result folder as `mapshard run`
    df = mapshard.sweep("scenarios/sweep_llama70b/sweep.txt", workers=2)
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from schema import setup_pb2
from solver.plan import Plan


@dataclass(frozen=True)
class Result:
    """A solved scenario: `summary` (summary.json as a dict), `kernels` and `configs`
    (kernels.csv and configs.csv as DataFrames), `plan` (the typed records)."""

    scenario: Any  # mapshard.pipeline.Scenario
    plan: Plan
    serving_view: Any = None  # mapshard.serving.Serving when the setup asks for one
    stream_view: Any = None  # mapshard.stream.StreamView when the setup has a stream

    @cached_property
    def summary(self) -> dict[str, Any]:
        from mapshard.report.summary import summary_dict

        return summary_dict(self.plan, stream=self.stream_view)

    @cached_property
    def kernels(self):  # -> pandas.DataFrame
        from mapshard.report.tables import kernels_csv

        return _frame(kernels_csv(self.plan))

    @cached_property
    def configs(self):  # -> pandas.DataFrame
        from mapshard.report.tables import configs_csv

        return _frame(configs_csv(self.plan))

    @cached_property
    def serving(self):  # -> pandas.DataFrame | None
        """TTFT / TPOT / tokens/s per batch (llm_inference.serving), one row per point."""
        if self.serving_view is None:
            return None
        import pandas as pd

        return pd.DataFrame([p.__dict__ for p in self.serving_view.points])

    def what_if(self, time_limit_s: float | None = None):  # -> pandas.DataFrame
        """Each resource x0.5 and x2, re-solved (the table `mapshard run` prints); the
        binding resource in words is `.attrs["binding"]`."""
        import pandas as pd

        from mapshard import pipeline

        table = pipeline.what_if(self.scenario, self.plan, time_limit_s)
        frame = pd.DataFrame(table.as_dict()["rows"])
        frame.attrs["binding"] = table.binding()
        return frame

    def write(self, out_dir: str | Path) -> list[Path]:
        """The result folder `mapshard run` writes (atomically, never over your files)."""
        from mapshard import pipeline

        return pipeline.write(
            self.scenario, self.plan, out_dir, serving=self.serving_view, stream=self.stream_view
        )


def solve(
    setup: str | Path | setup_pb2.Setup,
    time_limit_s: float | None = None,
    base_dir: str | Path = ".",
) -> Result:
    """Solve a scenario given as a folder or setup file path, a text-format setup string,
    or a Setup message (relative paths inside the last two resolve from `base_dir`).
    Raises schema.errors.SetupError (bad input), InfeasibleError or NoPlanError."""
    from mapshard import pipeline
    from schema.setup_io import parse_text

    if isinstance(setup, setup_pb2.Setup):
        loaded = pipeline.load_message(setup, Path(base_dir) / "setup.txt")
    elif isinstance(setup, Path) or (isinstance(setup, str) and _looks_like_path(setup)):
        loaded = pipeline.load(setup)
    else:
        where = Path(base_dir) / "<string>"
        message = setup_pb2.Setup()
        parse_text(str(setup), message, where)
        loaded = pipeline.load_message(message, where)
    from mapshard import serving, stream

    system = pipeline.resolve(loaded)
    if serving.wanted(loaded.setup):  # one solve per batch / input length
        view, scenario, plan = serving.serve(loaded, system, time_limit_s)
        return Result(scenario, plan, view)
    if stream.wanted(loaded.setup):  # step grid solved, request stream simulated
        flow, scenario, plan = stream.run_stream(loaded, system, time_limit_s)
        return Result(scenario, plan, stream_view=flow)
    scenario = pipeline.assemble(loaded, system)
    return Result(scenario, pipeline.plan(scenario, time_limit_s))


def sweep(sweep_file: str | Path, out: str | Path | None = None, workers: int = 0):
    """Run (or resume) a sweep file; its results.csv as a DataFrame."""
    from mapshard.sweep import run_sweep
    from mapshard.sweep.store import RESULTS_NAME

    outcome = run_sweep(sweep_file, out=out, workers=workers, quiet=True)
    return _frame((outcome.out / RESULTS_NAME).read_text(encoding="utf-8"))


def _looks_like_path(text: str) -> bool:
    """A short single-line string naming something that exists is a path, not a setup."""
    return "\n" not in text and "{" not in text and Path(text).exists()


def _frame(csv_text: str):
    import pandas as pd

    return pd.read_csv(io.StringIO(csv_text))
