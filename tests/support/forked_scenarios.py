"""Scenario runs forked from one interpreter that has imported the stack once.

A fresh interpreter spends about 5 s importing torch, transformers, accelerate, peft and bitsandbytes before the first
scenario. tests/test_each_fix_is_necessary.py runs the scenarios against one site per patch, sites that differ from
the installed package only in diffusers-patched's vendored tree; tests/test_releases.py runs both sides on each
release's site; the other tests run the primary's scenarios, offload modes and nudged comparisons on both sides
(`scenario_runner` in conftest.py: one server per pytest process). Here one server interpreter imports the stack once, without diffusers or diffusers-patched, and forks
for each run. The fork puts its site first on the path and imports diffusers-patched from it, switched on or off as
the side asks, as the .pth file of a fresh interpreter with the site first on PYTHONPATH does (the fork checks both);
then it runs the scenarios as `run_scenarios` does. A site that pins other versions of the stack (tools/wheels.py
`release_site`) is the server's own (`stack_site`), so that the server imports them from it.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from diffusers_patched.selftest.scenarios import read_outcomes


_SERVER = """
import json, os, runpy, sys

import accelerate, bitsandbytes, gguf, huggingface_hub, peft, safetensors.torch, torch, transformers  # noqa: F401

imported = sorted(name for name in sys.modules if name.split(".")[0] in ("diffusers", "diffusers_patched"))
assert not imported, f"the stack imported {imported}: a fork would not load them from its site"
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.chdir(job["workdir"])
            if job["site"]:
                sys.path.insert(0, job["site"])
            # What the .pth reads; importing the package activates the vendored tree, or leaves it off.
            os.environ["DIFFUSERS_PATCHED"] = "1" if job["patched"] else "0"
            from diffusers_patched import activation

            assert activation.__file__.startswith(job["site"] or ""), activation.__file__
            assert activation.state.reason.startswith("active") == job["patched"], activation.state.reason
            # `python -m MODULE WORKDIR NAMES...`, as run_scenarios starts it.
            sys.argv = [job["module"], job["workdir"], *job["names"]]
            runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
            status = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class ForkedScenarioRunner:
    """`run(names, patched, site, module)`: `run_scenarios(names, patched, module, site=site)` in a fork of the
    server interpreter."""

    def __init__(self, stack_site=None):
        # DIFFUSERS_PATCHED=0: the .pth leaves diffusers-patched unimported in the server, for each fork to import.
        env = {**os.environ, "DIFFUSERS_PATCHED": "0", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
        if stack_site is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(stack_site), *filter(None, [os.environ.get("PYTHONPATH")])])
        self.server = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def run(self, names, patched, site=None, module="diffusers_patched.selftest.scenarios"):
        with tempfile.TemporaryDirectory() as workdir:
            stdout, stderr = Path(workdir) / "stdout", Path(workdir) / "stderr"
            site = None if site is None else str(site)
            job = {"names": names, "patched": patched, "site": site, "module": module, "workdir": workdir}
            self.server.stdin.write(json.dumps({**job, "stdout": str(stdout), "stderr": str(stderr)}) + "\n")
            self.server.stdin.flush()
            status = self.server.stdout.readline()
            if not status:
                raise RuntimeError(f"the scenario server exited ({self.server.wait()}); its stderr is above")
            if int(status) != 0:
                raise RuntimeError(f"the scenario run exited with {int(status)}:\n{stderr.read_text()[-3000:]}")
            return read_outcomes(stdout.read_text(), stderr.read_text(), names)

    def close(self):
        self.server.stdin.close()
        self.server.wait()
