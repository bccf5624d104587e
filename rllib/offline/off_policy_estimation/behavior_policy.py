"""A behaviour policy fitted to the logged actions, for data without recorded
`action_logp`.

Discrete actions: a softmax classifier. Continuous actions: a diagonal
Gaussian with a state-dependent mean and one learned log-std per dimension.
Both are trained by maximum likelihood on all recorded steps. The quality of
every importance-sampling and DR estimate then rests on this fit (and on the
logged policy being stochastic); prefer recorded propensities.
"""

from typing import Any, Optional

import gymnasium as gym
import numpy as np
from ray.rllib.utils.framework import try_import_torch

from rllib.offline.off_policy_estimation.features import flat_features, mlp

torch, _ = try_import_torch()


def fitted_behavior_logp(
    observations: Any,
    actions: Any,
    action_space: gym.Space,
    observation_space: Optional[gym.Space] = None,
    *,
    hidden_sizes=(64, 64),
    num_updates: int = 2000,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
) -> np.ndarray:
    """Fits a behaviour policy; returns its log-probabilities of `actions`.

    Args:
        observations: A batch (nest of `(N, ...)` arrays) of recorded states.
        actions: The logged actions, `(N,)` or `(N, D)`.
        action_space: Discrete or Box.
        observation_space: For one-hot encoding Discrete observation leaves.
        hidden_sizes, num_updates, batch_size, learning_rate, seed: Training.

    Returns:
        `(N,)` float64 log-probabilities.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    features = flat_features(observations, observation_space)
    features = (features - features.mean(0)) / features.std(0).clamp_min(1e-6)
    discrete = isinstance(action_space, gym.spaces.Discrete)
    if discrete:
        targets = torch.as_tensor(np.asarray(actions).reshape(-1), dtype=torch.long)
        network = mlp(features.shape[1], int(action_space.n), hidden_sizes)
        parameters = list(network.parameters())
    else:
        targets = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
        targets = targets.reshape(len(targets), -1)
        network = mlp(features.shape[1], targets.shape[1], hidden_sizes)
        log_std = torch.zeros(targets.shape[1], requires_grad=True)
        parameters = list(network.parameters()) + [log_std]

    def log_likelihood(x, y):
        out = network(x)
        if discrete:
            return torch.distributions.Categorical(logits=out).log_prob(y)
        normal = torch.distributions.Normal(out, log_std.clamp(-5, 2).exp())
        return normal.log_prob(y).sum(-1)

    optimizer = torch.optim.Adam(parameters, lr=learning_rate)
    for _ in range(num_updates):
        index = torch.as_tensor(rng.integers(0, len(targets), batch_size))
        loss = -log_likelihood(features[index], targets[index]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return log_likelihood(features, targets).double().numpy()
