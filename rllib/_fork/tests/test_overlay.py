"""The overlay: armed in every process, off when disabled, guarded by version."""

import importlib
import inspect
import json
import sys

import pytest

import rllib
from rllib._fork import registry
from rllib._fork.tests.helpers import run_python as _run_python


def _all_replacements():
    for fork_module in registry.REPLACING_MODULES:
        module = importlib.import_module(fork_module)
        for dotted in module.REPLACES:
            yield fork_module, dotted


def test_startup_does_not_import_ray():
    line, _ = _run_python("import sys; print('ray' in sys.modules)")
    assert line == "False"


def test_active_in_driver():
    assert rllib.is_active()
    from ray.rllib.utils.postprocessing import value_predictions

    from rllib.utils.postprocessing import value_predictions as fork

    assert value_predictions.compute_value_targets is fork.compute_value_targets


def test_later_from_import_sees_fork_object():
    line, _ = _run_python(
        """
        from ray.rllib.connectors.learner.general_advantage_estimation import (
            compute_value_targets,
        )
        print(compute_value_targets.__module__)
        """
    )
    assert line == "rllib.utils.postprocessing.value_predictions"


def test_disabled_by_env_var():
    line, _ = _run_python(
        """
        import rllib
        from ray.rllib.connectors.learner.general_advantage_estimation import (
            compute_value_targets,
        )
        print(rllib.is_active(), compute_value_targets.__module__)
        """,
        env={"RLLIB_FORK_DISABLE": "1"},
    )
    assert line == "False ray.rllib.utils.postprocessing.value_predictions"


def test_version_guard_warns_once_and_stays_off(tmp_path):
    fake_ray = tmp_path / "ray"
    fake_ray.mkdir()
    (fake_ray / "__init__.py").write_text("__version__ = '2.59.1'\n")
    line, stderr = _run_python(
        """
        import warnings
        warnings.simplefilter("always")
        import ray
        import rllib
        from rllib._fork import overlay
        overlay.install()
        print(rllib.is_active())
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert line == "False"
    assert stderr.count("rllib-fork supports ray==2.60.*") == 1, stderr


def test_every_replacement_target_exists_upstream():
    # Look at the pristine upstream modules: a process with the fork disabled.
    targets = [
        (registry.upstream_name(fork_module), dotted)
        for fork_module, dotted in _all_replacements()
    ]
    line, _ = _run_python(
        f"""
        import importlib, json
        missing = []
        for module, dotted in {targets!r}:
            obj = importlib.import_module(module)
            for part in dotted.split("."):
                obj = getattr(obj, part, None)
            if obj is None:
                missing.append(module + "." + dotted)
        print(json.dumps(missing))
        """,
        env={"RLLIB_FORK_DISABLE": "1"},
    )
    assert len(targets) >= 1
    assert json.loads(line) == [], "gone from the installed ray"


def test_every_replacement_is_applied():
    for fork_module, dotted in _all_replacements():
        upstream = importlib.import_module(registry.upstream_name(fork_module))
        fork = importlib.import_module(fork_module)
        *parents, attr = dotted.split(".")
        owner = upstream
        for part in parents:
            owner = getattr(owner, part)
        # Static lookup: a replaced staticmethod/classmethod stays wrapped.
        obj = inspect.getattr_static(owner, attr)
        assert obj is fork.REPLACES[dotted], f"{dotted} not applied"


def _fork_state():
    """What a worker process reports about the overlay."""
    from ray.rllib.utils.postprocessing import value_predictions

    import rllib as fork_pkg

    return fork_pkg.is_active(), value_predictions.compute_value_targets.__module__


def test_active_in_ray_actor_and_data_worker(ray_cluster):
    ray = ray_cluster

    @ray.remote(num_cpus=0)
    class Probe:
        def state(self):
            return _fork_state()

    actor = Probe.remote()
    assert ray.get(actor.state.remote(), timeout=120) == (
        True,
        "rllib.utils.postprocessing.value_predictions",
    )

    def probe_batch(batch):
        active, module = _fork_state()
        batch["active"] = [active] * len(batch["id"])
        batch["module"] = [module] * len(batch["id"])
        return batch

    rows = ray.data.range(4).map_batches(probe_batch, batch_size=2).take_all()
    assert {(r["active"], r["module"]) for r in rows} == {
        (True, "rllib.utils.postprocessing.value_predictions")
    }


def test_disabled_in_ray_workers():
    line, _ = _run_python(
        """
        import json, ray

        def state():
            import rllib
            from ray.rllib.utils.postprocessing import value_predictions as v
            return [rllib.is_active(), v.compute_value_targets.__module__]

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        actor_state = ray.get(ray.remote(num_cpus=0)(state).remote(), timeout=120)
        rows = ray.data.range(2).map_batches(
            lambda b: {"s": [json.dumps(state())] * len(b["id"])}
        ).take_all()
        ray.shutdown()
        print(json.dumps([actor_state, sorted({r["s"] for r in rows})]))
        """,
        env={"RLLIB_FORK_DISABLE": "1"},
        timeout=300,
    )
    actor_state, data_states = json.loads(line)
    upstream = "ray.rllib.utils.postprocessing.value_predictions"
    assert actor_state == [False, upstream]
    assert data_states == [json.dumps([False, upstream])]


def _modules_served_under_ray():
    replaced = {registry.upstream_name(m) for m in registry.REPLACING_MODULES}
    added = {"ray." + m for m in registry.NEW_MODULES}
    return sorted(replaced | added)


@pytest.mark.parametrize("upstream_module", _modules_served_under_ray())
def test_replaced_module_imports_first_in_a_fresh_process(upstream_module):
    # A Ray worker that unpickles an actor class imports that class's module
    # before anything else; the overlay must not turn that order into a
    # circular import (it once did for the offline evaluation runner).
    line, _ = _run_python(
        f"""
        import importlib
        module = importlib.import_module({upstream_module!r})
        import rllib
        print(rllib.is_active())
        """
    )
    assert line == "True"


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
