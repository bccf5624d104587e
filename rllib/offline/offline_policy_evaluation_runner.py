"""The fork's changes to ``ray.rllib.offline.offline_policy_evaluation_runner``.

Ray 2.60's importance-sampling evaluation (``offline_evaluation_type`` "is"
or "pdis") compares the target policy's probability of a freshly sampled
action with the behaviour probability of the logged one, multiplies
undiscounted ratios, reads episodes as the sampled chunks of the training
buffer (which drop ``action_logp``, so it fails with ``KeyError``) and only
knows the default module. Here:

- ``OfflinePolicyPreEvaluator.__call__``: each row becomes one whole episode
  (``SingleAgentEpisode`` or ``MultiAgentEpisode``), recorded extra model
  outputs included, so every row carries all its estimate needs.
- ``OfflinePolicyEvaluationRunner._create_batch_iterator``: yields those
  episode objects as they are.
- ``OfflinePolicyEvaluationRunner._evaluate``: runs
  :mod:`rllib.offline.off_policy_estimation` per module on the episodes of
  this round: the target policy's probabilities of the *logged* actions,
  cumulative ratios, discounted with ``config.gamma``, with the logged
  actions in the module's units (``input_action_units``). Behaviour
  probabilities come from recorded ``action_logp`` when every episode has
  them, else from a behaviour model fitted to the data.
- ``OfflinePolicyEvaluationTypes``: adds "wis", "wpdis", "fqe" and "dr".

Metrics: upstream's per-episode keys keep their meaning, each episode's
"return" being its term of the configured estimator (so
``episode_return_mean`` is the estimate while the episodes fit the metrics
window), and ``off_policy_estimation/<module>/``
holds every estimate computed this round with its bootstrap interval: the
four importance-sampling estimators always (they share the ratios), "fqe"
and "dr" when the configured type is one of them.
"""

import math
from enum import Enum
from typing import Dict, Iterable, List, Optional

import numpy as np
from ray.rllib.core import ALL_MODULES
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.offline.offline_policy_evaluation_runner import (
    MiniBatchEpisodeRayDataIterator,
    OfflinePolicyPreEvaluator,
)
from ray.rllib.utils.metrics import (
    DATASET_NUM_ITERS_EVALUATED,
    DATASET_NUM_ITERS_EVALUATED_LIFETIME,
    EPISODE_LEN_MAX,
    EPISODE_LEN_MEAN,
    EPISODE_LEN_MIN,
    EPISODE_RETURN_MAX,
    EPISODE_RETURN_MEAN,
    EPISODE_RETURN_MIN,
)

from rllib.offline.episode_files.action_units import (
    ActionRescaling,
    module_action_units,
)
from rllib.offline.episode_files.reader import decode_episode
from rllib.offline.off_policy_estimation import FQEConfig, evaluate_module
from rllib.offline.off_policy_estimation.importance_sampling import (
    IMPORTANCE_SAMPLING_ESTIMATORS,
)

#: Where each round's estimates go in the runner's metrics, and the
#: `learner_config_dict` key of their settings: a dict with "fqe" (a dict of
#: `FQEConfig` fields, e.g. `{"num_updates": 5000, "horizon": 500}`),
#: "num_bootstrap", "confidence", "max_weight" and "deterministic" (evaluate
#: the greedy/mean action, as evaluation EnvRunners do with `explore=False`).
OFF_POLICY_ESTIMATION = "off_policy_estimation"
SETTINGS_KEY = OFF_POLICY_ESTIMATION


class OfflinePolicyEvaluationTypes(str, Enum):
    """Offline evaluation types (``config.evaluation(offline_evaluation_type=)``).

    EVAL_LOSS: The training loss on held-out data.
    IS: Per-episode importance sampling.
    PDIS: Per-decision importance sampling.
    WIS: Weighted (self-normalized) IS.
    WPDIS: Weighted per-decision IS.
    FQE: Fitted Q evaluation.
    DR: Doubly robust on FQE's Q-function.
    """

    EVAL_LOSS = "eval_loss"
    IS = "is"
    PDIS = "pdis"
    WIS = "wis"
    WPDIS = "wpdis"
    FQE = "fqe"
    DR = "dr"


def _pre_evaluate(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Turns each row of `batch` into one whole episode object.

    Args:
        self: The ``OfflinePolicyPreEvaluator``.
        batch: A Ray Data batch of recorded rows.
    """
    if self.config.input_read_episodes:
        episodes = [decode_episode(payload) for payload in batch["item"]]
    elif self.config.input_read_sample_batches:
        episodes = OfflinePolicyPreEvaluator._map_sample_batch_to_episode(
            self._is_multi_agent,
            batch,
            to_numpy=True,
            input_compress_columns=self.config.input_compress_columns,
        )["episodes"]
    else:
        episodes = self._map_to_episodes(batch, to_numpy=True)["episodes"]
    column = np.empty(len(episodes), dtype=object)
    column[:] = episodes
    return {"episodes": column}


class EpisodeObjectIterator(MiniBatchEpisodeRayDataIterator):
    """Yields each minibatch's episodes as a list of episode objects."""

    def _collate_fn(self, _batch):
        return list(_batch["episodes"])


def _create_batch_iterator(self, **kwargs) -> Iterable:
    """The runner's iterator over its shard, yielding lists of episodes.

    Args:
        self: The ``OfflinePolicyEvaluationRunner``.
        **kwargs: Passed to ``DataIterator.iter_batches``.
    """
    return EpisodeObjectIterator(
        iterator=self._dataset_iterator,
        device=self._device,
        minibatch_size=self.config.offline_eval_batch_size_per_runner,
        num_iters=self.config.dataset_num_iters_per_eval_runner,
        **kwargs,
    )


def _num_steps(episodes: List) -> int:
    return sum(
        ep.env_steps() if isinstance(ep, MultiAgentEpisode) else len(ep)
        for ep in episodes
    )


def _action_rescaling(config) -> Optional[ActionRescaling]:
    """The episodes are decoded as recorded: maps their actions to the
    modules' units where the data's units (`input_action_units`, taken from
    the files at `build_algo()`) differ."""
    units = getattr(config, "input_action_units", None)
    target = module_action_units(config.normalize_actions)
    if units is None or units == target:
        return None
    return ActionRescaling(units, target)


def _estimation_settings(self) -> Dict:
    """`estimate_policy_value` settings from `learner_config_dict`."""
    settings = dict(self.config.learner_config_dict.get(SETTINGS_KEY) or {})
    seed = self.config.seed or 0
    fqe = {"seed": seed, **settings.pop("fqe", {})}
    fqe.setdefault("device", str(self._device) if self._device is not None else "cpu")
    allowed = {"num_bootstrap", "confidence", "max_weight", "deterministic"}
    unknown = set(settings) - allowed
    if unknown:
        raise ValueError(
            f"`learner_config_dict[{SETTINGS_KEY!r}]` has unknown keys "
            f"{sorted(unknown)}; it takes 'fqe' (FQEConfig fields), "
            "'num_bootstrap', 'confidence', 'max_weight' and 'deterministic'."
        )
    return {"fqe_config": FQEConfig(**fqe), "seed": seed, **settings}


def _log_episode(self, module_id: str, length: int, value: float) -> None:
    """The runner's per-episode metrics, with the headline estimator's term of
    the episode as its return (their mean over episodes is the estimate)."""
    window = max(
        1,
        math.ceil(
            self.config.metrics_num_episodes_for_smoothing
            / (self.config.num_offline_eval_runners or 1)
        ),
    )
    for key, number in ((EPISODE_LEN_MEAN, length), (EPISODE_RETURN_MEAN, value)):
        self.metrics.log_value(key, number, window=window)
    for key, number, reduce in (
        (EPISODE_LEN_MIN, length, "min"),
        (EPISODE_LEN_MAX, length, "max"),
        (EPISODE_RETURN_MIN, value, "min"),
        (EPISODE_RETURN_MAX, value, "max"),
    ):
        self.metrics.log_value(key, number, reduce=reduce, window=window)
    self.metrics.log_value(
        ("module_episode_return_mean", module_id), value, window=window
    )


def _evaluate(self, explore: bool, train: bool) -> Dict:
    """Estimates each module's discounted return from this round's episodes.

    Args:
        self: The ``OfflinePolicyEvaluationRunner``.
        explore: Unused (the target policy is the module's inference action
            distribution, as before).
        train: Unused.
    """
    episodes, iterations = [], 0
    for minibatch in self._batch_iterator:
        episodes.extend(minibatch)
        iterations += 1
        self._log_batch_metrics(len(minibatch), _num_steps(minibatch))
    headline = self._offline_evaluation_type.value
    estimators = list(IMPORTANCE_SAMPLING_ESTIMATORS)
    if headline in ("fqe", "dr"):
        estimators += ["fqe", "dr"]
    results = evaluate_module(
        self.module,
        episodes,
        gamma=self.config.gamma,
        policy_mapping_fn=self.config.policy_mapping_fn,
        estimators=estimators,
        action_rescaling=_action_rescaling(self.config),
        **_estimation_settings(self),
    )
    for module_id, result in results.items():
        key = (OFF_POLICY_ESTIMATION, module_id)
        for name, estimate in result.estimates.items():
            for suffix, value in (
                ("", estimate.value),
                ("_ci_low", estimate.low),
                ("_ci_high", estimate.high),
            ):
                self.metrics.log_value(key + (name + suffix,), value, window=1)
        self.metrics.log_value(
            key + ("behavior_logp_recorded",),
            float(result.behavior_logp_source == "recorded"),
            window=1,
        )
        for name in ("effective_sample_size", "num_episodes", "logged_return"):
            self.metrics.log_value(key + (name,), getattr(result, name), window=1)
        for length, value in zip(
            result.episode_lengths, result.episode_values[headline]
        ):
            _log_episode(self, module_id, int(length), float(value))
    self.metrics.log_value(
        (ALL_MODULES, DATASET_NUM_ITERS_EVALUATED), iterations, reduce="sum"
    )
    self.metrics.log_value(
        (ALL_MODULES, DATASET_NUM_ITERS_EVALUATED_LIFETIME),
        iterations,
        reduce="lifetime_sum",
    )
    return self.metrics.reduce()


#: Upstream names in ``ray.rllib.offline.offline_policy_evaluation_runner``
#: that this module replaces.
REPLACES = {
    "OfflinePolicyEvaluationTypes": OfflinePolicyEvaluationTypes,
    "OfflinePolicyPreEvaluator.__call__": _pre_evaluate,
    "OfflinePolicyEvaluationRunner._create_batch_iterator": _create_batch_iterator,
    "OfflinePolicyEvaluationRunner._evaluate": _evaluate,
}
