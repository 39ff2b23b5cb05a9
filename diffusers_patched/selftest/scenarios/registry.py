"""The registry of scenarios, and their runner: each in a fresh interpreter (or a fork of one, in the tests), with the
patches on or off, one outcome per scenario."""

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..judges import FAILS


SCENARIOS = {}


@dataclass
class Scenario:
    name: str
    patch: str
    summary: str
    # `str.format` template over the result dict: the demo's one-line text of a scenario that returned.
    text: str
    run: Callable
    # result dict -> (RIGHT / WRONG / REFUSED, the figure that decides it).
    judge: Optional[Callable] = None
    # A guard, not a fix: upstream behaves the same (the scenario shows that the patches do not change it).
    guard: bool = False


@dataclass
class Outcome:
    result: Optional[dict]
    # {"type": exception class name, "message": str(exception)} when the scenario raised, else None.
    error: Optional[dict]
    seconds: float

    @property
    def ok(self):
        return self.error is None

    def describe(self, scenario):
        if self.ok:
            # A scenario whose result takes more than one shape (figures, or a refusal) words it with a function.
            return scenario.text(self.result) if callable(scenario.text) else scenario.text.format(**self.result)
        return f"{self.error['type']}: {self.error['message']}"

    def verdict(self, scenario):
        """(verdict, figure): FAILS with the error a user reads, else the scenario's judgement of its result."""
        if not self.ok:
            return FAILS, f"{self.error['type']}: {self.error['message']}"
        return scenario.judge(self.result)


def scenario(name, patch, summary, text, judge=None, guard=False, registry=SCENARIOS):
    def register(run):
        registry[name] = Scenario(name, patch, summary, text, run, judge, guard)
        return run

    return register


def error_of(exception):
    return {"type": type(exception).__name__, "message": str(exception)}


def run_scenarios(names, patched, module="diffusers_patched.selftest.scenarios", cuda=False, site=None, log=None):
    """Run scenarios in one fresh interpreter (imports dominate their cost), with or without the patches.

    Each scenario works in its own directory on models it builds itself; an error in one ends only that one. `module`
    holds the scenarios (`diffusers_patched.selftest.gpu_scenarios` for the CUDA ones). Without `cuda`, CUDA devices are hidden:
    on a GPU machine, transformers and diffusers would otherwise load bitsandbytes models onto GPU 0 by themselves,
    and a CPU scenario would no longer be about the CPU. `site`: a directory with another diffusers release and its
    diffusers-patched (tools/wheels.py `release_site`), first on the path. `log`: a file to keep the interpreter's
    stderr in.
    """
    env = {**os.environ, "DIFFUSERS_PATCHED": "1" if patched else "0", "HF_HUB_OFFLINE": "1"}
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.run(
            [sys.executable, "-m", module, workdir, *names],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
        )
    if log is not None:
        Path(log).write_text(process.stderr)
    return read_outcomes(process.stdout, process.stderr, names)


def read_outcomes(stdout, stderr, names):
    """{name: Outcome} from what a scenario interpreter printed; a scenario it did not report crashed it."""
    outcomes = {}
    for line in stdout.splitlines():
        if line.startswith(_OUTCOME_PREFIX):
            name, outcome = json.loads(line[len(_OUTCOME_PREFIX) :])
            outcomes[name] = Outcome(**outcome)
    for name in names:
        if name not in outcomes:
            crash = {"type": "ScenarioCrashed", "message": stderr.strip()[-2000:]}
            outcomes[name] = Outcome(None, crash, 0.0)
    return outcomes


def run_each_apart(names, patched, module, cuda=False, log_dir=None):
    """`run_scenarios` for each scenario in an interpreter of its own, half the cores' worth at a time: a CUDA fault
    leaves the process it happens in unusable, and must not take the other flows with it. `log_dir`: where each
    interpreter's stderr is kept (`<side>-<name>.stderr`)."""
    side = "patched" if patched else "upstream"

    def run(name):
        log = None if log_dir is None else Path(log_dir) / f"{side}-{name}.stderr"
        return run_scenarios([name], patched, module=module, cuda=cuda, log=log)

    outcomes = {}
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2)) as pool:
        for outcome in pool.map(run, names):
            outcomes.update(outcome)
    return outcomes


_OUTCOME_PREFIX = "diffusers-patched scenario outcome: "


def _main(registry, workdir, *names):
    import torch

    # As upstream's `enable_full_determinism`, and for its side effect: `torch.empty` fills its memory with NaN, so a
    # flow that reads memory it never wrote reads wrong on every run, not only when the allocator hands back garbage.
    torch.use_deterministic_algorithms(True, warn_only=True)
    for name in names:
        scenario_dir = Path(workdir) / name
        scenario_dir.mkdir()
        start = time.perf_counter()
        try:
            outcome = {"result": registry[name].run(scenario_dir), "error": None}
        except Exception as e:
            traceback.print_exc()
            outcome = {"result": None, "error": error_of(e)}
        outcome["seconds"] = time.perf_counter() - start
        print(_OUTCOME_PREFIX + json.dumps([name, outcome]), flush=True)
