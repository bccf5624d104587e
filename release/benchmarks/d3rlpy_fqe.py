"""Fitted Q Evaluation with d3rlpy, run as a standalone subprocess.

This script is meant to be executed with the interpreter of a separate
virtualenv that has d3rlpy installed (it is not importable from the main
environment). It reads logged transitions and a target policy from an ``.npz``
file, trains d3rlpy's FQE (``DiscreteFQE`` with ``--discrete``) for a fixed
number of gradient steps, and writes the estimated discounted value of the
target policy at the episodes' initial states to a JSON file.

Usage::

    python d3rlpy_fqe.py --input IN.npz --output OUT.json --n-steps N \\
        --batch-size B --gamma G --seed S [--discrete] \\
        [--num-value-samples K] [--hidden-units 256,256]

Input arrays (``IN.npz``):

* ``observations`` ``(N, obs_dim)`` float32.
* ``actions`` ``(N,)`` int64 (discrete) or ``(N, act_dim)`` float32.
* ``rewards`` ``(N,)``.
* ``terminals`` ``(N,)``: 1 where the episode terminated at this step.
* ``timeouts`` ``(N,)``: 1 where the episode was truncated at this step.
* ``initial_observations`` ``(E, obs_dim)``: first observation of each episode.
* ``policy_w0, policy_b0, policy_w1, policy_b1, ...``: the target policy as an
  MLP. Weights have shape ``(in_features, out_features)`` (``y = x @ w + b``),
  hidden layers use tanh. Discrete: the last layer gives logits and the policy
  is their argmax. Continuous: the last layer goes through tanh and is scaled
  by ``action_scale``.
* ``action_scale``: scalar (or ``(act_dim,)``) array, continuous only.
* ``policy_epsilon`` (optional, discrete only): scalar in ``[0, 1]``. With this
  probability the action is drawn uniformly from all actions instead of taking
  the argmax.
* ``policy_noise_std`` (optional, continuous only): scalar or ``(act_dim,)``
  array, non-negative. Gaussian noise with this standard deviation is added to
  ``tanh(mlp(obs)) * action_scale``; the result is not clipped (the logged
  actions are the unclipped ones, the environment clips).

Without the optional keys (or with them at zero) the policy is deterministic.
Otherwise every call of the policy draws fresh actions from a ``torch``
generator seeded from ``--seed``, so each FQE update regresses on one sample
``a' ~ pi(s')`` per transition, an unbiased draw for ``E_pi Q(s', a')``.

Output JSON keys: ``estimate`` (mean over initial observations ``s0`` of the
mean over ``--num-value-samples`` draws ``a ~ pi(s0)`` of d3rlpy's
``predict_value(s0, a)``), ``stochastic``, ``num_value_samples``,
``updates_per_second``, ``d3rlpy_version``, ``n_steps`` and a few descriptive
fields.
"""

import argparse
import dataclasses
import json
import logging
import math
import time
from typing import Optional, Union

import d3rlpy
import numpy as np
import structlog
import torch
from d3rlpy.algos.qlearning.base import QLearningAlgoImplBase
from d3rlpy.constants import ActionSpace
from d3rlpy.dataset import MDPDataset
from d3rlpy.logging import NoopAdapterFactory
from d3rlpy.models.encoders import VectorEncoderFactory
from d3rlpy.torch_utility import Modules, TorchMiniBatch
from torch import nn

DEFAULT_HIDDEN_UNITS = "256,256"


def load_policy_layers(data: np.lib.npyio.NpzFile) -> list[tuple[np.ndarray, ...]]:
    """Collects the target policy's ``(weight, bias)`` pairs from the npz file.

    Args:
        data: The opened input file.

    Returns:
        The layers in order, each as ``(weight, bias)`` with the weight shaped
        ``(in_features, out_features)``.

    Raises:
        ValueError: If no layer is present or a bias is missing.
    """
    layers = []
    index = 0
    while f"policy_w{index}" in data.files:
        if f"policy_b{index}" not in data.files:
            raise ValueError(f"policy_w{index} has no matching policy_b{index}")
        weight = np.asarray(data[f"policy_w{index}"], dtype=np.float32)
        bias = np.asarray(data[f"policy_b{index}"], dtype=np.float32).reshape(-1)
        layers.append((weight, bias))
        index += 1
    if not layers:
        raise ValueError("the input file holds no policy_w0/policy_b0 arrays")
    return layers


def load_policy_noise(
    data: np.lib.npyio.NpzFile, discrete: bool
) -> tuple[float, Optional[np.ndarray]]:
    """Reads the optional exploration settings of the target policy.

    Args:
        data: The opened input file.
        discrete: Whether actions are discrete.

    Returns:
        ``(epsilon, noise_std)``: ``epsilon`` is 0 when absent; ``noise_std``
        is ``None`` when absent (always ``None`` for discrete actions).

    Raises:
        ValueError: If a key belongs to the other action type or holds an
            out-of-range value.
    """
    epsilon = 0.0
    noise_std = None
    if "policy_epsilon" in data.files:
        if not discrete:
            raise ValueError("policy_epsilon is only valid with --discrete")
        epsilon_array = np.asarray(data["policy_epsilon"], dtype=np.float64)
        if epsilon_array.size != 1:
            raise ValueError("policy_epsilon must be a scalar")
        epsilon = float(epsilon_array.reshape(()))
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"policy_epsilon must lie in [0, 1], got {epsilon}")
    if "policy_noise_std" in data.files:
        if discrete:
            raise ValueError("policy_noise_std is only valid without --discrete")
        noise_std = np.asarray(data["policy_noise_std"], dtype=np.float32)
        noise_std = noise_std.reshape(-1)
        if noise_std.size == 0 or not np.all(np.isfinite(noise_std)):
            raise ValueError("policy_noise_std must be finite and non-empty")
        if np.any(noise_std < 0):
            raise ValueError("policy_noise_std must be non-negative")
    return epsilon, noise_std


class MLPPolicy(nn.Module):
    """The target policy as a frozen torch MLP, optionally with exploration.

    Args:
        layers: ``(weight, bias)`` pairs, weights shaped ``(in, out)``.
        discrete: Return argmax actions instead of scaled tanh outputs.
        action_scale: Multiplier of the tanh output (continuous only).
        epsilon: Probability of a uniformly random action (discrete only).
        noise_std: Standard deviation of the Gaussian noise added to the
            continuous action, scalar or per dimension; ``None`` for none.
        seed: Seed of the generator behind the random draws.
    """

    def __init__(
        self,
        layers: list[tuple[np.ndarray, ...]],
        discrete: bool,
        action_scale: Optional[np.ndarray] = None,
        epsilon: float = 0.0,
        noise_std: Optional[np.ndarray] = None,
        seed: int = 0,
    ):
        super().__init__()
        linears = []
        for i, (weight, bias) in enumerate(layers):
            if weight.ndim != 2 or weight.shape[1] != bias.shape[0]:
                raise ValueError(
                    f"policy_w{i} must be (in_features, out_features) matching "
                    f"policy_b{i}; got {weight.shape} and {bias.shape}"
                )
            if i > 0 and weight.shape[0] != layers[i - 1][0].shape[1]:
                raise ValueError(f"policy_w{i} does not chain onto policy_w{i - 1}")
            linear = nn.Linear(weight.shape[0], weight.shape[1])
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(weight.T.copy()))
                linear.bias.copy_(torch.from_numpy(bias))
            linear.requires_grad_(False)
            linears.append(linear)
        self.linears = nn.ModuleList(linears)
        self.discrete = discrete
        scale = np.ones(1, np.float32) if action_scale is None else action_scale
        self.register_buffer(
            "action_scale", torch.as_tensor(np.asarray(scale, dtype=np.float32))
        )
        if discrete and noise_std is not None:
            raise ValueError("noise_std applies to continuous actions only")
        if not discrete and epsilon:
            raise ValueError("epsilon applies to discrete actions only")
        self.epsilon = float(epsilon)
        std = np.zeros(1, np.float32) if noise_std is None else noise_std
        std = np.asarray(std, dtype=np.float32).reshape(-1)
        if std.size not in (1, self.output_size):
            raise ValueError(
                f"policy_noise_std has {std.size} entries, expected 1 or "
                f"{self.output_size}"
            )
        self.register_buffer("noise_std", torch.as_tensor(std))
        # Kept apart from the global torch generator that d3rlpy seeds, so the
        # action draws do not replay the network initialisation's stream.
        generator_seed = np.random.SeedSequence([seed, 1]).generate_state(1)[0]
        self.generator = torch.Generator().manual_seed(int(generator_seed))

    @property
    def input_size(self) -> int:
        """Observation size the first layer expects."""
        return self.linears[0].in_features

    @property
    def output_size(self) -> int:
        """Number of logits (discrete) or action dimensions (continuous)."""
        return self.linears[-1].out_features

    @property
    def stochastic(self) -> bool:
        """Whether repeated calls can return different actions."""
        return self.epsilon > 0 or bool(torch.any(self.noise_std > 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Draws the policy's actions for a batch of observations.

        Each call takes new random numbers from the policy's generator; a
        deterministic policy returns the same actions every time.

        Args:
            x: Observations ``(B, obs_dim)``.

        Returns:
            ``(B,)`` int64 actions (discrete) or ``(B, act_dim)`` float actions.
        """
        h = x.float()
        for linear in self.linears[:-1]:
            h = torch.tanh(linear(h))
        out = self.linears[-1](h)
        if self.discrete:
            actions = out.argmax(dim=-1)
            if self.epsilon > 0:
                batch = actions.shape[0]
                explore = torch.rand(batch, generator=self.generator) < self.epsilon
                uniform = torch.randint(
                    self.output_size, (batch,), generator=self.generator
                )
                actions = torch.where(
                    explore.to(actions.device), uniform.to(actions.device), actions
                )
            return actions
        actions = torch.tanh(out) * self.action_scale
        if bool(torch.any(self.noise_std > 0)):
            noise = torch.randn(actions.shape, generator=self.generator)
            actions = actions + self.noise_std * noise.to(actions.device)
        return actions


@dataclasses.dataclass(frozen=True)
class _PolicyModules(Modules):
    policy: nn.Module


class FixedPolicyImpl(QLearningAlgoImplBase):
    """A d3rlpy algorithm implementation that only acts with a fixed policy.

    d3rlpy's FQE queries its target through the implementation object
    (``algo.impl.predict_best_action`` on torch batches of next observations),
    so this is the piece that has to speak d3rlpy's internal API.

    Args:
        policy: The frozen target policy.
        observation_shape: Observation shape.
        action_size: Number of actions (discrete) or action dimensions.
        device: Torch device string.
    """

    def __init__(
        self,
        policy: MLPPolicy,
        observation_shape: tuple[int, ...],
        action_size: int,
        device: str,
    ):
        super().__init__(
            observation_shape=observation_shape,
            action_size=action_size,
            modules=_PolicyModules(policy=policy),
            device=device,
        )
        self._policy = policy

    def inner_update(self, batch: TorchMiniBatch, grad_step: int) -> dict[str, float]:
        """Not supported: the target policy is fixed."""
        raise NotImplementedError("the target policy is not trainable")

    def inner_predict_best_action(self, x: torch.Tensor) -> torch.Tensor:
        """Returns a fresh draw of the target policy's actions.

        FQE takes its next actions from here, so for a stochastic policy this
        samples rather than returning a single "best" action.
        """
        return self._policy(x)

    def inner_sample_action(self, x: torch.Tensor) -> torch.Tensor:
        """Returns a fresh draw of the target policy's actions."""
        return self._policy(x)

    def inner_predict_value(
        self, x: torch.Tensor, action: torch.Tensor
    ) -> torch.Tensor:
        """Not supported: the target policy has no value function."""
        raise NotImplementedError("the target policy has no value function")


class FixedPolicyAlgo:
    """The minimal algorithm object that d3rlpy's FQE accepts as ``algo``.

    FQE only needs ``algo.impl`` (a built implementation) for training and
    forwards ``predict``/``sample_action`` to the algorithm.

    Args:
        policy: The frozen target policy.
        device: Torch device string.
    """

    def __init__(self, policy: MLPPolicy, device: str = "cpu:0"):
        self._device = device
        self._impl = FixedPolicyImpl(
            policy=policy,
            observation_shape=(policy.input_size,),
            action_size=policy.output_size,
            device=device,
        )

    @property
    def impl(self) -> FixedPolicyImpl:
        """The implementation FQE calls during its updates."""
        return self._impl

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Draws the target policy's actions for numpy observations.

        Args:
            x: Observations ``(B, obs_dim)``.

        Returns:
            The actions as a numpy array.
        """
        with torch.no_grad():
            torch_x = torch.as_tensor(np.asarray(x, np.float32), device=self._device)
            return self._impl.predict_best_action(torch_x).cpu().numpy()

    def sample_action(self, x: np.ndarray) -> np.ndarray:
        """Same as ``predict``: both draw from the target policy."""
        return self.predict(x)


def build_dataset(
    data: np.lib.npyio.NpzFile, discrete: bool, action_size: int
) -> MDPDataset:
    """Builds d3rlpy's dataset; episodes end at ``terminals | timeouts``.

    Args:
        data: The opened input file.
        discrete: Whether actions are discrete.
        action_size: Number of actions (discrete) or action dimensions.

    Returns:
        The dataset.
    """
    observations = np.asarray(data["observations"], dtype=np.float32)
    terminals = np.asarray(data["terminals"], dtype=np.float32).reshape(-1)
    timeouts = np.asarray(data["timeouts"], dtype=np.float32).reshape(-1)
    # A step that is both terminal and truncated counts as terminal.
    timeouts = np.where(terminals > 0, 0.0, timeouts).astype(np.float32)
    if not terminals[-1] and not timeouts[-1]:
        # The last, unfinished episode still needs an end marker.
        timeouts[-1] = 1.0
    if discrete:
        actions = np.asarray(data["actions"]).astype(np.int64).reshape(-1)
        action_space = ActionSpace.DISCRETE
    else:
        actions = np.asarray(data["actions"], dtype=np.float32)
        actions = actions.reshape(len(actions), -1)
        action_space = ActionSpace.CONTINUOUS
    return MDPDataset(
        observations=observations,
        actions=actions,
        rewards=np.asarray(data["rewards"], dtype=np.float32).reshape(-1, 1),
        terminals=terminals,
        timeouts=timeouts,
        action_space=action_space,
        action_size=action_size,
    )


def parse_hidden_units(text: str) -> list[int]:
    """Turns ``"256,256"`` into ``[256, 256]``.

    Args:
        text: Comma-separated positive layer sizes.

    Returns:
        The layer sizes.

    Raises:
        argparse.ArgumentTypeError: If an entry is not a positive integer.
    """
    try:
        units = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"bad --hidden-units {text!r}") from error
    if not units or any(unit < 1 for unit in units):
        raise argparse.ArgumentTypeError(f"bad --hidden-units {text!r}")
    return units


def estimate_initial_value(
    fqe: Union[d3rlpy.ope.FQE, d3rlpy.ope.DiscreteFQE],
    target: FixedPolicyAlgo,
    initial_observations: np.ndarray,
    num_samples: int,
) -> np.ndarray:
    """Averages FQE's Q over actions drawn from the target policy.

    Args:
        fqe: The trained FQE object.
        target: The target policy wrapper.
        initial_observations: ``(E, obs_dim)`` initial observations.
        num_samples: Number of action draws per initial observation.

    Returns:
        ``(E,)`` Monte Carlo estimates of ``E_{a ~ pi(s0)} Q(s0, a)``.
    """
    total = np.zeros(len(initial_observations), dtype=np.float64)
    for _ in range(num_samples):
        actions = target.sample_action(initial_observations)
        values = fqe.predict_value(initial_observations, actions)
        total += np.asarray(values, dtype=np.float64).reshape(-1)
    return total / num_samples


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Parses the command line.

    Args:
        argv: Arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The parsed arguments.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="input .npz file")
    parser.add_argument("--output", required=True, help="output .json file")
    parser.add_argument("--n-steps", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--gamma", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--discrete", action="store_true")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--target-update-interval", type=int, default=100)
    parser.add_argument("--num-threads", type=int, default=0, help="0: torch default")
    parser.add_argument(
        "--num-value-samples",
        type=int,
        default=64,
        help="actions drawn from the target policy per initial observation",
    )
    parser.add_argument(
        "--hidden-units",
        type=parse_hidden_units,
        default=parse_hidden_units(DEFAULT_HIDDEN_UNITS),
        help=f"FQE encoder layer sizes, comma separated (default "
        f"{DEFAULT_HIDDEN_UNITS})",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="keep d3rlpy's info logging (stdout)"
    )
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> None:
    """Runs FQE on the input file and writes the JSON result."""
    args = parse_args(argv)
    if args.n_steps < 1:
        raise ValueError("--n-steps must be positive")
    if args.num_value_samples < 1:
        raise ValueError("--num-value-samples must be positive")
    if not args.verbose:
        # d3rlpy logs through structlog to stdout; keep only warnings and errors.
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
        )
    if args.num_threads > 0:
        torch.set_num_threads(args.num_threads)
    d3rlpy.seed(args.seed)
    device = "cpu:0"

    with np.load(args.input) as data:
        action_scale = None
        if not args.discrete:
            action_scale = np.asarray(data["action_scale"], dtype=np.float32)
        epsilon, noise_std = load_policy_noise(data, args.discrete)
        policy = MLPPolicy(
            load_policy_layers(data),
            args.discrete,
            action_scale,
            epsilon=epsilon,
            noise_std=noise_std,
            seed=args.seed,
        )
        dataset = build_dataset(data, args.discrete, policy.output_size)
        initial_observations = np.asarray(
            data["initial_observations"], dtype=np.float32
        )
    policy.eval()

    target = FixedPolicyAlgo(policy, device=device)
    # d3rlpy 2.x has a single FQEConfig for both FQE and DiscreteFQE.
    fqe_cls = d3rlpy.ope.DiscreteFQE if args.discrete else d3rlpy.ope.FQE
    config = d3rlpy.ope.FQEConfig(
        learning_rate=args.learning_rate,
        encoder_factory=VectorEncoderFactory(hidden_units=args.hidden_units),
        batch_size=args.batch_size,
        gamma=args.gamma,
        target_update_interval=args.target_update_interval,
    )
    fqe = fqe_cls(algo=target, config=config, device=device)

    start = time.perf_counter()
    results = fqe.fit(
        dataset,
        n_steps=args.n_steps,
        # One epoch: d3rlpy runs n_steps // n_steps_per_epoch epochs.
        n_steps_per_epoch=args.n_steps,
        logger_adapter=NoopAdapterFactory(),
        show_progress=False,
        save_interval=args.n_steps + 1,
    )
    fit_seconds = time.perf_counter() - start
    metrics = results[-1][1] if results else {}

    values = estimate_initial_value(
        fqe, target, initial_observations, args.num_value_samples
    )
    estimate = float(np.mean(values))

    update_time = metrics.get("time_algorithm_update")
    output = {
        "estimate": estimate,
        "estimate_std_over_initial_states": float(np.std(values)),
        "updates_per_second": args.n_steps / fit_seconds,
        "updates_per_second_update_only": (1.0 / update_time if update_time else None),
        "fit_seconds": fit_seconds,
        "d3rlpy_version": d3rlpy.__version__,
        "torch_version": torch.__version__,
        "n_steps": args.n_steps,
        "batch_size": args.batch_size,
        "gamma": args.gamma,
        "seed": args.seed,
        "discrete": args.discrete,
        "stochastic": policy.stochastic,
        "num_value_samples": args.num_value_samples,
        "policy_epsilon": policy.epsilon if args.discrete else None,
        "policy_noise_std": (
            None if args.discrete else policy.noise_std.cpu().numpy().tolist()
        ),
        "learning_rate": args.learning_rate,
        "target_update_interval": args.target_update_interval,
        "hidden_units": args.hidden_units,
        "encoder": "VectorEncoder(relu)",
        "final_loss": metrics.get("loss"),
        "num_transitions": int(dataset.transition_count),
        "num_episodes": len(dataset.episodes),
        "num_initial_observations": len(initial_observations),
        "torch_threads": torch.get_num_threads(),
    }
    if not math.isfinite(estimate):
        output["error"] = "non-finite estimate"
    with open(args.output, "w") as f:
        json.dump(output, f, indent=2)


if __name__ == "__main__":
    main()
