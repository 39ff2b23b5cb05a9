"""Maintainer tooling: the patch series (patches, series, releases, vendoring, upstream, git, cli), the wheels and
publishing, `make demo` and `make bench`. Not shipped in the wheel."""

from pathlib import Path


# The checkout the tooling runs from.
REPO_ROOT = Path(__file__).resolve().parents[1]


class ToolError(Exception):
    """A problem the tooling found (in the series, the pristine upstream, the vendored tree, the wheels, publishing),
    named with its remedy."""
