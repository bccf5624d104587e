"""Applies the fork's modules to the installed ray (second half of the overlay).

:func:`install` runs once per process, right after ``ray`` itself is imported.
It checks the ray version and, with the drift guard
(:mod:`rllib._fork.fingerprints`), that no upstream object the fork replaces
has changed; only then does it register one wrapt post-import hook per fork
module. Either check failing keeps the whole overlay off for the process. A
hook fires when its upstream module has finished loading and, before any other
module can bind the upstream names, swaps in the fork's objects.
"""

import importlib
import logging
import threading
import warnings

from rllib._fork import boot, registry

logger = logging.getLogger("ray." + __name__)

_lock = threading.Lock()
_installed = False
_warned_version = False

#: (upstream module, dotted name) -> the upstream object that was replaced.
ORIGINALS = {}


def install() -> bool:
    """Registers the post-import hooks. Returns whether the overlay is on."""
    global _installed, _warned_version
    with _lock:
        if _installed:
            return True
        if not boot.ray_version_supported():
            if not _warned_version:
                _warned_version = True
                warnings.warn(
                    f"rllib-fork supports ray=={registry.SUPPORTED_RAY_VERSIONS} "
                    f"but ray {boot.ray_version() or '(not installed)'} is "
                    "installed; the fork stays off and upstream RLlib runs "
                    "unchanged. Install a supported ray, e.g. "
                    f"`pip install 'ray[rllib]=={registry.SUPPORTED_RAY_VERSIONS}'`.",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return False
        if not boot.upstream_unchanged():
            return False  # The drift guard warned once and named the objects.
        _installed = True

    import wrapt

    for fork_module in registry.REPLACING_MODULES:
        wrapt.register_post_import_hook(
            _hook_for(fork_module), registry.upstream_name(fork_module)
        )
    return True


def _hook_for(fork_module: str):
    def hook(upstream_module):
        apply(fork_module, upstream_module)

    return hook


def apply(fork_module_name: str, upstream_module) -> None:
    """Replaces every name in ``fork_module.REPLACES`` on ``upstream_module``."""
    if boot.is_loading_before_upstream(fork_module_name):
        return  # Applied by the boot finder once the fork module has run.
    if not boot.overlay_allowed():
        return  # Unsupported ray or drift: the fork stays off, all of it.
    from rllib._fork import fingerprints

    fork_module = importlib.import_module(fork_module_name)
    for dotted, replacement in fork_module.REPLACES.items():
        if not fingerprints.is_verified(upstream_module.__name__, dotted):
            raise RuntimeError(
                f"rllib-fork: `{fork_module_name}` replaces `{dotted}` in "
                f"`{upstream_module.__name__}`, but no fingerprint of it is "
                f"recorded for ray {boot.ray_version()}, so the drift guard "
                "cannot tell whether upstream changed it. Fork maintainers: "
                "review the upstream object, then run "
                f"`{fingerprints.UPDATE_COMMAND}`."
            )
        owner, attr = _resolve_owner(upstream_module, dotted)
        if not hasattr(owner, attr):
            raise AttributeError(
                f"rllib-fork: `{fork_module_name}` replaces `{dotted}` in "
                f"`{upstream_module.__name__}`, which the installed ray "
                f"{boot.ray_version()} does not define. The fork supports "
                f"ray=={registry.SUPPORTED_RAY_VERSIONS}; set "
                f"{boot.DISABLE_ENV_VAR}=1 to run upstream RLlib unchanged."
            )
        ORIGINALS.setdefault((upstream_module.__name__, dotted), getattr(owner, attr))
        setattr(owner, attr, replacement)
    logger.debug("rllib-fork: applied %s", fork_module_name)


def _resolve_owner(module, dotted: str):
    """Returns (object holding the last attribute, last attribute name)."""
    *parents, attr = dotted.split(".")
    owner = module
    for part in parents:
        owner = getattr(owner, part)
    return owner, attr
