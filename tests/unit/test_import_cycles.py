"""The packages' import structure beside the layers (test_import_boundaries.py): no import
cycle anywhere (counting `from pkg import module`), no project import hidden inside a
function (the usual way to dodge a cycle), and the solver's insides reached only through its
façade. Read from the source with `ast`, so an import that only runs on some path counts."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schema", "hardware", "generator", "solver", "mapshard")
#: what code outside solver/ may import of it (DESIGN.md: the solver's façade)
SOLVER_FACADE = {"solver", "solver.api", "solver.plan", "solver.options"}


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The project modules an import statement loads (a name imported from a package that
    is itself a module counts as that module)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            is_package = MODULES[module].name == "__init__.py"
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def _visit(
    module: str, node: ast.AST, in_function: bool, typing_only: bool, graph: dict, local: list
) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            targets = _targets(module, child)
            if in_function and targets:
                local.append(f"{module}:{child.lineno} {targets}")
            if not typing_only:
                graph[module].update(targets)
            continue
        function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        typing = isinstance(child, ast.If) and _is_type_checking(child)
        _visit(module, child, in_function or function, typing_only or typing, graph, local)


@functools.cache
def _imports() -> tuple[dict[str, set[str]], list[str]]:
    """module -> modules it imports at run time; and every function-local project import.
    Parsed once, when a test first asks (not while collecting, on every xdist worker)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    local: list[str] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        _visit(module, tree, False, False, graph, local)
    return graph, local


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_sees_a_cycle_and_a_local_import() -> None:
    """The checker itself, on a hand-made graph: a -> b -> c -> a is one cycle, d alone."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph, _ = _imports()
    assert "mapshard.run" in graph["mapshard.api"]  # `from mapshard.run import ...`
    assert "mapshard.pipeline" in graph["mapshard.analyses.serving"]  # `from mapshard import`


def test_no_import_cycle_in_any_package() -> None:
    assert _cycles(_imports()[0]) == []


def test_no_project_import_inside_a_function() -> None:
    assert _imports()[1] == []


def test_outside_the_solver_only_its_facade_is_imported() -> None:
    reached = sorted(
        f"{m} -> {t}"
        for m, targets in _imports()[0].items()
        if not m.startswith("solver")
        for t in targets
        if t.startswith("solver") and t not in SOLVER_FACADE
    )
    assert reached == []
