"""The fork's changes to ``ray.rllib.algorithms.sac.sac_catalog``.

``SACCatalog.build_qf_encoder`` builds, for a Box action space and a model
config with ``"qf_concat_obs_actions": True``, a Q-encoder that is one MLP over
the concatenated observation and action (``fcnet_hiddens``,
``fcnet_activation``), as in the SAC, CQL and IQL papers, d3rlpy and CORL.
Without the key (the default) it builds upstream's encoders: for Box actions a
multi-stream encoder (an observation MLP, an action MLP and fusion layers), for
Discrete actions the policy's encoder. SAC, CQL and IQL all build their
Q-networks here.

The key is read from a dict model config, e.g.
``config.rl_module(model_config={"fcnet_hiddens": [256, 256],
"fcnet_activation": "relu", "qf_concat_obs_actions": True})``. It needs a
1D Box observation space.
"""

import dataclasses

import gymnasium as gym
from ray.rllib.core.columns import Columns
from ray.rllib.core.models.base import Encoder
from ray.rllib.core.models.configs import MLPEncoderConfig

from rllib.core.models.torch.concat_encoder import ConcatMLPEncoderConfig

#: The model-config key that selects the concatenated-input Q-encoder.
QF_CONCAT_OBS_ACTIONS = "qf_concat_obs_actions"


def build_qf_encoder(self, framework: str) -> Encoder:
    """The Q-function's encoder: concatenated (s, a) if configured, else SAC's."""
    if isinstance(self.action_space, gym.spaces.Box):
        if self._model_config_dict.get(QF_CONCAT_OBS_ACTIONS, False):
            self.qf_encoder_config = _concat_qf_encoder_config(self)
            return self.qf_encoder_config.build(framework=framework)
        return self._build_qf_encoder_continuous(framework=framework)
    if isinstance(self.action_space, gym.spaces.Discrete):
        return self._build_qf_encoder_discrete(framework=framework)
    self._raise_unsupported_action_space_error()


def _concat_qf_encoder_config(catalog) -> ConcatMLPEncoderConfig:
    """The policy encoder's MLP, widened to take [obs, actions] as input."""
    obs_space, action_space = catalog.observation_space, catalog.action_space
    base = catalog._encoder_config
    if (
        not isinstance(obs_space, gym.spaces.Box)
        or len(obs_space.shape) != 1
        or len(action_space.shape) != 1
        or type(base) is not MLPEncoderConfig
    ):
        raise ValueError(
            f"`{QF_CONCAT_OBS_ACTIONS}` needs 1D Box observations and actions "
            f"(an MLP encoder); got observation space {obs_space} and action "
            f"space {action_space}. Remove `{QF_CONCAT_OBS_ACTIONS}` from the "
            "model config to use the multi-stream Q-encoder."
        )
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    fields["input_dims"] = (obs_space.shape[0] + action_space.shape[0],)
    return ConcatMLPEncoderConfig(**fields, input_keys=(Columns.OBS, Columns.ACTIONS))


REPLACES = {
    "SACCatalog.build_qf_encoder": build_qf_encoder,
}
