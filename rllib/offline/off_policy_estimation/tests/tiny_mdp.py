"""A two-state, two-action MDP whose estimates are computed by hand.

States 0 and 1 (Discrete(2) observations), actions 0 and 1, gamma 0.9.
The behaviour policy picked each action with probability 0.5 (recorded as
`action_logp`). The target policy takes action 0 with probability 0.8 in
state 0 and never in state 1. Four recorded episodes, every one terminated:

    E1: s=0 a=0 r=1 -> s=1 a=1 r=2 -> end
    E2: s=0 a=1 r=0 -> s=0 a=0 r=1 -> end
    E3: s=0 a=0 r=3 -> end
    E4: s=0 a=0 r=1 -> s=1 a=0 r=5 -> end

Ratios pi/mu: (s0,a0) 1.6, (s0,a1) 0.4, (s1,a1) 2.0, (s1,a0) 0.
Cumulative ratios rho_{0:t}: E1 1.6, 3.2; E2 0.4, 0.64; E3 1.6 (then kept);
E4 1.6, 0. Discounted returns G: E1 2.8, E2 0.9, E3 3, E4 5.5.

    IS    = (3.2*2.8 + 0.64*0.9 + 1.6*3 + 0*5.5) / 4      = 14.336 / 4
    WIS   = 14.336 / (3.2 + 0.64 + 1.6 + 0)                = 14.336 / 5.44
    PDIS  = (1.6 + .9*3.2*2) + (.9*.64*1) + (1.6*3) + (1.6*1 + 0) over 4
          = (7.36 + 0.576 + 4.8 + 1.6) / 4                 = 14.336 / 4
    WPDIS = t0: (1.6*1 + 0.4*0 + 1.6*3 + 1.6*1) / 5.2      = 8.0 / 5.2
            t1: (3.2*2 + 0.64*1 + 1.6*0 + 0*5) / 5.44      = 7.04 / 5.44
            total 8/5.2 + 0.9 * 7.04/5.44

Fitted Q evaluation's fixed point on these transitions (exact, a tabular
Q-function): V(1) = Q(1,1) = 2; Q(0,0) = mean(1 + .9*2, 1, 3, 1 + .9*2) = 2.4;
Q(0,1) = .9 V(0); V(0) = .8*2.4 + .2*.9*V(0), so V(0) = 1.92 / 0.82.
"""

import gymnasium as gym
import numpy as np
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib.offline.off_policy_estimation.target_policy import TargetPolicy

GAMMA = 0.9
IS = 14.336 / 4
WIS = 14.336 / 5.44
PDIS = 14.336 / 4
WPDIS = 8.0 / 5.2 + 0.9 * 7.04 / 5.44
V0 = 1.92 / 0.82
Q = {(0, 0): 2.4, (0, 1): 0.9 * V0, (1, 1): 2.0, (1, 0): 5.0}
FQE = V0
# Per episode: sum_t gamma^t [rho_{0:t} (r_t - Q) + rho_{0:t-1} V(s_t)].
DR = (
    (1.6 * (1 - Q[0, 0]) + V0 + 0.9 * (3.2 * (2 - Q[1, 1]) + 1.6 * 2.0))
    + (0.4 * (0 - Q[0, 1]) + V0 + 0.9 * (0.64 * (1 - Q[0, 0]) + 0.4 * V0))
    + (1.6 * (3 - Q[0, 0]) + V0)
    + (1.6 * (1 - Q[0, 0]) + V0 + 0.9 * (0 * (5 - Q[1, 0]) + 1.6 * 2.0))
) / 4

STEPS = [
    [(0, 0, 1.0), (1, 1, 2.0)],
    [(0, 1, 0.0), (0, 0, 1.0)],
    [(0, 0, 3.0)],
    [(0, 0, 1.0), (1, 0, 5.0)],
]
FINAL_OBS = [1, 0, 1, 1]
TARGET_PROBS = np.array([[0.8, 0.2], [0.0, 1.0]])
OBSERVATION_SPACE = gym.spaces.Discrete(2)
ACTION_SPACE = gym.spaces.Discrete(2)


def tiny_mdp_episodes(with_logp: bool = True):
    episodes = []
    for steps, final in zip(STEPS, FINAL_OBS):
        extra = {}
        if with_logp:
            extra = {Columns.ACTION_LOGP: [np.log(0.5)] * len(steps)}
        episodes.append(
            SingleAgentEpisode(
                observations=[s for s, _, _ in steps] + [final],
                actions=[a for _, a, _ in steps],
                rewards=[r for _, _, r in steps],
                extra_model_outputs=extra,
                terminated=True,
                observation_space=OBSERVATION_SPACE,
                action_space=ACTION_SPACE,
                len_lookback_buffer=0,
            )
        )
    return episodes


class TabularPolicy(TargetPolicy):
    """A policy given by a table of action probabilities per state."""

    def __init__(self, probs=TARGET_PROBS):
        self.probs = np.asarray(probs, np.float64)
        self.action_space = gym.spaces.Discrete(self.probs.shape[1])

    def action_probabilities(self, observations):
        return self.probs[np.asarray(observations).astype(int)]

    def logp(self, observations, actions):
        probs = self.action_probabilities(observations)
        with np.errstate(divide="ignore"):
            return np.log(probs[np.arange(len(probs)), np.asarray(actions)])

    def sample(self, observations, num_samples, seed):
        rng = np.random.default_rng(seed)
        probs = self.action_probabilities(observations)
        return np.array(
            [[rng.choice(len(p), p=p) for _ in range(num_samples)] for p in probs]
        )
