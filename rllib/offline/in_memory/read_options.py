"""How the in-memory path honours `config.offline_data(input_read_method_kwargs=...)`.

The kwargs are meant for `ray.data.read_parquet`. Those that only schedule
the read are applied to the decoding tasks, those that pick files are applied
to the listing, and any other one (a row `filter`, `columns`, a
`partition_filter`, ...) makes the data stream through Ray Data, which reads
it exactly as the user asked. (`input_filesystem` is read by
`rllib.offline.episode_files.filesystem.input_filesystem`.)
"""

from typing import Any, Dict, List

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
