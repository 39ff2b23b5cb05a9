"""Every adapter operation on a tiny SD pipeline in every offload state, compiled, layerwise-cast, quanto-, torchao-
and SDNQ-quantized, on both sides, and adapters swapped in and out in each state until the memory in use must come back:
docs/adapters.md's tables are what this measures (diffusers_patched/selftest/adapter_states.py)."""

from diffusers_patched.selftest.adapter_states import (
    ADAPTER_OPERATIONS,
    ADAPTER_STATE_SCENARIOS,
    ADAPTER_STATES,
    SWAP_STATES,
    SWAPS_ROW,
)
from diffusers_patched.selftest.judges import RIGHT, holds
from tests.conftest import REPO_ROOT
from tests.support.assertions import both_sides_table, figures_off_the_margin, without_figures


def test_every_adapter_operation_in_every_offload_state_and_the_table_is_measured(scenario_runner):
    names = list(ADAPTER_STATE_SCENARIOS)
    module = "diffusers_patched.selftest.adapter_states"
    upstream = scenario_runner.run(names, patched=False, module=module)
    patched = scenario_runner.run(names, patched=True, module=module)
    verdicts = {name: patched[name].verdict(ADAPTER_STATE_SCENARIOS[name]) for name in names}
    assert {name: verdict for name, verdict in verdicts.items() if not holds(verdict[0])} == {}
    assert figures_off_the_margin(upstream) == figures_off_the_margin(patched) == {}
    cells = [f"{operation} {state}" for operation in ADAPTER_OPERATIONS for state in ADAPTER_STATES]
    upstream_right = sum(upstream[name].verdict(ADAPTER_STATE_SCENARIOS[name])[0] == RIGHT for name in cells)
    summary = f"Upstream gets {upstream_right} of the {len(cells)} cells right"
    tables = [
        both_sides_table("operation", ADAPTER_OPERATIONS, ADAPTER_STATES, ADAPTER_STATE_SCENARIOS, upstream, patched),
        both_sides_table("memory", [SWAPS_ROW], SWAP_STATES, ADAPTER_STATE_SCENARIOS, upstream, patched),
    ]
    doc = (REPO_ROOT / "docs" / "adapters.md").read_text()
    assert summary in doc, summary
    for table in tables:
        assert without_figures(table) in without_figures(doc), table
