"""Off-policy estimation: a policy's value from recorded episodes, without an
environment (importance sampling, fitted Q evaluation, doubly robust).
"""

from rllib.offline.off_policy_estimation.estimate import (
    ALL_ESTIMATORS,
    EstimatorResult,
    PolicyValueEstimate,
    estimate_policy_value,
    evaluate_module,
    refit_intervals,
)
from rllib.offline.off_policy_estimation.fitted_q_evaluation import (
    FittedQEvaluation,
    FQEConfig,
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

__all__ = [
    "ALL_ESTIMATORS",
    "EstimatorResult",
    "FQEConfig",
    "FittedQEvaluation",
    "PolicyValueEstimate",
    "RLModuleTargetPolicy",
    "TargetPolicy",
    "Trajectories",
    "episodes_by_module",
    "estimate_policy_value",
    "evaluate_module",
    "refit_intervals",
    "trajectories_from_episodes",
]
