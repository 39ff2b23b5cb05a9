import os

from setuptools import find_packages, setup
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


setup(
    name="diffusers-patched",
    version="0.42.1.post1",
    description="Upstream diffusers with a small, checked series of fixes for quantization, device maps and offloading",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["diffusers_patched", "diffusers_patched.*"]),
    package_data={"diffusers_patched": ["_vendor/**/*.py"]},
    cmdclass={"build_py": build_py_with_pth},
    install_requires=[
        # Exact: the release patches/base.json records and the vendored tree is made from.
        "diffusers==0.42.1",
        "torch>=2.4",
        "transformers>=4.51",
        "accelerate>=1.0",
        "bitsandbytes>=0.45",
        "safetensors>=0.4",
        "gguf>=0.10",
        "huggingface_hub>=0.34",
    ],
    extras_require={
        "lora": ["peft>=0.17"],
        "dev": ["peft>=0.17", "pytest", "ruff==0.9.10"],
    },
    entry_points={"console_scripts": ["diffusers-patched=diffusers_patched.cli:main"]},
)
