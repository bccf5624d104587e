"""The fork's defaults for ``ray.rllib.algorithms.marwil.marwil``.

- ``MARWILConfig.__init__``: the advantage normalizer follows the advantages
  by default: ``moving_average_sqd_adv_norm_update_rate=0.05`` (upstream:
  1e-8, at which the average never leaves its start) and
  ``moving_average_sqd_adv_norm_start=0`` (start from the first train batch;
  upstream: 100, so ``c`` stays 10 whatever the reward scale). Explicit values
  are used as given, upstream's included; see
  ``rllib.algorithms.marwil.torch.advantage_statistics``. BC (``beta=0``)
  keeps no normalizer.

Both defaults are plain numbers, so a fork checkpoint's config restores and
trains with the overlay off (ray's Learner then moves its average from 0 at
0.05 per update).
"""

from ray.rllib.algorithms.marwil import marwil as _upstream

from rllib.algorithms.marwil.torch.advantage_statistics import START_FROM_DATA

#: The fork's default ``moving_average_sqd_adv_norm_update_rate``.
ADVANTAGE_NORM_UPDATE_RATE = 0.05

_upstream_init = _upstream.MARWILConfig.__init__


def __init__(self, algo_class=None):
    """Ray's `MARWILConfig.__init__` with the fork's normalizer defaults."""
    _upstream_init(self, algo_class=algo_class)
    self.moving_average_sqd_adv_norm_update_rate = ADVANTAGE_NORM_UPDATE_RATE
    self.moving_average_sqd_adv_norm_start = START_FROM_DATA


#: Upstream names in ``ray.rllib.algorithms.marwil.marwil`` that this module
#: replaces.
REPLACES = {"MARWILConfig.__init__": __init__}
