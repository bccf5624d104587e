"""The filesystems episode files are read from and written to.

One resolver for every reader and writer of episode files: a local path, a
URI (`s3://bucket/dir`), a `pyarrow.fs.FileSystem` or an fsspec filesystem
(wrapped for pyarrow). `input_filesystem` turns RLlib's
`config.offline_data(input_filesystem=..., input_filesystem_kwargs=...)` into
such a filesystem ("s3", "gcs", "abs"), for `OfflineData` and the recorders.
"""

import os
import urllib.parse
from typing import Any, Dict, Optional, Tuple

import pyarrow.fs as pa_fs

#: The filesystem names RLlib's offline settings accept.
CLOUD_FILESYSTEMS = ("s3", "gcs", "abs")


def cloud_filesystem(name: str, kwargs: Optional[Dict[str, Any]] = None):
    """Builds the filesystem `name` ("s3", "gcs" or "abs") stands for, with
    `kwargs`, for `OfflineData` and the recorders."""
    kwargs = kwargs or {}
    if name == "s3":
        return pa_fs.S3FileSystem(**kwargs)
    if name == "gcs":
        import gcsfs

        return gcsfs.GCSFileSystem(**kwargs)
    if name == "abs":
        import adlfs

        return adlfs.AzureBlobFileSystem(**kwargs)
    raise ValueError(f"`name` must be one of {CLOUD_FILESYSTEMS}, got {name!r}.")


def input_filesystem(config) -> Optional[Any]:
    """The filesystem object `config.input_filesystem` names.

    Returns:
        None (infer from the path), a `pyarrow.fs.FileSystem`, or an fsspec
        filesystem ("gcs", "abs", or an fsspec instance).

    Raises:
        ValueError: If `input_filesystem` is none of the above.
    """
    name = config.input_filesystem
    if name is None or isinstance(name, pa_fs.FileSystem) or is_fsspec(name):
        return name
    if name in CLOUD_FILESYSTEMS:
        return cloud_filesystem(name, config.input_filesystem_kwargs)
    raise ValueError(
        f"Unknown `config.offline_data(input_filesystem={name!r})`. Use None "
        "(local, or inferred from `input_`), 's3', 'gcs' or 'abs' (with "
        "`input_filesystem_kwargs`), a `pyarrow.fs.FileSystem` or an fsspec "
        "filesystem instance."
    )


def as_pyarrow(filesystem) -> Optional[pa_fs.FileSystem]:
    """A pyarrow view of `filesystem` (fsspec ones are wrapped); None stays None."""
    if filesystem is None or isinstance(filesystem, pa_fs.FileSystem):
        return filesystem
    return pa_fs.PyFileSystem(pa_fs.FSSpecHandler(filesystem))


def is_fsspec(filesystem) -> bool:
    try:
        import fsspec
    except ImportError:
        return False
    return isinstance(filesystem, fsspec.AbstractFileSystem)


def resolve_filesystem(
    path: str, filesystem: Optional[pa_fs.FileSystem] = None
) -> Tuple[pa_fs.FileSystem, str]:
    """Returns a pyarrow filesystem and the path inside it.

    Args:
        path: A local path (relative and `~` paths are expanded) or a URI
            (`s3://bucket/dir`, `gs://...`).
        filesystem: A `pyarrow.fs.FileSystem`, or an fsspec filesystem (it gets
            wrapped). None: inferred from `path`, local by default.

    Returns:
        `(filesystem, path)`.

    Raises:
        TypeError: If `filesystem` is neither pyarrow nor fsspec.
    """
    path = os.fspath(path)
    if filesystem is None:
        if "://" in path:
            return pa_fs.FileSystem.from_uri(path)
        return pa_fs.LocalFileSystem(), os.path.abspath(os.path.expanduser(path))
    if "://" in path:
        # The filesystem is given: "s3://bucket/key" is "bucket/key" in it
        # (as Ray Data reads it).
        parsed = urllib.parse.urlparse(path)
        path = parsed.netloc + parsed.path
    if isinstance(filesystem, pa_fs.FileSystem) or is_fsspec(filesystem):
        return as_pyarrow(filesystem), path
    raise TypeError(
        f"`filesystem` must be a `pyarrow.fs.FileSystem` (or fsspec) instance, "
        f"got `{type(filesystem).__name__}`."
    )
