"""Start-up half of the overlay, run from ``rllib_fork.pth`` in every process.

Costs a few microseconds: it reads one environment variable and puts one
finder on ``sys.meta_path``. That finder does two things, both lazily:

- when ``ray`` is imported, it calls :func:`rllib._fork.overlay.install` right
  after ``ray/__init__.py`` has run;
- it serves the fork's new modules under their upstream names
  (``ray.rllib.offline.episode_writer`` is ``rllib.offline.episode_writer``).
"""

import os
import sys

from rllib._fork import registry

DISABLE_ENV_VAR = "RLLIB_FORK_DISABLE"

_armed = False


def is_armed() -> bool:
    """Whether :func:`arm` ran in this process and was not disabled."""
    return _armed


def disabled_by_env() -> bool:
    return os.environ.get(DISABLE_ENV_VAR, "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )


def ray_version() -> str:
    """The installed ray version, without importing ray if it is not loaded."""
    ray = sys.modules.get("ray")
    version = getattr(ray, "__version__", None)
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version

        try:
            version = dist_version("ray")
        except PackageNotFoundError:
            version = ""
    return version


def ray_version_supported() -> bool:
    return ray_version().startswith(registry.SUPPORTED_RAY_PREFIX)


class _AliasLoader:
    """Loads ``ray.<x>`` as the already importable fork module ``<x>``."""

    def __init__(self, target: str):
        self._target = target

    def create_module(self, spec):
        import importlib

        return importlib.import_module(self._target)

    def exec_module(self, module):
        # The fork module executed when `create_module` imported it.
        pass


class _RayImportTrigger:
    """Wraps ray's loader so the overlay installs once ``ray`` has loaded."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        from rllib._fork import overlay

        overlay.install()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class ForkFinder:
    """A ``sys.meta_path`` finder that only answers for a handful of names."""

    _new_modules = {registry.upstream_name(m): m for m in registry.NEW_MODULES}

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "ray":
            return self._ray_spec(path, target)
        if fullname in self._new_modules and ray_version_supported():
            from importlib.machinery import ModuleSpec

            return ModuleSpec(fullname, _AliasLoader(self._new_modules[fullname]))
        return None

    def _ray_spec(self, path, target):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec("ray", path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _RayImportTrigger(spec.loader)
                return spec
        return None


def arm() -> None:
    """Arms the overlay in this process unless ``RLLIB_FORK_DISABLE`` is set."""
    global _armed
    if _armed or disabled_by_env():
        return
    _armed = True
    sys.meta_path.insert(0, ForkFinder())
    if "ray" in sys.modules:
        # Armed late (e.g. from a test or `python -m`): install right away.
        from rllib._fork import overlay

        overlay.install()
