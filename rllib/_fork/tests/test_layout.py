"""The tree says what each module is for, and dependencies point one way."""

import ast
import importlib
import pathlib

import pytest

import rllib
from rllib._fork import registry

ROOT = pathlib.Path(rllib.__file__).parent


def _fork_modules():
    """Every module of the fork package outside `_fork`, tests and examples."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if "_fork" in parts or "tests" in parts or "examples" in parts:
            continue
        if parts[-1] == "conftest":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts)


_NEW_MODULES = [
    m for m in _fork_modules() if registry.new_module_target("ray." + m) is not None
]


@pytest.mark.parametrize("fork_module", _NEW_MODULES)
def test_new_module_has_one_identity(fork_module):
    fork = importlib.import_module(fork_module)
    upstream = importlib.import_module(registry.upstream_name(fork_module))
    assert upstream is fork


def test_every_fork_module_is_registered():
    """A module at an upstream-looking path replaces upstream names or is new."""
    packages = {"rllib"} | {  # Package markers of upstream directories.
        m
        for m in _fork_modules()
        if (
            pathlib.Path(rllib.__file__).parent.parent
            / m.replace(".", "/")
            / "__init__.py"
        ).exists()
    }
    stray = [
        m
        for m in _fork_modules()
        if m not in registry.REPLACING_MODULES
        and registry.new_module_target("ray." + m) is None
        and m not in packages
    ]
    assert stray == []
    assert len(_NEW_MODULES) > 30


def _imports(path: pathlib.Path):
    """Every module name ``path`` imports (top level or inside functions)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("package", ["core", "utils"])
def test_core_and_utils_never_import_offline(package):
    offenders = [
        f"{path.relative_to(ROOT.parent)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if "tests" not in path.parts
        for name in _imports(path)
        if name.removeprefix("ray.").startswith("rllib.offline")
    ]
    assert offenders == []


def test_fork_modules_import_each_other_as_rllib():
    """One import style: a fork module is imported as `rllib.*`, never through
    its `ray.*` alias (which exists only while the overlay is on)."""
    offenders = [
        f"{path.relative_to(ROOT.parent)} imports {name}"
        for path in sorted(ROOT.rglob("*.py"))
        if "examples" not in path.parts and "_fork" not in path.parts
        for name in _imports(path)
        if name.startswith("ray.") and registry.new_module_target(name) is not None
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "old, new, name",
    [
        ("episode_writer", "episode_files.writer", "EpisodeWriter"),
        ("episode_writer", "episode_files.payload", "encode_episode"),
        ("episode_writer", "episode_files.filesystem", "resolve_filesystem"),
        ("episode_reader", "episode_files.reader", "read_episodes"),
        ("episode_inspection", "tools.inspection", "validate_dataset"),
        ("episode_conversion", "tools.conversion", "convert_dataset"),
        ("minari_io", "tools.minari_io", "read_minari"),
    ],
)
def test_earlier_import_paths_give_the_same_objects(old, new, name):
    old_module = importlib.import_module("ray.rllib.offline." + old)
    new_module = importlib.import_module("ray.rllib.offline." + new)
    assert getattr(old_module, name) is getattr(new_module, name)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
