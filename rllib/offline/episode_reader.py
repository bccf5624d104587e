"""Moved to :mod:`ray.rllib.offline.episode_files.reader`.

This path keeps earlier imports working.
"""

from rllib.offline.episode_files.reader import (  # noqa: F401
    PathLike,
    agreed_spaces,
    cannot_decode_error,
    decode_episode,
    decode_episode_state,
    describe_row,
    iter_payloads,
    list_episode_files,
    read_episodes,
    read_file_metadata,
    read_spaces,
    spaces_from_metadata,
)
