"""Scenario runs, and other code (the carried upstream-style tests' pytest), forked from one interpreter that has
imported the stack once.

A fresh interpreter spends about 5 s importing torch, transformers, accelerate, peft and bitsandbytes before its first
scenario or test. tests/test_each_fix_is_necessary.py runs the scenarios against one site per patch, sites that differ
from the installed package only in diffusers-patched's vendored tree; tests/test_releases.py runs both sides on each
release's site and tests/test_release_carried_tests.py the carried tests; the other tests run the primary's scenarios,
offload modes, nudged comparisons and carried tests on both sides (`scenario_runner` in conftest.py: one server per
pytest process). Here one server interpreter imports the stack once, without diffusers or diffusers-patched, and forks
for each run. The fork puts its site first on the path and imports diffusers-patched from it, switched on or off as
the side asks, as the .pth file of a fresh interpreter with the site first on PYTHONPATH does (the fork checks both);
then it runs its code as `python -c` would. A site that pins other versions of the stack (tools/wheels.py
`release_site`) is the server's own (`stack_site`), so that the server imports them from it; releases that pin the
same versions can share a server.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from diffusers_patched.selftest.scenarios import read_outcomes


_SERVER = """
import gc, json, os, sys, traceback

import accelerate, bitsandbytes, gguf, huggingface_hub, peft, safetensors.torch, torch, transformers  # noqa: F401

imported = sorted(name for name in sys.modules if name.split(".")[0] in ("diffusers", "diffusers_patched"))
assert not imported, f"the stack imported {imported}: a fork would not load them from its site"
# The stack's objects live as long as the server: out of the collector's sight, the forks' collections do not walk
# them again, nor copy the pages they are on by writing to them.
gc.freeze()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.chdir(job["cwd"])
            if job["site"]:
                sys.path.insert(0, job["site"])
            # What the .pth reads; importing the package activates the vendored tree, or leaves it off.
            os.environ.update(job["env"], DIFFUSERS_PATCHED="1" if job["patched"] else "0")
            from diffusers_patched import activation

            assert activation.__file__.startswith(job["site"] or ""), activation.__file__
            assert activation.state.reason.startswith("active") == job["patched"], activation.state.reason
            # As `python -c CODE` runs it.
            try:
                exec(compile(job["code"], "<forked job>", "exec"), {"__name__": "__main__"})
                status = 0
            except SystemExit as exit:
                status = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


def stack_pins(project, version):
    """The packages release `version` pins differently from the verified stack (releases.json `stack`), as a key:
    releases with the same pins can share a server."""
    return tuple(project.release_record(version).get("stack", []))


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

    def python(self, code, *, patched=True, env=None, cwd=None):
        """`code` run as `tools.interpreter.run_python` runs it in a fresh interpreter, in a fork of the server: a
        `PYTHONPATH` in `env` is the site put first on the path, the rest of `env` the fork's environment. Returns a
        `subprocess.CompletedProcess`."""
        env = dict(env or {})
        site = env.pop("PYTHONPATH", None)
        with tempfile.TemporaryDirectory() as logs:
            stdout, stderr = Path(logs) / "stdout", Path(logs) / "stderr"
            job = {"code": code, "patched": patched, "site": site, "env": env, "cwd": str(cwd or logs)}
            self.server.stdin.write(json.dumps({**job, "stdout": str(stdout), "stderr": str(stderr)}) + "\n")
            self.server.stdin.flush()
            status = self.server.stdout.readline()
            if not status:
                raise RuntimeError(f"the scenario server exited ({self.server.wait()}); its stderr is above")
            return subprocess.CompletedProcess(code, int(status), stdout.read_text(), stderr.read_text())

    def run(self, names, patched, site=None, module="diffusers_patched.selftest.scenarios"):
        with tempfile.TemporaryDirectory() as workdir:
            # `python -m MODULE WORKDIR NAMES...`, as run_scenarios starts it.
            argv = [module, workdir, *names]
            code = f"import runpy, sys\nsys.argv = {argv!r}\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
            env = {} if site is None else {"PYTHONPATH": str(site)}
            result = self.python(code, patched=patched, env=env, cwd=workdir)
        if result.returncode != 0:
            raise RuntimeError(f"the scenario run exited with {result.returncode}:\n{result.stderr[-3000:]}")
        return read_outcomes(result.stdout, result.stderr, names)

    def close(self):
        self.server.stdin.close()
        self.server.wait()
