"""The forwardable series as upstream pull requests: one per upstream problem, grouped in `patches/prs.json`.

diffusers takes one problem per pull request, each with its tests. `patches/prs.json` declares, once, which patches
make which PR and which PRs a PR needs first (`depends_on`: PR name -> why, "code: ..." or "textual: ..."). From it
`check_prs` refuses a grouping that leaves a forwardable patch out, holds one twice, holds a local-only patch, names
an unknown PR or forms a cycle, or a PR that no longer `git am`s onto the pristine release after its dependencies;
`export_prs` writes each PR's folder (its patches, numbered, and a `PR.md` in upstream's pull-request template) and
`prs.json`; `verify_prs` also lints each PR's files and requires its tests to fail before it and pass with it, to be
in upstream's test idiom (`idiom_problems`) and to be collected by a run that selects upstream's topic markers.
"""

import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from . import ToolError, drafts
from .git import git, run_isolated
from .patches import (
    AM_FLAGS,
    changed_lines_digest,
    export_commit,
    lint_style,
    patch_hunks,
    patch_metadata,
    scratch_checkout,
    series_commits,
)
from .releases import replays_cleanly
from .series import check_copies, export_patches
from .upstream import UPSTREAM


PRS_FILE = "prs.json"
_PR_NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]*")
_DEPENDENCY_KINDS = ("code:", "textual:")
# "Who can review?" in upstream's .github/PULL_REQUEST_TEMPLATE.md: at most two maintainers, of the PR's topic (the
# first of these areas that a changed source file is in).
# The maintainers of a topic, by the topic markers of a PR's tests (by which upstream's CI jobs select tests), the
# first that matches: a quantized model under offloading is a quantization PR, a LoRA under offloading a LoRA one.
_TOPIC_REVIEWERS = [
    (
        ("quantization", "bitsandbytes", "gguf", "torchao", "sdnq", "modelopt", "autoround", "bfl"),
        "Quantization: @sayakpaul @DN6",
    ),
    (("single_file",), "Single-file loading: @DN6"),
    (("lora", "ip_adapter"), "LoRA and PEFT: @sayakpaul @BenjaminBossan"),
    (("group_offload", "cpu_offload", "memory"), "Offloading: @DN6 @sayakpaul"),
]
# Else by the files it changes, the first that matches.
_REVIEWERS = [
    (("src/diffusers/loaders/lora", "src/diffusers/loaders/peft.py"), "LoRA and PEFT: @sayakpaul @BenjaminBossan"),
    (("src/diffusers/quantizers/",), "Quantization: @sayakpaul @DN6"),
    (("src/diffusers/loaders/single_file",), "Single-file loading: @DN6"),
    (("src/diffusers/hooks/",), "Offloading: @DN6 @sayakpaul"),
    (("src/diffusers/pipelines/", "src/diffusers/models/"), "Pipelines and models: @yiyixuxu @asomoza"),
    (("src/diffusers/",), "General functionalities: @sayakpaul @DN6"),
]
# The carried tests are about the CPU (tests/gpu has the CUDA checks); the checkout's own `src` is the diffusers
# under test, so diffusers-patched, if installed, must not serve its modules in its place.
_TEST_ENV = {"CUDA_VISIBLE_DEVICES": "", "DIFFUSERS_PATCHED": "0", "HF_HUB_OFFLINE": "1"}


def read_prs(project):
    path = project.patches_dir / PRS_FILE
    if not path.exists():
        raise ToolError(f"{path} is missing: it groups the forwardable patches into upstream PRs (patches/README.md).")
    return json.loads(path.read_text())


def write_prs(project, prs):
    (project.patches_dir / PRS_FILE).write_text(json.dumps(prs, indent=2) + "\n")


def pr_patch(project, pr, name, applied):
    """The file PR `pr` applies for its patch `name` where the PRs `applied` are applied too: the standalone copy
    (patches/standalone/), written against pristine and the PRs `pr` depends on, where the series' patch conflicts
    without the PRs it `conflicts_with` and none of them is applied; else the series' patch, written after them."""
    if name in pr.get("standalone", {}) and applied.isdisjoint(pr.get("conflicts_with", {})):
        return project.standalone_dir / name
    return project.patches_dir / name


def lint_standalone(project, prs):
    """Problems of the standalone copies: `standalone` maps each to the `changed_lines_digest` of the series' patch it
    was written from, so a copy of an earlier state of its patch is refused, as is a copy no PR records; `conflicts_with`
    names the PRs whose changes the series' patch meets (PR name -> why), which PR.md lists."""
    problems = []
    names = {pr["name"] for pr in prs}
    recorded = set()
    for pr in prs:
        where = f"patches/{PRS_FILE}: PR {pr['name']}"
        remedy = f"run `make edit PR={pr['name']}`, resolve the conflicts, then `make refresh PR={pr['name']}`"
        problems += [
            f"{where} conflicts with {other}, which is no PR"
            for other in pr.get("conflicts_with", {})
            if other not in names
        ]
        for name, digest in pr.get("standalone", {}).items():
            recorded.add(name)
            path = project.standalone_dir / name
            if name not in pr["patches"]:
                problems.append(f"{where} records a standalone copy of {name}, a patch it does not hold")
            elif not path.exists():
                problems.append(f"{where} records patches/standalone/{name}, which is missing; {remedy}")
            elif digest != changed_lines_digest((project.patches_dir / name).read_text()):
                problems.append(
                    f"patches/standalone/{name} was written from an earlier state of the series' {name}, which "
                    f"changed the lines it adds or removes since; {remedy}"
                )
    stored = sorted(project.standalone_dir.glob("*.patch")) if project.standalone_dir.is_dir() else []
    problems += [
        f"patches/standalone/{path.name} is the standalone copy of no PR's patch in patches/{PRS_FILE}; delete it"
        for path in stored
        if path.name not in recorded
    ]
    return problems


def lint_prs(prs, entries, local_only):
    """Problems of the grouping `prs` of the series `entries`, each naming the PR (or the patch no PR holds)."""
    problems = []
    names = [pr.get("name") for pr in prs]
    holder = {}
    for pr in prs:
        where = f"patches/{PRS_FILE}: PR {pr.get('name')}"
        shape = [key for key in ("name", "title", "patches") if not pr.get(key)]
        shape += [] if isinstance(pr.get("depends_on"), dict) else ["depends_on"]
        if shape or not _PR_NAME_RE.fullmatch(pr["name"]) or names.count(pr["name"]) > 1:
            problems.append(
                f"{where} needs a unique name (lower-case letters, digits, '-'), a title, its patches and "
                f"`depends_on` (an object, {{}} for none); wrong or missing: {', '.join(shape) or 'name'}"
            )
            continue
        for name in pr["patches"]:
            if name not in entries:
                problems.append(f"{where} holds {name}, which is not in patches/series")
            elif name in local_only:
                problems.append(
                    f"{where} holds {name}, a local-only patch (`Forwarded: not-needed`) that upstream never gets; "
                    "remove it from the PR"
                )
            elif name in holder:
                problems.append(f"{where} holds {name}, which PR {holder[name]} holds too: one PR per patch")
            else:
                holder[name] = pr["name"]
        for dependency, why in pr["depends_on"].items():
            if dependency not in names:
                problems.append(f"{where} depends on {dependency}, which is no PR in patches/{PRS_FILE}")
            if not why.startswith(_DEPENDENCY_KINDS):
                problems.append(
                    f"{where}: say why it depends on {dependency}, starting with `code:` (it needs that PR's code) "
                    "or `textual:` (only context lines or a file that PR adds)"
                )
    problems.extend(
        f"{name} is forwardable but in no PR of patches/{PRS_FILE}: add it to the PR of its upstream problem, or "
        "to a new PR"
        for name in entries
        if name not in local_only and name not in holder
    )
    cycle = _dependency_cycle(prs)
    if cycle:
        problems.append(f"patches/{PRS_FILE}: PR {cycle[0]} depends on itself: {' -> '.join(cycle)}")
    return problems


def _dependency_cycle(prs):
    """[a, b, ..., a] for a cycle of `depends_on`, or None."""
    depends_on = {pr.get("name"): list(pr.get("depends_on") or {}) for pr in prs}

    def walk(path):
        for dependency in depends_on.get(path[-1], []):
            if dependency in path:
                return path[path.index(dependency) :] + [dependency]
            cycle = walk(path + [dependency])
            if cycle:
                return cycle
        return None

    return next(filter(None, (walk([name]) for name in depends_on)), None)


def dependency_order(prs, name):
    """The names of the PRs `name` needs, dependencies of dependencies first, then `name` itself."""
    by_name = {pr["name"]: pr for pr in prs}
    order = []

    def visit(current):
        if current not in order:
            for dependency in by_name[current]["depends_on"]:
                visit(dependency)
            order.append(current)

    visit(name)
    return order


def apply_pr(project, repo, prs, pr, entries, editing=False):
    """Reset `repo` to pristine, `git am` the PRs `pr` depends on (tag `dependencies`), then `pr`'s own patches.

    `git am --3way`: a series patch's context may hold lines that patches of other PRs add next to its own, which the
    3-way merge leaves out; where the changes touch, it fails, and the PR depends on the other or applies its
    standalone copy (`pr_patch`). `export_prs` writes the PR's commits as they apply here, which `git am` onto the
    dependencies without a merge. `editing` (`edit_pr`) applies the PR's own series patches and leaves a conflict to
    resolve. Returns the problem, naming the PR and the patch, or None."""
    git(repo, "reset", "--quiet", "--hard", "pristine")
    # Bytecode caches are kept: Python recompiles what a reset changes, and each PR's tests import diffusers anew.
    git(repo, "clean", "-fdxq", "--exclude=__pycache__")
    by_name = {candidate["name"]: candidate for candidate in prs}
    order = dependency_order(prs, pr["name"])
    applied = set(order)
    # (patch file, its PR): the dependencies' patches in series order, then the PR's own, each run by one `git am`.
    dependencies = [
        (pr_patch(project, by_name[name], patch, applied), name)
        for patch, name in sorted(
            ((patch, name) for name in order[:-1] for patch in by_name[name]["patches"]),
            key=lambda item: entries.index(item[0]),
        )
    ]
    own = [
        (project.patches_dir / patch if editing else pr_patch(project, pr, patch, applied), pr["name"])
        for patch in sorted(pr["patches"], key=entries.index)
    ]
    for run in (dependencies, own):
        if run is own:
            git(repo, "tag", "--force", "dependencies")
        if not run:
            continue
        result = git(repo, "am", *AM_FLAGS, "--3way", *(str(patch) for patch, _ in run), check=False)
        if result.returncode != 0:
            patch, name = run[int((repo / ".git" / "rebase-apply" / "next").read_text()) - 1]
            if editing and run is own:
                return (
                    f"PR {pr['name']}: {patch.name} conflicts without the PRs it does not depend on:\n"
                    f"{result.stderr.strip()}\nResolve the conflicts in {repo} (edit, `git add`, `git am --continue`), "
                    f"then run `make refresh PR={pr['name']}`."
                )
            git(repo, "am", "--abort", check=False)
            after = f" after the PRs it depends on ({', '.join(pr['depends_on'])})" if pr["depends_on"] else ""
            return (
                f"PR {pr['name']}: {patch.name}{f' (of PR {name})' if name != pr['name'] else ''} does not `git am` "
                f"onto pristine {UPSTREAM}{after}; declare the PR it needs in `depends_on` of patches/{PRS_FILE}, "
                f"or write its standalone copy (`make edit PR={pr['name']}`)."
                f"\n{result.stderr.strip()}"
            )
    return None


def _own_commits(repo, pr, entries):
    """(patch, commit) of `pr`'s own patches as applied in `repo` after tag `dependencies`."""
    commits = git(repo, "rev-list", "--reverse", "dependencies..HEAD").stdout.split()
    return list(zip(sorted(pr["patches"], key=entries.index), commits))


def standalone_problems(project, repo, pr, entries):
    """Problems of `pr`'s standalone copies as applied in `repo` (`apply_pr`): a copy the series' patch would give
    there is unnecessary, and a copy must be what a re-export of its commit writes."""
    remedy = f"run `make edit PR={pr['name']}` then `make refresh PR={pr['name']}` to rewrite it"
    problems = []
    for name, commit in _own_commits(repo, pr, entries):
        if name not in pr.get("standalone", {}):
            continue
        if replays_cleanly(repo, commit, project.patches_dir / name):
            problems.append(
                f"patches/standalone/{name} is unnecessary: the series' {name} applies after the PRs {pr['name']} "
                f"depends on; {remedy} (refresh deletes it)."
            )
        elif export_commit(repo, commit) != (project.standalone_dir / name).read_bytes():
            problems.append(f"patches/standalone/{name}: a re-export differs from the committed file; {remedy}.")
    return problems


def _pr_named(prs, name):
    for pr in prs:
        if pr["name"] == name:
            return pr
    raise ToolError(f"no PR named {name} in patches/{PRS_FILE}")


def edit_pr(project, name):
    """build/pr-<name>: pristine with the PRs `name` depends on (tag `dependencies`), then its own series patches, to
    write its standalone copies; returns the conflict to resolve there, or None."""
    repo = project.pr_work_dir(name)
    shutil.rmtree(repo, ignore_errors=True)
    entries = scratch_checkout(project, repo)
    prs = read_prs(project)
    return apply_pr(project, repo, prs, _pr_named(prs, name), entries, editing=True)


def refresh_pr(project, name):
    """Write PR `name`'s standalone copies from build/pr-<name> (`edit_pr`, its conflicts resolved): one for each of
    its commits there that the series' patch does not give, recorded in patches/prs.json; returns their names."""
    repo = project.pr_work_dir(name)
    if not repo.is_dir():
        raise ToolError(f"{repo} is missing: run `make edit PR={name}` first")
    if (repo / ".git" / "rebase-apply").exists():
        raise ToolError(
            f"`git am` is under way in {repo}: resolve, `git add`, `git am --continue`, then refresh again"
        )
    prs = read_prs(project)
    pr = _pr_named(prs, name)
    commits = _own_commits(repo, pr, project.read_series())
    if len(commits) != len(pr["patches"]):
        raise ToolError(
            f"{repo} holds {len(commits)} commit(s) after `dependencies`; PR {name} has {len(pr['patches'])}"
        )
    standalone = {}
    for patch, commit in commits:
        series_patch = project.patches_dir / patch
        path = project.standalone_dir / patch
        if replays_cleanly(repo, commit, series_patch):
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(export_commit(repo, commit))
        standalone[patch] = changed_lines_digest(series_patch.read_text())
    pr.pop("standalone", None)
    if standalone:
        pr["standalone"] = standalone
    write_prs(project, prs)
    return sorted(standalone)


def check_prs(project, repo, applied=None):
    """Check the grouping and that every PR applies with its dependencies, in `repo` (a scratch checkout of the series
    is made there). Returns (prs, {patch: metadata}); raises naming every PR that does not hold. `applied`, a dict,
    gets each PR's patch files as they apply there (PR name -> list, in series order)."""
    entries = scratch_checkout(project, repo)
    metadata = {name: patch_metadata(repo, commit) for name, commit in zip(entries, series_commits(repo))}
    local_only = [name for name in entries if metadata[name]["forwarded"] == "not-needed"]
    prs = read_prs(project)
    problems = lint_prs(prs, entries, local_only) + drafts.lint_drafts(project, prs)
    problems += [] if problems else lint_standalone(project, prs)
    for pr in prs if not problems else []:
        problem = apply_pr(project, repo, prs, pr, entries)
        if problem:
            problems.append(problem)
            continue
        problems += standalone_problems(project, repo, pr, entries)
        if applied is not None:
            applied[pr["name"]] = [export_commit(repo, commit) for _, commit in _own_commits(repo, pr, entries)]
    if problems:
        raise ToolError("\n".join(problems))
    return prs, metadata


def export_prs(project, out_dir, upstream_repo=None):
    """`export_patches` (the whole stack) plus one folder per PR and `prs.json`, all checked before anything is
    written. Returns (written stack paths, {left-out patch: why}, prs)."""
    out_dir = Path(out_dir)
    author = submitter(project)
    # Each PR's patches as they apply after its dependencies: their context is the PR's base, not other PRs' lines.
    applied = {}
    with tempfile.TemporaryDirectory() as tmp:
        prs, metadata = check_prs(project, Path(tmp) / "prs", applied)
    paths, left_out = export_patches(project, out_dir, upstream_repo)
    entries = list(metadata)
    for stale in out_dir.glob("*/PR.md"):
        shutil.rmtree(stale.parent)
    summary = []
    for pr in prs:
        patches = sorted(pr["patches"], key=entries.index)
        folder = out_dir / pr["name"]
        folder.mkdir()
        for number, (name, patch) in enumerate(zip(patches, applied[pr["name"]]), 1):
            submitted = as_submitted(patch.decode(), author, metadata[name]["trailers"])
            (folder / f"{number:04d}-{name}").write_bytes(submitted.encode())
        fixes = sorted(
            {int(n) for name in patches for n in re.findall(r"^Fixes #(\d+)$", metadata[name]["body"], re.M)}
        )
        (folder / "PR.md").write_text(render_pr(project, pr, prs, patches, metadata, fixes))
        for name in pr.get("drafts", []):
            draft = drafts.read_draft(project, name)
            # The reproduction of a reported problem is in PR.md: only an unreported one needs its issue opened first.
            if draft["repository"] != drafts.DIFFUSERS or not drafts.reports_issue(project, pr):
                (folder / draft["file"]).write_text(drafts.render_draft(project, name))
        summary.append(
            {
                "name": pr["name"],
                "title": pr["title"],
                "patches": patches,
                "depends_on": list(pr["depends_on"]),
                "fixes": fixes,
            }
        )
    (out_dir / PRS_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return paths, left_out, prs


def submitter(project):
    """The author of the PRs' commits: the maintainer who opens them, as git's configuration in the checkout names them
    (`user.name` and `user.email`, or GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL); never an identity git guesses."""
    result = subprocess.run(
        ["git", "-c", "user.useConfigOnly=true", "var", "GIT_AUTHOR_IDENT"],
        cwd=project.root,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ToolError(
            "the exported PRs are commits of the maintainer who opens them, and git has no identity configured here: "
            "set `git config user.name` and `git config user.email` (or GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL) first"
        )
    return result.stdout.rpartition(">")[0] + ">"


def as_submitted(patch, author, trailers):
    """A series patch as its PR carries it: by `author`, and without the DEP-3 trailer block (`trailers`, as git
    parses it), which records the series' bookkeeping (origin, forwarding), not the change."""
    header, _, rest = patch.partition("\n\n")
    message, marker, diff = rest.partition("\ndiff --git ")
    if trailers:
        body, _, block = message.rstrip("\n").rpartition("\n\n")
        if block.splitlines() != [f"{key}: {value}" for key, value in trailers]:
            raise ToolError(f"the last paragraph of a patch message is not its trailer block:\n{block}")
        message = body + "\n"
    # The header with its folded continuation lines, if any.
    header = re.sub(r"^From: .*(?:\n[ \t].*)*$", lambda _: f"From: {author}", header, count=1, flags=re.M)
    return f"{header}\n\n{message}{marker}{diff}"


def _changed_files(project, patches):
    return sorted({path for name in patches for path in patch_hunks((project.patches_dir / name).read_text())})


def _is_test_file(path):
    return path.startswith("tests/") and Path(path).name.startswith("test_") and path.endswith(".py")


def render_pr(project, pr, prs, patches, metadata, fixes):
    """PR.md: the pull request's description, in upstream's .github/PULL_REQUEST_TEMPLATE.md."""
    version = project.read_base()["version"]
    titles = {candidate["name"]: candidate["title"] for candidate in prs}
    files = _changed_files(project, patches)
    refs = sorted(
        {int(n) for name in patches for n in re.findall(r"^Refs #(\d+)$", metadata[name]["body"], re.M)} - set(fixes)
    )
    lines = [f"# {pr['title']}", "", "# What does this PR do?", ""]
    lines += [f"Fixes #{number}" for number in fixes] + [f"Refs #{number}" for number in refs]
    lines += [""] if fixes or refs else []
    for name in patches:
        # A patch's body says what fails upstream (before) and what it changes (after); the issue lines are above.
        body = re.sub(r"\n*^(?:Fixes|Refs) #\d+$", "", metadata[name]["body"], flags=re.M).strip()
        lines += [f"## {metadata[name]['subject']}", "", body, ""]
    if pr.get("notes"):
        lines += ["## Notes for reviewers", "", pr["notes"], ""]
    pr_drafts = {name: drafts.read_draft(project, name) for name in pr.get("drafts", [])}
    issue = next((draft for draft in pr_drafts.values() if draft["repository"] == drafts.DIFFUSERS), None)
    if issue:
        lines += ["## Reproduction", "", "```python", issue["code"].rstrip("\n"), "```", ""]
        lines += [f"On diffusers v{version}:", "", "```", issue["output"].rstrip("\n"), "```", ""]
        lines += ["With this PR:", "", "```", issue["fixed_output"].rstrip("\n"), "```", ""]
    elsewhere = {name: draft for name, draft in pr_drafts.items() if draft is not issue}
    if elsewhere:
        lines += [
            "## The cause in another library",
            "",
            "Part of the cause lies outside diffusers, and this PR does what diffusers can own. The issue to open "
            "there, with a reproduction that needs that library alone and its output, is drafted beside this file:",
            "",
        ]
        lines += [f"- {draft['repository']}: `{draft['file']}` ({draft['title']})" for draft in elsewhere.values()]
        lines.append("")
    lines += ["## Dependencies", ""]
    if pr["depends_on"]:
        lines += [
            "Open it after these PRs, its branch based on theirs (for several, on a branch that merges them in this "
            "order), and rebase it onto `main` once they merge. A textual dependency changes lines next to that PR's "
            "(or adds to a file it adds), which a merge cannot take apart; a code dependency is code this PR needs:",
            "",
        ]
        lines += [f"- `{name}` ({titles[name]}): {why}" for name, why in pr["depends_on"].items()]
    else:
        lines.append(f"None: it applies alone onto diffusers v{version}.")
    if pr.get("conflicts_with"):
        lines += [
            "",
            "It changes lines that these PRs change too. It is written against `main` without them; whichever merges "
            "second needs a rebase onto the other:",
            "",
        ]
        lines += [f"- `{name}` ({titles[name]}): {why}" for name, why in pr["conflicts_with"].items()]
    tests = [path for path in files if _is_test_file(path)]
    base = f"v{version}" + (f" with {', '.join(dependency_order(prs, pr['name'])[:-1])}" if pr["depends_on"] else "")
    lines += [
        "",
        "## Before and after, tests",
        "",
        f"Before: on {base}, the tests this PR adds or changes fail (each section above quotes the error users get). "
        "After: with this PR they pass.",
        "",
        *(f"- `{path}`" for path in tests),
        "",
        "## How it was verified",
        "",
        f"On a clean checkout of v{version} with this PR's dependencies: `git am` of these patches; "
        "`ruff check` and `ruff format --check` (ruff 0.9.10, upstream's `pyproject.toml`) on the changed files; "
        "`utils/check_copies.py`; the tests above on CPU (CUDA hidden) against the checkout's `src`, failing "
        "without the patches and passing with them.",
        "",
        "## Before submitting",
        "- [ ] Did you use an AI agent (Claude Code, Codex, Cursor, etc.) to help with this PR? (to be answered by "
        "whoever opens it)",
        "- [x] Did you read the [contributor guideline](https://huggingface.co/docs/diffusers/main/en/conceptual/"
        "contribution)?",
        (
            "- [x] Was this discussed/approved via a GitHub issue or the forum? "
            + ", ".join(f"#{number}" for number in [*fixes, *refs])
            if fixes or refs
            else "- [ ] Was this discussed/approved via a GitHub issue or the forum? Not yet: no upstream issue reports "
            + (
                f"it; open {issue['file']} (beside this file) first."
                if issue
                else "it; open one with the sections above first."
            )
        ),
        "- [ ] Did you make sure to update the documentation with your changes?",
        "- [x] Did you write any new necessary tests?",
        "",
        "## Who can review?",
        "",
        "Anyone in the community is free to review the PR once the tests have passed. The maintainers of its topic:",
        "",
        *(f"- {area}" for area in _review_areas(project, patches, files)),
    ]
    return "\n".join(lines) + "\n"


def _review_areas(project, patches, files):
    """The area of the PR's topic, as a one-item list: the first of `_TOPIC_REVIEWERS` whose topic marker a test of the
    PR carries, else the first of `_REVIEWERS` that a changed file is in."""
    marks = {
        mark
        for name in patches
        for mark in re.findall(r"^\+\s*@is_(\w+)$", (project.patches_dir / name).read_text(), re.M)
    }
    for topics, area in _TOPIC_REVIEWERS:
        if marks & set(topics):
            return [area]
    for prefixes, area in _REVIEWERS:
        if any(path.startswith(prefixes) for path in files):
            return [area]
    return []


def verify_prs(project, upstream_repo=None):
    """(PR name, report line, holds) for every PR on pristine upstream with its dependencies (see `verify_pr`), as
    each is verified: a PR's tests take a minute."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "prs"
        prs, metadata = check_prs(project, repo)
        for pr in prs:
            yield verify_pr(project, repo, prs, pr, list(metadata), upstream_repo)


def verify_pr(project, repo, prs, pr, entries, upstream_repo):
    """Apply `pr` after its dependencies, lint what it changes (upstream's ruff; with `upstream_repo` also its
    `utils/check_copies.py`), and run its tests on the dependencies' code (must fail) and on its own (must pass)."""
    problem = apply_pr(project, repo, prs, pr, entries)
    if problem:
        return pr["name"], f"{pr['name']}: does not apply: {problem}", False
    applies = f"applies after {', '.join(pr['depends_on'])}" if pr["depends_on"] else "applies alone"
    problems = lint_style(repo, since="dependencies")
    if upstream_repo is not None:
        problems += check_copies(repo, Path(upstream_repo), project.read_base()["version"])
    changed = git(repo, "diff", "--name-only", "dependencies", "HEAD").stdout.split()
    tests = [path for path in changed if _is_test_file(path)]
    markers = topic_markers((repo / "tests" / "testing_utils.py").read_text())
    problems += [problem for path in tests for problem in idiom_problems(path, (repo / path).read_text(), markers)]
    selected, collected = collected_by_markers(repo, tests, markers)
    if selected < collected:
        problems.append(
            f"a run selecting upstream's topic markers (`pytest -m <topic>`) collects {selected} of its {collected} tests"
        )
    after = run_pr_tests(repo, tests)
    # Its tests as the PR has them, on the code without it.
    git(repo, "restore", "--source=dependencies", "--worktree", "--", "src")
    before = run_pr_tests(repo, tests)
    flips = before.get("failed", 0) + before.get("error", 0) > 0 and after.get("passed", 0) > 0
    flips = flips and after.get("failed", 0) + after.get("error", 0) == 0
    lint = "lint ok" if not problems else "LINT FAILS"
    line = f"{pr['name']}: {applies} | {lint} | {selected} of {collected} tests marked | tests {_counts(before)} -> {_counts(after)}"
    if problems:
        line += "\n" + "\n".join(f"  {row}" for problem in problems for row in problem.splitlines())
    return pr["name"], line, flips and not problems


def collected_by_markers(repo, tests, markers):
    """(tests a run selecting any of `markers` collects, tests collected) of pytest on `tests` in `repo`."""
    _make_packages(repo, tests)
    result = run_isolated(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
         " or ".join(sorted(set(markers.values()))), *tests],
        repo, check=False, env={**_TEST_ENV, "PYTHONPATH": str(repo / "src")},
    )  # fmt: skip
    summary = (result.stdout.strip().splitlines() or [""])[-1]
    selected = re.search(r"(\d+)(?:/\d+)? tests? collected", summary)
    deselected = re.search(r"(\d+) deselected", summary)
    selected, deselected = (int(match.group(1)) if match else 0 for match in (selected, deselected))
    return selected, selected + deselected


def run_pr_tests(repo, tests):
    """{outcome: count} of pytest on `tests` in the upstream checkout `repo`, against its `src`, on CPU."""
    _make_packages(repo, tests)
    result = run_isolated(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        repo,
        check=False,
        env={**_TEST_ENV, "PYTHONPATH": str(repo / "src")},
    )
    summary = (result.stdout.strip().splitlines() or [""])[-1]
    return {
        outcome.rstrip("s"): int(count)
        for count, outcome in re.findall(r"(\d+) (passed|failed|errors?|skipped)", summary)
    }


def rewritten_lines(repo, entries):
    """(lines the series adds, {(earlier patch, later patch): lines}): the lines a patch adds that a later patch of the
    series removes or changes again, from `git blame` of each patch's removed lines, in `repo` (a scratch checkout
    with the series `entries` as commits). A final design adds each line once. Whitespace is ignored on both sides,
    as `git diff -w` and `git blame -w` do: a line a later patch only indents (into a `with` block) keeps its text."""
    commits = series_commits(repo)
    names = dict(zip(commits, entries))
    added, pairs = 0, Counter()
    for commit in commits:
        path = None
        for line in git(repo, "diff", "-U0", "-w", "--no-renames", f"{commit}^", commit).stdout.splitlines():
            if line.startswith("--- "):
                path = line.removeprefix("--- a/") if line.startswith("--- a/") else None
            elif line.startswith("+") and not line.startswith("+++ "):
                added += 1
            hunk = re.match(r"@@ -(\d+)(?:,(\d+))? ", line)
            if hunk and path and hunk.group(2) != "0":
                start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
                blame = git(repo, "blame", "-w", "--porcelain", "-L", f"{start},+{count}", f"{commit}^", "--", path)
                blame = blame.stdout
                for origin in re.findall(r"^([0-9a-f]{40}) \d+ \d+", blame, re.M):
                    if origin in names:
                        pairs[names[origin], names[commit]] += 1
    return added, pairs


def idiom_by_patch(project, repo, entries, local_only):
    """{forwardable patch: `idiom_problems` of the test files it adds or changes, as the series in `repo` leaves them}."""
    markers = topic_markers((repo / "tests" / "testing_utils.py").read_text())
    problems = {}
    for name in entries:
        tests = [path for path in patch_hunks((project.patches_dir / name).read_text()) if _is_test_file(path)]
        found = [
            problem
            for path in tests
            if (repo / path).exists()
            for problem in idiom_problems(path, (repo / path).read_text(), markers)
        ]
        if found and name not in local_only:
            problems[name] = found
    return problems


def topic_markers(testing_utils):
    """{decorator: pytest mark} of the topic markers of upstream's tests/testing_utils.py (`is_lora` marks `lora`),
    by which upstream's CI selects the tests of a job (`pytest -m lora`)."""
    markers = {}
    for node in ast.parse(testing_utils).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("is_") and node.args.args:
            returned = node.body[-1]
            mark = getattr(returned, "value", None)
            if isinstance(returned, ast.Return) and isinstance(mark, ast.Call):
                if ast.unparse(mark.func).startswith("pytest.mark."):
                    markers[node.name] = mark.func.attr
    return markers


def idiom_problems(path, source, markers):
    """Where the test file `path` (its text `source`) departs from upstream's test idiom: a `unittest.TestCase` class
    (upstream writes pytest classes, as in tests/hooks/test_group_offloading.py), a test that no topic marker of
    `markers` (`topic_markers`) selects, so that upstream's CI would never run it, and a mock of a private name (a
    test of how the code does it, not of what it does)."""
    problems = []
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and (_is_test_case(node) or node.name.startswith("Test")):
            if _is_test_case(node):
                problems.append(f"{path}: class {node.name} is a unittest.TestCase; upstream writes pytest classes")
            tests = [item for item in node.body if getattr(item, "name", "").startswith("test")]
            if not _marked(node, markers) and not all(_marked(test, markers) for test in tests):
                problems.append(f"{path}: class {node.name} carries no topic marker (`@is_lora`, `@is_gguf`, ...)")
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and not _marked(node, markers):
            problems.append(f"{path}: {node.name} carries no topic marker (`@is_lora`, `@is_gguf`, ...)")
    for node in ast.walk(tree):
        private = _mocked_private_name(node)
        if private:
            problems.append(f"{path}:{node.lineno}: mocks the private `{private}`")
    return problems


def _is_test_case(node):
    return any(ast.unparse(base) in ("unittest.TestCase", "TestCase") for base in node.bases)


def _marked(node, markers):
    names = {
        ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
        for decorator in node.decorator_list
    }
    return bool(names & ({*markers} | {f"pytest.mark.{mark}" for mark in markers.values()}))


def _mocked_private_name(node):
    """The private name `node` mocks, if it is `mock.patch.object(owner, "_name", ...)` or `mock.patch("a.b._name")`."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    function = ast.unparse(node.func)
    if function.endswith("patch.object") and len(node.args) > 1:
        target = node.args[1]
    elif function in ("patch", "mock.patch", "unittest.mock.patch"):
        target = node.args[0]
    else:
        return None
    if not (isinstance(target, ast.Constant) and isinstance(target.value, str)):
        return None
    name = target.value.rsplit(".", 1)[-1]
    return name if name.startswith("_") and not name.endswith("__") else None


def _make_packages(repo, tests):
    """Upstream's test directories are packages (`from ..testing_utils import ...`); the sdist has no `__init__.py`."""
    for path in tests:
        for package in Path(path).parents[:-1]:
            (repo / package / "__init__.py").touch()


def _counts(outcomes):
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())) or "nothing ran"
