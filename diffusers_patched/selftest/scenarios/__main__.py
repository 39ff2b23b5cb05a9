"""`python -m diffusers_patched.selftest.scenarios WORKDIR NAME...`: run the named scenarios in this interpreter (see
registry.py `run_scenarios`)."""

import sys

from . import SCENARIOS
from .registry import _main


_main(SCENARIOS, *sys.argv[1:])
