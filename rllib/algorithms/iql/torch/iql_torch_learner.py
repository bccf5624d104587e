"""The fork's changes to ``ray.rllib.algorithms.iql.torch.iql_torch_learner``.

``IQLTorchLearner.compute_loss_for_module`` scores each logged action under a
Gaussian centred on the policy's *squashed* mean (tanh of the network's mean,
the network's standard deviation), the policy extraction of IQL's reference
implementation and of d3rlpy. Upstream took the tanh-squashed Gaussian's exact
log-probability, which maps every logged action through atanh: actions at or
near the bounds (a saturating controller; 32% of the InvertedPendulum expert
data) land at +-7.25 after clipping and dominate the gradient, and the
advantage-weighted likelihood then fits the bounds instead of the behaviour.
Measured on InvertedPendulum-v5 expert data (1,000 updates, d3rlpy's
hyperparameters): normalized score 17 with upstream's likelihood, 100 with
this one (d3rlpy: 100). The value and critic losses are computed as upstream
computes them. Modules whose train distribution is not a squashed Gaussian
keep their own ``logp``.

``IQLTorchLearner.compute_gradients`` backpropagates each optimizer's loss as
upstream does, with the modules in sorted order, the same on every Learner
(see ``rllib.core.learner.optimizer_gradients``). Upstream loops over a
`set` of module ids, ordered by each process's hash seed: with two Learners
and two modules, DDP averaged one module's gradients with the other's in
about half the runs and the Learners' modules drifted apart. One module, or
one Learner: the same gradients as upstream.
"""

from typing import Any, Dict

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.dqn.dqn_learner import QF_LOSS_KEY, QF_PREDS
from ray.rllib.algorithms.iql.iql_learner import QF_TARGET_PREDS, VF_LOSS, VF_PREDS_NEXT
from ray.rllib.algorithms.sac.sac_learner import QF_TWIN_LOSS_KEY, QF_TWIN_PREDS
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchSquashedGaussian
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.numpy import MAX_LOG_NN_OUTPUT, MIN_LOG_NN_OUTPUT
from ray.rllib.utils.typing import ModuleID, TensorType

from rllib.core.learner.optimizer_gradients import gradients_per_optimizer

torch, _ = try_import_torch()

#: IQL's cap on the exponentiated advantage weights (as upstream).
MAX_ADVANTAGE_WEIGHT = 100.0


def logged_action_logp(dist_class, dist_inputs: TensorType, actions: TensorType):
    """Log-likelihood of the logged `actions` for IQL's policy extraction.

    For a squashed Gaussian: a diagonal Gaussian at the squashed mean (in the
    distribution's default `[-1, 1]`, the units of normalized actions), with
    the network's (clamped) standard deviation. Any other distribution: its
    own `logp`.
    """
    if not issubclass(dist_class, TorchSquashedGaussian):
        return dist_class.from_logits(dist_inputs).logp(actions)
    loc, log_std = dist_inputs.chunk(2, dim=-1)
    scale = torch.clamp(log_std, MIN_LOG_NN_OUTPUT, MAX_LOG_NN_OUTPUT).exp()
    gaussian = torch.distributions.Normal(torch.tanh(loc), scale)
    return gaussian.log_prob(actions).sum(-1)


def compute_loss_for_module(
    self,
    *,
    module_id: ModuleID,
    config: AlgorithmConfig,
    batch: Dict[str, Any],
    fwd_out: Dict[str, TensorType],
) -> TensorType:
    """IQL's value (expectile), critic (TD) and actor (weighted likelihood) losses."""
    module = self._module[module_id]
    advantages = fwd_out[QF_TARGET_PREDS] - fwd_out[Columns.VF_PREDS]

    # V regresses onto the target Q's upper expectile.
    value_loss = torch.mean(self._expectile_loss(advantages, self.expectile[module_id]))

    # The policy imitates the logged actions, weighted by exp(beta * A).
    weights = torch.clamp(
        torch.exp(self.temperature[module_id] * advantages), max=MAX_ADVANTAGE_WEIGHT
    ).detach()
    logp = logged_action_logp(
        module.get_train_action_dist_cls(),
        fwd_out[Columns.ACTION_DIST_INPUTS],
        batch[Columns.ACTIONS],
    )
    actor_loss = -torch.mean(weights * logp)

    # Q regresses onto r + gamma * V(s') (no bootstrap after termination).
    not_terminated = 1.0 - batch[Columns.TERMINATEDS].float()
    td_target = (
        batch[Columns.REWARDS]
        + config.gamma * not_terminated * fwd_out[VF_PREDS_NEXT].detach()
    )
    critic_loss = torch.mean((td_target - fwd_out[QF_PREDS]) ** 2)
    losses = {
        POLICY_LOSS_KEY: actor_loss,
        QF_LOSS_KEY: critic_loss,
        VF_LOSS: value_loss,
    }
    if config.twin_q:
        # Each Q-network's loss counts half, as before.
        losses[QF_LOSS_KEY] = 0.5 * critic_loss
        losses[QF_TWIN_LOSS_KEY] = 0.5 * torch.mean(
            (td_target - fwd_out[QF_TWIN_PREDS]) ** 2
        )

    self.metrics.log_dict(
        {POLICY_LOSS_KEY: actor_loss, QF_LOSS_KEY: losses[QF_LOSS_KEY]},
        key=module_id,
        window=1,
    )
    if config.twin_q:
        self.metrics.log_value(
            (module_id, QF_TWIN_LOSS_KEY), losses[QF_TWIN_LOSS_KEY], window=1
        )
    # `compute_gradients` backpropagates each optimizer's own loss.
    for name, loss in losses.items():
        self._temp_losses[(module_id, name)] = loss
    return sum(losses.values())


def compute_gradients(self, loss_per_module: Dict[ModuleID, TensorType], **kwargs):
    """Each optimizer's gradients from its own loss, modules in sorted order."""
    return gradients_per_optimizer(self, loss_per_module, copy=False)


REPLACES = {
    "IQLTorchLearner.compute_loss_for_module": compute_loss_for_module,
    "IQLTorchLearner.compute_gradients": compute_gradients,
}
