"""The issue drafts (patches/drafts/, tools/drafts.py) reproduce as written: each reproduction, run on the verified
stack with no GPU, prints the output its draft quotes; a diffusers draft's, on upstream's release and with the patches."""

import pytest

from tests.conftest import REPO_ROOT
from tools import drafts, patches, upstream_prs


PROJECT = patches.Project(REPO_ROOT)


def test_every_draft_belongs_to_a_pr_and_is_well_formed():
    assert drafts.lint_drafts(PROJECT, upstream_prs.read_prs(PROJECT)) == []


def run_reproduction(code, patched, scenario_runner):
    """What `drafts.reproduce` prints, in a fork of an interpreter that imported the stack once; a reproduction that
    sets the environment before its imports (a Hub cache) needs an interpreter that has imported nothing."""
    if "os.environ[" in code:
        return drafts.reproduce(code, patched=patched)
    return drafts.printed(scenario_runner.python(code, patched=patched))


@pytest.mark.parametrize("name", drafts.draft_names(PROJECT))
def test_draft_reproduces_as_written(name, scenario_runner):
    draft = drafts.read_draft(PROJECT, name)
    output = run_reproduction(draft["code"], False, scenario_runner)
    print(f"{name}: prints\n{output}")
    assert output == draft["output"]
    if draft["fixed_output"] is not None:
        fixed_output = run_reproduction(draft["code"], True, scenario_runner)
        print(f"with the patches:\n{fixed_output}")
        assert fixed_output == draft["fixed_output"]


def test_a_draft_no_pr_names_is_reported(project):
    (project.patches_dir / drafts.DRAFTS_DIR / "orphan.md").write_text("# An orphan\n")
    assert drafts.lint_drafts(project, upstream_prs.read_prs(project)) == [
        "patches/drafts/orphan.md is named by no PR of patches/prs.json (`drafts`)"
    ]


def test_a_pr_without_an_upstream_issue_nor_its_draft_is_reported(project):
    prs = upstream_prs.read_prs(project)
    pr = next(pr for pr in prs if pr["name"] == "single-file-t5-eval-mode")
    pr["drafts"] = []
    (project.patches_dir / drafts.DRAFTS_DIR / "diffusers-single-file-t5-text-encoder-in-training-mode.md").unlink()
    assert drafts.lint_drafts(project, prs) == [
        "patches/prs.json: PR single-file-t5-eval-mode names no diffusers issue (`Fixes #N` or `Refs #N` in its "
        "patches) and no draft for huggingface/diffusers: write the issue to open first in patches/drafts/ and name it "
        "in `drafts`"
    ]


def test_a_reproduction_run_in_a_fresh_interpreter_prints_what_its_draft_quotes():
    draft = drafts.read_draft(PROJECT, "diffusers-save-pretrained-of-an-offloaded-model")
    assert drafts.reproduce(draft["code"]) == draft["output"]


def test_a_diffusers_draft_without_the_output_with_the_pr_is_refused(project):
    path = project.patches_dir / drafts.DRAFTS_DIR / "diffusers-save-pretrained-of-an-offloaded-model.md"
    path.write_text(path.read_text().split("\nOutput with this PR:\n")[0].rstrip("\n") + "\n")
    with pytest.raises(drafts.ToolError, match="quotes its output with the PR too"):
        drafts.read_draft(project, path.stem)
