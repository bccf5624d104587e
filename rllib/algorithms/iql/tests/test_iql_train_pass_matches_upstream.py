"""The fork's IQL train pass against ray 2.60's: the same values for everything
IQL's loss reads, without the SAC passes it never reads."""

import pytest
import ray.rllib.algorithms.iql.torch.default_iql_torch_rl_module as module_file
import torch
from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.algorithms.iql.iql_learner import QF_TARGET_PREDS, VF_PREDS_NEXT
from ray.rllib.algorithms.sac.sac_learner import QF_TWIN_PREDS
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from rllib._fork import overlay
from rllib.algorithms.iql.tests.iql_fixtures import (
    READ_BY_THE_LOSS,
    build_learner,
    make_batch,
)

UPSTREAM_FORWARD = overlay.ORIGINALS[
    (module_file.__name__, "DefaultIQLTorchRLModule._forward_train")
]


@pytest.mark.parametrize("twin_q", [False, True])
def test_train_pass_gives_upstreams_values_for_what_the_loss_reads(twin_q):
    _, learner = build_learner(twin_q=twin_q)
    module = learner.module[DEFAULT_MODULE_ID]
    batch = make_batch()
    fork = module.forward_train(batch)
    upstream = UPSTREAM_FORWARD(module, batch)
    keys = [key for key in READ_BY_THE_LOSS if twin_q or key != QF_TWIN_PREDS]
    assert set(fork) == set(keys)
    for key in keys:
        torch.testing.assert_close(fork[key], upstream[key], rtol=0, atol=0)
    # Constants for the loss: no graph behind them.
    assert not fork[QF_TARGET_PREDS].requires_grad
    assert not fork[VF_PREDS_NEXT].requires_grad
    assert fork[QF_PREDS].requires_grad and fork[Columns.VF_PREDS].requires_grad


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
