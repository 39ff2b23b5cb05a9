"""What the scenario tests assert with: the upstream errors users read, and checks on scenario outcomes."""

import copy
import re

from diffusers_patched.selftest.judges import FAILS, MARGIN, TOLERANCE, clearly_wrong, within_tolerance


# What upstream raises when enable_sequential_cpu_offload(device="cpu") moves weights to "cpu:0"
# (sequential-offload-keeps-the-user-device).
CPU_DEVICE_ERROR = "new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)"
CAST_ERROR = "You cannot cast a bitsandbytes model in a new `dtype`"
META_COPY_ERROR = "Cannot copy out of meta tensor; no data!"
META_ITEM_ERROR = "Tensor.item() cannot be called on meta tensors"


def result_of(outcome):
    """A copy of what the scenario returned: the outcomes are shared by the session (test_releases compares each
    release's with them), so a test that takes a result apart must not change them."""
    assert outcome.ok, outcome.error
    return copy.deepcopy(outcome.result)


def assert_raised(outcome, error_type, message):
    assert not outcome.ok, outcome.result
    assert outcome.error["type"] == error_type, outcome.error
    assert message in outcome.error["message"], outcome.error


def assert_close_to_reference(diffs, count):
    """`count` max abs diffs of computed outputs to their references, each within the tolerance (judges.py)."""
    assert len(diffs) == count and all(within_tolerance(diff) for diff in diffs), (
        f"max abs diffs {diffs}, tolerance {TOLERANCE}"
    )


def assert_clearly_wrong(diffs):
    """Wrong numbers: the worst max abs diff is at least MARGIN times the tolerance, or NaN."""
    assert any(clearly_wrong(diff) for diff in diffs), (
        f"max abs diffs {diffs}, not {MARGIN}x the tolerance {TOLERANCE}"
    )


# The floats of a scenario's result that are max abs diffs of computed outputs to their references: those under a key
# naming a diff, and bnb-4bit-save-after-cpu-forward's, named after what was saved when.
_DIFF_KEYS = {"saved_before", "saved_after", "in_memory_after_save"}


def _map_diffs(result, function, key=""):
    """The result, however nested, with `function` applied to each of its max abs diffs."""
    if isinstance(result, dict):
        return {name: _map_diffs(value, function, name) for name, value in result.items()}
    if isinstance(result, list):
        return [_map_diffs(value, function, key) for value in result]
    if isinstance(result, float) and ("diff" in key or key in _DIFF_KEYS):
        return function(result)
    return result


def max_abs_diffs(result):
    """Every max abs diff in a scenario's result."""
    diffs = []
    _map_diffs(result, diffs.append)
    return diffs


def diffs_as_judged(result):
    """The result with each max abs diff replaced by its judgement: what two runs of a scenario agree on, on one
    machine or two (float32 rounding, or the garbage a wrong run reads, differs); one off the margin stays a number."""

    def judged(diff):
        if within_tolerance(diff):
            return "within the tolerance"
        return f"at least {MARGIN}x the tolerance" if clearly_wrong(diff) else diff

    return _map_diffs(result, judged)


def figures_off_the_margin(outcomes):
    """{scenario: the max abs diffs of its result between the tolerance and MARGIN times it}: none may be there, where
    a wrong result would be a tolerance change away from passing for float32 rounding."""
    figures = {name: max_abs_diffs(outcome.result) for name, outcome in outcomes.items() if outcome.ok}
    return {
        name: off
        for name, diffs in figures.items()
        if (off := [diff for diff in diffs if not within_tolerance(diff) and not clearly_wrong(diff)])
    }


def verdict_cell(outcome, scenario):
    """A table cell: the verdict on a side's outcome of `scenario`, and its figure."""
    verdict, figure = outcome.verdict(scenario)
    if verdict == FAILS:
        # The error's type and its first words: enough to tell the failures apart in a table.
        return f"{verdict}: {' '.join(figure.split()[:4])} ..."
    return f"{verdict}: {figure}"


def without_figures(table):
    """The table with its max abs diffs and RSS figures left out: float32 rounding, and what the allocator keeps,
    differ from one machine to the next (the doc's are those of the machine it was measured on); the verdicts and the
    bounds do not."""
    return re.sub(r"RSS \S+ MiB \(", "RSS ... MiB (", re.sub(r"max abs diff \S+", "max abs diff ...", table))


def both_sides_table(first_header, rows, columns, scenarios, upstream, patched):
    """A markdown table of the scenarios named `f"{row} {column}"`: each cell the verdicts on both sides."""
    lines = [f"| {first_header} | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for column in columns:
            name = f"{row} {column}"
            scenario = scenarios[name]
            cells.append(
                f"upstream {verdict_cell(upstream[name], scenario)}<br>patched {verdict_cell(patched[name], scenario)}"
            )
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
