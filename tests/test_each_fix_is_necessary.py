"""Each fix is necessary on its own: the patched side of a scenario, run with the scenario's own patch left out of the
series, is no longer right.

The series is replayed without that patch (git, 3-way merges); a later patch that no longer applies without it (its
code or its context) is left out too, and the test names those in its message and in `LEFT_OUT_TOGETHER`, so that a
dependency between patches is always written down. The replayed tree is vendored into a copy of the package put first
on the path, as the per-release checks do with another release, and the scenarios run in a fork of an interpreter that
imported the stack once (`scenario_runner`, tests/support/forked_scenarios.py).
"""

import pytest

from diffusers_patched.selftest.scenarios import REFUSED, RIGHT, SCENARIOS
from tests.conftest import REPO_ROOT
from tests.support.assertions import figures_off_the_margin
from tests.support.series_without import replay_without
from tools import patches, vendoring, wheels


PROJECT = patches.Project(REPO_ROOT)
PRIMARY = PROJECT.read_base()["version"]
SCENARIOS_OF_PATCH = {}
for _name, _scenario in SCENARIOS.items():
    if not _scenario.guard:
        SCENARIOS_OF_PATCH.setdefault(_scenario.patch, []).append(_name)

# patch -> the later patches that do not apply without it (they change its lines or lines next to them).
LEFT_OUT_TOGETHER = {
    "from-pretrained-materializes-missing-weights.patch": ["local-strict-load-default-from-environment.patch"],
    "fuse-lora-into-gguf-quantized-weights.patch": [
        "fuse-lora-into-offloaded-weights.patch",
        "fuse-lora-into-quanto-quantized-weights.patch",
        "unfuse-lora-restores-requantized-weights.patch",
        "refuse-to-fuse-lora-into-low-precision-weights.patch",
        "warn-when-requantizing-a-fused-lora-loses-its-change.patch",
        "unfuse-lora-from-offloaded-torchao-weights.patch",
        "local-fuse-torchao-loras-one-adapter-at-a-time.patch",
    ],
    "fuse-lora-into-offloaded-weights.patch": [
        "fuse-lora-into-quanto-quantized-weights.patch",
        "unfuse-lora-restores-requantized-weights.patch",
        "refuse-to-fuse-lora-into-low-precision-weights.patch",
        "warn-when-requantizing-a-fused-lora-loses-its-change.patch",
        "local-fuse-torchao-loras-one-adapter-at-a-time.patch",
    ],
    "fuse-lora-into-quanto-quantized-weights.patch": [
        "unfuse-lora-restores-requantized-weights.patch",
        "warn-when-requantizing-a-fused-lora-loses-its-change.patch",
        "local-fuse-torchao-loras-one-adapter-at-a-time.patch",
    ],
    "group-offload-onloads-modules-outside-blocks-called-directly.patch": [
        "group-offload-to-disk-keeps-weights-tied-across-blocks.patch",
        "group-offload-to-disk-survives-lora-loading.patch",
        "group-offload-onloads-block-modules-called-outside-their-block.patch",
        "group-offload-to-disk-writes-tensors-replaced-while-running.patch",
    ],
    "group-offload-to-disk-keeps-tied-weights.patch": [
        "group-offload-to-disk-keeps-weights-tied-across-blocks.patch",
        "group-offload-to-disk-writes-tensors-replaced-while-running.patch",
    ],
    "group-offload-to-disk-keeps-weights-tied-across-blocks.patch": [
        "group-offload-to-disk-writes-tensors-replaced-while-running.patch"
    ],
    "ltx2-single-file-map-ltx-2-3-keys.patch": ["ltx2-audio-vae-loads-from-a-single-file.patch"],
    "materialize-tensors-left-on-meta-in-from-single-file.patch": [
        "single-file-block-counts-come-from-the-checkpoint.patch",
        "local-strict-load-default-from-environment.patch",
    ],
    "offloading-loads-modules-that-read-child-weights.patch": [
        "group-offload-keeps-what-models-read-outside-forward.patch",
        "group-offload-to-disk-keeps-tied-weights.patch",
        "group-offload-to-disk-keeps-weights-tied-across-blocks.patch",
        "group-offload-to-disk-writes-tensors-replaced-while-running.patch",
    ],
    "refuse-to-save-bnb-4bit-statistics-repacked-on-cpu.patch": [
        "local-bnb-4bit-statistics-survive-offload-hooks.patch"
    ],
    "restore-the-accelerate-hooks-the-loaders-remove.patch": [
        "fuse-lora-into-offloaded-weights.patch",
        "fuse-lora-into-quanto-quantized-weights.patch",
        "textual-inversion-on-offloaded-text-encoders.patch",
        "unfuse-lora-restores-requantized-weights.patch",
        "refuse-to-fuse-lora-into-low-precision-weights.patch",
        "warn-when-requantizing-a-fused-lora-loses-its-change.patch",
        "load-ip-adapters-into-offloaded-and-quantized-unets.patch",
        "keep-the-hooks-registered-after-accelerate-hooks.patch",
        "local-fuse-torchao-loras-one-adapter-at-a-time.patch",
        "local-bnb-4bit-statistics-survive-offload-hooks.patch",
    ],
    "save-lora-adapters-of-quantized-models.patch": ["save-lora-adapters-of-offloaded-models.patch"],
    "save-offloaded-weights-not-meta-placeholders.patch": ["save-weights-group-offloaded-to-disk.patch"],
    "sequential-offload-keeps-what-ace-step-reads-outside-forward.patch": [
        "offloading-loads-modules-that-read-child-weights.patch",
        "group-offload-keeps-what-models-read-outside-forward.patch",
        "group-offload-to-disk-keeps-tied-weights.patch",
        "group-offload-to-disk-keeps-weights-tied-across-blocks.patch",
        "group-offload-to-disk-writes-tensors-replaced-while-running.patch",
    ],
}


@pytest.fixture(scope="module")
def primary(tmp_path_factory):
    """The series as written, whose commits hold the blobs the 3-way merges need."""
    repo = tmp_path_factory.mktemp("primary") / "repo"
    patches.scratch_checkout(PROJECT, repo)
    return repo


def site_without(patch, primary, directory):
    """The package sources (importable from `site`), their vendored tree pristine + the series less `patch`; returns
    (site, the patches left out)."""
    repo = directory / "repo"
    left_out = replay_without(PROJECT, [patch], primary, repo)
    names = [name for name in PROJECT.read_series() if name not in left_out]
    site = directory / "site"
    site.mkdir()
    wheels.build_tree(PROJECT, PRIMARY, site, vendor=vendoring.build_vendor(PROJECT, repo, names))
    return site, left_out


@pytest.mark.parametrize("patch", sorted(SCENARIOS_OF_PATCH))
def test_scenarios_are_not_right_without_their_patch(patch, primary, scenario_runner, tmp_path):
    site, left_out = site_without(patch, primary, tmp_path)
    assert left_out[1:] == LEFT_OUT_TOGETHER.get(patch, []), f"left out with {patch}: {left_out[1:]}"
    names = SCENARIOS_OF_PATCH[patch]
    outcomes = scenario_runner.run(names, patched=True, site=site)
    verdicts = {name: outcomes[name].verdict(SCENARIOS[name]) for name in names}
    assert {name: verdict for name, verdict in verdicts.items() if verdict[0] in (RIGHT, REFUSED)} == {}
    # Wrong numbers are at least MARGIN times the tolerance, or NaN: the tolerance cannot swallow them.
    assert figures_off_the_margin(outcomes) == {}
