"""`python -m tests.support.without_avx512bf16 WORKDIR NAMES...`: the demo scenarios as on a CPU without AVX512-BF16.

bitsandbytes asks the CPU once, when `bitsandbytes.functional` is imported, and then neither repacks 4-bit weights for
its CPU kernels nor computes them in bfloat16 (`Linear4bit.support_avx512bf16_for_cpu`, its CPU backend's kernels).
Here it is told no, whatever this CPU has.
"""

import importlib.abc
import importlib.util
import sys


class _WithoutAvx512Bf16(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "bitsandbytes.functional":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        exec_module = spec.loader.exec_module

        def exec_without_avx512bf16(module):
            exec_module(module)
            module.has_avx512bf16 = lambda: False

        spec.loader.exec_module = exec_without_avx512bf16
        return spec


sys.meta_path.insert(0, _WithoutAvx512Bf16())


if __name__ == "__main__":
    from diffusers_patched.selftest.scenarios import SCENARIOS
    from diffusers_patched.selftest.scenarios.registry import _main

    _main(SCENARIOS, *sys.argv[1:])
