"""How `config.offline_data(...)` says where and how to read episode files.

Two settings that the in-memory path must read the way Ray Data reads them:

- `input_filesystem` (with `input_filesystem_kwargs`): None (local or
  inferred from the path), "s3", "gcs" or "abs" built from the kwargs as
  upstream's `OfflineData` builds them, a `pyarrow.fs.FileSystem`, or an
  fsspec filesystem (wrapped for pyarrow).
- `input_read_method_kwargs` for `ray.data.read_parquet`: the kwargs that
  only schedule the read are applied to the decoding tasks, those that pick
  files are applied to the listing, and any other one (a row `filter`,
  `columns`, a `partition_filter`, ...) makes the data stream through Ray
  Data, which reads it exactly as the user asked.
"""

from typing import Any, Dict, List, Optional

import pyarrow.fs as pa_fs

#: `read_parquet` kwargs that choose where and how the read tasks run: the
#: decoding tasks take them (as `ray.remote` options).
SCHEDULING_KWARGS = (
    "num_cpus",
    "num_gpus",
    "memory",
    "resources",
    "accelerator_type",
    "runtime_env",
    "label_selector",
    "max_calls",
)

#: `read_parquet` kwargs that change neither which rows are read nor their
#: content, only how Ray Data splits, orders or annotates them; the in-memory
#: path decodes every row once and samples uniformly, so they do not apply.
NEUTRAL_KWARGS = (
    "filesystem",
    "parallelism",
    "concurrency",
    "override_num_blocks",
    "shuffle",
    "include_paths",
    "include_row_hash",
    "partitioning",
    "fallback_strategy",
    "ray_remote_args",
)

#: `read_parquet` kwargs that pick files; the listing applies them.
LISTING_KWARGS = ("file_extensions",)


#: The filesystem names RLlib's offline settings accept, as upstream maps them.
CLOUD_FILESYSTEMS = ("s3", "gcs", "abs")


def cloud_filesystem(name: str, kwargs: Optional[Dict[str, Any]] = None):
    """Builds the filesystem `name` ("s3", "gcs" or "abs") stands for, with
    `kwargs`, as upstream's `OfflineData` and recorder do."""
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
    """The filesystem object `config.input_filesystem` names, as upstream builds it.

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


def unsupported_read_kwargs(config) -> List[str]:
    """`input_read_method_kwargs` the in-memory path cannot honour exactly."""
    known = {*SCHEDULING_KWARGS, *NEUTRAL_KWARGS, *LISTING_KWARGS}
    kwargs = config.input_read_method_kwargs or {}
    odd = [name for name in kwargs if name not in known and name != "columns"]
    columns = kwargs.get("columns")
    if columns is not None and "item" not in columns:
        odd.append("columns")  # Without the episodes: let Ray Data say so.
    return sorted(odd)


def listing_kwargs(config) -> Dict[str, Any]:
    """The kwargs of `list_episode_files` that `input_read_method_kwargs` sets."""
    kwargs = config.input_read_method_kwargs or {}
    return {name: kwargs[name] for name in LISTING_KWARGS if name in kwargs}


def task_options(config) -> Dict[str, Any]:
    """`ray.remote` options for the decoding tasks, from the read kwargs."""
    kwargs = config.input_read_method_kwargs or {}
    options = dict(kwargs.get("ray_remote_args") or {})
    options.update({k: kwargs[k] for k in SCHEDULING_KWARGS if k in kwargs})
    return options
