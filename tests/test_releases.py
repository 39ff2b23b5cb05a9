"""Every supported release: its wheel, installed with that diffusers release over the verified stack, behaves like the
primary's build, the wheels are reproducible, pip picks the build for a pinned diffusers, and a build installed over
another release or over another build says what to do.

An older release runs from a directory made by `pip install --no-deps --target` (tools/wheels.py `release_site`):
its diffusers wheel, the packages it pins differently (releases.json `stack`) and its diffusers-patched wheel, first
on PYTHONPATH over the one verified stack installed here. One interpreter per (release, side) runs every scenario and
the parity net; the upstream side only with --release-checks (`make test-releases`, conftest.py): it tells where
upstream fails, which is a fact of that release, not of the build, and `make test-stacks` runs it again on each stack.
Without it, each release's patched side is judged against the primary's, which tests/test_parity.py judges against
the primary's upstream, on the scenarios and parity net of `make test`'s half (`scenarios_of_the_half`,
`parity_in_the_half`).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from diffusers_patched.selftest.parity import FLOWS, PARITY, parity_breaks
from diffusers_patched.selftest.scenarios import SCENARIOS
from tests.conftest import PARITY_MODULE, REPO_ROOT, run_python
from tests.support.assertions import diffs_as_judged
from tests.support.forked_scenarios import ForkedScenarioRunner, stack_pins
from tools import patches, releases, replays, upstream, wheels


PROJECT = patches.Project(REPO_ROOT)
PRIMARY = PROJECT.read_base()["version"]
OLDER = PROJECT.supported_releases()[1:]
POST = PROJECT.read_releases()["post"]
SIDES = ("upstream", "patched")
# The parity rows of quantizers an older release does not have yet: the release they came with.
QUANTIZER_SINCE = {"sdnq": "0.40.0", "bfl": "0.42.0"}
# The parity flows an older release cannot run without an accelerator, the release that can, and how they fail before:
# until 0.41.0, `ModuleGroup` asks torch for the current accelerator's type, on both sides.
FLOW_SINCE = {flow: "0.41.0" for flow in FLOWS if "group offload" in flow}
FLOW_LACKING_ERROR = "AttributeError: 'NoneType' object has no attribute 'type'"


def scenarios_of_the_half(version, release_checks):
    """The scenarios a run checks on `version`: every one with --release-checks. In `make test`'s half, those of the
    patches the release applies as a backport, code written for that release alone; the patches applied as the primary
    has them run their scenarios there before publishing, as their carried tests do
    (tests/test_release_carried_tests.py)."""
    if release_checks:
        return list(SCENARIOS)
    backported = releases.backported_patches(PROJECT, version)
    return [name for name, scenario in SCENARIOS.items() if scenario.patch in backported]


def parity_in_the_half(version, release_checks):
    """Whether a run checks the parity net on `version`: every release with --release-checks; in `make test`'s half
    the oldest, whose code is the furthest from the primary's (the primary's runs in tests/test_parity.py)."""
    return release_checks or version == OLDER[-1]


def wheel_name(version):
    return f"diffusers_patched-{version}.post{POST}-py3-none-any.whl"


@pytest.fixture(scope="session")
def release_runs(sites, request):
    """{(release, side): ({scenario: Outcome}, {parity backend: Outcome})}; two releases at a time (CI has two cores),
    each side's scenarios and parity flows in forks of an interpreter that imported the release's stack once
    (tests/support/forked_scenarios.py); releases that pin the same stack take turns on its interpreters. The upstream
    side only with --release-checks (conftest.py)."""
    release_checks = request.config.getoption("release_checks")
    sides = SIDES if release_checks else ("patched",)
    servers, idle, lock = [], {}, threading.Lock()

    def run_release(version):
        scenarios = scenarios_of_the_half(version, release_checks)
        parity = parity_in_the_half(version, release_checks)
        if not scenarios and not parity:
            return {side: ({}, {}) for side in sides}
        pins = stack_pins(PROJECT, version)
        with lock:
            runner = idle[pins].pop() if idle.get(pins) else None
        if runner is None:
            runner = ForkedScenarioRunner(stack_site=sites[version])
            with lock:
                servers.append(runner)
        runs = {
            side: (
                runner.run(scenarios, side == "patched", sites[version]) if scenarios else {},
                runner.run(list(PARITY), side == "patched", sites[version], module=PARITY_MODULE) if parity else {},
            )
            for side in sides
        }
        with lock:
            idle.setdefault(pins, []).append(runner)
        return runs

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            by_version = dict(zip(OLDER, pool.map(run_release, OLDER)))
    finally:
        for server in servers:
            server.close()
    return {(version, side): run for version, runs in by_version.items() for side, run in runs.items()}


@pytest.fixture(scope="session")
def release_outcomes(release_runs):
    return {key: scenarios for key, (scenarios, _) in release_runs.items()}


@pytest.mark.upstream
@pytest.mark.release_check
@pytest.mark.parametrize("version", OLDER)
def test_release_is_never_worse_than_upstream(version, release_runs):
    """The parity net on `version`: every quantization flow its upstream gets right is right with its build
    (tests/test_parity.py on the primary)."""
    upstream, patched = release_runs[version, "upstream"][1], release_runs[version, "patched"][1]
    assert {name: breaks for name in PARITY if (breaks := parity_breaks(upstream[name], patched[name]))} == {}


@pytest.mark.parametrize(
    "version",
    [
        version if parity_in_the_half(version, False) else pytest.param(version, marks=pytest.mark.release_check)
        for version in OLDER
    ],
)
def test_release_parity_is_the_primarys(version, release_runs, parity_outcomes):
    """The parity net's patched side on `version`: every flow the primary's build gets right is right, with the
    primary's outputs; rows of quantizers `version` does not have fail to import their config, and flows it cannot run
    without an accelerator fail as FLOW_SINCE says."""
    primary, patched = parity_outcomes["patched"], release_runs[version, "patched"][1]
    lacking = {
        name
        for name in PARITY
        if upstream.version_key(version) < upstream.version_key(QUANTIZER_SINCE.get(name.split()[0], version))
    }
    assert {
        name: patched[name].error for name in lacking if (patched[name].error or {}).get("type") != "ImportError"
    } == {}
    lacking_flows = {
        flow for flow, since in FLOW_SINCE.items() if upstream.version_key(version) < upstream.version_key(since)
    }
    assert {
        (name, flow): cell["error"]
        for name in PARITY
        if name not in lacking
        for flow, cell in patched[name].result["cells"].items()
        if flow in lacking_flows and not (cell["error"] or "").startswith(FLOW_LACKING_ERROR)
    } == {}
    assert {
        name: breaks
        for name in PARITY
        if name not in lacking
        and (
            breaks := {
                flow: why
                for flow, why in parity_breaks(primary[name], patched[name]).items()
                if flow not in lacking_flows
            }
        )
    } == {}


def comparable(outcome):
    """What a scenario measured or raised, without its scratch directory, its time, or the float32 rounding of its max
    abs diffs (each as judged)."""
    text = json.dumps({"result": diffs_as_judged(outcome.result), "error": outcome.error}, sort_keys=True)
    return json.loads(re.sub(re.escape(tempfile.gettempdir()) + r"/[^/\"']+/", "<workdir>/", text))


@pytest.mark.upstream
@pytest.mark.parametrize("side", [pytest.param("upstream", marks=pytest.mark.release_check), "patched"])
@pytest.mark.parametrize("version", OLDER)
def test_release_behaves_like_the_primary_on_every_scenario(
    version, side, release_outcomes, upstream_outcomes, patched_outcomes
):
    """Each fix fails on upstream of `version` as on the primary and passes patched with the primary's result
    (test_demo_scenarios.py asserts those), on the scenarios of the run's half; a scenario that differs on a release is
    recorded in releases.json."""
    primary = upstream_outcomes if side == "upstream" else patched_outcomes
    recorded = PROJECT.release_record(version).get("scenarios", {})
    differs = {
        name: comparable(outcome)
        for name, outcome in release_outcomes[version, side].items()
        if comparable(outcome) != comparable(primary[name])
    }
    unrecorded = {
        name: {version: found, PRIMARY: comparable(primary[name])}
        for name, found in differs.items()
        if side not in recorded.get(name, {})
    }
    assert unrecorded == {}
    # A recorded difference that went away is stale data.
    ran = release_outcomes[version, side]
    assert {name for name, sides in recorded.items() if side in sides and name in ran} <= set(differs)
    if side == "patched":
        assert {
            name: outcome.error
            for name, outcome in release_outcomes[version, side].items()
            if not outcome.ok and side not in recorded.get(name, {})
        } == {}


@pytest.mark.parametrize("version", OLDER)
def test_status_names_the_release_and_the_guards_pass(version, sites, tmp_path):
    result = run_python(
        "from diffusers_patched.status import main; main(['status'])",
        env={"PYTHONPATH": str(sites[version])},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"upstream diffusers: {version} (matches the series base {version})"
    assert lines[1].startswith(f"build: diffusers-patched {version}.post{POST}, for diffusers {version} ")
    assert "guards: pass" in lines
    for name in PROJECT.release_record(version)["skipped"]:
        assert any(line.startswith(f"  {name}: skipped, not needed on diffusers {version}: ") for line in lines)
    for name in sorted(p.name for p in (PROJECT.backports_dir / version).glob("*.patch")):
        assert any(line.startswith(f"  {name}: ") and f"backported to {version}]" in line for line in lines)


def test_wheels_pin_their_release_and_rebuild_byte_identical(dist, tmp_path, monkeypatch):
    assert sorted(path.name for path in dist.glob("*.whl")) == sorted(map(wheel_name, [PRIMARY, *OLDER]))
    sums = (dist / "SHA256SUMS").read_text().splitlines()
    assert sums == [f"{upstream.sha256_of(path)}  {path.name}" for path in sorted(dist.glob("*.whl"))]
    for version in [PRIMARY, *OLDER]:
        with zipfile.ZipFile(dist / wheel_name(version)) as wheel:
            metadata = wheel.read(f"diffusers_patched-{version}.post{POST}.dist-info/METADATA").decode()
            manifest = wheel.read("diffusers_patched/_vendor/__init__.py").decode()
        assert f"\nVersion: {version}.post{POST}\n" in metadata
        assert [line for line in metadata.splitlines() if line.startswith("Requires-Dist: diffusers")] == [
            f"Requires-Dist: diffusers=={version}"
        ]
        assert f"UPSTREAM_VERSION = {version!r}\n" in manifest
        record = PROJECT.release_record(version)
        for path, sha256 in record["files"].items():
            if path.endswith(".py") and path.startswith("src/"):
                assert sha256 in manifest, path  # the guards check that release's pristine files
    # A rebuild (here of the oldest release, the one with the most derivation) is byte-identical; git replays its
    # series again, not the replay cache (tools/replays.py), which the wheels of the run may have come from.
    monkeypatch.delenv(replays.CACHE_ENV)
    rebuilt = wheels.build_wheel(PROJECT, OLDER[-1], tmp_path)
    assert rebuilt.read_bytes() == (dist / rebuilt.name).read_bytes()


def _resolve(find_links, *requirements, options=()):
    """pip's choice, as its installation report names it: {name: version}."""
    report = find_links.parent / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-index", "--find-links",
         str(find_links), "--report", str(report), *options, *requirements],
        # Only the find-links directory: no index or find-links from the environment.
        capture_output=True, text=True, env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {
        item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]
    }


def test_pip_picks_the_build_for_the_pinned_diffusers(dist, tmp_path):
    """`pip install "diffusers==X" diffusers-patched` from the wheels: the rest of the stack is what is installed
    here; find-links also holds diffusers X's own wheel and the packages X pins differently (its `stack`)."""
    version = OLDER[1] if len(OLDER) > 1 else OLDER[0]
    find_links = tmp_path / "find-links"
    find_links.mkdir()
    for path in [*dist.glob("*.whl"), *wheels.release_wheels(PROJECT, version)]:
        shutil.copy(path, find_links)
    chosen = _resolve(find_links, f"diffusers=={version}", "diffusers-patched")
    assert chosen["diffusers-patched"] == f"{version}.post{POST}"
    assert chosen["diffusers"] == version
    # Alone, the newest build: its diffusers pin is the installed primary, so only the version choice shows; without
    # dependencies and ignoring what is installed, it is the newest of the wheels.
    newest = _resolve(find_links, "diffusers-patched", options=["--no-deps", "--ignore-installed"])
    assert newest == {"diffusers-patched": f"{PRIMARY}.post{POST}"}


# Bad input: a build installed over another release, one build installed over another.


def test_build_over_another_supported_release_names_the_matching_build(dist, sites, tmp_path):
    """The primary's wheel over diffusers of an older release: the guard names that release's build."""
    version = OLDER[0]
    site = tmp_path / "site"
    shutil.copytree(sites[version], site, ignore=shutil.ignore_patterns("diffusers_patched*"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(site),
         str(dist / wheel_name(PRIMARY))],
        check=True, capture_output=True,
    )  # fmt: skip
    result = run_python(
        "import diffusers.pipelines.pipeline_loading_utils", env={"PYTHONPATH": str(site)}, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert f"installed diffusers is {version}, but this diffusers-patched ({PRIMARY}.post{POST})" in result.stderr
    assert f"`pip install diffusers-patched=={version}.post{POST}`" in result.stderr


def test_a_second_build_installed_over_the_first_replaces_it_cleanly(dist, tmp_path):
    """pip's own uninstall (RECORD) of the first build: one .pth, the second build's tree only."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    first, second = OLDER[0], PRIMARY
    for version in (first, second):
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet", "--no-deps",
             "--no-index", str(dist / wheel_name(version))],
            check=True, capture_output=True,
        )  # fmt: skip
    (site_packages,) = venv.glob("lib/python*/site-packages")
    assert sorted(path.name for path in site_packages.glob("*.pth")) == ["diffusers_patched.pth"]
    assert [path.name for path in site_packages.glob("diffusers_patched-*.dist-info")] == [
        f"diffusers_patched-{second}.post{POST}.dist-info"
    ]
    with zipfile.ZipFile(dist / wheel_name(second)) as wheel:
        shipped = {name for name in wheel.namelist() if name.startswith("diffusers_patched/")}
    installed = {
        str(path.relative_to(site_packages))
        for path in (site_packages / "diffusers_patched").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert installed == shipped
    manifest = (site_packages / "diffusers_patched" / "_vendor" / "__init__.py").read_text()
    assert f"UPSTREAM_VERSION = {second!r}\n" in manifest
