"""Device-aware GAE: live weights, device placement, masked standardization."""

import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from rllib.connectors.learner.general_advantage_estimation import (
    GeneralAdvantageEstimation,
    add_advantages_to_module_batch,
    standardize,
)
from rllib.utils.postprocessing.tests.test_value_predictions import (
    reference_value_targets,
)
from rllib.utils.tests.devices import DEVICES


def _module(device):
    env = gym.make("CartPole-v1")
    spec = MARWILConfig().get_default_rl_module_spec()
    spec.observation_space = env.observation_space
    spec.action_space = env.action_space
    spec.model_config = {"fcnet_hiddens": [16]}
    return spec.build().to(device)


def _batch(n, device, seed=0):
    rng = np.random.default_rng(seed)
    terminateds = np.zeros(n, dtype=np.float32)
    truncateds = np.zeros(n, dtype=np.float32)
    terminateds[n // 2] = 1.0
    truncateds[-2] = 1.0
    loss_mask = np.ones(n, dtype=bool)
    loss_mask[[n // 2 + 1, n - 1]] = False
    columns = {
        Columns.OBS: rng.normal(size=(n, 4)).astype(np.float32),
        Columns.REWARDS: rng.normal(size=n).astype(np.float32),
        Columns.TERMINATEDS: terminateds,
        Columns.TRUNCATEDS: truncateds,
        Columns.LOSS_MASK: loss_mask,
    }
    return {k: torch.from_numpy(v).to(device) for k, v in columns.items()}


@pytest.mark.parametrize("device", DEVICES)
def test_results_match_reference_and_stay_on_device(device):
    module = _module(device)
    batch = _batch(12, device)
    add_advantages_to_module_batch(module, batch, gamma=0.9, lambda_=0.8)

    for key in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS):
        assert isinstance(batch[key], torch.Tensor)
        assert batch[key].device.type == device
        assert not batch[key].requires_grad

    with torch.no_grad():
        values = module.compute_values(batch).cpu().numpy()
    expected = reference_value_targets(
        values,
        batch[Columns.REWARDS].cpu().numpy(),
        batch[Columns.TERMINATEDS].cpu().numpy(),
        batch[Columns.TRUNCATEDS].cpu().numpy(),
        0.9,
        0.8,
    )
    torch.testing.assert_close(
        batch[Postprocessing.VALUE_TARGETS].cpu(), torch.from_numpy(expected)
    )
    valid = batch[Columns.LOSS_MASK].cpu().numpy()
    raw = expected - values
    standardized = (raw - raw[valid].mean()) / raw[valid].std()
    torch.testing.assert_close(
        batch[Postprocessing.ADVANTAGES].cpu(),
        torch.from_numpy(standardized.astype(np.float32)),
    )


def test_changing_weights_changes_targets():
    module = _module("cpu")
    before = _batch(20, "cpu")
    add_advantages_to_module_batch(module, before, gamma=0.99, lambda_=1.0)
    with torch.no_grad():
        for param in module.parameters():
            param.add_(0.5)
    after = _batch(20, "cpu")
    add_advantages_to_module_batch(module, after, gamma=0.99, lambda_=1.0)
    assert not torch.allclose(
        before[Postprocessing.VALUE_TARGETS], after[Postprocessing.VALUE_TARGETS]
    )


def test_standardize_ignores_masked_steps():
    x = torch.tensor([1.0, 2.0, 3.0, 1000.0, -500.0])
    valid = torch.tensor([True, True, True, False, False])
    out = standardize(x, valid)
    torch.testing.assert_close(out[:3], (x[:3] - 2.0) / x[:3].std(unbiased=False))
    # Changing masked values does not move the statistics.
    x2 = x.clone()
    x2[3:] = 7.0
    torch.testing.assert_close(standardize(x2, valid)[:3], out[:3])
    # Without a mask all steps count.
    torch.testing.assert_close(standardize(x), (x - x.mean()) / x.std(unbiased=False))


class _DDPWrapper(torch.nn.Module):
    """Stands in for `TorchDDPRLModule`: no `ValueFunctionAPI`, `unwrapped()`."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def unwrapped(self):
        return self.module


def test_ddp_wrapped_module_is_unwrapped():
    """With `num_learners >= 2` every module arrives wrapped for DDP."""
    module = _module("cpu")
    plain, wrapped = _batch(10, "cpu"), _batch(10, "cpu")
    add_advantages_to_module_batch(module, plain, gamma=0.9, lambda_=0.8)
    add_advantages_to_module_batch(_DDPWrapper(module), wrapped, gamma=0.9, lambda_=0.8)
    for key in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS):
        torch.testing.assert_close(wrapped[key], plain[key])
    # The connector piece too: it skipped wrapped modules before.
    episodes_batch = {"p0": _batch(10, "cpu")}
    GeneralAdvantageEstimation(gamma=0.9, lambda_=0.8)(
        rl_module={"p0": _DDPWrapper(module)},
        episodes=[],
        batch=episodes_batch,
    )
    torch.testing.assert_close(
        episodes_batch["p0"][Postprocessing.VALUE_TARGETS],
        plain[Postprocessing.VALUE_TARGETS],
    )


class _PaddedValueModule(torch.nn.Module):
    """Stands in for a stateful module: values come zero-padded as (B, T)."""

    model_config = {"max_seq_len": 4}

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def is_stateful(self):
        return True

    def compute_values(self, batch):
        return batch["v_in"] * self.scale


def test_zero_padded_batch_is_unpadded_and_repadded():
    # Episodes of 6 and 3 steps, chunks of max_seq_len=4: rows 4, 2 | 3.
    episode_lens = [6, 3]
    rng = np.random.default_rng(0)
    flat = {
        "v_in": rng.normal(size=9).astype(np.float32),
        Columns.REWARDS: rng.normal(size=9).astype(np.float32),
        Columns.TERMINATEDS: np.array([0, 0, 0, 0, 0, 1, 0, 0, 0], np.float32),
        Columns.TRUNCATEDS: np.array([0, 0, 0, 0, 0, 0, 0, 0, 1], np.float32),
    }
    rows = [(0, 4), (4, 6), (6, 9)]

    def pad(x):
        out = np.zeros((3, 4), dtype=np.float32)
        for i, (a, b) in enumerate(rows):
            out[i, : b - a] = x[a:b]
        return torch.from_numpy(out)

    batch = {k: pad(v) for k, v in flat.items()}
    add_advantages_to_module_batch(
        _PaddedValueModule(), batch, gamma=0.9, lambda_=0.7, episode_lens=episode_lens
    )
    expected = reference_value_targets(
        flat["v_in"] * 2.0,
        flat[Columns.REWARDS],
        flat[Columns.TERMINATEDS],
        flat[Columns.TRUNCATEDS],
        0.9,
        0.7,
    )
    torch.testing.assert_close(batch[Postprocessing.VALUE_TARGETS], pad(expected))
    assert batch[Postprocessing.ADVANTAGES].shape == (3, 4)
    assert float(batch[Postprocessing.ADVANTAGES][1, 2:].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="episode lengths"):
        add_advantages_to_module_batch(
            _PaddedValueModule(), dict(batch), gamma=0.9, lambda_=0.7
        )


def test_connector_is_the_pipeline_class():
    from ray.rllib.connectors.learner import GeneralAdvantageEstimation as upstream

    assert upstream is GeneralAdvantageEstimation


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
