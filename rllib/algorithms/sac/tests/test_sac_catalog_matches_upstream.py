"""Without `qf_concat_obs_actions` the fork's `SACCatalog.build_qf_encoder`
builds upstream's Q-encoders: the same layers and, seeded, the same weights."""

import gymnasium as gym
import numpy as np
import pytest
import ray.rllib.algorithms.sac.sac_catalog as sac_catalog
import torch

from rllib._fork import overlay

UPSTREAM = overlay.ORIGINALS[
    ("ray.rllib.algorithms.sac.sac_catalog", "SACCatalog.build_qf_encoder")
]
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)


@pytest.mark.parametrize(
    "action_space",
    [gym.spaces.Box(-2.0, 2.0, (2,), np.float32), gym.spaces.Discrete(3)],
)
@pytest.mark.parametrize("model_config", [{}, {"qf_concat_obs_actions": False}])
def test_default_q_encoders_are_upstreams(action_space, model_config):
    model_config = {"fcnet_hiddens": [32, 16]} | model_config
    catalog = sac_catalog.SACCatalog(OBS_SPACE, action_space, model_config)
    assert catalog.build_qf_encoder is not UPSTREAM
    torch.manual_seed(0)
    fork = catalog.build_qf_encoder(framework="torch")
    torch.manual_seed(0)
    upstream = UPSTREAM(catalog, framework="torch")
    assert type(fork) is type(upstream)
    fork_state, upstream_state = fork.state_dict(), upstream.state_dict()
    assert list(fork_state) == list(upstream_state) and fork_state
    for key, value in upstream_state.items():
        assert torch.equal(fork_state[key], value), key


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
