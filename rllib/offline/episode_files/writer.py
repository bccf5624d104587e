"""Writes finished `SingleAgentEpisode`s to parquet files RLlib trains on.

Each row of a file holds one episode: the binary column `item` carries
`msgpack` + `msgpack_numpy` of `episode.get_state()`, the layout that
`AlgorithmConfig.offline_data(input_read_episodes=True)` reads. Two small
columns (`eps_id`, `env_steps`) make rows identifiable without decoding them.
The observation and action spaces go, as JSON, into the parquet schema
metadata under the key `rllib.episodes` together with a format version.

`MultiAgentEpisode`s are written the same way, one episode per row, with the
state of `rllib.offline.episode_files.multi_agent_state` (each agent's data is its
`SingleAgentEpisode` state) and each agent's spaces in the metadata (`agents`).
A writer holds one kind of episode.

A payload may be compressed (`compression="zstd"`, ...). A compressed payload
starts with the byte 0xC1, which msgpack never emits, followed by a short
header, so readers tell compressed and plain payloads apart by their first
bytes. RLlib releases before this format read plain payloads only.

Example:

.. testcode::

    import tempfile

    import gymnasium as gym
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode
    from ray.rllib.offline.episode_files.writer import EpisodeWriter

    env = gym.make("CartPole-v1")
    with EpisodeWriter(
        tempfile.mkdtemp(),
        observation_space=env.observation_space,
        action_space=env.action_space,
    ) as writer:
        obs, info = env.reset(seed=0)
        episode = SingleAgentEpisode(observations=[obs], infos=[info])
        done = False
        while not done:
            action = int(obs[2] + obs[3] > 0)
            obs, reward, terminated, truncated, info = env.step(action)
            episode.add_env_step(
                obs, action, reward, infos=info,
                terminated=terminated, truncated=truncated,
            )
            done = terminated or truncated
        writer.write(episode)
    print(len(writer.files))

.. testoutput::

    1
"""

import json
import logging
import uuid
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional

import gymnasium as gym
import pyarrow as pa
import pyarrow.fs as pa_fs
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.action_units import (
    ACTION_UNITS_KEY,
    ENV_UNITS,
    check_action_units,
)
from rllib.offline.episode_files.file_sink import EpisodeFileSink, commit_unclosed
from rllib.offline.episode_files.filesystem import resolve_filesystem
from rllib.offline.episode_files.multi_agent_state import (
    MULTI_AGENT_EPISODE,
)
from rllib.offline.episode_files.payload import (
    ENV_STEPS_COLUMN,
    FORMAT_VERSION,
    ITEM_COLUMN,
    METADATA_KEY,
    PAYLOAD_IDS,
    SINGLE_AGENT_EPISODE,
    Episode,
    check_codec,
    encode_episode,
)

# Public through this module too: `episode_writer.space_to_json`.
from rllib.offline.episode_files.spaces import space_from_json, space_to_json
from rllib.offline.episode_files.validation import validate_episode

logger = logging.getLogger("ray." + __name__)

_DEFAULT_MAX_ROWS_PER_FILE = 1000
_DEFAULT_BUFFER_BYTES = 32 * 1024 * 1024


@PublicAPI(stability="alpha")
class EpisodeWriter:
    """Streams finished episodes into parquet files.

    Writes `SingleAgentEpisode`s or `MultiAgentEpisode`s (one kind per
    writer, set by the first episode or by per-agent space dicts).

    At most `max_rows_per_file` episodes go into one file. A file is written
    under a hidden temporary name (readers such as Ray Data skip names that
    start with "."), then moved to its final name, so a reader never sees a
    half-written file. File names carry a random writer id, so several writers
    (e.g. one per EnvRunner) can share a directory. Memory stays bounded:
    encoded episodes are flushed as a parquet row group every `buffer_bytes`.

    Used as a context manager, the writer closes (and commits what it holds)
    on exit, also when the block raises. A writer that is never closed
    commits its pending episodes when it is garbage-collected or when the
    interpreter exits, and logs a warning naming their count and file; only
    `abort()` discards episodes. A killed process (SIGKILL, power loss) loses
    the episodes not yet committed: those of the file being written.

    Args:
        path: Directory for the files (local path or URI); created if missing.
        observation_space: The space observations lie in. Recorded in the
            file metadata and checked for every step. None: taken from the
            first episode if it carries one. For `MultiAgentEpisode`s, a dict
            of spaces by agent id (int or str); each agent's space is recorded
            and its steps checked.
        action_space: Same for actions.
        max_rows_per_file: Episodes per file.
        compression: Compression of each episode payload: None (readable by
            RLlib releases before this format too), "zstd", "lz4", "gzip" or
            "brotli" (read by `rllib.offline.episode_files.reader` and
            `input_read_episodes=True`).
        parquet_compression: Parquet page compression ("zstd", "snappy",
            "gzip", "none", ...).
        filesystem: A `pyarrow.fs.FileSystem` (or fsspec) instance; None
            infers it from `path` (local by default).
        file_prefix: Start of each file name (default "episodes"): files are
            named `<file_prefix>-<writer id>-<index>.parquet`.
        file_name: Instead of `file_prefix`, a function that names the files:
            called with a file's index (0 for this writer's first file) when
            the file is committed, it returns the file's path relative to
            `path`, optionally with subdirectories (created as needed), ending
            in ".parquet", with no part starting with "." or "_". Names must be
            unique: an existing file is never replaced.
        validate: Whether to check episodes (done, lengths, spaces) on write.
        action_units: The units of the actions written, recorded in the file
            metadata so that training maps them to its module's: "env" (the
            environment's own units, as `env.step()` takes them; the default
            for data you collect yourself) or "normalized" ([-1, 1] on each
            bounded `Box` leaf, what an RLlib module with
            `normalize_actions=True` outputs and RLlib's recorder stores).
            None records nothing; training then takes the actions as they
            are unless `config.offline_data(input_action_units=...)` says.
        buffer_bytes: Encoded bytes buffered before a row group is flushed.

    Raises:
        ValueError: If an argument is out of range, or both `file_prefix` and
            `file_name` are given.
        TypeError: If a space cannot be recorded, or `file_name` is not
            callable.
    """

    def __init__(
        self,
        path: str,
        *,
        observation_space: Optional[Any] = None,
        action_space: Optional[Any] = None,
        max_rows_per_file: int = _DEFAULT_MAX_ROWS_PER_FILE,
        compression: Optional[str] = None,
        parquet_compression: str = "zstd",
        filesystem: Optional[pa_fs.FileSystem] = None,
        file_prefix: Optional[str] = None,
        file_name: Optional[Callable[[int], str]] = None,
        validate: bool = True,
        action_units: Optional[str] = ENV_UNITS,
        buffer_bytes: int = _DEFAULT_BUFFER_BYTES,
    ):
        if not isinstance(max_rows_per_file, int) or max_rows_per_file < 1:
            raise ValueError(
                f"`max_rows_per_file` must be a positive int, got "
                f"{max_rows_per_file!r}."
            )
        if file_name is not None and file_prefix is not None:
            raise ValueError(
                f"Pass either `file_prefix` ({file_prefix!r}) or `file_name`, not "
                "both: `file_name` names the whole file."
            )
        if file_name is not None and not callable(file_name):
            raise TypeError(
                "`file_name` must be a function of the file index that returns "
                f"a relative file name, got `{type(file_name).__name__}`."
            )
        self._compression = check_codec(compression)
        self.action_units = check_action_units(action_units, "action_units")
        filesystem, directory = resolve_filesystem(path, filesystem)
        filesystem.create_dir(directory, recursive=True)
        self.observation_space = observation_space
        self.action_space = action_space
        #: The kind of episode written (`SINGLE_AGENT_EPISODE` or
        #: `MULTI_AGENT_EPISODE`); None until known.
        self.episode_type: Optional[str] = None
        if isinstance(observation_space, dict) or isinstance(action_space, dict):
            self.episode_type = MULTI_AGENT_EPISODE
        elif observation_space is not None or action_space is not None:
            self.episode_type = SINGLE_AGENT_EPISODE
        # Encode now so that an unsupported space fails at construction.
        self._space_specs = self._encode_spaces()
        self.max_rows_per_file = max_rows_per_file
        self._validate = validate
        self._writer_id = writer_id = uuid.uuid4().hex
        prefix = file_prefix or "episodes"
        self._sink = EpisodeFileSink(
            filesystem,
            directory,
            schema=self._schema(),
            # Must not reference `self` (the finalizer below keeps it alive).
            file_name=file_name
            or (lambda index: f"{prefix}-{writer_id}-{index:06d}.parquet"),
            max_rows_per_file=max_rows_per_file,
            buffer_bytes=buffer_bytes,
            parquet_compression=parquet_compression,
            statistics_columns=[Columns.EPS_ID, ENV_STEPS_COLUMN],
        )
        self._num_episodes = 0
        self._closed = False
        # Commits what an unclosed writer holds when it is garbage-collected or
        # the interpreter exits. References the sink only, not `self`.
        self._finalizer = weakref.finalize(self, commit_unclosed, self._sink)

    # -- public API ---------------------------------------------------------

    @property
    def files(self) -> List[str]:
        """The files committed so far (paths inside the writer's filesystem)."""
        return list(self._sink.files)

    @property
    def num_episodes(self) -> int:
        """How many episodes were written (committed or pending)."""
        return self._num_episodes

    @property
    def num_pending(self) -> int:
        """How many written episodes are not yet in a committed file."""
        return self._sink.num_pending

    def write(self, episode: Episode) -> None:
        """Validates, serializes and appends one finished episode.

        Args:
            episode: A done `SingleAgentEpisode` or `MultiAgentEpisode`.

        Raises:
            ValueError: If the writer is closed or the episode is invalid (not
                done, outside the declared spaces), or `file_name` returned an
                invalid name.
            TypeError: If the episode is of another kind than the ones
                written before (or than the declared spaces).
            TypeError: If the episode holds data msgpack cannot serialize.
            OSError: If writing to the filesystem fails, or (`FileExistsError`)
                a file of that name exists already. The file being written is
                then discarded (with the episodes pending in it); committed
                files are untouched.
        """
        if self._closed:
            raise ValueError("`EpisodeWriter.write()` called after `close()`.")
        self._check_episode_type(episode)
        if self._validate:
            validate_episode(episode, self.observation_space, self.action_space)
        self._adopt_spaces(episode)
        payload = encode_episode(episode, self._compression)
        row = {
            ITEM_COLUMN: payload,
            Columns.EPS_ID: str(episode.id_),
            ENV_STEPS_COLUMN: len(episode),
        }
        self._num_episodes += 1
        self._sink.append(row, len(payload))

    def write_many(self, episodes: Iterable[Episode]) -> None:
        """Writes each of `episodes` (see `write`)."""
        for episode in episodes:
            self.write(episode)

    def flush(self) -> None:
        """Commits the current file now, even if it is not full.

        Raises:
            OSError: If writing fails (see `write`).
        """
        self._sink.flush()

    def abort(self) -> None:
        """Discards the pending episodes (the uncommitted file) and closes."""
        self._closed = True
        self._finalizer.detach()
        self._sink.abort()

    def close(self) -> List[str]:
        """Commits what is pending and closes the writer. Idempotent.

        Returns:
            All files this writer committed.

        Raises:
            OSError: If writing fails (see `write`).
        """
        if not self._closed:
            self._closed = True
            self._finalizer.detach()
            self._sink.flush()
        return self.files

    def __enter__(self) -> "EpisodeWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    # -- internals ------------------------------------------------------------

    def _check_episode_type(self, episode: Episode) -> None:
        if isinstance(episode, MultiAgentEpisode):
            kind = MULTI_AGENT_EPISODE
        elif isinstance(episode, SingleAgentEpisode):
            kind = SINGLE_AGENT_EPISODE
        else:
            raise TypeError(
                "`EpisodeWriter.write()` takes a `SingleAgentEpisode` or a "
                f"`MultiAgentEpisode`, got `{type(episode).__name__}`."
            )
        if self.episode_type is None:
            self.episode_type = kind
        elif kind != self.episode_type:
            raise TypeError(
                f"Episode `{episode.id_}` is a `{kind}`, but this writer writes "
                f"`{self.episode_type}`s (its first episode or its declared "
                "spaces: a dict of spaces by agent id means multi-agent). Write "
                "each kind of episode with its own writer, into its own "
                "directory."
            )

    def _encode_spaces(self) -> Dict[str, Any]:
        if self.episode_type == MULTI_AGENT_EPISODE:
            return {
                "observation_space": None,
                "action_space": None,
                "agents": _encode_agent_spaces(
                    self.observation_space, self.action_space
                ),
            }
        return {
            "observation_space": (
                space_to_json(self.observation_space)
                if self.observation_space is not None
                else None
            ),
            "action_space": (
                space_to_json(self.action_space)
                if self.action_space is not None
                else None
            ),
        }

    def _adopt_spaces(self, episode: Episode) -> None:
        """Before the first row arrives, takes missing spaces from an episode
        and records them (with the episode type) in the files' schema."""
        if self._sink.started:
            return
        if self.observation_space is None and episode.observation_space is not None:
            self.observation_space = _agent_dict(episode.observation_space)
        if self.action_space is None and episode.action_space is not None:
            self.action_space = _agent_dict(episode.action_space)
        self._space_specs = self._encode_spaces()
        self._sink.schema = self._schema()

    def _schema(self) -> pa.Schema:
        metadata = {
            "format_version": FORMAT_VERSION,
            "payload": PAYLOAD_IDS[self.episode_type or SINGLE_AGENT_EPISODE],
            "compression": self._compression,
            **self._space_specs,
        }
        if self.action_units is not None:
            metadata[ACTION_UNITS_KEY] = self.action_units
        return pa.schema(
            [
                (ITEM_COLUMN, pa.binary()),
                (Columns.EPS_ID, pa.string()),
                (ENV_STEPS_COLUMN, pa.int64()),
            ],
            metadata={METADATA_KEY: json.dumps(metadata).encode()},
        )


def _agent_dict(spaces: Any) -> Any:
    """A multi-agent episode's spaces as a plain dict by agent id."""
    if isinstance(spaces, gym.spaces.Dict):
        return dict(spaces.spaces)
    return spaces


def _encode_agent_spaces(
    observation_spaces: Optional[Dict[Any, gym.Space]],
    action_spaces: Optional[Dict[Any, gym.Space]],
) -> Optional[List[List[Any]]]:
    """`[[agent_id, {"observation_space": ..., "action_space": ...}], ...]`.

    Raises:
        TypeError: If an agent id is not an int or a str (JSON keeps only
            these), or a space cannot be recorded.
    """
    observation_spaces = observation_spaces or {}
    action_spaces = action_spaces or {}
    if not observation_spaces and not action_spaces:
        return None
    agents = []
    for agent_id in sorted({*observation_spaces, *action_spaces}, key=repr):
        if not isinstance(agent_id, (int, str)) or isinstance(agent_id, bool):
            raise TypeError(
                f"Cannot record the spaces of agent {agent_id!r} (type "
                f"`{type(agent_id).__name__}`): agent ids in the file metadata "
                "must be int or str. Rename the agents, or write without spaces "
                "(`observation_space=None`, `action_space=None`)."
            )
        specs = {}
        for name, spaces in (
            ("observation_space", observation_spaces),
            ("action_space", action_spaces),
        ):
            space = spaces.get(agent_id)
            specs[name] = space_to_json(space) if space is not None else None
        agents.append([agent_id, specs])
    return agents


@PublicAPI(stability="alpha")
def write_episodes(episodes: Iterable[Episode], path: str, **kwargs: Any) -> List[str]:
    """Writes episodes to parquet files in `path`.

    Args:
        episodes: Finished `SingleAgentEpisode`s or `MultiAgentEpisode`s.
        path: Output directory (local path or URI).
        **kwargs: Forwarded to `EpisodeWriter` (`observation_space`,
            `action_space`, `max_rows_per_file`, `compression`, ...).

    Returns:
        The files written.
    """
    with EpisodeWriter(path, **kwargs) as writer:
        writer.write_many(episodes)
    return writer.files


__all__ = [
    "EpisodeWriter",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "encode_episode",
    "space_from_json",
    "space_to_json",
    "validate_episode",
    "write_episodes",
]
