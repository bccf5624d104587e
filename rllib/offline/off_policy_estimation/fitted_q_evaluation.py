"""Fitted Q evaluation (FQE): the target policy's Q-function, regressed from
recorded transitions, valued at the episodes' initial states.

Each update regresses `Q(s, a)` on `r + gamma * (1 - terminated) * V'(s')`
with `V'(s') = E_{a' ~ pi(s')} Q_target(s', a')` from a target network that
is copied every `target_update_interval` updates. The expectation is exact
for discrete actions (the policy's probabilities) and a mean over
`num_action_samples` fixed draws for continuous ones. The last step of a
truncated episode bootstraps from its final observation; a terminated one
does not. Rewards are divided by their largest magnitude while training and
Q-values multiplied back. Bootstrapped values are clipped to the range every
discounted return lies in, `[min(0, r_min), max(0, r_max)] / (1 - gamma)`
from the recorded rewards, which stops the divergence FQE is prone to when
the data barely covers the target policy's actions (a target policy that
earns rewards outside the recorded range is then underestimated).
"""

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.utils.framework import try_import_torch
from ray.util.annotations import PublicAPI

from rllib.offline.off_policy_estimation.features import flat_features, mlp
from rllib.offline.off_policy_estimation.target_policy import TargetPolicy
from rllib.offline.off_policy_estimation.trajectories import Trajectories

torch, _ = try_import_torch()


@PublicAPI(stability="alpha")
@dataclass
class FQEConfig:
    """Settings of fitted Q evaluation.

    Each target-network copy moves value one step back along the episodes,
    so `num_updates / target_update_interval` should exceed the horizon the
    discount sees, `1 / (1 - gamma)` (500 copies at the defaults).

    Attributes:
        hidden_sizes: The Q-network's hidden layers (ReLU); `()` is linear.
        learning_rate: Adam's step size.
        batch_size: Transitions drawn (with replacement) per update; None,
            or at least the number of transitions, uses all of them.
        num_updates: Gradient updates.
        target_update_interval: Updates between target-network copies.
        num_action_samples: Draws of `a' ~ pi(s')` for continuous actions.
        horizon: The episodes' time limit, when their return ends there (the
            quantity to estimate is the return of a `horizon`-step episode):
            the Q-function then also sees the share of steps left, and step
            `horizon` is final. None (default) treats a truncated episode as
            cut off from an endless task and bootstraps its last step.
        seed: Seeds the network, the batches and the action draws.
        device: Where the Q-network trains.
    """

    hidden_sizes: Sequence[int] = (256, 256)
    learning_rate: float = 3e-4
    batch_size: Optional[int] = 256
    num_updates: int = 10_000
    target_update_interval: int = 20
    num_action_samples: int = 8
    horizon: Optional[int] = None
    seed: int = 0
    device: str = "cpu"


def with_time_to_go(features, steps, horizon: Optional[int]) -> "torch.Tensor":
    """`features` with the share of the time limit left as a last column."""
    if horizon is None:
        return features
    steps = torch.as_tensor(np.asarray(steps), device=features.device)
    left = ((horizon - steps) / horizon).to(features.dtype).view(-1, 1)
    return torch.cat([features, left], dim=1)


class _Transitions:
    """The recorded steps as flat tensors, with the target policy's next actions."""

    def __init__(self, trajectories, policy, observation_space, config, device):
        mask = trajectories.mask
        num_episodes, horizon = mask.shape
        episode, step = np.nonzero(mask)
        observations = trajectories.observations
        self.obs = with_time_to_go(
            flat_features(
                tree.map_structure(lambda x: x[episode, step], observations),
                observation_space,
                device,
            ),
            step,
            config.horizon,
        )
        next_obs = tree.map_structure(lambda x: x[episode, step + 1], observations)
        self.next_obs = with_time_to_go(
            flat_features(next_obs, observation_space, device),
            step + 1,
            config.horizon,
        )
        self.actions = tree.map_structure(
            lambda x: x[episode, step], trajectories.actions
        )
        self.rewards = torch.as_tensor(
            trajectories.rewards[episode, step], dtype=torch.float32, device=device
        )
        last = step == trajectories.lengths[episode] - 1
        final = last & trajectories.terminated[episode]
        if config.horizon is not None:
            final |= step + 1 >= config.horizon
        self.terminal = torch.as_tensor(final.astype(np.float32), device=device)
        if policy.is_discrete:
            self.next_probs = torch.as_tensor(
                policy.action_probabilities(next_obs),
                dtype=torch.float32,
                device=device,
            )
        else:
            self.next_actions = torch.as_tensor(
                policy.sample(next_obs, config.num_action_samples, config.seed),
                dtype=torch.float32,
                device=device,
            )

    def __len__(self):
        return len(self.rewards)


def _value_bounds(rewards: "torch.Tensor", gamma: float):
    # Every discounted return lies in [min(0, r_min), max(0, r_max)] / (1 - gamma).
    if gamma >= 1.0:
        return -float("inf"), float("inf")
    low = min(0.0, float(rewards.min())) / (1.0 - gamma)
    high = max(0.0, float(rewards.max())) / (1.0 - gamma)
    return low, high


def _mean_over_draws(network, obs, draws) -> "torch.Tensor":
    # Q(s, a) averaged over draws `(N, K, D)` of continuous actions.
    num_rows, num_samples = draws.shape[:2]
    repeated = obs.repeat_interleave(num_samples, dim=0)
    flat_draws = draws.reshape(num_rows * num_samples, -1)
    values = network(torch.cat([repeated, flat_draws], dim=1))
    return values.view(num_rows, num_samples).mean(1)


@PublicAPI(stability="alpha")
class FittedQEvaluation:
    """Fits the target policy's Q-function to one module's trajectories.

    Args:
        policy: The target policy.
        gamma: The discount.
        observation_space: The recorded observations' space (Discrete leaves
            are one-hot encoded); None uses the values as numbers.
        config: `FQEConfig`; defaults if None.

    Attributes:
        losses: The regression loss at each target-network copy (in units of
            the scaled rewards), to check that the fit settled.
    """

    def __init__(
        self,
        policy: TargetPolicy,
        gamma: float,
        observation_space: Optional[gym.Space] = None,
        config: Optional[FQEConfig] = None,
    ):
        self.policy = policy
        self.gamma = gamma
        self.observation_space = observation_space
        self.config = config or FQEConfig()
        self.losses: List[float] = []
        self._q = None

    def _action_features(self, actions) -> "torch.Tensor":
        return torch.as_tensor(
            np.asarray(actions), dtype=torch.float32, device=self.config.device
        ).reshape(len(actions), -1)

    def _q_of(self, network, obs, actions) -> "torch.Tensor":
        # `actions`: (N,) int64 for discrete, (N, D) float for continuous.
        if self.policy.is_discrete:
            return network(obs).gather(1, actions.long().view(-1, 1)).squeeze(1)
        return network(torch.cat([obs, actions], dim=1)).squeeze(1)

    def _next_values(self, network, data, index) -> "torch.Tensor":
        next_obs = data.next_obs[index]
        if self.policy.is_discrete:
            return (network(next_obs) * data.next_probs[index]).sum(1)
        return _mean_over_draws(network, next_obs, data.next_actions[index])

    def fit(
        self,
        trajectories: Trajectories,
        *,
        on_update: Optional[Callable[[], None]] = None,
    ) -> "FittedQEvaluation":
        """Trains the Q-network; returns self.

        Args:
            trajectories: The recorded data.
            on_update: Called after every gradient update (a progress bar).
        """
        config = self.config
        device = torch.device(config.device)
        torch.manual_seed(config.seed)
        rng = np.random.default_rng(config.seed)
        data = _Transitions(
            trajectories, self.policy, self.observation_space, config, device
        )
        if self.policy.is_discrete:
            actions = torch.as_tensor(
                np.asarray(data.actions).reshape(-1), dtype=torch.long, device=device
            )
            in_size, out_size = data.obs.shape[1], int(self.policy.action_space.n)
        else:
            actions = self._action_features(data.actions)
            in_size, out_size = data.obs.shape[1] + actions.shape[1], 1
        self._input_mean = data.obs.mean(0)
        self._input_std = data.obs.std(0).clamp_min(1e-6)
        self._reward_scale = float(data.rewards.abs().max().clamp_min(1e-8))
        self._q = mlp(in_size, out_size, config.hidden_sizes).to(device)
        target = mlp(in_size, out_size, config.hidden_sizes).to(device)
        target.load_state_dict(self._q.state_dict())
        optimizer = torch.optim.Adam(self._q.parameters(), lr=config.learning_rate)
        obs = self._normalize(data.obs)
        data.next_obs = self._normalize(data.next_obs)
        rewards = data.rewards / self._reward_scale
        value_low, value_high = _value_bounds(rewards, self.gamma)
        self.losses = []
        full_batch = config.batch_size is None or config.batch_size >= len(data)
        for update in range(config.num_updates):
            if full_batch:
                index = torch.arange(len(data), device=device)
            else:
                index = torch.as_tensor(
                    rng.integers(0, len(data), config.batch_size), device=device
                )
            with torch.no_grad():
                next_values = self._next_values(target, data, index)
                next_values = next_values.clamp(value_low, value_high)
                y = rewards[index] + self.gamma * (1.0 - data.terminal[index]) * (
                    next_values
                )
            q = self._q_of(self._q, obs[index], actions[index])
            loss = torch.nn.functional.mse_loss(q, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (update + 1) % config.target_update_interval == 0:
                target.load_state_dict(self._q.state_dict())
                self.losses.append(loss.item())
            if on_update is not None:
                on_update()
        return self

    def _features(self, observations: Any, steps=None) -> "torch.Tensor":
        features = flat_features(
            observations, self.observation_space, self.config.device
        )
        if steps is None:
            steps = np.zeros(len(features), np.int64)
        return self._normalize(with_time_to_go(features, steps, self.config.horizon))

    def _normalize(self, features):
        return (features - self._input_mean) / self._input_std

    def _require_fit(self):
        if self._q is None:
            raise RuntimeError("Call `FittedQEvaluation.fit(...)` first.")

    def q_values(self, observations: Any, actions: Any, steps=None) -> np.ndarray:
        """`Q(s, a)` for a batch, in reward units, `(N,)`.

        `steps`: each row's step in its episode (with `horizon`; default 0).
        """
        self._require_fit()
        device = self.config.device
        obs = self._features(observations, steps)
        if self.policy.is_discrete:
            acts = torch.as_tensor(np.asarray(actions).reshape(-1), device=device)
        else:
            acts = self._action_features(actions)
        with torch.no_grad():
            q = self._q_of(self._q, obs, acts)
        return q.double().cpu().numpy() * self._reward_scale

    def state_values(self, observations: Any, steps=None) -> np.ndarray:
        """`V(s) = E_{a ~ pi(s)} Q(s, a)` for a batch, in reward units, `(N,)`.

        `steps`: each row's step in its episode (with `horizon`; default 0).
        """
        self._require_fit()
        device = self.config.device
        obs = self._features(observations, steps)
        with torch.no_grad():
            if self.policy.is_discrete:
                probs = torch.as_tensor(
                    self.policy.action_probabilities(observations),
                    dtype=torch.float32,
                    device=device,
                )
                values = (self._q(obs) * probs).sum(1)
            else:
                draws = torch.as_tensor(
                    self.policy.sample(
                        observations, self.config.num_action_samples, self.config.seed
                    ),
                    dtype=torch.float32,
                    device=device,
                )
                values = _mean_over_draws(self._q, obs, draws)
        return values.double().cpu().numpy() * self._reward_scale

    def initial_state_values(self, trajectories: Trajectories) -> np.ndarray:
        """`V(s_0)` of every trajectory, `(E,)`; their mean is the estimate."""
        first = tree.map_structure(lambda x: x[:, 0], trajectories.observations)
        return self.state_values(first)
