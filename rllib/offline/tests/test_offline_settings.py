"""The typed offline settings of `AlgorithmConfig.offline_data(...)`, and the
`learner_config_dict` keys they replace (still read, with a deprecation
warning, where the typed setting is unset)."""

import logging

import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.marwil import MARWILConfig

from rllib.offline.in_memory.memory_budget import configured_budget
from rllib.offline.offline_settings import (
    CACHE_DRAWS_PER_TIMESTEP,
    MEMORY_BUDGET,
    SETTINGS,
    VALUE_HORIZON,
    get_offline_setting,
)


@pytest.mark.parametrize(
    "setting,value",
    [(MEMORY_BUDGET, 2_000_000), (CACHE_DRAWS_PER_TIMESTEP, 4.0), (VALUE_HORIZON, 25)],
)
def test_a_typed_setting_is_kept_through_copies_and_dicts(setting, value):
    config = MARWILConfig().offline_data(**{setting.name: value})
    assert get_offline_setting(config, setting) == value
    assert get_offline_setting(config.copy(), setting) == value
    # What checkpoints and Tune store and restore.
    restored = MARWILConfig.from_dict(config.to_dict())
    assert get_offline_setting(restored, setting) == value


def test_unset_settings_take_their_defaults_and_none_resets():
    config = BCConfig()
    assert configured_budget(config) is None
    assert get_offline_setting(config, CACHE_DRAWS_PER_TIMESTEP, 1.0) == 1.0
    assert get_offline_setting(config, VALUE_HORIZON) is None
    config.offline_data(memory_budget=0)
    assert configured_budget(config) == 0
    config.offline_data(memory_budget=None)
    assert configured_budget(config) is None


def test_the_legacy_key_is_read_with_a_deprecation_warning(caplog):
    config = BCConfig().learners(
        learner_config_dict={
            setting.legacy_key: value
            for setting, value in zip(SETTINGS, (1_000, 2.0, 7))
        }
    )
    with caplog.at_level(logging.WARNING):
        values = [get_offline_setting(config, setting) for setting in SETTINGS]
    assert values == [1_000, 2.0, 7]
    assert configured_budget(config) == 1_000
    # `log_once` may have warned in an earlier test; the text names both.
    for record in caplog.records:
        if "offline_data_memory_budget" in record.getMessage():
            assert "config.offline_data(memory_budget=...)" in record.getMessage()
    # The typed setting wins over the key.
    config.offline_data(memory_budget=5, value_horizon=3)
    assert configured_budget(config) == 5
    assert get_offline_setting(config, VALUE_HORIZON) == 3


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"memory_budget": -1}, r"memory_budget=\.\.\.\)` must be a number of bytes"),
        ({"memory_budget": "1GB"}, "got '1GB'"),
        ({"cache_draws_per_timestep": 0}, "must be a number > 0"),
        ({"value_horizon": 0}, r"value_horizon=\.\.\.\)` must be an int >= 1"),
        ({"value_horizon": 2.5}, "got 2.5"),
    ],
)
def test_bad_values_fail_where_they_are_set(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BCConfig().offline_data(**kwargs)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
