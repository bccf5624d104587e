"""Triggers each error the fork raises for bad episode data and prints it.

Part of the "Training from external experiences" page: the messages quoted in
its Troubleshooting section are checked against this script's output by
`test_doc_code.py`, so the page shows what users actually see. No Ray
cluster: the OfflinePreLearner is called directly, as Ray Data would.

Prints one block per case: a line `=== <case>` followed by
`<ExceptionType>: <message>`.
"""

import glob
import json
import logging
import os
import tempfile

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.episode_files.reader import read_episodes, read_spaces
from ray.rllib.offline.episode_files.writer import EpisodeWriter, write_episodes
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner
from ray.rllib.offline.offline_prelearner import OfflinePreLearner

from rllib.offline.in_memory.store import decode_row_range

logging.disable(logging.WARNING)  # Hide upstream deprecation notices.

ENV = gym.make("CartPole-v1")
OBS_SPACE, ACT_SPACE = ENV.observation_space, ENV.action_space
BASE = tempfile.mkdtemp()


def case(name, func):
    """Runs `func`, which must raise, and prints the error."""
    try:
        func()
    except Exception as error:  # noqa: BLE001 - printing any error is the point
        print(f"=== {name}\n{type(error).__name__}: {error}\n", flush=True)
    else:
        raise AssertionError(f"Case {name!r} raised nothing.")


def episode(steps=3, done=True, obs_scale=0.01, infos=None):
    """A short CartPole-shaped episode; `id_` fixed for stable messages."""
    obs = [np.full(4, obs_scale, np.float32) for _ in range(steps + 1)]
    return SingleAgentEpisode(
        id_="ep-0",
        observations=obs,
        actions=[0] * steps,
        rewards=[1.0] * steps,
        infos=infos,
        terminated=done,
        len_lookback_buffer=0,
    )


def path(name):
    return os.path.join(BASE, name)


# -- Writing -----------------------------------------------------------------

case("not-done", lambda: write_episodes([episode(done=False)], path("a")))
case(
    "outside-space",
    lambda: write_episodes(
        [episode(obs_scale=9.0)],
        path("b"),
        observation_space=OBS_SPACE,
        action_space=ACT_SPACE,
    ),
)
case(
    "not-serializable",
    lambda: write_episodes(
        [episode(steps=1, infos=[{}, {"handle": object()}])], path("c")
    ),
)
case(
    "unsupported-space",
    lambda: EpisodeWriter(path("d"), observation_space=gym.spaces.Text(8)),
)
NESTED = gym.spaces.Dict(
    {"pole": gym.spaces.Tuple([gym.spaces.Box(-1.0, 1.0, (1,), np.float32)])}
)
bad_nested = SingleAgentEpisode(
    id_="ep-1",
    observations=[{"pole": (np.zeros(2, np.float32),)}] * 2,
    actions=[0],
    rewards=[1.0],
    terminated=True,
    len_lookback_buffer=0,
)
case(
    "outside-nested-space",
    lambda: write_episodes([bad_nested], path("b2"), observation_space=NESTED),
)
case("unknown-compression", lambda: EpisodeWriter(path("e"), compression="xz"))
case("not-an-episode", lambda: write_episodes([{"obs": [1, 2]}], path("f")))


def write_after_close():
    writer = EpisodeWriter(path("g"))
    writer.close()
    writer.write(episode())


case("write-after-close", write_after_close)

# -- Reading -----------------------------------------------------------------

case("missing-path", lambda: list(read_episodes(path("does-not-exist"))))
os.makedirs(path("empty"))
case("no-parquet-files", lambda: list(read_episodes(path("empty"))))

os.makedirs(path("tabular"))
pq.write_table(pa.table({"obs": [1.0], "actions": [0]}), path("tabular/t.parquet"))
case("no-item-column", lambda: list(read_episodes(path("tabular"))))

os.makedirs(path("corrupt"))
pq.write_table(pa.table({"item": [b"not msgpack"]}), path("corrupt/c.parquet"))
case("cannot-decode", lambda: list(read_episodes(path("corrupt"))))

# A file cut short (a writer killed before its commit, an interrupted copy).
write_episodes([episode()], path("truncated"), observation_space=OBS_SPACE)
(cut,) = glob.glob(path("truncated/*.parquet"))
with open(cut, "rb") as f:
    head = f.read(100)
with open(cut, "wb") as f:
    f.write(head)
case("truncated-file", lambda: list(read_episodes(path("truncated"))))

write_episodes([episode()], path("mixed"), observation_space=OBS_SPACE)
write_episodes(
    [episode()],
    path("mixed"),
    observation_space=gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
)
case("spaces-disagree", lambda: read_spaces(path("mixed")))

os.makedirs(path("newer"))
newer_schema = pa.schema(
    [("item", pa.binary())],
    metadata={b"rllib.episodes": json.dumps({"format_version": 99}).encode()},
)
pq.write_table(pa.table({"item": [b""]}, schema=newer_schema), path("newer/n.parquet"))
case("newer-format", lambda: read_spaces(path("newer")))
case("bad-rows-per-file", lambda: EpisodeWriter(path("h"), max_rows_per_file=0))
case("bad-filesystem", lambda: EpisodeWriter(path("i"), filesystem="s3"))

# -- Training (the OfflinePreLearner, as Ray Data calls it) -------------------


def prelearner(input_dir, observation_space=OBS_SPACE):
    config = (
        BCConfig()
        .environment(observation_space=observation_space, action_space=ACT_SPACE)
        .training(train_batch_size_per_learner=8)
        .offline_data(input_=[input_dir], input_read_episodes=True)
    )
    module_spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (observation_space, ACT_SPACE)},
        inference_only=False,
    )
    return OfflinePreLearner(
        config=config,
        spaces=(observation_space, ACT_SPACE),
        module_spec=module_spec,
    )


def table_batch(file):
    table = pq.read_table(file)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def offline_config(input_dir, **spaces):
    return (
        BCConfig()
        .environment(**spaces)
        .offline_data(input_=[input_dir], input_read_episodes=True)
    )


good = write_episodes([episode(steps=20)], path("good"), observation_space=OBS_SPACE)
wide = gym.spaces.Box(-10.0, 10.0, (4,), np.float32)
# Checked by `build_algo()` (through `config.validate()`), on the driver.
case(
    "config-space-mismatch",
    lambda: offline_config(
        path("good"), observation_space=wide, action_space=ACT_SPACE
    ).validate(),
)
case(
    "config-missing-path",
    lambda: offline_config(path("no-such-dir"), action_space=ACT_SPACE).validate(),
)
case(
    "config-empty-path",
    lambda: offline_config(path("empty"), action_space=ACT_SPACE).validate(),
)
case(
    "prelearner-no-item-column",
    lambda: prelearner(path("tabular"))(table_batch(path("tabular/t.parquet"))),
)
case(
    "prelearner-cannot-decode",
    lambda: prelearner(path("corrupt"))(table_batch(path("corrupt/c.parquet"))),
)


def unfinished_legacy_file():
    import msgpack
    import msgpack_numpy as mnp

    payload = msgpack.packb(episode(done=False).get_state(), default=mnp.encode)
    os.makedirs(path("unfinished"))
    pq.write_table(pa.table({"item": [payload]}), path("unfinished/u.parquet"))
    return path("unfinished/u.parquet")


unfinished = unfinished_legacy_file()


def unfinished_dir():
    return os.path.dirname(unfinished)


case(
    "prelearner-not-done",
    lambda: prelearner(path("unfinished"))(table_batch(unfinished)),
)

# Decoding for training (in memory: once, before the first update).
case(
    "decode-not-done",
    lambda: decode_row_range(
        (unfinished, 0, 1),
        filesystem=None,
        observation_space=OBS_SPACE,
        action_space=ACT_SPACE,
    ),
)
case(
    "decode-cannot-decode",
    lambda: decode_row_range(
        (path("corrupt/c.parquet"), 0, 1),
        filesystem=None,
        observation_space=OBS_SPACE,
        action_space=ACT_SPACE,
    ),
)

# Files that record no spaces (upstream's recorder, the hand-rolled recipe).
case(
    "config-needs-spaces",
    lambda: offline_config(unfinished_dir(), env="CartPole-v1").validate(),
)

# -- Recording from EnvRunners ------------------------------------------------


def recorder_with_json():
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .offline_data(output=path("rec"), output_write_method="write_json")
    )
    runner = OfflineSingleAgentEnvRunner(config=config)
    runner.sample(num_episodes=1, random_actions=True)


case("recorder-not-parquet", recorder_with_json)
print("external_episodes_errors: OK")
