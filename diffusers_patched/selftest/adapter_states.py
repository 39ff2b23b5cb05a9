"""Adapter operations on a tiny SD pipeline in each offload state, and compiled: docs/adapters.md's table.

Each (operation, state) is a scenario of this module's own registry, run on both sides by tests/test_adapter_states.py
and judged against the same operation on the un-offloaded pipeline of the same side: the outputs the operation reads
(the text encoder's and the unet's), then the pipeline's outputs after it, twice, so that a state that changes them
from one call to the next shows. The group states offload to disk: on a CPU, offloading to memory moves nothing (see
offload_modes.py).
"""

import sys

from .scenarios.adapters import (
    ADAPTER_OPERATIONS,
    ADAPTER_STATES,
    ADAPTER_SWAPS,
    REFUSALS,
    adapter_scenario,
    adapter_swaps_scenario,
)
from .scenarios.registry import _main


ADAPTER_STATE_SCENARIOS = {}


for _operation in ADAPTER_OPERATIONS:
    for _state in ADAPTER_STATES:
        adapter_scenario(
            f"{_operation} {_state}",
            _operation,
            _state,
            f"{_operation} on a tiny SD pipeline in the {_state} state on the CPU vs. in no such state",
            registry=ADAPTER_STATE_SCENARIOS,
        )

# Memory: the same pipeline in each state and in none, adapters of new names swapped in and out.
SWAPS_ROW = f"{ADAPTER_SWAPS} adapter swaps"
# The states whose adapter operations are all right, none refused (`REFUSALS`): each swap loads, fuses and deletes.
SWAP_STATES = ("plain", *(state for state in ADAPTER_STATES if all(state != refused for _, refused in REFUSALS)))
for _state in SWAP_STATES:
    adapter_swaps_scenario(
        f"{SWAPS_ROW} {_state}",
        _state,
        f"LoRAs of new names swapped in and out {ADAPTER_SWAPS} times on a tiny SD pipeline in the {_state} state on "
        "the CPU: the live tensors, the offload files and RSS come back to what they were, and so do the outputs",
        registry=ADAPTER_STATE_SCENARIOS,
    )


if __name__ == "__main__":
    _main(ADAPTER_STATE_SCENARIOS, *sys.argv[1:])
