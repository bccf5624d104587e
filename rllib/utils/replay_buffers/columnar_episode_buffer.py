"""A timestep-capacity episode buffer on columns, sampled without a Python loop.

`ColumnarEpisodeBuffer` keeps the buffer semantics the OfflinePreLearner relies
on in `EpisodeReplayBuffer` and samples the same transitions as its
`sample(sample_episodes=True, batch_length_T=None, n_step=...)`, with the same
probabilities, but as index arrays:

- Capacity counts timesteps. After each added episode, the oldest episodes are
  evicted while the buffer holds more than `capacity` timesteps and more than
  one episode.
- An episode is not added if its id is held when `add()` is called or
  repeats within the call (as the prelearner's validation does upstream, it
  may come back once evicted).
- Each item starts at a timestep drawn uniformly from all timesteps in the
  buffer (with replacement). Its n-step is `n_step`, or drawn uniformly from
  `range(*n_step)` when `n_step` is a tuple.
- An item covers `m = min(n, T - t)` steps from `t`: its reward is the
  discounted sum of those `m` rewards (upstream's sampler discounts with its
  default `gamma`, the prelearner passes none), its next observation is the one
  `m` steps later, and it carries the episode's done flags only if `t + n`
  lands exactly on the episode's end (upstream's `SingleAgentEpisode.slice`
  keeps them only then, so an n-step that overshoots the end carries none).
- Items are drawn until the same counter upstream uses reaches `num_items`
  (one per item unless an n-step overshoots an episode's end).
"""

import inspect
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, Iterable, Optional, Tuple, Union

import numpy as np
import scipy.signal
import tree
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

from rllib.offline.episode_columns import EpisodeColumns

#: The discount upstream's episode sampler applies to n-step rewards when the
#: caller passes none (the OfflinePreLearner never passes one).
UPSTREAM_SAMPLER_GAMMA = (
    inspect.signature(EpisodeReplayBuffer._sample_episodes).parameters["gamma"].default
)


@dataclass
class SampledTransitions:
    """Index arrays describing sampled n-step transitions (one row each).

    Row indices point into the buffer's concatenated columns of the same
    `sample()` call (see `ColumnarEpisodeBuffer.gather_*`).
    """

    #: Row of `o_t` in the concatenated observations.
    obs_rows: np.ndarray
    #: Row of the observation `m` steps later (the next observation).
    next_obs_rows: np.ndarray
    #: Row of `a_t` in the concatenated actions.
    action_rows: np.ndarray
    #: The n-step drawn for each item (int64), as upstream reports it.
    n_step: np.ndarray
    #: Discounted sum of the covered rewards.
    rewards: np.ndarray
    terminateds: np.ndarray
    truncateds: np.ndarray
    #: Episode id of each item (object array of str).
    episode_ids: np.ndarray
    #: Timestep `t` of each item within its episode.
    timesteps: np.ndarray

    def __len__(self) -> int:
        return len(self.obs_rows)


class ColumnarEpisodeBuffer:
    """Finished episodes in arrays; capacity in timesteps; vectorized sampling.

    Args:
        capacity: The most timesteps to hold (see the module docstring for the
            eviction rule).
        seed: Seeds the sampling generator; None draws fresh entropy, as
            upstream's buffer does.
    """

    def __init__(self, capacity: int, *, seed: Optional[int] = None):
        self.capacity = int(capacity)
        self.rng = np.random.default_rng(seed)
        self.episodes: Deque[EpisodeColumns] = deque()
        self._ids = set()
        self._num_timesteps = 0
        self._num_episodes_evicted = 0
        self._columns: Optional[Dict[str, Any]] = None

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
            # An episode without steps has nothing to sample (upstream holds it
            # but never draws from it).
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
            self._columns = None

    def sample(
        self,
        num_items: int,
        *,
        n_step: Union[int, Tuple[int, int]] = 1,
        gamma: float = UPSTREAM_SAMPLER_GAMMA,
    ) -> SampledTransitions:
        """Samples n-step transitions, as upstream's episode sampler does.

        Args:
            num_items: The target of upstream's item counter (the batch size).
            n_step: A fixed n-step, or a `(low, high)` range to draw from
                (`high` excluded).
            gamma: The discount for n-step rewards.

        Raises:
            ValueError: If the buffer is empty.
        """
        if not self.episodes:
            raise ValueError("Cannot sample from an empty episode buffer.")
        columns = self._concatenated()
        step_starts, lengths = columns["step_starts"], columns["lengths"]
        episode_idx, start, n = self._draw(num_items, n_step, step_starts, lengths)

        length = lengths[episode_idx]
        covered = np.minimum(n, length - start)
        at_end = start + n == length
        step_rows = step_starts[episode_idx] + start
        obs_rows = step_rows + episode_idx
        return SampledTransitions(
            obs_rows=obs_rows,
            next_obs_rows=obs_rows + covered,
            action_rows=step_rows,
            n_step=n.astype(np.int64),
            rewards=self._discounted_rewards(
                columns["rewards"], step_rows, covered, gamma
            ),
            terminateds=at_end & columns["terminated"][episode_idx],
            truncateds=at_end & columns["truncated"][episode_idx],
            episode_ids=columns["ids"][episode_idx],
            timesteps=start,
        )

    def gather_observations(self, rows: np.ndarray) -> Any:
        """The observations at `rows` of the last `sample()`'s columns."""
        return tree.map_structure(lambda leaf: leaf[rows], self._columns["obs"])

    def gather_actions(self, rows: np.ndarray) -> Any:
        """The actions at `rows` of the last `sample()`'s columns."""
        return tree.map_structure(lambda leaf: leaf[rows], self._columns["actions"])

    def _draw(self, num_items, n_step, step_starts, lengths):
        """Draws (episode, start, n) until upstream's counter reaches num_items.

        Upstream adds `min(t + n - 1, T) - t - (n - 1) + 1`, or 1 where that is
        0, per item: 1 unless the n-step overshoots the episode's end.
        """
        random_n = isinstance(n_step, tuple)
        drawn = []
        counted = 0
        while counted < num_items:
            size = num_items - counted
            flat = self.rng.integers(self._num_timesteps, size=size)
            episode_idx = np.searchsorted(step_starts, flat, side="right") - 1
            start = flat - step_starts[episode_idx]
            if random_n:
                n = self.rng.integers(n_step[0], n_step[1], size=size)
            else:
                n = np.full(size, int(n_step), dtype=np.int64)
            length = lengths[episode_idx]
            last = np.minimum(start + n - 1, length)
            increment = last - start - (n - 1) + 1
            increment[increment == 0] = 1
            running = counted + np.cumsum(increment)
            reached = np.flatnonzero(running >= num_items)
            keep = reached[0] + 1 if len(reached) else size
            drawn.append((episode_idx[:keep], start[:keep], n[:keep]))
            counted = int(running[keep - 1])
        return tuple(np.concatenate(parts) for parts in zip(*drawn))

    @staticmethod
    def _discounted_rewards(rewards, step_rows, covered, gamma) -> np.ndarray:
        """`sum_k gamma^k r_(t+k)` over the covered steps, in upstream's order.

        Upstream runs `scipy.signal.lfilter` over the reversed rewards, i.e.
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

    def _concatenated(self) -> Dict[str, Any]:
        """All held episodes as concatenated columns (rebuilt after changes)."""
        if self._columns is None:
            episodes = list(self.episodes)
            lengths = np.array([len(e) for e in episodes], dtype=np.int64)
            self._columns = {
                "lengths": lengths,
                "step_starts": np.concatenate([[0], np.cumsum(lengths)[:-1]]),
                "obs": _concatenate([e.observations for e in episodes]),
                "actions": _concatenate([e.actions for e in episodes]),
                "rewards": np.concatenate([e.rewards for e in episodes]),
                "terminated": np.array([e.is_terminated for e in episodes]),
                "truncated": np.array([e.is_truncated for e in episodes]),
                "ids": np.array([e.id_ for e in episodes], dtype=object),
            }
        return self._columns


def _concatenate(nests: list) -> Any:
    return tree.map_structure(lambda *leaves: np.concatenate(leaves), *nests)


_LFILTER_DTYPES: Dict[np.dtype, np.dtype] = {}


def _lfilter_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype `scipy.signal.lfilter` returns for rewards of `dtype`."""
    if dtype not in _LFILTER_DTYPES:
        probe = scipy.signal.lfilter([1], [1, -0.5], np.zeros(1, dtype=dtype))
        _LFILTER_DTYPES[dtype] = probe.dtype
    return _LFILTER_DTYPES[dtype]
