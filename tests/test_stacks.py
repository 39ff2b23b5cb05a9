"""The dependency stacks (constraints/): each wheel declares its release's verified ranges, and an installed dependency
outside them is reported once, by the activation and by `status`, with the patches left on. `make test-stacks` runs
the stacks themselves (tools/stacks.py)."""

import re
import zipfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from diffusers_patched.activation import STACK_EXTRAS, verified_ranges
from tests.conftest import REPO_ROOT, run_python
from tools import patches, stacks, upstream, wheels


PROJECT = patches.Project(REPO_ROOT)
POST = PROJECT.read_releases()["post"]


def declared_dependencies():
    """The canonical names of the stack the installed build declares (diffusers aside, its extras included)."""
    return {canonicalize_name(name) for name in verified_ranges()}


def test_every_release_has_a_floor_of_each_declared_dependency_and_newest_pins_them_all():
    for version in PROJECT.supported_releases():
        assert set(wheels.verified_ranges(version)) == declared_dependencies(), version
    assert set(wheels.read_pins(wheels.STACKS_DIR / "newest.txt")) == declared_dependencies()


def test_the_primary_declares_its_verified_ranges_in_pyproject():
    """`pip install .` from a checkout declares what the primary's wheel does."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert wheels.with_verified_ranges(pyproject, PROJECT.read_base()["version"]) == pyproject


def test_each_wheel_requires_its_release_verified_ranges(dist):
    """Each release's wheel metadata requires exactly its floor stack's lower bounds, its extras included."""
    for version in PROJECT.supported_releases():
        build = f"{version}.post{POST}"
        with zipfile.ZipFile(dist / f"diffusers_patched-{build}-py3-none-any.whl") as archive:
            metadata = archive.read(f"diffusers_patched-{build}.dist-info/METADATA").decode()
        found = {}
        for line in re.findall(r"^Requires-Dist: (.*)$", metadata, re.MULTILINE):
            requirement = Requirement(line)
            if requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in STACK_EXTRAS
            ):
                found[canonicalize_name(requirement.name)] = str(requirement.specifier)
        ranges = wheels.verified_ranges(version)
        expected = {"diffusers": f"=={version}", **{name: f">={floor}" for name, floor in ranges.items()}}
        assert found == expected, version


def test_newest_stack_takes_the_release_own_pins():
    """diffusers 0.41.0 and older require huggingface-hub<2.0: their newest stack keeps releases.json's pin, 1.33.0;
    0.42.0 and 0.42.1 take newest.txt's."""
    newest = wheels.read_pins(wheels.STACKS_DIR / "newest.txt")
    assert newest["huggingface-hub"] != "1.33.0"
    for version in PROJECT.supported_releases():
        pins = stacks.stack_pins(PROJECT, version, stacks.NEWEST)
        own_pin = upstream.version_key(version) < upstream.version_key("0.42.0")
        assert pins["huggingface-hub"] == ("1.33.0" if own_pin else newest["huggingface-hub"]), version
        assert pins["torch"] == newest["torch"]


def test_a_regression_is_what_passes_patched_on_the_verified_stack_only():
    verified = {"patched": {"scenarios": {"a": "right", "b": "refused", "c": "fails"}, "carried": ["t1", "t2"]}}
    other = {"patched": {"scenarios": {"a": "right", "b": "fails", "c": "right"}, "carried": ["t1"]}}
    assert stacks.regressions(verified, other) == ["b", "t2"]


def test_a_dependency_outside_its_verified_range_is_reported_once_and_the_patches_stay_on(tmp_path):
    """An older gguf than the floor, first on the path: one warning at the first patched import (none at the
    second), one OUTSIDE line in `status`, and the patched modules are still the vendored ones."""
    floor = wheels.verified_ranges(PROJECT.read_base()["version"])["gguf"]
    dist_info = tmp_path / "gguf-0.9.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: gguf\nVersion: 0.9.0\n")
    result = run_python(
        """
        import warnings
        warnings.simplefilter("always")
        import diffusers.pipelines.pipeline_loading_utils
        import diffusers.models.modeling_utils
        from diffusers_patched import activation
        from diffusers_patched.status import main
        main(["status"])
        print("patched:", diffusers.models.modeling_utils.__file__ == activation.vendored_path("diffusers.models.modeling_utils"))
        """,
        env={"PYTHONPATH": str(tmp_path)},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    warning = f"gguf 0.9.0 is installed, outside the range it was verified on (gguf>={floor})"
    assert result.stderr.count(warning) == 1, result.stderr
    assert result.stderr.count("DiffusersPatchedWarning") == 1, result.stderr
    outside = [line for line in result.stdout.splitlines() if "OUTSIDE" in line]
    assert outside == [f"  gguf 0.9.0: OUTSIDE (the patches stay on) the verified range gguf>={floor}"]
    assert "activation: active" in result.stdout.splitlines()
    assert "patched: True" in result.stdout.splitlines()


def test_status_lists_the_installed_stack_inside_its_ranges(tmp_path):
    result = run_python("from diffusers_patched.status import main; main(['status'])", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(f"stack (verified ranges of diffusers-patched {PROJECT.read_base()['version']}.post{POST}):")
    listed = [line.split()[0] for line in lines[start + 1 : start + 1 + len(declared_dependencies())]]
    assert {canonicalize_name(name.rstrip(":")) for name in listed} == declared_dependencies()
    assert not any("OUTSIDE" in line for line in lines)
