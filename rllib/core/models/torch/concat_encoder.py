"""An MLP encoder over several input columns joined along the feature axis.

``TorchConcatMLPEncoder`` concatenates ``inputs[key]`` for each key of its
config's ``input_keys`` (in that order) and runs one MLP on the result. The
SAC family (SAC, CQL, IQL) uses it for the Q-function when a model config sets
``qf_concat_obs_actions``: Q(s, a) = MLP([s, a]), the critic of the SAC, CQL
and IQL papers and of d3rlpy and CORL. RLlib's default Q-encoder instead runs
separate observation and action MLPs and fuses them with further layers
(``MultiStreamEncoderConfig``), about four times the compute per sample at
`fcnet_hiddens=[256, 256]`.
"""

from dataclasses import dataclass
from typing import Sequence

from ray.rllib.core.columns import Columns
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.core.models.configs import MLPEncoderConfig
from ray.rllib.core.models.torch.encoder import TorchMLPEncoder
from ray.rllib.utils.framework import try_import_torch

torch, _ = try_import_torch()


@dataclass
class ConcatMLPEncoderConfig(MLPEncoderConfig):
    """An `MLPEncoderConfig` whose input is several 1D columns, concatenated.

    `input_dims` is the sum of the columns' sizes.
    """

    input_keys: Sequence[str] = (Columns.OBS, Columns.ACTIONS)

    def build(self, framework: str = "torch") -> "TorchConcatMLPEncoder":
        if framework != "torch":
            raise ValueError(
                f"ConcatMLPEncoderConfig builds torch encoders only; got "
                f"framework={framework!r}."
            )
        self._validate(framework)
        return TorchConcatMLPEncoder(self)


class TorchConcatMLPEncoder(TorchMLPEncoder):
    """Runs the MLP on `torch.cat([inputs[k] for k in input_keys], dim=-1)`."""

    def _forward(self, inputs: dict, **kwargs) -> dict:
        joined = torch.cat([inputs[key] for key in self.config.input_keys], dim=-1)
        return {ENCODER_OUT: self.net(joined)}
