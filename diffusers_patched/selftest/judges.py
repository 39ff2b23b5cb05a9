"""How a scenario's result is judged: the verdicts, and the two kinds of comparison with a reference.

- `close`: the output of a computation (a forward pass, a decode, a pipeline call) against the same computation on the
  reference. Equal up to float32 rounding, never bit for bit: BLAS libraries (MKL on CPUs, cuBLAS and cuDNN on GPUs)
  choose their kernels by the memory alignment of the operands, so weights read back from an offload file or from a
  safetensors file into a new allocation can change the last bits of a result, on one machine and not on another.
- `identical`: where identity is the claim: a constructor's constant, a restored quantization statistic, a tensor saved
  and reloaded, a copied weight. Nothing is computed, so nothing may differ.
"""

import math


# A scenario's verdict on what a side computed: RIGHT (equal to an independent reference: the un-offloaded model, the
# correctly loaded one, the constructor's values, the right plan), WRONG (it returned other numbers), REFUSED (it
# stopped with an error that names the problem and the remedy, where that is the right outcome), FAILS (it raised).
RIGHT, WRONG, REFUSED, FAILS = "right", "wrong", "refused", "fails"


def holds(verdict):
    """Whether a patched side's verdict shows its fix holding: right, or refused where refusing is the right outcome."""
    return verdict in (RIGHT, REFUSED)


# The max abs diff of an output to its reference's that is float32 rounding. Upstream's: its offload tests compare at
# atol=1e-5, and its tests' helper `assert_tensors_close` defaults to atol=rtol=1e-5. The tiny models' outputs are of order one (0.2 to 3.2), where
# float32 rounding on another kernel path moves them by a few 1e-7 to a few 1e-6 (a reference with every weight one
# ulp off: 2.4e-06 for GLM-Image, 2.6e-06 for the LTX video); outputs larger than one are judged relative to their
# magnitude (`scale`).
TOLERANCE = 1e-5
# Every wrong result the scenarios record, on upstream or with a fix left out, is off by at least MARGIN times the
# tolerance (or NaN): the tolerance cannot swallow one (tests/test_demo_scenarios.py, test_each_fix_is_necessary.py).
MARGIN = 100


def within_tolerance(diff, scale=1.0):
    """Whether a max abs diff is float32 rounding at the reference's magnitude `scale`; NaN never is."""
    return diff <= TOLERANCE * max(scale, 1.0)


def clearly_wrong(diff, scale=1.0):
    """Whether a max abs diff is at least MARGIN times the tolerance at the reference's magnitude `scale`, or NaN."""
    return math.isnan(diff) or diff >= MARGIN * TOLERANCE * max(scale, 1.0)


def _figure(what, diffs, bound):
    worst = math.nan if any(math.isnan(diff) for diff in diffs) else max(diffs)
    comparisons = "" if len(diffs) == 1 else f" over {len(diffs)} comparisons"
    return f"{what} {worst:.2g}{comparisons} ({bound})"


# The least share of a LoRA's effect on the output a fused model must keep: quantizing the fused weights again rounds
# some of it away (the tiny models' LoRAs change their outputs by about as much as their weights, so a 4-bit backend
# keeps most), while a fuse that changes nothing the model computes with keeps none.
RETENTION_BOUND = 0.9


def retention(change, wanted):
    """The share of the change of output `wanted` that `change` keeps: its projection onto it, in float64."""
    change, wanted = change.flatten().double(), wanted.flatten().double()
    return (change @ wanted / (wanted @ wanted)).item()


def retained(share):
    """Whether a fused model that keeps `share` of the LoRA's change keeps enough of it, and adds no more than that."""
    return RETENTION_BOUND <= share <= 2 - RETENTION_BOUND


def close(diffs, what="max abs diff to the reference", scale=1.0):
    """(RIGHT, figure) when every max abs diff in `diffs` is within TOLERANCE of a reference of magnitude `scale`, else
    (WRONG, figure): the output of a computation, equal to its reference up to float32 rounding."""
    diffs = [float(diff) for diff in diffs]
    bound = TOLERANCE * max(scale, 1.0)
    verdict = RIGHT if diffs and all(within_tolerance(diff, scale) for diff in diffs) else WRONG
    return verdict, _figure(what, diffs, f"tolerance {bound:.2g}") if diffs else f"{what}: nothing compared"


def identical(diffs, what="max abs diff to the reference"):
    """(RIGHT, figure) when every max abs diff in `diffs` is 0, else (WRONG, figure): a tensor that must equal its
    reference bit for bit, because nothing computed it."""
    diffs = [float(diff) for diff in diffs]
    verdict = RIGHT if diffs and all(diff == 0 for diff in diffs) else WRONG
    return verdict, _figure(what, diffs, "bit for bit") if diffs else f"{what}: nothing compared"
