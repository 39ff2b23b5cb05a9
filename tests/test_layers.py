"""The layers of the code: the runtime (diffusers_patched/) and the tooling (tools/) import nothing from the tests; the
tests build on both."""

import ast

import pytest

from tests.conftest import REPO_ROOT


def imported_modules(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


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
