"""The GPU scenarios (diffusers_patched/selftest/gpu_scenarios.py), checked without a GPU: each names a patch of the series and is
asserted by a test under tests/gpu/."""

from diffusers_patched.selftest.gpu_scenarios import GPU_SCENARIOS
from tests.conftest import REPO_ROOT
from tools.patches import Project


def test_every_gpu_scenario_names_a_patch_of_the_series():
    series = Project(REPO_ROOT).read_series()
    assert {name: scenario.patch for name, scenario in GPU_SCENARIOS.items() if scenario.patch not in series} == {}


def test_every_gpu_scenario_is_asserted_under_tests_gpu():
    sources = "".join(path.read_text() for path in sorted((REPO_ROOT / "tests" / "gpu").glob("test_gpu_*.py")))
    # A scenario is named in full, or by its prefix followed by its formats (`...-as-wan21-{fmt}`).
    assert [
        name for name in GPU_SCENARIOS if name not in sources and name.rsplit("-", 1)[0] + "-{" not in sources
    ] == []


def test_every_gpu_scenario_has_a_judge():
    # `selftest --device cuda` and the GPU JSON give each flow's verdict with its figure.
    assert [name for name, scenario in GPU_SCENARIOS.items() if scenario.judge is None] == []
