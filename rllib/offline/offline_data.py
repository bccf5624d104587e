"""The fork's `OfflineData`: decode recorded episodes once, sample at array speed.

Replaces `ray.rllib.offline.offline_data.OfflineData` with a subclass. For
recorded episodes (`input_read_episodes=True`) it

- lists the input files and reads their recorded spaces once, on the driver
  (a missing or empty `input_`, or files that disagree, fail right here);
- decodes every episode once, in parallel Ray tasks, into blocks that stay
  in the object store for all of training (`rllib.offline.in_memory.store`),
  and hands each Learner an `EpisodeShard` (disjoint, balanced by
  timesteps) in place of a Ray Data iterator; the Learner samples train
  batches from it uniformly over all of its timesteps
  (`rllib.offline.in_memory.shard_sampler`);
- when the decoded episodes would exceed the memory budget, hands each
  Learner a `CachedEpisodeShard` instead: row ranges it decodes into a
  bounded, rotating cache and samples uniformly
  (`rllib.offline.in_memory.block_cache`);
- streams through Ray Data with the `OfflinePreLearner` (as upstream
  does) when the setup needs the streaming pipeline (offline evaluation, a
  custom prelearner, a stateful module, another read method, a budget of 0).
  The log says which mode runs and why.

Recorded `MultiAgentEpisode`s: each agent's episode goes to the module
`config.multi_agent(policy_mapping_fn=...)` maps it to, and every module's
batch is sampled from that module's episodes: on each Learner in memory, or
in the prelearner's columnar path when streaming (`num_learners` 0 or 1;
upstream's prelearner has no multi-agent support).

The memory budget is per node: `config.offline_data(memory_budget=bytes)`, by
default half of the object store
of the node that holds the decoded episodes (with 0 or 1 Learners the
driver's or the Learner's node holds all of them, with more each Learner's
node its shard). It is checked before decoding, from the files' sizes and a
decoded sample (`rllib.offline.in_memory.store`); over it, the rotating
caches take over (logged at WARNING with the numbers). 0 always streams.

`input_filesystem` ("s3", "gcs", "abs" with `input_filesystem_kwargs`, a
pyarrow or fsspec filesystem) is used to list and decode the files;
`input_read_method_kwargs` that could change which rows are read (a row
`filter`, `columns`, ...) make the data stream through Ray Data, which
applies them (`rllib.offline.in_memory.read_options`).
"""

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import ray
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env import INPUT_ENV_SPACES
from ray.rllib.offline import offline_data as _upstream
from ray.rllib.utils.annotations import override
from ray.util.annotations import PublicAPI

from rllib._fork.cluster_check import fork_stamp
from rllib.offline.episode_files.action_units import (
    ENV_UNITS,
    NORMALIZED,
    ActionRescaling,
    action_rescaling,
    actions_outside_normalized_range,
    has_rescaled_leaves,
    input_action_units,
)
from rllib.offline.episode_files.filesystem import (
    as_pyarrow,
    input_filesystem,
    is_fsspec,
    resolve_filesystem,
)
from rllib.offline.episode_files.reader import (
    agreed_metadata,
    iter_payloads,
    list_episode_files,
    open_parquet,
)
from rllib.offline.in_memory.block_cache import (
    DEFAULT_DRAWS_PER_TIMESTEP,
    RANGES_PER_CACHE,
    CachedEpisodeShard,
    plan_cached_shards,
)
from rllib.offline.in_memory.columns import agent_to_module_fn, decode_episode_columns
from rllib.offline.in_memory.memory_budget import (
    DEFAULT_BUDGET_SHARE,  # noqa: F401 (re-exported)
    Allowance,
    allowed_bytes,
    configured_budget,
    start_ray_if_needed,
)
from rllib.offline.in_memory.read_options import (
    listing_kwargs,
    task_options,
    unsupported_read_kwargs,
)
from rllib.offline.in_memory.shard_sampler import EpisodeShardSampler
from rllib.offline.in_memory.store import DecodePlan, EpisodeShard, EpisodeStore
from rllib.offline.offline_prelearner import OfflinePreLearner
from rllib.offline.offline_settings import (
    CACHE_DRAWS_PER_TIMESTEP,
    MEMORY_BUDGET,
    get_offline_setting,
)

logger = logging.getLogger("ray." + __name__)


@PublicAPI(stability="alpha")
class OfflineData(_upstream.OfflineData):
    """Offline data for training: in memory when it fits, in rotating caches
    beyond that, streamed where only Ray Data's pipeline serves.

    Attributes:
        mode: "in_memory", "beyond_memory" or "streaming" once the first
            `sample()` decided; None before.
    """

    def __init__(self, config):
        self.mode: Optional[str] = None
        self._store: Optional[EpisodeStore] = None
        self._shards: Dict[int, List[EpisodeShard]] = {}
        self._local_sampler: Optional[EpisodeShardSampler] = None
        self._episode_files: Optional[List[str]] = None
        self._episode_filesystem = None
        self._recorded_spaces: Tuple[Optional[gym.Space], Optional[gym.Space]] = (
            None,
            None,
        )
        #: The units of the input's actions: as the files record them, else
        #: as `config.offline_data(input_action_units=...)` states; None if
        #: neither says (the actions are then taken as they are).
        self.action_units: Optional[str] = getattr(config, "input_action_units", None)
        self._spaces: Optional[Dict[str, Any]] = None
        self._plan: Optional[DecodePlan] = None
        self._estimated_bytes: Optional[int] = None
        self._estimated_timesteps: Optional[int] = None
        #: Why the decoded episodes do not fit the budget (None: they do).
        self._beyond_memory_reason: Optional[str] = None
        self._cached_shards: Dict[int, List[CachedEpisodeShard]] = {}
        self._allowance: Optional[Allowance] = None
        if config.input_read_episodes and config.input_read_method == "read_parquet":
            # Before Ray Data sees the path: a missing or empty `input_` gets
            # an error that says what to do, not Ray Data's.
            self._read_episode_files(config)
        self._streaming_reason = _in_memory_blocker(config)
        if self._streaming_reason is None:
            # Ray Data reads the files only if the data ends up streaming.
            self._set_up_without_reading(config)
            # Ray starts here, as the base class's Ray Data read starts it.
            start_ray_if_needed()
            if any(self._decode_spaces()):
                # Before anything is decoded (Learners not placed yet: every
                # node they could go to counts). Without spaces yet, at the
                # first `sample()`.
                self._beyond_memory_reason = self._over_budget_reason(None)
                if (
                    self._beyond_memory_reason is None
                    and not self._decodes_on_learner_nodes()
                ):
                    self._start_decoding()
        elif config.input_read_episodes and is_fsspec(config.input_filesystem):
            # The base class's set-up refuses fsspec instances; Ray Data reads
            # them.
            self._set_up_without_reading(config)
            _ = self.data  # Read now, as the base class's set-up does.
        else:
            super().__init__(config)

    def _set_up_without_reading(self, config) -> None:
        """The base class's set-up, with the Ray Data read deferred to `data`."""
        self.config = config
        self.is_multi_agent = config.is_multi_agent
        self.path = (
            config.input_ if isinstance(config.input_, list) else Path(config.input_)
        )
        self.data_read_method = config.input_read_method
        self.data_read_method_kwargs = config.input_read_method_kwargs
        self.data_read_batch_size = config.input_read_batch_size
        self.materialize_data = config.materialize_data
        self.materialize_mapped_data = config.materialize_mapped_data
        self.data_is_mapped = False
        self.filesystem = config.input_filesystem
        self.filesystem_kwargs = config.input_filesystem_kwargs
        # "s3", "gcs" or "abs" with their kwargs, as the base class builds it.
        self.filesystem_object = input_filesystem(config)
        if is_fsspec(self.filesystem):
            self.filesystem_object = as_pyarrow(self.filesystem_object)
        if self.filesystem_object is not None:
            self.data_read_method_kwargs["filesystem"] = self.filesystem_object
        self.batch_iterators = None
        self.map_batches_kwargs = (
            self.default_map_batches_kwargs | config.map_batches_kwargs
        )
        self.iter_batches_kwargs = (
            self.default_iter_batches_kwargs | config.iter_batches_kwargs
        )
        self.returned_streaming_split = False
        self.prelearner_class = config.prelearner_class or OfflinePreLearner
        self.locality_hints = None
        self.learner_handles = None
        self.module_spec = None

    @property
    def data(self):
        """The Ray Data dataset (read on first use in the in-memory mode)."""
        if self.__dict__.get("_data") is None:
            dataset = getattr(ray.data, self.data_read_method)(
                self.path, **self.data_read_method_kwargs
            )
            self._data = dataset.materialize() if self.materialize_data else dataset
        return self._data

    @data.setter
    def data(self, dataset) -> None:
        self._data = dataset

    def _read_episode_files(self, config) -> None:
        """Lists the input files and reads the spaces and action units
        recorded in them."""
        (
            self._episode_filesystem,
            self._episode_files,
            self._recorded_spaces,
            recorded_units,
        ) = list_input_episodes(config)
        self.action_units = input_action_units(
            recorded_units, getattr(config, "input_action_units", None), config.input_
        )
        if self.action_units is None and config.normalize_actions:
            warn_if_actions_look_unnormalized(
                self._episode_files,
                self._episode_filesystem,
                self._recorded_spaces[1] or config.action_space,
            )

    def action_rescaling(self) -> Optional[ActionRescaling]:
        """How training maps the recorded actions to its module's units."""
        return action_rescaling(
            self.action_units,
            normalize_actions=self.config.normalize_actions,
            action_space=self._decode_spaces()[1],
        )

    def _decode_spaces(self) -> Tuple[Optional[gym.Space], Optional[gym.Space]]:
        """The spaces that restore Tuple structure when decoding."""
        known = (self.config.observation_space, self.config.action_space)
        if self._spaces is not None:
            known = self._spaces[INPUT_ENV_SPACES]
        return tuple(rec or conf for rec, conf in zip(self._recorded_spaces, known))

    def _decode_kwargs(self) -> Dict[str, Any]:
        observation_space, action_space = self._decode_spaces()
        return {
            "filesystem": self._episode_filesystem,
            "observation_space": observation_space,
            "action_space": action_space,
            "policy_mapping_fn": agent_to_module_fn(self.config),
            "action_rescaling": self.action_rescaling(),
        }

    def _start_decoding(self) -> None:
        shard_nodes = None
        if self._decodes_on_learner_nodes() and self.locality_hints:
            shard_nodes = list(self.locality_hints)
        self._store = EpisodeStore.start(
            self._episode_files,
            min_ranges=max(1, self.config.num_learners),
            plan=self._plan,
            task_options=task_options(self.config),
            shard_nodes=shard_nodes,
            **self._decode_kwargs(),
        )

    def _decodes_on_learner_nodes(self) -> bool:
        """Whether each Learner's shard is decoded on its own node: with 2 or
        more Learners on a cluster of several nodes, so that no node holds
        the whole data and no shard crosses the network after decoding.
        Decoding then waits for the Learners to be placed."""
        if self.config.num_learners < 2:
            return False
        return sum(1 for node in ray.nodes() if node.get("Alive")) > 1

    def _over_budget_reason(self, learner_node_ids) -> Optional[str]:
        """Why the decoded episodes would not fit the nodes that hold them.

        Checked before decoding, from the files' sizes and a decoded sample
        (`DecodePlan.estimate_decoded_bytes`); logged at WARNING.

        Args:
            learner_node_ids: Each remote Learner's node, None before they
                run (then every node one could be placed on counts).
        """
        # Starts Ray if the user has not (as the base class's read would here).
        allowance = allowed_bytes(self.config, learner_node_ids)
        if self._plan is None:
            self._plan = EpisodeStore.plan(
                self._episode_files,
                filesystem=self._episode_filesystem,
                min_ranges=max(1, self.config.num_learners),
            )
        if self._estimated_bytes is None:
            (
                self._estimated_bytes,
                self._estimated_timesteps,
            ) = self._plan.estimate_decoded(**self._decode_kwargs())
        self._allowance = allowance
        if self._estimated_bytes <= allowance.total_bytes:
            return None
        needed = int(self._estimated_bytes * allowance.node_share)
        reason = (
            f"the decoded episodes need about {needed / 2**20:.2f} MiB on node "
            f"{allowance.node_id} ({self._estimated_bytes / 2**20:.2f} MiB in all, "
            f"estimated from {self._plan.payload_bytes / 2**20:.2f} MiB of parquet "
            f"data), over its memory budget of {allowance.node_budget / 2**20:.2f} "
            f"MiB ({allowance.source}). To hold them in memory, raise the budget "
            f"per node with `{MEMORY_BUDGET.argument()}` (bytes) or give the "
            "node more object store memory"
        )
        logger.warning(
            "Offline data beyond memory: %s. Each Learner samples a rotating "
            "cache of its part of the episodes instead.",
            reason,
        )
        return reason

    @property
    def spaces(self) -> Optional[Dict[str, Any]]:
        return self._spaces

    @spaces.setter
    def spaces(self, spaces: Optional[Dict[str, Any]]) -> None:
        """Set by the Algorithm at the end of its setup: checks the recorded
        spaces against the ones training uses (from the config or the env)."""
        self._spaces = spaces
        if spaces and INPUT_ENV_SPACES in spaces:
            check_recorded_spaces(
                self._recorded_spaces, spaces[INPUT_ENV_SPACES], self.config
            )

    @override(_upstream.OfflineData)
    def sample(
        self,
        num_samples: int,
        return_iterator: bool = False,
        num_shards: int = 1,
        module_state: Dict[str, Any] = None,
    ):
        if num_shards > 1 and not return_iterator:
            raise ValueError(
                f"`OfflineData.sample(num_shards={num_shards})` splits the data "
                "into one stream per Learner and returns their iterators: pass "
                "`return_iterator=True`, or `num_shards=1` for a single batch."
            )
        if self.mode is None:
            self.mode = self._choose_mode()
        if self.mode == "streaming":
            return self._sample_streaming(
                num_samples, return_iterator, num_shards, module_state
            )
        if return_iterator:
            return self.shards(max(1, num_shards))
        return self._sample_locally(num_samples)

    def shards(self, num_shards: int) -> List[EpisodeShard]:
        """The episodes dealt out to `num_shards` Learners: decoded blocks in
        memory (`EpisodeShard`), row ranges for a rotating cache beyond it
        (`CachedEpisodeShard`)."""
        if self.mode == "beyond_memory":
            if num_shards not in self._cached_shards:
                self._cached_shards[num_shards] = self._plan_cached_shards(num_shards)
            return list(self._cached_shards[num_shards])
        if num_shards not in self._shards:
            self._shards[num_shards] = self._store.shards(num_shards)
        return list(self._shards[num_shards])

    def _plan_cached_shards(self, num_shards: int) -> List[CachedEpisodeShard]:
        allowance = self._allowance
        learners_on_node = max(1, round(allowance.node_share * num_shards))
        draws = get_offline_setting(
            self.config, CACHE_DRAWS_PER_TIMESTEP, DEFAULT_DRAWS_PER_TIMESTEP
        )
        shards = plan_cached_shards(
            self._plan,
            estimated_bytes=self._estimated_bytes,
            estimated_timesteps=self._estimated_timesteps,
            cache_bytes=allowance.node_budget // learners_on_node,
            num_shards=num_shards,
            draws_per_timestep=draws,
            decode_kwargs=self._decode_kwargs(),
            task_options=task_options(self.config),
        )
        logger.info(
            "Offline data beyond memory: %d row ranges dealt out to %d Learner(s); "
            "each caches %d decoded ranges at a time and replaces one after %.2f "
            "draws per timestep.",
            sum(len(shard.ranges) for shard in shards),
            num_shards,
            RANGES_PER_CACHE,
            draws,
        )
        return shards

    def _choose_mode(self) -> str:
        reason = self._streaming_reason or self._stateful_module_reason()
        if reason is None:
            # The Learners run now: check the nodes they are on.
            reason = self._over_budget_reason(self.locality_hints)
            if reason is not None and self._store is not None:
                self._store.cancel()
                self._store = None
            if reason is None:
                if self._store is None:
                    self._start_decoding()
                budget = self._allowance.total_bytes
                if self._store.wait(budget):
                    logger.info(
                        "Offline data in memory: %d episodes, %.1f MiB "
                        "decoded (budget %.1f MiB); Learners sample them directly.",
                        self._store.num_episodes,
                        self._store.nbytes / 2**20,
                        budget / 2**20,
                    )
                    return "in_memory"
                reason = (
                    f"the decoded episodes exceed the memory budget of {budget} "
                    f"bytes (`{MEMORY_BUDGET.argument()}`)"
                )
                self._store = None
            blocker = self._beyond_memory_blocker()
            if blocker is None:
                return "beyond_memory"
            reason = f"{reason}, and {blocker}"
        if self.config.is_multi_agent and self.config.input_read_episodes:
            self._check_multi_agent_streaming(reason)
        logger.info("Offline data streams through Ray Data: %s.", reason)
        return "streaming"

    def _beyond_memory_blocker(self) -> Optional[str]:
        """Why a rotating cache cannot stand in for memory, or None.

        With several Learners every update all-reduces every module's
        gradients; a cache that holds no episode of some module for a while
        would leave the other Learners waiting.
        """
        if self.config.is_multi_agent and self.config.num_learners > 1:
            return (
                "multi-agent episodes rotate through several Learners' caches "
                "only in memory"
            )
        return None

    def _check_multi_agent_streaming(self, reason: str) -> None:
        """Raises unless the prelearner can stream multi-agent episodes.

        Its columnar path builds each module's batch; its per-episode path
        (stateful modules) and prelearner classes not built on it have no
        multi-agent support. With several Learners every Learner must get every module's
        batch at every update (DDP), which only the in-memory shards ensure.
        """
        prelearner_class = self.config.prelearner_class or OfflinePreLearner
        blocker = None
        if not issubclass(prelearner_class, OfflinePreLearner):
            blocker = (
                f"`prelearner_class` {prelearner_class} is not an `OfflinePreLearner`"
            )
        else:
            blocker = self._stateful_module_reason()
        if blocker is None and self.config.num_learners > 1:
            blocker = f"`num_learners={self.config.num_learners}` (0 or 1 stream)"
        if blocker is None:
            return
        raise ValueError(
            f"Multi-agent episodes cannot be held in memory here ({reason}) and "
            f"cannot stream either: {blocker}. Raise "
            f"`{MEMORY_BUDGET.argument()}` (bytes; or give the cluster more "
            "object store memory), train on "
            "a part of the episodes, or stream with the `OfflinePreLearner`, "
            "a stateless module and `num_learners` 0 or 1."
        )

    def _stateful_module_reason(self) -> Optional[str]:
        """Stateful modules train on sequences, which only the per-episode path
        (`EpisodeReplayBuffer`) samples."""
        learner = self.learner_handles[0] if self.learner_handles else None
        module = getattr(learner, "module", None)
        if module is None:
            try:
                module = self.module_spec.build()
            except Exception as error:  # Only for the check; streaming is safe.
                return f"the module could not be built on the driver ({error})"
        if module.is_stateful():
            return "the module is stateful (it trains on sequences)"
        return None

    def _sample_locally(self, num_samples: int):
        """One batch sampled here, from the first shard.

        With a local Learner (`num_learners=0`, one update per iteration) the
        batch is built with its pipeline and module; otherwise (a caller
        inspecting the data) with a pipeline and module built here.
        """
        if self._local_sampler is None:
            learner = self.learner_handles[0] if self.learner_handles else None
            if hasattr(learner, "_learner_connector"):
                pipeline, module = learner._learner_connector, learner.module
            else:
                observation_space, action_space = self.spaces[INPUT_ENV_SPACES]
                pipeline = self.config.build_learner_connector(
                    input_observation_space=observation_space,
                    input_action_space=action_space,
                )
                module = self.module_spec.build()
            self._local_sampler = EpisodeShardSampler(
                self.shards(1)[0],
                pipeline=pipeline,
                rl_module=module,
                config=self.config,
            )
        return self._local_sampler.sample(num_samples)

    def _sample_streaming(self, num_samples, return_iterator, num_shards, module_state):
        """The base class's Ray Data pipeline; Learners compute the value targets."""
        if not self.data_is_mapped:
            if not module_state:
                module_state = self._learner_module_state(num_shards)
            constructor_kwargs = {
                "config": self.config,
                "spaces": self.spaces[INPUT_ENV_SPACES],
                "module_spec": self.module_spec,
                "module_state": module_state,
            }
            if issubclass(self.prelearner_class, OfflinePreLearner):
                constructor_kwargs["compute_value_targets"] = False
                constructor_kwargs["fork_stamp"] = fork_stamp()
            self.data = self.data.map_batches(
                self.prelearner_class,
                fn_constructor_kwargs=constructor_kwargs,
                batch_size=self.data_read_batch_size or num_samples,
                **self.map_batches_kwargs,
            )
            self.data_is_mapped = True
            if self.materialize_mapped_data:
                self.data = self.data.materialize()
        return super().sample(
            num_samples=num_samples,
            return_iterator=return_iterator,
            num_shards=num_shards,
            module_state=module_state,
        )

    def _learner_module_state(self, num_shards: int):
        from ray.rllib.core import COMPONENT_RL_MODULE

        learner = self.learner_handles[0]
        if num_shards >= 1:
            state = ray.get(learner.get_state.remote(component=COMPONENT_RL_MODULE))
        else:
            state = learner.get_state(component=COMPONENT_RL_MODULE)
        return state[COMPONENT_RL_MODULE]


def list_input_episodes(config):
    """Lists `config.input_`'s episode files and what they record.

    Returns:
        `(filesystem, files, (observation_space, action_space),
        action_units)`; a space or the units are None where no file records
        them.

    Raises:
        FileNotFoundError: If a path does not exist or holds no parquet file.
        ValueError: If files record different spaces or action units.
    """
    inputs = config.input_
    paths = inputs if isinstance(inputs, list) else [inputs]
    paths = [_without_local_scheme(str(p)) for p in paths]
    # None: inferred from the paths (e.g. "s3://...").
    filesystem = as_pyarrow(input_filesystem(config))
    extensions = listing_kwargs(config).get("file_extensions", ("parquet",))
    try:
        filesystem, files = list_episode_files(
            paths, filesystem=filesystem, file_extensions=extensions
        )
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"`config.offline_data(input_={inputs!r})`: {error} With "
            "`input_read_episodes=True`, `input_` names the directories (or "
            "files) that `EpisodeWriter` or the recorder wrote."
        ) from None
    spaces, action_units = agreed_metadata(
        files,
        filesystem=filesystem,
        where=f" under `{config.input_}`",
        fix="Train on one kind of episode per run (separate directories), or "
        "re-record the odd files.",
    )
    return filesystem, files, spaces, action_units


def warn_if_actions_look_unnormalized(files, filesystem, action_space) -> None:
    """Warns if files that record no action units hold actions beyond
    [-1, 1] on a `Box` whose bounds are not [-1, 1].

    With `normalize_actions=True` the module acts in [-1, 1], so such
    actions are most likely in the environment's units. Looks at the first
    episode of up to 4 files.
    """
    if isinstance(action_space, dict) or not has_rescaled_leaves(action_space):
        return
    for path in files[:4]:
        actions = _first_episode_actions(path, filesystem, action_space)
        largest = actions_outside_normalized_range(actions, action_space)
        if largest is not None:
            logger.warning(
                "Episode file `%s` holds actions up to %.3g in absolute value, "
                "outside [-1, 1], but records no action units, so training "
                "reads them as normalized: with `normalize_actions=True` the "
                "module acts in [-1, 1] and the EnvRunner scales its actions "
                "to %s. If the file holds actions in the environment's units, "
                "set `config.offline_data(input_action_units=%r)` (training "
                "then maps them to [-1, 1]); if they are normalized, set %r.",
                path,
                largest,
                action_space,
                ENV_UNITS,
                NORMALIZED,
            )
            return


def _first_episode_actions(path, filesystem, action_space) -> Optional[Any]:
    """The actions of the first episode in `path`; None if it has none or
    does not decode (training names undecodable rows)."""
    if filesystem is None:
        filesystem, path = resolve_filesystem(path)
    with filesystem.open_input_file(path) as handle:
        rows = iter_payloads(open_parquet(handle, path), path, batch_size=1)
        for _, payload, _ in rows:
            try:
                return decode_episode_columns(
                    payload, action_space=action_space
                ).actions
            except Exception:
                return None
    return None


def recorded_input_metadata(config):
    """`(spaces, action_units)` recorded with `config.input_`'s episodes, as
    `list_input_episodes` reads them; None if `input_` is not a list of
    parquet paths (e.g. a callable input or another read method). For
    `MultiAgentEpisode`s the spaces are dicts by agent id.

    Raises:
        As :func:`list_input_episodes`.
    """
    if config.input_read_method != "read_parquet" or not isinstance(
        config.input_, (str, list)
    ):
        return None
    return list_input_episodes(config)[2:]


def take_recorded_agent_spaces(config, spaces) -> None:
    """Gives each module the spaces recorded for the agents mapped to it.

    For recorded `MultiAgentEpisode`s whose files carry per-agent spaces: a
    module in `config.policies` without spaces gets those of its agents
    (through `config.policy_mapping_fn(agent_id, None)`), and an unset
    `config.observation_space` / `action_space` becomes the `Dict` of all
    agents' spaces, so training needs no environment. Spaces set in the
    config are kept.

    Args:
        config: The algorithm config; its `policies` and spaces may change.
        spaces: `(observation spaces, action spaces)` recorded in the files,
            dicts by agent id (`recorded_input_metadata`).

    Raises:
        ValueError: If agents mapped to one module were recorded with
            different spaces, or an agent maps to a module not in
            `config.policies`.
    """
    from ray.rllib.policy.policy import PolicySpec

    spaces = [space or {} for space in spaces]
    mapping_fn = agent_to_module_fn(config)
    found: Dict[str, Tuple[Any, Any, Any]] = {}
    for agent_id in {*spaces[0], *spaces[1]}:
        try:
            module_id = mapping_fn(agent_id, None) if mapping_fn else DEFAULT_MODULE_ID
        except Exception:  # A mapping that needs the episode: leave it unset.
            continue
        if module_id not in (config.policies or {}):
            raise ValueError(
                f"`config.multi_agent(policy_mapping_fn=...)` maps the recorded "
                f"agent `{agent_id!r}` to module `{module_id}`, but "
                f"`policies` has only {sorted(config.policies, key=repr)}. Map "
                "every recorded agent to a module in `policies` (the agents are "
                f"in the files' metadata: {sorted(spaces[0] or {}, key=repr)})."
            )
        agent_spaces = (spaces[0].get(agent_id), spaces[1].get(agent_id))
        if module_id in found and found[module_id][1:] != agent_spaces:
            raise ValueError(
                f"Agents `{found[module_id][0]!r}` and `{agent_id!r}` map to module "
                f"`{module_id}` but were recorded with different spaces "
                f"({found[module_id][1:]} vs {agent_spaces}). Map them to "
                "different modules, or give the module its spaces in "
                "`config.multi_agent(policies={...: PolicySpec(...)})`."
            )
        found[module_id] = (agent_id, *agent_spaces)
    taken = []
    for module_id, (_, observation_space, action_space) in found.items():
        spec = (config.policies or {}).get(module_id)
        if spec is None:
            continue
        if not isinstance(spec, PolicySpec):  # A plain tuple of its fields.
            spec = PolicySpec(*spec)
        if spec.observation_space is None or spec.action_space is None:
            config.policies[module_id] = PolicySpec(
                policy_class=spec.policy_class,
                observation_space=spec.observation_space or observation_space,
                action_space=spec.action_space or action_space,
                config=spec.config,
            )
            taken.append(f"module `{module_id}`")
    # The env-level spaces, as a multi-agent env has them (a Dict by agent),
    # for what reads `config.observation_space` (without an env to evaluate
    # in, RLlib requires them).
    for name, recorded in zip(("observation_space", "action_space"), spaces):
        if getattr(config, name) is None:
            try:
                setattr(config, name, gym.spaces.Dict(recorded))
            except Exception:  # Agent ids gymnasium cannot order: leave unset.
                continue
            taken.append(f"`{name}`")
    if taken:
        logger.info(
            "Spaces of %s taken from the episode files under %s.",
            ", ".join(taken),
            config.input_,
        )


def _in_memory_blocker(config) -> Optional[str]:
    """Why the data must stream through Ray Data, or None."""
    if not config.input_read_episodes:
        return "the input is not recorded episodes"
    if config.in_evaluation:
        return "offline evaluation runners read Ray Data iterators"
    if config.input_read_method != "read_parquet":
        return f"`input_read_method={config.input_read_method!r}`"
    if config.prelearner_class not in (None, OfflinePreLearner):
        return f"custom `prelearner_class` {config.prelearner_class}"
    if configured_budget(config) == 0:
        return f"`{MEMORY_BUDGET.name}` is 0"
    unsupported = unsupported_read_kwargs(config)
    if unsupported:
        reason = (
            f"`input_read_method_kwargs` {unsupported} may change which rows are "
            "read, and only Ray Data applies them exactly"
        )
        logger.warning("Offline data streams through Ray Data: %s.", reason)
        return reason
    return None


def check_recorded_spaces(recorded, configured, config) -> None:
    """Raises if the spaces recorded with the episodes contradict training's.

    Args:
        recorded: `(observation_space, action_space)` read from the files; an
            entry may be None (nothing recorded).
        configured: The spaces training uses; an entry may be None.
        config: The algorithm config (its `num_envs_per_env_runner` batches
            the env's spaces).

    Raises:
        ValueError: Naming the space, both values and how to fix it.
    """
    for name, rec, conf in zip(
        ("observation_space", "action_space"), recorded, configured
    ):
        if rec is None or conf is None or _same_space(rec, conf, config):
            continue
        if isinstance(rec, dict):  # Per-agent spaces of multi-agent episodes.
            continue
        raise ValueError(
            f"The episodes under `{config.input_}` were recorded with `{name}` "
            f"{rec}, but training uses `{name}` {conf}. Train with the spaces "
            "the data was recorded with (the matching env, or "
            f"`config.environment({name}=...)`; leave it unset to take it from "
            "the data), or record the data again. "
            "`ray.rllib.offline.episode_files.reader.read_spaces(path)` returns the "
            "recorded spaces."
        )


def _same_space(recorded: gym.Space, configured: gym.Space, config) -> bool:
    """Equal, or equal once batched as the vector env batches spaces."""
    if recorded == configured:
        return True
    from gymnasium.vector.utils import batch_space

    try:
        batched = batch_space(recorded, config.num_envs_per_env_runner)
    except Exception:  # A space gymnasium cannot batch: not a match.
        return False
    return batched == configured


def _without_local_scheme(path: str) -> str:
    # Ray Data's "local://" means "on the driver's node": a plain local path.
    return path[len("local://") :] if path.startswith("local://") else path


#: Upstream names in `ray.rllib.offline.offline_data` that this module replaces.
REPLACES = {
    "OfflineData": OfflineData,
}
