"""The examples and the CLI drop ray's warnings that a user cannot act on, and
keep them with `--verbose`: checked in a fresh interpreter that builds an
algorithm, as the scripts do."""

import os
import subprocess
import sys

import pytest

from rllib.offline.tools.quiet_output import UNACTIONABLE_WARNINGS

_CHILD = """
import sys

import ray
from ray.rllib.algorithms.ppo import PPOConfig

from rllib.offline.tools.quiet_output import quiet_output

quiet_output(verbose=sys.argv[1] == "verbose")
from ray.data import DataContext

print("progress bars:", DataContext.get_current().enable_progress_bars)
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
config = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
algo = config.build_algo()
algo.stop()
ray.shutdown()
"""


def _run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ, RAY_ADDRESS="local", RAY_USAGE_STATS_ENABLED="0"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.timeout(400)
def test_warnings_dropped_by_default_and_kept_with_verbose():
    verbose = _run("verbose")
    quiet = _run("quiet")
    for _, text in UNACTIONABLE_WARNINGS:
        # Ray emits each of them when it builds an algorithm...
        assert text in verbose, (text, verbose[-3000:])
        # ...and the scripts drop them.
        assert text not in quiet, (text, quiet[-3000:])
    assert "progress bars: True" in verbose
    assert "progress bars: False" in quiet
    # Everything else still reaches the user (ray's start-up line).
    assert "Started a local Ray instance" in quiet


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
