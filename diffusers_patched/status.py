"""`diffusers-patched status` / `python -m diffusers_patched status`: what diffusers-patched does in this process."""

import argparse
import sys

from . import _vendor, activation
from .selftest import command


def status_report():
    """What diffusers-patched does in this process: upstream version, activation, patches, vendored modules."""
    try:
        import diffusers
    except ImportError as e:
        diffusers = None
        installed = f"not importable ({e})"
    else:
        # The diffusers this process runs (which the guards check), not necessarily the one pip recorded.
        installed = getattr(diffusers, "__version__", "unknown")
    match = "matches" if installed == _vendor.UPSTREAM_VERSION else "does NOT match"
    # Guards run at the first patched import; run them here too so that status tells before that happens.
    problems = activation.state.problems if activation.state.guards_passed is not None else []
    if diffusers is not None and activation.state.guards_passed is None:
        problems = activation.upstream_problems()
    lines = [
        f"upstream diffusers: {installed} ({match} the series base {_vendor.UPSTREAM_VERSION})",
        f"build: diffusers-patched {_vendor.VERSION}, for diffusers {_vendor.UPSTREAM_VERSION} "
        f"(supported releases: {', '.join(_vendor.SUPPORTED_RELEASES)})",
        f"activation: {activation.state.reason}",
        f"guards: {'FAIL, patched modules will be served from upstream' if problems else 'pass'}",
    ]
    lines.extend(f"  problem: {problem}" for problem in problems)
    lines.append("patches:")
    for patch in _vendor.PATCHES:
        upstream = f"bug: {', '.join(patch['bugs'])}" if patch["bugs"] else f"origin: {patch['origin']}"
        applied = f", applied upstream: {patch['applied_upstream']}" if patch["applied_upstream"] else ""
        backport = f", backported to {_vendor.UPSTREAM_VERSION}" if patch["backport"] else ""
        lines.append(
            f"  {patch['file']}: {patch['subject']} [{upstream}; forwarded: {patch['forwarded']}{applied}{backport}]"
        )
    lines.extend(
        f"  {name}: skipped, not needed on diffusers {_vendor.UPSTREAM_VERSION}: {reason}"
        for name, reason in sorted(_vendor.SKIPPED.items())
    )
    lines.append("vendored modules:")
    for name in sorted(_vendor.MODULES):
        module = sys.modules.get(name)
        if module is None:
            loaded = "not loaded"
        elif getattr(module, "__file__", None) == activation.vendored_path(name):
            loaded = "loaded, patched"
        else:
            loaded = "loaded, UPSTREAM"
        lines.append(f"  {name}: {loaded}")
    lines.extend(stack_lines())
    lines.append("whether the fixes hold on this stack and device: `python -m diffusers_patched selftest`")
    return "\n".join(lines)


def stack_lines():
    """The installed version of each dependency, and whether it is inside the range this build was verified on."""
    try:
        stack = activation.stack_versions()
    except Exception as e:
        return [f"stack: could not be read ({type(e).__name__}: {e})"]
    if not stack:
        return ["stack: no verified ranges (diffusers-patched runs without its installed metadata)"]
    lines = [f"stack (verified ranges of diffusers-patched {_vendor.VERSION}):"]
    for name, version, specifier, inside in stack:
        if version is None:
            lines.append(f"  {name}: not installed (optional; verified: {specifier})")
        else:
            verdict = "inside" if inside else "OUTSIDE (the patches stay on)"
            lines.append(f"  {name} {version}: {verdict} the verified range {name}{specifier}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="diffusers-patched", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "status", help="upstream version, activation state, patches, vendored modules and the installed stack"
    )
    command.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "selftest":
        sys.exit(command.main(args))
    print(status_report())
