"""`python -m ray.rllib.offline.episodes ope`: checkpoints scored on episode
files and on the hand-rolled per-step payloads of ray-project/ray#51747.

No Ray cluster: the checkpoints are RLModule checkpoints written directly.
"""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.bc import BCConfig

from rllib.examples.offline_rl.scripted_cartpole import (
    balance_action,
    record_episodes,
    write_hand_rolled_files,
)
from rllib.offline.episode_files.reader import read_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.off_policy_estimation import evaluate_module
from rllib.offline.tools import cli, ope_command

ESTIMATORS = "is,wis,pdis,wpdis"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def episodes():
    env = gym.make("CartPole-v1")
    return record_episodes(
        env,
        6,
        lambda obs: balance_action(obs[2], obs[3]),
        epsilon=0.5,
        record_logp=True,
    )


def _checkpoint(path, seed):
    torch.manual_seed(seed)
    env = gym.make("CartPole-v1")
    spec = BCConfig().get_default_rl_module_spec()
    spec.observation_space = env.observation_space
    spec.action_space = env.action_space
    module = spec.build()
    module.save_to_path(str(path))
    return module


def _ope_json(capsys, data, checkpoints, *extra):
    code = cli.main(
        ["ope", "--data", str(data), "--checkpoint", *map(str, checkpoints)]
        + ["--estimators", ESTIMATORS, "--bootstrap", "20", "--json", *extra]
    )
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_rows_match_the_python_api_and_come_best_first(tmp_path, episodes, capsys):
    data = tmp_path / "episodes"
    write_episodes([ep.to_numpy() for ep in episodes], str(data))
    modules = {
        tmp_path / f"ckpt{seed}": _checkpoint(tmp_path / f"ckpt{seed}", seed)
        for seed in range(3)
    }
    rows = _ope_json(capsys, data, list(modules), "--rank-by", "wis")
    assert len(rows) == 3
    wis = [row["estimates"]["wis"]["value"] for row in rows]
    assert wis == sorted(wis, reverse=True)
    for row in rows:
        expected = evaluate_module(
            modules[tmp_path / row["checkpoint"].rsplit("/", 1)[1]],
            list(read_episodes(str(data))),
            gamma=0.99,
            estimators=ESTIMATORS.split(","),
            num_bootstrap=20,
        )["default_policy"]
        assert row["behavior_logp_source"] == "recorded"
        assert row["num_episodes"] == 6
        for name in ESTIMATORS.split(","):
            assert row["estimates"][name]["value"] == pytest.approx(
                expected.estimates[name].value, rel=1e-6
            )


def test_hand_rolled_payloads_without_propensities(tmp_path, episodes, capsys):
    # The seed's recipe: msgpack'ed per-step lists, no `action_logp` kept.
    for episode in episodes:
        episode.extra_model_outputs.clear()
    write_hand_rolled_files(episodes, tmp_path)
    checkpoint = tmp_path / "ckpt"
    _checkpoint(checkpoint, 0)
    (row,) = _ope_json(capsys, tmp_path, [checkpoint])
    assert row["behavior_logp_source"] == "fitted"
    assert row["num_episodes"] == len(episodes)
    assert row["estimates"]["wis"]["low"] <= row["estimates"]["wis"]["value"]


def test_table_output(tmp_path, episodes, capsys):
    data = tmp_path / "episodes"
    write_episodes([ep.to_numpy() for ep in episodes], str(data))
    checkpoint = tmp_path / "ckpt"
    _checkpoint(checkpoint, 0)
    assert (
        cli.main(
            ["ope", "--data", str(data), "--checkpoint", str(checkpoint)]
            + ["--estimators", "wis", "--bootstrap", "0"]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    header, rule, row = lines[:3]
    assert header.split()[:3] == ["checkpoint", "module", "wis"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert row.split()[:2] == [str(checkpoint), "default_policy"]
    assert lines[-1] == "[low, high]: for wis, none (--bootstrap 0)."


def test_interval_note_says_what_the_intervals_cover():
    assert ope_command.interval_note(["wis"], 200, 4) == (
        "[low, high]: for wis, 95% bootstrap intervals over the recorded "
        "episodes (200 resamples)."
    )
    one_fit = ope_command.interval_note(["wis", "fqe", "dr"], 50, 0)
    assert "for wis, fqe and dr, 95% bootstrap intervals" in one_fit
    assert "(50 resamples)" in one_fit
    assert "for fqe and dr under one fitted Q-function" in one_fit
    assert "leave out FQE's fitting error" in one_fit
    refits = ope_command.interval_note(["wis", "fqe", "dr"], 50, 4)
    assert refits.startswith(
        "[low, high]: for fqe and dr, 95% intervals from 4 FQE refits on "
        "resampled episodes: they cover FQE's fitting error"
    )
    assert "for wis, 95% bootstrap intervals" in refits
    assert "leave out" not in refits


def test_relative_paths_score_as_absolute_ones(tmp_path, episodes, capsys, monkeypatch):
    # As the guide writes them: `--data cartpole_data --checkpoint ckpt ./ckpt`.
    write_episodes([ep.to_numpy() for ep in episodes], str(tmp_path / "data"))
    _checkpoint(tmp_path / "ckpt", 0)
    monkeypatch.chdir(tmp_path)
    relative = _ope_json(capsys, "data", ["ckpt", "./ckpt"])
    (absolute,) = _ope_json(capsys, tmp_path / "data", [tmp_path / "ckpt"])
    assert [row["checkpoint"] for row in relative] == ["ckpt", "./ckpt"]
    for row in relative:
        assert row["estimates"] == absolute["estimates"]
    monkeypatch.setenv("HOME", str(tmp_path))
    (home,) = _ope_json(capsys, "~/data", ["~/ckpt"])
    assert home["estimates"] == absolute["estimates"]


def test_fqe_progress_and_one_torch_thread(tmp_path, episodes, capsys, monkeypatch):
    from rllib.offline.tools import ope_command

    write_episodes([ep.to_numpy() for ep in episodes], str(tmp_path / "data"))
    _checkpoint(tmp_path / "ckpt", 0)
    threads_before = torch.get_num_threads()
    threads_during = []
    real = ope_command.evaluate_module

    def recording(*args, **kwargs):
        threads_during.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(ope_command, "evaluate_module", recording)
    code = cli.main(
        ["ope", "--data", str(tmp_path / "data"), "--checkpoint"]
        + [str(tmp_path / "ckpt"), "--estimators", "fqe", "--fqe-updates", "40"]
        + ["--bootstrap", "0", "--fqe-resample-fits", "2", "--progress"]
    )
    assert code == 0
    err = capsys.readouterr().err
    # The fit and its two refits on resampled episodes.
    assert "FQE ckpt: 120 updates [" in err
    assert threads_during == [1]
    assert torch.get_num_threads() == threads_before
    code = cli.main(
        ["ope", "--data", str(tmp_path / "data"), "--checkpoint"]
        + [str(tmp_path / "ckpt"), "--estimators", "wis", "--torch-threads", "2"]
    )
    assert code == 0 and threads_during == [1, 2]
    assert "FQE" not in capsys.readouterr().err


def test_float64_observations_reach_a_float32_module(tmp_path):
    # Column files often hold float64 observations; the module is float32.
    from rllib.offline.off_policy_estimation import RLModuleTargetPolicy

    module = _checkpoint(tmp_path / "ckpt", 0)
    policy = RLModuleTargetPolicy(module)
    observations = np.random.default_rng(0).normal(size=(5, 4))
    as_float32 = policy.logp(observations.astype(np.float32), np.zeros(5, int))
    np.testing.assert_allclose(
        policy.logp(observations, np.zeros(5, int)), as_float32, rtol=1e-6
    )


def test_bad_arguments_fail_clearly(tmp_path, episodes, capsys):
    data = tmp_path / "episodes"
    write_episodes([ep.to_numpy() for ep in episodes], str(data))
    missing = tmp_path / "nowhere"
    assert cli.main(["ope", "--data", str(data), "--checkpoint", str(missing)]) == 2
    assert f"`--checkpoint {missing}`: no such directory" in capsys.readouterr().err
    not_a_checkpoint = tmp_path / "empty"
    not_a_checkpoint.mkdir()
    assert (
        cli.main(["ope", "--data", str(data), "--checkpoint", str(not_a_checkpoint)])
        == 2
    )
    assert "holds no loadable RLModule" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(
            ["ope", "--data", str(data), "--checkpoint", "x", "--estimators", "magic"]
        )
    assert "choose from is,wis" in capsys.readouterr().err


def test_recorded_action_units_map_to_the_modules(tmp_path):
    from rllib.examples.offline_rl.scripted_continuous_control import (
        record_episodes,
    )
    from rllib.offline.episode_files.action_units import (
        ENV_UNITS,
        NORMALIZED,
        ActionRescaling,
    )

    controller_episodes = record_episodes("pendulum", "expert", 200, seed=3)
    data_action_rescaling = ope_command.data_action_rescaling

    env_dir, norm_dir, hand_dir = (tmp_path / d for d in ("env", "norm", "hand"))
    write_episodes(controller_episodes[:1], str(env_dir))
    write_episodes(controller_episodes[:1], str(norm_dir), action_units=NORMALIZED)
    hand_dir.mkdir()
    write_hand_rolled_files(controller_episodes[:1], hand_dir)
    assert data_action_rescaling([str(env_dir)], NORMALIZED) == ActionRescaling(
        ENV_UNITS, NORMALIZED
    )
    assert data_action_rescaling([str(env_dir)], ENV_UNITS) is None
    assert data_action_rescaling([str(norm_dir)], NORMALIZED) is None
    assert data_action_rescaling([str(hand_dir), str(env_dir)], NORMALIZED) == (
        ActionRescaling(ENV_UNITS, NORMALIZED)
    )
    with pytest.raises(ValueError, match="record different action units"):
        data_action_rescaling([str(env_dir), str(norm_dir)], NORMALIZED)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
