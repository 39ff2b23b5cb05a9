"""Issue drafts: patches/drafts/*.md, each named by a PR in patches/prs.json (`drafts`).

A draft for huggingface/diffusers is a PR's reproduction: it quotes the output of the release (`Output:`) and with the
PR (`Output with this PR:`), and PR.md shows both; for a PR that no upstream issue reports, it is also the issue to
open first (ISSUE.md). A draft
for another library (bitsandbytes, accelerate, PEFT, ...) is the issue to open there, where part of the cause lies: its
reproduction needs only that library. `make export-patches` writes them beside PR.md (ISSUE.md, DRAFT-<name>.md) with
the versions of the libraries they name; tests/test_drafts.py runs each reproduction, so the quoted output stays what it
prints.
"""

import importlib.metadata
import os
import platform
import re
import subprocess
import sys

from . import ToolError


DRAFTS_DIR = "drafts"
_HEADER_RE = re.compile(r"\A# (?P<title>.+)\n\nRepository: (?P<repository>\S+/\S+)\nLibraries: (?P<libraries>.+)\n")
_REPRODUCTION_RE = re.compile(
    r"^### Reproduction\n\n```python\n(?P<code>.*?)```\n\nOutput:\n\n```\n(?P<output>.*?)```$"
    r"(?:\n\nOutput with this PR:\n\n```\n(?P<fixed_output>.*?)```$)?",
    re.M | re.S,
)
VERSIONS = "{versions}"
_ISSUE_REF_RE = re.compile(r"^(?:Fixes|Refs) #\d+$", re.M)
DIFFUSERS = "huggingface/diffusers"


def draft_names(project):
    return sorted(path.stem for path in (project.patches_dir / DRAFTS_DIR).glob("*.md"))


def read_draft(project, name):
    """The draft `name`: its title, repository, libraries, reproduction code, quoted outputs, text and export file."""
    path = project.patches_dir / DRAFTS_DIR / f"{name}.md"
    if not path.exists():
        raise ToolError(f"{path} does not exist")
    text = path.read_text()
    header, reproduction = _HEADER_RE.match(text), _REPRODUCTION_RE.search(text)
    if not header or not reproduction or VERSIONS not in text:
        raise ToolError(
            f"{path} needs a `# title`, `Repository: owner/name` and `Libraries: a, b` lines, a `{VERSIONS}` "
            "placeholder and a `### Reproduction` python block followed by `Output:` and the block it prints"
        )
    if (header["repository"] == DIFFUSERS) != (reproduction["fixed_output"] is not None):
        raise ToolError(
            f"{path}: a draft for {DIFFUSERS} quotes its output with the PR too (`Output with this PR:`), a draft for "
            "another library does not"
        )
    libraries = [library.strip() for library in header["libraries"].split(",")]
    # Its file beside PR.md: the diffusers issue to open first, or another library's.
    file = "ISSUE.md" if header["repository"] == DIFFUSERS else f"DRAFT-{name}.md"
    return {**header.groupdict(), **reproduction.groupdict(), "libraries": libraries, "text": text, "file": file}


def reports_issue(project, pr):
    """Whether an upstream issue reports the problem of `pr`: one of its patches says `Fixes #N` or `Refs #N`."""
    return any(_ISSUE_REF_RE.search((project.patches_dir / name).read_text()) for name in pr["patches"])


def lint_drafts(project, prs):
    """Problems of the drafts: each PR's drafts exist and are well formed, a PR names at most one issue for diffusers,
    each draft belongs to a PR, and a PR without a diffusers issue has the draft of one."""
    named = {name for pr in prs for name in pr.get("drafts", [])}
    problems, repositories = [], {}
    for name in sorted(named):
        try:
            repositories[name] = read_draft(project, name)["repository"]
        except ToolError as error:
            problems.append(str(error))
    problems += [
        f"patches/prs.json: PR {pr['name']} names more than one draft for {DIFFUSERS}: one issue to open first"
        for pr in prs
        if [repositories.get(name) for name in pr.get("drafts", [])].count(DIFFUSERS) > 1
    ]
    problems += [
        f"patches/{DRAFTS_DIR}/{name}.md is named by no PR of patches/prs.json (`drafts`)"
        for name in draft_names(project)
        if name not in named
    ]
    # A PR refers to the diffusers issue it fixes, or comes with the issue to open first.
    problems += [
        f"patches/prs.json: PR {pr['name']} names no diffusers issue (`Fixes #N` or `Refs #N` in its patches) and no "
        f"draft for {DIFFUSERS}: write the issue to open first in patches/{DRAFTS_DIR}/ and name it in `drafts`"
        for pr in prs
        if not reports_issue(project, pr)
        and DIFFUSERS not in (repositories.get(name) for name in pr.get("drafts", []))
    ]
    return problems


def render_draft(project, name):
    """The draft as it is opened: the versions of Python and of its libraries, as installed, in place of `{versions}`."""
    draft = read_draft(project, name)
    versions = [f"- Python {platform.python_version()}"]
    versions += [f"- {library} {importlib.metadata.version(library)}" for library in draft["libraries"]]
    return draft["text"].replace(VERSIONS, "\n".join(versions))


def reproduce(code, patched=False):
    """What a reproduction prints (`printed`) on this interpreter's stack, without a GPU. `patched`: with
    diffusers-patched active, else upstream's release."""
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
        "DIFFUSERS_PATCHED": "1" if patched else "0",
    }
    return printed(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600))


def printed(result):
    """What a draft quotes of a finished reproduction (a `subprocess.CompletedProcess`): its standard output, and if it
    raised, the exception's first line (the last line of its standard error that is not indented: a message may go on
    in indented lines)."""
    if result.returncode == 0:
        return result.stdout
    exception = [line for line in result.stderr.splitlines() if line and not line[0].isspace()][-1]
    return result.stdout + exception + "\n"
