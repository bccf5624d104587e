"""CQL's Bellman target with n-step rows: a row whose reward sums `n_step`
discounted rewards bootstraps with `gamma ** n_step`, as SAC's does."""

import pytest

from rllib.algorithms.cql.tests.cql_fixtures import check_critic_losses


@pytest.mark.parametrize("n_step", [1, 2, 3])
def test_bootstrap_is_discounted_by_gamma_to_the_n_step(n_step):
    check_critic_losses(high=1.0, n_step=n_step)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
