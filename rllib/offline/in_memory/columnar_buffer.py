"""Sampling transitions from episodes held as columns, without a Python loop.

Two holders share one sampler:

- `ColumnarEpisodeBuffer`: the OfflinePreLearner's buffer when Ray Data
  streams the data. It keeps the semantics the prelearner relies on in
  `EpisodeReplayBuffer`: capacity counts timesteps; after each added episode
  the oldest are evicted while the buffer holds more than `capacity`
  timesteps and more than one episode; an episode whose id is held (or
  repeats within one `add()`) is skipped.
- A list of `EpisodeBlock`s (the whole dataset, or a Learner's shard of it),
  sampled directly by `sample_transitions`.

`sample_transitions` draws what
`EpisodeReplayBuffer.sample(sample_episodes=True, batch_length_T=None,
n_step=...)` draws, with the same probabilities:

- Each item starts at a timestep drawn uniformly from all held timesteps
  (with replacement). Its n-step is `n_step`, or drawn uniformly from
  `range(*n_step)` when `n_step` is a tuple.
- An item covers `m = min(n, T - t)` steps from `t`: its reward is the sum
  of those `m` rewards discounted with the caller's `gamma` (the
  algorithm's `config.gamma`; RLlib 2.60's `OfflinePreLearner` passes none,
  so its buffer discounts with `EpisodeReplayBuffer`'s default 0.99), its
  next observation is the one `m` steps later, and it carries the episode's
  done flags only if `t + n` lands exactly on the episode's end
  (`SingleAgentEpisode.slice` keeps them only then).
- Items are drawn until `EpisodeReplayBuffer`'s item counter reaches
  `num_items` (one per item unless an n-step overshoots an episode's end).

With `value_targets=(gamma, horizon)` each item also gets the inputs of its
value target (see `rllib.utils.postprocessing.bootstrapped_returns`): they
depend on `gamma` and `horizon` only, not on the n-step, and the
OfflinePreLearner's per-episode path computes the same ones
(`value_target_inputs_at`).
"""

import dataclasses
from collections import deque
from typing import Any, Deque, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import tree

from rllib.offline.in_memory.columns import EpisodeBlock, EpisodeColumns
from rllib.utils.postprocessing.bootstrapped_returns import (
    bootstrap_steps,
    value_target_inputs,
)

NStep = Union[int, Tuple[int, int]]


@dataclasses.dataclass
class ValueTargetInputs:
    """What each sampled item needs for its value target (one row each)."""

    returns_to_bootstrap: np.ndarray
    bootstrap_obs: Any
    bootstrap_discount: np.ndarray


@dataclasses.dataclass
class SampledTransitions:
    """Sampled n-step transitions as columns (one row per item)."""

    obs: Any
    next_obs: Any
    actions: Any
    #: Discounted sum of the covered rewards.
    rewards: np.ndarray
    terminateds: np.ndarray
    truncateds: np.ndarray
    #: The n-step drawn for each item (int64), as `EpisodeReplayBuffer` reports it.
    n_step: np.ndarray
    #: Episode id of each item (object array of str).
    episode_ids: np.ndarray
    #: Timestep `t` of each item within its episode.
    timesteps: np.ndarray
    #: Set when sampled with `value_targets=...`.
    value_target_inputs: Optional[ValueTargetInputs] = None

    def __len__(self) -> int:
        return len(self.rewards)


def sample_transitions(
    blocks: Sequence[EpisodeBlock],
    num_items: int,
    *,
    rng: np.random.Generator,
    n_step: NStep = 1,
    n_step_gamma: float,
    value_targets: Optional[Tuple[float, Optional[int]]] = None,
    draw_counts: Optional[np.ndarray] = None,
) -> SampledTransitions:
    """Samples n-step transitions uniformly over every timestep of `blocks`.

    Args:
        blocks: The episodes to sample from.
        num_items: The target of the item counter (the batch size).
        rng: The generator to draw with.
        n_step: A fixed n-step, or a `(low, high)` range to draw from (`high`
            excluded).
        n_step_gamma: The discount for n-step rewards: the algorithm's
            `config.gamma`.
        value_targets: `(gamma, horizon)` to add each item's value-target
            inputs; None adds none.
        draw_counts: If given (one int64 per block), each block's number of
            drawn items is added to it.

    Raises:
        ValueError: If `blocks` hold no timestep.
    """
    sizes = np.array([block.num_timesteps for block in blocks], dtype=np.int64)
    if not len(sizes) or sizes.sum() == 0:
        raise ValueError("Cannot sample from an empty episode buffer.")
    block_idx, flat, n = _draw(num_items, n_step, blocks, sizes, rng)
    if draw_counts is not None:
        draw_counts += np.bincount(block_idx, minlength=len(blocks))
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    parts = []
    order = np.argsort(block_idx, kind="stable")
    bounds = np.searchsorted(block_idx[order], np.arange(len(blocks) + 1))
    for b, block in enumerate(blocks):
        rows = order[bounds[b] : bounds[b + 1]]
        if len(rows):
            parts.append(
                (
                    rows,
                    _sample_block(
                        block,
                        flat[rows] - offsets[b],
                        n[rows],
                        n_step_gamma,
                        value_targets,
                    ),
                )
            )
    return _in_draw_order(parts, len(block_idx))


class ColumnarEpisodeBuffer:
    """Finished episodes in arrays; capacity in timesteps; vectorized sampling.

    Args:
        capacity: The most timesteps to hold (see the module docstring for the
            eviction rule).
        seed: Seeds the sampling generator; None draws fresh entropy, as
            `EpisodeReplayBuffer` does.
    """

    def __init__(self, capacity: int, *, seed: Optional[int] = None):
        self.capacity = int(capacity)
        self.rng = np.random.default_rng(seed)
        self.episodes: Deque[EpisodeColumns] = deque()
        self._ids = set()
        self._num_timesteps = 0
        self._num_episodes_evicted = 0
        self._block: Optional[EpisodeBlock] = None

    def __len__(self) -> int:
        return self._num_timesteps

    def __contains__(self, episode_id: str) -> bool:
        return episode_id in self._ids

    def get_num_timesteps(self) -> int:
        return self._num_timesteps

    def get_num_episodes(self) -> int:
        return len(self.episodes)

    def get_num_episodes_evicted(self) -> int:
        return self._num_episodes_evicted

    def add(self, episodes: Iterable[EpisodeColumns]) -> None:
        """Adds episodes not yet held, evicting the oldest beyond capacity."""
        skip = set(self._ids)
        for episode in episodes:
            # An episode without steps has nothing to sample
            # (`EpisodeReplayBuffer` holds it but never draws from it).
            if episode.id_ in skip or len(episode) == 0:
                continue
            skip.add(episode.id_)
            self.episodes.append(episode)
            self._ids.add(episode.id_)
            self._num_timesteps += len(episode)
            while self._num_timesteps > self.capacity and len(self.episodes) > 1:
                evicted = self.episodes.popleft()
                self._ids.discard(evicted.id_)
                self._num_timesteps -= len(evicted)
                self._num_episodes_evicted += 1
            self._block = None

    def block(self) -> EpisodeBlock:
        """The held episodes as one block (rebuilt after changes)."""
        if self._block is None:
            if not self.episodes:
                raise ValueError("Cannot sample from an empty episode buffer.")
            self._block = EpisodeBlock.from_episodes(list(self.episodes))
        return self._block

    def sample(
        self,
        num_items: int,
        *,
        n_step: NStep = 1,
        gamma: float,
        value_targets: Optional[Tuple[float, Optional[int]]] = None,
    ) -> SampledTransitions:
        """Samples n-step transitions, as `EpisodeReplayBuffer`'s episode
        sampler does.

        See `sample_transitions` for the arguments (`gamma` is its
        `n_step_gamma`, required here: the algorithm's `config.gamma`).
        """
        if not self.episodes:
            raise ValueError("Cannot sample from an empty episode buffer.")
        return sample_transitions(
            [self.block()],
            num_items,
            rng=self.rng,
            n_step=n_step,
            n_step_gamma=gamma,
            value_targets=value_targets,
        )


def _draw(num_items, n_step, blocks, sizes, rng):
    """Draws (block, flat step, n) until the item counter reaches num_items.

    `EpisodeReplayBuffer` counts `min(t + n - 1, T) - t - (n - 1) + 1`, or 1
    where that is 0, per item: 1 unless the n-step overshoots the episode's end.
    """
    random_n = isinstance(n_step, tuple)
    total = int(sizes.sum())
    ends = np.cumsum(sizes)
    drawn = []
    counted = 0
    while counted < num_items:
        size = num_items - counted
        flat = rng.integers(total, size=size)
        if random_n:
            n = rng.integers(n_step[0], n_step[1], size=size)
        else:
            n = np.full(size, int(n_step), dtype=np.int64)
        block_idx = np.searchsorted(ends, flat, side="right")
        if random_n or int(n_step) > 1:
            remaining = _steps_to_episode_end(blocks, block_idx, flat, ends - sizes)
            increment = np.minimum(n - 1, remaining) - (n - 1) + 1
            increment[increment == 0] = 1
        else:
            increment = np.ones(size, dtype=np.int64)
        running = counted + np.cumsum(increment)
        reached = np.flatnonzero(running >= num_items)
        keep = reached[0] + 1 if len(reached) else size
        drawn.append((block_idx[:keep], flat[:keep], n[:keep]))
        counted = int(running[keep - 1])
    return tuple(np.concatenate(parts) for parts in zip(*drawn))


def _steps_to_episode_end(blocks, block_idx, flat, offsets):
    """`T - t` of each drawn step."""
    remaining = np.empty(len(flat), dtype=np.int64)
    for b in np.unique(block_idx):
        rows = block_idx == b
        block = blocks[b]
        step = flat[rows] - offsets[b]
        episode = np.searchsorted(block.step_starts, step, side="right") - 1
        remaining[rows] = block.lengths[episode] - (step - block.step_starts[episode])
    return remaining


def _sample_block(block: EpisodeBlock, steps, n, n_step_gamma, value_targets):
    """The sampled columns of the items drawn in one block."""
    starts = block.step_starts
    episode = np.searchsorted(starts, steps, side="right") - 1
    t = steps - starts[episode]
    length = block.lengths[episode]
    covered = np.minimum(n, length - t)
    at_end = t + n == length
    obs_rows = steps + episode
    sampled = SampledTransitions(
        obs=_take(block.observations, obs_rows),
        next_obs=_take(block.observations, obs_rows + covered),
        actions=_take(block.actions, steps),
        rewards=_discounted_rewards(block.rewards, steps, covered, n_step_gamma),
        terminateds=at_end & block.terminated[episode],
        truncateds=at_end & block.truncated[episode],
        n_step=n.astype(np.int64),
        episode_ids=block.ids[episode],
        timesteps=t,
    )
    if value_targets is not None:
        sampled.value_target_inputs = value_target_inputs_at(
            block, episode, t, *value_targets
        )
    return sampled


def value_target_inputs_at(
    block: EpisodeBlock,
    episode: np.ndarray,
    t: np.ndarray,
    gamma: float,
    horizon: Optional[int],
) -> ValueTargetInputs:
    """The value-target inputs of steps `t` of episodes `episode` of `block`.

    One meaning on every path: the recorded rewards discounted with `gamma`
    up to `min(t + horizon, T)` (the episode's end `T` if `horizon` is None),
    whatever n-step the transition was sampled with.
    """
    length = block.lengths[episode]
    boot = bootstrap_steps(t, length, horizon)
    returns = block.returns_to_go(gamma)
    first_obs_row = block.step_starts[episode] + episode
    returns_to_bootstrap, discount = value_target_inputs(
        returns_at_t=returns[first_obs_row + t],
        returns_at_bootstrap=returns[first_obs_row + boot],
        steps_to_bootstrap=boot - t,
        terminal_at_bootstrap=(boot == length) & block.terminated[episode],
        gamma=gamma,
    )
    return ValueTargetInputs(
        returns_to_bootstrap=returns_to_bootstrap,
        bootstrap_obs=_take(block.observations, first_obs_row + boot),
        bootstrap_discount=discount,
    )


def _take(nest, rows):
    return tree.map_structure(lambda leaf: leaf[rows], nest)


def _in_draw_order(
    parts: List[Tuple[np.ndarray, SampledTransitions]], num_items: int
) -> SampledTransitions:
    """Joins per-block samples back into the order the items were drawn."""
    if len(parts) == 1:
        rows, sampled = parts[0]
        if np.array_equal(rows, np.arange(num_items)):
            return sampled
    positions = np.concatenate([rows for rows, _ in parts])
    inverse = np.empty(num_items, dtype=np.int64)
    inverse[positions] = np.arange(num_items)

    def join(*leaves):
        return np.concatenate(leaves)[inverse]

    def join_fields(cls, items):
        return cls(
            **{
                f.name: tree.map_structure(join, *[getattr(i, f.name) for i in items])
                for f in dataclasses.fields(cls)
                if f.name != "value_target_inputs"
            }
        )

    samples = [sampled for _, sampled in parts]
    joined = join_fields(SampledTransitions, samples)
    if samples[0].value_target_inputs is not None:
        joined.value_target_inputs = join_fields(
            ValueTargetInputs, [s.value_target_inputs for s in samples]
        )
    return joined


def _discounted_rewards(rewards, step_rows, covered, gamma) -> np.ndarray:
    """`sum_k gamma^k r_(t+k)` over the covered steps, in
    `EpisodeReplayBuffer`'s order.

    `EpisodeReplayBuffer` runs `scipy.signal.lfilter` over the reversed rewards, i.e.
    `acc = r + gamma * acc` from the last covered step back; the same
    recursion here gives the same floats, in lfilter's output dtype.
    """
    dtype = _lfilter_dtype(rewards.dtype)
    if covered.max() == 1:
        return rewards[step_rows].astype(dtype)
    acc = np.zeros(len(step_rows), dtype=dtype)
    discount = dtype.type(gamma)
    for k in range(int(covered.max()) - 1, -1, -1):
        inside = k < covered
        rows = np.where(inside, step_rows + k, step_rows)
        acc = np.where(inside, rewards[rows].astype(dtype) + discount * acc, acc)
    return acc


_LFILTER_DTYPES = {}


def _lfilter_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype `scipy.signal.lfilter` returns for rewards of `dtype`."""
    if dtype not in _LFILTER_DTYPES:
        from scipy.signal import lfilter  # Slow to import: only when needed.

        probe = lfilter([1], [1, -0.5], np.zeros(1, dtype=dtype))
        _LFILTER_DTYPES[dtype] = probe.dtype
    return _LFILTER_DTYPES[dtype]
