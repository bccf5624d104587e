"""Device-aware GAE: value pass and advantages on the module's own device.

Upstream's connector moves the value predictions to numpy, runs GAE on the
CPU and converts the results back. This version keeps everything as tensors
on the device of the module's parameters, runs the value pass under
``torch.no_grad()``, and standardizes advantages over loss-mask-valid steps
only (the artificial bootstrap step that ``AddOneTsToEpisodesAndTruncate``
appends to every episode chunk does not count). Modules wrapped for
distributed training (``num_learners >= 2``) are unwrapped first.

The connector serves batches built from whole episode chunks (online PPO and
the like). Offline rows carry their own value-target inputs instead, see
``rllib.core.learner.value_targets``.
"""

from typing import Any, Dict, List, Optional

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner.general_advantage_estimation import (
    GeneralAdvantageEstimation as _UpstreamGAE,
)
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.annotations import override
from ray.rllib.utils.typing import EpisodeType

from rllib.utils.postprocessing.value_predictions import compute_value_targets


class GeneralAdvantageEstimation(_UpstreamGAE):
    """Learner connector piece adding GAE advantages and value targets.

    Same constructor and place in the pipeline as upstream's piece (after
    ``NumpyToTensor``; episodes elongated by one bootstrap step). Results are
    tensors on the module's device.
    """

    @override(ConnectorV2)
    def __call__(
        self,
        *,
        rl_module: MultiRLModule,
        episodes: List[EpisodeType],
        batch: Dict[str, Any],
        **kwargs,
    ):
        single_agent_episodes = list(
            self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False)
        )
        for module_id, module in rl_module.items():
            module = unwrap(module)
            if module_id not in batch or not isinstance(module, ValueFunctionAPI):
                continue
            episode_lens = None
            if module.is_stateful():
                episode_lens = [
                    len(e)
                    for e in single_agent_episodes
                    if e.module_id in (None, module_id)
                ]
            add_advantages_to_module_batch(
                module,
                batch[module_id],
                gamma=self.gamma,
                lambda_=self.lambda_,
                episode_lens=episode_lens,
            )
        return batch


def unwrap(module):
    """The module itself, not its DDP wrapper (``num_learners >= 2`` wraps it)."""
    unwrapped = getattr(module, "unwrapped", None)
    return unwrapped() if callable(unwrapped) else module


def module_device(module: RLModule) -> torch.device:
    """The device of the module's parameters (CPU for a parameterless module)."""
    for param in module.parameters():
        return param.device
    return torch.device("cpu")


def add_advantages_to_module_batch(
    module: RLModule,
    module_batch: Dict[str, Any],
    *,
    gamma: float,
    lambda_: float,
    episode_lens: Optional[List[int]] = None,
) -> None:
    """Computes values with ``module`` and writes GAE results into the batch.

    Args:
        module: A single-agent module implementing ``ValueFunctionAPI``; its
            current weights give the values.
        module_batch: The module's train batch (tensors on the module's device,
            or numpy). Needs ``Columns.REWARDS``, ``Columns.TERMINATEDS`` and
            ``Columns.TRUNCATEDS``; ``Columns.LOSS_MASK`` is used if present.
            Gets ``Postprocessing.ADVANTAGES`` and
            ``Postprocessing.VALUE_TARGETS`` added.
        gamma: The discount factor.
        lambda_: The GAE lambda.
        episode_lens: Episode (chunk) lengths, required when the batch is
            zero-padded to ``(B, T)`` for a stateful module.
    """
    module = unwrap(module)
    device = module_device(module)
    with torch.no_grad():
        values = module.compute_values(module_batch)

    def column(name, dtype=torch.float32):
        return torch.as_tensor(module_batch[name], device=device).to(dtype)

    padding = _Padding(values, episode_lens, module) if values.dim() == 2 else None
    unpad = padding.unpad if padding else (lambda x: x)

    values = unpad(values)
    value_targets = compute_value_targets(
        values=values,
        rewards=unpad(column(Columns.REWARDS)),
        terminateds=unpad(column(Columns.TERMINATEDS)),
        truncateds=unpad(column(Columns.TRUNCATEDS)),
        gamma=gamma,
        lambda_=lambda_,
    )
    advantages = value_targets - values
    valid = None
    if Columns.LOSS_MASK in module_batch:
        valid = unpad(column(Columns.LOSS_MASK, torch.bool))
    advantages = standardize(advantages, valid)

    repad = padding.repad if padding else (lambda x: x)
    module_batch[Postprocessing.ADVANTAGES] = repad(advantages)
    module_batch[Postprocessing.VALUE_TARGETS] = repad(value_targets)


def standardize(x: torch.Tensor, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``(x - mean) / max(std, 1e-4)`` with statistics over ``valid`` steps only.

    Invalid steps are standardized with the same statistics (their loss is
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


class _Padding:
    """Maps a zero-padded ``(B, T)`` batch to its valid steps and back."""

    def __init__(self, padded: torch.Tensor, episode_lens, module: RLModule):
        if episode_lens is None:
            raise ValueError(
                "GAE on a zero-padded batch of a stateful module needs the "
                "episode lengths (`episode_lens`); pass the episodes the batch "
                "was built from."
            )
        max_seq_len = module.model_config["max_seq_len"]
        chunk_lens = [
            min(max_seq_len, length - start)
            for length in episode_lens
            for start in range(0, length, max_seq_len)
        ]
        rows, cols = padded.shape[:2]
        lens = torch.as_tensor(np.asarray(chunk_lens), device=padded.device)
        if lens.shape[0] != rows:
            raise ValueError(
                f"Zero-padded batch has {rows} rows but the episode lengths "
                f"{list(episode_lens)} give {lens.shape[0]} chunks of "
                f"`max_seq_len`={max_seq_len}."
            )
        self.mask = torch.arange(cols, device=padded.device)[None, :] < lens[:, None]

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        return x[self.mask]

    def repad(self, flat: torch.Tensor) -> torch.Tensor:
        out = flat.new_zeros(self.mask.shape)
        out[self.mask] = flat
        return out


def find_gae_piece(pipeline) -> Optional[GeneralAdvantageEstimation]:
    """The GAE piece of a connector pipeline, or None."""
    for piece in getattr(pipeline, "connectors", []) if pipeline else []:
        if isinstance(piece, _UpstreamGAE):
            return piece
    return None


#: Upstream names in ``ray.rllib.connectors.learner.general_advantage_estimation``
#: that this module replaces.
REPLACES = {
    "GeneralAdvantageEstimation": GeneralAdvantageEstimation,
}
