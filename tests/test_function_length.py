"""No function in solver/ is longer than MAX_LINES (issue #13: long functions hid the
constraint families and search phases); read from the source with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 80


def _long_functions() -> list[str]:
    found = []
    for path in sorted((ROOT / "solver").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = node.end_lineno - first + 1
                if length > MAX_LINES:
                    rel = path.relative_to(ROOT)
                    found.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_solver_function_is_longer_than_80_lines() -> None:
    assert not _long_functions(), "\n".join(_long_functions())
