"""Tiny models built locally and the user flows they run, each judged against an independent reference.

`python -m diffusers_patched selftest` runs one flow per fix family on the installed stack; `make demo`, the
benchmarks and the suite run the same scenarios. Nothing here is imported at start-up: torch and diffusers are imported
by the flows themselves.
"""
