# Metadata is in pyproject.toml; this only adds the start-up hook to the wheel.
import os

from setuptools import setup
from setuptools.command.build_py import build_py


class build_py_with_pth(build_py):
    """Install diffusers_patched.pth at the top of site-packages, so the patches activate at start-up."""

    def run(self):
        super().run()
        self.copy_file(
            os.path.join("diffusers_patched", "diffusers_patched.pth"),
            os.path.join(self.build_lib, "diffusers_patched.pth"),
            preserve_mode=False,
        )


setup(cmdclass={"build_py": build_py_with_pth})
