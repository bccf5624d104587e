"""The fork's changes to ``ray.rllib.utils.checkpoints``: local paths as typed.

Without a ``filesystem``, ``Checkpointable`` hands its path to
``pyarrow.fs.FileSystem.from_uri``, which takes URIs and absolute paths only.
``algo.save_to_path("ckpt")``, ``RLModule.from_checkpoint("./ckpt")``,
``Algorithm.from_checkpoint("~/ckpt")`` and ``get_checkpoint_info("ckpt")``
all failed with ``ArrowInvalid: URI has empty scheme``. A path without a
scheme is now a local path: ``~`` is expanded and a relative path is taken
from the current directory, as ``open()`` does. URIs (``s3://``,
``file://``) and calls that pass a ``filesystem`` are unchanged.
"""

import os
import pathlib
from typing import Optional, Union

from ray.rllib.utils import checkpoints as _upstream

_upstream_save_to_path = _upstream.Checkpointable.save_to_path
_upstream_restore_from_path = _upstream.Checkpointable.restore_from_path
_upstream_from_checkpoint = _upstream.Checkpointable.from_checkpoint.__func__
_upstream_get_checkpoint_info = _upstream.get_checkpoint_info


def _absolute_if_local(path, filesystem):
    """``path`` made absolute where it is a local path that pyarrow would
    refuse (relative, or starting with ``~``); anything else as it is."""
    if filesystem is not None or not isinstance(path, (str, os.PathLike)):
        return path
    path = os.fspath(path)
    if not path or "://" in path:
        return path
    return os.path.abspath(os.path.expanduser(path))


def save_to_path(
    self,
    path: Optional[Union[str, pathlib.Path]] = None,
    *,
    state=None,
    filesystem=None,
    use_msgpack: bool = False,
) -> str:
    path = _absolute_if_local(path, filesystem)
    return _upstream_save_to_path(
        self, path, state=state, filesystem=filesystem, use_msgpack=use_msgpack
    )


def restore_from_path(
    self,
    path: Union[str, pathlib.Path],
    *,
    component: Optional[str] = None,
    filesystem=None,
    **kwargs,
) -> None:
    path = _absolute_if_local(path, filesystem)
    return _upstream_restore_from_path(
        self, path, component=component, filesystem=filesystem, **kwargs
    )


def from_checkpoint(
    cls,
    path: Union[str, pathlib.Path],
    filesystem=None,
    **kwargs,
):
    path = _absolute_if_local(path, filesystem)
    return _upstream_from_checkpoint(cls, path, filesystem=filesystem, **kwargs)


def get_checkpoint_info(checkpoint, filesystem=None):
    checkpoint = _absolute_if_local(checkpoint, filesystem)
    return _upstream_get_checkpoint_info(checkpoint, filesystem)


#: Upstream names in ``ray.rllib.utils.checkpoints`` that this module replaces.
REPLACES = {
    "Checkpointable.save_to_path": save_to_path,
    "Checkpointable.restore_from_path": restore_from_path,
    "Checkpointable.from_checkpoint": classmethod(from_checkpoint),
    "get_checkpoint_info": get_checkpoint_info,
}
