"""Users' data outlives the overlay: the data tools work with the fork off.

With `RLLIB_FORK_DISABLE=1`, or a ray the fork does not support, upstream
RLlib runs unchanged and `ray.rllib.offline.episode_files.writer` does not exist.
The writer, the reader and the `episodes` command are plain modules of the
`rllib` package, importable as `rllib.offline.*` in every mode.
"""

import json

import pytest

from rllib._fork.tests.helpers import run_python, shadow_ray

_WRITE_READ_CONVERT = """
    import json, subprocess, sys
    import rllib
    from rllib.offline.episode_files.reader import read_episodes, read_spaces
    from rllib.offline.episode_files.writer import write_episodes
    from rllib.offline.tests.episode_factory import TUPLE, DISCRETE, make_episode

    episodes = [make_episode(TUPLE, DISCRETE, length=4 + i, seed=i) for i in range(3)]
    write_episodes(episodes, "{root}/data", observation_space=TUPLE,
                   action_space=DISCRETE)
    back = list(read_episodes("{root}/data"))

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "rllib.offline.episodes", *args],
            capture_output=True, text=True, timeout=300,
        )

    validate = cli("validate", "{root}/data")
    convert = cli("convert", "{root}/data", "{root}/copy")
    info = cli("info", "--json", "{root}/copy")
    usage = cli("--help")
    print(json.dumps({{
        "active": rllib.is_active(),
        "lengths": [len(e) for e in back],
        "returns": [e.get_return() for e in back],
        "expected_returns": [e.get_return() for e in episodes],
        "first_obs": repr(back[0].get_observations(0)),
        "expected_first_obs": repr(episodes[0].get_observations(0)),
        "spaces": [str(s) for s in read_spaces("{root}/data")],
        "validate": [validate.returncode, validate.stderr[-2000:]],
        "convert": [convert.returncode, convert.stderr[-2000:]],
        "info": [info.returncode, info.stdout, info.stderr[-2000:]],
        "usage": usage.stdout.splitlines()[:1],
    }}))
"""


def _set_version(text):
    return text.replace('version = "', 'version = "2.61.0"  # was "', 1)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["disabled", "unsupported_ray"])
def test_write_read_validate_convert_with_the_fork_off(tmp_path, mode):
    if mode == "disabled":
        env = {"RLLIB_FORK_DISABLE": "1"}
    else:
        site = shadow_ray(tmp_path / "site", {"_version.py": _set_version})
        env = {"PYTHONPATH": site, "PYTHONDONTWRITEBYTECODE": "1"}
    line, stderr = run_python(
        _WRITE_READ_CONVERT.format(root=tmp_path), env=env, timeout=540
    )
    state = json.loads(line)
    assert state["active"] is False
    assert state["lengths"] == [4, 5, 6]
    assert state["returns"] == state["expected_returns"]
    assert state["first_obs"] == state["expected_first_obs"]
    assert state["spaces"] == [
        "Tuple(Box(0, 255, (2, 2), uint8), Discrete(4))",
        "Discrete(4)",
    ]
    assert state["validate"][0] == 0, state["validate"][1]
    assert state["convert"][0] == 0, state["convert"][1]
    code, out, err = state["info"]
    assert code == 0, err
    info = json.loads(out)
    assert info["num_episodes"] == 3, info
    assert info["num_steps"] == 15, info
    # The help names the command as it runs with the overlay off.
    (usage,) = state["usage"]
    assert usage.startswith("usage: python -m rllib.offline.episodes "), usage
    if mode == "unsupported_ray":
        assert "rllib-fork supports ray==2.60.*" in stderr


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
