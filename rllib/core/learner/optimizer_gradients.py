"""Gradients for Learners that step one optimizer per loss term.

CQL's and IQL's torch Learners register several optimizers per module (policy,
Q-function(s), value function, temperature) and backpropagate each
optimizer's loss separately through one shared graph. With `num_learners >= 2`
two things must hold, and the Learners' former loops missed both:

- Every Learner runs the backward passes in the same order. DDP matches its
  all-reduces across Learners by the order they are issued; the loops went
  over a `set` of module ids, whose order depends on each process's hash seed,
  so one module's gradients could be averaged with another's (IQL's two
  modules drifted apart in about half the runs).
- A Learner applies averaged gradients. CQL copies each optimizer's gradients
  right after that optimizer's backward pass, before DDP's averaged values
  reach them (its Learners drifted apart even with one module).
"""

from typing import Dict, Hashable

from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.metrics import ALL_MODULES

torch, _ = try_import_torch()


def gradients_per_optimizer(
    learner, loss_per_module: Dict, *, copy: bool
) -> Dict[Hashable, "torch.Tensor"]:
    """Each optimizer's gradients from its own loss, modules in sorted order.

    Args:
        learner: A torch Learner whose `compute_loss_for_module` left one loss
            per optimizer in `learner._temp_losses`, keyed
            `(module_id, "<optimizer name>_loss")`.
        loss_per_module: The modules' total losses (only the keys are used).
        copy: Return copies of the gradients (as CQL's Learner did) rather
            than the parameters' `.grad` tensors (IQL's).

    Raises:
        ValueError: If a loss was left without an optimizer to step.
    """
    grads = {}
    for module_id in sorted(set(loss_per_module) - {ALL_MODULES}):
        for name, optimizer in learner.get_optimizers_for_module(module_id):
            optimizer.zero_grad(set_to_none=True)
            loss = learner._temp_losses.pop((module_id, name + "_loss"))
            # The optimizers' losses share one graph: keep it for the next.
            loss.backward(retain_graph=True)
            params = learner.filter_param_dict_for_optimizer(learner._params, optimizer)
            for ref, param in params.items():
                grad = param.grad.clone() if copy else param.grad
                grads[ref] = grads[ref] + grad if ref in grads else grad
    if learner._temp_losses:
        raise ValueError(
            f"Losses without an optimizer: {sorted(learner._temp_losses)}. Each "
            "`(module_id, '<name>_loss')` must name an optimizer of the module."
        )
    return grads


def average_over_learners(learner, grads: Dict) -> Dict:
    """Returns `grads` averaged over all Learners (unchanged for one Learner).

    One all-reduce of all gradients, concatenated in an order every Learner
    shares: modules by id, each module's parameters by name, then its
    temperature `curr_log_alpha` and CQL's Lagrangian weight
    `curr_log_alpha_prime` where it has them (parameter refs are objects
    that differ between processes).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return grads
    world_size = dist.get_world_size()
    if world_size < 2:
        return grads
    log_alphas = getattr(learner, "curr_log_alpha", {})
    log_alpha_primes = getattr(learner, "curr_log_alpha_prime", {})
    refs = []
    for module_id in sorted(learner.module.keys()):
        module = learner.module[module_id].unwrapped()
        params = [param for _, param in sorted(module.named_parameters())]
        if module_id in log_alphas:
            params.append(log_alphas[module_id])
        if module_id in log_alpha_primes:
            params.append(log_alpha_primes[module_id])
        refs += [learner.get_param_ref(param) for param in params]
    refs = [ref for ref in refs if ref in grads]
    if len(refs) != len(grads):
        raise ValueError(
            f"{len(grads) - len(refs)} gradient(s) belong to no module parameter "
            "or temperature; their order across Learners is unknown."
        )
    flat = torch.cat([grads[ref].reshape(-1) for ref in refs])
    dist.all_reduce(flat)
    flat /= world_size
    averaged, offset = dict(grads), 0
    for ref in refs:
        size = grads[ref].numel()
        averaged[ref] = flat[offset : offset + size].view_as(grads[ref])
        offset += size
    return averaged
