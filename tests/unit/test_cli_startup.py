"""Start-up cost (issue #39): `import mapshard.cli` and `import mapshard` load neither the
pipeline nor the solver; each subcommand's module is named in mapshard.cli.COMMANDS and
imported when that command runs; the `mapshard.solve` API still resolves on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import mapshard
from mapshard import api, cli

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
