"""Re-writes episode datasets with `EpisodeWriter`.

`convert_dataset` reads any dataset training reads (`EpisodeWriter` files,
RLlib's recorder output, hand-rolled `item` files of msgpack episode states) and
writes it again with `EpisodeWriter`: every episode checked, the spaces in the
file metadata, bounded rows per file and, if asked, compressed payloads.

The output is built in a hidden staging directory next to the destination
and moved into place only when every episode is written, so a failed
conversion leaves the destination as it was. `convert_minari_dataset` does
the same around the Minari converter (`rllib.offline.tools.minari_io`), if present.

The command line front end is `python -m ray.rllib.offline.episodes convert`.
"""

import importlib
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import gymnasium as gym
import pyarrow.fs as pa_fs
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.action_units import ACTION_UNITS_KEY
from rllib.offline.episode_files.filesystem import resolve_filesystem
from rllib.offline.episode_files.reader import PathLike, decode_episode
from rllib.offline.episode_files.writer import EpisodeWriter
from rllib.offline.tools.inspection import (
    EpisodeFile,
    EpisodeRow,
    Problem,
    count_rows,
    open_episode_files,
    progress_bar,
    recorded_spaces,
)

#: Prefix of a dataset id that names a Minari dataset (`minari:<dataset_id>`).
MINARI_PREFIX = "minari:"
#: The module that converts Minari datasets (optional).
MINARI_MODULE = "rllib.offline.tools.minari_io"


class ConversionError(ValueError):
    """A row or file of the source cannot be converted (message says which)."""


class DestinationError(FileExistsError):
    """The destination cannot be written (exists, is not empty, is remote)."""


@PublicAPI(stability="alpha")
@dataclass
class ConversionResult:
    """What `convert_dataset` wrote.

    Attributes:
        destination: The output directory.
        files: The files written, in the destination.
        num_episodes: Episodes written.
        observation_space: The observation space recorded, or None.
        action_space: The action space recorded, or None.
        skipped: The rows left out (with `skip_invalid=True`), with the reason.
    """

    destination: str
    files: List[str] = field(default_factory=list)
    num_episodes: int = 0
    observation_space: Optional[gym.Space] = None
    action_space: Optional[gym.Space] = None
    skipped: List[Problem] = field(default_factory=list)


# ---------------------------------------------------------------------------
# The destination.
# ---------------------------------------------------------------------------


def _local_destination(destination: str) -> str:
    fs, resolved = resolve_filesystem(destination)
    if not isinstance(fs, pa_fs.LocalFileSystem):
        raise DestinationError(
            f"The destination `{destination}` is not a local directory. Convert "
            "into a local directory, then copy it to remote storage (for example "
            "with `aws s3 sync` or `gsutil rsync`)."
        )
    return resolved


def check_destination(destination: str, overwrite: bool = False) -> str:
    """Checks that `destination` may be written; returns its absolute path.

    Raises:
        DestinationError: If it is a file, a non-empty directory (unless
            `overwrite`), or not on the local filesystem.
    """
    path = _local_destination(destination)
    if os.path.isfile(path):
        raise DestinationError(
            f"The destination `{destination}` is a file; pass a directory path."
        )
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise DestinationError(
            f"The destination `{destination}` is not empty "
            f"({len(os.listdir(path))} entries). Pass an empty or new directory, "
            "or `overwrite=True` (`--overwrite`) to replace its contents."
        )
    return path


class _Staging:
    """A hidden directory beside the destination, moved into place on success."""

    def __init__(self, destination: str):
        parent, name = os.path.split(destination.rstrip(os.sep))
        self.destination = destination
        self.path = os.path.join(parent, f".{name}.converting-{uuid.uuid4().hex[:8]}")

    def __enter__(self) -> "_Staging":
        os.makedirs(self.path)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)

    def commit(self) -> None:
        """Replaces the destination by the staging directory."""
        if os.path.isdir(self.destination):
            shutil.rmtree(self.destination)
        os.replace(self.path, self.destination)


def _moved(files: List[str], staging: str, destination: str) -> List[str]:
    return [os.path.join(destination, os.path.relpath(f, staging)) for f in files]


# ---------------------------------------------------------------------------
# Episode datasets.
# ---------------------------------------------------------------------------


def _resolve_spaces(
    files: List[EpisodeFile],
    observation_space: Optional[gym.Space],
    action_space: Optional[gym.Space],
) -> Dict[str, Optional[gym.Space]]:
    """The spaces to write: given ones, else recorded ones (must agree)."""
    recorded, disagreements = recorded_spaces(files)
    if disagreements:
        raise ConversionError(
            f"{disagreements[0]} Convert the two kinds of episodes separately."
        )
    given = {"observation_space": observation_space, "action_space": action_space}
    spaces = {}
    for name, space in given.items():
        if space is not None and name in recorded and recorded[name] != space:
            raise ConversionError(
                f"The source records the `{name}` {recorded[name]}, but "
                f"{space} was given. Leave the space out (the recorded one is "
                "kept), or convert episodes that were recorded without one."
            )
        spaces[name] = space if space is not None else recorded.get(name)
    return spaces


@PublicAPI(stability="alpha")
def _recorded_action_units(files) -> Optional[str]:
    """The action units the source records (kept in the copy), None if no file
    records them (the copy then records none either)."""
    found = {}
    for episode_file in files:
        units = (episode_file.metadata or {}).get(ACTION_UNITS_KEY)
        if units is not None:
            found.setdefault(units, episode_file.path)
    if len(found) > 1:
        listed = ", ".join(
            f"`{path}` records {units!r}" for units, path in found.items()
        )
        raise ConversionError(
            f"The source's files disagree on their action units ({listed}). "
            "Convert the files of each kind separately."
        )
    return next(iter(found), None)


def convert_dataset(
    source: PathLike,
    destination: str,
    *,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
    compression: Optional[str] = None,
    parquet_compression: str = "zstd",
    max_rows_per_file: int = 1000,
    to_numpy: bool = False,
    skip_invalid: bool = False,
    overwrite: bool = False,
    progress: bool = False,
) -> ConversionResult:
    """Reads every episode under `source` and writes it with `EpisodeWriter`.

    Args:
        source: A file, a directory (searched recursively), or a list of them;
            local paths or URIs. Any format `read_episodes` reads.
        destination: A local directory; it must be empty or new unless
            `overwrite`. It may be `source` itself with `overwrite=True`.
        observation_space: The observation space to record, for sources that
            record none. A source that records another one is an error.
        action_space: Same for actions.
        compression: Payload compression (None keeps files readable by RLlib
            2.60 and plain msgpack readers; "zstd", "lz4", "gzip" or "brotli").
        parquet_compression: Parquet page compression.
        max_rows_per_file: Episodes per output file.
        to_numpy: Whether to numpy-ize episodes stored as per-step lists
            (smaller files, faster to decode).
        skip_invalid: Whether to leave out rows that do not decode or that
            the writer rejects (not done, outside the spaces) instead of
            stopping at the first one. `result.skipped` lists them.
        overwrite: Whether to replace a non-empty `destination`.
        progress: Whether to show a progress bar on stderr.

    Returns:
        A `ConversionResult`.

    Raises:
        FileNotFoundError: If `source` does not exist or holds no parquet file.
        DestinationError: If `destination` may not be written.
        ConversionError: If a file or row cannot be converted (and not
            `skip_invalid`), or the spaces conflict. The destination is left
            unchanged.
    """
    files = open_episode_files(source)
    path = check_destination(destination, overwrite)
    spaces = _resolve_spaces(files, observation_space, action_space)
    action_units = _recorded_action_units(files)
    result = ConversionResult(destination=path)
    with _Staging(path) as staging:
        writer = EpisodeWriter(
            staging.path,
            observation_space=spaces["observation_space"],
            action_space=spaces["action_space"],
            max_rows_per_file=max_rows_per_file,
            compression=compression,
            parquet_compression=parquet_compression,
            action_units=action_units,
        )
        with writer, progress_bar(count_rows(files), "convert", progress) as bar:
            for episode_file in files:
                if not episode_file.readable:
                    if not skip_invalid:
                        raise ConversionError(
                            f"{episode_file.problem} Or pass `--skip-invalid` "
                            "(`skip_invalid=True`) to leave the file out."
                        )
                    result.skipped.append(episode_file.problem)
                    continue
                _convert_file(
                    episode_file,
                    writer,
                    spaces,
                    to_numpy=to_numpy,
                    skip_invalid=skip_invalid,
                    skipped=result.skipped,
                    bar=bar,
                )
        result.num_episodes = writer.num_episodes
        result.observation_space = writer.observation_space
        result.action_space = writer.action_space
        staging.commit()
        result.files = _moved(writer.files, staging.path, path)
    return result


def _convert_row(
    row: EpisodeRow,
    writer: EpisodeWriter,
    spaces: Dict[str, Optional[gym.Space]],
    to_numpy: bool,
) -> Optional[Problem]:
    """Writes one row's episode; returns why it cannot be written, or None.

    Write failures of the filesystem (`OSError`) propagate.
    """

    def problem(kind: str, error: Exception, what: str = "") -> Problem:
        reason = f"{type(error).__name__}: {str(error).rstrip('.')}"
        return Problem(
            kind,
            f"{what}({reason})" if what else reason,
            file=row.file,
            row=row.index,
            episode_id=row.episode_id,
        )

    try:
        episode = decode_episode(
            row.payload,
            observation_space=spaces["observation_space"],
            action_space=spaces["action_space"],
        )
    except Exception as error:  # msgpack raises its own exception types.
        return problem("undecodable", error, "cannot decode the payload ")
    if to_numpy and not episode.is_numpy:
        episode.to_numpy()
    try:
        writer.write(episode)
    except (ValueError, TypeError) as error:
        return problem("rejected", error)
    return None


def _convert_file(
    episode_file: EpisodeFile,
    writer: EpisodeWriter,
    spaces: Dict[str, Optional[gym.Space]],
    *,
    to_numpy: bool,
    skip_invalid: bool,
    skipped: List[Problem],
    bar: Any,
) -> None:
    for row in episode_file.rows():
        bar.update(1)
        problem = _convert_row(row, writer, spaces, to_numpy)
        if problem is not None:
            if not skip_invalid:
                raise ConversionError(
                    f"{problem}. Fix or drop this row, or pass `--skip-invalid` "
                    "(`skip_invalid=True`) to leave it out."
                )
            skipped.append(problem)
        bar.set_postfix(
            written=writer.num_episodes, skipped=len(skipped), refresh=False
        )


# ---------------------------------------------------------------------------
# Minari datasets.
# ---------------------------------------------------------------------------


def minari_converter() -> Callable[..., Any]:
    """Returns `rllib.offline.tools.minari_io.convert_minari`.

    Raises:
        ImportError: If this installation has no Minari support.
    """
    try:
        module = importlib.import_module(MINARI_MODULE)
    except ModuleNotFoundError as error:
        if error.name != MINARI_MODULE:
            raise
        raise ImportError(
            f"Cannot convert a Minari dataset: this rllib-fork has no Minari "
            f"support (`{MINARI_MODULE}` is missing). Upgrade rllib-fork."
        ) from error
    return module.convert_minari


@PublicAPI(stability="alpha")
def convert_minari_dataset(
    dataset_id: str,
    destination: str,
    *,
    overwrite: bool = False,
    progress: bool = False,
    **writer_kwargs: Any,
) -> ConversionResult:
    """Converts a Minari dataset into episode files in `destination`.

    Args:
        dataset_id: The Minari dataset id, e.g. "D4RL/door/human-v2".
        destination: A local directory; empty or new unless `overwrite`.
        overwrite: Whether to replace a non-empty `destination`.
        progress: Whether to show a progress bar on stderr.
        **writer_kwargs: Passed on to the `EpisodeWriter`
            (`max_rows_per_file`, `compression`, ...).

    Returns:
        A `ConversionResult` with the files written.

    Raises:
        ImportError: If Minari support or the `minari` package is missing.
        FileNotFoundError: If there is no such dataset.
        DestinationError: If `destination` may not be written.
    """
    convert = minari_converter()
    path = check_destination(destination, overwrite)
    with _Staging(path) as staging:
        convert(dataset_id, staging.path, progress=progress, **writer_kwargs)
        staging.commit()
    files = open_episode_files(path)
    spaces, _ = recorded_spaces(files)
    return ConversionResult(
        destination=path,
        files=[f.path for f in files],
        num_episodes=count_rows(files),
        observation_space=spaces.get("observation_space"),
        action_space=spaces.get("action_space"),
    )


__all__ = [
    "ConversionError",
    "ConversionResult",
    "DestinationError",
    "convert_dataset",
    "convert_minari_dataset",
]
