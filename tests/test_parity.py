"""The parity net (diffusers_patched/selftest/parity.py) on the primary: every flow that upstream diffusers gets right
for a quantization backend is right with diffusers-patched, with upstream's outputs. tests/test_releases.py runs it on
every other supported release.

Where upstream is not right, the cell is a finding: fixed by the series (the patched side right), or left as upstream
has it (both sides the same), each listed here so that a change in either shows.
"""

import copy
import re

import pytest

from diffusers_patched.selftest.judges import FAILS, RIGHT
from diffusers_patched.selftest.parity import (
    FLOWS,
    FUSE_OFFLOAD_FLOWS,
    LORA_OFFLOAD_FLOWS,
    OFFLOAD_FLOWS,
    PARITY,
    cell_verdicts,
    parity_breaks,
)
from diffusers_patched.selftest.scenarios.registry import Outcome
from tests.conftest import REPO_ROOT


REFUSED_ROUND_TRIP = "Cannot load FluxTransformer2DModel because the checkpoint lacks weights of quantized layers"
_TO_CASTS = "ValueError: Casting a quantized model to a new `dtype` is unsupported"
_NOT_SERIALIZABLE = "ValueError: The model is quantized with QuantizationMethod.{} and is not serializable"
_QUANTO_LORA = "KeyError: 'single_transformer_blocks.0.attn.to_k.weight'"
_PACKED_LORA = {
    "sdnq uint4": "ValueError: not enough values to unpack (expected 2, got 1)",
    "bfl nvfp4": "RuntimeError: Only Tensors of floating point and complex dtype can require gradients",
}
_BNB_CAST = "ValueError: You cannot cast a bitsandbytes model"
_CPU_DEVICE = "TypeError: new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)"
_TORCHAO_TO_DISK = "ValueError: Disk offloading is not supported for TorchAO"
_QUANTO_TO_DISK = "RuntimeError: Attempted to access the data pointer on an invalid"
QUANTO_TENSORS = {"int8": "WeightQBytesTensor", "int4": "WeightQBitsTensor", "float8": "WeightQBytesTensor"}
DISK_FLOWS = ("group offload leaf to disk", "group offload block to disk")
MEMORY_FLOWS = ("model cpu offload", "group offload leaf", "group offload block")
# (backend, flow) -> (the start of what upstream 0.42.1 does where it is not right, whether the series fixes it, the
# footnote of docs/parity.md that says why).
UPSTREAM_NOT_RIGHT = {
    # pipeline-to-moves-quantized-models-of-any-backend: `pipe.to("cpu")` passes a dtype to every quantized model
    # diffusers quantized (upstream skips bitsandbytes models only).
    **{(name, "to and from_pipe"): (_TO_CASTS, "fixed", 1) for name in PARITY if not name.startswith("bitsandbytes")},
    # lora-keep-quantized-text-encoder-dtype: the LoRA loader casts the quantized text encoder.
    ("bitsandbytes nf4 text encoder", "lora"): (_BNB_CAST, "fixed", 6),
    # load-flux-loras-into-quanto-quantized-transformers (#10512), for loading a LoRA and for fusing one, which
    # fuse-lora-into-quanto-quantized-weights then fuses.
    **{(f"quanto {dtype}", flow): (_QUANTO_LORA, "fixed", 2) for dtype in QUANTO_TENSORS for flow in ("lora", "fuse")},
    # lora-shape-of-packed-quantized-linear-layers: the Flux LoRA loader read the shape of packed weights (SDNQ's
    # 4-bit weights are flat; BFL nvfp4's hold two values per byte, which it took for a layer to expand).
    **{(name, "lora"): (error, "fixed", 4) for name, error in _PACKED_LORA.items()},
    # fuse-lora-into-gguf-quantized-weights dequantizes GGUF weights to fuse into them.
    ("gguf Q8_0", "fuse"): (
        "RuntimeError: The size of tensor a (68) must match the size of tensor b (64)",
        "fixed",
        9,
    ),
    # unfuse-lora-restores-requantized-weights: PEFT unfuses a torchao weight by quantizing it again, a step away.
    ("torchao int8 weight-only", "fuse"): (
        "keeps 100.1% of the LoRA's effect (bound 90%); unfused: max abs diff",
        "fixed",
        8,
    ),
    # refuse-to-fuse-lora-into-low-precision-weights: PEFT adds the LoRA to int8, packed or float8 storage.
    ("sdnq int8", "fuse"): (
        "RuntimeError: result type Float can't be cast to the desired output type Char",
        "refused",
        7,
    ),
    ("bfl fp8r", "fuse"): ("RuntimeError: Promotion for Float8 Types is not supported", "refused", 7),
    # (SDNQ's and BFL's packed 4-bit weights fail upstream in the LoRA loader first.)
    **{(name, "fuse"): (error, "refused", 4) for name, error in _PACKED_LORA.items()},
    # Upstream's LoRA loader casts the quantized text encoder (fixed, see "lora"); then PEFT unfuses a 4-bit weight by
    # quantizing it again, a quantization step of the fused weight away: unfuse-lora-restores-requantized-weights.
    ("bitsandbytes nf4 text encoder", "fuse"): (_BNB_CAST, "fixed", 6),
    # Refused on both sides: GGUF and BFL models cannot be saved (their quantizers' `is_serializable` is False).
    **{
        (name, flow): (_NOT_SERIALIZABLE.format(method), "refused on both sides", 3)
        for name, method in (("gguf Q8_0", "GGUF"), ("bfl fp8r", "BFL"), ("bfl nvfp4", "BFL"))
        for flow in ("model round trip", "pipeline round trip")
    },
    # sequential-offload-keeps-the-user-device: `enable_sequential_cpu_offload(device="cpu")` ran on "cpu:0", where
    # accelerate's hooks put plain tensors back into the modules (a GPU does not go through this).
    **{
        (name, "sequential cpu offload"): (_CPU_DEVICE, "fixed", 10)
        for name in PARITY
        if not name.startswith(("quanto", "gguf"))
    },
    # gguf-parameters-survive-accelerate-offload-hooks: accelerate rebuilds the offloaded GGUF weights without it.
    **{
        ("gguf Q8_0", flow): ("KeyError: None", "fixed", 11)
        for flow in ("sequential cpu offload", "lora, sequential cpu offload")
    },
    # refuse-to-sequentially-offload-quanto-weights (#10526): accelerate cannot rebuild quanto's tensors.
    **{
        (f"quanto {dtype}", flow): (f"TypeError: {tensor}.__new__() missing", "refused", 12)
        for dtype, tensor in QUANTO_TENSORS.items()
        for flow in ("sequential cpu offload", "lora, sequential cpu offload")
    },
    # group-offload-to-disk-refuses-tensor-subclasses: safetensors cannot save quanto's tensors; upstream refuses
    # TorchAO's already, now by the same check.
    **{
        (name, prefix + flow): (error, "refused", 13)
        for name, error in (
            *((f"quanto {dtype}", _QUANTO_TO_DISK) for dtype in QUANTO_TENSORS),
            ("torchao int8 weight-only", _TORCHAO_TO_DISK),
        )
        for flow in DISK_FLOWS
        for prefix in ("", "lora, ")
    },
    # A LoRA loaded while offloaded: where loading fails without offloading, it fails so with offloading too.
    **{
        (f"quanto {dtype}", f"lora, {flow}"): (_QUANTO_LORA, "fixed", 2)
        for dtype in QUANTO_TENSORS
        for flow in MEMORY_FLOWS
    },
    **{(name, f"lora, {flow}"): (error, "fixed", 4) for name, error in _PACKED_LORA.items() for flow in OFFLOAD_FLOWS},
    **{
        ("bitsandbytes nf4 text encoder", f"lora, {flow}"): (_BNB_CAST, "fixed", 6)
        for flow in OFFLOAD_FLOWS
        if flow != "sequential cpu offload"
    },
    # local-bnb-4bit-statistics-survive-offload-hooks: loading a LoRA takes the hooks off, and 4-bit statistics
    # offloaded to `meta` with them do not come back (the forwardable refuse-to-sequentially-offload-bnb-4bit-weights
    # refuses instead).
    ("bitsandbytes nf4 text encoder", "lora, sequential cpu offload"): (
        "NotImplementedError: Cannot copy out of meta tensor",
        "fixed",
        17,
    ),
    # restore-the-accelerate-hooks-the-loaders-remove: the LoRA loader offloads again without the user's device.
    **{
        (name, f"lora, {mode} cpu offload"): (
            f"RuntimeError: `enable_{mode}_cpu_offload` requires accelerator",
            "fixed",
            15,
        )
        for name in ("sdnq int8", "bfl fp8r", "gguf Q8_0", "torchao int8 weight-only")
        for mode in ("model", "sequential")
        if (name, mode) != ("gguf Q8_0", "sequential")
    },
    # group-offload-to-disk-survives-lora-loading (#11791): the LoRA layers' groups read files never written.
    **{
        (name, "lora, group offload leaf to disk"): ("max abs diff", "fixed", 16)
        for name in ("sdnq int8", "bfl fp8r", "gguf Q8_0")
    },
    **{
        (name, "lora, group offload block to disk"): (error, "fixed", 16)
        for name, error in (
            ("sdnq int8", "RuntimeError: data set to a tensor that requires gradients"),
            ("bfl fp8r", "KeyError: 'tensor_"),
            ("gguf Q8_0", "RuntimeError: data set to a tensor that requires gradients"),
        )
    },
}
_ACCELERATOR = "RuntimeError: `enable_{}_cpu_offload` requires accelerator"
_LOWER_PRECISION_FUSE = {
    "sdnq int8": "RuntimeError: result type Float can't be cast to the desired output type Char",
    "bfl fp8r": "RuntimeError: Promotion for Float8 Types is not supported",
}
_DATA_SET = "RuntimeError: data set to a tensor that requires gradients"
# A LoRA fused while offloaded: the cell fails upstream at the first of the failures above the fuse meets.
UPSTREAM_NOT_RIGHT.update(
    {
        **{
            (f"quanto {dtype}", f"fuse, {flow}"): UPSTREAM_NOT_RIGHT[f"quanto {dtype}", f"lora, {flow}"]
            for dtype in QUANTO_TENSORS
            for flow in OFFLOAD_FLOWS
        },
        **{
            (name, f"fuse, {flow}"): (error, "refused", 4)
            for name, error in _PACKED_LORA.items()
            for flow in OFFLOAD_FLOWS
        },
        **{
            (name, f"fuse, {mode} cpu offload"): (_ACCELERATOR.format(mode), fate, 15)
            for name, fate in (
                ("sdnq int8", "refused"),
                ("bfl fp8r", "refused"),
                ("gguf Q8_0", "fixed"),
                ("torchao int8 weight-only", "fixed"),
            )
            for mode in ("model", "sequential")
            if (name, mode) != ("gguf Q8_0", "sequential")
        },
        **{
            (name, f"fuse, {flow}"): (error, "refused", 7)
            for name, error in _LOWER_PRECISION_FUSE.items()
            for flow in ("group offload leaf", "group offload block", "group offload leaf to disk")
        },
        ("sdnq int8", "fuse, group offload block to disk"): (_DATA_SET, "refused", 16),
        ("bfl fp8r", "fuse, group offload block to disk"): ("KeyError: 'tensor_", "refused", 16),
        # fuse-lora-into-offloaded-weights takes accelerate's hooks off to fuse into the GGUF weights they hold.
        ("gguf Q8_0", "fuse, sequential cpu offload"): ("KeyError: None", "fixed", 18),
        **{
            ("gguf Q8_0", f"fuse, {flow}"): (UPSTREAM_NOT_RIGHT["gguf Q8_0", "fuse"][0], "fixed", 9)
            for flow in ("group offload leaf", "group offload block", "group offload leaf to disk")
        },
        ("gguf Q8_0", "fuse, group offload block to disk"): (_DATA_SET, "fixed", 16),
        **{
            ("torchao int8 weight-only", f"fuse, {flow}"): (
                UPSTREAM_NOT_RIGHT["torchao int8 weight-only", "fuse"][0],
                "fixed",
                8,
            )
            for flow in ("group offload leaf", "group offload block")
        },
        **{("torchao int8 weight-only", f"fuse, {flow}"): (_TORCHAO_TO_DISK, "refused", 13) for flow in DISK_FLOWS},
        ("bitsandbytes nf4 text encoder", "fuse, sequential cpu offload"): (
            "NotImplementedError: Cannot copy out of meta tensor",
            "fixed",
            17,
        ),
        **{
            ("bitsandbytes nf4 text encoder", f"fuse, {flow}"): (_BNB_CAST, "fixed", 6)
            for flow in OFFLOAD_FLOWS
            if flow != "sequential cpu offload"
        },
    }
)
# group-offload-to-disk-writes-tensors-replaced-while-running: where bitsandbytes repacks 4-bit weights on their first
# forward (a CPU with AVX512-BF16), the second call onloaded the weights unpacked from the group's file.
BNB_REPACKED = {("bitsandbytes nf4 text encoder", flow): ("max abs diff", "fixed", 14) for flow in DISK_FLOWS}


def upstream_not_right(outcomes):
    """UPSTREAM_NOT_RIGHT on this CPU: BNB_REPACKED where the parity run's bitsandbytes repacked its weights."""
    repacked = outcomes["bitsandbytes nf4 text encoder"].result["repacks_4bit_weights"]
    return {**UPSTREAM_NOT_RIGHT, **(BNB_REPACKED if repacked else {})}


# What the patched side does in the cells of UPSTREAM_NOT_RIGHT that it refuses: (verdict, the start of its figure).
REFUSED_FUSE = "ValueError: Cannot fuse LoRA into `transformer_blocks.0.attn.to_q`: its weight is stored as torch."
REFUSED_QUANTO_SEQUENTIAL = (
    "ValueError: Cannot sequentially offload `transformer` (FluxTransformer2DModel): accelerate's offload hooks"
)
PATCHED_OTHERWISE = {
    **{
        (name, flow): (FAILS, REFUSED_FUSE, 7)
        for name in ("sdnq int8", "sdnq uint4", "bfl fp8r", "bfl nvfp4")
        for flow in ("fuse", *FUSE_OFFLOAD_FLOWS)
    },
    **{
        (f"quanto {dtype}", prefix + "sequential cpu offload"): (FAILS, REFUSED_QUANTO_SEQUENTIAL, 12)
        for dtype in QUANTO_TENSORS
        for prefix in ("", "lora, ", "fuse, ")
    },
    **{
        (name, prefix + flow): (FAILS, f"ValueError: Disk offloading is not supported for `{tensor}` tensors", 13)
        for name, tensor in (
            *((f"quanto {dtype}", t) for dtype, t in QUANTO_TENSORS.items()),
            ("torchao int8 weight-only", "Int8Tensor"),
        )
        for flow in DISK_FLOWS
        for prefix in ("", "lora, ", "fuse, ")
    },
}


@pytest.mark.upstream
def test_patched_is_never_worse_than_upstream(parity_outcomes):
    upstream, patched = parity_outcomes["upstream"], parity_outcomes["patched"]
    for name in PARITY:
        for flow, (verdict, figure) in cell_verdicts(patched[name]).items():
            print(f"{name} | {flow} | upstream {cell_verdicts(upstream[name])[flow][0]} | patched {verdict}: {figure}")
    assert {name: breaks for name in PARITY if (breaks := parity_breaks(upstream[name], patched[name]))} == {}


@pytest.mark.upstream
def test_upstream_cells_that_are_not_right(parity_outcomes):
    found = {
        (name, flow): figure
        for name in PARITY
        for flow, (verdict, figure) in cell_verdicts(parity_outcomes["upstream"][name]).items()
        if verdict != RIGHT
    }
    expected = upstream_not_right(parity_outcomes["upstream"])
    assert sorted(found) == sorted(expected)
    for cell, figure in found.items():
        assert figure.startswith(expected[cell][0]), (cell, figure)


def test_patched_cells_that_are_not_right_fail_as_upstream(parity_outcomes):
    patched = {
        (name, flow): (verdict, figure)
        for name in PARITY
        for flow, (verdict, figure) in cell_verdicts(parity_outcomes["patched"][name]).items()
        if verdict != RIGHT
    }
    expected = {
        cell: (FAILS, error)
        for cell, (error, fate, _) in upstream_not_right(parity_outcomes["upstream"]).items()
        if fate != "fixed"
    }
    expected.update(PATCHED_OTHERWISE)
    assert sorted(patched) == sorted(expected)
    for cell, (verdict, figure) in patched.items():
        assert verdict == expected[cell][0] and figure.startswith(expected[cell][1]), (cell, figure)


def test_every_backend_quantizes_the_layers_it_is_judged_on(parity_outcomes):
    """A backend that left the tiny model's layers as they were would pass every flow without being tested."""
    for side, outcomes in parity_outcomes.items():
        for name, outcome in outcomes.items():
            if outcome.ok and "quantized_linears" in outcome.result:
                quantized, linears = outcome.result["quantized_linears"].split("/")
                assert quantized == linears, (side, name, outcome.result["quantized_linears"])


def test_quanto_checkpoint_round_trip(parity_outcomes):
    """The round trip a patch once refused ("the checkpoint lacks weights of quantized layers"): a pre-quantized quanto
    model and pipeline reload with the outputs they were saved with."""
    for dtype in ("int8", "int4", "float8"):
        verdicts = cell_verdicts(parity_outcomes["patched"][f"quanto {dtype}"])
        for flow in ("model round trip", "pipeline round trip"):
            assert verdicts[flow][0] == RIGHT, (dtype, flow, verdicts[flow])


@pytest.mark.upstream
def test_the_net_reports_what_the_patches_would_break(parity_outcomes):
    """What main did before this net: the quanto round trip refused on the patched side, and outputs off upstream's."""
    upstream = parity_outcomes["upstream"]["quanto int8"]
    cells = copy.deepcopy(parity_outcomes["patched"]["quanto int8"].result["cells"])
    cells["model round trip"] = {**cells["model round trip"], "error": f"ValueError: {REFUSED_ROUND_TRIP}"}
    cells["model cpu offload"]["output"] = [value + 1e-3 for value in cells["model cpu offload"]["output"]]
    breaks = parity_breaks(upstream, Outcome({"cells": cells}, None, 0.0))
    assert sorted(breaks) == ["model cpu offload", "model round trip"]
    assert breaks["model round trip"].startswith("upstream right, patched fails: ValueError: Cannot load")
    assert breaks["model cpu offload"] == "patched output differs from upstream's by 0.001 (tolerance 1e-05)"


ROW_FOOTNOTES = {"bitsandbytes nf4 text encoder": 5}
NOT_RUN = "(transformers' own)"


def _superscript(number):
    return str(number).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


# Errors that are a library's own refusal, not a failure: "refused" in the table.
UPSTREAM_REFUSALS = ("ValueError: The model is quantized with", "ValueError: Disk offloading is not supported")


def _side_cell(outcome, flow, refused, note):
    """One side of a cell: the max abs diff to the reference when right (for `fuse`, the share of the LoRA's effect
    kept and the max abs diff after unfusing), else what went wrong with its footnote."""
    verdict, figure = cell_verdicts(outcome)[flow]
    if verdict == RIGHT:
        cell = outcome.result["cells"][flow]
        diff = f"{max(cell['diffs']):.2g}"
        return f"{cell['retention']:.1%}, {diff}" if "retention" in cell else diff
    word = "refused" if refused or figure.startswith(UPSTREAM_REFUSALS) else {FAILS: "fails"}.get(verdict, verdict)
    return f"{word}{_superscript(note)}"


def docs_table(upstream, patched, flows):
    """docs/parity.md's table of `flows`: `{(backend, flow): "upstream / diffusers-patched"}`, in the table's order."""
    expected = upstream_not_right(upstream)
    cells = {}
    for name in PARITY:
        for flow in flows:
            if flow not in patched[name].result["cells"]:
                cells[name, flow] = NOT_RUN
                continue
            note = expected.get((name, flow), (None, None, None))[2]
            patched_note = PATCHED_OTHERWISE.get((name, flow), (None, None, note))[2]
            cells[name, flow] = (
                f"{_side_cell(upstream[name], flow, False, note)} / "
                f"{_side_cell(patched[name], flow, True, patched_note)}"
            )
    return cells


def markdown(cells, flows):
    lines = ["| backend | " + " | ".join(flows) + " |", "|---|" + "---|" * len(flows)]
    for name in PARITY:
        label = name + (_superscript(ROW_FOOTNOTES[name]) if name in ROW_FOOTNOTES else "")
        lines.append(f"| {label} | " + " | ".join(cells[name, flow] for flow in flows) + " |")
    return "\n".join(lines)


def without_figures(text):
    """`text` without its measured figures, which float32 rounding makes differ from one machine to the next."""
    return re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e[+-]?\d+)?%?", "#", text)


@pytest.mark.upstream
def test_the_docs_tables_are_measured(parity_outcomes):
    """docs/parity.md's tables are this run's, figures aside; where bitsandbytes does not repack its 4-bit weights
    (a CPU without AVX512-BF16) upstream is right in the cells of BNB_REPACKED, which the doc gives as measured on a
    CPU where it does."""
    upstream, patched = parity_outcomes["upstream"], parity_outcomes["patched"]
    repacked = upstream["bitsandbytes nf4 text encoder"].result["repacks_4bit_weights"]
    doc = without_figures((REPO_ROOT / "docs" / "parity.md").read_text())
    tables = []
    for flows in (
        [flow for flow in FLOWS if flow not in OFFLOAD_FLOWS + LORA_OFFLOAD_FLOWS + FUSE_OFFLOAD_FLOWS],
        OFFLOAD_FLOWS,
        LORA_OFFLOAD_FLOWS,
        FUSE_OFFLOAD_FLOWS,
    ):
        cells = docs_table(upstream, patched, flows)
        print(markdown(cells, flows))
        documented = {
            cell: (text if repacked or cell not in BNB_REPACKED else "wrong¹⁴ / #") for cell, text in cells.items()
        }
        tables.append(without_figures(markdown(documented, flows)))
    for table in tables:
        assert table in doc, table
