"""The layers import only downward (schema <- hardware, generator <- solver <- mapshard), and
Pyomo/HiGHS stay inside the solver: checked on every import statement, function-local ones
included, by reading the source (nothing is imported to check it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schema", "hardware", "generator", "solver", "mapshard")
# what each package may import from the project, besides itself
ALLOWED = {
    "schema": set(),
    "hardware": {"schema"},
    "generator": {"schema"},
    "solver": {"schema", "hardware", "generator"},
    "mapshard": {"schema", "hardware", "generator", "solver"},
}
SOLVER_ONLY = ("pyomo", "highspy")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_downward(package: str) -> None:
    wrong = []
    for path in _sources(package):
        for line, module in _imports(path):
            top = module.split(".")[0]
            if top in PACKAGES and top != package and top not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            if top in SOLVER_ONLY and package != "solver":
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} outside solver/")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_crosses_a_module() -> None:
    """`from a.b import _name` between project modules couples their insides."""
    wrong = []
    for package in PACKAGES:
        for path in _sources(package):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    if node.module.split(".")[0] not in PACKAGES:
                        continue
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    if private:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {private}")
    assert not wrong, "\n".join(wrong)
