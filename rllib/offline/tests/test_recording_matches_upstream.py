"""Column recording (`output_write_episodes=False`): the fork writes the same
transitions as upstream, each once.

A seeded PPO EnvRunner with `output` set samples 3 x 50 steps and stops, in a
fresh process per mode. Both modes record the same distinct transitions
(decoded observations, actions, rewards, done flags). Upstream writes its
whole row buffer again at every `sample()` (50 + 100 + 150 = 300 rows, most
of them duplicates); the fork writes each sampled step once (150 rows), as
documented in the guide's recorder section.
"""

import sys

import pytest

from rllib._fork.tests.differential import run_in_both_modes

_SCENARIO = """
import collections
import glob
import os
import tempfile

import pyarrow.parquet as pq
import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.utils.compression import unpack_if_needed

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
out = tempfile.mkdtemp()
algo = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0, rollout_fragment_length=50)
    .offline_data(output=out, output_write_episodes=False)
    .debugging(seed=0)
    .build_algo()
)
for _ in range(3):
    algo.env_runner.sample(num_timesteps=50, random_actions=False)
algo.env_runner.stop()
transitions = collections.Counter()
files = glob.glob(os.path.join(out, "**", "*.parquet"), recursive=True)
for path in files:
    for row in pq.read_table(path).to_pylist():
        key = (
            unpack_if_needed(row["obs"]).tolist(),
            row["actions"],
            row["rewards"],
            unpack_if_needed(row["new_obs"]).tolist(),
            row["terminateds"],
            row["truncateds"],
        )
        transitions[repr(key)] += 1
algo.stop()
emit({"transitions": dict(transitions), "rows": sum(transitions.values())})
"""


@pytest.mark.timeout(600)
def test_column_recording_writes_the_same_transitions_once():
    upstream, fork = run_in_both_modes(_SCENARIO, timeout=280)
    assert set(fork["transitions"]) == set(upstream["transitions"])
    assert fork["rows"] == 150 and set(fork["transitions"].values()) == {1}
    assert upstream["rows"] == 300


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
