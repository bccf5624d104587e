"""IQLConfig's validation: IQL's `beta` (an inverse temperature) may exceed 1,
MARWIL's other checks still run, IQL's own ranges still hold."""

import gymnasium as gym
import pytest
from ray.rllib.algorithms.iql import IQLConfig

ENV = gym.make("Pendulum-v1")


def config(**offline):
    offline.setdefault("dataset_num_iters_per_learner", 1)
    return (
        IQLConfig()
        .environment(
            "Pendulum-v1",
            observation_space=ENV.observation_space,
            action_space=ENV.action_space,
        )
        .offline_data(input_=["/tmp/unused"], **offline)
    )


@pytest.mark.parametrize("beta", [0.1, 1.0, 3.0, 10.0])
def test_the_papers_temperatures_validate_and_are_kept(beta):
    cfg = config().training(beta=beta)
    cfg.validate()
    assert cfg.beta == beta


@pytest.mark.parametrize("beta", [0.0, -2.0])
def test_beta_must_be_positive(beta):
    with pytest.raises(ValueError, match="beta"):
        config().training(beta=beta).validate()


@pytest.mark.parametrize("expectile", [0.0, 1.0, 1.5])
def test_expectile_must_lie_in_the_open_unit_interval(expectile):
    with pytest.raises(ValueError, match="expectile"):
        config().training(expectile=expectile).validate()


def test_marwils_other_checks_still_run():
    with pytest.raises(ValueError, match="dataset_num_iters_per_learner"):
        config(dataset_num_iters_per_learner=None).training(beta=3.0).validate()


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
