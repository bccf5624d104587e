"""Writes finished `SingleAgentEpisode`s to parquet files RLlib trains on.

Each row of a file holds one episode: the binary column `item` carries
`msgpack` + `msgpack_numpy` of `episode.get_state()`, the layout that
`AlgorithmConfig.offline_data(input_read_episodes=True)` reads. Two small
columns (`eps_id`, `env_steps`) make rows identifiable without decoding them.
The observation and action spaces go, as JSON, into the parquet schema
metadata under the key `rllib.episodes` together with a format version.

`MultiAgentEpisode`s are written the same way, one episode per row, with the
state of `rllib.offline.multi_agent_episode_state` (each agent's data is its
`SingleAgentEpisode` state) and each agent's spaces in the metadata (`agents`).
A writer holds one kind of episode.

A payload may be compressed (`compression="zstd"`, ...). A compressed payload
starts with the byte 0xC1, which msgpack never emits, followed by a short
header, so readers tell compressed and plain payloads apart by their first
bytes. Stock RLlib reads plain payloads only; the fork reads both.

Example:

.. testcode::

    import tempfile

    import gymnasium as gym
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode
    from ray.rllib.offline.episode_writer import EpisodeWriter

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
import os
import struct
import urllib.parse
import uuid
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.fs as pa_fs
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.util.annotations import PublicAPI

from rllib.offline.episode_file_sink import EpisodeFileSink, commit_unclosed

# Public through this module too: `episode_writer.space_to_json`.
from rllib.offline.episode_spaces import space_from_json, space_to_json
from rllib.offline.multi_agent_episode_state import (
    MULTI_AGENT_EPISODE,
    multi_agent_episode_state,
)

logger = logging.getLogger("ray." + __name__)

#: Version of the file layout this module writes. Readers refuse newer ones.
FORMAT_VERSION = 1
#: Key of the JSON document in the parquet schema metadata.
METADATA_KEY = b"rllib.episodes"
#: Column with the serialized episode (the name stock RLlib reads).
ITEM_COLUMN = "item"
#: Column with the episode's length in env steps.
ENV_STEPS_COLUMN = "env_steps"

#: Prefix of compressed payloads. 0xC1 is the one byte msgpack never uses.
_COMPRESSED_MAGIC = b"\xc1rlz"
_CODEC_IDS = {"zstd": 1, "lz4": 2, "gzip": 3, "brotli": 4}
_CODEC_NAMES = {v: k for k, v in _CODEC_IDS.items()}
_HEADER = struct.Struct("<BQ")  # codec id, uncompressed size

#: The episode types a writer writes, by the name its metadata records.
SINGLE_AGENT_EPISODE = "SingleAgentEpisode"
_PAYLOADS = {
    SINGLE_AGENT_EPISODE: "msgpack+msgpack_numpy:SingleAgentEpisode.get_state",
    MULTI_AGENT_EPISODE: (
        "msgpack+msgpack_numpy:rllib.offline.multi_agent_episode_state"
    ),
}

#: An episode of either kind.
Episode = Any  # SingleAgentEpisode or MultiAgentEpisode

_DEFAULT_MAX_ROWS_PER_FILE = 1000
_DEFAULT_BUFFER_BYTES = 32 * 1024 * 1024


# ---------------------------------------------------------------------------
# Payloads.
# ---------------------------------------------------------------------------


def _check_codec(compression: Optional[str]) -> Optional[str]:
    if compression is None:
        return None
    if compression not in _CODEC_IDS:
        raise ValueError(
            f"Unknown payload `compression={compression!r}`; use one of "
            f"{sorted(_CODEC_IDS)} or None."
        )
    codec = "lz4_frame" if compression == "lz4" else compression
    if not pa.Codec.is_available(codec):
        raise ValueError(
            f"`compression={compression!r}` is not available in this pyarrow "
            "build; pick another codec or None."
        )
    return compression


def compress_payload(payload: bytes, compression: Optional[str]) -> bytes:
    """Wraps a msgpack payload in the compressed envelope (or returns it as is)."""
    if compression is None:
        return payload
    codec = "lz4_frame" if compression == "lz4" else compression
    body = pa.compress(payload, codec=codec, asbytes=True)
    header = _HEADER.pack(_CODEC_IDS[compression], len(payload))
    return _COMPRESSED_MAGIC + header + body


def decompress_payload(payload: bytes) -> bytes:
    """Returns the msgpack bytes of a payload, compressed or not.

    Raises:
        ValueError: If the payload carries an unknown codec id.
    """
    if not payload[:4] == _COMPRESSED_MAGIC:
        return payload
    codec_id, size = _HEADER.unpack_from(payload, 4)
    if codec_id not in _CODEC_NAMES:
        raise ValueError(
            f"Compressed episode payload with unknown codec id {codec_id}; it "
            "was written by a newer writer. Upgrade rllib-fork."
        )
    name = _CODEC_NAMES[codec_id]
    codec = "lz4_frame" if name == "lz4" else name
    body = memoryview(payload)[4 + _HEADER.size :]
    return pa.decompress(body, decompressed_size=size, codec=codec, asbytes=True)


def encode_episode(episode: Episode, compression: Optional[str] = None) -> bytes:
    """Serializes an episode the way stock RLlib reads it, optionally compressed.

    Args:
        episode: The `SingleAgentEpisode` (or `MultiAgentEpisode`) to serialize.
        compression: None, or a codec name ("zstd", "lz4", "gzip", "brotli").

    Returns:
        The payload for the `item` column.

    Raises:
        TypeError: If a field holds a value msgpack cannot serialize; the
            message names the episode, the field and the timestep.
    """
    import msgpack
    import msgpack_numpy as mnp

    if isinstance(episode, MultiAgentEpisode):
        state = multi_agent_episode_state(episode)
    else:
        state = episode.get_state()
    try:
        payload = msgpack.packb(state, default=mnp.encode)
    except (TypeError, ValueError, OverflowError) as error:
        if isinstance(episode, MultiAgentEpisode):
            for agent_id, agent_episode in episode.agent_episodes.items():
                try:
                    msgpack.packb(agent_episode.get_state(), default=mnp.encode)
                except (TypeError, ValueError, OverflowError):
                    raise _unsupported_payload_error(
                        agent_episode,
                        agent_episode.get_state(),
                        error,
                        label=_label(episode, agent_id),
                    ) from error
        raise _unsupported_payload_error(episode, state, error) from error
    return compress_payload(payload, compression)


def _label(episode: Episode, agent_id: Any = None) -> str:
    """How errors name an episode (and one of its agents)."""
    label = f"Episode `{episode.id_}`"
    return label if agent_id is None else f"{label}, agent `{agent_id!r}`"


def _unsupported_payload_error(
    episode: Episode,
    state: Dict[str, Any],
    error: Exception,
    label: Optional[str] = None,
) -> TypeError:
    """Finds the first field/timestep msgpack rejects and describes it."""
    import msgpack
    import msgpack_numpy as mnp

    def packs(value):
        try:
            msgpack.packb(value, default=mnp.encode)
            return True
        except (TypeError, ValueError, OverflowError):
            return False

    fields = []
    if "observations" in state:
        fields = [
            (Columns.OBS, state["observations"]),
            (Columns.ACTIONS, state["actions"]),
            (Columns.REWARDS, state["rewards"]),
            (Columns.INFOS, state["infos"]),
        ]
        fields += [
            (f"extra_model_outputs[{k!r}]", v)
            for k, v in (state["extra_model_outputs"] or {}).items()
        ]
    where = "an episode attribute (`custom_data` or an id)"
    for name, buffer_state in fields:
        if packs(buffer_state):
            continue
        where = f"field `{name}`"
        data = buffer_state["data"] if isinstance(buffer_state, dict) else None
        if isinstance(data, list):
            lookback = buffer_state.get("lookback", 0)
            for i, item in enumerate(data):
                if not packs(item):
                    where += f" at timestep {i - lookback} (value {item!r:.200})"
                    break
        break
    return TypeError(
        f"{label or _label(episode)}: {where} cannot be serialized with msgpack "
        f"({type(error).__name__}: {error}). Episodes are stored as msgpack + "
        "msgpack_numpy: use numpy arrays, numbers, str, bytes, lists and dicts "
        "(in `infos` and `extra_model_outputs` too)."
    )


# ---------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------


def _explain_violation(space: gym.Space, value: Any, where: str = "") -> str:
    """Says why `value` is not in `space` (descending into Dict/Tuple)."""
    spaces = gym.spaces
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            keys = sorted(value) if isinstance(value, dict) else type(value).__name__
            return f"{where or 'value'} has keys {keys}, expected {sorted(space)}"
        for key, sub in space.spaces.items():
            if not sub.contains(value[key]):
                return _explain_violation(sub, value[key], f"{where}[{key!r}]")
    elif isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space):
            return f"{where or 'value'} is not a sequence of length {len(space)}"
        for i, (sub, item) in enumerate(zip(space.spaces, value)):
            if not sub.contains(item):
                return _explain_violation(sub, item, f"{where}[{i}]")
    elif isinstance(space, spaces.Box):
        array = np.asarray(value)
        if array.shape != space.shape:
            return f"{where or 'value'} has shape {array.shape}, expected {space.shape}"
        if not np.can_cast(array.dtype, space.dtype):
            return (
                f"{where or 'value'} has dtype {array.dtype}, which does not cast "
                f"safely to {space.dtype}"
            )
    label = where or "value"
    return f"{label} {np.asarray(value).tolist()!r:.200} is not in {space}"


def _first_violation_batched(space: gym.Space, array: np.ndarray) -> Optional[int]:
    """Vectorized check for a stacked Box/Discrete column; first bad index."""
    spaces = gym.spaces
    if isinstance(space, spaces.Box):
        if array.shape[1:] != space.shape or not np.can_cast(array.dtype, space.dtype):
            return 0
        axes = tuple(range(1, array.ndim))
        inside = np.all((array >= space.low) & (array <= space.high), axis=axes)
    else:  # Discrete
        if array.ndim != 1 or array.dtype.kind not in "iu":
            return 0
        inside = (array >= space.start) & (array < space.start + space.n)
    bad = np.flatnonzero(~inside)
    return int(bad[0]) if bad.size else None


def _num_steps(values: Any) -> int:
    """Timesteps in a field: a list of steps, or a batched (nested) array."""
    if isinstance(values, list):
        return len(values)
    leaves = tree.flatten(values)
    return len(leaves[0]) if leaves else 0


def _step(batched: Any, t: int) -> Any:
    """Slices timestep `t` out of a batched (nested) numpy structure."""
    return tree.map_structure(lambda x: x[t], batched)


def _check_field(
    label: str,
    field: str,
    space: gym.Space,
    values: Any,
    agent_id: Any = None,
) -> None:
    """Raises if any timestep of `values` lies outside `space`.

    `label` names the episode (and agent) in the error; `agent_id` is given for
    an agent of a multi-agent episode.
    """
    num_steps = len(values) if isinstance(values, list) else None
    first_bad = None
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
        try:
            array = np.asarray(values)
        except ValueError:  # Ragged: let the step-wise check explain it.
            array = None
        # Like `Box.contains`, only numpy inputs must cast safely to the dtype.
        strict = not isinstance(values, list) or (
            len(values) > 0 and isinstance(values[0], (np.ndarray, np.generic))
        )
        if array is not None and array.dtype != object and array.ndim >= 1:
            if not strict and isinstance(space, gym.spaces.Box):
                array = array.astype(space.dtype)
            first_bad = _first_violation_batched(space, array)
            if first_bad is None:
                return
            values = list(array)
    if first_bad is None:
        if num_steps is None:  # A numpy episode: one array (or tree) per field.
            values = [_step(values, t) for t in range(_num_steps(values))]
        for t, value in enumerate(values):
            if not space.contains(value):
                first_bad = t
                break
        else:
            return
    value = values[first_bad]
    space_arg = "observation_space" if field == Columns.OBS else "action_space"
    declared, how = f"`{space_arg}`", f"`EpisodeWriter({space_arg}=...)`"
    if agent_id is not None:
        declared = f"`{space_arg}` of agent `{agent_id!r}`"
        how = f"`EpisodeWriter({space_arg}={{{agent_id!r}: ...}})`"
    raise ValueError(
        f"{label}, timestep {first_bad}, field `{field}`: "
        f"{_explain_violation(space, value)}. The declared {declared} is "
        f"{space}. Fix the data, or declare the space the data was collected "
        f"with ({how}), or pass `validate=False`."
    )


@PublicAPI(stability="alpha")
def validate_episode(
    episode: Episode,
    observation_space: Optional[Any] = None,
    action_space: Optional[Any] = None,
) -> None:
    """Checks that an episode can be written and trained on.

    Args:
        episode: The `SingleAgentEpisode` or `MultiAgentEpisode` to check.
        observation_space: If given, every observation must lie in it. For a
            `MultiAgentEpisode`, a dict of spaces by agent id; agents it does
            not name are not checked.
        action_space: Same for actions.

    Raises:
        TypeError: If `episode` is of another type, or a multi-agent episode
            is checked against a single space (or the reverse).
        ValueError: If the episode is not done, has no steps, its fields have
            inconsistent lengths, or an observation or action lies outside
            its space. The message names the episode id, the agent (in a
            multi-agent episode), the timestep and the field.
    """
    if isinstance(episode, MultiAgentEpisode):
        _validate_multi_agent_episode(episode, observation_space, action_space)
        return
    if not isinstance(episode, SingleAgentEpisode):
        raise TypeError(
            "`EpisodeWriter.write()` takes a `SingleAgentEpisode` or a "
            f"`MultiAgentEpisode`, got `{type(episode).__name__}`."
        )
    _check_done(episode, len(episode))
    _check_steps(_label(episode), episode, observation_space, action_space)


def _check_done(episode: Episode, num_steps: int) -> None:
    if not episode.is_done:
        raise ValueError(
            f"Episode `{episode.id_}` is not done (is_terminated=False, "
            f"is_truncated=False) after {num_steps} steps. Only finished "
            "episodes can be written: pass `terminated=True` or `truncated=True` "
            "with the last `add_env_step()`, or set `episode.is_truncated = True` "
            "for an episode you stop early."
        )
    if num_steps == 0:
        raise ValueError(
            f"Episode `{episode.id_}` has no steps. An episode built from lists "
            "needs `len_lookback_buffer=0` (otherwise the lists become its "
            "lookback buffer); one built with `add_env_reset()`/`add_env_step()` "
            "needs at least one step."
        )


def _check_steps(
    label: str,
    episode: SingleAgentEpisode,
    observation_space: Optional[gym.Space],
    action_space: Optional[gym.Space],
    agent_id: Any = None,
) -> None:
    """Checks the field lengths and spaces of one (agent's) episode."""
    num_obs = _num_steps(episode.get_observations())
    lengths = {
        Columns.ACTIONS: _num_steps(episode.get_actions()),
        Columns.REWARDS: _num_steps(episode.get_rewards()),
    }
    for field, length in lengths.items():
        if length != num_obs - 1:
            raise ValueError(
                f"{label}, field `{field}`: has {length} entries but the "
                f"episode has {num_obs} observations; a finished episode needs "
                "one observation more than actions and rewards."
            )
    if observation_space is not None:
        observations = episode.get_observations()
        _check_field(label, Columns.OBS, observation_space, observations, agent_id)
    if action_space is not None:
        _check_field(
            label, Columns.ACTIONS, action_space, episode.get_actions(), agent_id
        )


def _validate_multi_agent_episode(
    episode: MultiAgentEpisode,
    observation_spaces: Optional[Dict[Any, gym.Space]],
    action_spaces: Optional[Dict[Any, gym.Space]],
) -> None:
    for name, spaces in (
        ("observation_space", observation_spaces),
        ("action_space", action_spaces),
    ):
        if spaces is not None and not isinstance(spaces, dict):
            raise TypeError(
                f"Episode `{episode.id_}` is a `MultiAgentEpisode`: `{name}` must "
                f"be a dict of spaces by agent id, got {spaces}."
            )
    _check_done(episode, len(episode))
    for agent_id, agent_episode in episode.agent_episodes.items():
        # An agent that only received its first observation has no steps.
        if _num_steps(agent_episode.get_observations()) == 0:
            continue
        _check_steps(
            _label(episode, agent_id),
            agent_episode,
            (observation_spaces or {}).get(agent_id),
            (action_spaces or {}).get(agent_id),
            agent_id,
        )


# ---------------------------------------------------------------------------
# Filesystems.
# ---------------------------------------------------------------------------


def resolve_filesystem(
    path: str, filesystem: Optional[pa_fs.FileSystem] = None
) -> Tuple[pa_fs.FileSystem, str]:
    """Returns a pyarrow filesystem and the path inside it.

    Args:
        path: A local path or a URI (`s3://bucket/dir`, `gs://...`).
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
        return pa_fs.LocalFileSystem(), os.path.abspath(path)
    if "://" in path:
        # The filesystem is given: "s3://bucket/key" is "bucket/key" in it
        # (as Ray Data reads it).
        parsed = urllib.parse.urlparse(path)
        path = parsed.netloc + parsed.path
    if isinstance(filesystem, pa_fs.FileSystem):
        return filesystem, path
    try:
        import fsspec
    except ImportError:
        fsspec = None
    if fsspec is not None and isinstance(filesystem, fsspec.AbstractFileSystem):
        return pa_fs.PyFileSystem(pa_fs.FSSpecHandler(filesystem)), path
    raise TypeError(
        f"`filesystem` must be a `pyarrow.fs.FileSystem` (or fsspec) instance, "
        f"got `{type(filesystem).__name__}`."
    )


# ---------------------------------------------------------------------------
# The writer.
# ---------------------------------------------------------------------------


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
            stock RLlib), "zstd", "lz4", "gzip" or "brotli" (needs the fork,
            or `ray.rllib.offline.episode_reader`, to read).
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
        self._compression = _check_codec(compression)
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
            "payload": _PAYLOADS[self.episode_type or SINGLE_AGENT_EPISODE],
            "compression": self._compression,
            **self._space_specs,
        }
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
