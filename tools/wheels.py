"""`make wheels`: one wheel per supported release, `diffusers_patched-<release>.post<N>-py3-none-any.whl`.

Each wheel requires exactly `diffusers==<release>`, declares the dependency ranges that release was verified on (its
floor stack, `constraints/floor-<release>.txt`; `make test-stacks`) and carries that release's vendored tree
(pristine + series, see tools/series.py), whose manifest gives the guards the release's version and file hashes. The package is copied into
a scratch build directory with the release's tree, so the committed `diffusers_patched/_vendor` (the primary's)
is never touched. Builds are reproducible: fixed SOURCE_DATE_EPOCH, normalized file modes, and the wheel's sorted
entries, so a rebuild is byte-identical (checked by `dist/SHA256SUMS`).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from . import REPO_ROOT, ToolError, patches, releases, upstream, vendoring


# 2000-01-01, like the scratch commits: wheels depend on the sources only, not on when they were built.
SOURCE_DATE_EPOCH = "946684800"
PACKAGE_FILES = ["pyproject.toml", "setup.py", "README.md"]
_PIN_RE = re.compile(r'"diffusers==[^"]*"')
_RANGE_RE = re.compile(r'"([A-Za-z0-9_.-]+)>=[^"]*"')
# The dependency stacks each release is checked on (`make test-stacks`, tools/stacks.py).
STACKS_DIR = REPO_ROOT / "constraints"


def parse_pin(pin):
    """(canonical name, version) of an exact pin, `name==version`."""
    requirement = Requirement(pin)
    specifiers = list(requirement.specifier)
    if len(specifiers) != 1 or specifiers[0].operator != "==":
        raise ToolError(f"`{pin}` is not an exact pin: write `name==version`.")
    return canonicalize_name(requirement.name), specifiers[0].version


def read_pins(path):
    """{canonical name: version} of a constraints file's `name==version` lines."""
    lines = (line.split("#", 1)[0].strip() for line in Path(path).read_text().splitlines())
    return dict(parse_pin(line) for line in lines if line)


def verified_ranges(version):
    """{canonical name: lower bound} of the dependencies `version`'s build declares: its floor stack. No upper bounds:
    the newest stack passes."""
    floor = STACKS_DIR / f"floor-{version}.txt"
    if not floor.exists():
        raise ToolError(
            f"constraints/{floor.name} is missing: write diffusers {version}'s floor stack (the oldest release of each "
            f"dependency it works with; see constraints/), then `make test-stacks RELEASE={version}`."
        )
    return read_pins(floor)


def with_verified_ranges(pyproject, version):
    """`pyproject` (text) with each dependency's lower bound set to `version`'s verified range (its floor stack)."""
    ranges = verified_ranges(version)
    declared = {canonicalize_name(name) for name in _RANGE_RE.findall(pyproject)}
    if not set(ranges) <= declared:
        raise ToolError(
            f"constraints/floor-{version}.txt pins {sorted(set(ranges) - declared)}, which pyproject.toml does not "
            "declare: a floor stack holds the declared dependencies only."
        )

    def verified(match):
        floor = ranges.get(canonicalize_name(match[1]))
        return match[0] if floor is None else f'"{match[1]}>={floor}"'

    return _RANGE_RE.sub(verified, pyproject)


def build_tree(project, version, dest, primary=None, vendor=None):
    """The package sources in `dest`, with `version`'s vendored tree (`vendor`, if given, instead: {relative path:
    bytes}) and its exact diffusers pin."""
    for name in PACKAGE_FILES:
        shutil.copyfile(project.root / name, dest / name)
    shutil.copytree(
        project.root / "diffusers_patched",
        dest / "diffusers_patched",
        ignore=shutil.ignore_patterns("_vendor", "__pycache__"),
    )
    pyproject = (dest / "pyproject.toml").read_text()
    if len(_PIN_RE.findall(pyproject)) != 1:
        raise ToolError('pyproject.toml must pin diffusers exactly once ("diffusers==X.Y.Z").')
    pyproject = with_verified_ranges(_PIN_RE.sub(f'"diffusers=={version}"', pyproject), version)
    (dest / "pyproject.toml").write_text(pyproject)
    vendoring.write_vendor(
        project, vendor or releases.release_vendor(project, version, primary), dest / "diffusers_patched" / "_vendor"
    )
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def build_wheel(project, version, out_dir, primary=None, vendor=None):
    """Build the wheel for supported release `version` into `out_dir` (`vendor`: as in `build_tree`); returns its
    path."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        source.mkdir()
        build_tree(project, version, source, primary, vendor)
        wheel_dir = Path(tmp) / "wheel"
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
             "--wheel-dir", str(wheel_dir), str(source)],
            env={**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise ToolError(f"building the wheel for diffusers {version} failed:\n{result.stderr[-4000:]}")
        (wheel,) = wheel_dir.glob("*.whl")
        target = Path(out_dir) / wheel.name
        shutil.move(wheel, target)
    return target


def build_wheels(project, out_dir, versions=None):
    """Wheels for `versions` (default: every supported release) and `SHA256SUMS` over every wheel in `out_dir`."""
    supported = project.supported_releases()
    versions = versions or supported
    for version in versions:
        project.release_record(version)  # refuses an unsupported release before anything is built
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        primary = Path(tmp) / "primary"  # one checkout of the primary's series, replayed onto every release
        patches.scratch_checkout(project, primary)
        wheels = [build_wheel(project, version, out_dir, primary) for version in versions]
    sums = "".join(f"{upstream.sha256_of(path)}  {path.name}\n" for path in sorted(out_dir.glob("*.whl")))
    (out_dir / "SHA256SUMS").write_text(sums)
    return wheels


def cached_wheel(requirement):
    """The wheel of `requirement` (`name==version`), downloaded once with pip (no dependencies) into the cache."""
    name, version = parse_pin(requirement)
    wheels = upstream.cache_dir() / "wheels"
    pattern = f"{re.sub(r'[-_.]+', '_', name)}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
             "--dest", str(wheels), requirement],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        found = sorted(wheels.glob(pattern))
        if result.returncode != 0 or not found:
            raise ToolError(f"could not download the wheel of {requirement}:\n{result.stderr[-2000:]}")
    return found[0]


def release_wheels(project, version):
    """The wheels a release's checks install over the verified stack: diffusers itself, and the packages the release
    pins differently (releases.json `stack`: e.g. diffusers 0.41.0 requires huggingface-hub<2.0)."""
    stack = project.release_record(version).get("stack", [])
    return [cached_wheel(f"{upstream.UPSTREAM}=={version}"), *map(cached_wheel, stack)]


def release_site(project, version, wheel=None):
    """A directory with diffusers `version`, its stack pins and its diffusers-patched wheel (`pip install --no-deps
    --target`).

    Placed first on PYTHONPATH, it runs that release over the one verified stack installed here: diffusers is pure
    Python, and the installed .pth's `import diffusers_patched` finds this directory's copy first. Cached by the
    wheels' hashes, so a changed series or stack gets a fresh directory. `wheel`: the release's wheel, if built.
    """
    project.release_record(version)  # refuses an unsupported release before anything is built
    with tempfile.TemporaryDirectory() as tmp:
        wheel = wheel or build_wheel(project, version, tmp)
        wheels = [*release_wheels(project, version), wheel]
        key = hashlib.sha256(" ".join(upstream.sha256_of(path) for path in wheels).encode()).hexdigest()
        site = upstream.cache_dir() / "sites" / f"{version}-{key[:16]}"
        if not site.exists():
            staging = Path(tempfile.mkdtemp(dir=site.parent.mkdir(parents=True, exist_ok=True) or site.parent))
            result = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                 str(staging), *map(str, wheels)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if result.returncode != 0:
                raise ToolError(f"installing diffusers {version} into {staging} failed:\n{result.stderr}")
            try:
                staging.rename(site)
            except OSError:  # another process made it first (the same wheels: the same directory)
                shutil.rmtree(staging)
                if not site.exists():
                    raise
    return site
