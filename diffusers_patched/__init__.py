"""diffusers-patched: upstream diffusers plus a small, checked series of fixes.

Importing this package (or starting Python with it installed, through its .pth file) makes every
later import of a patched diffusers module load the vendored, patched copy. `DIFFUSERS_PATCHED=0`
turns it off; `python -m diffusers_patched status` says what is in effect.
"""

from .activation import activate


__version__ = "0.42.1.post1"

activate()
