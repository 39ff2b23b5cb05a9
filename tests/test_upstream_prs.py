"""The upstream PRs of patches/prs.json: the grouping rules, the bad groupings `make check-patches` refuses (naming
the PR), what `make export-patches` writes per PR, and the tests the patches carry in upstream's idiom. `make
verify-prs` (minutes of tests) is not run here."""

import importlib.metadata
import json
import os
import re
import shutil

import pytest

from tests.conftest import REPO_ROOT
from tools import ToolError, patches, upstream, upstream_prs
from tools.git import git


PROJECT = patches.Project(REPO_ROOT)
SERIES = PROJECT.read_series()
LOCAL_ONLY = [name for name in SERIES if "\nForwarded: not-needed\n" in (PROJECT.patches_dir / name).read_text()]
PRS = upstream_prs.read_prs(PROJECT)


def lint(prs):
    return "\n".join(upstream_prs.lint_prs(prs, SERIES, LOCAL_ONLY))


def pr_named(prs, name):
    return next(pr for pr in prs if pr["name"] == name)


@pytest.fixture
def prs():
    return json.loads(json.dumps(PRS))  # a copy to break


def test_the_committed_grouping_holds_every_forwardable_patch_once():
    assert lint(PRS) == ""
    held = [name for pr in PRS for name in pr["patches"]]
    assert sorted(held) == sorted(name for name in SERIES if name not in LOCAL_ONLY)
    assert LOCAL_ONLY  # the rule below is exercised on a real local-only patch


def test_a_forwardable_patch_in_no_pr(prs):
    pr = pr_named(prs, "single-file-missing-keys")
    dropped = pr["patches"].pop()
    assert f"{dropped} is forwardable but in no PR of patches/prs.json" in lint(prs)


def test_a_patch_in_two_prs(prs):
    pr_named(prs, "fuse-lora-gguf")["patches"].append("lora-keep-quantized-text-encoder-dtype.patch")
    assert (
        "PR fuse-lora-gguf holds lora-keep-quantized-text-encoder-dtype.patch, which PR "
        "lora-quantized-text-encoder-dtype holds too" in lint(prs)
    )


def test_a_local_only_patch_in_a_pr(prs):
    pr_named(prs, "single-file-missing-keys")["patches"].append(LOCAL_ONLY[0])
    assert f"PR single-file-missing-keys holds {LOCAL_ONLY[0]}, a local-only patch" in lint(prs)


def test_an_unknown_dependency(prs):
    pr_named(prs, "from-pretrained-missing-weights")["depends_on"]["no-such-pr"] = "code: a helper"
    assert "PR from-pretrained-missing-weights depends on no-such-pr, which is no PR" in lint(prs)


def test_a_dependency_without_its_kind(prs):
    pr_named(prs, "from-pretrained-missing-weights")["depends_on"]["single-file-missing-keys"] = "needs it"
    assert "PR from-pretrained-missing-weights: say why it depends on single-file-missing-keys" in lint(prs)


def test_a_dependency_cycle(prs):
    pr_named(prs, "single-file-missing-keys")["depends_on"]["from-pretrained-missing-weights"] = "code: a cycle"
    assert (
        "PR single-file-missing-keys depends on itself: single-file-missing-keys -> from-pretrained-missing-weights "
        "-> single-file-missing-keys" in lint(prs)
    )


def test_a_pr_without_its_patches_or_with_a_bad_name(prs):
    del pr_named(prs, "fuse-lora-gguf")["patches"]
    prs.append({**pr_named(prs, "sequential-offload-device"), "name": "Sequential Offload"})
    message = lint(prs)
    assert "PR fuse-lora-gguf needs a unique name" in message and "wrong or missing: patches" in message
    assert "PR Sequential Offload needs a unique name" in message


def test_dependencies_come_first_in_series_order(prs):
    assert upstream_prs.dependency_order(prs, "group-offload-vq-and-consistency-decoder-vaes") == [
        "sequential-offload-device",
        "offloading-weights-read-outside-forward",
        "group-offload-unmatched-modules-called-directly",
        "group-offload-vq-and-consistency-decoder-vaes",
    ]


def test_a_pr_that_no_longer_applies_without_an_undeclared_dependency(project, tmp_path):
    prs = json.loads((project.patches_dir / "prs.json").read_text())
    pr_named(prs, "ip-adapter-offloaded-quantized-unet")["depends_on"] = {}
    (project.patches_dir / "prs.json").write_text(json.dumps(prs))
    with pytest.raises(ToolError) as error:
        upstream_prs.check_prs(project, tmp_path / "prs")
    assert str(error.value).startswith(
        "PR ip-adapter-offloaded-quantized-unet: load-ip-adapters-into-offloaded-and-quantized-unets.patch does not "
        "`git am` onto pristine diffusers; declare the PR it needs in `depends_on`"
    )


def test_standalone_copies_are_of_the_series_patch_as_it_is_and_recorded(project):
    prs = json.loads((project.patches_dir / "prs.json").read_text())
    pr = pr_named(prs, "save-lora-adapter-offloaded")
    (name,) = pr["standalone"]
    assert upstream_prs.lint_standalone(project, prs) == []
    pr["standalone"][name] = "0" * 64
    (project.standalone_dir / "orphan.patch").write_text("a copy of no PR's patch\n")
    assert upstream_prs.lint_standalone(project, prs) == [
        f"patches/standalone/{name} was written from an earlier state of the series' {name}, which changed the lines "
        "it adds or removes since; run `make edit PR=save-lora-adapter-offloaded`, resolve the conflicts, then "
        "`make refresh PR=save-lora-adapter-offloaded`",
        "patches/standalone/orphan.patch is the standalone copy of no PR's patch in patches/prs.json; delete it",
    ]


def test_a_pr_without_its_standalone_copy_and_one_with_a_copy_it_does_not_need(project, tmp_path):
    """The copy is what lets a PR apply without the PRs it conflicts with; a copy the series' patch would give is
    refused."""
    prs = json.loads((project.patches_dir / "prs.json").read_text())
    offloaded = pr_named(prs, "save-lora-adapter-offloaded")
    for name in offloaded.pop("standalone"):
        (project.standalone_dir / name).unlink()
    device = pr_named(prs, "sequential-offload-device")
    (name,) = device["patches"]
    shutil.copy(project.patches_dir / name, project.standalone_dir / name)
    device["standalone"] = {name: patches.changed_lines_digest((project.patches_dir / name).read_text())}
    (project.patches_dir / "prs.json").write_text(json.dumps(prs))
    with pytest.raises(ToolError) as error:
        upstream_prs.check_prs(project, tmp_path / "prs")
    message = str(error.value)
    assert (
        "PR save-lora-adapter-offloaded: save-lora-adapters-of-offloaded-models.patch does not `git am` onto pristine "
        "diffusers after the PRs it depends on" in message
    )
    assert f"patches/standalone/{name} is unnecessary: the series' {name} applies after the PRs" in message


@pytest.fixture
def maintainer(monkeypatch):
    """The identity git has for whoever runs the export, as a maintainer's configuration would give it."""
    monkeypatch.setenv("GIT_AUTHOR_NAME", "A Maintainer")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "maintainer@example.com")
    return "A Maintainer <maintainer@example.com>"


@pytest.fixture
def no_identity(monkeypatch):
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def test_export_refuses_without_a_configured_identity_before_writing_anything(project, tmp_path, no_identity):
    with pytest.raises(ToolError, match=r"set `git config user.name` and `git config user.email`"):
        upstream_prs.export_prs(project, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_bad_grouping_before_writing_anything(project, tmp_path, maintainer):
    (project.patches_dir / "prs.json").write_text(json.dumps([pr for pr in PRS if pr["name"] != "fuse-lora-gguf"]))
    with pytest.raises(ToolError, match="fuse-lora-into-gguf-quantized-weights.patch is forwardable"):
        upstream_prs.export_prs(project, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def snapshot(directory):
    return {
        str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()
    }


def test_export_writes_prs_json_and_one_folder_per_pr_byte_identical_on_reexport(project, tmp_path, maintainer):
    out = tmp_path / "out"
    (out / "stale-pr").mkdir(parents=True)
    (out / "stale-pr" / "PR.md").write_text("a PR of an earlier grouping\n")
    upstream_prs.export_prs(project, out)
    written = snapshot(out)
    assert "stale-pr/PR.md" not in written
    summary = json.loads(written["prs.json"])
    assert [pr["name"] for pr in summary] == [pr["name"] for pr in PRS]
    for pr in summary:
        assert sorted(pr) == ["depends_on", "fixes", "name", "patches", "title"]
        assert pr["patches"] == sorted(pr["patches"], key=SERIES.index)
        folder = sorted(path for path in written if path.startswith(pr["name"] + "/") and path.endswith(".patch"))
        assert folder == [f"{pr['name']}/{n:04d}-{name}" for n, name in enumerate(pr["patches"], 1)]
        for number, name in enumerate(pr["patches"], 1):
            # The series' patch by the maintainer, its DEP-3 trailer block (the series' records) left out, and its
            # diff as it applies after the PR's dependencies: the same changes, in the context of the PR's base; or,
            # where it conflicts without other PRs, its standalone copy's changes.
            submitted = written[f"{pr['name']}/{number:04d}-{name}"].decode()
            standalone = name in pr_named(PRS, pr["name"]).get("standalone", {})
            series_patch = (REPO_ROOT / "patches" / ("standalone" if standalone else "") / name).read_text()
            message, diff = series_patch.split("\ndiff --git ", 1)
            body, trailers = message.rstrip("\n").rsplit("\n\n", 1)
            assert "Forwarded: " in trailers
            submitted_message, submitted_diff = submitted.split("\ndiff --git ", 1)
            assert submitted_message == re.sub(r"(?m)^From: .*(\n .*)?$", f"From: {maintainer}", body, count=1) + "\n"
            assert changed_lines(submitted_diff) == changed_lines(diff)
    assert pr_named(summary, "pipeline-bnb-components-run-on-cpu")["fixes"] == [12719]
    ip_adapter = pr_named(summary, "ip-adapter-offloaded-quantized-unet")
    assert ip_adapter["depends_on"] == ["restore-accelerate-hooks"]
    ip_adapter_md = written["ip-adapter-offloaded-quantized-unet/PR.md"].decode()
    assert "- `restore-accelerate-hooks` (Put back the accelerate hooks the loaders remove" in ip_adapter_md
    assert "): code: it takes the hooks off and puts them back with that PR's" in ip_adapter_md
    pr_md = written["pipeline-bnb-components-run-on-cpu/PR.md"].decode()
    for expected in (
        "# What does this PR do?\n\nFixes #12719\n",
        "None: it applies alone onto diffusers v",
        "- `pipeline-device-map-quantized-sizes` (Size pipeline components as they will be loaded",
        "- `tests/pipelines/test_pipeline_device_map_bnb_cpu_placement.py`",
        "## Who can review?",
        # Its tests carry `@is_bitsandbytes`: a quantization PR, though it changes pipelines' loading code.
        "- Quantization: @sayakpaul @DN6",
    ):
        assert expected in pr_md
    assert "the other half of the same fix" in written["fuse-lora-gguf/PR.md"].decode()
    # A cause in another library: the issue to open there beside PR.md, with the versions it was reproduced on.
    draft = written["sequential-offload-device/DRAFT-accelerate-cpu-offload-onto-cpu-0.md"].decode()
    assert "Repository: huggingface/accelerate\n" in draft
    assert f"- accelerate {importlib.metadata.version('accelerate')}\n" in draft
    assert "`DRAFT-accelerate-cpu-offload-onto-cpu-0.md`" in written["sequential-offload-device/PR.md"].decode()
    # No upstream issue: the issue to open first, and its reproduction's outputs before and after in PR.md.
    assert "Repository: huggingface/diffusers\n" in written["save-offloaded-weights/ISSUE.md"].decode()
    save_pr_md = written["save-offloaded-weights/PR.md"].decode()
    assert "## Reproduction\n\n```python\nimport tempfile\n" in save_pr_md
    assert "NotImplementedError: Cannot copy out of meta tensor; no data!" in save_pr_md
    assert "With this PR:\n\n```\nthe reloaded model computes the saved one's outputs: True\n```" in save_pr_md
    assert "open ISSUE.md (beside this file) first" in save_pr_md
    # A PR that changes lines another PR changes too is written against the release without it, and says so.
    offloaded_pr_md = written["save-lora-adapter-offloaded/PR.md"].decode()
    assert (
        "whichever merges second needs a rebase onto the other:\n\n- `save-lora-adapter-quantized` ("
        in offloaded_pr_md
    )
    assert "save-lora-adapter-quantized" not in pr_named(summary, "save-lora-adapter-offloaded")["depends_on"]
    upstream_prs.export_prs(project, out)
    assert snapshot(out) == written
    # In the series, restore-accelerate-hooks' patch holds lora-quantized-text-encoder-dtype's lines as context; its
    # PR depends on nothing and is exported as it applies onto the pristine release, which a plain `git am` takes.
    assert pr_named(summary, "restore-accelerate-hooks")["depends_on"] == []
    series_patch = (REPO_ROOT / "patches" / "restore-the-accelerate-hooks-the-loaders-remove.patch").read_text()
    submitted = written["restore-accelerate-hooks/0001-restore-the-accelerate-hooks-the-loaders-remove.patch"]
    assert submitted.decode().split("\ndiff --git ", 1)[1] != series_patch.split("\ndiff --git ", 1)[1]
    repo = tmp_path / "pristine"
    patches.scratch_checkout(project, repo)
    git(repo, "reset", "--quiet", "--hard", "pristine")
    git(
        repo,
        "am",
        *patches.AM_FLAGS,
        str(out / "restore-accelerate-hooks" / "0001-restore-the-accelerate-hooks-the-loaders-remove.patch"),
    )


def changed_lines(diff):
    """The lines a diff removes and adds, by file: what it changes, whatever its context and line numbers."""
    return [line for line in ("diff --git " + diff).splitlines() if re.match(r"diff --git |[-+](?!--|\+\+)", line)]


def test_the_tests_every_forwardable_patch_carries_are_in_upstreams_idiom(tmp_path):
    """Pytest classes with a topic marker of tests/testing_utils.py and no mock of a private name
    (`upstream_prs.idiom_problems`; `make verify-prs` says what a patch lacks)."""
    repo = tmp_path / "series"
    entries = patches.scratch_checkout(PROJECT, repo)
    assert upstream_prs.idiom_by_patch(PROJECT, repo, entries, LOCAL_ONLY) == {}


def test_idiom_problems_name_the_class_the_missing_marker_and_the_private_mock():
    markers = {"is_lora": "lora", "is_gguf": "gguf"}
    source = """import unittest
from unittest import mock

import pytest

from ..testing_utils import is_gguf, is_lora


class OldStyleTests(unittest.TestCase):
    def test_a(self):
        with mock.patch.object(pipeline_utils, "_get_final_device_map", return_value={}):
            pass


@is_lora
class TestMarked:
    def test_b(self):
        mock.patch("diffusers.loaders.peft.PeftAdapterMixin.set_adapters")


class TestMarkedPerTest:
    @pytest.mark.gguf
    def test_c(self):
        pass


def test_unmarked():
    pass
"""
    assert upstream_prs.idiom_problems("tests/test_x.py", source, markers) == [
        "tests/test_x.py: class OldStyleTests is a unittest.TestCase; upstream writes pytest classes",
        "tests/test_x.py: class OldStyleTests carries no topic marker (`@is_lora`, `@is_gguf`, ...)",
        "tests/test_x.py: test_unmarked carries no topic marker (`@is_lora`, `@is_gguf`, ...)",
        "tests/test_x.py:11: mocks the private `_get_final_device_map`",
    ]


def test_topic_markers_are_read_from_upstreams_testing_utils():
    base = PROJECT.read_base()
    testing_utils = upstream.pristine_repo(base["version"], base["sdist_sha256"]) / "tests" / "testing_utils.py"
    markers = upstream_prs.topic_markers(testing_utils.read_text())
    assert {
        "is_lora": "lora",
        "is_group_offload": "group_offload",
        "is_bitsandbytes": "bitsandbytes",
    }.items() <= markers.items()
    assert "is_flaky" not in markers


def test_rewritten_lines_are_those_a_later_patch_changes_of_an_earlier_ones(tmp_path):
    repo = tmp_path / "series"
    repo.mkdir()
    git(repo, "init", "--quiet")

    def commit(text, message):
        (repo / "module.py").write_text(text)
        git(repo, "add", "module.py")
        git(repo, "commit", "--quiet", "-m", message)

    commit("upstream = 1\nkept = 2\n", "pristine")
    git(repo, "tag", "pristine")
    commit("upstream = 1\nkept = 2\nfirst = 3\nsecond = 4\n", "first patch")
    # Changes one line of the first patch and one of upstream's, indents another of the first patch's, adds one.
    commit("upstream = 10\nkept = 2\n    first = 3\nsecond = 40\nthird = 5\n", "second patch")

    added, pairs = upstream_prs.rewritten_lines(repo, ["first.patch", "second.patch"])

    assert pairs == {("first.patch", "second.patch"): 1}
    assert added == 2 + 3
