"""The solver's shape, read from the source with `ast` (nothing imported): no function is
longer than MAX_LINES (issue #13: long functions hid the constraint families and the search
phases), and no solver module imports itself back through others (function-local imports
included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _solver_import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in (ROOT / "solver").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {node.module} & paths.keys()
                deps |= {f"{node.module}.{a.name}" for a in node.names} & paths.keys()
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names} & paths.keys()
        graph[name] = deps - {name}
    return graph


def test_solver_modules_have_no_import_cycle() -> None:
    graph = _solver_import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*path[path.index(dep) :], dep]))
            elif dep not in state:
                visit(dep, [*path, dep])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(cycles)
