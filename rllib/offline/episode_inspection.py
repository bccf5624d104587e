"""Moved to :mod:`ray.rllib.offline.tools.inspection`.

This path keeps earlier imports working.
"""

from rllib.offline.tools.inspection import (  # noqa: F401
    DEFAULT_SAMPLE_STEPS,
    FORMAT_FORK,
    FORMAT_HAND_ROLLED,
    FORMAT_ITEM_ONLY,
    FORMAT_RECORDER,
    FORMAT_UNREADABLE,
    LAYOUT_LISTS,
    LAYOUT_NUMPY,
    SPACES_FROM_EPISODES,
    SPACES_FROM_METADATA,
    SPACES_GIVEN,
    DatasetInfo,
    EpisodeFile,
    EpisodeRow,
    FileInfo,
    Problem,
    Stats,
    ValidationReport,
    count_rows,
    dataset_info,
    open_episode_files,
    progress_bar,
    recorded_spaces,
    validate_dataset,
)
