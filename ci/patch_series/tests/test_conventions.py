"""The per-patch convention check finds each fault ray's review names, and
nothing in a patch without them (a scratch git repository; no ray needed)."""

import ast
import pathlib
import subprocess
import sys
import tempfile
import textwrap

import pytest

from ci.patch_series import bazel, conventions

UPSTREAM_MODULE = textwrap.dedent(
    """\
    import os


    def helper(path):
        return os.path.basename(path)
    """
)

CLEAN_TEST = textwrap.dedent(
    """\
    import sys

    import pytest


    @pytest.mark.parametrize("x", [1, 2])
    def test_x(x):
        assert x > 0


    if __name__ == "__main__":
        sys.exit(pytest.main(["-v", __file__]))
    """
)


def _git(tree, *args):
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "rllib/offline").mkdir(parents=True)
    (tmp_path / "rllib/offline/thing.py").write_text(UPSTREAM_MODULE)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.name", "t")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "ray")
    return tmp_path


def _patch(tree, files, message):
    for path, text in files.items():
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", message)
    with tempfile.TemporaryDirectory() as scratch:
        config = conventions._ruff_config(pathlib.Path(scratch))
        return conventions.check_patch(tree, "HEAD", config)


def _sized(monkeypatch, path):
    monkeypatch.setitem(bazel.FILES, path, "small")


def test_a_patch_in_ray_form_passes(tree, monkeypatch):
    path = "rllib/offline/tests/test_new_thing.py"
    _sized(monkeypatch, path)
    message = (
        f"[RLlib] New thing\n\n{bazel.build_section([path])}\n"
        "Signed-off-by: t <t@example.com>\n"
    )
    changed = UPSTREAM_MODULE + "\n\ndef other():\n    return helper('a')\n"
    files = {"rllib/offline/thing.py": changed.replace("'a'", '"a"'), path: CLEAN_TEST}
    assert _patch(tree, files, message) == []


def test_each_fault_is_named(tree, monkeypatch):
    path = "rllib/offline/tests/test_offline_data.py"
    _sized(monkeypatch, path)
    bad_module = UPSTREAM_MODULE + (
        "import sys\n\n\ndef other( ):\n    return 'a'  # As upstream.\n"
    )
    bad_test = CLEAN_TEST.replace(
        "@pytest.mark.parametrize", "@pytest.mark.ray\n@pytest.mark.parametrize"
    )
    bad_test = bad_test.split('if __name__ == "__main__":')[0]
    files = {
        "rllib/offline/thing.py": bad_module,
        path: bad_test,
        "rllib/offline/tests/__init__.py": "",
    }
    problems = "\n".join(_patch(tree, files, "[RLlib] No sign-off"))
    for expected in (
        "no Signed-off-by",
        "rllib/offline/thing.py: not formatted as black 22.10 formats it",
        "rllib/offline/thing.py: ruff (ray's settings): F401",
        "rllib/offline/thing.py: ruff (ray's settings): Q000",
        "rllib/offline/thing.py: the fork's wording in ray's file: "
        "\"return 'a'  # As upstream.\"",
        "rllib/offline/tests/__init__.py: ray has no __init__.py",
        f"{path}: ray's repository has a test file test_offline_data.py",
        f"{path}: no `if __name__ == '__main__'` pytest block",
        f"{path}: unregistered markers ['ray']",
        f"{path}: no py_test target in the description",
    ):
        assert expected in problems, (expected, problems)
    # Upstream's own code is not the patch's fault: `os` was used before.
    assert "`os` imported but unused" not in problems


def test_an_import_of_a_module_no_patch_has_added_yet_is_named(tree):
    module = textwrap.dedent(
        """\
        from ray.rllib.offline import thing
        from ray.rllib.offline.tests import helpers


        def later():
            from ray.rllib.offline.later import feature

            return thing, helpers, feature
        """
    )
    files = {
        "rllib/offline/tests/helpers.py": "X = 1\n",
        "rllib/offline/user.py": module,
    }
    problems = _patch(tree, files, "[RLlib] x\n\nSigned-off-by: t <t@example.com>")
    # An existing module and a namespace package (`tests` has no __init__.py)
    # resolve; the module a later patch would add does not.
    assert problems == [
        "rllib/offline/user.py: imports ray.rllib.offline.later, which no module "
        "of the series so far holds"
    ]


def test_a_module_imported_from_its_package_before_it_is_added_is_named(tree):
    user = "from ray.rllib.offline.tests import later_helper\n\nX = later_helper\n"
    sign = "\n\nSigned-off-by: t <t@example.com>"
    first = {"rllib/offline/user.py": user, "rllib/offline/tests/other.py": "Z = 1\n"}
    _patch(tree, first, "[RLlib] uses" + sign)
    _patch(
        tree, {"rllib/offline/tests/later_helper.py": "Y = 1\n"}, "[RLlib] adds" + sign
    )
    with tempfile.TemporaryDirectory() as scratch:
        config = conventions._ruff_config(pathlib.Path(scratch))
        problems = conventions.check_patch(tree, "HEAD~1", config)
    assert problems == [
        "rllib/offline/user.py: imports ray.rllib.offline.tests.later_helper, "
        "which no module of the series so far holds"
    ]


def test_every_known_forward_import_is_still_made():
    """An untangled forward import must leave `KNOWN_FORWARD_IMPORTS`."""
    repo = pathlib.Path(__file__).resolve().parents[3]
    for path, module in conventions.KNOWN_FORWARD_IMPORTS:
        # The fork's files import `rllib.*`; the series renames it `ray.rllib.*`.
        source = (repo / path).read_text().replace("from rllib.", "from ray.rllib.")
        assert module in conventions.imported_rllib_modules(ast.parse(source)), (
            path,
            module,
        )


def test_py_test_target_follows_ray_build_file(monkeypatch):
    path = "rllib/utils/tests/test_thing.py"
    monkeypatch.setitem(bazel.FILES, path, "small")
    monkeypatch.setitem(bazel.TESTS, f"{path}::test_slow", "large")
    assert bazel.py_test(path) == textwrap.dedent(
        """\
        py_test(
            name = "utils/tests/test_thing",
            size = "large",
            srcs = ["utils/tests/test_thing.py"],
            tags = [
                "team:rllib",
                "utils",
            ],
            deps = [":conftest"],
        )"""
    )
    assert bazel.build_section(["rllib/utils/tests/helpers.py"]) == ""


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
