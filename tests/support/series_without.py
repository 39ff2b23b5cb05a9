"""The series replayed without some of its patches, for the checks that each fix is necessary
(tests/test_each_fix_is_necessary.py)."""

from tools import ToolError, patches, replays, upstream
from tools.git import git


def replay_without(project, removed, primary, dest):
    """`dest`: a clone of the pristine base with the series less the patches `removed` applied as commits, each with a
    3-way merge (the blobs it needs borrowed from `primary`, a `scratch_checkout`). A later patch that no longer
    applies without them is left out too. Returns the names left out, in series order. With the replay cache, the
    patches before the first one removed are the primary's commits (tools/replays.py).

    Only the files the series changes and upstream's license are checked out (a sparse checkout): the vendored tree is
    made of those, and writing diffusers' whole tree for each replay made up a third of its time."""
    base = project.read_base()
    upstream.clone_pristine(base["version"], base["sdist_sha256"], dest, primary)
    changed = {
        path
        for name in project.read_series()
        for path in patches.patch_hunks((project.patches_dir / name).read_text())
    }
    patterns = "".join(f"/{path}\n" for path in sorted(changed | {"LICENSE"}))
    git(dest, "sparse-checkout", "set", "--no-cone", "--stdin", input=patterns)
    series = project.read_series()
    first_removed = min(series.index(name) for name in removed)
    with replays.Replay(dest, base["sdist_sha256"]) as replayed:
        for name in series[:first_removed]:
            patch = project.patches_dir / name
            replayed.apply(
                name, patch, replays.THREE_WAY, lambda: patches.apply_patch(dest, name, patch, three_way=True)
            )
    # A replay without a patch is made once: the patches after it are applied by one `git am`, not cached, and their
    # commits are not named (only the tree and the subjects are vendored). One that no longer applies is skipped.
    rest = [name for name in series[first_removed:] if name not in removed]
    left_out = [name for name in series if name in removed]
    if not rest:
        return left_out
    result = git(dest, "am", *patches.AM_FLAGS, "--3way", *(str(project.patches_dir / name) for name in rest),
                 check=False)  # fmt: skip
    while result.returncode != 0:
        state = dest / ".git" / "rebase-apply"
        if not state.is_dir():
            raise ToolError(f"git am failed in {dest} without stopping at a patch:\n{result.stderr}")
        left_out.append(rest[int((state / "next").read_text()) - 1])
        result = git(dest, "am", "--skip", check=False)
    return sorted(left_out, key=series.index)
