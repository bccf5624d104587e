"""The fork's changes to ``ray.rllib.algorithms.iql.torch.iql_torch_learner``.

``IQLTorchLearner.compute_gradients`` backpropagates each optimizer's loss as
upstream does, with the modules in sorted order, the same on every Learner
(see ``rllib.core.learner.optimizer_gradients``). Upstream loops over a
`set` of module ids, ordered by each process's hash seed: with two Learners
and two modules, DDP averaged one module's gradients with the other's in
about half the runs and the Learners' modules drifted apart. One module, or
one Learner: the same gradients as upstream.
"""

from typing import Dict

from ray.rllib.utils.typing import ModuleID, TensorType

from rllib.core.learner.optimizer_gradients import gradients_per_optimizer


def compute_gradients(self, loss_per_module: Dict[ModuleID, TensorType], **kwargs):
    """Each optimizer's gradients from its own loss, modules in sorted order."""
    return gradients_per_optimizer(self, loss_per_module, copy=False)


REPLACES = {
    "IQLTorchLearner.compute_gradients": compute_gradients,
}
