"""The bitsandbytes scenarios on a CPU without AVX512-BF16, whatever this one has: bitsandbytes then keeps 4-bit weights
as stored and computes in float32, where on CPUs with it it repacks them on the first forward pass and computes in
bfloat16. The verdicts must be the same (README, "What the suite assumes of the machine")."""

import pytest

from diffusers_patched.selftest.scenarios import SCENARIOS, run_scenarios
from tests.conftest import REPO_ROOT, run_python
from tests.support.assertions import figures_off_the_margin


BNB_SCENARIOS = [name for name in SCENARIOS if "bnb" in name or name == "save-offloaded-pipeline"]


def verdicts(outcomes):
    return {name: outcomes[name].verdict(SCENARIOS[name])[0] for name in BNB_SCENARIOS}


def run_without_avx512bf16(patched):
    # The repository first on the path, for tests.support.without_avx512bf16.
    return run_scenarios(BNB_SCENARIOS, patched, module="tests.support.without_avx512bf16", site=REPO_ROOT)


def test_bitsandbytes_is_told_there_is_no_avx512bf16():
    result = run_python(
        "import tests.support.without_avx512bf16\nimport bitsandbytes as bnb\n"
        "print(bnb.nn.Linear4bit(64, 64).support_avx512bf16_for_cpu)",
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_bnb_verdicts_without_avx512bf16(patched_outcomes):
    outcomes = run_without_avx512bf16(patched=True)
    assert verdicts(outcomes) == verdicts(patched_outcomes)
    assert figures_off_the_margin(outcomes) == {}


@pytest.mark.upstream
def test_bnb_verdicts_without_avx512bf16_upstream(upstream_outcomes):
    outcomes = run_without_avx512bf16(patched=False)
    assert verdicts(outcomes) == verdicts(upstream_outcomes)
    assert figures_off_the_margin(outcomes) == {}
