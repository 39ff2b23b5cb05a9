"""The issue drafts for other libraries (patches/drafts/, tools/drafts.py) reproduce as written: each reproduction,
run on the verified stack with no GPU, prints exactly the output its draft quotes."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tools import drafts, patches, upstream_prs


PROJECT = patches.Project(REPO_ROOT)


def test_every_draft_belongs_to_a_pr_and_is_well_formed():
    assert drafts.lint_drafts(PROJECT, upstream_prs.read_prs(PROJECT)) == []


@pytest.mark.parametrize("name", drafts.draft_names(PROJECT))
def test_draft_reproduces_as_written(name):
    draft = drafts.read_draft(PROJECT, name)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(
        [sys.executable, "-c", draft["code"]], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"{name}: prints\n{result.stdout}")
    assert result.stdout == draft["output"]


def test_a_draft_no_pr_names_is_reported(project):
    (project.patches_dir / drafts.DRAFTS_DIR / "orphan.md").write_text("# An orphan\n")
    assert drafts.lint_drafts(project, upstream_prs.read_prs(project)) == [
        "patches/drafts/orphan.md is named by no PR of patches/prs.json (`drafts`)"
    ]
