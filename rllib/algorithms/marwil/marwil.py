"""The fork's changes to ``ray.rllib.algorithms.marwil.marwil.MARWILConfig``.

- ``MARWILConfig.__init__``: ``moving_average_sqd_adv_norm_update_rate``
  defaults to :data:`ADVANTAGE_NORM_UPDATE_RATE` instead of 1e-8, so the
  advantage normalizer follows the advantages (see
  ``rllib.algorithms.marwil.torch.marwil_torch_learner``). An explicit
  ``config.training(moving_average_sqd_adv_norm_update_rate=...)`` wins.
- ``MARWILConfig._model_config_auto_includes``: MARWIL (``beta > 0``) gets a
  value network of its own (``vf_share_layers=False``), as APPO does
  upstream; BC (``beta == 0``, also ``BCConfig``) has no value loss and
  keeps the defaults. The fork's value targets are real discounted returns,
  and fitting them through a trunk shared with the policy pulls the
  policy's features along. A user's explicit
  ``rl_module(model_config={"vf_share_layers": True})`` still wins.
"""

from ray.rllib.algorithms.marwil import marwil as _upstream

#: The fork's default rate for MARWIL's moving average of squared advantages.
ADVANTAGE_NORM_UPDATE_RATE = 0.05

_upstream_init = _upstream.MARWILConfig.__init__


def __init__(self, algo_class=None):
    _upstream_init(self, algo_class=algo_class)
    self.moving_average_sqd_adv_norm_update_rate = ADVANTAGE_NORM_UPDATE_RATE


@property
def _model_config_auto_includes(self):
    includes = super(_upstream.MARWILConfig, self)._model_config_auto_includes
    if self.beta > 0.0:
        includes = includes | {"vf_share_layers": False}
    return includes


#: Upstream names in ``ray.rllib.algorithms.marwil.marwil`` that this module
#: replaces.
REPLACES = {
    "MARWILConfig.__init__": __init__,
    "MARWILConfig._model_config_auto_includes": _model_config_auto_includes,
}
