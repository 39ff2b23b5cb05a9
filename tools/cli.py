"""`python -m tools.cli COMMAND`: the series tooling for maintainers (the Makefile's series targets call it)."""

import argparse
import sys
import tempfile
from pathlib import Path

from . import ToolError, patches, publish, releases, series, upstream, upstream_prs, vendoring, wheels


COMMANDS = {
    "vendor": "regenerate diffusers_patched/_vendor from pristine upstream + patches/series",
    "check": "lint the series, apply it exactly, require vendored tree and patches to be up to date, check the PRs",
    "export": "write the upstream-ready patches (not the `Forwarded: not-needed` ones), verified, and one folder per PR",
    "verify-prs": "on pristine upstream, each PR after its dependencies: applies, lints, its tests fail then pass",
    "rewritten": "the lines a patch adds that a later patch rewrites (a final design adds each line once), per pair",
    "edit": "make build/series (--release X: build/series-X; --pr P: build/pr-P): pristine + series as git commits",
    "refresh": "rewrite patches and vendored tree from build/series (--release X: X's backports; --pr P: P's standalone "
    "copies)",
    "refresh-releases": "replay the series onto every other supported release and rewrite their records",
    "add-release": "support another diffusers release: record its sdist; the series is replayed onto it",
    "wheels": "build one wheel per supported release (or --release X) and SHA256SUMS into --out",
    "requirements": "write --dist's requirements-<release>.txt: diffusers and diffusers-patched pinned with hashes",
    "publish": "upload --dist's wheels to --repository-url with twine, after checking them, the commit and the index",
    "rebase": "replay the series onto another upstream release with a 3-way merge",
    "rebase-continue": "continue a rebase after resolving its conflicts",
}


def run(args):
    project = patches.Project(args.root)
    if args.command == "vendor":
        entries = vendoring.vendor(project)
        return f"vendored tree regenerated from {len(entries)} patch(es)"
    if args.command == "check":
        entries = series.check(project)
        with tempfile.TemporaryDirectory() as tmp:
            prs, _ = upstream_prs.check_prs(project, Path(tmp) / "prs")
        return (
            f"series OK: {len(entries)} patch(es) apply exactly, vendored tree and patch files are up to date; "
            f"{len(prs)} upstream PR(s) hold every forwardable patch once and apply with their dependencies"
        )
    if args.command == "export":
        paths, left_out, prs = upstream_prs.export_prs(project, args.out, args.upstream_repo)
        report = [str(path) for path in paths]
        report.extend(f"left out {name}: {why}" for name, why in left_out.items())
        checks = "upstream's ruff" + (" and utils/check_copies.py" if args.upstream_repo else "")
        report.append(f"verified: they `git am` onto the pristine release and pass {checks}")
        report.append(f"{len(prs)} upstream PR(s), each applying with its dependencies: {args.out / 'prs.json'}")
        return "\n".join(report)
    if args.command == "rewritten":
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "series"
            added, pairs = upstream_prs.rewritten_lines(repo, patches.scratch_checkout(project, repo))
        report = [
            f"{sum(pairs.values())} of the {added} lines the series adds are rewritten by a later patch, in "
            f"{len({later for _, later in pairs})} patch(es)"
        ]
        report += [
            f"  {count}: added by {earlier}, rewritten by {later}" for (earlier, later), count in pairs.most_common()
        ]
        return "\n".join(report)
    if args.command == "verify-prs":
        failing = []
        for name, line, holds in upstream_prs.verify_prs(project, args.upstream_repo):
            print(line, flush=True)
            failing += [] if holds else [name]
        prs = upstream_prs.read_prs(project)
        total = (
            f"total: {len(prs) - len(failing)} of {len(prs)} PR(s) hold, {sum(not pr['depends_on'] for pr in prs)} "
            f"stand alone on pristine {upstream.UPSTREAM} {project.read_base()['version']}"
        )
        if failing:
            raise ToolError(f"{total}; failing: {', '.join(failing)}")
        return total
    if getattr(args, "pr", None) and args.command == "edit":
        conflict = upstream_prs.edit_pr(project, args.pr)
        return conflict or (
            f"{project.pr_work_dir(args.pr)} holds pristine diffusers, the PRs {args.pr} depends on (tag "
            f"`dependencies`) and its own patches as commits. Change them there, then run `make refresh PR={args.pr}`."
        )
    if getattr(args, "pr", None) and args.command == "refresh":
        names = upstream_prs.refresh_pr(project, args.pr)
        return f"PR {args.pr}: standalone copies of {', '.join(names) or 'none'}; patches/prs.json rewritten"
    another_release = getattr(args, "release", None) not in (None, project.read_base()["version"])
    if args.command == "edit" and another_release:
        plan = releases.edit_release(project, args.release)
        return (
            f"{project.release_work_dir(args.release)} holds pristine diffusers {args.release} with its "
            f"{len(plan)} patch(es) replayed as commits (tag `primary`: the series as written for the primary). "
            f"Change a commit there as in build/series, then run `make refresh RELEASE={args.release}`."
        )
    if args.command == "edit":
        series.edit(project)
        return (
            f"{project.work_dir} holds pristine + series as commits. Commit your change there (a new commit for a "
            "new patch, `git commit --fixup` + `git rebase -i --autosquash pristine` for an existing one), then run "
            "`make refresh`. Each commit's `Patch-Filename:` trailer names its patch file; a new commit without one "
            "is named after its subject."
        )
    if args.command == "refresh" and another_release:
        names, backported = releases.refresh_release(project, args.release)
        return (
            f"diffusers {args.release}: {len(names)} patch(es), backported: {', '.join(backported) or 'none'}; "
            "patches/releases.json and its backports rewritten"
        )
    if args.command == "refresh-releases":
        return "\n".join(_release_report(releases.refresh_releases(project))) or "no other supported release"
    if args.command == "add-release":
        releases.add_release(project, args.version)
        return (
            f"diffusers {args.version} added to patches/releases.json; `make check-patches` replays the series onto it"
        )
    if args.command == "wheels":
        paths = wheels.build_wheels(project, args.out, args.release)
        return "\n".join([*map(str, paths), str(args.out / "SHA256SUMS")])
    if args.command == "requirements":
        return "\n".join(map(str, publish.write_requirements(project, args.dist)))
    if args.command == "publish":
        done = publish.publish(project, args.dist, args.repository_url, args.index_url)
        return "\n".join(f"{state}: {name} sha256 {sha256}" for name, sha256, state in done)
    if args.command == "refresh":
        names = series.refresh(project)
        return "patches, base record and vendored tree rewritten: " + ", ".join(names)
    if args.command == "rebase":
        names, dropped, replays = series.rebase(project, args.version)
    else:
        names, dropped, replays = series.rebase_continue(project)
    report = [f"series rebased onto diffusers {project.read_base()['version']}: " + ", ".join(names)]
    report.extend(f"{name}: applied upstream, dropped from the series" for name in dropped)
    report.extend(_release_report(replays))
    return "\n".join(report)


def _release_report(replays):
    """Lines for {release: problems}: which releases replay, and what the others need."""
    report = []
    for version, problems in replays.items():
        report.append(f"diffusers {version}: " + ("replays, supported" if not problems else "NEEDS WORK:"))
        report.extend(f"  {line}" for problem in problems for line in problem.splitlines())
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--root", type=Path, default=Path.cwd(), help="diffusers-patched checkout")
        if name == "export":
            command.add_argument("--out", type=Path, required=True)
        if name in ("export", "verify-prs"):
            command.add_argument(
                "--upstream-repo",
                type=Path,
                help="a diffusers git repository: also run its utils/check_copies.py (the sdist lacks utils/)",
            )
        if name in ("rebase", "add-release"):
            command.add_argument("version")
        if name in ("edit", "refresh"):
            command.add_argument("--release", help="another supported diffusers release (default: the primary)")
            command.add_argument("--pr", help="an upstream PR of patches/prs.json: its standalone copies")
        if name == "wheels":
            command.add_argument("--out", type=Path, default=Path("dist"))
            command.add_argument("--release", action="append", help="only this release (repeatable)")
        if name in ("requirements", "publish"):
            command.add_argument("--dist", type=Path, default=Path("dist"))
        if name == "publish":
            command.add_argument("--repository-url", default=publish.PYPI_UPLOAD_URL, help="twine's upload URL")
            command.add_argument("--index-url", help="its PEP 503 simple index (default: derived from the upload URL)")
    args = parser.parse_args(argv)
    try:
        print(run(args))
    except ToolError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
