"""The pipelines whose offload tests upstream skips, in every offload mode: the README's pipeline x mode table.

Each (pipeline, mode) is a scenario of this module's own registry, run on both sides by tests/test_offload_modes.py;
scenarios/group_offload.py and scenarios/offload.py have the demo's rows of the same pipelines (the modes upstream fails in).
"""

import sys

from .judges import close
from .scenarios.offload import offload_run
from .scenarios.registry import _main, scenario
from .tiny_pipelines import OFFLOAD_MODES, TINY_OFFLOAD_PIPELINES


OFFLOAD_MODE_SCENARIOS = {}


for _pipeline in TINY_OFFLOAD_PIPELINES:
    for _mode in OFFLOAD_MODES:
        scenario(
            f"{_pipeline} {_mode}",
            patch=None,
            summary=f"{_pipeline} (tiny) offloaded in {_mode} mode on the CPU vs. no offload",
            text="max abs diff to the un-offloaded output {diff}",
            judge=lambda result: close([result["diff"]], what="max abs diff"),
            registry=OFFLOAD_MODE_SCENARIOS,
        )(offload_run(_pipeline, _mode))


if __name__ == "__main__":
    _main(OFFLOAD_MODE_SCENARIOS, *sys.argv[1:])
