"""The fork's change to ``ray.rllib.algorithms.cql.torch.default_cql_torch_rl_module``.

CQL's penalty scores random actions (the "mu" distribution of Kumar et al.,
2020) next to the policy's own. The policy is a squashed Gaussian on
[-1, 1] per dimension (the EnvRunner maps it onto the action box), and the
logged actions reach the module in those units too, but upstream drew the
random actions uniformly from the action box itself: on Pendulum's [-2, 2]
half of them lay where neither the policy nor the data ever acts, and the
learner's density for them, (1/2)^d, was that of [-1, 1].

``DefaultCQLTorchRLModule._repeat_actions`` maps the random actions it is
given (drawn uniformly on the box by ``_forward_train``) affinely onto
[-1, 1]: uniform stays uniform, on the range the policy acts in, and the
learner's density is right for every box. [-1, 1] boxes are left as they are.
"""

from typing import Dict, Optional

import numpy as np
from ray.rllib.algorithms.cql.torch.default_cql_torch_rl_module import (
    DefaultCQLTorchRLModule,
)
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.typing import TensorType

torch, _ = try_import_torch()

_upstream_repeat_actions = DefaultCQLTorchRLModule._repeat_actions


def _repeat_actions(
    self, obs: TensorType, actions: Optional[TensorType] = None
) -> Dict[str, TensorType]:
    """Upstream's repeated forward pass; given (random) actions are first
    mapped from the action box onto [-1, 1]."""
    box = self.action_space
    if actions is not None and not (
        np.all(box.low == -1.0) and np.all(box.high == 1.0)
    ):
        low = torch.as_tensor(
            self.action_space.low, dtype=actions.dtype, device=actions.device
        )
        high = torch.as_tensor(
            self.action_space.high, dtype=actions.dtype, device=actions.device
        )
        actions = 2.0 * (actions - low) / (high - low) - 1.0
    return _upstream_repeat_actions(self, obs, actions)


REPLACES = {
    "DefaultCQLTorchRLModule._repeat_actions": _repeat_actions,
}
