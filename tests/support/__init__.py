"""Tiny models, checkpoints and the demo scenarios, built locally; shared by the tests, `make demo` and `make bench`."""
