"""The fork's changes to ``ray.rllib.algorithms.cql.torch.cql_torch_learner``.

``CQLTorchLearner.compute_loss_for_module`` computes upstream's loss (SAC's
actor, critic and alpha losses, with behaviour cloning for the first
``bc_iters`` updates, plus the entropy form of the CQL regularizer) with one
correction, a behaviour change:

- The Bellman target bootstraps with ``gamma ** n_step`` of each row, as
  SAC's learner does: with ``n_step > 1`` the row's reward is already the
  discounted sum of ``n_step`` rewards, and upstream's ``gamma`` discounted
  the bootstrap as if one step had passed. Identical for ``n_step=1`` (CQL's
  default).

The CQL term weighs the random actions by upstream's density, ``(1/2)^d``:
the fork's module draws them on ``[-1, 1]^d``, where the policy acts
(``rllib.algorithms.cql.torch.default_cql_torch_rl_module``).

With ``lagrangian=True`` the conservative weight is learned, as in the CQL
paper's Lagrangian form (ray 2.60's new stack ignores the setting): each
critic's penalty enters its loss as ``alpha' * (penalty - lagrangian_thresh)``
with ``alpha' = exp(log_alpha')`` (clamped to [0, 1e6]), and ``log_alpha'``
ascends the penalty's excess over the threshold with its own Adam optimizer
(``alpha_prime``, at ``critic_lr``, starting from ``alpha' = 1``): it grows
while the critics value the sampled actions more than the logged ones by more
than the threshold, and shrinks below it. ``min_q_weight`` still scales the
penalty.

``CQLTorchLearner.configure_optimizers_for_module`` registers that optimizer
(SAC's optimizers are registered as before); ``CQLTorchLearner.get_state`` /
``set_state`` keep ``log_alpha'`` in the Learner's state (under
:data:`LOG_ALPHA_PRIME_KEY`, restored in place), so a restored Learner goes
on from the learned weight.

``CQLTorchLearner.compute_gradients`` runs the backward passes in the same
module order on every Learner and averages the gradients over the Learners
(``num_learners >= 2``); see ``rllib.core.learner.optimizer_gradients``.
Upstream's Learners drifted apart (48 of 57 weight tensors differed after six
updates with two Learners and one module, in both modes).
"""

from typing import Dict

import numpy as np
from ray.rllib.algorithms.cql.cql import CQLConfig
from ray.rllib.algorithms.cql.torch.cql_torch_learner import CQLTorchLearner
from ray.rllib.algorithms.sac.sac_learner import (
    LOGPS_KEY,
    QF_LOSS_KEY,
    QF_MAX_KEY,
    QF_MEAN_KEY,
    QF_MIN_KEY,
    QF_PREDS,
    QF_TWIN_LOSS_KEY,
    QF_TWIN_PREDS,
    TD_ERROR_MEAN_KEY,
)
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.metrics import ALL_MODULES
from ray.rllib.utils.typing import ModuleID, TensorType
from ray.tune.result import TRAINING_ITERATION

from rllib.algorithms.sac.torch.sac_torch_learner import (
    restore_variables,
    variables_state,
)
from rllib.core.learner.optimizer_gradients import (
    average_over_learners,
    gradients_per_optimizer,
)

torch, _ = try_import_torch()


#: The optimizer of the Lagrangian conservative weight, and its loss key.
ALPHA_PRIME = "alpha_prime"
ALPHA_PRIME_LOSS_KEY = "alpha_prime_loss"
#: Upper bound of the Lagrangian conservative weight.
MAX_ALPHA_PRIME = 1e6
#: The key of the Lagrangian weights (``log_alpha'``) in the Learner's state.
LOG_ALPHA_PRIME_KEY = "curr_log_alpha_prime"


def configure_optimizers_for_module(
    self, module_id: ModuleID, config: CQLConfig = None
) -> None:
    """SAC's optimizers; with `lagrangian=True` also `alpha_prime`'s."""
    super(CQLTorchLearner, self).configure_optimizers_for_module(
        module_id=module_id, config=config
    )
    if not config.lagrangian:
        return
    if not hasattr(self, "curr_log_alpha_prime"):
        self.curr_log_alpha_prime = {}
    # alpha' = 1 at the start.
    log_alpha_prime = self._get_tensor_variable([np.float32(0.0)], trainable=True)
    self.curr_log_alpha_prime[module_id] = log_alpha_prime
    self.register_optimizer(
        module_id=module_id,
        optimizer_name=ALPHA_PRIME,
        optimizer=torch.optim.Adam([log_alpha_prime], eps=1e-7),
        params=[log_alpha_prime],
        lr_or_lr_schedule=config.critic_lr,
    )


def random_action_log_density(action_space, device) -> "torch.Tensor":
    """Log-density of the uniform distribution on [-1, 1]^d, where the
    module draws the random actions (`default_cql_torch_rl_module`)."""
    dims = int(np.prod(action_space.shape))
    return torch.log(torch.tensor(0.5**dims, dtype=torch.float32, device=device))


def bootstrap_discount(gamma: float, batch: Dict) -> TensorType:
    """``gamma ** n_step`` per row; ``gamma`` where the batch has no n-steps."""
    if "n_step" not in batch:
        return gamma
    return gamma ** batch["n_step"].float()


def compute_loss_for_module(
    self,
    *,
    module_id: ModuleID,
    config: CQLConfig,
    batch: Dict,
    fwd_out: Dict[str, TensorType],
) -> TensorType:
    """CQL's loss for one module (see the module docstring for the changes)."""
    # The number of loss calls so far decides between BC and SAC actor losses.
    self.metrics.log_value((ALL_MODULES, TRAINING_ITERATION), 1, reduce="sum")
    module = self.module[module_id]
    log_alpha = self.curr_log_alpha[module_id]
    alpha = torch.exp(log_alpha)

    # Temperature: pull the policy's entropy toward the target entropy.
    alpha_loss = -torch.mean(
        log_alpha
        * (fwd_out["logp_resampled"].detach() + self.target_entropy[module_id])
    )

    num_updates = self.metrics.peek((ALL_MODULES, TRAINING_ITERATION), default=0)
    if num_updates >= config.bc_iters:
        policy_term = fwd_out["q_curr"]
    else:
        # Behaviour cloning: the log-likelihood of the logged actions.
        policy_dist = module.get_train_action_dist_cls().from_logits(
            fwd_out[Columns.ACTION_DIST_INPUTS]
        )
        policy_term = policy_dist.logp(batch[Columns.ACTIONS])
    actor_loss = torch.mean(alpha.detach() * fwd_out["logp_resampled"] - policy_term)

    # Bellman target from the target network's value of the next observation.
    next_value = fwd_out["q_target_next"]
    if not config.deterministic_backup:
        next_value = next_value - alpha.detach() * fwd_out["logp_next_resampled"]
    not_terminated = 1.0 - batch[Columns.TERMINATEDS].float()
    target = (
        batch[Columns.REWARDS]
        + bootstrap_discount(config.gamma, batch) * not_terminated * next_value
    ).detach()

    random_density = random_action_log_density(
        module.action_space, fwd_out["actions_curr_repeat"].device
    )
    alpha_prime = None
    if config.lagrangian:
        alpha_prime = torch.clamp(
            torch.exp(self.curr_log_alpha_prime[module_id]), 0.0, MAX_ALPHA_PRIME
        )

    def critic_loss_of(q_selected, q_rand, q_next, q_curr):
        """SAC's squared TD error plus CQL's conservative penalty."""
        td_loss = torch.nn.functional.mse_loss(q_selected, target)
        # Log-sum-exp over the sampled actions, each Q-value less the
        # log-density it was drawn with (the entropy form of CQL).
        sampled = torch.cat(
            [
                q_rand - random_density,
                q_next - fwd_out["logps_next_repeat"].detach(),
                q_curr - fwd_out["logps_curr_repeat"].detach(),
            ],
            dim=1,
        )
        penalty = (
            torch.logsumexp(sampled / config.temperature, dim=1).mean()
            * config.min_q_weight
            * config.temperature
        ) - q_selected.mean() * config.min_q_weight
        if alpha_prime is None:
            return td_loss + penalty, penalty
        # The Lagrangian form: the weight times the penalty's excess.
        excess = penalty - config.lagrangian_thresh
        return td_loss + alpha_prime.detach()[0] * excess, penalty

    critic_loss, cql_loss = critic_loss_of(
        fwd_out[QF_PREDS],
        fwd_out["q_rand_repeat"],
        fwd_out["q_next_repeat"],
        fwd_out["q_curr_repeat"],
    )
    td_error = torch.abs(fwd_out[QF_PREDS] - target)
    total_loss = actor_loss + critic_loss + alpha_loss
    penalties = [cql_loss]
    if config.twin_q:
        critic_twin_loss, twin_penalty = critic_loss_of(
            fwd_out[QF_TWIN_PREDS],
            fwd_out["q_twin_rand_repeat"],
            fwd_out["q_twin_next_repeat"],
            fwd_out["q_twin_curr_repeat"],
        )
        td_error = 0.5 * (td_error + torch.abs(fwd_out[QF_TWIN_PREDS] - target))
        # The two critics weigh half each in the total (summed in this order
        # so the total rounds as the former loss did).
        total_loss += 0.5 * critic_twin_loss - 0.5 * critic_loss
        penalties.append(twin_penalty)
    if alpha_prime is not None:
        # Dual ascent: lowering this loss raises alpha' while the critics'
        # mean penalty exceeds the threshold.
        excess = torch.stack(penalties).mean().detach() - config.lagrangian_thresh
        alpha_prime_loss = -(alpha_prime[0] * excess)
        total_loss = total_loss + alpha_prime_loss
        self.metrics.log_dict(
            {
                ALPHA_PRIME_LOSS_KEY: alpha_prime_loss,
                "alpha_prime_value": alpha_prime[0],
            },
            key=module_id,
            window=1,
        )
        self._temp_losses[(module_id, ALPHA_PRIME_LOSS_KEY)] = alpha_prime_loss

    self.metrics.log_dict(
        {
            POLICY_LOSS_KEY: actor_loss,
            QF_LOSS_KEY: critic_loss,
            "cql_loss": cql_loss,
            "alpha_loss": alpha_loss,
            "alpha_value": alpha[0],
            "log_alpha_value": log_alpha[0],
            "target_entropy": self.target_entropy[module_id],
            LOGPS_KEY: torch.mean(fwd_out["logp_resampled"]),
            QF_MEAN_KEY: torch.mean(fwd_out["q_curr_repeat"]),
            QF_MAX_KEY: torch.max(fwd_out["q_curr_repeat"]),
            QF_MIN_KEY: torch.min(fwd_out["q_curr_repeat"]),
            TD_ERROR_MEAN_KEY: torch.mean(td_error),
        },
        key=module_id,
        window=1,
    )
    # `compute_gradients` backpropagates each optimizer's own loss.
    self._temp_losses[(module_id, POLICY_LOSS_KEY)] = actor_loss
    self._temp_losses[(module_id, QF_LOSS_KEY)] = critic_loss
    self._temp_losses[(module_id, "alpha_loss")] = alpha_loss
    if config.twin_q:
        self.metrics.log_value(
            key=(module_id, QF_TWIN_LOSS_KEY), value=critic_twin_loss, window=1
        )
        self._temp_losses[(module_id, QF_TWIN_LOSS_KEY)] = critic_twin_loss
    return total_loss


def compute_gradients(self, loss_per_module: Dict[ModuleID, TensorType], **kwargs):
    """Each optimizer's gradients from its own loss, averaged over the Learners."""
    grads = gradients_per_optimizer(self, loss_per_module, copy=True)
    return average_over_learners(self, grads)


def get_state(self, components=None, *, not_components=None, **kwargs):
    """The Learner's state plus the Lagrangian weights (`lagrangian=True`)."""
    state = _super(self).get_state(components, not_components=not_components, **kwargs)
    log_alpha_prime = getattr(self, "curr_log_alpha_prime", None)
    if log_alpha_prime and self._check_component(
        LOG_ALPHA_PRIME_KEY, components, not_components
    ):
        state[LOG_ALPHA_PRIME_KEY] = variables_state(log_alpha_prime)
    return state


def set_state(self, state) -> None:
    """The Learner's `set_state`, then the Lagrangian weights it carries."""
    _super(self).set_state(state)
    log_alpha_prime = getattr(self, "curr_log_alpha_prime", None)
    if log_alpha_prime and LOG_ALPHA_PRIME_KEY in state:
        restore_variables(log_alpha_prime, state[LOG_ALPHA_PRIME_KEY])


def _super(learner):
    """`super()` of `CQLTorchLearner` for `learner` (the methods it inherits)."""
    return super(CQLTorchLearner, learner)


REPLACES = {
    "CQLTorchLearner.get_state": get_state,
    "CQLTorchLearner.set_state": set_state,
    "CQLTorchLearner.configure_optimizers_for_module": (
        configure_optimizers_for_module
    ),
    "CQLTorchLearner.compute_loss_for_module": compute_loss_for_module,
    "CQLTorchLearner.compute_gradients": compute_gradients,
}
