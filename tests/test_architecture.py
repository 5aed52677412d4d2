"""The package's layers depend one way, and no module imports itself through others.

The import graph is read from the source (``ast``), so the test sees every import, those in
functions included; only imports for type checking (``if TYPE_CHECKING:``) are left out, as
they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "virtualstac"

#: Layers from the bottom; a module may import its own layer and those below it. Modules
#: outside them (errors, limits, gc_pause, progress, parallel, the package itself) serve every
#: layer.
LAYERS = (
    ("storage",),
    ("manifests",),
    ("codecs", "parsers", "writers"),
    ("xarray",),
    ("stac", "intake", "cli", "cli_summary", "demo", "__main__"),
)
SHARED = ("errors", "limits", "gc_pause", "progress", "parallel", "registry")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    checking = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for statement in branch.body
        for node in ast.walk(statement)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # "from package import name": the module of that name, or the package's attribute.
            found |= {
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            }
    return {module for module in found if module in modules and module != name}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: _imports(path, name, set(paths)) for name, path in paths.items()}


def _layer(module: str) -> int | None:
    part = module.split(".")[1] if "." in module else ""
    if part in SHARED or not part:
        return None
    return next(i for i, names in enumerate(LAYERS) if part in names)


def _cycle(graph: dict[str, set[str]], within: str) -> list[str] | None:
    """One import cycle among the modules under ``within``, or None."""
    nodes = {name for name in graph if name.startswith(within)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node] & nodes):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(nodes):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_every_module_belongs_to_a_layer_or_is_shared() -> None:
    for module in _graph():
        _layer(module)  # raises StopIteration for a subpackage no layer names


@pytest.mark.parametrize(
    "package",
    [
        "virtualstac.storage",
        "virtualstac.parsers",
        "virtualstac.writers",
        "virtualstac.xarray",
        "virtualstac.stac",
        "virtualstac.intake",
    ],
)
def test_no_import_cycle_inside_a_layer(package: str) -> None:
    graph = _graph()
    assert _cycle(graph, package) is None, " -> ".join(_cycle(graph, package) or [])


def test_layers_never_import_upward() -> None:
    upward = []
    for module, imported in _graph().items():
        own = _layer(module)
        for target in imported:
            theirs = _layer(target)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module} imports {target}")
    assert not upward, "\n".join(sorted(upward))


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {
        "virtualstac.stac.a": {"virtualstac.stac.b"},
        "virtualstac.stac.b": {"virtualstac.stac.a"},
    }
    assert _cycle(graph, "virtualstac.stac") == [
        "virtualstac.stac.a",
        "virtualstac.stac.b",
        "virtualstac.stac.a",
    ]
