"""Value targets from row inputs: the values, the live module, any row order.

Rows are drawn from random CartPole-like episodes with their value-target
inputs (`rllib.utils.postprocessing.bootstrapped_returns`); the targets are
checked against `R + discount * V(bootstrap_obs)` computed by hand, and must
not change when the batch is shuffled, cut into odd pieces or split as Ray
Data would split it across Learners.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from rllib.core.learner.value_targets import add_value_targets, standardize
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    RETURNS_TO_BOOTSTRAP,
    bootstrap_steps,
    returns_to_go,
    value_target_inputs,
)
from rllib.utils.tests.devices import DEVICES


def _module(device, seed=0):
    torch.manual_seed(seed)
    env = gym.make("CartPole-v1")
    spec = MARWILConfig().get_default_rl_module_spec()
    spec.observation_space = env.observation_space
    spec.action_space = env.action_space
    spec.model_config = {"fcnet_hiddens": [16], "vf_share_layers": False}
    return spec.build().to(device)


def _rows(num_rows, device, horizon=None, seed=0, gamma=0.95):
    """Rows of random steps with their inputs and a `row_id` to match them up."""
    rng = np.random.default_rng(seed)
    lengths = np.array([30, 5, 60, 1, 12])
    terminated = np.arange(len(lengths)) % 2 == 0
    observations = [rng.normal(size=(n + 1, 4)).astype(np.float32) for n in lengths]
    returns = returns_to_go(np.ones(lengths.sum()), lengths, gamma)
    # Each episode's returns start at its first step + its index.
    entry = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]])
    episode = rng.integers(0, len(lengths), size=num_rows)
    t = (rng.random(num_rows) * lengths[episode]).astype(np.int64)
    b = bootstrap_steps(t, lengths[episode], horizon)
    summed, discount = value_target_inputs(
        returns_at_t=returns[entry[episode] + t],
        returns_at_bootstrap=returns[entry[episode] + b],
        steps_to_bootstrap=b - t,
        terminal_at_bootstrap=terminated[episode] & (b == lengths[episode]),
        gamma=gamma,
    )
    columns = {
        Columns.OBS: np.stack([observations[e][i] for e, i in zip(episode, t)]),
        RETURNS_TO_BOOTSTRAP: summed,
        BOOTSTRAP_OBS: np.stack([observations[e][i] for e, i in zip(episode, b)]),
        BOOTSTRAP_DISCOUNT: discount,
        "row_id": np.arange(num_rows),
    }
    return {k: torch.as_tensor(v, device=device) for k, v in columns.items()}


def _expected_targets(module, batch):
    with torch.no_grad():
        bootstrap = module.compute_values({Columns.OBS: batch[BOOTSTRAP_OBS]})
    return batch[RETURNS_TO_BOOTSTRAP] + batch[BOOTSTRAP_DISCOUNT] * bootstrap


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("horizon", [None, 1, 7])
def test_targets_values_and_device(device, horizon):
    module = _module(device)
    batch = _rows(64, device, horizon=horizon)
    assert add_value_targets(module, batch)
    expected = _expected_targets(module, batch)
    torch.testing.assert_close(batch[Postprocessing.VALUE_TARGETS], expected)
    with torch.no_grad():
        values = module.compute_values({Columns.OBS: batch[Columns.OBS]})
    torch.testing.assert_close(batch[Columns.VF_PREDS], values)
    torch.testing.assert_close(
        batch[Postprocessing.ADVANTAGES], standardize(expected - values)
    )
    for column in (
        Postprocessing.VALUE_TARGETS,
        Postprocessing.ADVANTAGES,
        Columns.VF_PREDS,
    ):
        assert batch[column].device.type == device
        assert not batch[column].requires_grad
    # Terminal bootstraps add nothing: their targets are the recorded returns.
    terminal = batch[BOOTSTRAP_DISCOUNT] == 0
    assert terminal.any()
    torch.testing.assert_close(
        batch[Postprocessing.VALUE_TARGETS][terminal],
        batch[RETURNS_TO_BOOTSTRAP][terminal],
    )


def test_targets_follow_the_live_weights():
    module = _module("cpu")
    batch = _rows(32, "cpu")
    add_value_targets(module, batch)
    before = batch[Postprocessing.VALUE_TARGETS].clone()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.5)
    add_value_targets(module, batch)
    live = batch[BOOTSTRAP_DISCOUNT] > 0
    assert not torch.allclose(before[live], batch[Postprocessing.VALUE_TARGETS][live])
    torch.testing.assert_close(
        batch[Postprocessing.VALUE_TARGETS], _expected_targets(module, batch)
    )


def test_targets_do_not_depend_on_row_order_cuts_or_splits():
    module = _module("cpu")
    whole = _rows(101, "cpu")
    add_value_targets(module, whole)
    reference = dict(
        zip(whole["row_id"].tolist(), whole[Postprocessing.VALUE_TARGETS].tolist())
    )
    rng = np.random.default_rng(1)

    def check(piece):
        add_value_targets(module, piece)
        for row_id, target in zip(
            piece["row_id"].tolist(), piece[Postprocessing.VALUE_TARGETS].tolist()
        ):
            assert target == pytest.approx(reference[row_id], rel=1e-6, abs=1e-6)

    fresh = _rows(101, "cpu")
    order = torch.as_tensor(rng.permutation(101))
    check({k: v[order] for k, v in fresh.items()})
    # Cut anywhere, odd sizes, one-row pieces included.
    for start, stop in [(0, 1), (1, 38), (38, 39), (39, 100), (100, 101)]:
        check({k: v[start:stop] for k, v in _rows(101, "cpu").items()})
    # Two Learners' streaming split: every other row.
    for shard in (0, 1):
        check({k: v[shard::2] for k, v in _rows(101, "cpu").items()})


def test_numpy_rows_get_numpy_targets():
    module = _module("cpu")
    batch = {k: v.numpy() for k, v in _rows(16, "cpu").items()}
    add_value_targets(module, batch)
    assert isinstance(batch[Postprocessing.VALUE_TARGETS], np.ndarray)
    assert batch[Postprocessing.VALUE_TARGETS].shape == (16,)


def test_standardize_ignores_masked_rows():
    x = torch.tensor([1.0, 2.0, 3.0, 1000.0, -500.0])
    valid = torch.tensor([True, True, True, False, False])
    out = standardize(x, valid)
    torch.testing.assert_close(out[:3], (x[:3] - 2.0) / x[:3].std(unbiased=False))
    # Changing masked values does not move the statistics.
    x2 = x.clone()
    x2[3:] = 7.0
    torch.testing.assert_close(standardize(x2, valid)[:3], out[:3])
    # Without a mask all rows count.
    torch.testing.assert_close(standardize(x), (x - x.mean()) / x.std(unbiased=False))


def test_module_without_value_function_is_skipped():
    class NoValues(torch.nn.Module):
        pass

    batch = _rows(8, "cpu")
    assert not add_value_targets(NoValues(), batch)
    assert Postprocessing.VALUE_TARGETS not in batch


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
