"""rllib-fork: fixes for Ray RLlib's offline training, applied to an installed ray.

Importing this package is cheap: it never imports ``ray``. The fork's modules
live at their upstream paths below this package (``rllib/offline/...`` mirrors
``ray/rllib/offline/...``) and are put in effect by :mod:`rllib._fork`.
"""

__version__ = "0.1.0"


def is_active() -> bool:
    """Returns whether the fork's modules are in effect in this process.

    The fork is active when its start-up hook was armed (the package is
    installed, ``RLLIB_FORK_DISABLE`` is not set) and the installed ray is a
    supported version.
    """
    from rllib._fork import boot

    return boot.is_armed() and boot.ray_version_supported()


__all__ = ["is_active", "__version__"]
