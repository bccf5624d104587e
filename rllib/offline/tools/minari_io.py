"""Reads Minari datasets as RLlib episodes, and writes episodes as Minari datasets.

`Minari <https://minari.farama.org>`__ is the Farama Foundation's format for
offline RL datasets (the successor of D4RL). This module connects it with
RLlib's `SingleAgentEpisode`:

- `read_minari` yields the episodes of a Minari dataset (an id under
  `MINARI_DATASETS_PATH`, a directory, or a `minari.MinariDataset`), with the
  dataset's spaces, the infos, the done flags and the Minari episode metadata.
- `convert_minari` streams a dataset into episode files
  (`EpisodeWriter`), with a progress bar. BC and MARWIL train on those with
  `config.offline_data(input_read_episodes=True)`.
- `write_minari` writes episodes (recorded by RLlib or by your own code) as a
  Minari dataset that `minari.load_dataset` opens, with either storage
  backend (`"hdf5"` or `"arrow"`).

Both of Minari's backends and any nest of `Dict` and `Tuple` spaces over
`Box`, `Discrete`, `MultiBinary` and `MultiDiscrete` are supported.
`minari` is an optional dependency, imported when a function here is first
called: install it with `pip install "rllib-fork[minari]"`.

Example:

.. testcode::
    :skipif: True

    from ray.rllib.offline.tools.minari_io import convert_minari, read_minari

    for episode in read_minari("cartpole/expert-v0"):
        print(len(episode), episode.get_return())
    files = convert_minari("cartpole/expert-v0", "/tmp/cartpole-expert")
"""

import contextlib
import itertools
import os
import pathlib
import shutil
import warnings
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import gymnasium as gym
import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.filesystem import resolve_filesystem
from rllib.offline.episode_files.validation import validate_episode
from rllib.offline.episode_files.writer import EpisodeWriter
from rllib.offline.tools.minari_codec import (
    CUSTOM_DATA_KEY,
    episode_from_minari,
    episode_id,
    episode_to_minari,
    to_python,
)

if TYPE_CHECKING:
    import minari

#: The oldest Minari release this module works with.
MIN_MINARI_VERSION = "0.5.4"
#: How to install what this module needs.
INSTALL_HINT = (
    'pip install "rllib-fork[minari]" (in a source checkout: '
    'pip install -e ".[minari]")'
)
#: Minari's storage backends that `write_minari` writes.
DATA_FORMATS = ("hdf5", "arrow")
#: Dataset metadata `write_minari` passes on to Minari.
DATASET_METADATA_KEYS = (
    "algorithm_name",
    "author",
    "author_email",
    "code_permalink",
    "description",
    "eval_env",
    "expert_policy",
    "num_episodes_average_score",
    "ref_max_score",
    "ref_min_score",
    "requirements",
)
#: Episodes loaded from (or handed to) Minari at a time.
_CHUNK = 64

#: A Minari dataset id, a dataset directory, or a `minari.MinariDataset`.
DatasetLike = Union[str, "os.PathLike[str]", "minari.MinariDataset"]


def _import_minari():
    """Imports and returns `minari`, or raises an error naming the extra.

    Raises:
        ImportError: If `minari` is missing or older than
            `MIN_MINARI_VERSION`.
    """
    try:
        import minari
    except ImportError as error:
        raise ImportError(
            f"Minari datasets need the `minari` package, which cannot be "
            f"imported ({error}). Install it: "
            f"{INSTALL_HINT}."
        ) from error
    from packaging.version import Version

    version = getattr(minari, "__version__", "0")
    if Version(version) < Version(MIN_MINARI_VERSION):
        raise ImportError(
            f"Minari {version} is installed; Minari datasets need minari>="
            f"{MIN_MINARI_VERSION}. Upgrade it: {INSTALL_HINT}."
        )
    return minari


@contextlib.contextmanager
def _backend_imports(where: str):
    """Turns a missing storage-backend package (h5py, pyarrow, Pillow) into an
    error that names the extra."""
    try:
        yield
    except ImportError as error:
        raise ImportError(
            f"{where} needs a package of Minari's storage backends ({error}). "
            f"Install them: {INSTALL_HINT}."
        ) from error


def _describe(dataset) -> str:
    return f"Minari dataset `{dataset.id}` ({dataset.storage.data_path})"


def _local_dataset_ids(minari) -> List[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return sorted(minari.list_local_datasets())
        except Exception:  # Only used to enrich an error message.
            return []


@PublicAPI(stability="alpha")
def open_minari_dataset(dataset: DatasetLike):
    """Opens a Minari dataset given by id, by directory, or as an object.

    Args:
        dataset: A dataset id (`"cartpole/expert-v0"`, looked up under
            `MINARI_DATASETS_PATH`, by default `~/.minari/datasets`), the
            dataset's directory (or its `data` subdirectory), or a
            `minari.MinariDataset`.

    Returns:
        The `minari.MinariDataset`.

    Raises:
        ImportError: If `minari` (or a backend package) is not installed.
        FileNotFoundError: If no dataset has that id or path.
        TypeError: If `dataset` is of another type.
    """
    minari = _import_minari()
    if isinstance(dataset, minari.MinariDataset):
        return dataset
    if not isinstance(dataset, (str, os.PathLike)):
        raise TypeError(
            "`dataset` must be a Minari dataset id, a dataset directory or a "
            f"`minari.MinariDataset`, got `{type(dataset).__name__}`."
        )
    path = pathlib.Path(dataset).expanduser()
    where = f"Reading the Minari dataset `{os.fspath(dataset)}`"
    for candidate in (path, path / "data"):
        if (candidate / "metadata.json").is_file():
            with _backend_imports(where):
                return minari.MinariDataset(candidate)
    if path.is_dir():
        raise FileNotFoundError(
            f"`{path}` is not a Minari dataset: it has no `metadata.json`, "
            "neither directly nor in `data/`. Pass the dataset's directory "
            "(`<MINARI_DATASETS_PATH>/<dataset id>`) or its id."
        )
    dataset_id = os.fspath(dataset)
    root = minari.storage.get_dataset_path()
    if (root / dataset_id / "data").is_dir():
        with _backend_imports(where):
            return minari.load_dataset(dataset_id)
    local = _local_dataset_ids(minari)
    shown = ", ".join(f"`{i}`" for i in local[:10]) or "none"
    if len(local) > 10:
        shown += f" and {len(local) - 10} more"
    raise FileNotFoundError(
        f"No Minari dataset `{dataset_id}`: it is neither a directory nor a "
        f"dataset id under `{root}` (`MINARI_DATASETS_PATH`="
        f"{os.environ.get('MINARI_DATASETS_PATH')!r}; local datasets: {shown}). "
        "Download it first (`minari download <id>`, or "
        "`minari.load_dataset(<id>, download=True)`), set `MINARI_DATASETS_PATH` "
        "to the directory that holds it, or pass the dataset's directory."
    )


def _episode_indices(dataset, episode_indices: Optional[Iterable[int]]) -> List[int]:
    if episode_indices is None:
        return [int(i) for i in dataset.episode_indices]
    total = dataset.storage.total_episodes
    indices = []
    for index in episode_indices:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(
                f"`episode_indices` must hold ints, got {index!r} "
                f"(`{type(index).__name__}`)."
            )
        if not 0 <= index < total:
            raise ValueError(
                f"`episode_indices` holds {int(index)}, but {_describe(dataset)} "
                f"has episodes 0 to {total - 1}."
            )
        indices.append(int(index))
    return indices


def _iter_episodes(
    dataset,
    indices: Sequence[int],
    read_infos: bool,
    truncate_unfinished: bool,
) -> Iterator[SingleAgentEpisode]:
    described = _describe(dataset)
    for start in range(0, len(indices), _CHUNK):
        chunk = indices[start : start + _CHUNK]
        with _backend_imports(f"Reading {described}"):
            metadatas = list(dataset.storage.get_episode_metadata(chunk))
            chunk_episodes = list(dataset.iterate_episodes(chunk))
        for data, metadata in zip(chunk_episodes, metadatas):
            index = int(data.id)
            yield episode_from_minari(
                observations=data.observations,
                actions=data.actions,
                rewards=data.rewards,
                terminations=data.terminations,
                truncations=data.truncations,
                infos=data.infos if read_infos else None,
                observation_space=dataset.observation_space,
                action_space=dataset.action_space,
                id_=episode_id(dataset.id, index),
                where=f"Episode {index} of {described}",
                custom_data={
                    CUSTOM_DATA_KEY: {
                        "dataset_id": dataset.id,
                        "episode_id": index,
                        "metadata": to_python(metadata),
                    }
                },
                truncate_unfinished=truncate_unfinished,
            )


@PublicAPI(stability="alpha")
def read_minari(
    dataset: DatasetLike,
    *,
    episode_indices: Optional[Iterable[int]] = None,
    read_infos: bool = True,
    truncate_unfinished: bool = False,
) -> Iterator[SingleAgentEpisode]:
    """Yields the episodes of a Minari dataset as `SingleAgentEpisode`s.

    Each episode is numpy-ized and done, carries the dataset's observation
    and action spaces, one info dict per observation (the reset info first;
    empty dicts if the dataset has no infos), and `terminated`/`truncated`
    from the last step. `episode.custom_data["minari"]` records where it came
    from: `{"dataset_id", "episode_id", "metadata"}`, the metadata being
    Minari's per-episode metadata (`seed`, `total_steps`, `rewards_sum`, ...).
    The episode id is derived from the dataset id and the Minari episode id,
    so it is the same every time the dataset is read.

    The dataset is opened when you call this function (so a missing dataset
    raises here); episodes are then loaded a few at a time as you iterate.

    Args:
        dataset: A dataset id (looked up under `MINARI_DATASETS_PATH`), the
            dataset's directory, or a `minari.MinariDataset` (a filtered one
            yields only its episodes).
        episode_indices: Minari episode ids to read, in this order. None: all
            episodes of `dataset`.
        read_infos: Whether to read the infos.
        truncate_unfinished: Mark an episode whose last step is neither
            terminated nor truncated as truncated, instead of raising.

    Returns:
        An iterator over the episodes.

    Raises:
        ImportError: If the `minari` extra is not installed.
        FileNotFoundError: If the dataset does not exist.
        ValueError: While iterating, if an episode is inconsistent (columns of
            different lengths, an end in the middle) or unfinished; the
            message names the dataset, the episode and the field.
    """
    opened = open_minari_dataset(dataset)
    indices = _episode_indices(opened, episode_indices)
    return _iter_episodes(opened, indices, read_infos, truncate_unfinished)


@PublicAPI(stability="alpha")
def convert_minari(
    dataset: DatasetLike,
    output_dir: str,
    *,
    progress: bool = True,
    read_infos: bool = True,
    truncate_unfinished: bool = False,
    **writer_kwargs: Any,
) -> List[str]:
    """Converts a Minari dataset into episode files RLlib trains on.

    Streams the episodes of `dataset` through an `EpisodeWriter` into
    `output_dir`: parquet files with the dataset's spaces in their metadata,
    for `config.offline_data(input_=[output_dir], input_read_episodes=True)`.
    Memory stays bounded by a few episodes. If any episode fails, the files
    this call wrote are deleted again and the error names the Minari episode.

    Args:
        dataset: A dataset id, a dataset directory or a `minari.MinariDataset`
            (see `read_minari`).
        output_dir: Directory (or URI) for the episode files.
        progress: Show a progress bar (tqdm) of the episodes converted.
        read_infos: Whether to keep the infos.
        truncate_unfinished: See `read_minari`.
        **writer_kwargs: Passed to `EpisodeWriter` (`max_rows_per_file`,
            `compression`, `filesystem`, ...). The spaces default to the
            dataset's.

    Returns:
        The episode files written.

    Raises:
        ImportError: If the `minari` extra is not installed.
        FileNotFoundError: If the dataset does not exist.
        ValueError: If an episode is inconsistent, unfinished, or outside
            the dataset's spaces.
    """
    from tqdm.auto import tqdm

    opened = open_minari_dataset(dataset)
    indices = _episode_indices(opened, None)
    writer_kwargs = {
        "observation_space": opened.observation_space,
        "action_space": opened.action_space,
        **writer_kwargs,
    }
    filesystem, _ = resolve_filesystem(output_dir, writer_kwargs.get("filesystem"))
    writer = EpisodeWriter(output_dir, **writer_kwargs)
    steps = 0
    try:
        with tqdm(
            total=len(indices),
            desc=f"Converting {opened.id}",
            unit="episode",
            disable=not progress,
        ) as bar:
            episodes = _iter_episodes(opened, indices, read_infos, truncate_unfinished)
            for index, episode in zip(indices, episodes):
                try:
                    writer.write(episode)
                except (TypeError, ValueError) as error:
                    raise type(error)(
                        f"Converting episode {index} of {_describe(opened)}: {error}"
                    ) from error
                steps += len(episode)
                bar.update(1)
                bar.set_postfix(steps=steps, refresh=False)
        return writer.close()
    except BaseException:
        writer.abort()
        for file in writer.files:
            with contextlib.suppress(OSError):
                filesystem.delete_file(file)
        raise


def _resolve_spaces(first, observation_space, action_space, env):
    if (observation_space is None or action_space is None) and env is not None:
        made = isinstance(env, (str, gym.envs.registration.EnvSpec))
        instance = gym.make(env) if made else env
        observation_space = observation_space or instance.observation_space
        action_space = action_space or instance.action_space
        if made:
            instance.close()
    observation_space = observation_space or first.observation_space
    action_space = action_space or first.action_space
    if observation_space is None or action_space is None:
        missing = [
            name
            for name, space in (
                ("observation_space", observation_space),
                ("action_space", action_space),
            )
            if space is None
        ]
        raise ValueError(
            f"`write_minari` needs the dataset's spaces, but {missing} is not "
            "known: the episodes carry no spaces. Pass `observation_space=` and "
            "`action_space=`, or `env=` (an env id, `EnvSpec` or env)."
        )
    return observation_space, action_space


def _check_type(episode: Any, number: int, dataset_id: str) -> None:
    if not isinstance(episode, SingleAgentEpisode):
        raise TypeError(
            f"`write_minari` to `{dataset_id}`: episode #{number} is a "
            f"`{type(episode).__name__}`, not a `SingleAgentEpisode`. Minari "
            "datasets are single-agent: write each agent's `SingleAgentEpisode`."
        )


def _check_serializable(space: gym.Space, name: str) -> None:
    from minari.serialization import serialize_space

    try:
        serialize_space(space)
    except NotImplementedError as error:
        raise TypeError(
            f"Minari cannot store the `{name}` {space} ({error}). Minari "
            "supports Box, Discrete, MultiBinary, MultiDiscrete, Text, and Dict "
            "or Tuple spaces of these."
        ) from error


def _new_dataset_path(
    minari, dataset_id: str, data_format: str, dataset_metadata: Dict[str, Any]
) -> pathlib.Path:
    """Checks `write_minari`'s arguments; returns where the new dataset goes."""
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        parse_dataset_id(dataset_id)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"`dataset_id={dataset_id!r}` is not a Minari dataset id. Use "
            "`(namespace/)name-v<version>`, for example `cartpole/expert-v0` "
            "(a namespace has at least two characters)."
        ) from error
    if data_format not in DATA_FORMATS:
        raise ValueError(
            f"`data_format={data_format!r}` is not a Minari storage backend "
            f"this function writes; use one of {list(DATA_FORMATS)}."
        )
    unknown = sorted(set(dataset_metadata) - set(DATASET_METADATA_KEYS))
    if unknown:
        raise TypeError(
            f"`write_minari` got unknown keyword arguments {unknown}. Dataset "
            f"metadata for Minari can be: {list(DATASET_METADATA_KEYS)}."
        )
    path = minari.storage.get_dataset_path(dataset_id)
    if path.exists():
        raise FileExistsError(
            f"A Minari dataset `{dataset_id}` already exists at `{path}`. Pick "
            "another id or version (`...-v1`), or delete it first with "
            f"`minari.delete_dataset({dataset_id!r})`."
        )
    return path


def _first_episode(
    episodes: Iterable[SingleAgentEpisode],
) -> Tuple[Any, Iterator[Any]]:
    """The first of `episodes` (raises if none), and an iterator over all."""
    iterator = iter(episodes)
    first = next(iterator, None)
    if first is None:
        raise ValueError(
            "`episodes` is empty; a Minari dataset needs at least one episode."
        )
    return first, itertools.chain([first], iterator)


def _add_episodes(
    dataset,
    episodes: Iterator[Any],
    dataset_id: str,
    metadata_callback,
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    record_infos: bool,
    validate: bool,
) -> None:
    """Checks `episodes` and adds them to `dataset`, `_CHUNK` at a time."""
    from minari.data_collector import EpisodeBuffer

    number = 0
    while True:
        chunk = list(itertools.islice(episodes, _CHUNK))
        if not chunk:
            break
        buffers, episode_metadata = [], []
        for episode in chunk:
            fields = _minari_fields(
                episode,
                number,
                dataset_id,
                observation_space,
                action_space,
                record_infos=record_infos,
                validate=validate,
            )
            buffers.append(EpisodeBuffer(**fields))
            episode_metadata.append(metadata_callback({"rewards": fields["rewards"]}))
            number += 1
        first_index = dataset.storage.total_episodes
        dataset.update_dataset_from_buffer(buffers)
        dataset.storage.update_episode_metadata(
            episode_metadata,
            range(first_index, first_index + len(buffers)),
        )


def _minari_fields(
    episode: Any,
    number: int,
    dataset_id: str,
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    record_infos: bool,
    validate: bool,
) -> Dict[str, Any]:
    """Checks episode #`number`; returns its fields of Minari's `EpisodeBuffer`."""
    _check_type(episode, number, dataset_id)
    where_dataset = f"`write_minari` to `{dataset_id}`"
    where = f"{where_dataset}, episode #{number} (id `{episode.id_}`)"
    try:
        validate_episode(
            episode,
            observation_space if validate else None,
            action_space if validate else None,
        )
    except (TypeError, ValueError) as error:
        raise type(error)(f"{where_dataset}: {error}") from error
    return episode_to_minari(
        episode,
        observation_space,
        action_space,
        record_infos=record_infos,
        where=where,
    )


@PublicAPI(stability="alpha")
def write_minari(
    episodes: Iterable[SingleAgentEpisode],
    dataset_id: str,
    *,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
    env: Optional[Union[str, gym.Env, "gym.envs.registration.EnvSpec"]] = None,
    data_format: str = "hdf5",
    record_infos: bool = True,
    jpeg_encoding: bool = False,
    validate: bool = True,
    **dataset_metadata: Any,
):
    """Writes finished episodes as a Minari dataset.

    The dataset goes to `<MINARI_DATASETS_PATH>/<dataset_id>`, where
    `minari.load_dataset(dataset_id)` finds it. Its metadata records
    `total_episodes`, `total_steps`, the spaces, and for each episode its
    `total_steps`, the reward statistics Minari's `DataCollector` records
    (`rewards_sum`, `rewards_mean`, ...) and, for episodes read with
    `read_minari`, their original `seed` and `options`. Episodes are handed
    to Minari a few at a time, so `episodes` may be a generator. If anything
    fails, the partly written dataset is deleted.

    Args:
        episodes: Done `SingleAgentEpisode`s, numpy-ized or not.
        dataset_id: The new dataset's id, `(namespace/)name-v<version>`, for
            example `"cartpole/expert-v0"`.
        observation_space: The dataset's observation space. None: that of
            `env`, else of the first episode.
        action_space: The same for actions.
        env: The environment the episodes come from: an env id, an
            `EnvSpec` or an env. Recorded so that
            `dataset.recover_environment()` works; needs a registered env.
        data_format: Minari's storage backend, `"hdf5"` or `"arrow"`.
        record_infos: Write the episodes' infos. Every step, the reset
            included, needs the same info keys (Minari stores one column per
            key); all-empty infos are left out either way.
        jpeg_encoding: Let Minari store image observations (uint8, at least
            32x32) as JPEG (lossy, smaller). False stores them unchanged.
        validate: Check every observation and action against the spaces
            (done and lengths are always checked).
        **dataset_metadata: Dataset metadata for Minari:
            `algorithm_name`, `author`, `author_email`, `code_permalink`,
            `description`, `eval_env`, `requirements`, `ref_min_score`,
            `ref_max_score`, `expert_policy`, `num_episodes_average_score`.

    Returns:
        The `minari.MinariDataset`, as `minari.load_dataset` opens it.

    Raises:
        ImportError: If the `minari` extra is not installed.
        FileExistsError: If a dataset with `dataset_id` exists.
        ValueError: For a malformed `dataset_id`, an unknown `data_format`,
            no episodes, or an episode that is not done, lies outside the
            spaces, or has infos Minari cannot store as columns (the message
            names the episode, the field and the timestep).
        TypeError: For unknown `dataset_metadata` keys or a space Minari
            cannot store.
    """
    minari = _import_minari()
    path = _new_dataset_path(minari, dataset_id, data_format, dataset_metadata)
    first, all_episodes = _first_episode(episodes)
    _check_type(first, 0, dataset_id)
    observation_space, action_space = _resolve_spaces(
        first, observation_space, action_space, env
    )
    _check_serializable(observation_space, "observation_space")
    _check_serializable(action_space, "action_space")
    metadata_callback = minari.EpisodeMetadataCallback()
    try:
        with _backend_imports(f"Writing the Minari dataset `{dataset_id}`"):
            dataset = minari.create_dataset_from_buffers(
                dataset_id,
                buffer=[],
                env=env,
                observation_space=observation_space,
                action_space=action_space,
                data_format=data_format,
                jpeg_encoding=jpeg_encoding,
                **dataset_metadata,
            )
            _add_episodes(
                dataset,
                all_episodes,
                dataset_id,
                metadata_callback,
                observation_space,
                action_space,
                record_infos=record_infos,
                validate=validate,
            )
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return minari.load_dataset(dataset_id)


__all__ = [
    "convert_minari",
    "open_minari_dataset",
    "read_minari",
    "write_minari",
]
