"""Start-up cost (issue #39): `import mapshard.cli` and `import mapshard` load neither the
pipeline nor the solver; each subcommand's module is named in mapshard.cli.COMMANDS and
imported when that command runs; the `mapshard.solve` API still resolves on first use.
`import mapshard.run` loads the pipeline's stages but not what only some runs use (the
dispatch tables mapshard.run.STEPS, generator.build.FAMILIES, solver.api._API and
solver.dfmodel's entry point resolve those when first used)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import mapshard
from mapshard import api, cli, sweeps

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "scenarios" / "llama31_8b_decode_h100"
HEAVY = ("mapshard.api", "mapshard.pipeline", "mapshard.commands", "solver", "numpy")


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after `statement`."""
    code = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("statement", ["import mapshard.cli", "import mapshard"])
def test_start_up_imports_neither_pipeline_nor_solver(statement: str) -> None:
    assert not _loaded_after(statement) & set(HEAVY)


def test_every_subcommand_has_one_entry_point() -> None:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    assert sorted(sub.choices) == sorted(cli.COMMANDS)
    for module, function in cli.COMMANDS.values():
        assert callable(getattr(importlib.import_module(module), function))


def test_the_api_resolves_on_first_use() -> None:
    assert mapshard.solve is api.solve and mapshard.sweep is api.sweep
    assert mapshard.Result is api.Result
    assert set(mapshard.__all__) <= set(dir(mapshard))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mapshard.nope  # noqa: B018


#: modules a default run (`./run.sh`: one LLM decode step, native cost model, no serving
#: or stream analysis) never needs, so `import mapshard.run` must not load them: DFModel's
#: model family and its comparison, the analyses a setup asks for, the other generator
#: families, the result folder's writers and the search itself (loaded when a run solves)
NOT_AT_RUN_IMPORT = (
    "solver.dfmodel.plan",
    "solver.dfmodel.model",
    "solver.compare_models",
    "solver.search.planner",
    "mapshard.analyses.serving",
    "mapshard.analyses.stream",
    "mapshard.analyses.sensitivity",
    "mapshard.report.write",
    "mapshard.report.html",
    "mapshard.report.trace",
    "generator.llm_inference",
    "generator.llm_training",
    "generator.dlrm",
    "generator.hpl",
    "generator.fft",
    "generator.gemm",
    "generator.dfmodel_gpt",
    "numpy",
)


#: of those, what the whole default run never loads (DFModel's family is asked for by a
#: DFModel input or --cost-model dfmodel only); pandas: the run reads NVIDIA's decode
#: attention table with pyarrow alone (importing pandas is a quarter of its start-up)
NOT_IN_A_DEFAULT_RUN = (
    "pandas",
    "solver.dfmodel.plan",
    "solver.dfmodel.model",
    "solver.compare_models",
    "mapshard.analyses.serving",
    "mapshard.analyses.stream",
    "generator.llm_training",
    "generator.dlrm",
    "generator.dfmodel_gpt",
)


def test_importing_the_run_loads_only_what_a_default_run_needs_first() -> None:
    loaded = _loaded_after("import mapshard.run")
    assert "mapshard.pipeline" in loaded  # the stages are imported, their uses are not
    assert not loaded & set(NOT_AT_RUN_IMPORT)


def test_a_default_run_never_loads_the_dfmodel_family(tmp_path: Path) -> None:
    """The whole default run (cli -> solve -> what-if -> write) in one child process."""
    out = tmp_path / "out"
    statement = (
        "from mapshard.cli import main\n"
        f"assert main(['run', {str(DEFAULT)!r}, '--out', {str(out)!r}, '--quiet']) == 0"
    )
    loaded = _loaded_after(statement)
    assert "solver.search.planner" in loaded and "mapshard.report.write" in loaded
    assert not loaded & set(NOT_IN_A_DEFAULT_RUN)


@pytest.mark.parametrize(
    ("table", "entries"),
    [("mapshard.run", "STEPS"), ("generator.build", "FAMILIES"), ("solver.api", "_API")],
)
def test_every_deferred_name_resolves(table: str, entries: str) -> None:
    """Each (module, name) a dispatch table names exists, so a typo fails here rather than
    in the one run that asks for it."""
    for module, name in getattr(importlib.import_module(table), entries).values():
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


def test_a_sweep_worker_does_not_load_the_drivers_modules() -> None:
    """A local sweep worker imports mapshard.sweeps.worker; the package's public names
    (run_sweep, the results store, the backends, the outputs) resolve on first use."""
    loaded = _loaded_after("import mapshard.sweeps.worker")
    driver = ("mapshard.sweeps.runner", "mapshard.sweeps.backends", "mapshard.sweeps.outputs")
    assert not loaded & set(driver)
    assert sweeps.run_sweep.__module__ == "mapshard.sweeps.runner"
