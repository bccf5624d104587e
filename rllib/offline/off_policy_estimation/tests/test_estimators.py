"""Every estimator against values computed by hand (`tiny_mdp.py`), and the
vectorized importance sampling against a plain loop."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import scipy.stats
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib.offline.off_policy_estimation import (
    FQEConfig,
    TargetPolicy,
    estimate_policy_value,
    trajectories_from_episodes,
)
from rllib.offline.off_policy_estimation.importance_sampling import (
    importance_sampling_estimates,
)
from rllib.offline.off_policy_estimation.tests import tiny_mdp

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# A tabular (linear, one-hot) Q-function trained on all transitions at once
# reaches FQE's fixed point.
TABULAR_FQE = FQEConfig(
    hidden_sizes=(),
    learning_rate=0.05,
    batch_size=None,
    num_updates=3000,
    target_update_interval=10,
)


def _estimate(episodes, policy=None, **kwargs):
    kwargs.setdefault("fqe_config", TABULAR_FQE)
    return estimate_policy_value(
        policy or tiny_mdp.TabularPolicy(),
        trajectories_from_episodes(episodes),
        gamma=tiny_mdp.GAMMA,
        observation_space=tiny_mdp.OBSERVATION_SPACE,
        **kwargs,
    )


def test_every_estimator_matches_the_hand_computed_values():
    result = _estimate(tiny_mdp.tiny_mdp_episodes(), num_bootstrap=0)
    values = {name: r.value for name, r in result.estimates.items()}
    assert result.behavior_logp_source == "recorded"
    for name, expected in [
        ("is", tiny_mdp.IS),
        ("wis", tiny_mdp.WIS),
        ("pdis", tiny_mdp.PDIS),
        ("wpdis", tiny_mdp.WPDIS),
    ]:
        assert values[name] == pytest.approx(expected, rel=1e-12), name
    assert values["fqe"] == pytest.approx(tiny_mdp.FQE, abs=1e-3)
    assert values["dr"] == pytest.approx(tiny_mdp.DR, abs=1e-3)
    assert result.logged_return == pytest.approx((2.8 + 0.9 + 3 + 5.5) / 4)
    assert result.num_episodes == 4 and result.num_steps == 7


def test_fitted_behavior_policy_replaces_missing_propensities():
    # Without `action_logp`, mu is fitted: 4 of 5 actions in state 0 were 0,
    # one of each in state 1. Ratios: (s0,a0) 1, (s0,a1) 1, (s1,a1) 2, (s1,a0)
    # 0, so IS = (2 * 2.8 + 0.9 + 3 + 0) / 4.
    result = _estimate(
        tiny_mdp.tiny_mdp_episodes(with_logp=False),
        estimators=["is"],
        num_bootstrap=0,
    )
    assert result.behavior_logp_source == "fitted"
    assert result.estimates["is"].value == pytest.approx(9.5 / 4, abs=0.05)


def test_recorded_propensities_required_but_absent():
    with pytest.raises(ValueError, match="no recorded .*action_logp"):
        _estimate(
            tiny_mdp.tiny_mdp_episodes(with_logp=False),
            estimators=["is"],
            behavior_logp="recorded",
        )


def test_bootstrap_interval_contains_the_estimate():
    result = _estimate(
        tiny_mdp.tiny_mdp_episodes(), estimators=["wis", "pdis"], num_bootstrap=300
    )
    for estimate in result.estimates.values():
        assert estimate.low <= estimate.value <= estimate.high
        assert estimate.low < estimate.high


def test_refit_interval_is_the_spread_of_fqe_on_resampled_episodes():
    # Bootstrapped FQE: each refit is FQE on the episodes drawn with
    # replacement; tabular FQE reaches each resample's own fixed point, which
    # the plain estimate of the resampled episodes computes independently.
    episodes = tiny_mdp.tiny_mdp_episodes()
    result = _estimate(
        episodes, estimators=["fqe", "dr"], num_bootstrap=0, fqe_resample_fits=3
    )
    assert result.fqe_resample_fits == 3
    draws = np.random.default_rng([TABULAR_FQE.seed, 1])
    refits = {"fqe": [], "dr": []}
    for fit in range(3):
        indices = draws.integers(0, len(episodes), len(episodes))
        refit = _estimate(
            [episodes[i] for i in indices],
            estimators=["fqe", "dr"],
            num_bootstrap=0,
            fqe_config=dataclasses.replace(TABULAR_FQE, seed=fit + 1),
        )
        for name in refits:
            refits[name].append(refit.estimates[name].value)
    quantile = scipy.stats.t.ppf(0.975, 2)
    for name, values in refits.items():
        estimate = result.estimates[name]
        half_width = quantile * np.std(values, ddof=1)
        assert half_width > 0.1, (name, values)
        assert estimate.value == pytest.approx(
            getattr(tiny_mdp, name.upper()), abs=1e-3
        )
        assert estimate.low == pytest.approx(estimate.value - half_width, abs=1e-2)
        assert estimate.high == pytest.approx(estimate.value + half_width, abs=1e-2)


def test_one_refit_gives_no_spread_and_fails_clearly():
    with pytest.raises(ValueError, match="at least 2"):
        _estimate(tiny_mdp.tiny_mdp_episodes(), fqe_resample_fits=1)


def _reference_loop(rewards, lengths, log_ratios, gamma):
    # Plain loops over episodes and steps, the textbook definitions with
    # episodes that end early held at their last cumulative ratio.
    num_episodes, horizon = rewards.shape
    rho = np.ones((num_episodes, horizon))
    for e in range(num_episodes):
        running = 1.0
        for t in range(horizon):
            if t < lengths[e]:
                running *= np.exp(log_ratios[e, t])
            rho[e, t] = running
    returns = [
        sum(gamma**t * rewards[e, t] for t in range(lengths[e]))
        for e in range(num_episodes)
    ]
    is_ = np.mean([rho[e, -1] * returns[e] for e in range(num_episodes)])
    wis = sum(rho[e, -1] * returns[e] for e in range(num_episodes)) / rho[:, -1].sum()
    pdis = np.mean(
        [
            sum(gamma**t * rho[e, t] * rewards[e, t] for t in range(lengths[e]))
            for e in range(num_episodes)
        ]
    )
    wpdis = sum(
        gamma**t * (rho[:, t] * rewards[:, t]).sum() / rho[:, t].sum()
        for t in range(horizon)
    )
    return {"is": is_, "wis": wis, "pdis": pdis, "wpdis": wpdis}


@pytest.mark.parametrize("max_length", [1, 3, 100])
@pytest.mark.parametrize("gamma", [1.0, 0.95])
def test_importance_sampling_matches_a_plain_loop(max_length, gamma):
    rng = np.random.default_rng(max_length)
    num_episodes = 7
    lengths = rng.integers(1, max_length + 1, num_episodes)
    lengths[0] = max_length
    mask = np.arange(max_length)[None] < lengths[:, None]
    rewards = np.where(mask, rng.normal(size=(num_episodes, max_length)), 0.0)
    log_ratios = np.where(mask, rng.normal(0, 0.1, (num_episodes, max_length)), 0.0)
    got = importance_sampling_estimates(rewards, mask, log_ratios, gamma)
    expected = _reference_loop(rewards, lengths, log_ratios, gamma)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-9)


def test_weighted_estimates_survive_ratios_that_overflow():
    # 2000 steps at ratio e^1 overflow float64 as a product; the weighted
    # forms normalize in log space and stay exact.
    horizon = 2000
    rewards = np.ones((2, horizon))
    mask = np.ones((2, horizon), bool)
    log_ratios = np.ones((2, horizon))
    log_ratios[1] = 0.5
    got = importance_sampling_estimates(rewards, mask, log_ratios, 1.0)
    assert got["wis"] == pytest.approx(horizon)
    assert got["wpdis"] == pytest.approx(horizon)
    assert got["is"] == float("inf")
    clipped = importance_sampling_estimates(
        rewards, mask, log_ratios, 1.0, max_weight=10.0
    )
    assert clipped["is"] == pytest.approx(10.0 * horizon)


class _GaussianBanditPolicy(TargetPolicy):
    """pi(a|s) = N(a; 0.5 * s, 0.3^2), or its mean if deterministic."""

    action_space = gym.spaces.Box(-10, 10, (1,), np.float32)

    def __init__(self, deterministic=False):
        self.deterministic = deterministic

    def logp(self, observations, actions):
        mean = 0.5 * np.asarray(observations)[:, 0]
        a = np.asarray(actions)[:, 0]
        return -0.5 * ((a - mean) / 0.3) ** 2 - np.log(0.3 * np.sqrt(2 * np.pi))

    def action_probabilities(self, observations):
        raise NotImplementedError

    def sample(self, observations, num_samples, seed):
        mean = 0.5 * np.asarray(observations)[:, 0]
        if self.deterministic:
            draws = np.repeat(mean[:, None], num_samples, axis=1)
        else:
            noise = np.random.default_rng(seed).normal(size=(len(mean), num_samples))
            draws = mean[:, None] + 0.3 * noise
        return draws[..., None]


def _bandit_episodes(num_episodes=400, seed=0):
    # One-step episodes: s ~ U(-1, 1), a ~ N(0, 1) (recorded logp), r = 2a + 1.
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(num_episodes):
        s = rng.uniform(-1, 1, 1).astype(np.float32)
        a = rng.normal(size=1).astype(np.float32)
        logp = float(-0.5 * a[0] ** 2 - 0.5 * np.log(2 * np.pi))
        episodes.append(
            SingleAgentEpisode(
                observations=[s, s],
                actions=[a],
                rewards=[float(2 * a[0] + 1)],
                extra_model_outputs={"action_logp": [logp]},
                terminated=True,
                len_lookback_buffer=0,
            )
        )
    return episodes


def test_continuous_actions():
    # True value: E[2 * 0.5 * s + 1] = 1 for s ~ U(-1, 1).
    episodes = _bandit_episodes()
    trajectories = trajectories_from_episodes(episodes)
    # IS with the densities computed by hand from the recorded data.
    a = trajectories.actions[:, 0, 0].astype(np.float64)
    s = trajectories.observations[:, 0, 0].astype(np.float64)
    r = trajectories.rewards[:, 0]
    target = np.exp(-0.5 * ((a - 0.5 * s) / 0.3) ** 2) / (0.3 * np.sqrt(2 * np.pi))
    behavior = np.exp(-0.5 * a**2) / np.sqrt(2 * np.pi)
    linear_fqe = FQEConfig(
        hidden_sizes=(),
        learning_rate=0.05,
        batch_size=None,
        num_updates=1500,
        target_update_interval=10,
        num_action_samples=64,
    )
    result = estimate_policy_value(
        _GaussianBanditPolicy(),
        trajectories,
        gamma=0.99,
        fqe_config=linear_fqe,
        num_bootstrap=200,
    )
    w = target / behavior
    assert result.estimates["is"].value == pytest.approx(np.mean(w * r), rel=1e-6)
    assert result.estimates["wis"].value == pytest.approx(
        np.sum(w * r) / np.sum(w), rel=1e-6
    )
    # A linear Q recovers r = 2a + 1 exactly, so V(s) = s + 1 (up to the mean
    # of 64 draws per state) and DR's correction terms vanish: both give the
    # policy's value on the recorded initial states, 1 + mean(s).
    value_on_data = 1.0 + s.mean()
    assert result.estimates["fqe"].value == pytest.approx(value_on_data, abs=0.01)
    assert result.estimates["dr"].value == pytest.approx(value_on_data, abs=0.01)
    for name in ("wis", "dr"):
        estimate = result.estimates[name]
        assert estimate.low <= value_on_data <= estimate.high, name


def test_deterministic_continuous_policy_gets_fqe_only():
    episodes = _bandit_episodes(200)
    result = estimate_policy_value(
        _GaussianBanditPolicy(deterministic=True),
        trajectories_from_episodes(episodes),
        gamma=0.99,
        fqe_config=FQEConfig(
            hidden_sizes=(),
            learning_rate=0.05,
            batch_size=None,
            num_updates=1500,
            target_update_interval=10,
        ),
        num_bootstrap=0,
    )
    assert set(result.estimates) == {"fqe"}
    assert set(result.unavailable) == {"is", "wis", "pdis", "wpdis", "dr"}
    assert "deterministic" in result.unavailable["dr"]
    # Q = 2a + 1 at a = 0.5 s: s + 1, averaged over the recorded states.
    states = np.array([ep.get_observations(0)[0] for ep in episodes])
    assert result.estimates["fqe"].value == pytest.approx(1 + states.mean(), abs=0.01)


def test_fqe_reports_every_update_and_the_report_changes_nothing():
    updates = []
    seen = _estimate(
        tiny_mdp.tiny_mdp_episodes(),
        estimators=["fqe", "dr"],
        num_bootstrap=0,
        on_fqe_update=lambda: updates.append(len(updates)),
    )
    assert len(updates) == TABULAR_FQE.num_updates
    plain = _estimate(
        tiny_mdp.tiny_mdp_episodes(), estimators=["fqe", "dr"], num_bootstrap=0
    )
    for name in ("fqe", "dr"):
        assert seen.estimates[name].value == plain.estimates[name].value


def test_actions_outside_the_policy_space_fail_clearly():
    policy = tiny_mdp.TabularPolicy(probs=[[1.0]] * 2)  # Discrete(1)
    with pytest.raises(ValueError, match="do not fit the policy's action space"):
        _estimate(tiny_mdp.tiny_mdp_episodes(), policy=policy)


def test_observations_outside_the_policy_space_fail_clearly():
    with pytest.raises(ValueError, match="do not fit the policy's observation space"):
        estimate_policy_value(
            tiny_mdp.TabularPolicy(),
            trajectories_from_episodes(tiny_mdp.tiny_mdp_episodes()),
            gamma=0.9,
            observation_space=gym.spaces.Box(-1, 1, (3,)),
        )


def test_unknown_estimator_and_empty_data_fail_clearly():
    with pytest.raises(ValueError, match="Unknown off-policy estimators"):
        _estimate(tiny_mdp.tiny_mdp_episodes(), estimators=["magic"])
    with pytest.raises(ValueError, match="got no episodes"):
        trajectories_from_episodes([])


def test_episode_without_steps_or_from_the_middle_fails_clearly():
    empty = SingleAgentEpisode(observations=[0], len_lookback_buffer=0)
    with pytest.raises(ValueError, match="has no steps"):
        trajectories_from_episodes([empty])
    chunk = SingleAgentEpisode(
        observations=[0, 1],
        actions=[0],
        rewards=[1.0],
        t_started=5,
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match="starts at step 5"):
        trajectories_from_episodes([chunk])


def _constant_reward_episodes(length, num_episodes=4):
    return [
        SingleAgentEpisode(
            observations=[0] * (length + 1),
            actions=[0] * length,
            rewards=[1.0] * length,
            extra_model_outputs={"action_logp": [0.0] * length},
            truncated=True,
            len_lookback_buffer=0,
        )
        for _ in range(num_episodes)
    ]


@pytest.mark.parametrize(
    "horizon, expected",
    [
        # Cut at a 3-step time limit: 1 + 0.9 + 0.81.
        (3, 2.71),
        # Cut off an endless task: the last step bootstraps, 1 / (1 - 0.9).
        (None, 10.0),
    ],
)
def test_fqe_horizon_decides_what_a_truncated_end_means(horizon, expected):
    policy = tiny_mdp.TabularPolicy(probs=[[1.0]])
    config = FQEConfig(
        hidden_sizes=(16,),
        learning_rate=0.01,
        batch_size=None,
        num_updates=2000,
        target_update_interval=10,
        horizon=horizon,
    )
    result = estimate_policy_value(
        policy,
        trajectories_from_episodes(_constant_reward_episodes(3)),
        gamma=0.9,
        estimators=["fqe"],
        observation_space=gym.spaces.Discrete(1),
        fqe_config=config,
        num_bootstrap=0,
    )
    assert result.estimates["fqe"].value == pytest.approx(expected, abs=0.1)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
