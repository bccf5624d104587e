"""Reads recorded `SingleAgentEpisode`s (and `MultiAgentEpisode`s) back.

Reads the files `ray.rllib.offline.episode_files.writer.EpisodeWriter` writes, and
also files that hold only an `item` column of `msgpack` + `msgpack_numpy`
episode states: the files RLlib 2.60's recorder writes
(`output_write_episodes=True`) and the common
`ray.data.from_items(payloads).write_parquet(...)` recipe.

Example:

.. testcode::
    :skipif: True

    from ray.rllib.offline.episode_files.reader import read_episodes, read_spaces

    observation_space, action_space = read_spaces("/tmp/cartpole-episodes")
    returns = [ep.get_return() for ep in read_episodes("/tmp/cartpole-episodes")]
"""

import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import gymnasium as gym
import pyarrow as pa
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.util.annotations import PublicAPI

from rllib.env.utils.infinite_lookback_buffer import restore_buffer_data
from rllib.offline.episode_files.action_units import (
    ACTION_UNITS_KEY,
    ActionRescaling,
    check_action_units,
)
from rllib.offline.episode_files.filesystem import resolve_filesystem
from rllib.offline.episode_files.multi_agent_state import (
    is_multi_agent_state,
    multi_agent_episode_from_state,
)
from rllib.offline.episode_files.payload import (
    FORMAT_VERSION,
    ITEM_COLUMN,
    METADATA_KEY,
    decompress_payload,
)
from rllib.offline.episode_files.spaces import space_from_json

PathLike = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def _is_hidden(path: str) -> bool:
    return os.path.basename(path.rstrip("/")).startswith((".", "_"))


def _has_extension(path: str, extensions: Optional[Sequence[str]]) -> bool:
    if extensions is None:
        return True
    name = path.lower()
    return any(name.endswith("." + ext.lower().lstrip(".")) for ext in extensions)


@PublicAPI(stability="alpha")
def list_episode_files(
    path: PathLike,
    *,
    filesystem: Optional[pa_fs.FileSystem] = None,
    file_extensions: Optional[Sequence[str]] = ("parquet",),
) -> Tuple[pa_fs.FileSystem, List[str]]:
    """Lists the parquet files under one or more files or directories.

    Directories are searched recursively; names starting with "." or "_"
    (temporary or marker files) are skipped, as Ray Data does.

    Args:
        path: A file, a directory, or a list of them (local paths or URIs).
        filesystem: A `pyarrow.fs.FileSystem` (or fsspec filesystem); None
            infers it from `path`.
        file_extensions: Files in directories are kept if their name ends with
            one of these (case-insensitive, as `ray.data.read_parquet`); None
            keeps all.

    Returns:
        `(filesystem, sorted file paths)`.

    Raises:
        FileNotFoundError: If a path does not exist or holds no parquet file.
    """
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    files = []
    fs = filesystem
    for one in paths:
        fs, resolved = resolve_filesystem(one, filesystem)
        info = fs.get_file_info(resolved)
        if info.type == pa_fs.FileType.File:
            files.append(resolved)
        elif info.type == pa_fs.FileType.Directory:
            selector = pa_fs.FileSelector(resolved, recursive=True)
            found = [
                f.path
                for f in fs.get_file_info(selector)
                if f.type == pa_fs.FileType.File
                and _has_extension(f.path, file_extensions)
                and not any(
                    _is_hidden(part)
                    for part in os.path.relpath(f.path, resolved).split(os.sep)
                )
            ]
            if not found:
                raise FileNotFoundError(
                    f"No parquet files under `{one}`. Pass the directory the "
                    "`EpisodeWriter` (or the recorder) wrote to."
                )
            files.extend(sorted(found))
        else:
            raise FileNotFoundError(f"Episode path `{one}` does not exist.")
    return fs, files


def open_parquet(handle, path: str) -> pq.ParquetFile:
    """Opens one episode file; a file that is not whole parquet names itself.

    Args:
        handle: The open input file.
        path: Its path, for the error message.

    Raises:
        ValueError: If the file is not a readable parquet file (a writer
            killed before its commit, a copy cut short): the message names
            the file and the command that lists every such file.
    """
    try:
        return pq.ParquetFile(handle)
    except (pa.ArrowInvalid, OSError) as error:
        raise ValueError(
            f"Episode file `{path}` is not a readable parquet file "
            f"({type(error).__name__}: {str(error).rstrip('.')}). Move it out of "
            "the dataset directory, or re-write it if it is a truncated episode "
            "file; `python -m ray.rllib.offline.episodes validate DIR` lists "
            "every such file."
        ) from error


@PublicAPI(stability="alpha")
def read_file_metadata(
    path: str, *, filesystem: Optional[pa_fs.FileSystem] = None
) -> Optional[Dict[str, Any]]:
    """Returns the episode metadata of one parquet file, None if it has none.

    Files from RLlib 2.60's recorder or hand-rolled writers carry none.

    Raises:
        ValueError: If the file is not a readable parquet file, was written in
            a newer format version, or its metadata is not valid JSON.
    """
    fs, resolved = resolve_filesystem(path, filesystem)
    with fs.open_input_file(resolved) as handle:
        schema = open_parquet(handle, path).schema_arrow
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        return None
    try:
        metadata = json.loads(raw)
    except ValueError as error:
        raise ValueError(
            f"Episode file `{path}`: the `{METADATA_KEY.decode()}` schema metadata "
            f"is not valid JSON ({error}). Re-write the file with `EpisodeWriter`."
        ) from error
    version = metadata.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(
            f"Episode file `{path}` has format version {version!r}; this reader "
            f"understands versions up to {FORMAT_VERSION}. Upgrade rllib-fork."
        )
    return metadata


@PublicAPI(stability="alpha")
def spaces_from_metadata(
    metadata: Optional[Dict[str, Any]],
) -> Tuple[Optional[gym.Space], Optional[gym.Space]]:
    """Returns `(observation_space, action_space)` from file metadata.

    For files of `MultiAgentEpisode`s, each is a dict of spaces by agent id
    (None if the file records no agent spaces).
    """
    if not metadata:
        return None, None
    if metadata.get("agents") is not None:
        observation_spaces, action_spaces = {}, {}
        for agent_id, specs in metadata["agents"]:
            for spaces, name in (
                (observation_spaces, "observation_space"),
                (action_spaces, "action_space"),
            ):
                if specs.get(name) is not None:
                    spaces[agent_id] = space_from_json(specs[name])
        return observation_spaces or None, action_spaces or None
    obs = metadata.get("observation_space")
    act = metadata.get("action_space")
    return (
        space_from_json(obs) if obs is not None else None,
        space_from_json(act) if act is not None else None,
    )


@PublicAPI(stability="alpha")
def read_spaces(
    path: PathLike, *, filesystem: Optional[pa_fs.FileSystem] = None
) -> Tuple[Optional[gym.Space], Optional[gym.Space]]:
    """Returns the observation and action spaces recorded with the episodes.

    Args:
        path: A file, a directory, or a list of them.
        filesystem: A `pyarrow.fs.FileSystem`; None infers it from `path`.

    Returns:
        `(observation_space, action_space)`; an entry is None where no file
        recorded that space. For `MultiAgentEpisode`s, dicts of spaces by
        agent id.

    Raises:
        ValueError: If two files record different spaces (both are named).
    """
    return _agreed_metadata_under(path, filesystem)[0]


def agreed_spaces(
    files: Sequence[str],
    *,
    filesystem: Optional[pa_fs.FileSystem],
    fix: str,
    where: str = "",
) -> Tuple[Optional[gym.Space], Optional[gym.Space]]:
    """The spaces recorded in the metadata of `files`, which must agree.

    Args:
        files: Episode files.
        filesystem: Their filesystem; None infers it from each path.
        fix: What the error tells the user to do.
        where: Appended to "Episode files" in the error, e.g. " under `dir`".

    Returns:
        `(observation_space, action_space)`; None where no file records one.

    Raises:
        ValueError: If two files record different spaces (both are named).
    """
    return agreed_metadata(files, filesystem=filesystem, fix=fix, where=where)[0]


def agreed_metadata(
    files: Sequence[str],
    *,
    filesystem: Optional[pa_fs.FileSystem],
    fix: str,
    where: str = "",
) -> Tuple[Tuple[Optional[gym.Space], Optional[gym.Space]], Optional[str]]:
    """The spaces and the action units recorded with `files`, which must agree.

    Reads each file's metadata once. Arguments as `agreed_spaces`.

    Returns:
        `((observation_space, action_space), action_units)`; None where no
        file records one.

    Raises:
        ValueError: If two files record different spaces or action units
            (both files are named).
    """
    found: Dict[str, Tuple[Any, str]] = {}
    for file in files:
        metadata = read_file_metadata(file, filesystem=filesystem)
        spaces = spaces_from_metadata(metadata)
        units = action_units_from_metadata(metadata, file)
        for name, value in zip(
            ("observation_space", "action_space", ACTION_UNITS_KEY), (*spaces, units)
        ):
            if value is None:
                continue
            if name not in found:
                found[name] = (value, file)
            elif found[name][0] != value:
                raise ValueError(
                    f"Episode files{where} disagree on the `{name}`: "
                    f"`{found[name][1]}` records {found[name][0]}, `{file}` "
                    f"records {value}. {fix}"
                )
    spaces = (
        found.get("observation_space", (None,))[0],
        found.get("action_space", (None,))[0],
    )
    return spaces, found.get(ACTION_UNITS_KEY, (None,))[0]


def action_units_from_metadata(
    metadata: Optional[Dict[str, Any]], file: str = "?"
) -> Optional[str]:
    """The `action_units` a file's metadata records, None if it records none.

    Raises:
        ValueError: Naming `file`, if the value is not a known unit.
    """
    units = (metadata or {}).get(ACTION_UNITS_KEY)
    try:
        return check_action_units(units, ACTION_UNITS_KEY)
    except ValueError as error:
        raise ValueError(
            f"Episode file `{file}`: {error} Re-write the file with "
            "`EpisodeWriter(action_units=...)`."
        ) from None


@PublicAPI(stability="alpha")
def read_action_units(
    path: PathLike, *, filesystem: Optional[pa_fs.FileSystem] = None
) -> Optional[str]:
    """Returns the units the episodes' actions are recorded in.

    Args:
        path: A file, a directory, or a list of them.
        filesystem: A `pyarrow.fs.FileSystem`; None infers it from `path`.

    Returns:
        "env" (the environment's units), "normalized" ([-1, 1] on bounded
        `Box` leaves, as RLlib's recorder stores them) or None if no file
        records the units (files from ray 2.60 or hand-rolled writers).

    Raises:
        ValueError: If two files record different units (both are named).
    """
    return _agreed_metadata_under(path, filesystem)[1]


def _agreed_metadata_under(path: PathLike, filesystem: Optional[pa_fs.FileSystem]):
    """`agreed_metadata` of the episode files under `path`."""
    fs, files = list_episode_files(path, filesystem=filesystem)
    return agreed_metadata(
        files,
        filesystem=fs,
        fix="Read them separately, or keep one kind of episode per directory.",
    )


def _restore_buffer(buffer, space: Optional[gym.Space]) -> None:
    buffer.data = restore_buffer_data(buffer.data, buffer.finalized, space)


def decode_episode_state(payload: bytes) -> Dict[str, Any]:
    """The `SingleAgentEpisode.get_state()` dict in an `item` payload.

    msgpack turns tuples into lists on the way; `decode_episode` restores them.
    """
    import msgpack
    import msgpack_numpy as mnp

    return msgpack.unpackb(
        decompress_payload(payload), object_hook=mnp.decode, strict_map_key=False
    )


def cannot_decode_error(where: str, error: Exception, hint: str = "") -> ValueError:
    """The error for an `item` payload that does not decode.

    Args:
        where: Words that locate the row, e.g. from `describe_row`.
        error: What decoding raised.
        hint: Appended to the message.
    """
    return ValueError(
        f"Cannot decode {where}: {type(error).__name__}: "
        f"{str(error).rstrip('.')}. The `{ITEM_COLUMN}` column must hold msgpack "
        "+ msgpack_numpy of `SingleAgentEpisode.get_state()` (optionally "
        f"compressed by `EpisodeWriter`); re-write or drop this row.{hint}"
    )


@PublicAPI(stability="alpha")
def decode_episode(
    payload: bytes,
    *,
    observation_space: Optional[Any] = None,
    action_space: Optional[Any] = None,
    action_rescaling: Optional[ActionRescaling] = None,
) -> Union[SingleAgentEpisode, MultiAgentEpisode]:
    """Rebuilds an episode from an `item` payload (compressed or not).

    Args:
        payload: The bytes of one `item` cell.
        observation_space: If given (or recorded in the episode), Tuple
            observations come back as tuples rather than lists. For a
            `MultiAgentEpisode`, a dict of spaces by agent id.
        action_space: Same for actions.
        action_rescaling: Maps the recorded actions to the units a module
            acts in (see `action_units`); None keeps them as recorded.

    Returns:
        The `SingleAgentEpisode`, or the `MultiAgentEpisode` (its
        `module_for()` answers with the mapping recorded with it; other
        agents map to RLlib's default module).
    """
    state = decode_episode_state(payload)
    if is_multi_agent_state(state):
        episode = multi_agent_episode_from_state(state)
        for agent_id, agent_episode in episode.agent_episodes.items():
            _restore_spaces(
                agent_episode,
                (observation_space or {}).get(agent_id),
                (action_space or {}).get(agent_id),
                action_rescaling,
            )
        return episode
    episode = SingleAgentEpisode.from_state(state)
    _restore_spaces(episode, observation_space, action_space, action_rescaling)
    return episode


def _restore_spaces(
    episode: SingleAgentEpisode,
    observation_space: Optional[gym.Space],
    action_space: Optional[gym.Space],
    action_rescaling: Optional[ActionRescaling] = None,
) -> None:
    _restore_buffer(
        episode.observations, observation_space or episode.observation_space
    )
    action_space = action_space or episode.action_space
    _restore_buffer(episode.actions, action_space)
    if action_rescaling is not None:
        action_rescaling.apply_to_episode(episode, action_space)


def describe_row(
    index: int,
    episode_id: Optional[str] = None,
    file: Optional[str] = None,
) -> str:
    """Words that locate one row, for error messages."""
    words = f"row {index}"
    if file:
        words += f" of file `{file}`"
    if episode_id:
        words += f" (episode id `{episode_id}`)"
    return words


@PublicAPI(stability="alpha")
def read_episodes(
    path: PathLike,
    *,
    filesystem: Optional[pa_fs.FileSystem] = None,
    batch_size: int = 64,
) -> Iterator[Union[SingleAgentEpisode, MultiAgentEpisode]]:
    """Yields the episodes stored under `path`, file by file.

    Reads `batch_size` rows at a time, so memory stays bounded.

    Args:
        path: A file, a directory, or a list of them (local paths or URIs).
        filesystem: A `pyarrow.fs.FileSystem`; None infers it from `path`.
        batch_size: Rows read per batch.

    Yields:
        `SingleAgentEpisode`s or `MultiAgentEpisode`s (not numpy-ized: as
        they were written).

    Raises:
        ValueError: If a file has no `item` column, or a row cannot be decoded
            (the message names the file, the row and, if known, the episode id).
    """
    fs, files = list_episode_files(path, filesystem=filesystem)
    for file in files:
        obs_space, act_space = spaces_from_metadata(
            read_file_metadata(file, filesystem=fs)
        )
        with fs.open_input_file(file) as handle:
            rows = iter_payloads(
                open_parquet(handle, file), file, batch_size=batch_size
            )
            for row, payload, episode_id in rows:
                try:
                    episode = decode_episode(
                        payload, observation_space=obs_space, action_space=act_space
                    )
                except Exception as error:
                    raise cannot_decode_error(
                        describe_row(row, episode_id, file), error
                    ) from error
                yield episode


def iter_payloads(
    parquet: pq.ParquetFile, path: str, *, batch_size: int, first_row: int = 0
) -> Iterator[Tuple[int, bytes, Optional[str]]]:
    """Yields `(row, payload, episode_id)` for the rows of one episode file.

    Args:
        parquet: The open file.
        path: Its path, for the error message.
        batch_size: Rows read per batch.
        first_row: Rows before it are skipped without being converted.

    Raises:
        ValueError: If the file has no `item` column.
    """
    names = parquet.schema_arrow.names
    if ITEM_COLUMN not in names:
        raise ValueError(
            f"`{path}` has no `{ITEM_COLUMN}` column (columns: {names}); it "
            "does not hold recorded episodes. For tabular data use "
            "`input_read_episodes=False`."
        )
    columns = [c for c in (ITEM_COLUMN, Columns.EPS_ID) if c in names]
    row = 0
    for batch in parquet.iter_batches(batch_size=batch_size, columns=columns):
        if row + batch.num_rows <= first_row:
            row += batch.num_rows
            continue
        items = batch.column(ITEM_COLUMN).to_pylist()
        if Columns.EPS_ID in columns:
            ids = batch.column(Columns.EPS_ID).to_pylist()
        else:
            ids = [None] * len(items)
        for payload, episode_id in zip(items, ids):
            if row >= first_row:
                yield row, payload, episode_id
            row += 1


__all__ = [
    "decode_episode",
    "list_episode_files",
    "read_episodes",
    "read_action_units",
    "read_file_metadata",
    "read_spaces",
]
