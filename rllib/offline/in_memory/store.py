"""Recorded episodes decoded once and held in Ray's object store for training.

`EpisodeStore.plan` splits the input files into row ranges from their parquet
metadata and estimates the decoded size from a small decoded sample, so the
caller checks its memory budget before anything else is decoded.
`EpisodeStore.start` then runs one Ray task per range (a bounded number at
once); each reads its rows with pyarrow and decodes them into `EpisodeBlock`s
(`rllib.offline.in_memory.columns`): one per module, so rows of
`MultiAgentEpisode`s give one block per module their agents map to. The
blocks stay in the object store for all of training: every process on a node
reads them without a copy, and no pass over the data decodes anything again.
`EpisodeStore.shards` deals the blocks out to the Learners (disjoint, balanced
by timesteps); each Learner samples its shard (`rllib.offline.in_memory.shard_sampler`).

If the decoded data still outgrows the budget (the estimate was low), `wait`
stops the remaining tasks, drops what was decoded and returns False; the
caller then streams the data through Ray Data instead.
"""

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow.fs as pa_fs
import ray
from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rllib._fork.cluster_check import RequiresFork
from rllib.offline.episode_files.action_units import ActionRescaling
from rllib.offline.episode_files.reader import (
    cannot_decode_error,
    describe_row,
    iter_payloads,
    open_parquet,
)
from rllib.offline.in_memory.columns import EpisodeBlock, decode_module_columns

logger = logging.getLogger("ray." + __name__)

#: A range of rows of one file: `(path, first row, end row)`.
RowRange = Tuple[str, int, int]

#: Rows decoded per pyarrow batch inside a task.
_READ_BATCH_ROWS = 256

#: Up to this many bytes of (uncompressed) parquet data, the driver decodes
#: the episodes itself: a Ray worker needs seconds to start and import RLlib,
#: the driver decodes about 60 MiB of CartPole payloads per second (per-step
#: lists; numpy-ized payloads several times faster).
DRIVER_DECODE_BYTES = 64 * 2**20

#: The decoded-size estimate decodes at most this many rows, and about this
#: many payload bytes, per sampled file.
_SAMPLE_ROWS = 8
_SAMPLE_BYTES = 4 * 2**20


@dataclass
class EpisodeShard(RequiresFork):
    """A Learner's share of the decoded episodes (a handle; the data stays put).

    Passed to `Learner.update()` in place of a Ray Data iterator. The block
    references keep the blocks alive in the object store. A Learner process
    without the fork (or with another version) refuses it on arrival.
    """

    #: Which shard this is, of how many.
    index: int
    num_shards: int
    block_refs: List[ray.ObjectRef]
    num_timesteps: int
    num_episodes: int
    #: Timesteps of all shards together (the same on every Learner).
    total_timesteps: int

    def blocks(self) -> List[EpisodeBlock]:
        """The shard's blocks (zero-copy views of the object store on a node)."""
        return [block for blocks in ray.get(self.block_refs) for block in blocks]

    def block_source(self, rng: np.random.Generator) -> "HeldBlocks":
        """What the Learner's sampler samples from: all blocks, all the time."""
        return HeldBlocks(self.blocks())

    def same_as(self, other) -> bool:
        """Whether `other` is this shard (the same blocks)."""
        refs = getattr(other, "block_refs", None)
        return refs is not None and [r.hex() for r in refs] == [
            r.hex() for r in self.block_refs
        ]

    def learner_batches(
        self, learner, minibatch_size: int, num_iters: Optional[int]
    ) -> Iterator[MultiAgentBatch]:
        """The train batches of one `update()` on `learner`, from this shard.

        The Learner's side of in-memory offline data: a Learner that finds an
        object with this method in `training_data.data_iterators[0]` calls it
        instead of streaming through Ray Data, converts each batch it yields
        to tensors on its device and adds value targets with its live module.
        `rllib.core` never imports this module; it only calls the method.

        Args:
            learner: The `Learner`; its sampler for this shard is built once
                and kept on it (`shard_sampler.sampler_for_learner`).
            minibatch_size: Rows per module in each batch.
            num_iters: Batches to yield; None: `default_num_updates` (the same
                on every Learner).

        Returns:
            An iterator of `MultiAgentBatch`es (numpy columns).
        """
        # Imported here: `shard_sampler` imports this module.
        from rllib.offline.in_memory.shard_sampler import sampler_for_learner

        return sampler_for_learner(learner, self).batches(minibatch_size, num_iters)


class HeldBlocks:
    """Blocks that stay for all of training (the in-memory mode); the data
    beyond memory rotates instead (`block_cache.RotatingBlockCache`)."""

    def __init__(self, blocks: List[EpisodeBlock]):
        self._by_module: Dict[Any, List[EpisodeBlock]] = {}
        for block in blocks:
            self._by_module.setdefault(block.module_id, []).append(block)

    def module_blocks(self) -> Dict[Any, List[EpisodeBlock]]:
        return self._by_module

    def drawn(self, module_id, counts: np.ndarray) -> None:
        """Nothing to count: held blocks never leave."""

    def rotate(self) -> None:
        """Nothing to rotate."""


@dataclass
class DecodePlan:
    """The row ranges to decode, and what the files' metadata says of them."""

    ranges: List[RowRange]
    #: Uncompressed parquet bytes of all files (a lower bound of the decoded
    #: size for compressed payloads, an upper one for padded ones).
    payload_bytes: int
    #: `(rows, uncompressed bytes)` per file with rows.
    file_sizes: Dict[str, Tuple[int, int]]

    def estimate_decoded_bytes(self, **decode_kwargs) -> int:
        """Decoded bytes of all rows, extrapolated from a sample decoded here.

        Decodes the first rows of a few files spread over the input (a few
        MiB of payload at most) and scales their decoded-to-payload ratio to
        the whole input.

        Args:
            decode_kwargs: As `decode_row_range`.
        """
        return self.estimate_decoded(**decode_kwargs)[0]

    def estimate_decoded(self, **decode_kwargs) -> Tuple[int, int]:
        """`(decoded bytes, timesteps)` of all rows, extrapolated from the
        sample `estimate_decoded_bytes` decodes."""
        files = [path for path, (rows, _) in self.file_sizes.items() if rows]
        if not files:
            return 0, 0
        picks = sorted({round(i) for i in np.linspace(0, len(files) - 1, 4)})
        sampled_payload = decoded = timesteps = 0
        for path in (files[i] for i in picks):
            rows, nbytes = self.file_sizes[path]
            per_row = max(1, nbytes // rows)
            take = max(1, min(_SAMPLE_ROWS, rows, _SAMPLE_BYTES // per_row))
            _, sizes = decode_row_range((path, 0, take), **decode_kwargs)
            sampled_payload += take * per_row
            decoded += sizes["nbytes"]
            timesteps += sizes["timesteps"]
        scale = self.payload_bytes / sampled_payload
        return int(decoded * scale), int(timesteps * scale)


class EpisodeStore:
    """Decodes the input files in parallel Ray tasks and holds the blocks.

    Build it with `start`, then call `wait` before `shards`.
    """

    def __init__(self, ranges: List[RowRange], refs, size_refs, shard_nodes=None):
        self._ranges = ranges
        #: Placed decoding: the node of each shard, and the shard each range
        #: was decoded for; None otherwise.
        self._shard_nodes: Optional[List[str]] = shard_nodes
        self._owners: Optional[List[int]] = None
        if shard_nodes:
            self._owners = deal_by_rows(ranges, len(shard_nodes))
        self._block_refs: List[ray.ObjectRef] = refs
        self._size_refs: List[ray.ObjectRef] = size_refs
        self._sizes: Optional[List[Dict[str, int]]] = None
        self._started = time.perf_counter()
        #: Submits the decoding task of range i (bounded: see `start`).
        self._submit: Optional[Callable[[int], None]] = None
        self._next_range = len(refs)

    @staticmethod
    def plan(
        files: Sequence[str],
        *,
        filesystem: Optional[pa_fs.FileSystem],
        min_ranges: int = 1,
    ) -> DecodePlan:
        """Splits `files` into row ranges from their metadata (nothing decoded).

        Args:
            files: The parquet files with an `item` column of episodes.
            filesystem: Their filesystem (None: local or inferred per path).
            min_ranges: Split the files into at least this many ranges (as
                many as there are rows at most), e.g. one per Learner.
        """
        return split_into_row_ranges(
            files, filesystem=filesystem, num_ranges=_num_ranges(min_ranges)
        )

    @classmethod
    def start(
        cls,
        files: Sequence[str],
        *,
        filesystem: Optional[pa_fs.FileSystem],
        observation_space: Optional[Any],
        action_space: Optional[Any],
        min_ranges: int = 1,
        policy_mapping_fn: Optional[Callable] = None,
        action_rescaling: Optional[ActionRescaling] = None,
        plan: Optional[DecodePlan] = None,
        task_options: Optional[Dict[str, Any]] = None,
        max_in_flight: Optional[int] = None,
        shard_nodes: Optional[List[str]] = None,
    ) -> "EpisodeStore":
        """Starts decoding the row ranges of `files`.

        Args:
            files: The parquet files with an `item` column of episodes.
            filesystem: Their filesystem (None: local or inferred per path).
            observation_space: Restores the tuples of Tuple observations (a
                dict by agent id for multi-agent episodes).
            action_space: Same for actions.
            policy_mapping_fn: Maps the agents of multi-agent episodes to
                modules (see `decode_module_columns`).
            action_rescaling: Maps the recorded actions to the units the
                module acts in; None keeps them as recorded.
            min_ranges: Split the files into at least this many ranges (as
                many as there are rows at most), e.g. one per Learner.
            plan: The ranges, if already planned (`plan`).
            task_options: `ray.remote` options of the decoding tasks.
            max_in_flight: Decoding tasks running at once (default: one per
                CPU of the cluster); `wait` starts the rest as tasks finish.
            shard_nodes: The node of each Learner, to decode each Learner's
                shard on its own node (the ranges are dealt out now, by rows;
                `shards(len(shard_nodes))` returns that deal). None: decode
                anywhere and deal out the blocks by timesteps afterwards.
        """
        if plan is None:
            plan = cls.plan(files, filesystem=filesystem, min_ranges=min_ranges)
        kwargs = {
            "filesystem": filesystem,
            "observation_space": observation_space,
            "action_space": action_space,
            "policy_mapping_fn": policy_mapping_fn,
            "action_rescaling": action_rescaling,
        }
        if not shard_nodes and plan.payload_bytes <= DRIVER_DECODE_BYTES:
            # Small data decodes faster here than a Ray worker starts up.
            refs, size_refs = [], []
            for row_range in plan.ranges:
                blocks, sizes = decode_row_range(row_range, **kwargs)
                refs.append(ray.put(blocks))
                size_refs.append(ray.put(sizes))
            return cls(plan.ranges, refs, size_refs)
        store = cls(plan.ranges, [], [], shard_nodes)
        owners = store._owners
        decode = ray.remote(num_returns=2)(decode_row_range)
        if task_options:
            decode = decode.options(**task_options)

        def submit(index: int) -> None:
            task = decode
            if owners is not None:
                # On the Learner's node; soft: a node that is gone or full
                # hands the task (or its retry) to another one.
                task = decode.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(
                        shard_nodes[owners[index]], soft=True
                    )
                )
            block_ref, size_ref = task.remote(plan.ranges[index], **kwargs)
            store._block_refs.append(block_ref)
            store._size_refs.append(size_ref)

        store._submit = submit
        limit = max_in_flight or _num_ranges(1)
        for index in range(min(limit, len(plan.ranges))):
            submit(index)
        store._next_range = len(store._size_refs)
        return store

    def wait(self, memory_budget: int) -> bool:
        """Waits for the decoding tasks; False if the data outgrew the budget.

        Starts a queued range's task each time one finishes, so no more than
        `max_in_flight` run at once.

        Args:
            memory_budget: Decoded bytes the whole input may take.

        Raises:
            ValueError: What a task raised for a row it cannot use (the message
                names the file and the row).
        """
        sizes: Dict[int, Dict[str, int]] = {}
        position = {ref: i for i, ref in enumerate(self._size_refs)}
        pending = list(self._size_refs)
        total = 0
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            index = position[done[0]]
            sizes[index] = _get_unwrapped(done[0])
            total += sizes[index]["nbytes"]
            if total > memory_budget:
                self.cancel()
                logger.warning(
                    "Decoded episodes exceed the memory budget (more "
                    "than %d bytes after %d of %d row ranges).",
                    memory_budget,
                    len(sizes),
                    len(self._ranges),
                )
                return False
            if self._next_range < len(self._ranges):
                self._submit(self._next_range)
                position[self._size_refs[-1]] = self._next_range
                pending.append(self._size_refs[-1])
                self._next_range += 1
        self._sizes = [sizes[i] for i in range(len(position))]
        logger.info(
            "Decoded %d episodes (%d timesteps, %.1f MiB) in %.1f s; "
            "they stay in the object store for all of training.",
            self.num_episodes,
            self.num_timesteps,
            self.nbytes / 2**20,
            time.perf_counter() - self._started,
        )
        return True

    def cancel(self) -> None:
        """Stops the decoding tasks and drops what was decoded."""
        for ref in self._block_refs:
            ray.cancel(ref, force=False)
        self._block_refs, self._size_refs = [], []
        self._next_range = len(self._ranges)

    @property
    def num_timesteps(self) -> int:
        return sum(s["timesteps"] for s in self._loaded_sizes())

    @property
    def num_episodes(self) -> int:
        return sum(s["episodes"] for s in self._loaded_sizes())

    @property
    def nbytes(self) -> int:
        return sum(s["nbytes"] for s in self._loaded_sizes())

    def shards(self, num_shards: int) -> List[EpisodeShard]:
        """Deals the blocks out to `num_shards` shards, balanced by timesteps.

        Raises:
            ValueError: If there are fewer blocks with timesteps than shards.
        """
        sizes = self._loaded_sizes()
        blocks = [i for i, s in enumerate(sizes) if s["timesteps"]]
        if self._shard_nodes and num_shards == len(self._shard_nodes):
            return self._placed_shards(num_shards, sizes)
        if len(blocks) < num_shards:
            raise ValueError(
                f"The input has {len(blocks)} part(s) with episodes to deal out to "
                f"{num_shards} Learners; each Learner needs at least one. Record "
                "more episodes, or train with fewer Learners "
                "(`config.learners(num_learners=...)`)."
            )
        members: List[List[int]] = [[] for _ in range(num_shards)]
        load = np.zeros(num_shards, dtype=np.int64)
        for block in sorted(blocks, key=lambda i: -sizes[i]["timesteps"]):
            target = int(np.argmin(load))
            members[target].append(block)
            load[target] += sizes[block]["timesteps"]
        _check_every_shard_has_every_module(members, sizes)
        return [
            EpisodeShard(
                index=index,
                num_shards=num_shards,
                block_refs=[self._block_refs[i] for i in sorted(chosen)],
                num_timesteps=sum(sizes[i]["timesteps"] for i in chosen),
                num_episodes=sum(sizes[i]["episodes"] for i in chosen),
                total_timesteps=int(load.sum()),
            )
            for index, chosen in enumerate(members)
        ]

    def _placed_shards(self, num_shards: int, sizes) -> List[EpisodeShard]:
        """The shards as dealt out before decoding (each on its own node)."""
        members: List[List[int]] = [[] for _ in range(num_shards)]
        for index, owner in enumerate(self._owners):
            if sizes[index]["timesteps"]:
                members[owner].append(index)
        empty = [i for i, chosen in enumerate(members) if not chosen]
        if empty:
            raise ValueError(
                f"Learner(s) {empty} of {num_shards} got no episodes with steps. "
                "Record more episodes, or train with fewer Learners "
                "(`config.learners(num_learners=...)`)."
            )
        _check_every_shard_has_every_module(members, sizes)
        total = sum(s["timesteps"] for s in sizes)
        return [
            EpisodeShard(
                index=index,
                num_shards=num_shards,
                block_refs=[self._block_refs[i] for i in chosen],
                num_timesteps=sum(sizes[i]["timesteps"] for i in chosen),
                num_episodes=sum(sizes[i]["episodes"] for i in chosen),
                total_timesteps=total,
            )
            for index, chosen in enumerate(members)
        ]

    def _loaded_sizes(self) -> List[Dict[str, int]]:
        if self._sizes is None:
            raise RuntimeError("Call `EpisodeStore.wait()` first.")
        return self._sizes


def _check_every_shard_has_every_module(
    members: List[List[int]], sizes: List[Dict]
) -> None:
    """Raises if a Learner's shard lacks a module another one trains.

    With several Learners, every module's gradients are averaged across all
    of them; a Learner without data for a module would leave the others
    waiting for it.
    """
    if len(members) < 2:
        return
    held = [
        {module for i in chosen for module in sizes[i].get("modules", ())}
        for chosen in members
    ]
    every = set().union(*held)
    for index, modules in enumerate(held):
        missing = sorted(every - modules, key=repr)
        if missing:
            raise ValueError(
                f"Dealt out to {len(members)} Learners, the episodes leave "
                f"Learner {index} without data for module(s) {missing}: the "
                "agents of those modules occur in too few parts of the input. "
                "Train with fewer Learners (`config.learners(num_learners=...)`), "
                "or split the input into more files with episodes of every agent."
            )


def decode_row_range(
    row_range: RowRange,
    *,
    filesystem: Optional[pa_fs.FileSystem],
    observation_space: Optional[Any],
    action_space: Optional[Any],
    policy_mapping_fn: Optional[Callable] = None,
    action_rescaling: Optional[ActionRescaling] = None,
) -> Tuple[List[EpisodeBlock], Dict[str, int]]:
    """Reads and decodes one row range into blocks, one per module with steps.

    Returns:
        `(blocks, sizes)`; `sizes` has the blocks' `timesteps` (agent steps
        for multi-agent rows), `episodes` (rows) and `nbytes`.

    Raises:
        ValueError: If a row cannot be decoded or its episode is not done (the
            message names the file and the row).
    """
    path, start, stop = row_range
    fs, resolved = _filesystem_for(path, filesystem)
    by_module: Dict[Any, list] = {}
    num_rows = 0
    with fs.open_input_file(resolved) as handle:
        rows = iter_payloads(
            open_parquet(handle, path),
            path,
            batch_size=_READ_BATCH_ROWS,
            first_row=start,
        )
        for row, payload, episode_id in rows:
            if row >= stop:
                break
            num_rows += 1
            pairs = _decode_row(
                payload,
                row,
                episode_id,
                path,
                observation_space,
                action_space,
                policy_mapping_fn,
                action_rescaling,
            )
            for module_id, episode in pairs:
                if len(episode):
                    by_module.setdefault(module_id, []).append(episode)
    blocks = [
        EpisodeBlock.from_episodes(episodes, module_id=module_id)
        for module_id, episodes in by_module.items()
    ]
    return blocks, {
        "timesteps": sum(block.num_timesteps for block in blocks),
        "episodes": num_rows,
        "nbytes": sum(block.nbytes for block in blocks),
        "modules": sorted(block.module_id for block in blocks),
    }


def _decode_row(
    payload,
    row,
    episode_id,
    path,
    observation_space,
    action_space,
    mapping_fn,
    action_rescaling,
):
    try:
        pairs = decode_module_columns(
            payload,
            observation_space=observation_space,
            action_space=action_space,
            policy_mapping_fn=mapping_fn,
            action_rescaling=action_rescaling,
        )
    except Exception as error:
        raise cannot_decode_error(describe_row(row, episode_id, path), error) from error
    for _, episode in pairs:
        if episode.is_done:
            continue
        where = describe_row(row, episode_id or episode.id_, path)
        raise ValueError(
            f"The episode in {where} is not done. Training samples from whole "
            "episodes, so every recorded episode must be terminated or truncated: "
            "record whole episodes (`EpisodeWriter` checks this) or mark the last "
            "step `truncated=True`."
        )
    return pairs


def split_into_row_ranges(
    files: Sequence[str],
    *,
    filesystem: Optional[pa_fs.FileSystem],
    num_ranges: int,
) -> DecodePlan:
    """Splits files into about `num_ranges` row ranges of similar row counts.

    A file is split only when there are fewer files than ranges wanted.

    Returns:
        The ranges, the files' uncompressed data size and each file's size.
    """
    file_sizes: Dict[str, Tuple[int, int]] = {}
    for path in files:
        fs, resolved = _filesystem_for(path, filesystem)
        with fs.open_input_file(resolved) as handle:
            metadata = open_parquet(handle, path).metadata
        file_sizes[path] = (
            metadata.num_rows,
            sum(
                metadata.row_group(i).total_byte_size
                for i in range(metadata.num_row_groups)
            ),
        )
    counts = [file_sizes[path][0] for path in files]
    payload_bytes = sum(nbytes for _, nbytes in file_sizes.values())
    total = sum(counts)
    if len(files) >= num_ranges or total == 0:
        ranges = [(path, 0, count) for path, count in zip(files, counts) if count]
        return DecodePlan(ranges, payload_bytes, file_sizes)
    ranges = []
    for path, count in zip(files, counts):
        pieces = max(1, min(count, round(num_ranges * count / total)))
        bounds = np.linspace(0, count, pieces + 1).round().astype(int)
        ranges.extend(
            (path, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a
        )
    return DecodePlan(ranges, payload_bytes, file_sizes)


def decoded_size(
    files: Sequence[str],
    *,
    filesystem: Optional[pa_fs.FileSystem] = None,
    observation_space: Optional[Any] = None,
    action_space: Optional[Any] = None,
) -> Dict[str, int]:
    """Decodes every row of `files` here (one range at a time) and counts.

    For sizing a memory budget against real data, e.g. in benchmarks.

    Returns:
        `{"nbytes", "timesteps", "episodes"}` of all rows together.
    """
    plan = split_into_row_ranges(files, filesystem=filesystem, num_ranges=1)
    total = {"nbytes": 0, "timesteps": 0, "episodes": 0}
    for row_range in plan.ranges:
        _, sizes = decode_row_range(
            row_range,
            filesystem=filesystem,
            observation_space=observation_space,
            action_space=action_space,
        )
        for key in total:
            total[key] += sizes[key]
    return total


def deal_by_rows(ranges: Sequence[RowRange], num_shards: int) -> List[int]:
    """The shard of each range: the largest ranges first, each to the shard
    with the fewest rows so far."""
    owners = [0] * len(ranges)
    load = np.zeros(num_shards, dtype=np.int64)
    for index in sorted(range(len(ranges)), key=lambda i: ranges[i][1] - ranges[i][2]):
        owner = int(np.argmin(load))
        owners[index] = owner
        load[owner] += ranges[index][2] - ranges[index][1]
    return owners


def _num_ranges(min_ranges: int) -> int:
    # At least one range per CPU the cluster has, so decoding runs in parallel
    # (a single large file is split too).
    cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else 1
    return max(min_ranges, cpus, 1)


def _filesystem_for(path: str, filesystem):
    from rllib.offline.episode_files.filesystem import resolve_filesystem

    return resolve_filesystem(path, filesystem)


def _get_unwrapped(ref):
    """`ray.get`, raising a task's own exception rather than Ray's wrapper.

    A task that fails fails both its returns, so fetching the small size
    return surfaces an undecodable row without fetching the block.
    """
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        cause = error.cause
        if isinstance(cause, Exception):
            raise cause from None
        raise
