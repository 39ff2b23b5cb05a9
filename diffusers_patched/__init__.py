"""diffusers-patched: upstream diffusers plus a small, checked series of fixes.

Importing this package (or starting Python with it installed, through its .pth file) makes every
later import of a patched diffusers module load the vendored, patched copy. `DIFFUSERS_PATCHED=0`
turns it off, and then the .pth does not even import this package. `python -m diffusers_patched status`
says what is in effect. Importing this package never raises: problems become warnings and show in `status`.
"""

from ._vendor import VERSION as __version__  # noqa: F401 (<diffusers release>.post<N>, generated with the tree)
from .activation import activate, uninstall  # noqa: F401 (uninstall: public, for tests and embedders)


activate()


def __getattr__(name):
    # Resolved on use: importing diffusers (and torch) at start-up would defeat the cheap .pth.
    if name == "make_bnb_offload_safe":
        from . import activation

        try:
            from diffusers.quantizers.bitsandbytes import make_bnb_offload_safe
        except ImportError as e:
            raise ImportError(
                f"make_bnb_offload_safe comes from the patched diffusers, and diffusers-patched is "
                f"{activation.state.reason}. Run `python -m diffusers_patched status` to see why."
            ) from e
        return make_bnb_offload_safe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
