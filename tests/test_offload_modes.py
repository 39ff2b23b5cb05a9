"""Every offload mode of the pipelines whose offload tests upstream skips, on both sides: docs/offloading.md's table is what
this measures (diffusers_patched/selftest/offload_modes.py)."""

import re

from diffusers_patched.selftest.judges import FAILS, RIGHT
from diffusers_patched.selftest.offload_modes import OFFLOAD_MODE_SCENARIOS
from diffusers_patched.selftest.tiny_pipelines import OFFLOAD_MODES, TINY_OFFLOAD_PIPELINES
from tests.conftest import REPO_ROOT
from tests.support.assertions import figures_off_the_margin


def verdict_cell(outcome, name):
    verdict, figure = outcome.verdict(OFFLOAD_MODE_SCENARIOS[name])
    if verdict == FAILS:
        # The error's type and its first words: enough to tell the failures apart in a table.
        return f"{verdict}: {' '.join(figure.split()[:4])} ..."
    return f"{verdict}: {figure}"


def without_figures(table):
    """The table with its max abs diffs left out: they are float32 rounding, which differs from one machine to the next
    (the doc's are those of the machine it was measured on); the verdicts and the tolerance do not."""
    return re.sub(r"max abs diff \S+", "max abs diff ...", table)


def offload_table(upstream, patched):
    rows = [
        "| pipeline (tiny) | " + " | ".join(OFFLOAD_MODES) + " |",
        "|---|" + "---|" * len(OFFLOAD_MODES),
    ]
    for pipeline in TINY_OFFLOAD_PIPELINES:
        cells = []
        for mode in OFFLOAD_MODES:
            name = f"{pipeline} {mode}"
            cells.append(
                f"upstream {verdict_cell(upstream[name], name)}<br>patched {verdict_cell(patched[name], name)}"
            )
        rows.append(f"| {pipeline} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def test_every_offload_mode_is_right_patched_and_the_readme_table_is_measured(scenario_runner):
    names = list(OFFLOAD_MODE_SCENARIOS)
    upstream = scenario_runner.run(names, patched=False, module="diffusers_patched.selftest.offload_modes")
    patched = scenario_runner.run(names, patched=True, module="diffusers_patched.selftest.offload_modes")
    verdicts = {name: patched[name].verdict(OFFLOAD_MODE_SCENARIOS[name]) for name in names}
    assert {name: verdict for name, verdict in verdicts.items() if verdict[0] != RIGHT} == {}
    assert figures_off_the_margin(upstream) == figures_off_the_margin(patched) == {}
    table = offload_table(upstream, patched)
    assert without_figures(table) in without_figures((REPO_ROOT / "docs" / "offloading.md").read_text()), table
