"""The fork's changes to ``ray.rllib.algorithms.marwil.torch.marwil_torch_learner``.

MARWIL weighs each logged action's log-likelihood by
``exp(beta * A / c)``, where ``c`` is the root of a moving average of the
squared advantages. Upstream starts that average at 100 and moves it at rate
1e-8 per loss call, so ``c`` stays 10 whatever the reward scale: with
rewards in the thousands every weight overflows to ``inf``, with rewards
below 0.1 every weight is 1 (plain BC).

- ``MARWILTorchLearner.compute_losses``: updates the average once per train
  (mini)batch, before the loss, from the value pass that produced the
  batch's value targets (``vf_preds``). The first update takes the batch's
  value; later ones move at ``moving_average_sqd_adv_norm_update_rate``
  (the fork's default, 0.05, follows the advantages as the value function
  learns). ``c`` therefore tracks the scale of the advantages.
- ``MARWILTorchLearner.compute_loss_for_module``: the same loss as upstream,
  except that it reads the average without changing it (a loss called
  directly, as in an offline evaluation runner, uses the current value, or
  ``moving_average_sqd_adv_norm_start`` before any update), clips the
  exponent at :data:`MAX_EXPONENT` so no weight overflows, and adds value
  targets from the row's inputs when the batch has none yet
  (``rllib.core.learner.value_targets``).
"""

from typing import Any, Dict, Optional

import torch
from ray.rllib.algorithms.marwil.marwil import MARWILConfig
from ray.rllib.algorithms.marwil.marwil_learner import (
    LEARNER_RESULTS_MOVING_AVG_SQD_ADV_NORM_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
)
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance
from ray.rllib.utils.typing import ModuleID, TensorType

from rllib.core.learner.value_targets import add_value_targets, has_value_target_inputs

#: Largest exponent of a MARWIL weight (``exp(20)`` is about 4.9e8): a guard
#: against overflow, far above what normalized advantages reach.
MAX_EXPONENT = 20.0


def compute_losses(self, *, fwd_out: Dict[str, Any], batch: Dict[str, Any]):
    """Updates each module's advantage normalizer, then computes the losses."""
    for module_id, module_batch in batch.items():
        _update_advantage_normalizer(self, module_id, module_batch)
    return _upstream_compute_losses(self, fwd_out=fwd_out, batch=batch)


def _update_advantage_normalizer(learner, module_id: ModuleID, module_batch) -> None:
    config = learner.config.get_config_for_module(module_id)
    if (
        config.beta == 0.0
        or Postprocessing.VALUE_TARGETS not in module_batch
        or Columns.VF_PREDS not in module_batch
    ):
        return
    advantages = module_batch[Postprocessing.VALUE_TARGETS] - module_batch[
        Columns.VF_PREDS
    ].to(module_batch[Postprocessing.VALUE_TARGETS].dtype)
    squared = _masked_mean(advantages.detach() ** 2, module_batch)
    updates = learner.__dict__.setdefault("_advantage_normalizer_updates", {})
    norms = learner.moving_avg_sqd_adv_norms_per_module
    if not updates.get(module_id):
        norms[module_id] = squared
    else:
        rate = config.moving_average_sqd_adv_norm_update_rate
        norms[module_id] = norms[module_id] + rate * (squared - norms[module_id])
    updates[module_id] = updates.get(module_id, 0) + 1


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
        vf_loss = 0.0
        weights = 1.0
    else:
        if Postprocessing.VALUE_TARGETS not in batch and has_value_target_inputs(batch):
            add_value_targets(module, batch)
        values = module.compute_values(
            batch, embeddings=fwd_out.get(Columns.EMBEDDINGS)
        )
        advantages = batch[Postprocessing.VALUE_TARGETS] - values
        advantages_squared = mean(advantages**2)
        vf_loss = 0.5 * advantages_squared
        norm = _current_norm(self, module_id, config, like=advantages)
        exponent = config.beta * advantages / (1e-8 + norm.sqrt())
        weights = torch.exp(exponent.clamp(max=MAX_EXPONENT)).detach()

    log_std_term = 0.0
    if config.bc_logstd_coeff > 0.0:
        log_std_term = config.bc_logstd_coeff * mean(action_dist.log_std, dim=1)
    policy_loss = -mean(weights * (log_probs + log_std_term))
    total_loss = policy_loss + config.vf_coeff * vf_loss

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
            },
            key=module_id,
            window=1,
        )
    return total_loss


def _current_norm(learner, module_id, config, like: torch.Tensor) -> torch.Tensor:
    """The normalizer's value; its configured start where none is kept.

    Offline evaluation runners borrow this loss but keep no normalizer.
    """
    norms = getattr(learner, "moving_avg_sqd_adv_norms_per_module", None)
    if norms is not None:
        norm = norms[module_id]
    else:
        norm = config.moving_average_sqd_adv_norm_start
    return torch.as_tensor(norm, dtype=like.dtype, device=like.device)


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


def _masked_mean(values: torch.Tensor, module_batch) -> torch.Tensor:
    if Columns.LOSS_MASK in module_batch:
        mask = module_batch[Columns.LOSS_MASK].bool()
        return values[mask].sum() / mask.sum().clamp(min=1)
    return values.mean()


def _upstream_compute_losses(self, *, fwd_out, batch):
    from ray.rllib.algorithms.marwil.torch.marwil_torch_learner import (
        MARWILTorchLearner,
    )

    return super(MARWILTorchLearner, self).compute_losses(fwd_out=fwd_out, batch=batch)


#: Upstream names in ``ray.rllib.algorithms.marwil.torch.marwil_torch_learner``
#: that this module replaces.
REPLACES = {
    "MARWILTorchLearner.compute_losses": compute_losses,
    "MARWILTorchLearner.compute_loss_for_module": compute_loss_for_module,
}
