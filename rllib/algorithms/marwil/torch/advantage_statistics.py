"""MARWIL's running statistics, shared by all Learners and checkpointed.

Per module with ``beta > 0`` a MARWIL Learner keeps

- the moving average of squared advantages (the Learner's
  ``moving_avg_sqd_adv_norms_per_module``), whose root ``c`` normalizes the
  advantages in the weights ``exp(beta * A / c)``;
- the value-target scale: a moving average of squared value targets, which
  divides the value loss, so the value head's gradient through a trunk
  shared with the policy stays of the policy's order whatever the size of
  the returns.

Both move once per train batch at the configured
``moving_average_sqd_adv_norm_update_rate``. The advantage average starts at
``moving_average_sqd_adv_norm_start``; a start of 0 (:data:`START_FROM_DATA`:
no scale at all) takes the first train batch's value instead. The value-target
scale always starts from the first batch. With several Learners (DDP) the
batch sums are all-reduced before the update, so every Learner holds the same
values. They are saved in the Learner's state under :data:`STATE_KEY`, which
``Learner.set_state`` ignores; a state without it (a checkpoint saved by
RLlib 2.60) starts them fresh and logs that.
"""

import logging
from typing import Any, Dict, Optional

from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.framework import try_import_torch

torch, _ = try_import_torch()

logger = logging.getLogger("ray." + __name__)

#: ``moving_average_sqd_adv_norm_start`` that starts the average at the first
#: train batch's mean squared advantage.
START_FROM_DATA = 0.0

#: The key of these statistics in the Learner's state.
STATE_KEY = "marwil_advantage_statistics"

_NORM, _SCALE, _UPDATES = "moving_avg_sqd_adv_norm", "value_target_scale", "updates"


def starts_from_data(config) -> bool:
    """Whether the advantage average starts at the first batch's value."""
    return config.moving_average_sqd_adv_norm_start == START_FROM_DATA


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


def _value_predictions(learner, module_id, module_batch, fwd_out) -> "torch.Tensor":
    """The batch's ``vf_preds``, or the module's values where it has none
    (value targets that came with the data): the same weights as the loss."""
    if Columns.VF_PREDS in module_batch:
        return module_batch[Columns.VF_PREDS]
    module = learner.module[module_id].unwrapped()
    embeddings = (fwd_out or {}).get(module_id, {}).get(Columns.EMBEDDINGS)
    with torch.no_grad():
        return module.compute_values(module_batch, embeddings=embeddings)


def update(learner, batch, fwd_out: Optional[Dict[str, Any]] = None) -> None:
    """Moves each MARWIL module's statistics by one train batch.

    Every Learner calls this once per update with the same modules in the
    same order (zeros where its batch lacks a module), so the single
    all-reduce matches across a DDP group.

    Args:
        learner: The MARWIL Learner.
        batch: The train batch, by module id.
        fwd_out: The forward pass's outputs, by module id; their embeddings
            give the values of a batch without ``vf_preds``.
    """
    module_ids = marwil_module_ids(learner)
    if not module_ids:
        return
    sums = torch.zeros((len(module_ids), 3), device=learner._device)
    for i, module_id in enumerate(module_ids):
        module_batch = batch.get(module_id) if hasattr(batch, "get") else None
        if module_batch is None or Postprocessing.VALUE_TARGETS not in module_batch:
            continue
        targets = module_batch[Postprocessing.VALUE_TARGETS].detach().float()
        values = _value_predictions(learner, module_id, module_batch, fwd_out)
        advantages = targets - values.detach().float()
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
        config = learner.config.get_config_for_module(module_id)
        rate = config.moving_average_sqd_adv_norm_update_rate
        first = not updates.get(module_id)
        if first and starts_from_data(config):
            norms[module_id] = sqd_advantages
        else:
            # Before the first update: the configured start.
            norm = norms[module_id].to(sqd_advantages.device)
            norms[module_id] = norm + rate * (sqd_advantages - norm)
        if first:
            scales[module_id] = sqd_targets
        else:
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
            # The advantage average starts again from its configured start.
            for module_id in marwil_module_ids(learner):
                learner.moving_avg_sqd_adv_norms_per_module.pop(module_id, None)
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
