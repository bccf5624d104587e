"""The bug-fix proof: its verdict on given outcomes, and the regression tests
the series names (no ray cluster; the proof itself runs in CI)."""

import ast
import pathlib
import sys

import pytest

from ci.patch_series import bug_fixes, build
from ci.patch_series.series import SERIES, Topic

REPO = pathlib.Path(__file__).resolve().parents[3]

FIX = Topic(
    slug="a-fix",
    subject="s",
    description="d",
    files=["rllib/x.py"],
    tests=["rllib/tests/test_x.py"],
    regression_tests=[
        "rllib/tests/test_x.py::test_bug",
        "rllib/tests/test_x.py::TestX::test_case[1.0]",
    ],
)
BUG = "rllib.tests.test_x::test_bug"
CASE = "rllib.tests.test_x.TestX::test_case[1.0]"


def test_node_ids_map_to_junit_keys():
    assert bug_fixes.junit_key("rllib/tests/test_x.py::test_bug") == BUG
    assert bug_fixes.junit_key(FIX.regression_tests[1]) == CASE


def test_failing_without_and_passing_with_the_patch_is_a_proof():
    results = {
        "without": {BUG: "failure", CASE: "error"},
        "with": {BUG: "passed", CASE: "passed"},
    }
    assert bug_fixes.problems(FIX, results) == []


@pytest.mark.parametrize(
    "without, with_patch, expected",
    [
        ("passed", "passed", "passed on ray's sources (must fail)"),
        ("skipped", "passed", "skipped on ray's sources (must fail)"),
        ("failure", "failure", "failure with the patch (must pass)"),
        ("failure", "skipped", "skipped with the patch (must pass)"),
        ("failure", None, "not run with the patch (must pass)"),
        (None, "passed", "not run on ray's sources (must fail)"),
    ],
)
def test_anything_else_is_named(without, with_patch, expected):
    results = {
        "without": {CASE: "failure", **({BUG: without} if without else {})},
        "with": {CASE: "passed", **({BUG: with_patch} if with_patch else {})},
    }
    assert bug_fixes.problems(FIX, results) == [
        f"rllib/tests/test_x.py::test_bug: {expected}"
    ]


def _test_functions(path):
    tree = ast.parse((REPO / path).read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}::{n.name}"
                for n in node.body
                if isinstance(n, ast.FunctionDef)
            }
    return names


def test_every_regression_test_is_a_test_of_its_own_patch():
    fixes = [topic for topic in SERIES if topic.regression_tests]
    assert fixes
    for topic in fixes:
        for node_id in topic.regression_tests:
            path, _, name = node_id.partition("::")
            assert path in topic.tests, (topic.slug, node_id)
            assert name.split("[")[0] in _test_functions(path), (topic.slug, node_id)


def test_a_fix_stacks_only_on_earlier_patches():
    order = [topic.slug for topic in SERIES]
    for number, topic in enumerate(SERIES):
        for slug in topic.stacked_on:
            assert slug in order[:number], (topic.slug, slug)


def test_upstream_edits_match_rays_sources_exactly_once():
    """Each minimal fix's edits, made in series order on ray's installed
    files, find their text once: the patch is the fix and nothing else, and
    a changed ray fails here. (No topic between two edits of a file splices
    that file.)"""
    installed = build.installed_rllib()
    texts = {}
    edited = [topic for topic in SERIES if topic.upstream_edits]
    assert edited
    for topic in edited:
        for path, edits in topic.upstream_edits.items():
            if path not in texts:
                texts[path] = (installed / path.removeprefix("rllib/")).read_text()
            texts[path] = build.edit_upstream(texts[path], edits, topic.slug)


def test_an_upstream_edit_must_match_once():
    text = "a = 1\nb = 2\na = 1\n"
    assert build.edit_upstream(text, [("b = 2", "b = 3")], "x") == (
        "a = 1\nb = 3\na = 1\n"
    )
    for old in ("a = 1", "c = 3"):
        with pytest.raises(SystemExit, match="occurs [02] times"):
            build.edit_upstream(text, [(old, "")], "x")


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
