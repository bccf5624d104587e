"""The payload of one episode row: its serialized state, optionally compressed.

A row's `item` column holds `msgpack` + `msgpack_numpy` of the episode's
state. A compressed payload starts with the byte 0xC1, which msgpack never
emits, and a short header naming the codec and the uncompressed size, so a
reader tells both kinds apart by their first bytes.
"""

import struct
from typing import Any, Dict, Optional

import pyarrow as pa
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

# Public through this module too: `episode_writer.space_to_json`.
from rllib.offline.episode_files.multi_agent_state import (
    MULTI_AGENT_EPISODE,
    multi_agent_episode_state,
)

#: Version of the file layout this module writes. Readers refuse newer ones.
FORMAT_VERSION = 1
#: Key of the JSON document in the parquet schema metadata.
METADATA_KEY = b"rllib.episodes"
#: Column with the serialized episode (the name `OfflinePreLearner` reads).
ITEM_COLUMN = "item"
#: Column with the episode's length in env steps.
ENV_STEPS_COLUMN = "env_steps"

#: Prefix of compressed payloads. 0xC1 is the one byte msgpack never uses.
_COMPRESSED_MAGIC = b"\xc1rlz"
_CODEC_IDS = {"zstd": 1, "lz4": 2, "gzip": 3, "brotli": 4}
_CODEC_NAMES = {v: k for k, v in _CODEC_IDS.items()}
_HEADER = struct.Struct("<BQ")  # codec id, uncompressed size

#: The episode types a writer writes, by the name its metadata records.
SINGLE_AGENT_EPISODE = "SingleAgentEpisode"
#: What a row's payload holds, by episode type (the metadata's "payload"; it
#: describes the layout, readers tell the kinds apart by the decoded state).
#: Multi-agent rows hold each agent's `SingleAgentEpisode.get_state()`.
#: Files written before this id existed say
#: "msgpack+msgpack_numpy:rllib.offline.multi_agent_episode_state".
PAYLOAD_IDS = {
    SINGLE_AGENT_EPISODE: "msgpack+msgpack_numpy:SingleAgentEpisode.get_state",
    MULTI_AGENT_EPISODE: "msgpack+msgpack_numpy:MultiAgentEpisode.agent_states",
}

#: An episode of either kind.
Episode = Any  # SingleAgentEpisode or MultiAgentEpisode


def check_codec(compression: Optional[str]) -> Optional[str]:
    if compression is None:
        return None
    if compression not in _CODEC_IDS:
        raise ValueError(
            f"Unknown payload `compression={compression!r}`; use one of "
            f"{sorted(_CODEC_IDS)} or None."
        )
    codec = "lz4_frame" if compression == "lz4" else compression
    if not pa.Codec.is_available(codec):
        raise ValueError(
            f"`compression={compression!r}` is not available in this pyarrow "
            "build; pick another codec or None."
        )
    return compression


def compress_payload(payload: bytes, compression: Optional[str]) -> bytes:
    """Wraps a msgpack payload in the compressed envelope (or returns it as is)."""
    if compression is None:
        return payload
    codec = "lz4_frame" if compression == "lz4" else compression
    body = pa.compress(payload, codec=codec, asbytes=True)
    header = _HEADER.pack(_CODEC_IDS[compression], len(payload))
    return _COMPRESSED_MAGIC + header + body


def decompress_payload(payload: bytes) -> bytes:
    """Returns the msgpack bytes of a payload, compressed or not.

    Raises:
        ValueError: If the payload carries an unknown codec id.
    """
    if not payload[:4] == _COMPRESSED_MAGIC:
        return payload
    codec_id, size = _HEADER.unpack_from(payload, 4)
    if codec_id not in _CODEC_NAMES:
        raise ValueError(
            f"Compressed episode payload with unknown codec id {codec_id}; it "
            "was written by a newer writer. Upgrade rllib-fork."
        )
    name = _CODEC_NAMES[codec_id]
    codec = "lz4_frame" if name == "lz4" else name
    body = memoryview(payload)[4 + _HEADER.size :]
    return pa.decompress(body, decompressed_size=size, codec=codec, asbytes=True)


def encode_episode(episode: Episode, compression: Optional[str] = None) -> bytes:
    """Serializes an episode as `OfflinePreLearner` reads it, optionally compressed.

    Args:
        episode: The `SingleAgentEpisode` (or `MultiAgentEpisode`) to serialize.
        compression: None, or a codec name ("zstd", "lz4", "gzip", "brotli").

    Returns:
        The payload for the `item` column.

    Raises:
        TypeError: If a field holds a value msgpack cannot serialize; the
            message names the episode, the field and the timestep.
    """
    import msgpack
    import msgpack_numpy as mnp

    if isinstance(episode, MultiAgentEpisode):
        state = multi_agent_episode_state(episode)
    else:
        state = episode.get_state()
    try:
        payload = msgpack.packb(state, default=mnp.encode)
    except (TypeError, ValueError, OverflowError) as error:
        if isinstance(episode, MultiAgentEpisode):
            for agent_id, agent_episode in episode.agent_episodes.items():
                try:
                    msgpack.packb(agent_episode.get_state(), default=mnp.encode)
                except (TypeError, ValueError, OverflowError):
                    raise _unsupported_payload_error(
                        agent_episode,
                        agent_episode.get_state(),
                        error,
                        label=episode_label(episode, agent_id),
                    ) from error
        raise _unsupported_payload_error(episode, state, error) from error
    return compress_payload(payload, compression)


def episode_label(episode: Episode, agent_id: Any = None) -> str:
    """How errors name an episode (and one of its agents)."""
    label = f"Episode `{episode.id_}`"
    return label if agent_id is None else f"{label}, agent `{agent_id!r}`"


def _unsupported_payload_error(
    episode: Episode,
    state: Dict[str, Any],
    error: Exception,
    label: Optional[str] = None,
) -> TypeError:
    """Finds the first field/timestep msgpack rejects and describes it."""
    import msgpack
    import msgpack_numpy as mnp

    def packs(value):
        try:
            msgpack.packb(value, default=mnp.encode)
            return True
        except (TypeError, ValueError, OverflowError):
            return False

    fields = []
    if "observations" in state:
        fields = [
            (Columns.OBS, state["observations"]),
            (Columns.ACTIONS, state["actions"]),
            (Columns.REWARDS, state["rewards"]),
            (Columns.INFOS, state["infos"]),
        ]
        fields += [
            (f"extra_model_outputs[{k!r}]", v)
            for k, v in (state["extra_model_outputs"] or {}).items()
        ]
    where = "an episode attribute (`custom_data` or an id)"
    for name, buffer_state in fields:
        if packs(buffer_state):
            continue
        where = f"field `{name}`"
        data = buffer_state["data"] if isinstance(buffer_state, dict) else None
        if isinstance(data, list):
            lookback = buffer_state.get("lookback", 0)
            for i, item in enumerate(data):
                if not packs(item):
                    where += f" at timestep {i - lookback} (value {item!r:.200})"
                    break
        break
    return TypeError(
        f"{label or episode_label(episode)}: {where} cannot be serialized with msgpack "
        f"({type(error).__name__}: {error}). Episodes are stored as msgpack + "
        "msgpack_numpy: use numpy arrays, numbers, str, bytes, lists and dicts "
        "(in `infos` and `extra_model_outputs` too)."
    )
