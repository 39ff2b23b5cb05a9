"""Activation as users meet it: the installed .pth serves the patched modules, cheaply, safely and visibly.

Every check runs in a fresh interpreter of the environment the package is installed in (non-editably:
`make install`), from a scratch directory so that the checkout itself is never importable.
"""

import base64
import hashlib
import json
import os
import re
import shutil
import textwrap
from importlib.metadata import distribution
from pathlib import Path

import pytest

from diffusers_patched.activation import _FALSE_VALUES
from tests.conftest import run_python


UPSTREAM_VERSION = "0.42.1"
VENDORED = "diffusers.pipelines.pipeline_loading_utils"
VENDORED_FILE = "diffusers/pipelines/pipeline_loading_utils.py"
WARNING = "DiffusersPatchedWarning: diffusers-patched:"
# The subprocesses print their findings as one JSON line after this marker.
MARK = "@@report@@ "
REPORT = f"import json; print({MARK!r} + json.dumps(report))"


SITE_PACKAGES = Path(distribution("diffusers").locate_file("")).resolve()
UPSTREAM_DIR = SITE_PACKAGES / "diffusers"
VENDOR_DIR = SITE_PACKAGES / "diffusers_patched" / "_vendor"


@pytest.fixture(scope="session", autouse=True)
def installed():
    """These tests are about the installed package: its .pth at the top of site-packages does the activation."""
    pth = SITE_PACKAGES / "diffusers_patched.pth"
    assert pth.is_file(), f"{pth} is missing: install diffusers-patched non-editably first (`make install`)"
    assert (VENDOR_DIR / VENDORED_FILE).is_file(), f"{VENDOR_DIR} holds no vendored {VENDORED_FILE}"


@pytest.fixture
def scratch(tmp_path):
    return {"cwd": tmp_path}


def _report(result):
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    raise AssertionError(f"no report in stdout:\n{result.stdout}\nstderr:\n{result.stderr}")


def _same(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def _run_with_flags(python, flags, code, **kwargs):
    """Run `code` in `python *flags`: `python` runs code only, so a launcher starts the interpreter wanted."""
    code = textwrap.dedent(code)
    launcher = (
        f"import subprocess, sys\nsys.exit(subprocess.run([sys.executable, *{flags!r}, '-c', {code!r}]).returncode)"
    )
    return python(launcher, **kwargs)


def _run_without_site(python, code, flags=(), **kwargs):
    """Run `code` in `python -S` (no .pth processing), with site-packages put on sys.path by hand."""
    inner = f"import sys\nsys.path.append({str(SITE_PACKAGES)!r})\n" + textwrap.dedent(code)
    return _run_with_flags(python, ["-S", *flags], inner, **kwargs)


# What a patched process sees, gathered once: importing diffusers takes seconds.
_INSPECT = f"""
    import sys
    import diffusers.pipelines.pipeline_utils as pipeline_utils
    import {VENDORED} as m
    from diffusers_patched.status import status_report

    report = {{
        "file": m.__file__,
        "has_patched_function": hasattr(m, "_get_bitsandbytes_quantization_method"),
        "pipeline_utils_binds_patched": pipeline_utils.load_sub_model is m.load_sub_model,
        "load_sub_model_code": pipeline_utils.load_sub_model.__code__.co_filename,
        "finders": [type(f).__module__ for f in sys.meta_path],
        "status": status_report(),
    }}
    {REPORT}
"""


@pytest.fixture(scope="session")
def patched_process(tmp_path_factory):
    return _report(run_python(_INSPECT, cwd=tmp_path_factory.mktemp("patched")))


@pytest.fixture(scope="session")
def upstream_process(tmp_path_factory):
    return _report(run_python(_INSPECT, patched=False, cwd=tmp_path_factory.mktemp("upstream")))


def test_installed_package_serves_vendored_pipeline_loading_utils(patched_process):
    assert _same(patched_process["file"], VENDOR_DIR / VENDORED_FILE)
    assert patched_process["has_patched_function"]


def test_pipeline_utils_binds_patched_load_sub_model(patched_process):
    assert patched_process["pipeline_utils_binds_patched"]
    assert _same(patched_process["load_sub_model_code"], VENDOR_DIR / VENDORED_FILE)


def test_status_after_import_says_vendored_module_is_loaded_patched(patched_process):
    assert "activation: active" in patched_process["status"]
    assert f"{VENDORED}: loaded, patched" in patched_process["status"]


def test_diffusers_patched_0_serves_upstream_and_installs_no_finder(upstream_process):
    assert _same(upstream_process["file"], UPSTREAM_DIR / "pipelines" / "pipeline_loading_utils.py")
    assert not upstream_process["has_patched_function"]
    assert not any(module.startswith("diffusers_patched") for module in upstream_process["finders"])
    assert "activation: inactive: switched off by DIFFUSERS_PATCHED=0" in upstream_process["status"]
    assert f"{VENDORED}: loaded, UPSTREAM" in upstream_process["status"]


def _record_hash(path):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()


def test_upstream_diffusers_install_is_untouched(patched_process):
    """Even after a patched import, every file of the installed diffusers is exactly what pip recorded."""
    from diffusers_patched import _vendor

    recorded = {}
    for file in distribution("diffusers").files:
        if file.parts[0] == "diffusers" and "__pycache__" not in file.parts:
            recorded[file.as_posix()] = file.hash.mode + "=" + file.hash.value
    for relative, expected in recorded.items():
        assert _record_hash(SITE_PACKAGES / relative) == expected, f"{relative} differs from the diffusers RECORD"
    on_disk = {
        path.relative_to(SITE_PACKAGES).as_posix()
        for path in UPSTREAM_DIR.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert on_disk == set(recorded), "files under site-packages/diffusers that the diffusers wheel did not install"
    for module, entry in _vendor.MODULES.items():
        pristine = base64.urlsafe_b64encode(bytes.fromhex(entry["pristine_sha256"])).rstrip(b"=").decode()
        assert recorded[entry["path"]] == f"sha256={pristine}", f"{module}: the series base is not this diffusers"
    ours = [file.as_posix() for file in distribution("diffusers-patched").files]
    assert not [file for file in ours if file.startswith("diffusers/")]


def test_startup_imports_no_torch_diffusers_or_importlib_metadata(python, scratch):
    result = python("import sys; print(*sorted(sys.modules), sep='\\n')", **scratch)
    assert result.returncode == 0, result.stderr
    modules = set(result.stdout.split())
    assert "diffusers_patched.activation" in modules, "the .pth did not activate diffusers_patched at start-up"
    heavy = {name for name in modules if name.split(".")[0] in ("torch", "diffusers", "transformers")}
    assert heavy | ({"importlib.metadata"} & modules) == set()
    assert result.stderr == ""


@pytest.mark.parametrize("value", [f" {value.upper()} " for value in sorted(_FALSE_VALUES)] + ["off"])
def test_diffusers_patched_off_leaves_the_package_unimported_at_startup(python, scratch, value):
    result = python(
        "import sys; print('diffusers_patched' in sys.modules)", env={"DIFFUSERS_PATCHED": value}, **scratch
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert result.stderr == ""


def test_unknown_diffusers_patched_value_starts_fine_and_warns_once_how_to_set_it(python, scratch):
    result = python(
        """
        import sys
        print("started", [type(f).__module__ for f in sys.meta_path])
        """,
        env={"DIFFUSERS_PATCHED": "garbage"},
        **scratch,
    )
    assert result.returncode == 0, result.stderr
    assert "started" in result.stdout
    assert "diffusers_patched" not in result.stdout, "a finder was installed although the switch is not understood"
    assert result.stderr.count(WARNING) == 1, result.stderr
    assert "DIFFUSERS_PATCHED='garbage' is not understood" in result.stderr
    assert "set DIFFUSERS_PATCHED=1 to turn it on or DIFFUSERS_PATCHED=0 to turn it off" in result.stderr


_STATUS = """
    import runpy, sys
    sys.argv = ["diffusers_patched", "status"]
    runpy.run_module("diffusers_patched", run_name="__main__", alter_sys=True)
"""


def test_status_says_inactive_and_why_when_diffusers_patched_is_not_understood(python, scratch):
    result = python(_STATUS, env={"DIFFUSERS_PATCHED": "garbage"}, **scratch)
    assert result.returncode == 0, result.stderr
    assert "activation: inactive: DIFFUSERS_PATCHED='garbage' is not understood" in result.stdout
    assert result.stderr.count(WARNING) == 1, result.stderr


def test_warnings_as_errors_never_break_startup(python, scratch):
    result = python(_STATUS, env={"DIFFUSERS_PATCHED": "garbage", "PYTHONWARNINGS": "error"}, **scratch)
    assert result.returncode == 0, result.stderr
    assert "activation: inactive: " in result.stdout
    assert "DIFFUSERS_PATCHED='garbage' is not understood" in result.stdout


def test_status_command_reports_upstream_activation_patches_and_vendored_modules(python, scratch):
    from diffusers_patched import _vendor

    result = python(_STATUS, **scratch)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"upstream diffusers: {UPSTREAM_VERSION} (matches the series base {UPSTREAM_VERSION})"
    assert lines[1] == (
        f"build: diffusers-patched {_vendor.VERSION}, for diffusers {UPSTREAM_VERSION} "
        f"(supported releases: {', '.join(_vendor.SUPPORTED_RELEASES)})"
    )
    assert lines[2] == "activation: active"
    assert lines[3] == "guards: pass"
    assert lines[4] == "patches:"
    for patch in _vendor.PATCHES:
        line = next(line for line in lines if line.startswith(f"  {patch['file']}: "))
        assert patch["subject"] in line
        assert (f"bug: {', '.join(patch['bugs'])}" if patch["bugs"] else f"origin: {patch['origin']}") in line
        assert f"forwarded: {patch['forwarded']}" in line
    assert "vendored modules:" in lines
    assert f"  {VENDORED}: not loaded" in lines
    assert result.stderr == ""


# Guards: a diffusers that is not the pristine series base, shadowing the installed one on PYTHONPATH.
_SHADOWS = {
    "other_version": ("__init__.py", f'__version__ = "{UPSTREAM_VERSION}"\n', '__version__ = "0.42.0"\n'),
    # A release no build exists for: the message lists the supported ones.
    "unsupported_version": ("__init__.py", f'__version__ = "{UPSTREAM_VERSION}"\n', '__version__ = "0.30.0"\n'),
    "modified_module": ("pipelines/pipeline_loading_utils.py", "\n", "\n# changed locally\n"),
}


@pytest.fixture(scope="session")
def shadows(tmp_path_factory):
    """PYTHONPATH entries, each holding a copy of the installed diffusers with one change."""
    entries = {}
    for name, (relative, old, new) in _SHADOWS.items():
        entry = tmp_path_factory.mktemp(name)
        # With the bytecode (copied with the sources' mtimes, so valid for all but the changed file): these
        # interpreters import diffusers without compiling it, where PYTHONDONTWRITEBYTECODE is set.
        shutil.copytree(UPSTREAM_DIR, entry / "diffusers")
        path = entry / "diffusers" / relative
        text = path.read_text()
        assert text.count(old) >= 1, f"{path} does not contain {old!r}"
        path.write_text(text.replace(old, new, 1))
        entries[name] = entry
    return entries


def _expected_guard_message(name, entry):
    if name == "unsupported_version":
        from diffusers_patched import _vendor

        return [
            "installed diffusers is 0.30.0",
            "no diffusers-patched build exists for diffusers 0.30.0; the supported releases are "
            + ", ".join(_vendor.SUPPORTED_RELEASES),
        ]
    if name == "other_version":
        from diffusers_patched import _vendor

        return [
            f"installed diffusers is 0.42.0, but this diffusers-patched ({UPSTREAM_VERSION}.post{_vendor.POST}) is built "
            f"for diffusers {UPSTREAM_VERSION}",
            f"`pip install diffusers=={UPSTREAM_VERSION}`",
            # 0.42.0 is a supported release: the message names its build.
            f"the build for it, `pip install diffusers-patched==0.42.0.post{_vendor.POST}`",
        ]
    path = entry / "diffusers" / "pipelines" / "pipeline_loading_utils.py"
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    return [
        f"{path} has sha256 {found}, expected 018ffd70897e1083389d065be9f5fa10cd950c52e2f05ce20f9158ab1d543d31",
        f"`pip install --force-reinstall --no-deps diffusers=={UPSTREAM_VERSION}`",
    ]


@pytest.fixture(scope="session")
def mismatched_processes(shadows, tmp_path_factory):
    """For each shadowing copy: the run that imports the patched module and reports what it got, and status."""
    code = f"""
        import {VENDORED} as m
        from diffusers_patched.status import status_report

        report = {{"file": m.__file__, "status": status_report()}}
        {REPORT}
    """
    return {
        name: run_python(code, env={"PYTHONPATH": str(entry)}, cwd=tmp_path_factory.mktemp("mismatched"))
        for name, entry in shadows.items()
    }


@pytest.mark.parametrize("shadow", sorted(_SHADOWS))
def test_mismatched_diffusers_serves_upstream_with_one_warning_naming_the_remedy(
    mismatched_processes, shadows, shadow
):
    result = mismatched_processes[shadow]
    report = _report(result)
    assert _same(report["file"], shadows[shadow] / VENDORED_FILE), "upstream (here: the shadowing copy) not served"
    assert result.stderr.count(WARNING) == 1, result.stderr
    assert "serving upstream diffusers unpatched" in result.stderr
    for text in _expected_guard_message(shadow, shadows[shadow]):
        assert text in result.stderr
        assert text in report["status"]
    assert "activation: inactive: installed diffusers does not match the base of the series" in report["status"]
    assert f"{VENDORED}: loaded, UPSTREAM" in report["status"]


def test_status_names_the_diffusers_version_actually_imported(mismatched_processes):
    status = _report(mismatched_processes["other_version"])["status"]
    assert status.splitlines()[0] == f"upstream diffusers: 0.42.0 (does NOT match the series base {UPSTREAM_VERSION})"


@pytest.mark.parametrize("shadow", sorted(_SHADOWS))
def test_status_command_tells_about_a_mismatched_diffusers_before_any_patched_import(python, scratch, shadows, shadow):
    result = python(_STATUS, env={"PYTHONPATH": str(shadows[shadow])}, **scratch)
    assert result.returncode == 0, result.stderr
    assert "guards: FAIL, patched modules will be served from upstream" in result.stdout
    for text in _expected_guard_message(shadow, shadows[shadow]):
        assert text in result.stdout


@pytest.mark.parametrize("shadow", sorted(_SHADOWS))
def test_strict_makes_mismatched_diffusers_an_import_error_every_time(python, scratch, shadows, shadow):
    result = python(
        f"""
        errors = []
        for attempt in range(2):  # a caller that swallows the first ImportError must not get upstream next time
            try:
                import {VENDORED}
            except ImportError as e:
                errors.append(str(e))
        report = {{"errors": errors}}
        {REPORT}
        """,
        env={"PYTHONPATH": str(shadows[shadow]), "DIFFUSERS_PATCHED_STRICT": "1"},
        **scratch,
    )
    errors = _report(result)["errors"]
    assert len(errors) == 2
    for error in errors:
        assert error.startswith("diffusers-patched: serving upstream diffusers unpatched: ")
        assert error.endswith("(DIFFUSERS_PATCHED_STRICT=1 makes this an error)")
        for text in _expected_guard_message(shadow, shadows[shadow]):
            assert text in error
    assert WARNING not in result.stderr


# Warnings as errors, set on the command line or in code: the guard warning is shown, never raised.
_ERROR_FILTERS = {
    "python -W error": (["-W", "error"], ""),
    "simplefilter in code": ([], "warnings.simplefilter('error')"),
}


@pytest.mark.parametrize("errors", sorted(_ERROR_FILTERS))
def test_warnings_as_errors_mismatched_diffusers_imports_upstream_every_time_and_status_names_it(
    python, scratch, shadows, errors
):
    flags, setup = _ERROR_FILTERS[errors]
    # Two patched modules: the first import runs the guards, the second finds their verdict.
    imported = ["diffusers.pipelines.pipeline_utils", "diffusers.loaders.textual_inversion"]
    result = _run_with_flags(
        python,
        flags,
        f"""
        import importlib, runpy, sys, warnings
        {setup}
        import diffusers

        files = []
        for name in {imported!r}:
            try:
                files.append(importlib.import_module(name).__file__)
            except Exception as e:
                files.append(f"{{type(e).__name__}}: {{e}}")
        report = {{"files": files}}
        {REPORT}
        sys.argv = ["diffusers_patched", "status"]
        runpy.run_module("diffusers_patched", run_name="__main__", alter_sys=True)
        """,
        env={"PYTHONPATH": str(shadows["other_version"])},
        **scratch,
    )
    files = _report(result)["files"]
    for name, file in zip(imported, files):
        upstream = shadows["other_version"] / (name.replace(".", "/") + ".py")
        assert _same(file, upstream), f"{name}: {file}"
    assert result.stderr.count(WARNING) == 1, result.stderr
    assert "activation: inactive: installed diffusers does not match the base of the series" in result.stdout
    assert "guards: FAIL, patched modules will be served from upstream" in result.stdout
    for text in _expected_guard_message("other_version", shadows["other_version"]):
        assert text in result.stdout
    assert "loaded, patched" not in result.stdout


# Import order, in interpreters started with -S: the .pth did not run, so nothing is active yet.
_LATE_IMPORT = f"""
    assert "diffusers_patched" not in sys.modules
    import {VENDORED} as m
    import diffusers_patched
    from diffusers_patched.status import status_report

    report = {{"file": m.__file__, "finders": [type(f).__module__ for f in sys.meta_path], "status": status_report()}}
    {REPORT}
"""


@pytest.mark.parametrize(
    "flags, env",
    [([], {}), (["-W", "error"], {}), ([], {"DIFFUSERS_PATCHED_STRICT": "1"})],
    ids=["default", "warnings as errors", "strict"],
)
def test_importing_diffusers_patched_after_upstream_module_warns_that_process_stays_upstream(
    python, scratch, flags, env
):
    """Never an error at `import diffusers_patched`, not even in strict mode: that one is for patched imports."""
    result = _run_without_site(python, _LATE_IMPORT, flags=flags, env=env, **scratch)
    report = _report(result)
    assert _same(report["file"], UPSTREAM_DIR / "pipelines" / "pipeline_loading_utils.py")
    assert not any(module.startswith("diffusers_patched") for module in report["finders"])
    assert result.stderr.count(WARNING) == 1, result.stderr
    assert f"{VENDORED} had already been imported from upstream diffusers" in result.stderr
    assert "which stays fully upstream. Import diffusers_patched before diffusers" in result.stderr
    assert "activation: inactive: " in report["status"]
    assert f"{VENDORED}: loaded, UPSTREAM" in report["status"]


def test_importing_diffusers_patched_first_without_site_activates(python, scratch):
    result = _run_without_site(
        python,
        f"""
        assert "diffusers_patched" not in sys.modules
        import diffusers_patched
        import {VENDORED} as m

        report = {{"file": m.__file__, "has_patched_function": hasattr(m, "_get_bitsandbytes_quantization_method")}}
        {REPORT}
        """,
        **scratch,
    )
    report = _report(result)
    assert _same(report["file"], VENDOR_DIR / VENDORED_FILE)
    assert report["has_patched_function"]
    assert WARNING not in result.stderr


@pytest.mark.parametrize("site", ["with the .pth", "without site"])
def test_importing_diffusers_patched_twice_installs_one_finder(python, scratch, site):
    code = f"""
        import importlib, sys
        import diffusers_patched
        import diffusers_patched
        importlib.reload(diffusers_patched)
        diffusers_patched.activate()

        report = {{"finders": [type(f).__name__ for f in sys.meta_path]}}
        {REPORT}
    """
    result = python(code, **scratch) if site == "with the .pth" else _run_without_site(python, code, **scratch)
    assert _report(result)["finders"].count("VendoredModuleFinder") == 1
    assert result.stderr == ""


def test_activate_puts_back_the_finder_removed_from_sys_meta_path(python, scratch):
    result = python(
        f"""
        import sys
        import diffusers_patched
        from diffusers_patched.activation import VendoredModuleFinder, state

        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, VendoredModuleFinder)]
        report = {{"activated": diffusers_patched.activate(), "finders": [type(f).__name__ for f in sys.meta_path]}}
        report["reason"] = state.reason
        {REPORT}
        """,
        **scratch,
    )
    report = _report(result)
    assert report["activated"]
    assert report["finders"].count("VendoredModuleFinder") == 1
    assert report["reason"] == "active"
    assert result.stderr == ""


def test_uninstall_then_activate_serves_the_patched_modules_again(python, scratch):
    result = python(
        f"""
        import sys
        import diffusers_patched
        from diffusers_patched.activation import state

        diffusers_patched.uninstall()
        report = {{"uninstalled": [type(f).__name__ for f in sys.meta_path], "reason": state.reason}}
        report["activated"] = diffusers_patched.activate()
        report["finders"] = [type(f).__name__ for f in sys.meta_path]
        import {VENDORED} as m
        report["file"] = m.__file__
        {REPORT}
        """,
        **scratch,
    )
    report = _report(result)
    assert "VendoredModuleFinder" not in report["uninstalled"]
    assert report["reason"] == "not activated yet"
    assert report["activated"]
    assert report["finders"].count("VendoredModuleFinder") == 1
    assert _same(report["file"], VENDOR_DIR / VENDORED_FILE)
    # Importing it imports bitsandbytes, which warns on CPUs with AVX512-BF16 when its optional `kernels` is missing,
    # and torchao, which says its CUDA kernels do not load on a CPU (and diffusers' torchao quantizer repeats it).
    import_noise = [
        r"Failed to load CPU gemm_4bit_forward from kernels-community: .*",
        r"Failed to load \S+/torchao/\S+: Could not load this library: .*",
        r"W\d+ [\d:.]+ \d+ \S*torch/utils/_pytree\.py:\d+\] <enum .*",
        r"Unable to import `torchao` Tensor objects\. .*",
    ]
    assert re.sub(rf"(?m)^({'|'.join(import_noise)})\n", "", result.stderr) == ""
