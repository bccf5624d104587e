"""Train batches sampled on the Learner from its shard of decoded episodes.

The Learner gets an `EpisodeShard` (`rllib.offline.in_memory.store`) in place
of a Ray Data iterator, loads its blocks once and from then on samples each
train batch uniformly over all of the shard's timesteps and builds it with
its own connector pipeline (`rllib.offline.in_memory.batch_builder`): no
Ray Data pass, no decoding, no actor per pass.

Multi-agent data holds one set of blocks per module; each module's batch
is sampled from its own blocks and has the requested number of rows, as an
agent that acts at every env step contributes one row per env step online.
Modules left out of `config.multi_agent(policies_to_train=...)` get no rows,
so they are not trained.

Every Learner runs the same number of updates per `train()` (with several
Learners each update is a DDP all-reduce, so a Learner that stops early
leaves the others waiting forever): `dataset_num_iters_per_learner`, or if
unset `default_num_updates`, decided from the size of all shards together,
not of the Learner's own.
"""

import logging
from typing import Dict, Iterator, List, Optional

import numpy as np
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.offline.in_memory.batch_builder import make_batch_builder
from rllib.offline.in_memory.columnar_buffer import sample_transitions
from rllib.offline.in_memory.columns import EpisodeBlock, check_modules_known
from rllib.offline.in_memory.store import EpisodeShard
from rllib.offline.offline_settings import VALUE_HORIZON, get_offline_setting

logger = logging.getLogger("ray." + __name__)

#: Most updates one `train()` runs when `dataset_num_iters_per_learner` is
#: unset (large data would otherwise make one `train()` take hours).
DEFAULT_MAX_UPDATES = 100


def default_num_updates(
    total_timesteps: int, num_learners: int, batch_size: int, num_modules: int = 1
) -> int:
    """Updates per `train()` on every Learner if `dataset_num_iters_per_learner`
    is unset: one pass over all of the data by all Learners together (each
    update takes `batch_size` rows per module on each Learner), at least 1
    and at most `DEFAULT_MAX_UPDATES`.

    Args:
        total_timesteps: Timesteps of all shards together (agent steps of all
            modules for multi-agent data).
        num_learners: How many Learners share the data.
        batch_size: Rows per module in one update
            (`train_batch_size_per_learner`).
        num_modules: Modules with data.
    """
    rows_per_update = max(1, num_learners) * batch_size * max(1, num_modules)
    one_pass = -(-total_timesteps // rows_per_update)
    return max(1, min(DEFAULT_MAX_UPDATES, one_pass))


class EpisodeShardSampler:
    """Samples train batches from one shard with a Learner's pipeline.

    Args:
        shard: The shard to sample from; its blocks are fetched once.
        pipeline: The Learner connector pipeline the batches are built with.
        rl_module: The `MultiRLModule` the batches are for.
        config: The algorithm config (`gamma`, `n_step`, `seed`,
            `offline_data(value_horizon=...)`).
    """

    def __init__(self, shard: EpisodeShard, *, pipeline, rl_module, config):
        self.shard = shard
        selected = config.policies_to_train
        self.policies_to_train = (
            selected if selected is None or callable(selected) else frozenset(selected)
        )
        self.rl_module = rl_module
        self.builder, reason = make_batch_builder(pipeline, rl_module)
        if reason:
            logger.warning(
                "Train batches are built through the connector pipeline (%s).",
                reason,
            )
        self.value_targets = None
        if self.builder.value_targets:
            self.value_targets = (
                config.gamma,
                get_offline_setting(config, VALUE_HORIZON),
            )
        self.n_step = config.get("n_step", 1) or 1
        self.n_step_gamma = config.gamma
        seed = None if config.seed is None else (int(config.seed), shard.index)
        self.rng = np.random.default_rng(seed)
        # Data in memory: every block, always; beyond memory: a rotating cache.
        self.source = shard.block_source(self.rng)
        self._checked_grouping = None
        self.module_blocks()

    def sample(self, num_items: int) -> MultiAgentBatch:
        """One train batch: `num_items` transitions per module, drawn uniformly.

        Modules not in `config.policies_to_train` are left out.
        """
        policy_batches, num_steps = {}, 0
        for module_id, blocks in self.module_blocks().items():
            if not self._may_train(module_id):
                continue
            counts = np.zeros(len(blocks), dtype=np.int64)
            transitions = sample_transitions(
                blocks,
                num_items,
                rng=self.rng,
                n_step=self.n_step,
                n_step_gamma=self.n_step_gamma,
                value_targets=self.value_targets,
                draw_counts=counts,
            )
            self.source.drawn(module_id, counts)
            module_batches = self.builder.build(
                transitions, rl_module=self.rl_module, module_id=module_id
            )
            policy_batches.update(
                (mid, SampleBatch(batch)) for mid, batch in module_batches.items()
            )
            num_steps = max(num_steps, len(transitions))
        self.source.rotate()
        batch = MultiAgentBatch(policy_batches, env_steps=num_steps)
        if callable(self.policies_to_train):
            for module_id in list(batch.policy_batches):
                if not self.policies_to_train(module_id, batch):
                    del batch.policy_batches[module_id]
        return batch

    def module_blocks(self) -> Dict[str, List[EpisodeBlock]]:
        """The blocks to sample each module from now, checked against the
        `MultiRLModule` whenever they change.

        Raises:
            ValueError: If the data maps agents to a module the `MultiRLModule`
                does not have.
        """
        grouping = self.source.module_blocks()
        if grouping is not self._checked_grouping:
            check_modules_known(grouping, self.rl_module)
            self._checked_grouping = grouping
        return grouping

    def _may_train(self, module_id) -> bool:
        """False for a module a `policies_to_train` collection leaves out (a
        callable decides on the built batch, as the Learner's check does)."""
        selected = self.policies_to_train
        return selected is None or callable(selected) or module_id in selected

    def batches(
        self, minibatch_size: int, num_iters: Optional[int]
    ) -> Iterator[MultiAgentBatch]:
        """`num_iters` batches; None: `default_num_updates` (the same on every
        Learner, whatever the size of its own shard)."""
        if num_iters is None:
            num_iters = default_num_updates(
                self.shard.total_timesteps,
                self.shard.num_shards,
                minibatch_size,
                len(self.module_blocks()),
            )
        for _ in range(num_iters):
            yield self.sample(minibatch_size)

    def matches(self, shard) -> bool:
        """Whether `shard` is the one this sampler holds."""
        return self.shard.same_as(shard)


def sampler_for_learner(learner, shard: EpisodeShard) -> EpisodeShardSampler:
    """The Learner's sampler for `shard`: built once (from the Learner's
    connector pipeline, module and config), then kept on the Learner and used
    again for as long as the Learner gets the same shard.

    Args:
        learner: The `Learner` that trains on `shard`.
        shard: The shard passed to its `update()`.
    """
    sampler = learner.__dict__.get("_episode_shard_sampler")
    if sampler is None or not sampler.matches(shard):
        sampler = EpisodeShardSampler(
            shard,
            pipeline=learner._learner_connector,
            rl_module=learner.module,
            config=learner.config,
        )
        learner.__dict__["_episode_shard_sampler"] = sampler
    return sampler
