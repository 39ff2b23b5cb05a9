"""`python -m diffusers_patched selftest`'s refusals: nothing to test is not a pass. Its flows themselves run in
tests/test_gpu_check.py (an installed wheel in a fresh virtualenv) and, as scenarios, in the demo tests."""

import os
import subprocess
import sys

import pytest
import torch


def selftest(*args, patched=True):
    env_switch = {"DIFFUSERS_PATCHED": "1" if patched else "0"}
    return subprocess.run(
        [sys.executable, "-m", "diffusers_patched", "selftest", *args],
        env={**os.environ, **env_switch},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_refuses_with_the_patches_off():
    result = selftest("--device", "cpu", patched=False)
    assert result.returncode == 2, result
    assert "the patches are not in effect (inactive: switched off by DIFFUSERS_PATCHED=0)" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the refusal on a machine without CUDA")
def test_refuses_cuda_without_a_gpu():
    result = selftest("--device", "cuda")
    assert result.returncode == 2, result
    assert "--device cuda, but torch" in result.stderr and "sees no CUDA device" in result.stderr


def test_status_names_it():
    status = subprocess.run(
        [sys.executable, "-m", "diffusers_patched", "status"], capture_output=True, text=True, check=True
    )
    assert "`python -m diffusers_patched selftest`" in status.stdout


def test_a_flow_its_release_expects_otherwise_is_not_covered(monkeypatch):
    """A build for a release whose checks expect a scenario to end otherwise (patches/releases.json `scenarios`, in
    the build's manifest) reports that flow as not covered, with the reason, instead of failing the image."""
    from diffusers_patched import _vendor
    from diffusers_patched.selftest import command
    from tests.conftest import REPO_ROOT
    from tools import vendoring
    from tools.patches import Project

    record = Project(REPO_ROOT).release_record("0.40.0")
    manifest = vendoring.render_manifest(record, {}, [], [], 2)
    expected = {}
    exec(manifest, expected)
    reason = expected["SCENARIOS_EXPECTED_OTHERWISE"]["group-offload-hunyuan-dit"]["patched"]
    assert "cannot run without an accelerator" in reason

    monkeypatch.setattr(_vendor, "SCENARIOS_EXPECTED_OTHERWISE", expected["SCENARIOS_EXPECTED_OTHERWISE"])
    (flow,) = [flow for flow in command.CPU_FLOWS if flow.scenario == "group-offload-hunyuan-dit"]
    assert reason in command.uncovered(flow)
    monkeypatch.undo()
    # The primary's build covers every flow.
    assert [flow.scenario for flow in command.CPU_FLOWS + command.CUDA_FLOWS if command.uncovered(flow)] == []


def test_a_flow_whose_backend_is_not_installed_is_not_covered():
    from diffusers_patched.selftest import command

    flow = command.Flow("planning", "quanto-torchao-gguf-planned-at-loaded-size", "cpu", requires=(("no_such", "x"),))
    assert command.uncovered(flow) == 'needs `pip install "diffusers-patched[x]"`'
