"""The policy being evaluated: log-probabilities of logged actions and its own
actions, computed in batches from an RLModule.
"""

import abc
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.utils.framework import try_import_torch
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.action_units import ActionRescaling

torch, _ = try_import_torch()


def _tensor_rows(nest: Any, rows: slice, device, float_dtype) -> Any:
    # Float leaves take the module's dtype (files often hold float64).
    def convert(x):
        tensor = torch.as_tensor(np.asarray(x[rows]), device=device)
        return tensor.to(float_dtype) if tensor.is_floating_point() else tensor

    return tree.map_structure(convert, nest)


@PublicAPI(stability="alpha")
class TargetPolicy(abc.ABC):
    """What the estimators need from the policy they evaluate.

    Observations and actions are batches (nests of numpy arrays with a leading
    batch dimension), as in `Trajectories.step_observations()`.
    """

    #: The action space; `gym.spaces.Discrete` makes the policy discrete.
    action_space: gym.Space
    #: Whether the policy always takes one action per state (a greedy or
    #: mean action). Importance ratios of a deterministic policy are 0 or
    #: 1/mu for discrete actions and undefined for continuous ones.
    deterministic: bool = False

    @property
    def is_discrete(self) -> bool:
        return isinstance(self.action_space, gym.spaces.Discrete)

    @abc.abstractmethod
    def logp(self, observations: Any, actions: Any) -> np.ndarray:
        """Log-probabilities `(N,)` of `actions` in `observations`."""

    @abc.abstractmethod
    def action_probabilities(self, observations: Any) -> np.ndarray:
        """Probabilities `(N, num_actions)` of every action (discrete only)."""

    @abc.abstractmethod
    def sample(self, observations: Any, num_samples: int, seed: int) -> np.ndarray:
        """`num_samples` actions per observation, `(N, num_samples, ...)`."""


@PublicAPI(stability="alpha")
class RLModuleTargetPolicy(TargetPolicy):
    """An RLModule's inference action distribution as the target policy.

    The module sees the recorded observations as they are (the same inputs
    BC, MARWIL, CQL and IQL train on from these files); env-to-module
    connectors are not applied.

    Args:
        module: A torch RLModule (single-agent).
        action_space: Its action space (defaults to `module.action_space`).
        deterministic: Evaluate the distribution's deterministic form
            (argmax for discrete actions, the mean for continuous ones)
            instead of sampling from it.
        batch_size: Rows per forward pass.
        action_rescaling: Maps the recorded actions to the units the module
            acts in (`rllib.offline.episode_files.action_units`), for data
            whose actions are in other units than the module's (a Pendulum
            log in env units, a module with `normalize_actions=True`). The
            policy then speaks the data's units: `logp` takes recorded
            actions and returns log-densities in their units, `sample`
            returns actions in them. None: the data is in the module's units.
    """

    def __init__(
        self,
        module,
        action_space: Optional[gym.Space] = None,
        *,
        deterministic: bool = False,
        batch_size: int = 4096,
        action_rescaling: Optional[ActionRescaling] = None,
    ):
        self.module = module
        self.action_rescaling = action_rescaling
        self.action_space = action_space or module.action_space
        if self.action_space is None:
            raise ValueError(
                "The RLModule has no `action_space`; pass `action_space=` to "
                "`RLModuleTargetPolicy`."
            )
        self.deterministic = deterministic
        self.batch_size = batch_size
        self._dist_cls = module.get_inference_action_dist_cls()
        parameters = list(module.parameters())
        self._device = parameters[0].device if parameters else torch.device("cpu")
        self._dtype = parameters[0].dtype if parameters else torch.float32

    def _distributions(self, observations: Any):
        num_rows = len(tree.flatten(observations)[0])
        for start in range(0, num_rows, self.batch_size):
            chunk = _tensor_rows(
                observations,
                slice(start, start + self.batch_size),
                self._device,
                self._dtype,
            )
            with torch.no_grad():
                out = self.module.forward_inference({Columns.OBS: chunk})
            yield start, self._dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS])

    def _check_stochastic(self, what: str) -> None:
        if self.deterministic and not self.is_discrete:
            raise ValueError(
                f"{what} needs action probabilities, which a deterministic policy "
                "over continuous actions does not have; evaluate it with FQE, or "
                "set `deterministic=False`."
            )

    def action_probabilities(self, observations: Any) -> np.ndarray:
        if not self.is_discrete:
            raise ValueError("`action_probabilities` needs a Discrete action space.")
        rows = []
        num_actions = int(self.action_space.n)
        for _, dist in self._distributions(observations):
            # One `logp` call per action keeps to the distribution's public API
            # (and so to any temperature or masking it applies).
            num_rows = dist.sample().shape[0]
            probs = torch.stack(
                [
                    dist.logp(torch.full((num_rows,), a, device=self._device)).exp()
                    for a in range(num_actions)
                ],
                dim=-1,
            )
            if self.deterministic:
                probs = torch.nn.functional.one_hot(
                    probs.argmax(-1), probs.shape[-1]
                ).to(probs.dtype)
            rows.append(probs.double().cpu().numpy())
        return np.concatenate(rows)

    def logp(self, observations: Any, actions: Any) -> np.ndarray:
        if self.is_discrete:
            probs = self.action_probabilities(observations)
            index = np.asarray(actions).astype(np.int64).reshape(-1)
            with np.errstate(divide="ignore"):
                return np.log(probs[np.arange(len(index)), index])
        self._check_stochastic("Importance sampling")
        jacobian = 0.0
        if self.action_rescaling is not None:
            actions = self.action_rescaling(np.asarray(actions), self.action_space)
            jacobian = self.action_rescaling.log_jacobian(self.action_space)
        rows = []
        for start, dist in self._distributions(observations):
            chunk = torch.as_tensor(
                np.asarray(actions[start : start + self.batch_size]),
                device=self._device,
                dtype=self._dtype,
            )
            rows.append(dist.logp(chunk).double().cpu().numpy())
        # A density in module units, as one in the data's units.
        return np.concatenate(rows) + jacobian

    def sample(self, observations: Any, num_samples: int, seed: int) -> np.ndarray:
        torch.manual_seed(seed)
        rows = []
        for _, dist in self._distributions(observations):
            if self.deterministic:
                action = dist.to_deterministic().sample()
                draws = action.unsqueeze(1).expand(
                    (action.shape[0], num_samples) + action.shape[1:]
                )
            else:
                draws = torch.stack([dist.sample() for _ in range(num_samples)], dim=1)
            rows.append(draws.cpu().numpy())
        draws = np.concatenate(rows)
        if self.action_rescaling is not None:
            draws = self.action_rescaling.inverse()(draws, self.action_space)
        return draws
