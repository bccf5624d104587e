"""The differential-test helper: modes, results and comparisons."""

import pytest

from rllib._fork.tests.differential import (
    ScenarioError,
    assert_same,
    run_in_both_modes,
    run_scenario,
)


def test_each_mode_runs_in_its_own_process():
    upstream, fork = run_in_both_modes(
        """
        import rllib
        from ray.rllib.core.learner.learner import Learner
        emit({"active": rllib.is_active(),
              "make_batch": Learner._create_iterator_if_necessary.__module__})
        """,
        timeout=120,
    )
    assert upstream == {
        "active": False,
        "make_batch": "ray.rllib.core.learner.learner",
    }
    assert fork == {"active": True, "make_batch": "rllib.core.learner.learner"}


def test_a_failing_scenario_reports_its_error():
    with pytest.raises(ScenarioError, match="ZeroDivisionError"):
        run_scenario("1 / 0", mode="fork", timeout=60)
    with pytest.raises(ScenarioError, match="no result"):
        run_scenario("print('nothing')", mode="upstream", timeout=60)


def test_assert_same_names_the_first_difference():
    assert_same({"a": [1.0, 2.0], "b": "x"}, {"a": [1.0, 2.0], "b": "x"})
    with pytest.raises(AssertionError, match=r"result\['a'\]\[1\]: upstream 2.0 vs"):
        assert_same({"a": [1.0, 2.0]}, {"a": [1.0, 2.0000001]})
    assert_same({"a": [1.0, 2.0]}, {"a": [1.0, 2.0000001]}, rel=1e-6)
    with pytest.raises(AssertionError, match="keys differ"):
        assert_same({"a": 1}, {"b": 1})
    with pytest.raises(AssertionError, match="lengths differ"):
        assert_same([1], [1, 2])
    assert_same(float("nan"), float("nan"))


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
