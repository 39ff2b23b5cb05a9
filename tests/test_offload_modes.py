"""Every offload mode of the pipelines whose offload tests upstream skips, on both sides: the README's table is what
this measures (diffusers_patched/selftest/offload_modes.py)."""

from diffusers_patched.selftest.offload_modes import OFFLOAD_MODE_SCENARIOS
from diffusers_patched.selftest.scenarios import RIGHT, run_scenarios
from diffusers_patched.selftest.tiny_pipelines import OFFLOAD_MODES, TINY_OFFLOAD_PIPELINES
from tests.conftest import REPO_ROOT


def verdict_cell(outcome, name):
    verdict, figure = outcome.verdict(OFFLOAD_MODE_SCENARIOS[name])
    if verdict == RIGHT:
        return "right"
    # The error's type and its first words: enough to tell the failures apart in a table.
    return f"{verdict}: {' '.join(figure.split()[:4])} ..."


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


def test_every_offload_mode_is_right_patched_and_the_readme_table_is_measured():
    names = list(OFFLOAD_MODE_SCENARIOS)
    upstream = run_scenarios(names, patched=False, module="diffusers_patched.selftest.offload_modes")
    patched = run_scenarios(names, patched=True, module="diffusers_patched.selftest.offload_modes")
    assert {name: verdict_cell(patched[name], name) for name in names} == {name: "right" for name in names}
    table = offload_table(upstream, patched)
    assert table in (REPO_ROOT / "README.md").read_text(), table
