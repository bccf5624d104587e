"""Summarizes and validates datasets of recorded episodes, without training.

`dataset_info` reads every row once and summarizes the dataset: files,
episodes, steps, return and length statistics, spaces, payload format and size
on disk. `validate_dataset` reads every row and collects every problem it
finds, each with its file and row, instead of stopping at the first one.
Both read the files `EpisodeWriter` writes, RLlib 2.60's recorder output
(`output_write_episodes=True`) and hand-rolled files with an `item` column of
`msgpack` + `msgpack_numpy` episode states.

`open_episode_files` is the file and row access both build on; the converter
(`ray.rllib.offline.tools.conversion`) uses it too. The command line front
end is `python -m ray.rllib.offline.episodes`.

Example:

.. testcode::
    :skipif: True

    from ray.rllib.offline.tools.inspection import dataset_info, validate_dataset

    print(dataset_info("/tmp/cartpole-episodes").returns)
    for problem in validate_dataset("/tmp/cartpole-episodes").problems:
        print(problem)
"""

import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
import tree
from ray.rllib.core.columns import Columns
from ray.util.annotations import PublicAPI
from tqdm import tqdm

from rllib.offline.episode_files.multi_agent_state import is_multi_agent_state
from rllib.offline.episode_files.payload import ENV_STEPS_COLUMN, ITEM_COLUMN
from rllib.offline.episode_files.reader import (
    PathLike,
    decode_episode_state,
    describe_row,
    list_episode_files,
    read_file_metadata,
    spaces_from_metadata,
)
from rllib.offline.in_memory.columns import EpisodeColumns, episode_columns_from_state

#: msgpack never emits this byte; `EpisodeWriter`'s compressed payloads start
#: with it (see `ray.rllib.offline.episode_files.writer`).
_COMPRESSED_FIRST_BYTE = 0xC1

#: Payload layouts of `SingleAgentEpisode.get_state()`.
LAYOUT_LISTS = "per-step lists"
LAYOUT_NUMPY = "numpy-ized"

#: File formats `dataset_info` tells apart.
FORMAT_FORK = "EpisodeWriter"
FORMAT_RECORDER = "item column, numpy-ized episodes, no metadata"
FORMAT_HAND_ROLLED = "item column, per-step lists, no metadata"
FORMAT_ITEM_ONLY = "item column, no metadata"
FORMAT_UNREADABLE = "unreadable"

#: Where the spaces `dataset_info` and `validate_dataset` use come from.
SPACES_FROM_METADATA = "file metadata"
SPACES_FROM_EPISODES = "carried by the episodes"
SPACES_GIVEN = "given by the caller"

#: Steps per field whose `space.contains` `validate_dataset` checks by default.
DEFAULT_SAMPLE_STEPS = 100


# ---------------------------------------------------------------------------
# Problems.
# ---------------------------------------------------------------------------


@PublicAPI(stability="alpha")
@dataclass
class Problem:
    """One thing wrong with a dataset, located as precisely as known.

    Attributes:
        kind: A short identifier, e.g. "not-done" or "undecodable".
        message: What is wrong and how to fix it.
        file: The file, or None for the dataset as a whole.
        row: The row in `file`, or None for the whole file.
        episode_id: The episode id, if known.
    """

    kind: str
    message: str
    file: Optional[str] = None
    row: Optional[int] = None
    episode_id: Optional[str] = None

    @property
    def location(self) -> str:
        """Words that locate the problem, e.g. "row 3 of file `x.parquet`"."""
        if self.row is not None:
            return describe_row(self.row, self.episode_id, self.file)
        if self.file is not None:
            return f"file `{self.file}`"
        return "dataset"

    def __str__(self) -> str:
        return f"{self.location}: [{self.kind}] {self.message}"

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------
# Files and rows.
# ---------------------------------------------------------------------------


@dataclass
class EpisodeRow:
    """One row of an episode file: a payload and the columns beside it."""

    file: str
    index: int
    payload: Optional[bytes]
    episode_id: Optional[str] = None
    env_steps: Optional[int] = None

    @property
    def location(self) -> str:
        return describe_row(self.index, self.episode_id, self.file)

    @property
    def is_compressed(self) -> bool:
        """Whether the payload is wrapped in `EpisodeWriter`'s compression."""
        return bool(self.payload) and self.payload[0] == _COMPRESSED_FIRST_BYTE


@PublicAPI(stability="alpha")
@dataclass
class EpisodeFile:
    """An episode file, opened far enough to know what it holds.

    Attributes:
        path: The path inside `filesystem`.
        filesystem: The `pyarrow.fs.FileSystem` it lives in.
        num_bytes: Its size on disk.
        num_rows: Rows (episodes) in the file; None if it cannot be read.
        metadata: The `EpisodeWriter` metadata; None for files without it.
        observation_space: The observation space in the metadata, if any.
        action_space: The action space in the metadata, if any.
        parquet_compression: The parquet codec of the `item` column.
        problem: Why the file's rows cannot be read, or None.
    """

    path: str
    filesystem: pa_fs.FileSystem
    num_bytes: int
    num_rows: Optional[int] = None
    metadata: Optional[Dict[str, Any]] = None
    observation_space: Optional[gym.Space] = None
    action_space: Optional[gym.Space] = None
    parquet_compression: Optional[str] = None
    problem: Optional[Problem] = None

    @property
    def readable(self) -> bool:
        return self.problem is None

    @property
    def payload_compression(self) -> Optional[str]:
        """The payload codec the metadata records (None: plain or unknown)."""
        return (self.metadata or {}).get("compression")

    def rows(self, batch_size: int = 64) -> Iterator[EpisodeRow]:
        """Yields the file's rows, `batch_size` at a time from disk.

        Raises:
            ValueError: If the file is not readable (see `problem`).
        """
        if not self.readable:
            raise ValueError(f"{self.problem.location}: {self.problem.message}")
        with self.filesystem.open_input_file(self.path) as handle:
            parquet = pq.ParquetFile(handle)
            names = parquet.schema_arrow.names
            extra = [c for c in (Columns.EPS_ID, ENV_STEPS_COLUMN) if c in names]
            index = 0
            for batch in parquet.iter_batches(
                batch_size=batch_size, columns=[ITEM_COLUMN] + extra
            ):
                payloads = batch.column(ITEM_COLUMN).to_pylist()
                none = [None] * len(payloads)
                ids, steps = (
                    batch.column(name).to_pylist() if name in extra else none
                    for name in (Columns.EPS_ID, ENV_STEPS_COLUMN)
                )
                for payload, episode_id, env_steps in zip(payloads, ids, steps):
                    yield EpisodeRow(self.path, index, payload, episode_id, env_steps)
                    index += 1


def _open_one(path: str, fs: pa_fs.FileSystem) -> EpisodeFile:
    """Reads one file's footer; a file that cannot be read gets a `problem`."""
    episode_file = EpisodeFile(
        path=path, filesystem=fs, num_bytes=fs.get_file_info(path).size or 0
    )
    try:
        with fs.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            names = parquet.schema_arrow.names
            episode_file.num_rows = parquet.metadata.num_rows
            if ITEM_COLUMN in names and parquet.metadata.num_row_groups:
                column = parquet.metadata.row_group(0).column(names.index(ITEM_COLUMN))
                episode_file.parquet_compression = column.compression.lower()
    except (pa.ArrowInvalid, OSError) as error:
        episode_file.problem = Problem(
            "not-parquet",
            f"not a readable parquet file ({type(error).__name__}: "
            f"{str(error).rstrip('.')}). Move it out of the dataset directory, or "
            "re-write it if it is a truncated episode file.",
            file=path,
        )
        return episode_file
    if ITEM_COLUMN not in names:
        episode_file.problem = Problem(
            "no-item-column",
            f"has no `{ITEM_COLUMN}` column (columns: {names}), so it holds no "
            "recorded episodes. Move it out of the dataset directory; for tabular "
            "data train with `input_read_episodes=False`.",
            file=path,
        )
        return episode_file
    try:
        episode_file.metadata = read_file_metadata(path, filesystem=fs)
        spaces = spaces_from_metadata(episode_file.metadata)
    except (ValueError, KeyError, TypeError) as error:
        episode_file.problem = Problem(
            "bad-metadata", str(error).rstrip("."), file=path
        )
        return episode_file
    episode_file.observation_space, episode_file.action_space = spaces
    return episode_file


@PublicAPI(stability="alpha")
def open_episode_files(
    path: PathLike, *, filesystem: Optional[pa_fs.FileSystem] = None
) -> List[EpisodeFile]:
    """Lists the episode files under `path` and reads their footers.

    A file that is no parquet, has no `item` column or carries unreadable
    metadata is returned with its `problem` set, not raised.

    Args:
        path: A file, a directory (searched recursively), or a list of them.
        filesystem: A `pyarrow.fs.FileSystem`; None infers it from `path`.

    Returns:
        One `EpisodeFile` per file, in the order `read_episodes` reads them.

    Raises:
        FileNotFoundError: If a path does not exist or holds no parquet file.
    """
    fs, files = list_episode_files(path, filesystem=filesystem)
    return [_open_one(file, fs) for file in files]


def progress_bar(
    total: Optional[int], desc: str, enabled: bool, unit: str = " episodes"
) -> tqdm:
    """A tqdm bar on stderr, over episodes by default (a no-op when not `enabled`)."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
    )


def _as_strings(path: PathLike) -> List[str]:
    if isinstance(path, (str, os.PathLike)):
        return [os.fspath(path)]
    return [os.fspath(p) for p in path]


def count_rows(files: List[EpisodeFile]) -> int:
    return sum(f.num_rows or 0 for f in files if f.readable)


# ---------------------------------------------------------------------------
# Spaces.
# ---------------------------------------------------------------------------


def recorded_spaces(
    files: List[EpisodeFile],
) -> Tuple[Dict[str, gym.Space], List[Problem]]:
    """The spaces the files' metadata records, and files that disagree.

    Returns:
        `({"observation_space": space, "action_space": space}, problems)`;
        a key is missing where no file records that space, and each file
        that records a space other than the first file's is one problem.
    """
    found: Dict[str, Tuple[gym.Space, str]] = {}
    problems = []
    for episode_file in files:
        pairs = (
            ("observation_space", episode_file.observation_space),
            ("action_space", episode_file.action_space),
        )
        for name, space in pairs:
            if space is None:
                continue
            if name not in found:
                found[name] = (space, episode_file.path)
            elif found[name][0] != space:
                problems.append(
                    Problem(
                        "spaces-disagree",
                        f"records the `{name}` {space}, but `{found[name][1]}` "
                        f"records {found[name][0]}. Keep one kind of episode per "
                        "directory: move the files of the other task elsewhere.",
                        file=episode_file.path,
                    )
                )
    return {name: space for name, (space, _) in found.items()}, problems


class _CarriedSpaces:
    """Rebuilds the spaces episode states carry, once per distinct space.

    `SingleAgentEpisode.get_state()` stores `_observation_space` and
    `_action_space` as dicts; rebuilding a gymnasium space from one is slow,
    and every episode of a dataset usually carries the same.
    """

    def __init__(self):
        self._cache: Dict[str, Optional[gym.Space]] = {}

    def get(self, state: Dict[str, Any], name: str) -> Optional[gym.Space]:
        """The `name` ("observation_space", "action_space") in `state`, or None."""
        spec = state.get(f"_{name}") if isinstance(state, dict) else None
        if not spec:
            return None
        key = repr(spec)
        if key not in self._cache:
            from ray.rllib.utils.serialization import gym_space_from_dict

            try:
                self._cache[key] = gym_space_from_dict(spec)
            except Exception:  # A foreign or damaged spec: as if not carried.
                self._cache[key] = None
        return self._cache[key]


# ---------------------------------------------------------------------------
# Statistics and `dataset_info`.
# ---------------------------------------------------------------------------


@PublicAPI(stability="alpha")
@dataclass
class Stats:
    """Summary statistics of a list of numbers."""

    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: List[float]) -> Optional["Stats"]:
        if not values:
            return None
        array = np.asarray(values, dtype=np.float64)
        return cls(
            mean=float(array.mean()),
            std=float(array.std()),
            min=float(array.min()),
            max=float(array.max()),
        )


@PublicAPI(stability="alpha")
@dataclass
class FileInfo:
    """What `dataset_info` found in one file."""

    path: str
    num_bytes: int
    num_rows: Optional[int]
    format: str
    payload_compression: Optional[str]
    parquet_compression: Optional[str]
    problem: Optional[str] = None


@PublicAPI(stability="alpha")
@dataclass
class DatasetInfo:
    """A summary of an episode dataset (see `dataset_info`).

    Attributes:
        paths: The paths given.
        files: One entry per file.
        num_bytes: Total size of the files on disk.
        num_episodes: Rows that decoded to an episode state.
        num_steps: Env steps over those episodes.
        num_terminated: Episodes that ended in a terminal state.
        num_truncated: Episodes that were cut off (and not terminated).
        num_not_done: Episodes neither terminated nor truncated.
        num_undecodable: Rows that did not decode (run `validate_dataset`).
        returns: Statistics of the episode returns.
        lengths: Statistics of the episode lengths, in env steps.
        observation_space: The observation space, or None if none is known.
        action_space: The action space, or None if none is known.
        spaces_source: Where the spaces come from, or None.
        spaces_disagree: Whether the files record different spaces.
        payload_layouts: Episodes per payload layout ("per-step lists",
            "numpy-ized").
        payload_compressions: Episodes per payload codec ("none", "zstd", ...).
    """

    paths: List[str]
    files: List[FileInfo] = field(default_factory=list)
    num_bytes: int = 0
    num_episodes: int = 0
    num_steps: int = 0
    num_terminated: int = 0
    num_truncated: int = 0
    num_not_done: int = 0
    num_undecodable: int = 0
    returns: Optional[Stats] = None
    lengths: Optional[Stats] = None
    observation_space: Optional[gym.Space] = None
    action_space: Optional[gym.Space] = None
    spaces_source: Optional[str] = None
    spaces_disagree: bool = False
    payload_layouts: Dict[str, int] = field(default_factory=dict)
    payload_compressions: Dict[str, int] = field(default_factory=dict)

    @property
    def formats(self) -> Dict[str, int]:
        """Files per format."""
        counts: Dict[str, int] = {}
        for info in self.files:
            counts[info.format] = counts.get(info.format, 0) + 1
        return counts

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable dict; spaces as their `repr` and as JSON."""
        from rllib.offline.episode_files.spaces import space_to_json

        result = asdict(self)
        result["formats"] = self.formats
        for name in ("observation_space", "action_space"):
            space = getattr(self, name)
            result[name] = None if space is None else str(space)
            try:
                result[f"{name}_json"] = None if space is None else space_to_json(space)
            except TypeError:  # A space type the metadata cannot record.
                result[f"{name}_json"] = None
        return result


def _layout(state: Dict[str, Any]) -> str:
    return LAYOUT_NUMPY if state["observations"].get("finalized") else LAYOUT_LISTS


def _rewards(state: Dict[str, Any]) -> np.ndarray:
    """The rewards after the lookback, as float64."""
    rewards = state["rewards"]
    data = rewards["data"][rewards["lookback"] :]
    return np.asarray(data, dtype=np.float64).reshape(-1)


def _summary(state: Dict[str, Any]) -> Tuple[int, float, str]:
    """`(env steps, return, payload layout)` of an episode state.

    For a multi-agent episode: its env steps, the sum of all agents' returns
    and the layout of its first agent's data.
    """
    if is_multi_agent_state(state):
        agents = [agent_state for _, agent_state in state["agent_episodes"]]
        episode_return = sum(float(_rewards(a).sum()) for a in agents)
        layout = _layout(agents[0]) if agents else LAYOUT_LISTS
        return state["env_t"] - state["env_t_started"], episode_return, layout
    rewards = _rewards(state)
    return len(rewards), float(rewards.sum()), _layout(state)


def _file_format(episode_file: EpisodeFile, layouts: Dict[str, int]) -> str:
    if not episode_file.readable:
        return FORMAT_UNREADABLE
    if episode_file.metadata is not None:
        version = episode_file.metadata.get("format_version")
        return f"{FORMAT_FORK} (format {version})"
    if set(layouts) == {LAYOUT_NUMPY}:
        return FORMAT_RECORDER
    if set(layouts) == {LAYOUT_LISTS}:
        return FORMAT_HAND_ROLLED
    return FORMAT_ITEM_ONLY


def _count(counts: Dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _file_info(episode_file: EpisodeFile, layouts: Dict[str, int]) -> FileInfo:
    """What `dataset_info` reports of one file, given its rows' layouts."""
    return FileInfo(
        path=episode_file.path,
        num_bytes=episode_file.num_bytes,
        num_rows=episode_file.num_rows,
        format=_file_format(episode_file, layouts),
        payload_compression=episode_file.payload_compression,
        parquet_compression=episode_file.parquet_compression,
        problem=str(episode_file.problem) if episode_file.problem else None,
    )


class _Summarizer:
    """Adds the files and rows of a dataset up into one `DatasetInfo`."""

    def __init__(self, info: DatasetInfo):
        self.info = info
        self.carried: Dict[str, gym.Space] = {}
        self.carried_spaces = _CarriedSpaces()
        self.returns: List[float] = []
        self.lengths: List[int] = []

    def add_file(self, episode_file: EpisodeFile, bar: tqdm) -> None:
        """Counts every row of one file, then the file itself."""
        layouts: Dict[str, int] = {}
        if episode_file.readable:
            for row in episode_file.rows():
                bar.update(1)
                self._add_row(episode_file, row, layouts)
        self.info.files.append(_file_info(episode_file, layouts))
        self.info.num_bytes += episode_file.num_bytes

    def _add_row(
        self, episode_file: EpisodeFile, row: EpisodeRow, layouts: Dict[str, int]
    ) -> None:
        """Counts one row: its episode, steps, return, end, layout and codec."""
        info = self.info
        try:
            state = decode_episode_state(row.payload)
            num_steps, episode_return, layout = _summary(state)
            terminated = bool(state["is_terminated"])
            truncated = bool(state["is_truncated"])
        except Exception:  # Counted; `validate_dataset` explains.
            info.num_undecodable += 1
            return
        self._note_carried_spaces(state)
        _count(layouts, layout)
        _count(info.payload_layouts, layout)
        codec = (
            (episode_file.payload_compression or "unknown codec")
            if row.is_compressed
            else "none"
        )
        _count(info.payload_compressions, codec)
        info.num_episodes += 1
        info.num_steps += num_steps
        self.lengths.append(num_steps)
        self.returns.append(episode_return)
        if terminated:
            info.num_terminated += 1
        elif truncated:
            info.num_truncated += 1
        else:
            info.num_not_done += 1

    def _note_carried_spaces(self, state: Dict[str, Any]) -> None:
        """Keeps the first observation and action space the episodes carry."""
        for name in ("observation_space", "action_space"):
            if name not in self.carried:
                space = self.carried_spaces.get(state, name)
                if space is not None:
                    self.carried[name] = space

    def finish(self, recorded: Dict[str, gym.Space]) -> None:
        """Sets the statistics, and the spaces: recorded, else carried."""
        info = self.info
        info.returns = Stats.of(self.returns)
        info.lengths = Stats.of(self.lengths)
        if recorded:
            info.observation_space = recorded.get("observation_space")
            info.action_space = recorded.get("action_space")
            info.spaces_source = SPACES_FROM_METADATA
        elif self.carried:
            info.observation_space = self.carried.get("observation_space")
            info.action_space = self.carried.get("action_space")
            info.spaces_source = SPACES_FROM_EPISODES


@PublicAPI(stability="alpha")
def dataset_info(
    path: PathLike,
    *,
    filesystem: Optional[pa_fs.FileSystem] = None,
    progress: bool = False,
) -> DatasetInfo:
    """Reads every row of an episode dataset and summarizes it.

    Rows that do not decode are counted (`num_undecodable`), not raised:
    `validate_dataset` says what is wrong with them.

    Args:
        path: A file, a directory (searched recursively), or a list of them;
            local paths or URIs.
        filesystem: A `pyarrow.fs.FileSystem`; None infers it from `path`.
        progress: Whether to show a progress bar on stderr.

    Returns:
        A `DatasetInfo`.

    Raises:
        FileNotFoundError: If a path does not exist or holds no parquet file.
    """
    files = open_episode_files(path, filesystem=filesystem)
    paths = _as_strings(path)
    info = DatasetInfo(paths=paths)
    recorded, disagreements = recorded_spaces(files)
    info.spaces_disagree = bool(disagreements)
    summarizer = _Summarizer(info)
    with progress_bar(count_rows(files), "info", progress) as bar:
        for episode_file in files:
            summarizer.add_file(episode_file, bar)
    summarizer.finish(recorded)
    return info


# ---------------------------------------------------------------------------
# `validate_dataset`.
# ---------------------------------------------------------------------------


@PublicAPI(stability="alpha")
@dataclass
class ValidationReport:
    """The result of `validate_dataset`.

    Attributes:
        paths: The paths given.
        num_files: Files found.
        num_rows: Rows read (in readable files).
        num_episodes: Rows that decoded to an episode.
        num_steps: Env steps over those episodes.
        observation_space: The space observations were checked against per
            file, as text with its source; None if none was known.
        action_space: Same for actions.
        sample_steps: Steps per field checked against the spaces (None: all).
        problems: Every problem found, in file and row order.
    """

    paths: List[str]
    num_files: int = 0
    num_rows: int = 0
    num_episodes: int = 0
    num_steps: int = 0
    observation_space: Optional[str] = None
    action_space: Optional[str] = None
    sample_steps: Optional[int] = DEFAULT_SAMPLE_STEPS
    problems: List[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    def to_dict(self) -> Dict[str, Any]:
        result = asdict(self)
        result["ok"] = self.ok
        return result


def _steps_to_check(num: int, sample_steps: Optional[int]) -> np.ndarray:
    """All of `range(num)`, or `sample_steps` evenly spread, first and last in."""
    if sample_steps is None or num <= sample_steps:
        return np.arange(num)
    return np.unique(np.linspace(0, num - 1, max(sample_steps, 2)).round()).astype(int)


def _step(values: Any, t: int) -> Any:
    """Timestep `t` of a batched (nested) field."""
    return tree.map_structure(lambda leaf: leaf[t], values)


def _space_problem(
    row: EpisodeRow,
    episode_id: str,
    field_name: str,
    values: Any,
    num: int,
    space: gym.Space,
    source: str,
    sample_steps: Optional[int],
    agent: str = "",
) -> Optional[Problem]:
    """Checks `space.contains` on (a sample of) the steps of one field.

    `agent` starts the message for an agent of a multi-agent episode.
    """
    space_arg = "observation_space" if field_name == Columns.OBS else "action_space"
    steps = _steps_to_check(num, sample_steps)
    bad = []
    first_value = None
    for t in steps:
        try:
            value = _step(values, t)
            inside = space.contains(value)
        except Exception:  # Structure does not fit the space at all.
            value, inside = "(does not match the space's structure)", False
        if not inside:
            if not bad:
                first_value = value
            bad.append(int(t))
    if not bad:
        return None
    shown = (
        first_value
        if isinstance(first_value, str)
        else tree.map_structure(lambda x: np.asarray(x).tolist(), first_value)
    )
    return Problem(
        "outside-space",
        f"{agent}field `{field_name}` at timestep {bad[0]} holds {shown!r:.200}, "
        f"which is not in the `{space_arg}` {space} ({source}); {len(bad)} of the "
        f"{len(steps)} steps checked are outside it. Fix the data, or record "
        f"the space it was collected in (`convert --env ...` or "
        f"`EpisodeWriter({space_arg}=...)`).",
        file=row.file,
        row=row.index,
        episode_id=episode_id,
    )


def _row_problems(
    row: EpisodeRow, columns: EpisodeColumns, eid: Optional[str]
) -> List[Problem]:
    """The checks of a row against its episode: id, length, steps, done."""

    def problem(kind: str, message: str) -> Problem:
        return Problem(kind, message, file=row.file, row=row.index, episode_id=eid)

    problems = []
    num_steps = len(columns)
    if row.episode_id is not None and row.episode_id != columns.id_:
        problems.append(
            problem(
                "column-mismatch",
                f"the `{Columns.EPS_ID}` column says `{row.episode_id}` but the "
                f"payload holds episode `{columns.id_}`. Re-write the file with "
                "`EpisodeWriter`.",
            )
        )
    if row.env_steps is not None and row.env_steps != num_steps:
        problems.append(
            problem(
                "length-mismatch",
                f"the `{ENV_STEPS_COLUMN}` column says {row.env_steps} steps but "
                f"the episode has {num_steps}. Re-write the file with "
                "`EpisodeWriter`.",
            )
        )
    if num_steps == 0:
        problems.append(
            problem(
                "empty-episode",
                "the episode has no steps. Built from lists, an episode needs "
                "`len_lookback_buffer=0` (otherwise the lists become its "
                "lookback). Re-record it, or drop the row.",
            )
        )
    if not columns.is_done:
        problems.append(
            problem(
                "not-done",
                f"the episode is not done (is_terminated=False, "
                f"is_truncated=False) after {num_steps} steps; training with "
                "`input_read_episodes=True` fails on it. Mark its last step "
                "`truncated=True` and re-write it, or drop the row.",
            )
        )
    return problems


def _multi_agent_problems(
    row: EpisodeRow,
    state: Dict[str, Any],
    spaces: Dict[str, Tuple[Any, str]],
    sample_steps: Optional[int],
) -> Tuple[List[Problem], Optional[EpisodeColumns]]:
    """Every problem of one multi-agent row, and a summary of it as columns.

    The row-level checks (id, length, done) apply to the episode; the data
    checks (lengths, rewards, spaces) to each agent's episode, with the
    agent's spaces from `spaces` (dicts by agent id).
    """
    eid = state.get("id_", row.episode_id)
    num_steps = state["env_t"] - state["env_t_started"]
    summary = EpisodeColumns(
        id_=eid,
        observations=None,
        actions=None,
        rewards=np.zeros(num_steps),
        is_terminated=bool(state["is_terminated"]),
        is_truncated=bool(state["is_truncated"]),
    )
    problems = _row_problems(row, summary, eid)
    for agent_id, agent_state in state["agent_episodes"]:
        agent_spaces = {
            name: (space.get(agent_id), source)
            for name, (space, source) in spaces.items()
            if isinstance(space, dict) and space.get(agent_id) is not None
        }
        agent_problems, _ = _episode_problems(
            row, agent_state, agent_spaces, sample_steps, agent=agent_id
        )
        problems.extend(agent_problems)
    return problems, summary


def _episode_problems(
    row: EpisodeRow,
    state: Any,
    spaces: Dict[str, Tuple[gym.Space, str]],
    sample_steps: Optional[int],
    agent: Any = None,
) -> Tuple[List[Problem], Optional[EpisodeColumns]]:
    """Every problem of one decoded row, and its columns if it has them.

    With `agent`, `state` is that agent's episode in a multi-agent row: the
    messages name the agent, and the row-level checks are left to the caller.
    """

    label = "" if agent is None else f"agent `{agent!r}`: "

    def problem(kind: str, message: str) -> Problem:
        return Problem(
            kind, label + message, file=row.file, row=row.index, episode_id=eid
        )

    eid = row.episode_id
    if is_multi_agent_state(state):
        return _multi_agent_problems(row, state, spaces, sample_steps)
    if not isinstance(state, dict) or not {"rewards", "observations"} <= set(state):
        found = sorted(state) if isinstance(state, dict) else type(state).__name__
        return [
            problem(
                "not-an-episode",
                f"the payload decodes to {found!r:.200}, not to a "
                "`SingleAgentEpisode.get_state()` dict. Re-write this row with "
                "`EpisodeWriter`, or drop it.",
            )
        ], None
    if agent is None:
        eid = state.get("id_", eid)
    columns, failure = _columns_of(state, spaces, problem)
    if failure is not None:
        return [failure], None
    num_steps = len(columns)
    problems = _row_problems(row, columns, eid) if agent is None else []
    problems.extend(_reward_problems(np.asarray(columns.rewards), num_steps, problem))
    problems.extend(
        _field_space_problems(row, eid, columns, spaces, sample_steps, label)
    )
    return problems, columns


def _columns_of(
    state: Dict[str, Any],
    spaces: Dict[str, Tuple[gym.Space, str]],
    problem: Callable[[str, str], Problem],
) -> Tuple[Optional[EpisodeColumns], Optional[Problem]]:
    """`(columns, None)` of an episode state, or `(None, problem)` if it has none."""
    try:
        columns = episode_columns_from_state(
            state,
            observation_space=spaces.get("observation_space", (None,))[0],
            action_space=spaces.get("action_space", (None,))[0],
        )
    except ValueError as error:
        return None, problem(
            "length-mismatch",
            f"{str(error).rstrip('.')}. A finished episode has one "
            "observation more than actions and rewards. Re-record this "
            "episode, or drop the row.",
        )
    except Exception as error:
        return None, problem(
            "not-an-episode",
            f"the episode state is incomplete ({type(error).__name__}: "
            f"{error}). Re-write this row with `EpisodeWriter`, or drop it.",
        )
    return columns, None


def _reward_problems(
    rewards: np.ndarray, num_steps: int, problem: Callable[[str, str], Problem]
) -> List[Problem]:
    """A problem if the rewards are not numbers, or not all finite."""
    if rewards.dtype.kind not in "biuf":
        return [
            problem(
                "bad-reward",
                f"the rewards have dtype {rewards.dtype}; they must be numbers.",
            )
        ]
    if rewards.size and not np.all(np.isfinite(rewards)):
        bad = np.flatnonzero(~np.isfinite(rewards))
        return [
            problem(
                "non-finite-reward",
                f"the reward at timestep {bad[0]} is {rewards[bad[0]]}; {len(bad)} "
                f"of {num_steps} rewards are NaN or infinite, which makes the "
                "loss NaN. Fix or drop this episode.",
            )
        ]
    return []


def _field_space_problems(
    row: EpisodeRow,
    eid: Optional[str],
    columns: EpisodeColumns,
    spaces: Dict[str, Tuple[gym.Space, str]],
    sample_steps: Optional[int],
    label: str,
) -> List[Problem]:
    """The observations and actions outside their spaces (one problem per field)."""
    num_steps = len(columns)
    fields = (
        ("observation_space", Columns.OBS, columns.observations, num_steps + 1),
        ("action_space", Columns.ACTIONS, columns.actions, num_steps),
    )
    problems = []
    for name, field_name, values, num in fields:
        if name in spaces and num > 0 and values is not None:
            space, source = spaces[name]
            found = _space_problem(
                row, eid, field_name, values, num, space, source, sample_steps, label
            )
            if found is not None:
                problems.append(found)
    return problems


def _given_space_problems(
    given: Dict[str, Optional[gym.Space]], recorded: Dict[str, gym.Space]
) -> List[Problem]:
    """A problem for each space given that differs from the one recorded."""
    problems = []
    for name, space in given.items():
        if space is not None and name in recorded and recorded[name] != space:
            problems.append(
                Problem(
                    "spaces-disagree",
                    f"the files record the `{name}` {recorded[name]}, but the "
                    f"data was to be checked against {space}. Check against the "
                    "recorded space, or re-write the files with the right one.",
                )
            )
    return problems


def _undecodable(row: EpisodeRow, error: Exception) -> Problem:
    """The problem of a row whose payload does not decode."""
    return Problem(
        "undecodable",
        f"cannot decode the payload ({type(error).__name__}: "
        f"{str(error).rstrip('.')}). The `{ITEM_COLUMN}` "
        "column must hold msgpack + msgpack_numpy of "
        "`SingleAgentEpisode.get_state()` (optionally "
        "compressed by `EpisodeWriter`). Re-write this row, "
        "or drop it (`convert --skip-invalid`).",
        file=row.file,
        row=row.index,
        episode_id=row.episode_id,
    )


class _Validator:
    """Checks the files and rows of a dataset into one `ValidationReport`."""

    def __init__(
        self,
        report: ValidationReport,
        given: Dict[str, Optional[gym.Space]],
        sample_steps: Optional[int],
    ):
        self.report = report
        self.given = given
        self.sample_steps = sample_steps
        self.seen_ids: Dict[str, str] = {}
        self.carried_spaces = _CarriedSpaces()
        # name -> {id(space): "space (source)"}: the spaces data was checked against.
        self.checked: Dict[str, Dict[int, str]] = {
            "observation_space": {},
            "action_space": {},
        }

    def check_file(self, episode_file: EpisodeFile, bar: tqdm) -> None:
        """Checks every row of one file, or reports why it cannot be read."""
        if not episode_file.readable:
            self.report.problems.append(episode_file.problem)
            return
        spaces = self._file_spaces(episode_file)
        for row in episode_file.rows():
            bar.update(1)
            self.report.num_rows += 1
            self._check_row(row, spaces)

    def _file_spaces(self, episode_file: EpisodeFile) -> Dict[str, Tuple[Any, str]]:
        """The spaces a file's rows are checked against: given, else recorded."""
        spaces: Dict[str, Tuple[gym.Space, str]] = {}
        for name, space in self.given.items():
            if space is not None:
                spaces[name] = (space, SPACES_GIVEN)
            elif getattr(episode_file, name) is not None:
                spaces[name] = (getattr(episode_file, name), SPACES_FROM_METADATA)
        return spaces

    def _check_row(self, row: EpisodeRow, spaces: Dict[str, Tuple[Any, str]]) -> None:
        """Decodes and checks one row; counts its episode and notes its id."""
        try:
            state = decode_episode_state(row.payload)
        except Exception as error:
            self.report.problems.append(_undecodable(row, error))
            return
        row_spaces = self._row_spaces(state, spaces)
        problems, columns = _episode_problems(row, state, row_spaces, self.sample_steps)
        self.report.problems.extend(problems)
        for name, (space, source) in row_spaces.items():
            if id(space) not in self.checked[name]:
                self.checked[name][id(space)] = f"{space} ({source})"
        if columns is None:
            return
        self.report.num_episodes += 1
        self.report.num_steps += len(columns)
        self._check_duplicate(row, columns)

    def _row_spaces(
        self, state: Any, spaces: Dict[str, Tuple[Any, str]]
    ) -> Dict[str, Tuple[Any, str]]:
        """The file's spaces, completed by those the episode carries."""
        row_spaces = dict(spaces)
        for name in self.given:
            if name not in row_spaces:
                space = self.carried_spaces.get(state, name)
                if space is not None:
                    row_spaces[name] = (space, SPACES_FROM_EPISODES)
        return row_spaces

    def _check_duplicate(self, row: EpisodeRow, columns: EpisodeColumns) -> None:
        """Reports an episode id seen before, else remembers where it is."""
        where = row.location
        if columns.id_ in self.seen_ids:
            self.report.problems.append(
                Problem(
                    "duplicate-id",
                    f"the episode id also occurs at {self.seen_ids[columns.id_]}. "
                    "The training buffer skips an episode whose id it "
                    "already holds, so copies are dropped or weigh "
                    "differently. Drop the copy.",
                    file=row.file,
                    row=row.index,
                    episode_id=columns.id_,
                )
            )
        else:
            self.seen_ids[columns.id_] = where

    def finish(self) -> None:
        """Reports a dataset without episodes and the spaces checked against."""
        report = self.report
        if report.num_episodes == 0 and not any(
            p.kind in ("undecodable", "not-an-episode") for p in report.problems
        ):
            report.problems.append(
                Problem(
                    "no-episodes",
                    "the dataset holds no episodes. Check the path: pass the "
                    "directory `EpisodeWriter` (or the recorder) wrote to.",
                )
            )
        for name in ("observation_space", "action_space"):
            texts = sorted(set(self.checked[name].values()))
            setattr(report, name, "; ".join(texts) or None)


@PublicAPI(stability="alpha")
def validate_dataset(
    path: PathLike,
    *,
    filesystem: Optional[pa_fs.FileSystem] = None,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
    sample_steps: Optional[int] = DEFAULT_SAMPLE_STEPS,
    progress: bool = False,
) -> ValidationReport:
    """Reads every episode of a dataset and reports every problem found.

    Checks each file (parquet, an `item` column, readable metadata, the same
    spaces as the other files) and each row: the payload decodes to an
    episode state, the episode is done and has steps, observations, actions,
    rewards and the `eps_id` / `env_steps` columns agree in length and id,
    rewards are finite, observations and actions lie in their spaces
    (`space.contains` on `sample_steps` steps per field, or all), and no
    episode id occurs twice.

    Spaces checked against, per file: the ones given here, else the file's
    metadata, else the ones the episodes carry.

    Args:
        path: A file, a directory (searched recursively), or a list of them.
        filesystem: A `pyarrow.fs.FileSystem`; None infers it from `path`.
        observation_space: Check observations against this space.
        action_space: Check actions against this space.
        sample_steps: Steps per episode and field to check against the
            spaces, evenly spread, first and last included; None checks all.
        progress: Whether to show a progress bar on stderr.

    Returns:
        A `ValidationReport`; `report.ok` is whether no problem was found.

    Raises:
        FileNotFoundError: If a path does not exist or holds no parquet file.
    """
    if sample_steps is not None and sample_steps < 1:
        raise ValueError(
            f"`sample_steps` must be a positive int or None (all steps), got "
            f"{sample_steps!r}."
        )
    files = open_episode_files(path, filesystem=filesystem)
    paths = _as_strings(path)
    report = ValidationReport(
        paths=paths, num_files=len(files), sample_steps=sample_steps
    )
    recorded, report.problems = recorded_spaces(files)
    given = {"observation_space": observation_space, "action_space": action_space}
    report.problems.extend(_given_space_problems(given, recorded))
    validator = _Validator(report, given, sample_steps)
    with progress_bar(count_rows(files), "validate", progress) as bar:
        for episode_file in files:
            validator.check_file(episode_file, bar)
    validator.finish()
    return report


__all__ = [
    "DatasetInfo",
    "EpisodeFile",
    "FileInfo",
    "Problem",
    "Stats",
    "ValidationReport",
    "dataset_info",
    "open_episode_files",
    "validate_dataset",
]
