"""Start-up half of the overlay, run from ``rllib_fork.pth`` in every process.

It reads one environment variable and puts one finder on ``sys.meta_path``.
Importing this module (with ``rllib``, ``rllib._fork`` and the registry) is
the whole start-up cost, the ``rllib._fork.boot`` line of
``python -X importtime -c pass`` (about 3 ms on a 2-core CI machine, see the
README). The finder acts lazily:

- when ``ray`` is imported, it calls :func:`rllib._fork.overlay.install` right
  after ``ray/__init__.py`` has run;
- it serves the fork's new modules under their upstream names
  (``ray.rllib.offline.episode_files`` is ``rllib.offline.episode_files``);
- when a replacing fork module is imported before its upstream module (a Ray
  worker unpickling a fork class does that), it imports the upstream module
  first, so the fork module is complete when its replacements are applied.
"""

import _thread
import os
import sys

from rllib._fork import registry

DISABLE_ENV_VAR = "RLLIB_FORK_DISABLE"

_armed = False


def is_armed() -> bool:
    """Whether the overlay is armed in this process.

    True when :func:`arm` ran, ``RLLIB_FORK_DISABLE`` was not set, and (for a
    supported ray) the drift guard found every upstream object the fork
    replaces unchanged (:func:`rllib._fork.fingerprints.verify`).
    """
    return _armed and (not ray_version_supported() or upstream_unchanged())


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


def upstream_unchanged() -> bool:
    """Runs the drift guard (once per process; it warns once on drift).

    Reads the upstream source files from disk; imports none of them.
    """
    from rllib._fork import fingerprints

    return fingerprints.verify()


def overlay_allowed() -> bool:
    """Whether fork objects may be put in effect in this process at all."""
    return _armed and ray_version_supported() and upstream_unchanged()


class _AliasLoader:
    """Loads ``ray.<x>`` as the already importable fork module ``<x>``.

    It also serves ``python -m ray.<x>``: ``runpy`` asks the loader for the
    module's code (``get_code``) and sets ``sys.argv[0]`` to the spec's origin,
    so :meth:`spec` gives the alias the fork file as its origin.
    """

    def __init__(self, target: str):
        self._target = target

    @classmethod
    def spec(cls, fullname: str, target: str):
        """The spec of alias ``fullname`` for fork module ``target``."""
        from importlib.machinery import ModuleSpec

        loader = cls(target)
        target_spec = loader._target_spec()
        spec = ModuleSpec(
            fullname,
            loader,
            origin=target_spec.origin,
            is_package=target_spec.submodule_search_locations is not None,
        )
        if spec.submodule_search_locations is not None:
            spec.submodule_search_locations = list(
                target_spec.submodule_search_locations
            )
        return spec

    def _target_spec(self):
        # The path finder, not `importlib.util.find_spec`: an imported fork
        # module's `__spec__` is this alias spec, which would point back here.
        import importlib
        from importlib.machinery import PathFinder

        parent, _, _ = self._target.rpartition(".")
        search_path = importlib.import_module(parent).__path__
        return PathFinder.find_spec(self._target, search_path)

    def create_module(self, spec):
        import importlib

        return importlib.import_module(self._target)

    def exec_module(self, module):
        # The fork module executed when `create_module` imported it.
        pass

    def is_package(self, fullname) -> bool:
        return self._target_spec().submodule_search_locations is not None

    def get_code(self, fullname):
        """The fork module's code object (what ``runpy`` runs as ``__main__``)."""
        return self._target_spec().loader.get_code(self._target)

    def get_source(self, fullname):
        return self._target_spec().loader.get_source(self._target)


class _CallAfterExec:
    """Wraps a module loader to call ``callback(module)`` once it has run."""

    def __init__(self, loader, callback):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._callback(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _install_overlay(_ray_module) -> None:
    from rllib._fork import overlay

    overlay.install()


class ForkFinder:
    """A ``sys.meta_path`` finder that only answers for a handful of names."""

    _replacing_modules = frozenset(registry.REPLACING_MODULES)

    def __init__(self):
        # Thread id -> fork modules that thread loads ahead of their upstream
        # module (`_thread`, not `threading`: nothing extra at start-up).
        self._pending = {}

    def loading_before_upstream(self) -> set:
        """Fork modules this thread is loading ahead of their upstream module."""
        return self._pending.setdefault(_thread.get_ident(), set())

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "ray":
            return self._wrapped_spec("ray", path, target, _install_overlay)
        target = registry.new_module_target(fullname)
        if target is not None and overlay_allowed():
            return _AliasLoader.spec(fullname, target)
        if fullname in self._replacing_modules:
            return self._upstream_first_spec(fullname, path, target)
        return None

    def _upstream_first_spec(self, fullname, path, target):
        """Imports the upstream module first; applies the fork module after it ran.

        The upstream module's post-import hook skips ``fullname`` meanwhile: the
        fork module would still be half-initialized.
        """
        pending = self.loading_before_upstream()
        if fullname in pending or not overlay_allowed():
            return None
        import importlib

        upstream = registry.upstream_name(fullname)
        pending.add(fullname)
        try:
            importlib.import_module(upstream)
        finally:
            pending.discard(fullname)

        def apply(fork_module):
            from rllib._fork import overlay

            overlay.apply(fullname, sys.modules[upstream])

        return self._wrapped_spec(fullname, path, target, apply)

    def _wrapped_spec(self, fullname, path, target, callback):
        """The spec the other finders give, with ``callback`` run after exec."""
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _CallAfterExec(spec.loader, callback)
                return spec
        return None


_finder = None


def is_loading_before_upstream(fork_module: str) -> bool:
    """Whether ``fork_module`` is being imported ahead of its upstream module."""
    return _finder is not None and fork_module in _finder.loading_before_upstream()


def arm() -> None:
    """Arms the overlay in this process unless ``RLLIB_FORK_DISABLE`` is set."""
    global _armed, _finder
    if _armed or disabled_by_env():
        return
    _armed = True
    _finder = ForkFinder()
    sys.meta_path.insert(0, _finder)
    if "ray" in sys.modules:
        # Armed late (e.g. from a test or `python -m`): install right away.
        from rllib._fork import overlay

        overlay.install()
