"""`diffusers-patched selftest`: one flow per fix family, run on the installed stack and device, offline.

Each flow is a scenario of `scenarios/` (CPU) or `gpu_scenarios.py` (CUDA): tiny models built in a temporary
directory, one user flow, and the scenario's judge against an independent reference. The patched side runs in fresh
interpreters like `make demo`'s; `--upstream` runs the same flows with `DIFFUSERS_PATCHED=0` beside them, to show what
the image would hit without the patches. The exit status is 1 when a fix does not hold on the patched side.
"""

import importlib.util
import json
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import _vendor, activation
from .judges import holds


CPU_SCENARIOS = "diffusers_patched.selftest.scenarios"
CUDA_SCENARIOS = "diffusers_patched.selftest.gpu_scenarios"


@dataclass(frozen=True)
class Flow:
    family: str
    scenario: str
    device: str
    # {importable module: the diffusers-patched extra that installs it}: the optional backends the flow needs.
    requires: tuple = ()

    @property
    def module(self):
        return CUDA_SCENARIOS if self.device == "cuda" else CPU_SCENARIOS


CPU_FLOWS = [
    Flow("bitsandbytes 4-bit, sequential offload", "bnb-4bit-sequential-cpu-offload", "cpu"),
    Flow("LoRA loaded into a 4-bit model while offloaded", "bnb-4bit-lora-while-sequentially-offloaded", "cpu"),
    Flow("bitsandbytes 8-bit, sequential offload and LoRA", "bnb-8bit-sequential-offload-and-lora", "cpu"),
    Flow('device_map="balanced" planning of quantized components', "bnb-device-map-balanced-plan", "cpu"),
    Flow(
        'device_map="balanced" sizes of quanto, torchao and GGUF components',
        "quanto-torchao-gguf-planned-at-loaded-size",
        "cpu",
        requires=(("optimum.quanto", "quanto"), ("torchao", "torchao")),
    ),
    Flow("single file with missing keys (constructor values)", "single-file-wan22-i2v-as-wan21-safetensors", "cpu"),
    Flow("GGUF under sequential offload, LoRA, save", "gguf-sequential-offload", "cpu"),
    Flow(
        "LoRA fused into quanto weights, unfused",
        "fuse-lora-into-quanto-weights",
        "cpu",
        requires=(("optimum.quanto", "quanto"), ("peft", "lora")),
    ),
    Flow("save_pretrained of an offloaded pipeline", "save-offloaded-pipeline", "cpu"),
    Flow("group offloading of a model that refused it", "group-offload-hunyuan-dit", "cpu"),
]
# On CUDA the flows run where users run them; GGUF under offload has no CUDA flow and stays on the CPU.
CUDA_FLOWS = [
    Flow(
        "bitsandbytes 4-bit: sequential offload, save, LoRA while offloaded", "gpu-sequential-offload-bnb-4bit", "cuda"
    ),
    Flow(
        "bitsandbytes 8-bit: sequential offload, save, LoRA while offloaded", "gpu-sequential-offload-bnb-8bit", "cuda"
    ),
    Flow('device_map="balanced" with nf4 components (#12719)', "gpu-device-map-balanced-nf4", "cuda"),
    Flow(
        "single file with missing keys (constructor values)", "gpu-single-file-wan22-i2v-as-wan21-safetensors", "cuda"
    ),
    Flow("GGUF single file with missing keys", "gpu-single-file-wan22-i2v-as-wan21-gguf", "cuda"),
    Flow("GGUF under sequential offload, LoRA, save", "gguf-sequential-offload", "cpu"),
    Flow(
        "group offloading of a model that refused it, with and without use_stream",
        "gpu-group-offload-hunyuan-dit",
        "cuda",
    ),
]


def registry(module):
    """The scenarios of `module` (imported here, not at start-up: they are only names until run)."""
    if module == CUDA_SCENARIOS:
        from .gpu_scenarios import GPU_SCENARIOS

        return GPU_SCENARIOS
    from .scenarios import SCENARIOS

    return SCENARIOS


def uncovered(flow):
    """Why this build does not carry the fix `flow` checks, or None: an optional backend the flow needs is not
    installed, or a release the fix's patch is skipped on, or whose checks expect the flow to end otherwise (a pipeline
    the release lacks, group offloading that needs an accelerator)."""
    missing = [extra for module, extra in flow.requires if not _importable(module)]
    if missing:
        return f'needs `pip install "diffusers-patched[{",".join(missing)}]"`'
    patch = registry(flow.module)[flow.scenario].patch
    expected = _vendor.SCENARIOS_EXPECTED_OTHERWISE.get(flow.scenario, {}).get("patched")
    if expected is not None:
        return f"not on diffusers {_vendor.UPSTREAM_VERSION}: {expected}"
    if patch in _vendor.SKIPPED:
        return f"not needed on diffusers {_vendor.UPSTREAM_VERSION}: {_vendor.SKIPPED[patch]}"
    if patch not in {entry["file"] for entry in _vendor.PATCHES}:
        return f"{patch} is not in this build's series"
    return None


def _importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is not installed
        return False


def run_side(flows, patched, log_dir):
    """{scenario: (verdict, figure, seconds)} of one side: each CUDA flow in an interpreter of its own (a CUDA fault
    in one must not hide the others), the CPU flows together."""
    from .scenarios import run_each_apart, run_scenarios

    side = "patched" if patched else "upstream"
    outcomes = {}
    cuda = [flow.scenario for flow in flows if flow.device == "cuda"]
    if cuda:
        outcomes.update(run_each_apart(cuda, patched, CUDA_SCENARIOS, cuda=True, log_dir=log_dir))
    cpu = [flow.scenario for flow in flows if flow.device == "cpu"]
    if cpu:
        log = None if log_dir is None else Path(log_dir) / f"{side}-cpu-flows.stderr"
        outcomes.update(run_scenarios(cpu, patched, module=CPU_SCENARIOS, log=log))
    return {
        flow.scenario: (
            *outcomes[flow.scenario].verdict(registry(flow.module)[flow.scenario]),
            outcomes[flow.scenario].seconds,
        )
        for flow in flows
    }


def table(rows, upstream):
    header = ["flow", "device", "diffusers-patched"] + (["upstream"] if upstream else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["family"], row["device"], _cell(row["patched"])]
        if upstream:
            cells.append(_cell(row["upstream"]))
        lines.append("| " + " | ".join(cell.replace("|", "/").replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines)


def _cell(side):
    if side is None:
        return "-"
    if side["verdict"] == "not covered":
        return f"not covered: {side['figure']}"
    figure = side["figure"] if len(side["figure"]) <= 160 else side["figure"][:157] + "..."
    return f"**{side['verdict']}**: {figure} ({side['seconds']:.1f} s)"


def default_device():
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def environment(device):
    import torch

    stack = {name: version for name, version, _, _ in activation.stack_versions()}
    described = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "diffusers-patched": _vendor.VERSION,
        "activation": activation.state.reason,
        "torch": torch.__version__,
        **stack,
        "device": device,
    }
    if device == "cuda":
        described.update(cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(0))
    return described


def selftest(device=None, upstream=False, json_path=None, log_dir=None):
    """Run the flows; print the table; return the exit status (1 when a fix does not hold on the patched side)."""
    device = device or default_device()
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(f"selftest: --device cuda, but torch {torch.__version__} sees no CUDA device.", file=sys.stderr)
            return 2
    import diffusers  # noqa: F401 (the guards compare the diffusers this process imports)

    problems = activation.upstream_problems()
    if not activation.state.reason.startswith("active") or problems:
        print(
            f"selftest: the patches are not in effect ({activation.state.reason}{'; ' if problems else ''}"
            f"{' '.join(problems)}); nothing to test. `python -m diffusers_patched status` says more.",
            file=sys.stderr,
        )
        return 2
    flows = CUDA_FLOWS if device == "cuda" else CPU_FLOWS
    reasons = {flow: uncovered(flow) for flow in flows}
    covered = [flow for flow in flows if reasons[flow] is None]
    if log_dir is not None:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    sides = [True, False] if upstream else [True]
    with ThreadPoolExecutor(max_workers=len(sides)) as pool:
        patched_results, *upstream_results = pool.map(lambda patched: run_side(covered, patched, log_dir), sides)
    rows = []
    for flow in flows:
        reason = reasons[flow]
        row = {"family": flow.family, "scenario": flow.scenario, "device": flow.device}
        for side, results in (("patched", patched_results), ("upstream", upstream_results[0] if upstream else None)):
            if results is None:
                row[side] = None
            elif reason is not None:
                row[side] = {"verdict": "not covered", "figure": reason, "seconds": 0.0}
            else:
                verdict, figure, seconds = results[flow.scenario]
                row[side] = {"verdict": verdict, "figure": figure, "seconds": seconds}
        rows.append(row)
    failed = [
        row for row in rows if row["patched"]["verdict"] != "not covered" and not holds(row["patched"]["verdict"])
    ]
    env = environment(device)
    print(
        f"diffusers-patched {_vendor.VERSION} selftest on {device} ({', '.join(f'{k} {v}' for k, v in env.items())})"
    )
    print(table(rows, upstream))
    seconds = time.perf_counter() - start
    if failed:
        print(
            f"\nFAILED: {len(failed)} of {len(rows)} fixes do not hold on this stack ({seconds:.0f} s): "
            + "; ".join(f"{row['scenario']} {row['patched']['verdict']}" for row in failed)
            + ". Report it with this output and `python -m diffusers_patched status`."
        )
    else:
        print(f"\nOK: every fix holds on this stack and device ({seconds:.0f} s).")
    if json_path is not None:
        report = {"environment": env, "seconds": seconds, "ok": not failed, "flows": rows}
        Path(json_path).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failed else 0


def add_parser(commands):
    parser = commands.add_parser(
        "selftest",
        help="check the fixes on this stack and device with tiny models built locally (offline, about a minute)",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when torch sees one, else cpu")
    parser.add_argument(
        "--upstream", action="store_true", help="also run each flow with the patches off, in a subprocess"
    )
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--log-dir", metavar="DIR", help="keep each flow interpreter's stderr there")


def main(args):
    return selftest(args.device, args.upstream, args.json_path, args.log_dir)
