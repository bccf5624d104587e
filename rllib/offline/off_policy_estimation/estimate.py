"""One call that runs the chosen estimators on one module's trajectories, or
on every module of a (multi-agent) RLModule.
"""

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tree
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.action_units import ActionRescaling
from rllib.offline.off_policy_estimation.behavior_policy import fitted_behavior_logp
from rllib.offline.off_policy_estimation.bootstrap import bootstrap_intervals
from rllib.offline.off_policy_estimation.doubly_robust import doubly_robust_values
from rllib.offline.off_policy_estimation.fitted_q_evaluation import (
    FittedQEvaluation,
    FQEConfig,
)
from rllib.offline.off_policy_estimation.importance_sampling import (
    IMPORTANCE_SAMPLING_ESTIMATORS,
    cumulative_log_weights,
    effective_sample_size,
    episode_terms,
)
from rllib.offline.off_policy_estimation.target_policy import (
    RLModuleTargetPolicy,
    TargetPolicy,
)
from rllib.offline.off_policy_estimation.trajectories import (
    Trajectories,
    episodes_by_module,
    trajectories_from_episodes,
)

ALL_ESTIMATORS = IMPORTANCE_SAMPLING_ESTIMATORS + ("fqe", "dr")
_NEEDS_RATIOS = set(IMPORTANCE_SAMPLING_ESTIMATORS) | {"dr"}
_NEEDS_Q = {"fqe", "dr"}


@PublicAPI(stability="alpha")
@dataclass
class EstimatorResult:
    """One estimate of the discounted return from the initial states.

    Attributes:
        value: The estimate.
        low: Lower end of the confidence interval: over episodes, and for
            "fqe" and "dr" with `fqe_resample_fits` also over FQE's fit.
        high: Upper end.
    """

    value: float
    low: float
    high: float


@PublicAPI(stability="alpha")
@dataclass
class PolicyValueEstimate:
    """The estimates for one module.

    Attributes:
        estimates: Estimator name to `EstimatorResult`.
        unavailable: Estimator name to why it could not run.
        behavior_logp_source: "recorded" (the data's `action_logp`),
            "fitted" (a behaviour model fitted to the data) or "unused".
        num_episodes: Trajectories evaluated.
        num_steps: Their recorded steps.
        logged_return: Mean discounted return of the data (the behaviour
            policy's own value, for reference).
        effective_sample_size: Kish's effective number of episodes under the
            final importance weights (NaN if no ratios were computed).
        fqe_resample_fits: FQE refits behind the "fqe" and "dr" intervals
            (0: those intervals resample the episodes under one fit).
        fqe_refit_values: Per estimator ("fqe", "dr"), each refit's estimate
            on its resampled episodes. The resamples follow
            `FQEConfig.seed` alone, so two policies estimated with the same
            FQE seed on the same data are refitted on the same episodes:
            their refits pair up, for a paired comparison of the two.
    """

    estimates: Dict[str, EstimatorResult]
    unavailable: Dict[str, str] = field(default_factory=dict)
    behavior_logp_source: str = "unused"
    num_episodes: int = 0
    num_steps: int = 0
    logged_return: float = float("nan")
    effective_sample_size: float = float("nan")
    fqe_resample_fits: int = 0
    fqe_refit_values: Dict[str, List[float]] = field(default_factory=dict)
    #: Per estimator, each trajectory's term `(E,)` (their mean is the
    #: estimate); not part of `to_dict()`.
    episode_values: Dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: Each trajectory's number of steps, `(E,)`; not part of `to_dict()`.
    episode_lengths: np.ndarray = field(default=None, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The estimates and statistics as plain Python values (JSON-ready)."""
        out = asdict(self)
        out.pop("episode_values")
        out.pop("episode_lengths")
        return out


def _check_actions(trajectories: Trajectories, action_space: gym.Space) -> None:
    actions = np.asarray(tree.flatten(trajectories.actions)[0])[trajectories.mask]
    if isinstance(action_space, gym.spaces.Discrete):
        bad = (actions < action_space.start) | (
            actions >= action_space.start + action_space.n
        )
        if actions.ndim != 1 or bad.any():
            raise ValueError(
                f"The logged actions (shape {actions.shape[1:]}, values "
                f"{np.unique(actions)[:5]}...) do not fit the policy's action space "
                f"{action_space}; evaluate a policy trained for these episodes' spaces."
            )
    elif isinstance(action_space, gym.spaces.Box):
        if actions.shape[1:] != action_space.shape:
            raise ValueError(
                f"The logged actions have shape {actions.shape[1:]}, the policy's "
                f"action space {action_space} has shape {action_space.shape}; "
                "evaluate a policy trained for these episodes' spaces."
            )


def _check_observations(trajectories: Trajectories, space: Optional[gym.Space]):
    if space is None:
        return
    first = tree.map_structure(lambda x: x[0, 0], trajectories.observations)
    try:
        tree.assert_same_structure(first, space.sample(), check_types=False)
        shapes_fit = all(
            np.shape(v) == np.shape(s)
            for v, s in zip(tree.flatten(first), tree.flatten(space.sample()))
        )
    except (ValueError, TypeError):
        shapes_fit = False
    if not shapes_fit:
        raise ValueError(
            f"The recorded observations ({tree.map_structure(np.shape, first)}) do "
            f"not fit the policy's observation space {space}; evaluate a policy "
            "trained for these episodes' spaces."
        )


@PublicAPI(stability="alpha")
def estimate_policy_value(
    policy: TargetPolicy,
    trajectories: Trajectories,
    *,
    gamma: float,
    estimators: Sequence[str] = ALL_ESTIMATORS,
    observation_space: Optional[gym.Space] = None,
    fqe_config: Optional[FQEConfig] = None,
    behavior_logp: str = "auto",
    max_weight: Optional[float] = None,
    num_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    on_fqe_update: Optional[Callable[[], None]] = None,
    fqe_resample_fits: int = 0,
) -> PolicyValueEstimate:
    """Estimates `policy`'s discounted return from recorded trajectories.

    Args:
        policy: The policy to evaluate.
        trajectories: One module's recorded data.
        gamma: The discount of the estimated return.
        estimators: Any of "is", "wis", "pdis", "wpdis", "fqe", "dr".
        observation_space: The observations' space (one-hot encoding of
            Discrete leaves in FQE and the behaviour model).
        fqe_config: Settings of FQE (used by "fqe" and "dr").
        behavior_logp: "recorded" (the data's `action_logp`; an error if
            absent), "fitted" (fit a behaviour model) or "auto" (recorded if
            present, else fitted).
        max_weight: Clip of the cumulative importance ratios (None: none).
        num_bootstrap: Bootstrap resamples for the intervals (0: none).
        confidence: The intervals' coverage.
        seed: Seeds the bootstrap and the fitted models.
        on_fqe_update: Called after every FQE update (a progress bar).
        fqe_resample_fits: FQE refits, each on the episodes drawn with
            replacement, behind the "fqe" and "dr" intervals (bootstrapped
            FQE): their spread covers FQE's fitting error as well as the
            episodes'. The interval is the estimate plus or minus Student's t
            quantile times the refits' standard deviation. Each refit costs
            one more fit. 0 (default): the intervals resample the episodes
            under the one fit and leave its error out. 1 is too few for a
            spread.

    Raises:
        ValueError: On an unknown estimator, missing recorded propensities
            with `behavior_logp="recorded"`, data that does not fit the
            policy's spaces, or `fqe_resample_fits` of 1 or below 0.
    """
    unknown = [name for name in estimators if name not in ALL_ESTIMATORS]
    if unknown:
        raise ValueError(
            f"Unknown off-policy estimators {unknown}; choose from {ALL_ESTIMATORS}."
        )
    if fqe_resample_fits < 0 or fqe_resample_fits == 1:
        raise ValueError(
            f"`fqe_resample_fits` must be 0 (no refits) or at least 2 (a spread "
            f"needs two fits), got {fqe_resample_fits}."
        )
    if behavior_logp not in ("auto", "recorded", "fitted"):
        raise ValueError(
            f"`behavior_logp` must be 'auto', 'recorded' or 'fitted', got "
            f"{behavior_logp!r}."
        )
    _check_actions(trajectories, policy.action_space)
    _check_observations(trajectories, observation_space)
    rewards, mask = trajectories.rewards, trajectories.mask
    discounts = gamma ** np.arange(rewards.shape[1], dtype=np.float64)
    result = PolicyValueEstimate(
        estimates={},
        num_episodes=trajectories.num_episodes,
        num_steps=trajectories.num_steps,
        logged_return=float((rewards @ discounts).mean()),
    )
    wanted = list(dict.fromkeys(estimators))
    if policy.deterministic and not policy.is_discrete:
        for name in [n for n in wanted if n in _NEEDS_RATIOS]:
            result.unavailable[name] = (
                "a deterministic policy over continuous actions has no "
                "probabilities of the logged actions"
            )
        wanted = [n for n in wanted if n not in _NEEDS_RATIOS]

    step_obs = trajectories.step_observations()
    step_actions = tree.map_structure(lambda x: x[mask], trajectories.actions)
    log_weights = None
    if any(name in _NEEDS_RATIOS for name in wanted):
        log_weights = _log_weights(
            policy,
            trajectories,
            step_obs,
            step_actions,
            observation_space,
            behavior_logp,
            max_weight,
            seed,
            result,
        )
        result.effective_sample_size = effective_sample_size(log_weights[:, -1])

    config = fqe_config or FQEConfig(seed=seed)

    def fit_q(data: Trajectories, fit_config: FQEConfig) -> _FittedValues:
        return _FittedValues(
            policy, data, gamma, observation_space, fit_config, wanted, on_fqe_update
        )

    fitted = None
    if any(name in _NEEDS_Q for name in wanted):
        fitted = fit_q(trajectories, config)

    def terms_for(indices: np.ndarray) -> Dict[str, np.ndarray]:
        terms = {}
        if any(name in IMPORTANCE_SAMPLING_ESTIMATORS for name in wanted):
            terms.update(episode_terms(rewards[indices], log_weights[indices], gamma))
        if fitted is not None:
            terms.update(fitted.terms(indices, rewards, mask, log_weights))
        return {name: terms[name] for name in wanted}

    def estimates_for(indices: np.ndarray) -> Dict[str, float]:
        return {name: float(v.mean()) for name, v in terms_for(indices).items()}

    result.episode_values = terms_for(np.arange(trajectories.num_episodes))
    result.episode_lengths = trajectories.lengths
    intervals = bootstrap_intervals(
        estimates_for,
        trajectories.num_episodes,
        num_resamples=num_bootstrap,
        confidence=confidence,
        seed=seed,
    )
    values = {name: float(v.mean()) for name, v in result.episode_values.items()}
    if fitted is not None and fqe_resample_fits:
        result.fqe_resample_fits = fqe_resample_fits
        result.fqe_refit_values = _refit_values(
            fit_q, trajectories, config, log_weights, fqe_resample_fits
        )
        intervals.update(refit_intervals(values, result.fqe_refit_values, confidence))
    for name in wanted:
        low, high = intervals[name]
        result.estimates[name] = EstimatorResult(values[name], low, high)
    return result


class _FittedValues:
    """One FQE fit and the per-trajectory terms of "fqe" and "dr" on it."""

    def __init__(
        self, policy, trajectories, gamma, observation_space, config, wanted, on_update
    ):
        self.gamma = gamma
        self.wanted = wanted
        fqe = FittedQEvaluation(policy, gamma, observation_space, config)
        fqe.fit(trajectories, on_update=on_update)
        self.initial_values = fqe.initial_state_values(trajectories)
        if "dr" in wanted:
            mask = trajectories.mask
            step_obs = trajectories.step_observations()
            step_actions = tree.map_structure(lambda x: x[mask], trajectories.actions)
            steps = np.nonzero(mask)[1]
            self.q_logged = np.zeros(mask.shape)
            self.state_values = np.zeros(mask.shape)
            self.q_logged[mask] = fqe.q_values(step_obs, step_actions, steps)
            self.state_values[mask] = fqe.state_values(step_obs, steps)

    def terms(self, indices, rewards, mask, log_weights) -> Dict[str, np.ndarray]:
        """Terms of the fitted trajectories at `indices`; `rewards`, `mask`
        and `log_weights` are those of the fitted trajectories."""
        terms = {}
        if "fqe" in self.wanted:
            terms["fqe"] = self.initial_values[indices]
        if "dr" in self.wanted:
            terms["dr"] = doubly_robust_values(
                rewards[indices],
                mask[indices],
                log_weights[indices],
                self.q_logged[indices],
                self.state_values[indices],
                self.gamma,
            )
        return terms


def _refit_values(
    fit_q, trajectories, config, log_weights, num_fits
) -> Dict[str, List[float]]:
    # Bootstrapped FQE: refit on episodes drawn with replacement; the spread
    # of the refits' estimates holds the fit's error and the episodes'.
    rng = np.random.default_rng([config.seed, 1])
    refit_values: Dict[str, List[float]] = {}
    for fit in range(num_fits):
        indices = rng.integers(0, trajectories.num_episodes, trajectories.num_episodes)
        resampled = trajectories.select(indices)
        fitted = fit_q(resampled, replace(config, seed=config.seed + 1 + fit))
        every = np.arange(len(indices))
        weights = None if log_weights is None else log_weights[indices]
        terms = fitted.terms(every, resampled.rewards, resampled.mask, weights)
        for name, term in terms.items():
            refit_values.setdefault(name, []).append(float(term.mean()))
    return refit_values


@PublicAPI(stability="alpha")
def refit_intervals(
    values: Dict[str, float],
    refit_values: Dict[str, Sequence[float]],
    confidence: float = 0.95,
) -> Dict[str, Tuple[float, float]]:
    """Intervals from bootstrapped refits: each value plus or minus Student's
    t quantile (refits - 1 degrees of freedom) times the refits' standard
    deviation.

    Also for differences: pass `{"diff": a - b}` and the paired differences
    of two estimates' `fqe_refit_values` to compare two policies.
    """
    from scipy.stats import t as student_t

    intervals = {}
    for name, refits in refit_values.items():
        quantile = float(student_t.ppf(0.5 + confidence / 2, len(refits) - 1))
        half_width = quantile * float(np.std(refits, ddof=1))
        intervals[name] = (values[name] - half_width, values[name] + half_width)
    return intervals


def _log_weights(
    policy,
    trajectories,
    step_obs,
    step_actions,
    observation_space,
    behavior_logp,
    max_weight,
    seed,
    result,
) -> np.ndarray:
    mask = trajectories.mask
    if behavior_logp == "recorded" and trajectories.behavior_logp is None:
        raise ValueError(
            "`behavior_logp='recorded'`, but some episodes have no recorded "
            "`action_logp` (extra model output); use 'fitted' or 'auto'."
        )
    if behavior_logp != "fitted" and trajectories.behavior_logp is not None:
        behavior = trajectories.behavior_logp[mask]
        result.behavior_logp_source = "recorded"
    else:
        behavior = fitted_behavior_logp(
            step_obs,
            step_actions,
            policy.action_space,
            observation_space,
            seed=seed,
        )
        result.behavior_logp_source = "fitted"
    log_ratios = np.zeros(mask.shape, np.float64)
    target = policy.logp(step_obs, step_actions)
    # 0 * log 0: a target probability of 0 gives ratio 0, whatever mu says.
    with np.errstate(invalid="ignore"):
        log_ratios[mask] = np.where(np.isneginf(target), -np.inf, target - behavior)
    return cumulative_log_weights(log_ratios, mask, max_weight)


@PublicAPI(stability="alpha")
def evaluate_module(
    module,
    episodes: Sequence[Any],
    *,
    gamma: float,
    policy_mapping_fn: Optional[Callable] = None,
    deterministic: bool = False,
    action_rescaling: Optional[ActionRescaling] = None,
    **kwargs,
) -> Dict[str, PolicyValueEstimate]:
    """Off-policy estimates for every module that acts in `episodes`.

    Args:
        module: A torch RLModule, a MultiRLModule, or a dict from module
            id to RLModule.
        episodes: Recorded `SingleAgentEpisode`s and/or `MultiAgentEpisode`s,
            whole (from their first step).
        gamma: The discount.
        policy_mapping_fn: Maps agents of multi-agent episodes without a
            recorded module to module ids.
        deterministic: Evaluate each module's deterministic action.
        action_rescaling: Maps the recorded actions to the units the modules
            act in (see `RLModuleTargetPolicy`); None if they share units.
        **kwargs: Passed to `estimate_policy_value`.

    Returns:
        Module id to its `PolicyValueEstimate`.

    Raises:
        ValueError: If the episodes name a module `module` does not have.
    """
    grouped = episodes_by_module(episodes, policy_mapping_fn)
    results = {}
    for module_id, module_episodes in grouped.items():
        # A MultiRLModule, or a dict of RLModules by module id.
        if hasattr(module, "keys"):
            if module_id not in module:
                raise ValueError(
                    f"The episodes hold data of module {module_id!r}, which the "
                    f"RLModule does not have (it has {sorted(module.keys())})."
                )
            sub_module = module[module_id]
        else:
            sub_module = module
        results[module_id] = estimate_policy_value(
            RLModuleTargetPolicy(
                sub_module,
                deterministic=deterministic,
                action_rescaling=action_rescaling,
            ),
            trajectories_from_episodes(module_episodes),
            gamma=gamma,
            observation_space=sub_module.observation_space,
            **kwargs,
        )
    return results
