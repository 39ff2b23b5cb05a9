"""The upstream-style tests the series' patches carry, written out as in upstream's repository."""

import re
import shutil
import subprocess

from tools.releases import release_plan
from tools.upstream import pristine_repo


SUPERSEDED_TESTS = "superseded-tests.txt"


def write_carried_tests(project, version, directory):
    """Write the tests of every patch `version` applies (its backport's where it has one) into `directory`, beside that
    release's tests/testing_utils.py; returns {patch: [test file]}.

    A local patch that replaces an upstream PR's refusal with a workaround names the tests of the refusal it
    supersedes (`Supersedes-Test:` in its header): they are written to SUPERSEDED_TESTS, for `run_carried_tests` to
    leave out of the patched run."""
    record = project.release_record(version)
    subprocess.run(["git", "init", "--quiet", str(directory)], check=True)
    tests = {}
    superseded = []
    for name, patch, _ in release_plan(project, version, record, project.read_series()):
        text = patch.read_text()
        tests[name] = re.findall(r"^\+\+\+ b/(tests/\S+\.py)$", text, re.MULTILINE)
        superseded += re.findall(r"^Supersedes-Test: (\S+)$", text[: text.find("\ndiff --git ")], re.MULTILINE)
        subprocess.run(["git", "-C", str(directory), "apply", "--include=tests/*", str(patch)], check=True)
    (directory / SUPERSEDED_TESTS).write_text("".join(f"{test}\n" for test in superseded))
    shutil.copyfile(
        pristine_repo(version, record["sdist_sha256"]) / "tests" / "testing_utils.py",
        directory / "tests" / "testing_utils.py",
    )
    # Upstream's test directories are packages (`from ..testing_utils import ...`); the sdist leaves their
    # `__init__.py` files out.
    for package in [directory / "tests", *(path for path in (directory / "tests").rglob("*") if path.is_dir())]:
        (package / "__init__.py").touch()
    (directory / "tests" / "conftest.py").write_text(_CONFTEST)
    return tests


# The harness's, not a patch's: as in the scenario interpreters, memory a flow never wrote reads NaN (`torch.empty`
# fills it in deterministic mode, which upstream's `enable_full_determinism` sets), so that a test reading a weight
# that offloading emptied fails on every run, not only when the allocator hands back other memory.
_CONFTEST = """import torch


torch.use_deterministic_algorithms(True, warn_only=True)
"""


def run_carried_tests(directory, python, patched, env=None, paths=("tests",)):
    """pytest on the tests `write_carried_tests` wrote (those of `paths`), with or without the patches, run by
    `python`: `tools.interpreter.run_python` (a fresh interpreter) or a callable with its signature.

    CUDA is hidden: the carried tests are about the CPU (on a GPU machine transformers and diffusers would put
    bitsandbytes models on GPU 0 by themselves); tests/gpu has the CUDA checks. sdnq dequantizes eagerly: on a CPU it
    would compile its dequantization with inductor (seconds at import and per layer shape, and a C++ compiler).
    Upstream, where the tests are to fail, each failure is reported on one line: formatting the long tracebacks of
    some two hundred failures took longer than running the tests."""
    tracebacks = "--tb=auto" if patched else "--tb=line"
    args = ["-q", "-rA", tracebacks, "-p", "no:cacheprovider", "--continue-on-collection-errors", *sorted(paths)]
    if patched:
        args += [f"--deselect={test}" for test in superseded_tests(directory)]
    env = {"CUDA_VISIBLE_DEVICES": "", "SDNQ_USE_TORCH_COMPILE": "0", **(env or {})}
    return python(f"import sys, pytest; sys.exit(pytest.main({args!r}))", patched=patched, cwd=directory, env=env)


def superseded_tests(directory):
    """The node ids of the carried tests that a local patch supersedes (`write_carried_tests`)."""
    path = directory / SUPERSEDED_TESTS
    return path.read_text().split() if path.exists() else []


def skipped_tests(stdout):
    """The skips pytest reported (`-rA`), as "file:line: reason". None of the carried tests needs an accelerator, so
    on any machine a skip means a library missing or too old (peft, gguf, bitsandbytes): a test that never ran."""
    return re.findall(r"^SKIPPED \[\d+\] (\S+: .*)$", stdout, re.MULTILINE)


def passed_tests(stdout):
    """The node ids pytest reported passed (`-rA`). A test whose subtests failed is reported both PASSED and
    SUBFAILED: it did not pass."""
    passed = set(re.findall(r"^PASSED (\S+)", stdout, re.MULTILINE))
    return passed - set(re.findall(r"^SUBFAILED\(.*?\) (\S+)", stdout, re.MULTILINE))


def failed_tests(stdout):
    """The node ids pytest reported failed or in error (`-rA`), a test whose subtests failed included; a module that
    did not import is reported by its path."""
    return set(re.findall(r"^(?:FAILED|ERROR|SUBFAILED\(.*?\)) (\S+)", stdout, re.MULTILINE))
