"""The fork's changes to ``ray.rllib.algorithms.iql.torch.default_iql_torch_rl_module``.

``DefaultIQLTorchRLModule._forward_train`` runs only the passes IQL's loss
reads: the policy on the observations, both Q-networks and both target
Q-networks on the logged actions, and the value network on the observations
and next observations. Upstream ran SAC's whole train pass first, which also
samples policy actions at the observations and next observations and scores
them with the Q-networks and target Q-networks: four more Q passes, a second
policy pass and their backward graph, none of which IQL's loss uses. The
target Q-values and next values are computed without a graph (the loss uses
them as constants). The outputs IQL's loss reads are the same values.
"""

from typing import Any, Dict

import gymnasium as gym
from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.algorithms.iql.iql_learner import QF_TARGET_PREDS, VF_PREDS_NEXT
from ray.rllib.algorithms.sac.sac_learner import QF_TWIN_PREDS
from ray.rllib.core.columns import Columns
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.utils.framework import try_import_torch

torch, _ = try_import_torch()


def _forward_train(self, batch: Dict[str, Any], **kwargs) -> Dict[str, Any]:
    """The policy's inputs, Q(s, a), target min-Q(s, a), V(s) and V(s')."""
    if not isinstance(self.action_space, gym.spaces.Box):
        raise ValueError(
            f"IQL needs a continuous (Box) action space; got {self.action_space}."
        )
    logged = {Columns.OBS: batch[Columns.OBS], Columns.ACTIONS: batch[Columns.ACTIONS]}
    encoded = self.pi_encoder({Columns.OBS: batch[Columns.OBS]})[ENCODER_OUT]
    output = {
        Columns.ACTION_DIST_INPUTS: self.pi(encoded),
        QF_PREDS: self._qf_forward_train_helper(logged, self.qf_encoder, self.qf),
        Columns.VF_PREDS: self.compute_values(logged),
    }
    if self.twin_q:
        output[QF_TWIN_PREDS] = self._qf_forward_train_helper(
            logged, self.qf_twin_encoder, self.qf_twin
        )
    with torch.no_grad():
        target = self._qf_forward_train_helper(
            logged, self.target_qf_encoder, self.target_qf
        )
        if self.twin_q:
            target = torch.min(
                target,
                self._qf_forward_train_helper(
                    logged, self.target_qf_twin_encoder, self.target_qf_twin
                ),
            )
        output[QF_TARGET_PREDS] = target
        output[VF_PREDS_NEXT] = self.compute_values(
            {Columns.OBS: batch[Columns.NEXT_OBS]}
        )
    return output


REPLACES = {
    "DefaultIQLTorchRLModule._forward_train": _forward_train,
}
