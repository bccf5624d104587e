"""Data larger than the memory budget: a rotating cache of decoded blocks.

When the decoded episodes would exceed the memory budget, the input is cut
into row ranges small enough that `RANGES_PER_CACHE` of them fit one
Learner's share of the budget, and the ranges are dealt out to the Learners
(`plan_cached_shards`). Each Learner gets a `CachedEpisodeShard`: the ranges,
not decoded data. Its `RotatingBlockCache` keeps `RANGES_PER_CACHE` ranges
decoded (in Ray's object store, on the Learner's node) and `PREFETCH` more
decoding in Ray tasks on the same node, samples every train batch uniformly
over the timesteps in the cache, and replaces a range once it has given
`draws_per_timestep` draws per timestep (counted, not expected: a range
leaves after about `draws_per_timestep * timesteps` sampled rows).

So over a pass (every range of the shard decoded and retired once) every
range gives about the same number of draws per timestep; within a range the
draws are uniform. If a range is due to leave while its successor is still
decoding, the Learner waits for it rather than over-sampling what it holds:
the cost of data beyond memory shows as time, not as skewed sampling. The
first ranges of the first pass leave after a fraction of the quota (the
`i`-th of `K` after `(i + 1) / K` of it), so that the cache rotates one range
at a time from the start; later passes shuffle the ranges again.

Each pass ends with a `PassStats` (logged at INFO): draws per timestep of
every range, their spread, a chi-square statistic of the per-range draw
counts against the counts proportional to timesteps, and the time spent
waiting for decoding.
"""

import collections
import dataclasses
import logging
import time
import uuid
from typing import Any, Deque, Dict, Iterator, List, Optional

import numpy as np
import ray
from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rllib._fork.cluster_check import RequiresFork
from rllib.offline.in_memory.columns import EpisodeBlock
from rllib.offline.in_memory.store import (
    DecodePlan,
    RowRange,
    _get_unwrapped,
    deal_by_rows,
    decode_row_range,
)
from rllib.offline.offline_settings import CACHE_DRAWS_PER_TIMESTEP

logger = logging.getLogger("ray." + __name__)

#: The deprecated `learner_config_dict` key of
#: `offline_data(cache_draws_per_timestep=...)`: draws per timestep each range
#: gives before it leaves the cache (more: less decoding per update, more reuse).
DRAWS_PER_TIMESTEP_KEY = CACHE_DRAWS_PER_TIMESTEP.legacy_key
DEFAULT_DRAWS_PER_TIMESTEP = 1.0

#: Decoded ranges one cache holds; rotation replaces one at a time.
RANGES_PER_CACHE = 8
#: Ranges decoding in the background while the cache is full.
PREFETCH = 2


@dataclasses.dataclass
class PassStats:
    """How uniformly one pass over a shard was sampled."""

    #: Which pass (0: the first) of which shard.
    pass_index: int
    shard_index: int
    num_ranges: int
    #: Draws per timestep of each range (draws / timesteps).
    draws_per_timestep: np.ndarray
    #: Pearson's chi-square of the per-range draw counts against counts
    #: proportional to each range's timesteps; about `num_ranges - 1` when
    #: every timestep was drawn at the same rate.
    chi_square: float
    #: Seconds the Learner waited for a range to finish decoding.
    seconds_waited: float

    @property
    def spread(self) -> float:
        """Max over min draws per timestep (1.0: perfectly even)."""
        rates = self.draws_per_timestep
        return float(rates.max() / max(rates.min(), 1e-12))

    @property
    def coefficient_of_variation(self) -> float:
        rates = self.draws_per_timestep
        return float(rates.std() / max(rates.mean(), 1e-12))

    def as_dict(self) -> Dict[str, Any]:
        return {
            "pass": self.pass_index,
            "shard": self.shard_index,
            "num_ranges": self.num_ranges,
            "mean_draws_per_timestep": float(self.draws_per_timestep.mean()),
            "spread": self.spread,
            "coefficient_of_variation": self.coefficient_of_variation,
            "chi_square": self.chi_square,
            "chi_square_dof": self.num_ranges - 1,
            "seconds_waited": self.seconds_waited,
        }


@dataclasses.dataclass
class CachedEpisodeShard(RequiresFork):
    """A Learner's share of episodes that do not fit in memory: row ranges.

    Passed to `Learner.update()` in place of a Ray Data iterator, as
    `EpisodeShard` is; the Learner decodes the ranges into its own rotating
    cache (`RotatingBlockCache`).
    """

    index: int
    num_shards: int
    ranges: List[RowRange]
    #: Estimated timesteps of all shards together (the same on every Learner;
    #: sets the default number of updates per `train()`).
    total_timesteps: int
    draws_per_timestep: float
    #: `decode_row_range`'s keyword arguments (filesystem, spaces, mapping).
    decode_kwargs: Dict[str, Any]
    task_options: Optional[Dict[str, Any]] = None
    #: Tells this shard from another one with the same ranges.
    token: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)

    def block_source(self, rng: np.random.Generator) -> "RotatingBlockCache":
        return RotatingBlockCache(self, rng)

    def same_as(self, other) -> bool:
        return getattr(other, "token", None) == self.token

    def learner_batches(
        self, learner, minibatch_size: int, num_iters: Optional[int]
    ) -> Iterator[MultiAgentBatch]:
        """The train batches of one `update()` on `learner` (see
        `EpisodeShard.learner_batches`)."""
        from rllib.offline.in_memory.shard_sampler import sampler_for_learner

        return sampler_for_learner(learner, self).batches(minibatch_size, num_iters)


def plan_cached_shards(
    plan: DecodePlan,
    *,
    estimated_bytes: int,
    estimated_timesteps: int,
    cache_bytes: int,
    num_shards: int,
    draws_per_timestep: float,
    decode_kwargs: Dict[str, Any],
    task_options: Optional[Dict[str, Any]] = None,
) -> List[CachedEpisodeShard]:
    """Cuts the input into ranges that rotate through `cache_bytes` and deals
    them out to `num_shards` Learners (balanced by rows).

    Args:
        plan: The input's files and sizes (`EpisodeStore.plan`).
        estimated_bytes: Decoded bytes of the whole input (estimated).
        estimated_timesteps: Timesteps of the whole input (estimated).
        cache_bytes: Decoded bytes one Learner's cache may hold, the ranges
            decoding for it included.
        num_shards: Learners.
        draws_per_timestep: `offline_data(cache_draws_per_timestep=...)`.

    Raises:
        ValueError: If there are fewer episodes than Learners need ranges, or
            `draws_per_timestep` is not positive.
    """
    if not draws_per_timestep > 0:
        raise ValueError(
            f"`{CACHE_DRAWS_PER_TIMESTEP.argument()}` must be > 0, got "
            f"{draws_per_timestep!r}."
        )
    range_bytes = max(1, cache_bytes // (RANGES_PER_CACHE + PREFETCH))
    total_rows = sum(rows for rows, _ in plan.file_sizes.values())
    bytes_per_row = estimated_bytes / max(1, total_rows)
    rows_per_range = max(1, int(range_bytes // max(bytes_per_row, 1e-9)))
    # At least two ranges per Learner, so that each cache rotates.
    rows_per_range = min(rows_per_range, max(1, total_rows // (2 * num_shards)))
    ranges: List[RowRange] = []
    for path, (rows, _) in plan.file_sizes.items():
        ranges.extend(
            (path, start, min(start + rows_per_range, rows))
            for start in range(0, rows, rows_per_range)
        )
    if len(ranges) < num_shards:
        raise ValueError(
            f"The input has {total_rows} episode(s) to deal out to {num_shards} "
            "Learners; each Learner needs at least one. Record more episodes, or "
            "train with fewer Learners (`config.learners(num_learners=...)`)."
        )
    members: List[List[RowRange]] = [[] for _ in range(num_shards)]
    for row_range, owner in zip(ranges, deal_by_rows(ranges, num_shards)):
        members[owner].append(row_range)
    return [
        CachedEpisodeShard(
            index=index,
            num_shards=num_shards,
            ranges=chosen,
            total_timesteps=int(estimated_timesteps),
            draws_per_timestep=float(draws_per_timestep),
            decode_kwargs=decode_kwargs,
            task_options=task_options,
        )
        for index, chosen in enumerate(members)
    ]


@dataclasses.dataclass
class _Visit:
    """One stay of a range in the cache, from decoding to retirement."""

    range_index: int
    #: Draws per timestep after which it leaves.
    quota: float
    #: The pass it counts towards.
    pass_index: int
    blocks_ref: Any = None
    blocks: Optional[List[EpisodeBlock]] = None
    draws: Optional[np.ndarray] = None

    def exposure(self) -> float:
        """Draws per timestep so far (the least of its modules' blocks)."""
        return min(d / b.num_timesteps for d, b in zip(self.draws, self.blocks))


class RotatingBlockCache:
    """Decoded ranges of one shard, rotated as they are sampled (see above).

    Args:
        shard: The shard to cache.
        rng: Shuffles the ranges of each pass.
    """

    def __init__(self, shard: CachedEpisodeShard, rng: np.random.Generator):
        self.shard = shard
        self.rng = rng
        self.num_ranges = len(shard.ranges)
        self.capacity = max(1, min(RANGES_PER_CACHE, self.num_ranges - 1))
        self.prefetch = max(1, min(PREFETCH, self.num_ranges - self.capacity))
        #: Uniformity of each finished pass.
        self.passes: List[PassStats] = []
        self._decode = self._decode_fn()
        self._queue: Deque[_Visit] = collections.deque()
        self._decoding: Deque[_Visit] = collections.deque()
        self._resident: List[_Visit] = []
        self._by_module: Optional[Dict[Any, list]] = None
        self._owners: Dict[Any, list] = {}
        self._next_pass = 0
        #: Per pass: visits not yet retired, draws and timesteps per range,
        #: seconds waited.
        self._open: Dict[int, list] = {}
        self._queue_pass(first=True)
        for _ in range(self.capacity + self.prefetch):
            self._submit_next()
        for _ in range(self.capacity):
            self._admit(refill=False)

    def module_blocks(self) -> Dict[Any, List[EpisodeBlock]]:
        """The cached blocks of each module (a new dict after each rotation)."""
        if self._by_module is None:
            by_module: Dict[Any, list] = {}
            for visit in self._resident:
                for b, block in enumerate(visit.blocks):
                    by_module.setdefault(block.module_id, []).append((visit, b, block))
            self._owners = {m: [x[:2] for x in v] for m, v in by_module.items()}
            self._by_module = {m: [x[2] for x in v] for m, v in by_module.items()}
        return self._by_module

    def drawn(self, module_id, counts: np.ndarray) -> None:
        """Counts one batch's draws of `module_id` (one int per block, in
        `module_blocks()` order)."""
        for (visit, b), count in zip(self._owners[module_id], counts):
            visit.draws[b] += count

    def rotate(self) -> None:
        """Replaces every range that has given its quota (call after each
        batch, once all modules' draws are counted)."""
        for visit in [v for v in self._resident if v.exposure() >= v.quota]:
            self._resident.remove(visit)
            self._by_module = None
            self._retire(visit)
            self._admit()

    def _queue_pass(self, first: bool = False) -> None:
        """Queues the ranges of the next pass, shuffled.

        In the first pass the cache fills with `capacity` ranges at once; the
        `i`-th of them leaves after `(i + 1) / capacity` of the quota, so the
        cache rotates one range at a time, and comes back at the end of the
        pass for the rest.
        """
        index = self._next_pass
        self._next_pass += 1
        quota = self.shard.draws_per_timestep
        visits = [
            _Visit(int(r), quota, index) for r in self.rng.permutation(self.num_ranges)
        ]
        if first:
            for i, visit in enumerate(visits[: self.capacity]):
                share = (i + 1) / self.capacity
                visit.quota = quota * share
                if share < 1:
                    visits.append(_Visit(visit.range_index, quota * (1 - share), index))
        self._open[index] = [
            len(visits),
            np.zeros(self.num_ranges, dtype=np.int64),
            np.zeros(self.num_ranges, dtype=np.int64),
            0.0,
        ]
        self._queue.extend(visits)

    def _submit_next(self) -> None:
        if not self._queue:
            self._queue_pass()
        visit = self._queue.popleft()
        visit.blocks_ref, _ = self._decode.remote(
            self.shard.ranges[visit.range_index], **self.shard.decode_kwargs
        )
        self._decoding.append(visit)

    def _admit(self, refill: bool = True) -> None:
        """Moves the next decoded range into the cache (waiting for it if it
        is still decoding) and, if `refill`, starts decoding another one."""
        while True:
            visit = self._decoding.popleft()
            started = time.perf_counter()
            blocks = _get_unwrapped(visit.blocks_ref)
            self._open[visit.pass_index][3] += time.perf_counter() - started
            if refill:
                self._submit_next()
            # A range without steps gives its place to the next one.
            refill = True
            visit.blocks = [block for block in blocks if block.num_timesteps]
            if visit.blocks:
                visit.draws = np.zeros(len(visit.blocks), dtype=np.int64)
                self._resident.append(visit)
                self._by_module = None
                return
            # Episodes without steps: nothing to sample.
            self._retire(visit)

    def _retire(self, visit: _Visit) -> None:
        state = self._open[visit.pass_index]
        state[0] -= 1
        if visit.blocks:
            state[1][visit.range_index] += int(visit.draws.sum())
            state[2][visit.range_index] = sum(b.num_timesteps for b in visit.blocks)
        visit.blocks = visit.blocks_ref = None
        if state[0] == 0:
            self._finish_pass(visit.pass_index)

    def _decode_fn(self):
        """Decoding tasks placed on this process's node, so the blocks land in
        its object store (soft: another node if this one has no CPU free)."""
        options = dict(self.shard.task_options or {})
        options.setdefault(
            "scheduling_strategy",
            NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=True
            ),
        )
        return ray.remote(num_returns=2)(decode_row_range).options(**options)

    def _finish_pass(self, index: int) -> None:
        _, draws, timesteps, waited = self._open.pop(index)
        held = timesteps > 0
        draws, timesteps = draws[held], timesteps[held]
        expected = draws.sum() * timesteps / max(1, timesteps.sum())
        chi_square = float(
            ((draws - expected) ** 2 / np.maximum(expected, 1e-12)).sum()
        )
        stats = PassStats(
            pass_index=index,
            shard_index=self.shard.index,
            num_ranges=int(held.sum()),
            draws_per_timestep=draws / np.maximum(timesteps, 1),
            chi_square=chi_square,
            seconds_waited=waited,
        )
        self.passes.append(stats)
        logger.info(
            "Pass %d over shard %d (%d ranges, data beyond memory): %.2f draws per "
            "timestep, spread (max/min) %.3f, chi-square %.1f on %d degrees of "
            "freedom; waited %.1f s for decoding.",
            stats.pass_index,
            stats.shard_index,
            stats.num_ranges,
            stats.draws_per_timestep.mean(),
            stats.spread,
            stats.chi_square,
            stats.num_ranges - 1,
            stats.seconds_waited,
        )
