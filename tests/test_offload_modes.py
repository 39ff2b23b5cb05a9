"""Every offload mode of the pipelines whose offload tests upstream skips, on both sides: docs/offloading.md's table is what
this measures (diffusers_patched/selftest/offload_modes.py)."""

from diffusers_patched.selftest.judges import RIGHT
from diffusers_patched.selftest.offload_modes import OFFLOAD_MODE_SCENARIOS
from diffusers_patched.selftest.tiny_pipelines import OFFLOAD_MODES, TINY_OFFLOAD_PIPELINES
from tests.conftest import REPO_ROOT
from tests.support.assertions import both_sides_table, figures_off_the_margin, without_figures


def test_every_offload_mode_is_right_patched_and_the_readme_table_is_measured(scenario_runner):
    names = list(OFFLOAD_MODE_SCENARIOS)
    upstream = scenario_runner.run(names, patched=False, module="diffusers_patched.selftest.offload_modes")
    patched = scenario_runner.run(names, patched=True, module="diffusers_patched.selftest.offload_modes")
    verdicts = {name: patched[name].verdict(OFFLOAD_MODE_SCENARIOS[name]) for name in names}
    assert {name: verdict for name, verdict in verdicts.items() if verdict[0] != RIGHT} == {}
    assert figures_off_the_margin(upstream) == figures_off_the_margin(patched) == {}
    table = both_sides_table(
        "pipeline (tiny)", TINY_OFFLOAD_PIPELINES, OFFLOAD_MODES, OFFLOAD_MODE_SCENARIOS, upstream, patched
    )
    assert without_figures(table) in without_figures((REPO_ROOT / "docs" / "offloading.md").read_text()), table
