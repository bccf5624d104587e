"""The fork's change to ``ray.rllib.algorithms.sac.torch.sac_torch_learner``.

- ``SACTorchLearner.get_state`` / ``set_state``: the entropy temperature
  (``curr_log_alpha``, one trainable tensor per module) is part of the
  Learner's state, under :data:`LOG_ALPHA_KEY`. Ray 2.60 saves the
  temperature optimizer's moments but not the temperature, so a SAC, CQL or
  TQC Learner restored from a checkpoint went on from ``initial_alpha``. The
  values are restored in place: the temperature's optimizer keeps its
  parameter. A state without them (a checkpoint of ray 2.60) leaves the
  temperature as it is; ray 2.60 ignores the extra key.
"""

from typing import Dict

import numpy as np
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.typing import ModuleID, TensorType

torch, _ = try_import_torch()

#: The key of the entropy temperatures in the Learner's state.
LOG_ALPHA_KEY = "curr_log_alpha"


def variables_state(variables: Dict[ModuleID, TensorType]) -> Dict[str, np.ndarray]:
    """Module id -> a copy of the learned variable's value, on the CPU."""
    return {
        module_id: variable.detach().cpu().numpy().copy()
        for module_id, variable in variables.items()
    }


def restore_variables(
    variables: Dict[ModuleID, TensorType], saved: Dict[str, np.ndarray]
) -> None:
    """Copies saved values into the Learner's variables of the same modules,
    in place, so that the optimizers that train them keep their parameters."""
    for module_id, value in saved.items():
        if module_id not in variables:
            continue
        variable = variables[module_id]
        with torch.no_grad():
            variable.copy_(
                torch.as_tensor(value, dtype=variable.dtype, device=variable.device)
            )


def get_state(self, components=None, *, not_components=None, **kwargs):
    """The Learner's state plus every module's entropy temperature."""
    state = _super(self).get_state(components, not_components=not_components, **kwargs)
    if self._check_component(LOG_ALPHA_KEY, components, not_components):
        state[LOG_ALPHA_KEY] = variables_state(self.curr_log_alpha)
    return state


def set_state(self, state) -> None:
    """The Learner's `set_state`, then the entropy temperatures it carries."""
    _super(self).set_state(state)
    if LOG_ALPHA_KEY in state:
        restore_variables(self.curr_log_alpha, state[LOG_ALPHA_KEY])


def _super(learner):
    """`super()` of `SACTorchLearner` for `learner` (the methods it inherits)."""
    from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner

    return super(SACTorchLearner, learner)


#: Upstream names in ``ray.rllib.algorithms.sac.torch.sac_torch_learner`` that
#: this module replaces.
REPLACES = {
    "SACTorchLearner.get_state": get_state,
    "SACTorchLearner.set_state": set_state,
}
