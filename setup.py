"""Installs the `rllib` package and the `.pth` file that arms the fork at start-up."""

import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_FILE = "rllib_fork.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithPth(build_py):
    """Puts `rllib_fork.pth` at the root of site-packages (normal and editable)."""

    def run(self):
        super().run()
        self.copy_file(
            os.path.join(HERE, PTH_FILE), os.path.join(self.build_lib, PTH_FILE)
        )

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, PTH_FILE)
        ]


class EditableWheelWithPth(editable_wheel):
    """`pip install -e .` builds its wheel here: add the `.pth` to it too."""

    def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
        result = super()._run_build_commands(
            dist_name, unpacked_wheel, build_lib, tmp_dir
        )
        self.copy_file(
            os.path.join(HERE, PTH_FILE), os.path.join(unpacked_wheel, PTH_FILE)
        )
        return result


with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
    long_description = f.read()

setup(
    name="rllib-fork",
    version="0.1.0",
    description="Fixes for Ray RLlib offline training (episode I/O, device-side GAE, "
    "nested observations), applied to an installed ray[rllib].",
    long_description=long_description,
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9",
    packages=find_packages(include=["rllib", "rllib.*"]),
    cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth},
    install_requires=[
        "ray[rllib]==2.60.*",
        "torch>=2.0",
        "numpy>=1.24",
        "scipy>=1.9",
        "msgpack>=1.0",
        "msgpack-numpy>=0.4.8",
        "pyarrow>=14",
        "gymnasium>=1.0",
        "wrapt>=1.14",
        "dm-tree>=0.1.8",
        # Progress bars of `python -m ray.rllib.offline.episodes` and the examples.
        "tqdm>=4.60",
        # Ray Data lists input paths in threads and each thread tries
        # `from fsspec.implementations.http import HTTPFileSystem`; without
        # aiohttp that import fails half-way and a racing thread gets an
        # uncaught ImportError. With aiohttp installed the import succeeds.
        "aiohttp>=3.8",
    ],
    extras_require={
        # moto (with flask) serves the S3 protocol on 127.0.0.1 for the cloud
        # input tests; its botocore needs python-dateutil < 3.
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            # `ci/test.sh` spreads the fast tier over the cores, a file per worker.
            "pytest-xdist>=3.5",
            "ruff>=0.6",
            # The patch series is formatted and checked with ray's formatter.
            "black==22.10.0",
            "moto[s3]>=5.1",
            "flask>=3",
            "flask-cors>=5",
        ],
        "doc": ["sphinx>=7", "pydata-sphinx-theme>=0.15", "myst-parser>=2"],
        "bench": ["matplotlib>=3.7"],
        # The MuJoCo task (InvertedPendulum-v5) of the continuous-control
        # datasets; gymnasium's MuJoCo envs import imageio.
        "mujoco": ["mujoco>=3.0,<4", "imageio>=2"],
        # `ray.rllib.offline.tools.minari_io`: read, write and convert Minari datasets
        # (HDF5 and Arrow backends; Python >= 3.11, as Minari). Minari's
        # storage modules import Pillow without declaring it.
        "minari": ["minari[arrow,hdf5]>=0.5.4,<0.6", "pillow>=10"],
        # Recording with Minari's `DataCollector` (its `create` extra: jax), as
        # the Minari example and tests do.
        "minari-create": ["minari[arrow,create,hdf5]>=0.5.4,<0.6", "pillow>=10"],
    },
)
