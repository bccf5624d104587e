"""MARWIL's running statistics, shared by all Learners and checkpointed.

Per module with ``beta > 0`` a MARWIL Learner keeps

- the moving average of squared advantages (the Learner's
  ``moving_avg_sqd_adv_norms_per_module``), whose root ``c`` normalizes the
  advantages in the weights ``exp(beta * A / c)``;
- the value-target scale: a moving average of squared value targets, which
  divides the value loss, so the value head's gradient through a trunk
  shared with the policy stays of the policy's order whatever the size of
  the returns.

Both start from the first train batch's value and then move at
:func:`update_rate` per update. With several Learners (DDP) the batch sums
are all-reduced before the update, so every Learner holds the same values.
They are saved in the Learner's state under :data:`STATE_KEY`, which
``Learner.set_state`` ignores; a state without it (a checkpoint saved by
RLlib 2.60) starts them fresh and logs that.
"""

import logging
from typing import Any, Dict

from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.framework import try_import_torch

torch, _ = try_import_torch()

logger = logging.getLogger("ray." + __name__)

#: The rate used where ``moving_average_sqd_adv_norm_update_rate``
#: keeps ``MARWILConfig``'s default.
ADVANTAGE_NORM_UPDATE_RATE = 0.05

#: ``MARWILConfig``'s default ``moving_average_sqd_adv_norm_update_rate``: with a
#: data-initialized average it would freeze the first batch's value.
UPSTREAM_DEFAULT_UPDATE_RATE = 1e-8

#: The key of these statistics in the Learner's state.
STATE_KEY = "marwil_advantage_statistics"

_NORM, _SCALE, _UPDATES = "moving_avg_sqd_adv_norm", "value_target_scale", "updates"


def update_rate(config) -> float:
    """The rate the statistics move at: the configured one, or the default."""
    rate = config.moving_average_sqd_adv_norm_update_rate
    return ADVANTAGE_NORM_UPDATE_RATE if rate == UPSTREAM_DEFAULT_UPDATE_RATE else rate


def marwil_module_ids(learner):
    """The learner's modules that MARWIL (``beta > 0``) trains, sorted."""
    return sorted(
        module_id
        for module_id in learner.module.keys()
        if learner.config.get_config_for_module(module_id).beta > 0.0
    )


def value_target_scales(learner) -> Dict[str, "torch.Tensor"]:
    """Module id -> the moving average of squared value targets.

    Kept as `learner._value_target_scales`, created on first use."""
    return learner.__dict__.setdefault("_value_target_scales", {})


def _updates(learner) -> Dict[str, int]:
    return learner.__dict__.setdefault("_advantage_statistics_updates", {})


def update(learner, batch) -> None:
    """Moves each MARWIL module's statistics by one train batch.

    Every Learner calls this once per update with the same modules in the
    same order (zeros where its batch lacks a module), so the single
    all-reduce matches across a DDP group.
    """
    module_ids = marwil_module_ids(learner)
    if not module_ids:
        return
    sums = torch.zeros((len(module_ids), 3), device=learner._device)
    for i, module_id in enumerate(module_ids):
        module_batch = batch.get(module_id) if hasattr(batch, "get") else None
        if (
            module_batch is None
            or Postprocessing.VALUE_TARGETS not in module_batch
            or Columns.VF_PREDS not in module_batch
        ):
            continue
        targets = module_batch[Postprocessing.VALUE_TARGETS].detach().float()
        advantages = targets - module_batch[Columns.VF_PREDS].detach().float()
        if Columns.LOSS_MASK in module_batch:
            mask = module_batch[Columns.LOSS_MASK].bool()
            targets, advantages = targets[mask], advantages[mask]
        sums[i] = torch.stack(
            [
                (advantages**2).sum(),
                (targets**2).sum(),
                torch.tensor(float(targets.numel()), device=targets.device),
            ]
        ).to(sums.device)
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(sums)
    norms = learner.moving_avg_sqd_adv_norms_per_module
    scales = value_target_scales(learner)
    updates = _updates(learner)
    for module_id, (sqd_advantages, sqd_targets, count) in zip(module_ids, sums):
        if count <= 0:
            continue
        sqd_advantages, sqd_targets = sqd_advantages / count, sqd_targets / count
        if not updates.get(module_id):
            norms[module_id], scales[module_id] = sqd_advantages, sqd_targets
        else:
            rate = update_rate(learner.config.get_config_for_module(module_id))
            norms[module_id] = norms[module_id] + rate * (
                sqd_advantages - norms[module_id]
            )
            scales[module_id] = scales[module_id] + rate * (
                sqd_targets - scales[module_id]
            )
        updates[module_id] = updates.get(module_id, 0) + 1


def get_state(learner) -> Dict[str, Dict[str, Any]]:
    """The statistics of every module that has been updated, as plain numbers."""
    norms = learner.moving_avg_sqd_adv_norms_per_module
    scales = value_target_scales(learner)
    return {
        module_id: {
            _NORM: float(norms[module_id]),
            _SCALE: float(scales[module_id]),
            _UPDATES: int(count),
        }
        for module_id, count in _updates(learner).items()
        if count and module_id in scales
    }


def set_state(learner, state: Dict[str, Any], *, full_restore: bool) -> None:
    """Restores the statistics from a Learner state.

    Args:
        learner: The MARWIL Learner.
        state: The Learner's state dict, as ``Learner.get_state`` returns it.
        full_restore: Whether `state` is a whole Learner state (a checkpoint,
            with optimizer state), not just weights; only then a missing
            entry resets the statistics.
    """
    saved = state.get(STATE_KEY)
    if saved is None:
        if full_restore and marwil_module_ids(learner):
            _updates(learner).clear()
            logger.warning(
                "The Learner state has no MARWIL advantage statistics (a "
                "checkpoint saved before these statistics existed): "
                "they start fresh from the next train batch."
            )
        return
    norms = learner.moving_avg_sqd_adv_norms_per_module
    scales = value_target_scales(learner)
    updates = _updates(learner)
    for module_id, values in saved.items():
        norms[module_id] = learner._get_tensor_variable(values[_NORM])
        scales[module_id] = learner._get_tensor_variable(values[_SCALE])
        updates[module_id] = int(values[_UPDATES])
