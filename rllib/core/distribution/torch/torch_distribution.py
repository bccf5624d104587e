"""The fork's changes to ``ray.rllib.core.distribution.torch.torch_distribution``.

``TorchSquashedGaussian.to_deterministic`` gives the squashed mean: the
Gaussian's mean passed through tanh and scaled to ``[low, high]``, the action
the distribution's samples centre on. Upstream returned the mean *before*
the squash, so SAC, CQL and IQL policies acting with ``explore=False``
(evaluation, ``compute_single_action``-style inference) sent ``loc`` itself to
the EnvRunner, which then clipped it to the box: a mean of 1.5 acted as 1.0,
not tanh(1.5) = 0.91, and a policy whose mean sits inside the box acted with
its gain distorted near the bounds.

Behaviour change: deterministic actions of squashed-Gaussian policies.
Sampling, log-probabilities and every other distribution are unchanged.
"""

from ray.rllib.core.distribution.torch.torch_distribution import TorchDeterministic


def to_deterministic(self) -> "TorchDeterministic":
    """The squashed mean, in ``[low, high]``."""
    return TorchDeterministic(loc=self._squash(self.loc))


REPLACES = {
    "TorchSquashedGaussian.to_deterministic": to_deterministic,
}
