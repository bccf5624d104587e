"""Value targets from the inputs each offline row carries, with a live module.

Offline rows that need value targets (MARWIL, PPO fed from recorded data)
carry `returns_to_bootstrap`, `bootstrap_obs` and `bootstrap_discount` (see
`rllib.utils.postprocessing.bootstrapped_returns`). Whoever computes a loss
from such rows (the Learner, an offline evaluation runner, the
OfflinePreLearner when a user calls it directly) calls
:func:`add_value_targets` with its module: one no-grad value pass over the
rows' observations and bootstrap observations, on the module's device, gives

- ``value_targets = returns_to_bootstrap + bootstrap_discount * V(bootstrap_obs)``
- ``vf_preds = V(obs)``
- ``advantages = value_targets - vf_preds``, standardized over the rows the
  loss uses (``loss_mask``; the GAE connector, which online PPO keeps,
  standardizes over every row, including its bootstrap rows).

Nothing depends on the order of the rows or on which rows share a batch
(except the standardization statistics, which are per batch, as the GAE
connector's).
"""

from typing import Any, Dict, Optional

import numpy as np
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.framework import try_import_torch
from ray.util.annotations import DeveloperAPI

from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    CONTEXT_COLUMNS,
    RETURNS_TO_BOOTSTRAP,
)

# Imported with `ray.rllib.core.learner.learner`: RLlib imports without torch.
torch, _ = try_import_torch()


def unwrap(module):
    """The module itself, not its DDP wrapper (``num_learners >= 2`` wraps it)."""
    unwrapped = getattr(module, "unwrapped", None)
    return unwrapped() if callable(unwrapped) else module


def module_device(module) -> "torch.device":
    """The device of the module's parameters (CPU for a parameterless module)."""
    for param in module.parameters():
        return param.device
    return torch.device("cpu")


def standardize(
    x: "torch.Tensor", valid: Optional["torch.Tensor"] = None
) -> "torch.Tensor":
    """``(x - mean) / max(std, 1e-4)`` with statistics over ``valid`` rows only.

    Invalid rows are standardized with the same statistics (their loss is
    masked anyway). No host sync: the valid count stays a tensor.
    """
    if valid is None:
        mean = x.mean()
        std = x.std(unbiased=False)
    else:
        weights = valid.to(x.dtype)
        count = weights.sum().clamp(min=1.0)
        mean = (x * weights).sum() / count
        std = torch.sqrt((((x - mean) * weights) ** 2).sum() / count)
    return (x - mean) / std.clamp(min=1e-4)


def has_value_target_inputs(module_batch: Dict[str, Any]) -> bool:
    """Whether a module batch carries the inputs of its value targets."""
    return all(column in module_batch for column in CONTEXT_COLUMNS)


@DeveloperAPI
def add_value_targets(module, module_batch: Dict[str, Any]) -> bool:
    """Writes value targets, value predictions and advantages into the batch.

    Args:
        module: The module whose value function gives ``V``; a DDP wrapper is
            unwrapped. A module without ``ValueFunctionAPI`` is skipped.
        module_batch: One module's batch with the value-target inputs; tensors
            (any device) or numpy arrays. The results have the type and device
            of ``returns_to_bootstrap``.

    Returns:
        Whether targets were added.
    """
    module = unwrap(module)
    if not isinstance(module, ValueFunctionAPI) or not has_value_target_inputs(
        module_batch
    ):
        return False
    as_numpy = isinstance(module_batch[RETURNS_TO_BOOTSTRAP], np.ndarray)
    device = module_device(module)

    def tensor(x):
        return torch.as_tensor(x, device=device)

    obs = tree.map_structure(tensor, module_batch[Columns.OBS])
    bootstrap_obs = tree.map_structure(tensor, module_batch[BOOTSTRAP_OBS])
    num_rows = len(tree.flatten(obs)[0])
    both = tree.map_structure(lambda a, b: torch.cat([a, b]), obs, bootstrap_obs)
    with torch.no_grad():
        values = module.compute_values({Columns.OBS: both}).float()
    vf_preds, bootstrap_values = values[:num_rows], values[num_rows:]
    value_targets = (
        tensor(module_batch[RETURNS_TO_BOOTSTRAP]).float()
        + tensor(module_batch[BOOTSTRAP_DISCOUNT]).float() * bootstrap_values
    )
    valid = None
    if Columns.LOSS_MASK in module_batch:
        valid = tensor(module_batch[Columns.LOSS_MASK]).bool()
    advantages = standardize(value_targets - vf_preds, valid)
    results = {
        Postprocessing.VALUE_TARGETS: value_targets,
        Postprocessing.ADVANTAGES: advantages,
        Columns.VF_PREDS: vf_preds,
    }
    for column, value in results.items():
        module_batch[column] = value.cpu().numpy() if as_numpy else value
    return True


def add_value_targets_to_batch(multi_module, batch) -> None:
    """Runs :func:`add_value_targets` for every module batch that carries inputs.

    Args:
        multi_module: The ``MultiRLModule`` (or a mapping of module ids to
            modules) whose live weights give the values.
        batch: A ``MultiAgentBatch`` or a dict of module batches.
    """
    module_batches = getattr(batch, "policy_batches", batch)
    for module_id, module_batch in module_batches.items():
        if module_id in multi_module and has_value_target_inputs(module_batch):
            add_value_targets(multi_module[module_id], module_batch)
