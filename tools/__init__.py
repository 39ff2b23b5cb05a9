"""Maintainer tooling: the patch series (series, releases, vendoring, upstream, git, cli), `make demo` and `make bench`. Not shipped in the wheel."""

from pathlib import Path


# The checkout the tooling runs from.
REPO_ROOT = Path(__file__).resolve().parents[1]


class SeriesError(Exception):
    """A problem with the series, the pristine upstream or the vendored tree, with its remedy."""
