"""Issue drafts for the library where a bug's cause lies (bitsandbytes, accelerate, PEFT, ...): patches/drafts/*.md.

A PR names its drafts in patches/prs.json (`drafts`); `make export-patches` writes each into the PR's folder with the
versions of the libraries it names, and PR.md points to it. A draft's reproduction needs only its libraries and quotes
its output on the verified stack; tests/test_drafts.py runs it, so the quoted output stays what it prints.
"""

import importlib.metadata
import platform
import re

from . import ToolError


DRAFTS_DIR = "drafts"
_HEADER_RE = re.compile(r"\A# (?P<title>.+)\n\nRepository: (?P<repository>\S+/\S+)\nLibraries: (?P<libraries>.+)\n")
_REPRODUCTION_RE = re.compile(
    r"^### Reproduction\n\n```python\n(?P<code>.*?)```\n\nOutput:\n\n```\n(?P<output>.*?)```$", re.M | re.S
)
VERSIONS = "{versions}"


def draft_names(project):
    return sorted(path.stem for path in (project.patches_dir / DRAFTS_DIR).glob("*.md"))


def read_draft(project, name):
    """The draft `name`: its title, repository, libraries, reproduction code, quoted output and text."""
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
    libraries = [library.strip() for library in header["libraries"].split(",")]
    return {**header.groupdict(), **reproduction.groupdict(), "libraries": libraries, "text": text}


def lint_drafts(project, prs):
    """Problems of the drafts: each PR's drafts exist and are well formed, and each draft belongs to a PR."""
    named = {name for pr in prs for name in pr.get("drafts", [])}
    problems = []
    for name in sorted(named):
        try:
            read_draft(project, name)
        except ToolError as error:
            problems.append(str(error))
    problems += [
        f"patches/{DRAFTS_DIR}/{name}.md is named by no PR of patches/prs.json (`drafts`)"
        for name in draft_names(project)
        if name not in named
    ]
    return problems


def render_draft(project, name):
    """The draft as it is opened: the versions of Python and of its libraries, as installed, in place of `{versions}`."""
    draft = read_draft(project, name)
    versions = [f"- Python {platform.python_version()}"]
    versions += [f"- {library} {importlib.metadata.version(library)}" for library in draft["libraries"]]
    return draft["text"].replace(VERSIONS, "\n".join(versions))
