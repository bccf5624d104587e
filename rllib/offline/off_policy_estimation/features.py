"""Observations and actions as flat float features for the estimators' own
networks (FQE's Q-function, the fitted behaviour policy).

Nested observations are flattened leaf by leaf as RLlib's own flattening
does: Box leaves reshaped, Discrete and MultiDiscrete leaves one-hot.
"""

from typing import Any, Optional

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.spaces.space_utils import get_base_struct_from_space
from ray.rllib.utils.torch_utils import flatten_inputs_to_1d_tensor

torch, _ = try_import_torch()


def flat_features(
    values: Any, space: Optional[gym.Space], device="cpu"
) -> "torch.Tensor":
    """A `(N, D)` float32 tensor from a batch (a nest of `(N, ...)` arrays).

    Args:
        values: The batch.
        space: Its space; Discrete leaves are one-hot encoded. Without a
            space every leaf is used as numbers.
        device: Where the tensor goes.
    """
    if space is not None:
        inputs = tree.map_structure(lambda x: torch.as_tensor(np.asarray(x)), values)
        flat = flatten_inputs_to_1d_tensor(inputs, get_base_struct_from_space(space))
        return flat.to(device=device, dtype=torch.float32)
    leaves = [
        np.asarray(x, np.float32).reshape(len(x), -1) for x in tree.flatten(values)
    ]
    return torch.as_tensor(np.concatenate(leaves, axis=1), device=device)


def mlp(in_size: int, out_size: int, hidden_sizes=(256, 256)) -> "torch.nn.Sequential":
    """A ReLU MLP; no hidden sizes makes it linear."""
    layers, size = [], in_size
    for hidden in hidden_sizes:
        layers += [torch.nn.Linear(size, hidden), torch.nn.ReLU()]
        size = hidden
    layers.append(torch.nn.Linear(size, out_size))
    return torch.nn.Sequential(*layers)
