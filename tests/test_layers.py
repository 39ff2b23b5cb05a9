"""The layers of the code: the runtime (diffusers_patched/) and the tooling (tools/) import nothing from the tests; the
tests build on both. Within tools/, the modules import each other without a circle: the mechanics of the series
(patches.py, over git.py, upstream.py and replays.py) at the bottom, the vendored tree and the other releases above
them, the flows (series.py, wheels, publishing, the PRs) above those, the CLI on top."""

import ast

import pytest

from tests.conftest import REPO_ROOT


def imported_modules(path, package=None):
    """The absolute names of the modules `path` imports; `from . import a, b` of `package` names `package.a`, ...."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and package is not None:
            yield f"{package}.{node.module}" if node.module else package
            yield from (f"{package}.{node.module or alias.name}" for alias in node.names)


@pytest.mark.parametrize("layer", ["diffusers_patched", "tools"])
def test_the_runtime_and_the_tooling_do_not_import_the_tests(layer):
    sources = [path for path in (REPO_ROOT / layer).rglob("*.py") if "_vendor" not in path.parts]
    assert sources
    offenders = {
        str(path.relative_to(REPO_ROOT)): module
        for path in sources
        for module in imported_modules(path)
        if module == "tests" or module.startswith("tests.")
    }
    assert offenders == {}


def test_the_tooling_modules_import_each_other_without_a_circle():
    modules = {f"tools.{path.stem}": path for path in (REPO_ROOT / "tools").glob("*.py") if path.stem != "__init__"}
    graph = {
        name: sorted({module for module in imported_modules(path, "tools") if module in modules and module != name})
        for name, path in modules.items()
    }
    # Depth-first search for a path back to where it started.
    circles = []

    def visit(name, path):
        for imported in graph[name]:
            if imported == path[0]:
                circles.append([*path, imported])
            elif imported not in path and imported > path[0]:
                visit(imported, [*path, imported])

    for name in sorted(graph):
        visit(name, [name])
    assert circles == [], graph
