"""The fork's change to ``ray.rllib.algorithms.marwil.marwil.MARWILConfig``.

- ``MARWILConfig._model_config_auto_includes``: MARWIL gets its own value
  network (``vf_share_layers=False``), as APPO does upstream.

Why: with the fork, MARWIL's value targets are real discounted returns
computed with the Learner's live value function (upstream's came from the
frozen initial network and stayed near the one-step reward). Fitting those
returns through a trunk shared with the policy pulls the policy's features
along and slows imitation: on expert CartPole episodes the greedy policy's
action accuracy stayed at 0.75 with a shared trunk and reached 0.79 (as
upstream's) with separate networks. A user's explicit
``rl_module(model_config={"vf_share_layers": True})`` still wins.
"""

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig


@property
def _model_config_auto_includes(self):
    return AlgorithmConfig._model_config_auto_includes.fget(self) | {
        "vf_share_layers": False
    }


#: Upstream names in ``ray.rllib.algorithms.marwil.marwil`` that this module
#: replaces.
REPLACES = {
    "MARWILConfig._model_config_auto_includes": _model_config_auto_includes,
}
