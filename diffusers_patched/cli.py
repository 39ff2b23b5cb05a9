"""`diffusers-patched` / `python -m diffusers_patched`: status for users, series tooling for maintainers."""

import argparse
import sys
from pathlib import Path

from . import _vendor, activation


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
        f"activation: {activation.state.reason}",
        f"guards: {'FAIL, patched modules will be served from upstream' if problems else 'pass'}",
    ]
    lines.extend(f"  problem: {problem}" for problem in problems)
    lines.append("patches:")
    for patch in _vendor.PATCHES:
        upstream = f"Fixes {patch['fixes']}" if patch["fixes"] else "no upstream issue"
        applied = f", applied upstream: {patch['applied_upstream']}" if patch["applied_upstream"] else ""
        lines.append(f"  {patch['file']}: {patch['subject']} [{upstream}; forwarded: {patch['forwarded']}{applied}]")
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
    return "\n".join(lines)


def _series_command(args):
    from . import series

    project = series.Project(args.root)
    if args.command == "vendor":
        entries = series.vendor(project)
        return f"vendored tree regenerated from {len(entries)} patch(es)"
    if args.command == "check":
        entries = series.check(project)
        return f"series OK: {len(entries)} patch(es) apply exactly, vendored tree and patch files are up to date"
    if args.command == "export":
        paths = series.export_patches(project, args.out)
        return "\n".join(str(path) for path in paths)
    if args.command == "edit":
        series.edit(project)
        return (
            f"{project.work_dir} holds pristine + series as commits. Commit your change there (a new commit for a "
            "new patch, `git commit --fixup` + `git rebase -i --autosquash pristine` for an existing one), then run "
            "`make refresh`."
        )
    if args.command == "refresh":
        names = series.refresh(project)
        return "patches, base record and vendored tree rewritten: " + ", ".join(names)
    if args.command in ("rebase", "rebase-continue"):
        if args.command == "rebase":
            names, dropped = series.rebase(project, args.version)
        else:
            names, dropped = series.rebase_continue(project)
        report = [f"series rebased onto diffusers {project.read_base()['version']}: " + ", ".join(names)]
        report.extend(f"{name}: applied upstream, dropped from the series" for name in dropped)
        return "\n".join(report)
    raise AssertionError(args.command)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="diffusers-patched", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="upstream version, activation state, patches and vendored modules")
    maintainer = {
        "vendor": "regenerate diffusers_patched/_vendor from pristine upstream + patches/series",
        "check": "lint the series, apply it exactly, require vendored tree and patches to be up to date",
        "export": "write the series as upstream-ready mbox patches",
        "edit": "make build/series: pristine + series as git commits to change",
        "refresh": "rewrite patches and vendored tree from the commits in build/series",
        "rebase": "replay the series onto another upstream release with a 3-way merge",
        "rebase-continue": "continue a rebase after resolving its conflicts",
    }
    for name, help_text in maintainer.items():
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--root", type=Path, default=Path.cwd(), help="diffusers-patched checkout")
        if name == "export":
            command.add_argument("--out", type=Path, required=True)
        if name == "rebase":
            command.add_argument("version")
    args = parser.parse_args(argv)
    if args.command == "status":
        print(status_report())
        return
    from .series import SeriesError

    try:
        print(_series_command(args))
    except SeriesError as e:
        sys.exit(f"error: {e}")
