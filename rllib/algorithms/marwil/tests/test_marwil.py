"""MARWIL, BC and IQL keep upstream's config defaults and module layout, except
the advantage normalizer's two defaults (`rllib.algorithms.marwil.marwil`)."""

import sys

import pytest

from rllib._fork.tests.differential import assert_same, run_in_both_modes

_SCENARIO = """
import re
import gymnasium as gym
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.iql import IQLConfig
from ray.rllib.algorithms.marwil import MARWILConfig

env = gym.make("CartPole-v1")
result = {}
for name, config in (
    ("marwil", MARWILConfig()),
    ("marwil_beta_1", MARWILConfig().training(beta=1.0)),
    ("bc", BCConfig()),
    ("iql", IQLConfig()),
):
    spec = config.get_default_rl_module_spec()
    spec.observation_space = env.observation_space
    spec.action_space = env.action_space
    spec.model_config = config.model_config
    parameters = None
    if name != "iql":  # IQL's module needs a continuous action space.
        parameters = [
            [key, list(value.shape)]
            for key, value in spec.build().state_dict().items()
        ]
    result[name] = {
        "config": {
            key: re.sub(" at 0x[0-9a-f]+", "", repr(value))
            for key, value in config.to_dict().items()
        },
        "parameters": parameters,
    }
emit(result)
"""


@pytest.mark.timeout(180)
def test_configs_and_module_layouts_are_upstreams():
    upstream, fork = run_in_both_modes(_SCENARIO, timeout=150)
    # MARWILConfig's normalizer defaults differ (BC and IQL inherit them and
    # do not use them).
    for name in ("marwil", "marwil_beta_1", "bc", "iql"):
        for mode, rate, start in ((upstream, "1e-08", "100.0"), (fork, "0.05", "0.0")):
            config = mode[name]["config"]
            assert config.pop("moving_average_sqd_adv_norm_update_rate") == rate
            assert config.pop("moving_average_sqd_adv_norm_start") == start
    assert_same(upstream, fork)
    # Upstream's layout: one encoder that the value head shares.
    keys = [key for key, _ in fork["marwil_beta_1"]["parameters"]]
    assert not any("critic_encoder" in key for key in keys), keys


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
