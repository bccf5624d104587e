"""The fork's changes to ``ray.rllib.algorithms.marwil.torch.marwil_torch_learner``.

MARWIL weighs each logged action's log-likelihood by
``exp(beta * A / c)``, where ``c`` is the root of a moving average of the
squared advantages. Upstream starts that average at 100 and moves it at rate
1e-8 per loss call, so ``c`` stays 10 whatever the reward scale: with
rewards in the thousands every weight overflows to ``inf``, with rewards
below 0.1 every weight is 1 (plain BC).

- ``MARWILTorchLearner.compute_losses``: updates MARWIL's statistics once
  per train (mini)batch, before the loss, from the value pass that produced
  the batch's value targets (``vf_preds``; the module's values where the
  targets came with the data); see
  ``rllib.algorithms.marwil.torch.advantage_statistics`` (shared by all
  Learners, checkpointed). At the configured rate (the fork's default 0.05,
  see ``rllib.algorithms.marwil.marwil``) ``c`` tracks the scale of the
  advantages.
- ``MARWILTorchLearner.compute_loss_for_module``: the same loss as upstream,
  except that it reads the average without changing it (a loss called
  directly, as in an offline evaluation runner, uses the current value, or
  before any update the configured start, or the batch's own mean squared
  advantage where the average starts from the data), clips the
  exponent at :data:`MAX_EXPONENT` so no weight overflows, divides the value
  loss by the value-target scale (the moving average of squared value
  targets: the fork's targets are real discounted returns, and unscaled
  their gradient would dominate the trunk that the value head shares with
  the policy by default; before the first update the loss is upstream's),
  and adds value targets from the row's inputs when
  the batch has none yet (``rllib.core.learner.value_targets``). The logged
  ``vf_loss`` is upstream's unscaled ``0.5 * mean(A**2)``.
- ``MARWILTorchLearner.get_state`` / ``set_state``: save and restore the
  statistics under an extra key, which upstream's ``Learner.set_state``
  ignores (fork checkpoints load upstream; upstream checkpoints load here,
  the statistics then start fresh).
"""

from typing import Any, Dict, Optional

from ray.rllib.algorithms.marwil.marwil import MARWILConfig
from ray.rllib.algorithms.marwil.marwil_learner import (
    LEARNER_RESULTS_MOVING_AVG_SQD_ADV_NORM_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
)
from ray.rllib.core import COMPONENT_OPTIMIZER
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.torch_utils import explained_variance
from ray.rllib.utils.typing import TensorType

from rllib.algorithms.marwil.torch import advantage_statistics
from rllib.core.learner.value_targets import add_value_targets, has_value_target_inputs

torch, _ = try_import_torch()

#: The metric that reports the value loss's divisor (see `compute_loss_for_module`).
VALUE_TARGET_SCALE_KEY = "value_target_scale"

#: Largest exponent of a MARWIL weight (``exp(20)`` is about 4.9e8): a guard
#: against overflow, far above what normalized advantages reach.
MAX_EXPONENT = 20.0


def compute_losses(self, *, fwd_out: Dict[str, Any], batch: Dict[str, Any]):
    """Updates MARWIL's statistics from the batch, then computes the losses."""
    advantage_statistics.update(self, batch, fwd_out)
    return _super(self).compute_losses(fwd_out=fwd_out, batch=batch)


def compute_loss_for_module(
    self,
    *,
    module_id: str,
    config: Optional[MARWILConfig] = None,
    batch: Dict[str, Any],
    fwd_out: Dict[str, TensorType],
) -> TensorType:
    """MARWIL's loss (BC when ``beta == 0``) for one module's batch."""
    module = self.module[module_id].unwrapped()
    mean = _masked_mean_fn(batch, burnin_len=self.config.burnin_len)

    action_dist = module.get_train_action_dist_cls().from_logits(
        fwd_out[Columns.ACTION_DIST_INPUTS]
    )
    log_probs = action_dist.logp(batch[Columns.ACTIONS])

    if config.beta == 0.0:
        vf_loss, scale = 0.0, 1.0
        weights = 1.0
    else:
        if Postprocessing.VALUE_TARGETS not in batch and has_value_target_inputs(batch):
            add_value_targets(module, batch)
        values = module.compute_values(
            batch, embeddings=fwd_out.get(Columns.EMBEDDINGS)
        )
        targets = batch[Postprocessing.VALUE_TARGETS]
        advantages = targets - values
        vf_loss = 0.5 * mean(advantages**2)
        scale = _value_target_scale(self, module_id, targets)
        norm = _current_norm(self, module_id, config, advantages, mean)
        exponent = config.beta * advantages / (1e-8 + norm.sqrt())
        weights = torch.exp(exponent.clamp(max=MAX_EXPONENT)).detach()

    log_std_term = 0.0
    if config.bc_logstd_coeff > 0.0:
        log_std_term = config.bc_logstd_coeff * mean(action_dist.log_std, dim=1)
    policy_loss = -mean(weights * (log_probs + log_std_term))
    total_loss = policy_loss + config.vf_coeff * vf_loss / scale

    if config.beta == 0.0:
        self.metrics.log_value((module_id, POLICY_LOSS_KEY), policy_loss, window=1)
    else:
        self.metrics.log_dict(
            {
                POLICY_LOSS_KEY: policy_loss,
                VF_LOSS_KEY: vf_loss,
                LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY: explained_variance(
                    batch[Postprocessing.VALUE_TARGETS], values
                ),
                LEARNER_RESULTS_MOVING_AVG_SQD_ADV_NORM_KEY: norm,
                VALUE_TARGET_SCALE_KEY: scale,
            },
            key=module_id,
            window=1,
        )
    return total_loss


def _current_norm(learner, module_id, config, advantages, mean) -> "torch.Tensor":
    """The normalizer's value, read without moving it.

    Before the first update (and in offline evaluation runners, which borrow
    this loss but keep no normalizer) it is the configured start, or the
    batch's own mean squared advantage where the average starts from the
    data.
    """
    norms = getattr(learner, "moving_avg_sqd_adv_norms_per_module", None)
    if norms is not None and module_id in norms:
        norm = norms[module_id]
    elif advantage_statistics.starts_from_data(config):
        norm = mean(advantages.detach() ** 2)
    else:
        norm = config.moving_average_sqd_adv_norm_start
    return torch.as_tensor(norm, dtype=advantages.dtype, device=advantages.device)


def _value_target_scale(learner, module_id, targets) -> "torch.Tensor":
    """The value loss's divisor: the kept scale (never below 1e-8), else 1.

    Before the first update, and in offline evaluation runners (which borrow
    this loss but keep no statistics), the value loss is unscaled.
    """
    scales = learner.__dict__.get("_value_target_scales", {})
    if module_id not in scales:
        return torch.ones((), device=targets.device, dtype=targets.dtype)
    scale = scales[module_id].to(device=targets.device, dtype=targets.dtype)
    return scale.clamp(min=1e-8)


def _masked_mean_fn(batch, burnin_len: int):
    """A mean over the steps the loss uses (``loss_mask`` minus the burn-in)."""
    if Columns.LOSS_MASK not in batch:
        return torch.mean
    mask = batch[Columns.LOSS_MASK].clone()
    if burnin_len > 0:
        mask[:, :burnin_len] = False
    num_valid = torch.sum(mask)

    def mean(data, dim=None):
        return torch.sum(data[mask]) / num_valid

    return mean


def _super(learner):
    """`super()` of `MARWILTorchLearner` for `learner` (the methods it inherits)."""
    from ray.rllib.algorithms.marwil.torch.marwil_torch_learner import (
        MARWILTorchLearner,
    )

    return super(MARWILTorchLearner, learner)


def get_state(self, components=None, *, not_components=None, **kwargs):
    """The Learner's state plus MARWIL's statistics."""
    state = _super(self).get_state(components, not_components=not_components, **kwargs)
    key = advantage_statistics.STATE_KEY
    if self._check_component(key, components, not_components):
        state[key] = advantage_statistics.get_state(self)
    return state


def set_state(self, state) -> None:
    """The Learner's `set_state`, then MARWIL's statistics (fresh if absent)."""
    _super(self).set_state(state)
    advantage_statistics.set_state(
        self, state, full_restore=COMPONENT_OPTIMIZER in state
    )


#: Upstream names in ``ray.rllib.algorithms.marwil.torch.marwil_torch_learner``
#: that this module replaces.
REPLACES = {
    "MARWILTorchLearner.compute_losses": compute_losses,
    "MARWILTorchLearner.compute_loss_for_module": compute_loss_for_module,
    "MARWILTorchLearner.get_state": get_state,
    "MARWILTorchLearner.set_state": set_state,
}
