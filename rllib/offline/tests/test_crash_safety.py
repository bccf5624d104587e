"""Writers and recorders killed with SIGKILL leave only complete, readable files.

Real processes: a zygote (`crash_child.py`, started once with
`subprocess.Popen`) forks each writer or recorder, and the test kills it with
`os.kill(pid, SIGKILL)` after a random (seeded) delay, then reads every
visible file with pyarrow and `read_episodes`. No Ray cluster.
"""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from ray.rllib.core.columns import Columns

from rllib.offline.episode_files.reader import (
    decode_episode,
    read_episodes,
    read_spaces,
)
from rllib.offline.tests.crash_child import template_episodes
from rllib.offline.tests.episode_factory import BOX, DISCRETE

REPO_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork"), reason="the zygote forks its children"
)


class Zygote:
    """The process that forks writers and recorders on request."""

    def __init__(self, log: Path):
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rllib.offline.tests.crash_child"],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
        )
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"crash_child did not start:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text()

    def fork(self, *command) -> int:
        self.process.stdin.write(" ".join(map(str, command)) + "\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def kill(self, pid: int) -> None:
        """SIGKILLs a child and waits until the kernel has reaped it."""
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.005)
        raise TimeoutError(f"child {pid} still exists after SIGKILL")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    zygote = Zygote(tmp_path_factory.mktemp("zygote") / "stderr.log")
    yield zygote
    zygote.close()


def _split(directory: Path):
    """(visible files, hidden names) directly or anywhere under `directory`."""
    visible, hidden = [], []
    for path in directory.rglob("*"):
        relative = path.relative_to(directory).parts
        if any(part.startswith((".", "_")) for part in relative):
            hidden.append(path.name)
        elif path.is_file():
            visible.append(path)
    return visible, hidden


def _check_writer_file(path: Path, templates) -> int:
    """Reads a committed file fully and compares each row with its template."""
    assert path.suffix == ".parquet", path
    table = pq.read_table(path)
    assert 1 <= table.num_rows <= 3
    ids = table.column(Columns.EPS_ID).to_pylist()
    for payload, id_, steps in zip(
        table.column("item").to_pylist(), ids, table.column("env_steps").to_pylist()
    ):
        episode = decode_episode(payload, observation_space=BOX, action_space=DISCRETE)
        template = templates[int(id_.split(".")[0])]
        assert episode.id_ == id_ and len(episode) == steps == len(template)
        assert episode.is_terminated
        np.testing.assert_array_equal(
            episode.get_observations(), template.get_observations()
        )
        np.testing.assert_array_equal(episode.get_actions(), template.get_actions())
        np.testing.assert_array_equal(episode.get_rewards(), template.get_rewards())
    return table.num_rows


@pytest.mark.timeout(180)
def test_writer_killed_at_20_random_points(zygote, tmp_path):
    rng = random.Random(1747)
    templates = template_episodes()
    directory = tmp_path / "episodes"
    directory.mkdir()
    checked, rows, kills_mid_file, leftovers = set(), 0, 0, 0
    for kill in range(20):
        compression = rng.choice(["none", "zstd"])
        pid = zygote.fork("writer", directory, kill, compression)
        time.sleep(rng.uniform(0.05, 0.6))
        zygote.kill(pid)

        visible, hidden = _split(directory)
        # A kill while a file is open leaves its hidden temporary file.
        kills_mid_file += len(hidden) > leftovers
        leftovers = len(hidden)
        # Every visible file is complete: read it whole, compare every row.
        for path in visible:
            if path not in checked:
                rows += _check_writer_file(path, templates)
                checked.add(path)
    # Every visible file reads back, and nothing else does.
    episodes = list(read_episodes(directory))
    assert len(episodes) == rows > 0
    assert len({e.id_ for e in episodes}) == rows
    assert read_spaces(directory) == (BOX, DISCRETE)
    # The kills hit open files (not only the gaps between them).
    assert kills_mid_file >= 1, zygote.stderr()
    assert "Traceback" not in zygote.stderr(), zygote.stderr()


@pytest.mark.timeout(240)
def test_recorder_killed_loses_only_uncommitted_episodes(zygote, tmp_path):
    rng = random.Random(2025)
    for kill in range(3):
        directory = tmp_path / f"recording-{kill}"
        progress = tmp_path / f"progress-{kill}"
        pid = zygote.fork("recorder", directory, progress)
        # Let it run a few `sample()` calls, then kill it at a random point.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if progress.exists() and len(progress.read_text().split()) >= 3 + kill:
                break
            time.sleep(0.02)
        else:
            zygote.kill(pid)
            pytest.fail(f"the recorder made no progress:\n{zygote.stderr()}")
        time.sleep(rng.uniform(0.0, 0.3))
        zygote.kill(pid)
        committed = int(progress.read_text().split()[-1])

        visible, _ = _split(directory)
        for path in visible:
            assert path.parent.parent.name == "cartpoleenv", path
            assert path.parent.name.startswith("run-000001-"), path
            assert pq.read_metadata(path).num_rows <= 2
        episodes = list(read_episodes(directory))
        # What the recorder reported as committed is all there (it may have
        # committed more before it could report).
        assert len(episodes) >= committed > 0
        assert len({e.id_ for e in episodes}) == len(episodes)
        assert all(e.is_done for e in episodes)
    assert "Traceback" not in zygote.stderr(), zygote.stderr()


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
