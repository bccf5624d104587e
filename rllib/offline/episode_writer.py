"""Moved to :mod:`ray.rllib.offline.episode_files.writer`.

This path keeps earlier imports working.
"""

from rllib.offline.episode_files.filesystem import (  # noqa: F401
    resolve_filesystem,
)
from rllib.offline.episode_files.payload import (  # noqa: F401
    ENV_STEPS_COLUMN,
    FORMAT_VERSION,
    ITEM_COLUMN,
    METADATA_KEY,
    SINGLE_AGENT_EPISODE,
    compress_payload,
    decompress_payload,
    encode_episode,
)
from rllib.offline.episode_files.spaces import (  # noqa: F401
    space_from_json,
    space_to_json,
)
from rllib.offline.episode_files.validation import (  # noqa: F401
    validate_episode,
)
from rllib.offline.episode_files.writer import (  # noqa: F401
    EpisodeWriter,
    write_episodes,
)
