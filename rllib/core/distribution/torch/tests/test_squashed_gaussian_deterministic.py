"""`TorchSquashedGaussian.to_deterministic` acts at the squashed mean, inside
the action box (no Ray)."""

import sys

import numpy as np
import pytest
import torch
from ray.rllib.core.distribution.torch.torch_distribution import (
    TorchSquashedGaussian,
)


def test_deterministic_action_is_the_squashed_mean():
    loc = torch.tensor([[-3.0, -0.4, 0.0, 0.5, 2.0]])
    logits = torch.cat([loc, torch.zeros_like(loc)], dim=-1)
    dist = TorchSquashedGaussian.from_logits(logits)
    np.testing.assert_allclose(
        dist.to_deterministic().sample().numpy(), np.tanh(loc.numpy()), rtol=1e-6
    )
    boxed = TorchSquashedGaussian.from_logits(logits, low=-2.0, high=4.0)
    np.testing.assert_allclose(
        boxed.to_deterministic().sample().numpy(),
        -2.0 + (np.tanh(loc.numpy()) + 1.0) * 3.0,
        rtol=1e-6,
    )
    # The distribution's samples centre on it.
    narrow = TorchSquashedGaussian.from_logits(
        torch.cat([loc, torch.full_like(loc, -5.0)], dim=-1)
    )
    torch.manual_seed(0)
    samples = narrow.sample(sample_shape=(2000,))
    np.testing.assert_allclose(samples.mean(0).numpy(), np.tanh(loc.numpy()), atol=0.01)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
