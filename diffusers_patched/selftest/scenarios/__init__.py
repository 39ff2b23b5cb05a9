"""Known upstream failures, each as a scenario that builds tiny models locally and runs one user flow; one module per
topic, the registry and runner in registry.py.

`make demo` and the tests run every scenario twice in subprocesses: on upstream (`DIFFUSERS_PATCHED=0`) and
with diffusers-patched. A scenario returns a JSON-serializable dict of what it measured (max abs diffs, counts,
devices, ...), or raises the error a user would see; the demo renders the dict with the scenario's `text` template,
the tests assert on its values.
"""

from ..judges import FAILS, REFUSED, RIGHT, WRONG  # noqa: F401 (the verdicts, with the scenarios that give them)

# Importing the topics registers their scenarios, in this order (the demo's).
from . import adapters, device_map, from_pretrained, gguf, group_offload, lora, offload, single_file  # noqa: F401
from .registry import (  # noqa: F401
    SCENARIOS,
    Outcome,
    Scenario,
    read_outcomes,
    run_each_apart,
    run_scenarios,
    scenario,
)
