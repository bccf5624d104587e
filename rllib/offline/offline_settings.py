"""Typed offline-data settings of `AlgorithmConfig.offline_data(...)`.

Each setting was a `learner_config_dict` key before it had an argument of its
own. Where the argument is unset, the key is still read, with a deprecation
warning, so that configs and checkpoints written for the key keep training
as they did.
"""

from dataclasses import dataclass
from typing import Any, Optional

from ray._common.deprecation import deprecation_warning
from ray.rllib.utils.annotations import DeveloperAPI
from ray.util import log_once

from rllib.utils.postprocessing.bootstrapped_returns import HORIZON_KEY


@DeveloperAPI
@dataclass(frozen=True)
class OfflineSetting:
    """One typed setting: its `offline_data()` argument (also the config
    attribute that holds it) and the `learner_config_dict` key it replaces."""

    name: str
    legacy_key: str

    def argument(self) -> str:
        return f"config.offline_data({self.name}=...)"


#: Bytes of decoded episodes one node may hold in memory; 0 always streams.
MEMORY_BUDGET = OfflineSetting("memory_budget", "offline_data_memory_budget")
#: Draws per timestep a cached row range gives before it is replaced.
CACHE_DRAWS_PER_TIMESTEP = OfflineSetting(
    "cache_draws_per_timestep", "offline_data_cache_draws_per_timestep"
)
#: Steps from a row to the bootstrap of its value target; None: the episode end.
VALUE_HORIZON = OfflineSetting("value_horizon", HORIZON_KEY)

SETTINGS = (MEMORY_BUDGET, CACHE_DRAWS_PER_TIMESTEP, VALUE_HORIZON)


@DeveloperAPI
def get_offline_setting(config, setting: OfflineSetting, default: Any = None) -> Any:
    """The value of `setting` in `config`: the typed argument where set, else
    the deprecated `learner_config_dict` key (with a warning), else `default`.
    """
    value = getattr(config, setting.name, None)
    if value is not None:
        return value
    legacy = (getattr(config, "learner_config_dict", None) or {}).get(
        setting.legacy_key
    )
    if legacy is None:
        return default
    if log_once(f"offline_setting_{setting.legacy_key}"):
        deprecation_warning(
            old=f"learner_config_dict[{setting.legacy_key!r}]",
            new=setting.argument(),
            error=False,
        )
    return legacy


def check_memory_budget(value: Optional[float]) -> Optional[int]:
    """A budget in bytes per node (>= 0), or None for the default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(
            f"`{MEMORY_BUDGET.argument()}` must be a number of bytes >= 0 per "
            f"node (0 always streams) or None for the default, got {value!r}."
        )
    return int(value)


def check_cache_draws_per_timestep(value: Optional[float]) -> Optional[float]:
    """Draws per timestep (> 0), or None for the default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(
            f"`{CACHE_DRAWS_PER_TIMESTEP.argument()}` must be a number > 0 or "
            f"None for the default, got {value!r}."
        )
    return float(value)


def check_value_horizon(value: Optional[int]) -> Optional[int]:
    """Steps to the bootstrap (an int >= 1), or None for the episode end."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"`{VALUE_HORIZON.argument()}` must be an int >= 1 (steps to the "
            f"bootstrap) or None for the episode's end, got {value!r}."
        )
    return value
