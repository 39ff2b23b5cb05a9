import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from diffusers_patched.selftest.gpu_scenarios import GPU_SCENARIOS
from diffusers_patched.selftest.scenarios import SCENARIOS, Outcome, run_each_apart
from tests.support.forked_scenarios import ForkedScenarioRunner
from tools import REPO_ROOT, patches
from tools.interpreter import run_python


# The tests under tests/gpu/ (marker `gpu`): skipped, saying why, wherever torch sees no CUDA device. `make test-gpu`
# runs them on a machine with one.
requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason=f"needs a CUDA GPU: torch {torch.__version__} sees none (torch.cuda.is_available() is False); "
    "`make test-gpu` runs these on a machine with one",
)


# A directory for the whole run, shared by its processes (xdist's workers inherit the environment, and so do the
# tools the tests run as subprocesses): the replay cache (tools/replays.py), and what several tests read and the
# first of them makes (`shared`).
RUN_DIR_ENV = "DIFFUSERS_PATCHED_TEST_RUN_DIR"
PARITY_MODULE = "diffusers_patched.selftest.parity"


def pytest_configure(config):
    from tools import replays

    # The run does two things at a time (two xdist workers, the two sides of the scenarios): every interpreter it
    # starts computes on one thread, as torch would otherwise start one per core in each.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if RUN_DIR_ENV not in os.environ:
        directory = tempfile.mkdtemp(prefix="diffusers-patched-test-run-")
        os.environ[RUN_DIR_ENV] = directory
        os.environ.setdefault(replays.CACHE_ENV, os.path.join(directory, "replays"))
        config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


def shared(name, make):
    """A directory of the run that `make(directory)` fills, once: the first process that needs it makes it, one that
    needs it meanwhile waits for it."""
    directory = Path(os.environ[RUN_DIR_ENV]) / name
    with open(f"{directory}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not directory.exists():
            partial = directory.with_name(f"{name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            make(partial)
            partial.rename(directory)
    return directory


@pytest.fixture
def python():
    return run_python


@pytest.fixture
def project(tmp_path):
    """A copy (tests/test_series.py, tests/test_upstream_prs.py) of the project's series and vendored tree in a temporary root."""

    root = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    shutil.copytree(
        REPO_ROOT / "diffusers_patched" / "_vendor",
        root / "diffusers_patched" / "_vendor",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return patches.Project(root)


@pytest.fixture(scope="session")
def dist():
    """`make wheels` into a scratch dist/, once per run (tests/test_releases.py, tests/test_publish.py,
    tests/test_stacks.py)."""
    from tools import wheels

    return shared("dist", lambda out: wheels.build_wheels(patches.Project(REPO_ROOT), out))


@pytest.fixture(scope="session")
def sites(dist):
    """{release: a directory with that release's diffusers, stack pins and wheel of the run} for every supported
    release but the primary (tools/wheels.py `release_site`; tests/test_releases.py,
    tests/test_release_carried_tests.py)."""
    from tools import wheels

    project = patches.Project(REPO_ROOT)
    post = project.read_releases()["post"]
    return {
        version: wheels.release_site(
            project, version, dist / f"diffusers_patched-{version}.post{post}-py3-none-any.whl"
        )
        for version in project.supported_releases()[1:]
    }


@pytest.fixture(scope="session")
def scenario_runner():
    """Scenario runs forked from one interpreter of this pytest process that imported the stack once
    (tests/support/forked_scenarios.py)."""
    runner = ForkedScenarioRunner()
    yield runner
    runner.close()


def _scenario_outcomes(session, side, scenario_runner):
    """Every registered scenario on `side`, once per run: `{name: Outcome}`; when the run asks for both sides (not
    `make test-fast`), both, one after the other."""
    sides = [
        other
        for other in ("upstream", "patched")
        if other == side or any(f"{other}_outcomes" in item.fixturenames for item in session.items)
    ]

    def run(directory):
        for other in sides:
            outcomes = scenario_runner.run(list(SCENARIOS), patched=other == "patched")
            report = {name: asdict(outcome) for name, outcome in outcomes.items()}
            (directory / f"{other}.json").write_text(json.dumps(report))

    path = shared(f"scenarios-{'-'.join(sides)}", run) / f"{side}.json"
    return {name: Outcome(**outcome) for name, outcome in json.loads(path.read_text()).items()}


@pytest.fixture(scope="session")
def upstream_outcomes(request, scenario_runner):
    """Every registered scenario, run on upstream (DIFFUSERS_PATCHED=0): `{name: Outcome}`."""
    return _scenario_outcomes(request.session, "upstream", scenario_runner)


@pytest.fixture(scope="session")
def patched_outcomes(request, scenario_runner):
    """Every registered scenario, run with the patches: `{name: Outcome}`."""
    return _scenario_outcomes(request.session, "patched", scenario_runner)


@pytest.fixture(scope="session")
def parity_outcomes(scenario_runner):
    """The parity net (diffusers_patched/selftest/parity.py) on the primary, both sides, once per run:
    `{side: {backend: Outcome}}` (tests/test_parity.py; tests/test_releases.py judges each older release's patched side
    against it)."""
    from diffusers_patched.selftest.parity import PARITY

    def run(directory):
        for side in ("upstream", "patched"):
            outcomes = scenario_runner.run(list(PARITY), side == "patched", module=PARITY_MODULE)
            report = {name: asdict(outcome) for name, outcome in outcomes.items()}
            (directory / f"{side}.json").write_text(json.dumps(report))

    directory = shared("parity", run)
    return {
        side: {
            name: Outcome(**outcome) for name, outcome in json.loads((directory / f"{side}.json").read_text()).items()
        }
        for side in ("upstream", "patched")
    }


def _gpu_outcomes(patched):
    """Every GPU scenario on one side, each in an interpreter of its own with CUDA; the outcomes (figures, peak GPU
    memory) with their verdicts are also written to build/gpu-scenarios-{patched,upstream}.json for the notes, and
    each interpreter's stderr to build/gpu-scenarios-stderr/."""
    build = REPO_ROOT / "build"
    (build / "gpu-scenarios-stderr").mkdir(parents=True, exist_ok=True)
    outcomes = run_each_apart(
        list(GPU_SCENARIOS),
        patched=patched,
        module="diffusers_patched.selftest.gpu_scenarios",
        cuda=True,
        log_dir=build / "gpu-scenarios-stderr",
    )
    report = {
        name: {**asdict(outcome), "verdict": outcome.verdict(GPU_SCENARIOS[name])}
        for name, outcome in outcomes.items()
    }
    path = build / f"gpu-scenarios-{'patched' if patched else 'upstream'}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return outcomes


@pytest.fixture(scope="session")
def gpu_upstream_outcomes():
    return _gpu_outcomes(patched=False)


@pytest.fixture(scope="session")
def gpu_patched_outcomes():
    return _gpu_outcomes(patched=True)


# `make test` runs the suite on two pytest-xdist workers, a test file at a time to whichever worker is free
# (`--dist loadfile --no-loadscope-reorder`: a file's fixtures serve its tests), in this order: the longest files
# first (`--durations`), so that the last to finish is a short one.
_LONGEST_FIRST = (
    "test_releases.py",
    "test_adapter_states.py",
    "test_series.py",
    "test_release_carried_tests.py",
    "test_gpu_check.py",
    "test_each_fix_is_necessary.py",
    "test_publish.py",
    "test_patches_ship_their_upstream_tests.py",
    "test_activation.py",
    "test_demo_scenarios.py",
    "test_offload_modes.py",
    "test_without_avx512bf16.py",
    "test_upstream_prs.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: number for number, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    if not config.getoption("release_checks"):
        for item in items:
            if "release_check" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=RELEASE_CHECK_SKIP))


# The per-release checks come in two halves. `make test` runs, on every supported release, what the build must hold
# there: the guards, and the scenarios and tests of the backports, code written for that release alone; and every
# parity flow patched (judged against the primary's) on the oldest release, whose code is the furthest from the
# primary's. `make test-releases` (`--release-checks`, before publishing) runs the rest on the verified
# stack: each older release's upstream side of the scenarios and parity net, and its other scenarios, parity flows and
# carried tests; `make test-stacks` runs both again on each release's floor and newest stacks.
RELEASE_CHECK_SKIP = "the other half of the per-release checks: `make test-releases` runs it"


def pytest_addoption(parser):
    parser.addoption(
        "--release-checks",
        action="store_true",
        help="also run the tests marked release_check (`make test-releases`; each older release's upstream side and "
        "all of its carried tests)",
    )


_RELEASE_CHECK_FILES = {"tests/test_releases.py", "tests/test_release_carried_tests.py"}


# The test files that reported a result in this process: with pytest-xdist, its controller receives every worker's.
_REPORTED_FILES = set()


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _REPORTED_FILES.add(path)
    _SECONDS_PER_FILE[path] = _SECONDS_PER_FILE.get(path, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """Record the commit on which every per-release check (tests/test_releases.py, tests/test_release_carried_tests.py,
    both halves: `make test-releases`) passed, unselected by nothing and with nothing uncommitted: `make publish`
    uploads only a commit so checked (tools/publish.py). With pytest-xdist, only the controller, which knows how the
    whole run went, records it."""
    from tools import publish
    from tools.git import git

    if hasattr(session.config, "workerinput"):
        session.config.workeroutput["cpu_seconds"] = _cpu_seconds("RUSAGE_SELF", "RUSAGE_CHILDREN")
    options = session.config.option
    ran_releases = options.release_checks and _RELEASE_CHECK_FILES <= _REPORTED_FILES
    is_worker = hasattr(session.config, "workerinput")
    # Selected by keyword, marker, deselection or node id: some per-release checks may not have run.
    filtered = (
        options.keyword or options.markexpr or options.deselect or any("::" in arg for arg in session.config.args)
    )
    if is_worker or exitstatus != 0 or not ran_releases or filtered:
        return
    if git(REPO_ROOT, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        return
    stamp = REPO_ROOT / publish.RELEASE_CHECKS_STAMP
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"commit": git(REPO_ROOT, "rev-parse", "HEAD").stdout.strip()}) + "\n")


# The suite's cost (docs/development.md, "What make test costs"): CPU-seconds, reported, never asserted (machines differ
# in speed). Each process counts its own CPU time and its waited-for children's (interpreters, scenario servers, git);
# with pytest-xdist each worker sends its count to the controller when it finishes.
CPU_BUDGET_SECONDS = 2 * 12 * 60  # make test's 12 minutes on CI's two cores
_SECONDS_PER_FILE = {}
_WORKER_CPU_SECONDS = []


def _cpu_seconds(*whos):
    import resource

    usages = [resource.getrusage(getattr(resource, who)) for who in whos]
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_CPU_SECONDS.append(getattr(node, "workeroutput", {}).get("cpu_seconds", 0.0))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    if _WORKER_CPU_SECONDS:
        # The workers counted their children; the controller ran no test.
        total = _cpu_seconds("RUSAGE_SELF") + sum(_WORKER_CPU_SECONDS)
    else:
        total = _cpu_seconds("RUSAGE_SELF", "RUSAGE_CHILDREN")
    largest = sorted(_SECONDS_PER_FILE.items(), key=lambda item: -item[1])[:5]
    terminalreporter.write_line(
        f"suite cost: {total:.0f} CPU-seconds of a budget of {CPU_BUDGET_SECONDS} (12 minutes on 2 cores); the test "
        f"files taking longest: {', '.join(f'{name} {seconds:.0f} s' for name, seconds in largest)}",
        yellow=total > CPU_BUDGET_SECONDS,
    )
    if total > CPU_BUDGET_SECONDS:
        terminalreporter.write_line(f"warning: the suite is over its CPU budget by {total - CPU_BUDGET_SECONDS:.0f} s")
