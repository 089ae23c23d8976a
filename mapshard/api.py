"""The Python API, for notebooks and scripts: the same run as `mapshard run` (mapshard/run.py),
with the results as a dict and pandas DataFrames instead of files.

    import mapshard
    r = mapshard.solve("scenarios/llama31_8b_decode_h100")
    r.summary["tpot_s"], r.kernels.groupby("bound")["memory_s"].sum()
    r.write("/tmp/llama")                      # the same result folder as `mapshard run`
    df = mapshard.sweep("scenarios/sweep_llama70b/sweep.txt", workers=2)
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from mapshard.pipeline import load, load_message, resolve
from mapshard.run import Result, analyse, csv_frame
from mapshard.sweeps import run_sweep
from mapshard.sweeps.store import RESULTS_NAME
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import parse_text

__all__ = ["Result", "solve", "sweep"]


def solve(
    setup: str | Path | setup_pb2.Setup,
    time_limit_s: float | None = None,
    base_dir: str | Path = ".",
) -> Result:
    """Solve a scenario given as a folder or setup file path, a text-format setup string,
    or a Setup message (relative paths inside the last two resolve from `base_dir`).
    Raises schema.errors.SetupError (bad input), InfeasibleError or NoPlanError."""
    if isinstance(setup, setup_pb2.Setup):
        loaded = load_message(setup, Path(base_dir) / "setup.txt")
    elif isinstance(setup, Path) or (isinstance(setup, str) and _looks_like_path(setup)):
        loaded = load(setup)
    else:
        where = Path(base_dir) / "<string>"
        message = setup_pb2.Setup()
        parse_text(str(setup), message, where)
        loaded = load_message(message, where)
    return analyse(loaded, resolve(loaded), time_limit_s)


def sweep(sweep_file: str | Path, out: str | Path | None = None, workers: int = 0):
    """Run (or resume) a sweep file; its results.csv as a DataFrame."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # a worker process importing the caller's script, whose call is not guarded
        raise SetupError(
            "mapshard.sweep was called while a sweep worker imported your script: put the call "
            'under `if __name__ == "__main__":` (each worker is a new process that imports it)'
        )
    outcome = run_sweep(sweep_file, out=out, workers=workers, quiet=True)
    return csv_frame((outcome.out / RESULTS_NAME).read_text(encoding="utf-8"))


def _looks_like_path(text: str) -> bool:
    """A short single-line string naming something that exists is a path, not a setup."""
    return "\n" not in text and "{" not in text and Path(text).exists()
