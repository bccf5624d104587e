"""The recorder (`OfflineSingleAgentEnvRunner` with `output=...`) raises when
a write fails: a logged error would leave a dataset with silent holes."""

import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner


def _recorder(output, **offline_data):
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=1)
        .offline_data(output=str(output), **offline_data)
    )
    return OfflineSingleAgentEnvRunner(config=config, worker_index=1)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("write_episodes", [True, False])
def test_a_failed_write_raises(ray_cluster, tmp_path, write_episodes):
    # The output "directory" is a file: no write under it can succeed.
    output = tmp_path / "not_a_directory"
    output.write_text("")
    with pytest.raises(OSError, match="not_a_directory"):
        recorder = _recorder(
            output,
            output_write_episodes=write_episodes,
            output_max_rows_per_file=1,
        )
        recorder.sample(num_timesteps=10, random_actions=True)
        recorder.stop()


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
