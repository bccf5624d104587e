"""Writer and recorder processes for the crash tests, forked from one zygote.

Run as `python -m rllib.offline.tests.crash_child`. The zygote imports
everything once, then reads commands from stdin, one per line:

- `writer <directory> <seed> <compression>`: forks a child that writes
  episodes into `directory` with an `EpisodeWriter`, without end;
- `recorder <directory> <progress file>`: forks a child that records CartPole
  with RLlib's `OfflineSingleAgentEnvRunner`, without end, and after each
  `sample()` appends the number of committed episodes to `progress file`.

For each command it prints the child's pid. The test kills children with
SIGKILL; the zygote ignores SIGCHLD so the kernel reaps them. Forking keeps
the spawn cost (seconds of imports) out of each of the many kills.
"""

import copy
import os
import signal
import sys
import traceback

import numpy as np

#: Episodes each writer child cycles through: (seed, length).
TEMPLATES = [(seed, 20 + 7 * seed) for seed in range(6)]


def template_episodes():
    """The episodes writer children write; the test rebuilds them to compare."""
    from rllib.offline.tests.episode_factory import BOX, DISCRETE, make_episode

    return {
        seed: make_episode(BOX, DISCRETE, length=length, seed=seed)
        for seed, length in TEMPLATES
    }


def run_writer(directory: str, seed: int, compression: str) -> None:
    from rllib.offline.episode_files.writer import EpisodeWriter
    from rllib.offline.tests.episode_factory import BOX, DISCRETE

    templates = template_episodes()
    rng = np.random.default_rng(seed)
    writer = EpisodeWriter(
        directory,
        observation_space=BOX,
        action_space=DISCRETE,
        max_rows_per_file=3,
        # Every episode is flushed as a row group: the temporary file grows
        # while the file is open, so kills land mid-file too.
        buffer_bytes=1,
        compression=None if compression == "none" else compression,
    )
    for count in range(sys.maxsize):
        template_seed = int(rng.integers(len(templates)))
        episode = copy.copy(templates[template_seed])
        # `<template seed>.<writer seed>.<count>`: the test compares against
        # the template and checks ids are unique.
        episode.id_ = f"{template_seed}.{seed}.{count}"
        writer.write(episode)


def run_recorder(directory: str, progress: str) -> None:
    from ray.rllib.algorithms.bc import BCConfig
    from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner

    config = (
        BCConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2)
        .offline_data(
            output=directory,
            output_write_episodes=True,
            output_max_rows_per_file=2,
            output_config={"max_running_episode_steps": 15},
        )
    )
    runner = OfflineSingleAgentEnvRunner(config=config, worker_index=1)
    handle = os.open(progress, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    while True:
        runner.sample(num_timesteps=20, random_actions=True)
        writer = runner._episode_writer
        committed = writer.num_episodes - writer.num_pending if writer else 0
        os.write(handle, f"{committed}\n".encode())


def main() -> None:
    # Import once in the zygote; children inherit the modules.
    import ray.rllib.algorithms.bc  # noqa: F401
    import ray.rllib.offline.offline_env_runner  # noqa: F401

    template_episodes()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                if command == "writer":
                    run_writer(args[0], int(args[1]), args[2])
                else:
                    run_recorder(args[0], args[1])
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
