"""`make test-stacks`: every supported release on its floor and newest dependency stacks, both sides.

The stacks are written down in `constraints/`: `floor-<release>.txt` (the oldest release of each dependency that pip
installs with that diffusers release and that the series works with; each wheel's Requires-Dist lower bounds) and
`newest.txt` (the registry's newest releases; a release that requires other versions keeps its own pins from
releases.json `stack`). The verified stack is the one installed here (`constraints.txt`).

A stack is installed like a release's site (tools/wheels.py `release_site`): pip resolves the release's diffusers, its
diffusers-patched wheel and the stack's pins over the environment here (`--dry-run`), and what it would change goes
into a `pip install --no-deps --target` directory, cached by that list and put first on PYTHONPATH, before the
release's site. Each (release, stack, side) runs every demo scenario in one interpreter and the upstream-style tests
the patches carry in another. A scenario or carried test that passes patched on the verified stack but not on another
stack fails the run; so does a stack pip cannot install, after every other stack ran.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from diffusers_patched.activation import STACK_EXTRAS
from diffusers_patched.selftest.judges import holds
from diffusers_patched.selftest.scenarios import SCENARIOS, run_scenarios
from tools import REPO_ROOT, patches, upstream, wheels
from tools.carried_tests import passed_tests, run_carried_tests, write_carried_tests
from tools.interpreter import run_python


VERIFIED, FLOOR, NEWEST = "verified", "floor", "newest"
STACKS = (VERIFIED, FLOOR, NEWEST)
SIDES = ("upstream", "patched")
# Packages of the series' own making, not the stack's: the release site brings them.
OWN = {"diffusers", "diffusers-patched"}


class StackError(Exception):
    """A stack pip cannot install, with pip's own words."""


def stack_pins(project, version, stack):
    """The pins of `stack` (FLOOR or NEWEST) for diffusers `version`."""
    if stack == FLOOR:
        return wheels.verified_ranges(version)
    newest = wheels.read_pins(wheels.STACKS_DIR / "newest.txt")
    return {**newest, **dict(map(wheels.parse_pin, project.release_record(version).get("stack", [])))}


def _pip_error(output):
    """pip's error and its explanation ("The conflict is caused by: ..."), without its warnings and progress."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("ERROR:")), 0)
    return "\n".join(line for line in lines[start:] if not line.startswith("WARNING:")).strip()


def resolve(requirements):
    """The `name==version` pip would install or change to satisfy `requirements` over the environment here."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        # Not --quiet: pip explains a conflict at its normal verbosity only.
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--report", str(report), *requirements],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise StackError(_pip_error(result.stdout))
        install = json.loads(report.read_text())["install"]
    return sorted(f"{item['metadata']['name']}=={item['metadata']['version']}" for item in install)


def stack_site(wheel, version, pins):
    """A directory with what `pins` change in the environment here, for diffusers `version` and its `wheel`."""
    requirements = [f"diffusers=={version}", f"diffusers-patched[{','.join(STACK_EXTRAS)}] @ {wheel.as_uri()}"]
    plan = [pin for pin in resolve([*requirements, *(f"{n}=={v}" for n, v in pins.items())]) if not _own(pin)]
    key = hashlib.sha256(" ".join(plan).encode()).hexdigest()
    site = upstream.cache_dir() / "stacks" / key[:16]
    if not site.exists():
        site.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=site.parent))
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(staging), *plan],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise StackError(_pip_error(result.stderr))
        (staging / "STACK.txt").write_text("\n".join(plan) + "\n")
        staging.rename(site)
    return site


def _own(pin):
    return wheels.parse_pin(pin)[0] in OWN


def installed_plan(site):
    return (site / "STACK.txt").read_text().split()


def run_side(project, version, pythonpath, carried_dir, side):
    """{"scenarios": {name: verdict}, "carried": [passed node ids], "errors": {scenario or test: its error}} of one
    side, one interpreter each."""
    patched = side == "patched"
    outcomes = run_scenarios(list(SCENARIOS), patched, site=pythonpath)
    # Every carried test, also those the release cannot run: they fail on the verified stack too, so they are no
    # regression (`regressions`).
    result = run_carried_tests(carried_dir, run_python, patched, env={"PYTHONPATH": pythonpath})
    errors = {name: outcome.verdict(SCENARIOS[name])[1].partition("\n")[0][:300] for name, outcome in outcomes.items()}
    errors.update(re.findall(r"^(?:FAILED|ERROR) (\S+) - (.{0,300})", result.stdout, re.MULTILINE))
    return {
        "scenarios": {name: outcome.verdict(SCENARIOS[name])[0] for name, outcome in outcomes.items()},
        "carried": sorted(passed_tests(result.stdout)),
        "errors": errors,
    }


def passing(side_result):
    """What passes on a side: the scenarios judged right or refused, and the carried tests that passed."""
    scenarios = {name for name, verdict in side_result["scenarios"].items() if holds(verdict)}
    return scenarios | set(side_result["carried"])


def regressions(verified, other):
    """What passes patched on the verified stack but not on `other`."""
    return sorted(passing(verified["patched"]) - passing(other["patched"]))


def cell(verified, result):
    """One table cell: pass counts per side, what regressed, or why the stack could not be installed."""
    if "error" in result:
        return f"NOT INSTALLABLE: {result['error'].splitlines()[0]}"
    counts = []
    for side in SIDES:
        scenarios = result[side]["scenarios"]
        good = sum(holds(verdict) for verdict in scenarios.values())
        counts.append(f"{side} {good}/{len(scenarios)} scenarios, {len(result[side]['carried'])} carried tests")
    text = "; ".join(counts)
    lost = regressions(verified, result) if verified is not result else []
    return f"FAILS {', '.join(lost)} ({text})" if lost else text


def check_release(project, version, stacks, tmp):
    """{stack: result} of diffusers `version`; the verified stack always runs, as the reference."""
    wheel = wheels.build_wheel(project, version, tmp)
    release_site = wheels.release_site(project, version, wheel)
    carried_dir = Path(tmp) / f"carried-{version}"
    carried_dir.mkdir()
    write_carried_tests(project, version, carried_dir)
    results = {}
    for stack in [VERIFIED, *(s for s in stacks if s != VERIFIED)]:
        paths = [release_site]
        if stack != VERIFIED:
            try:
                site = stack_site(wheel, version, stack_pins(project, version, stack))
            except StackError as e:
                print(f"diffusers {version}, {stack} stack: cannot be installed:\n{e}", file=sys.stderr, flush=True)
                results[stack] = {"error": str(e)}
                continue
            paths.insert(0, site)
        print(f"diffusers {version}, {stack} stack ...", file=sys.stderr, flush=True)
        pythonpath = os.pathsep.join(map(str, paths))
        with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: one side each
            sides = pool.map(lambda side: run_side(project, version, pythonpath, carried_dir, side), SIDES)
            results[stack] = dict(zip(SIDES, sides))
        results[stack]["installed"] = installed_plan(paths[0]) if stack != VERIFIED else []
    return results


def render(results, stacks, command, seconds):
    """The release x stack table, what each stack installed over the verified one, and the run's date and command."""
    lines = [
        f"`{command}` on {datetime.date.today().isoformat()}, {seconds / 60:.0f} min; each cell: the scenarios judged "
        "right or refused and the carried tests passed, per side.",
        "",
        f"| diffusers | {' | '.join(stacks)} |",
        f"|---|{'---|' * len(stacks)}",
    ]
    for version, by_stack in results.items():
        cells = [cell(by_stack[VERIFIED], by_stack[stack]) for stack in stacks]
        lines.append(f"| {version} | {' | '.join(cells)} |")
    lines.append("")
    for version, by_stack in results.items():
        for stack in stacks:
            result = by_stack[stack]
            if "error" in result:
                lines.append(f"- {version} {stack}: pip cannot install it: {result['error']}")
            elif stack != VERIFIED:
                lines.append(f"- {version} {stack}: {' '.join(result['installed'])}")
                lost = regressions(by_stack[VERIFIED], result)
                lines.extend(f"  - {name}: {result['patched']['errors'].get(name, 'did not pass')}" for name in lost)
    return "\n".join(lines) + "\n"


def failures(results, stacks):
    """Stacks that regressed or could not be installed: {(release, stack): what}."""
    found = {}
    for version, by_stack in results.items():
        for stack in stacks:
            result = by_stack[stack]
            if "error" in result:
                found[version, stack] = "cannot be installed"
            elif stack != VERIFIED and regressions(by_stack[VERIFIED], result):
                found[version, stack] = ", ".join(regressions(by_stack[VERIFIED], result))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.stacks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="append", help="a supported release (repeatable; default: all)")
    parser.add_argument("--stack", action="append", choices=STACKS, help="a stack (repeatable; default: all)")
    parser.add_argument("--out", default="build/stacks.md", help="where the table goes too (default: %(default)s)")
    args = parser.parse_args(argv)
    project = patches.Project(REPO_ROOT)
    versions = args.release or project.supported_releases()
    stacks = [stack for stack in STACKS if stack in (args.stack or STACKS)]
    start = time.monotonic()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for version in versions:
            results[version] = check_release(project, version, stacks, tmp)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    command = " ".join(["python -m tools.stacks", *(argv if argv is not None else sys.argv[1:])])
    table = render(results, stacks, command, time.monotonic() - start)
    Path(args.out).write_text(table)
    print(table)
    failed = failures(results, stacks)
    if failed:
        sys.exit("\n".join(f"diffusers {v}, {s} stack: {what}" for (v, s), what in failed.items()))


if __name__ == "__main__":
    main()
