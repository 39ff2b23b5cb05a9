"""Serve the vendored, patched copies of upstream diffusers modules under their upstream names.

This module runs at interpreter start-up (through ``diffusers_patched.pth``), so it imports nothing
heavy: no torch, no diffusers, no importlib.metadata. The guards run the first time a patched
module is imported, when ``diffusers`` itself is already in ``sys.modules``.
"""

import os
import sys

from . import _vendor


ENV_SWITCH = "DIFFUSERS_PATCHED"
ENV_STRICT = "DIFFUSERS_PATCHED_STRICT"
DISTRIBUTION = "diffusers-patched"
# Extras whose dependencies count as the stack when installed (`dev` is this project's tooling, not the stack).
STACK_EXTRAS = ("lora", "quanto", "torchao", "sdnq")
_TRUE_VALUES = {"1", "true", "yes", "on"}
# diffusers_patched.pth repeats these, to skip importing the package when it is switched off.
_FALSE_VALUES = {"0", "false", "no", "off"}

VENDOR_DIR = os.path.dirname(os.path.abspath(_vendor.__file__))


class DiffusersPatchedWarning(UserWarning):
    pass


class _State:
    """What activation decided in this process, and why; read by `status`."""

    def __init__(self):
        self.reason = "not activated yet"
        # None until the first patched module is imported; then whether the guards passed.
        self.guards_passed = None
        self.problems = []
        # Installed dependencies outside the ranges this build was verified on (see `stack_versions`).
        self.outside_ranges = []


state = _State()


def _read_flag(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default, None
    value = raw.strip().lower()
    if value in _TRUE_VALUES:
        return True, None
    if value in _FALSE_VALUES:
        return False, None
    return None, f"{name}={raw!r} is not understood: set {name}=1 to turn it on or {name}=0 to turn it off."


def is_strict():
    strict, problem = _read_flag(ENV_STRICT, False)
    if problem is not None:
        _warn(f"{problem} Treated as {ENV_STRICT}=0 for now.")
    return bool(strict)


def vendored_path(module_name):
    return os.path.join(VENDOR_DIR, _vendor.MODULES[module_name]["path"])


def upstream_path(module_name):
    """Where the installed diffusers keeps the file that the vendored module replaces."""
    package_dir = os.path.dirname(sys.modules["diffusers"].__file__)
    return os.path.join(package_dir, *_vendor.MODULES[module_name]["path"].split("/")[1:])


def _warn(message):
    """Warn without ever raising: callers record the problem in `state` first, for `status`."""
    import warnings  # only when there is something to say: it is not imported at start-up otherwise

    warning = DiffusersPatchedWarning(f"diffusers-patched: {message}")
    try:
        warnings.warn(warning, stacklevel=2)
    except DiffusersPatchedWarning:
        # An "error" filter (`python -W error`, pytest's `filterwarnings = error`) made it an exception. Raised in
        # find_spec it would fail only the import that happens to run the guards, and the next one would get
        # upstream; raised at start-up it would break `import diffusers_patched`. So show it as a plain warning
        # instead, through showwarning so that logging.captureWarnings and pytest still see it.
        # DIFFUSERS_PATCHED_STRICT=1 is the way to make a mismatch an error.
        caller = sys._getframe(1)
        warnings.showwarning(warning, DiffusersPatchedWarning, caller.f_code.co_filename, caller.f_lineno)


def upstream_problems():
    """Compare the installed diffusers with the base the series was made against."""
    import hashlib

    diffusers = sys.modules.get("diffusers")
    found_version = getattr(diffusers, "__version__", None)
    if found_version != _vendor.UPSTREAM_VERSION:
        if found_version in _vendor.SUPPORTED_RELEASES:
            other_build = f"the build for it, `pip install diffusers-patched=={found_version}.post{_vendor.POST}`"
        else:
            other_build = (
                f"no diffusers-patched build exists for diffusers {found_version}; the supported releases are "
                f"{', '.join(_vendor.SUPPORTED_RELEASES)}"
            )
        return [
            f"installed diffusers is {found_version}, but this diffusers-patched ({_vendor.VERSION}) is built for "
            f"diffusers {_vendor.UPSTREAM_VERSION}. Install the matching release with `pip install "
            f"diffusers=={_vendor.UPSTREAM_VERSION}`, or {other_build}."
        ]
    problems = []
    for module_name, entry in sorted(_vendor.MODULES.items()):
        upstream_file = upstream_path(module_name)
        try:
            with open(upstream_file, "rb") as f:
                found_sha256 = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            found_sha256 = f"unreadable ({e.strerror})"
        if found_sha256 != entry["pristine_sha256"]:
            problems.append(
                f"{upstream_file} has sha256 {found_sha256}, expected {entry['pristine_sha256']} "
                f"(pristine diffusers {_vendor.UPSTREAM_VERSION}). The installed diffusers was modified; "
                f"reinstall it with `pip install --force-reinstall --no-deps diffusers=={_vendor.UPSTREAM_VERSION}`."
            )
    return problems


def verified_ranges():
    """{name: specifier} of the stack this build declares (its Requires-Dist, less diffusers and the `dev` extra): the
    ranges it was verified on (`make test-stacks`). Empty where the package runs without its metadata (a checkout)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    site_dir = os.path.dirname(os.path.dirname(VENDOR_DIR))
    dist = next(iter(metadata.distributions(name=DISTRIBUTION, path=[site_dir])), None)
    ranges = {}
    for line in (dist.requires or []) if dist is not None else []:
        requirement = Requirement(line)
        wanted = requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in STACK_EXTRAS)
        if wanted and requirement.name != "diffusers":
            ranges[requirement.name] = requirement.specifier
    return ranges


def stack_versions():
    """[(name, installed version or None, specifier, inside the specifier)] of the declared stack."""
    from importlib import metadata

    stack = []
    for name, specifier in verified_ranges().items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            stack.append((name, None, specifier, True))  # only an optional one can be missing: pip installs the rest
            continue
        stack.append((name, version, specifier, specifier.contains(version, prereleases=True)))
    return stack


def outside_ranges_message(outside):
    listed = "; ".join(
        f"{name} {version} is installed, outside the range it was verified on ({name}{specifier})"
        for name, version, specifier in outside
    )
    return f"{listed}. diffusers-patched {_vendor.VERSION} stays on; `diffusers-patched status` lists the stack."


def _unpatched_message():
    return "serving upstream diffusers unpatched: " + " ".join(state.problems)


class VendoredModuleFinder:
    """A `sys.meta_path` finder that loads patched modules from the vendored tree.

    The module keeps its upstream name and package, so relative imports inside it and every
    `from .module import name` elsewhere in diffusers bind the patched code.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _vendor.MODULES:
            return None
        if state.guards_passed is None:
            self._run_guards()
        if not state.guards_passed:
            if is_strict():
                # Every time, not only the first: a caller that swallows this error must not get upstream on a retry.
                raise ImportError(f"diffusers-patched: {_unpatched_message()} ({ENV_STRICT}=1 makes this an error)")
            return None
        import importlib.util

        path = vendored_path(fullname)
        if os.path.basename(path) != "__init__.py":
            return importlib.util.spec_from_file_location(fullname, path)
        # A patched package __init__: its submodules that the series leaves alone still come from upstream.
        upstream_package_dir = os.path.dirname(upstream_path(fullname))
        return importlib.util.spec_from_file_location(
            fullname, path, submodule_search_locations=[upstream_package_dir]
        )

    @staticmethod
    def _run_guards():
        # Decided once for all patched modules: a process is either fully patched or fully upstream.
        problems = upstream_problems()
        state.guards_passed = not problems
        state.problems = problems
        if problems:
            state.reason = "inactive: installed diffusers does not match the base of the series"
            if not is_strict():
                _warn(_unpatched_message())
            return
        try:
            outside = [(name, version, spec) for name, version, spec, inside in stack_versions() if not inside]
        except Exception as e:  # an unreadable stack must not turn an import into an error
            outside = []
            state.reason = f"active (the installed stack could not be checked: {type(e).__name__}: {e})"
        state.outside_ranges = outside
        if outside:
            _warn(outside_ranges_message(outside))


def activate():
    """Install the finder unless it is in `sys.meta_path` already.

    Never raises and never lets a warning become an exception: a problem deactivates the patches and is
    kept for `status`.
    """
    # Keyed on sys.meta_path itself, so that a finder someone removed is put back.
    if any(isinstance(finder, VendoredModuleFinder) for finder in sys.meta_path):
        return True
    try:
        enabled, problem = _read_flag(ENV_SWITCH, True)
        if problem is not None:
            state.reason = f"inactive: {problem}"
            _warn(f"patches are off because {problem}")
            return False
        if not enabled:
            state.reason = f"inactive: switched off by {ENV_SWITCH}=0"
            return False
        # Patched modules imported while an earlier finder was installed (see uninstall) are no obstacle.
        imported = sorted(
            name
            for name in _vendor.MODULES
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) != vendored_path(name)
        )
        if imported:
            state.reason = (
                f"inactive: {', '.join(imported)} had already been imported from upstream diffusers when "
                "diffusers_patched was activated"
            )
            # A warning even with DIFFUSERS_PATCHED_STRICT=1: importing diffusers_patched must not fail, and
            # strict mode's errors belong to the imports of patched modules.
            _warn(
                f"{', '.join(imported)} had already been imported from upstream diffusers, so the patches cannot "
                "apply in this process, which stays fully upstream. Import diffusers_patched before diffusers, or "
                "reinstall diffusers-patched so that its .pth file activates it at interpreter start-up."
            )
            return False
        sys.meta_path.insert(0, VendoredModuleFinder())
        state.reason = "active"
        return True
    except Exception as e:  # start-up must never break because of us
        state.reason = f"inactive: activation failed with {type(e).__name__}: {e}"
        return False


def uninstall():
    """Remove the finder from `sys.meta_path` and forget what activation decided, so that `activate` starts over.

    For tests and embedders. Modules already imported stay as they are, patched or upstream: only later
    imports are affected.
    """
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, VendoredModuleFinder)]
    state.__init__()
