"""The fork's in-place `update_target_network` gives upstream's targets bit for bit."""

import copy

import pytest
import ray.rllib.utils.torch_utils as torch_utils
import torch

from rllib._fork import overlay

UPSTREAM = overlay.ORIGINALS[("ray.rllib.utils.torch_utils", "update_target_network")]


def _net(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(5, 64), torch.nn.BatchNorm1d(64), torch.nn.Linear(64, 3)
    )


@pytest.mark.parametrize("tau", [0.005, 0.3, 1.0])
def test_targets_are_upstreams_bit_for_bit(tau):
    assert torch_utils.update_target_network is not UPSTREAM
    main, target = _net(0), _net(1)
    main(torch.randn(8, 5))  # Moves the batch norm's running stats and step count.
    main.train()
    fork_target, upstream_target = copy.deepcopy(target), copy.deepcopy(target)
    for _ in range(3):
        torch_utils.update_target_network(main, fork_target, tau)
        UPSTREAM(main, upstream_target, tau)
    fork_state, upstream_state = fork_target.state_dict(), upstream_target.state_dict()
    assert fork_state.keys() == upstream_state.keys()
    for key, value in upstream_state.items():
        assert fork_state[key].dtype == value.dtype, key
        assert torch.equal(fork_state[key], value), key
    # Not a no-op: the targets moved towards the main network.
    assert not torch.equal(fork_state["0.weight"], target.state_dict()["0.weight"])
    if tau == 1.0:
        assert torch.equal(fork_state["0.weight"], main.state_dict()["0.weight"])


def test_targets_stay_the_same_tensors():
    """In place: the target's parameters (and an optimizer's refs) are kept."""
    main, target = _net(0), _net(1)
    weight = target[0].weight
    torch_utils.update_target_network(main, target, 0.5)
    assert target[0].weight is weight
    assert not target[0].weight.requires_grad or target[0].weight.grad is None


def test_mismatched_networks_fail_as_upstream():
    main, target = _net(0), torch.nn.Linear(5, 3)
    with pytest.raises(Exception) as upstream_error:
        UPSTREAM(main, target, 0.5)
    with pytest.raises(type(upstream_error.value)):
        torch_utils.update_target_network(main, target, 0.5)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
