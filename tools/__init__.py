"""Maintainer tooling: the patch series (series, cli), `make demo` and `make bench`. Not shipped in the wheel."""
