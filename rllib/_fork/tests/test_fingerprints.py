"""The drift guard: every replaced upstream object is fingerprinted and checked."""

import importlib
import json
import sys
import textwrap

import pytest

from rllib._fork import fingerprint_update, fingerprints, registry
from rllib._fork.source_fingerprint import object_fingerprint
from rllib._fork.tests.helpers import run_python, shadow_ray

_SOURCE = textwrap.dedent(
    '''
    import os


    def helper(x, y=2):
        """Adds."""
        return x + y  # a comment


    class Base:
        def inherited(self):
            return "base"


    class Config(Base):
        """A class."""

        @property
        def value(self):
            return self._value

        @value.setter
        def value(self, v):
            self._value = v
    '''
)


def _installed_ray_version():
    import ray

    return ray.__version__


# --- Fingerprints of source text (one function's logic, no ray). -------------


def test_comments_docstrings_and_formatting_do_not_count():
    edited = _SOURCE.replace('"""Adds."""', '"""Adds two numbers, documented."""')
    edited = edited.replace("return x + y  # a comment", "return (x\n        + y)")
    for qualname in ("helper", "Config", "Config.value", "Base.inherited"):
        assert object_fingerprint(edited, qualname) == object_fingerprint(
            _SOURCE, qualname
        ), qualname


@pytest.mark.parametrize(
    "old, new, qualname",
    [
        ("return x + y", "return x - y", "helper"),
        ("def helper(x, y=2)", "def helper(x, y=3)", "helper"),
        ("self._value = v", "self._value = int(v)", "Config.value"),
        ('return "base"', 'return "BASE"', "Base.inherited"),
        # A class-level change anywhere in the class changes the whole class.
        ("self._value = v", "self._value = int(v)", "Config"),
    ],
)
def test_code_changes_count(old, new, qualname):
    assert object_fingerprint(_SOURCE.replace(old, new), qualname) != (
        object_fingerprint(_SOURCE, qualname)
    )


def test_inherited_attribute_is_found_in_the_base_class():
    inherited = object_fingerprint(_SOURCE, "Config.inherited")
    assert inherited is not None
    # The class starts to define it itself: drift, even with the same body.
    overridden = _SOURCE.replace(
        '    """A class."""\n',
        '    """A class."""\n\n    def inherited(self):\n        return "base"\n',
    )
    assert object_fingerprint(overridden, "Config.inherited") != inherited


def test_undefined_names_have_no_fingerprint():
    assert object_fingerprint(_SOURCE, "missing") is None
    assert object_fingerprint(_SOURCE, "Config.missing") is None
    assert object_fingerprint(_SOURCE, "helper.attr") is None


def test_fingerprint_does_not_depend_on_the_python_version():
    # Pinned: a Python release that adds AST fields or changes `ast.dump` must
    # not change fingerprints (empty/None fields are left out of the dump).
    source = (
        "class A:\n"
        "    @property\n"
        "    def x(self) -> int:\n"
        '        """Doc."""\n'
        '        return {"a": 1, **self._y}.get("a", -1.5)\n'
    )
    assert object_fingerprint(source, "A.x") == "bd82d73d9aa3f39b"


# --- The record against the installed ray and the fork's REPLACES. -----------


def test_every_replacement_has_a_fingerprint():
    recorded = fingerprints.recorded().get(_installed_ray_version())
    assert recorded is not None, (
        f"No fingerprints are recorded for the installed ray "
        f"{_installed_ray_version()}: run `{fingerprints.UPDATE_COMMAND}`."
    )
    recorded_names = {
        fingerprints.object_key(module, qualname)
        for module, entries in recorded["objects"].items()
        for qualname in entries
    }
    replaced = {
        fingerprints.object_key(registry.upstream_name(fork_module), dotted)
        for fork_module in registry.REPLACING_MODULES
        for dotted in importlib.import_module(fork_module).REPLACES
    }
    missing, stale = (
        sorted(replaced - recorded_names),
        sorted(recorded_names - replaced),
    )
    assert not missing and not stale, (
        f"REPLACES entries without a fingerprint: {missing}; fingerprints of "
        f"objects no longer replaced: {stale}. Review the upstream objects, then "
        f"run `{fingerprints.UPDATE_COMMAND}`."
    )


def test_update_finds_the_same_replacements_as_the_fork_modules():
    # The update command reads REPLACES from source; the overlay imports it.
    for module, qualnames in fingerprint_update.replaced_objects().items():
        fork_module = importlib.import_module(module[len("ray.") :])
        assert sorted(qualnames) == sorted(fork_module.REPLACES), module


def test_installed_ray_matches_the_record():
    drift, verified = fingerprints.find_drift(_installed_ray_version())
    assert drift is None, drift.message()
    assert len(verified) >= 1


def test_record_is_up_to_date_and_rendered_as_committed():
    version = _installed_ray_version()
    record = fingerprint_update.compute_record(fingerprint_update.replaced_objects())
    assert record == fingerprints.recorded()[version]
    with open(fingerprint_update._DATA_FILE, encoding="utf-8") as f:
        assert f.read() == fingerprint_update.render(fingerprints.recorded())


# --- The guard in a real process, on a ray whose source was patched. ---------

_PROBE = """
    import json, warnings
    warnings.simplefilter("always")
    import ray
    import rllib
    import ray.rllib.utils as utils
    from ray.rllib.utils.postprocessing import value_predictions
    from ray.rllib.core.learner import learner
    try:
        import ray.rllib.offline.episode_files.writer
        alias = True
    except ImportError:
        alias = False
    print(json.dumps({
        "ray": ray.__file__,
        "active": rllib.is_active(),
        "flatten_dict": utils.flatten_dict.__module__,
        "compute_value_targets": value_predictions.compute_value_targets.__module__,
        "make_batch": learner.Learner._make_batch_if_necessary.__module__,
        "alias": alias,
    }))
"""


def _probe_shadowed_ray(tmp_path, edits):
    site = shadow_ray(tmp_path / "site", edits)
    line, stderr = run_python(
        _PROBE,
        env={"PYTHONPATH": site, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )
    state = json.loads(line)
    assert state["ray"].startswith(site), "the shadowed ray was not imported"
    return state, stderr


def _set_version(version):
    def edit(text):
        return text.replace('version = "', f'version = "{version}"  # was "', 1)

    return edit


def _change_flatten_dict(text):
    old = "key = sep.join(map(str, path))"
    assert old in text, "upstream flatten_dict changed: update this test"
    return text.replace(old, "key = sep.join(map(repr, path))")


def _cosmetic_flatten_dict(text):
    old = "        key = sep.join(map(str, path))"
    assert old in text, "upstream flatten_dict changed: update this test"
    new = (
        "        # A comment.\n"
        "        key = sep.join(\n            map(str, path)\n        )"
    )
    return text.replace(old, new)


@pytest.mark.timeout(600)
def test_changed_upstream_object_keeps_the_whole_fork_off(tmp_path):
    state, stderr = _probe_shadowed_ray(
        tmp_path,
        {
            "rllib/utils/__init__.py": _change_flatten_dict,
            # An unrecorded patch release: compared with the recorded one.
            "_version.py": _set_version("2.60.99"),
        },
    )
    # Nothing replaced, in any module, and no new module aliased.
    assert state["active"] is False
    assert state["flatten_dict"] == "ray.rllib.utils"
    assert state["compute_value_targets"] == (
        "ray.rllib.utils.postprocessing.value_predictions"
    )
    assert state["make_batch"] == "ray.rllib.core.learner.learner"
    assert state["alias"] is False
    # One warning, naming exactly the changed object.
    assert stderr.count("ForkDriftWarning") == 1, stderr
    assert (
        "the installed ray 2.60.99 changed upstream objects that the fork "
        "replaces, compared with ray 2.60.0 that the fork was checked against: "
        "`ray.rllib.utils:flatten_dict`. The fork stays off" in stderr
    ), stderr
    assert "unflatten_dict" not in stderr
    assert fingerprints.UPDATE_COMMAND in stderr


@pytest.mark.timeout(600)
def test_cosmetic_change_and_unrecorded_patch_release_keep_the_fork_on(tmp_path):
    state, stderr = _probe_shadowed_ray(
        tmp_path,
        {
            "rllib/utils/__init__.py": _cosmetic_flatten_dict,
            "_version.py": _set_version("2.60.99"),
        },
    )
    assert "ForkDriftWarning" not in stderr, stderr
    assert state == dict(
        state,
        active=True,
        flatten_dict="rllib.utils",
        compute_value_targets="rllib.utils.postprocessing.value_predictions",
        make_batch="rllib.core.learner.learner",
        alias=True,
    )


def test_no_record_for_a_new_replacement_fails_loudly(monkeypatch):
    # A REPLACES entry without a fingerprint must not be applied unverified.
    from rllib._fork import overlay

    monkeypatch.setattr(fingerprints, "is_verified", lambda module, dotted: False)
    upstream = importlib.import_module("ray.rllib.utils")
    with pytest.raises(RuntimeError, match="no fingerprint of it is recorded"):
        overlay.apply("rllib.utils", upstream)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
