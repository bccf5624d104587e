"""Checks the patch series: it applies to ray's sources, and the patched tree
behaves as the overlay does.

    python -m ci.patch_series.check [--overlay-results XML] [--keep DIR]
        [--tier fast|all]
    python -m ci.patch_series.check --patched-only --keep DIR [--tier fast|all]
    python -m ci.patch_series.check --compare-only --keep DIR --overlay-results XML...

1. Builds the series (:mod:`ci.patch_series.build`).
2. Applies the patches one by one, with ``git apply``, to a fresh copy of the
   installed ``ray/rllib``: each must apply on top of the ones before it.
3. Makes a ``ray`` package whose ``rllib`` is the patched copy (every other
   entry links to the installed ray) and runs the series' tests in it with
   the overlay off (``RLLIB_FORK_DISABLE=1``): plain ray with the patches.
   ``--tier fast`` runs only their small and medium tests (``ci/sizes.py``),
   as CI does; ``all`` (the default) the large ones too.
   Then proves each bug-fix patch on its own (:mod:`ci.patch_series.bug_fixes`):
   its regression tests fail on ray's sources and pass with the patch.
4. Compares each test's outcome with the same test run with the overlay:
   ``--overlay-results`` (a junit XML of a fork run, as CI writes it), or a
   run of those tests made here. Any test whose outcome differs fails the
   check.

``--patched-only`` stops after step 3 and ``--compare-only`` makes step 4 from
the results step 3 left in ``--keep``: CI runs the patched tree beside the
overlay run, one per core.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from typing import Dict, List

from ci.patch_series import build as series_build
from ci.patch_series import conventions
from ci.patch_series.series import SERIES
from ci.sizes import FILES, TESTS, TIERS

REPO = series_build.REPO

#: ray's `rllib/conftest.py` imports one hook from `ray.tests.conftest`, which
#: ray's wheels do not ship; the patched tree gets this stand-in.
_TESTS_CONFTEST_STANDIN = '''"""Stand-in for ray's test conftest."""


def pytest_runtest_makereport(item, call):
    return None
'''

_PYTEST_INI = """[pytest]
python_files = test_*.py
addopts = -ra --strict-markers
timeout = 600
markers =
    ray: starts (or shares) a local Ray cluster
filterwarnings =
    ignore::DeprecationWarning
"""


def series_tests() -> List[str]:
    return [
        path
        for topic in SERIES
        for path in topic.tests
        if pathlib.Path(path).name.startswith("test_")
    ]


def deselected_outside(tier: str, tests: List[str]) -> List[str]:
    """``--deselect`` options that leave only ``tier``'s sizes of ``tests``."""
    keep = TIERS[tier]
    options = []
    for path in tests:
        if FILES[path] not in keep:
            options += ["--deselect", path]
    options += [
        option
        for node, size in TESTS.items()
        if node.split("::")[0] in tests and size not in keep
        for option in ("--deselect", node)
    ]
    return options


def new_site(site: pathlib.Path) -> pathlib.Path:
    """A ``ray`` package under ``site`` whose ``rllib`` is a copy of the
    installed one, in its own git repository; returns it."""
    ray_dir = site / "ray"
    ray_dir.mkdir(parents=True)
    installed = series_build.installed_rllib().parent
    # With the compiled modules: each copy keeps its source's time stamp
    # (`copy2`), so Python reuses them and recompiles only what a patch
    # changes (every test run in a fresh copy would otherwise compile RLlib).
    shutil.copytree(installed / "rllib", ray_dir / "rllib")
    for entry in installed.iterdir():
        if entry.name not in ("rllib", "tests", "__pycache__"):
            (ray_dir / entry.name).symlink_to(entry)
    (ray_dir / "tests").mkdir()
    (ray_dir / "tests" / "__init__.py").write_text("")
    (ray_dir / "tests" / "conftest.py").write_text(_TESTS_CONFTEST_STANDIN)
    (ray_dir / "pytest.ini").write_text(_PYTEST_INI)
    # Its own repository: inside another one (CI keeps the work under the
    # checkout's build/), `git apply` resolves paths from that repository's
    # top and silently skips the files outside the current directory.
    subprocess.run(["git", "init", "-q"], cwd=ray_dir, check=True)
    return ray_dir


def apply_series(patches: pathlib.Path, site: pathlib.Path) -> pathlib.Path:
    """A ``ray`` package under ``site`` with the patched rllib; returns it.

    After each patch, every module the patch adds or changes must import
    (overlay off): a patch works on top of the ones before it, not only at
    the end of the series.
    """
    ray_dir = new_site(site)
    env = patched_env(site)
    for patch in (patches / "series.txt").read_text().split():
        result = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(patches / patch)],
            cwd=ray_dir,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            sys.exit(f"{patch} does not apply:\n{result.stderr}")
        modules = [
            "ray." + path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
            for path in _patched_files(patches / patch)
            if path.endswith(".py") and "/tests/" not in path
        ]
        imported = subprocess.run(
            [
                sys.executable,
                "-c",
                "import importlib, sys\n"
                "for m in sys.argv[1:]: importlib.import_module(m)",
                *modules,
            ],
            cwd=site,
            env=env,
            capture_output=True,
            text=True,
        )
        if imported.returncode != 0:
            sys.exit(f"after {patch}, its modules do not import:\n{imported.stderr}")
        print(f"applied {patch}; {len(modules)} module(s) import")
    return ray_dir


def _patched_files(patch: pathlib.Path) -> List[str]:
    return [
        line[len("+++ b/") :]
        for line in patch.read_text().splitlines()
        if line.startswith("+++ b/")
    ]


def patched_env(site: pathlib.Path) -> Dict[str, str]:
    """Plain ray with the patched rllib: the overlay off, `site` first."""
    env = dict(os.environ, RLLIB_FORK_DISABLE="1", PYTHONPATH=str(site))
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_DEDUP_LOGS="0")
    return env


def run_tests(
    cwd: pathlib.Path, tests: List[str], xml: pathlib.Path, env: Dict, *options: str
):
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        # The series adds no `tests/__init__.py`: test modules keep their
        # package names (`ray.rllib.offline.tests.test_x`), so that classes
        # defined in them unpickle in Ray's worker processes.
        "-o",
        "consider_namespace_packages=true",
        f"--junitxml={xml}",
        *options,
        *tests,
    ]
    print("$", " ".join(command), f"(in {cwd})", flush=True)
    subprocess.run(command, cwd=cwd, env=env, check=False)


def outcomes(xml: pathlib.Path) -> Dict[str, str]:
    """{test id without a leading `ray.`: passed|failed|error|skipped}."""
    result = {}
    for case in ElementTree.parse(xml).getroot().iter("testcase"):
        classname = case.get("classname", "").removeprefix("ray.")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
        result[f"{classname}::{case.get('name')}"] = outcome
    return result


def compare(patched: Dict[str, str], overlay: Dict[str, str], tests) -> int:
    modules = {t[: -len(".py")].replace("/", ".") for t in tests}
    overlay = {k: v for k, v in overlay.items() if k.split("::")[0] in modules}
    differences = [
        (test, overlay.get(test, "not run"), patched.get(test, "not run"))
        for test in sorted(set(patched) | set(overlay))
        if patched.get(test) != overlay.get(test)
    ]
    same = len(set(patched) & set(overlay)) - sum(
        1 for _, a, b in differences if "not run" not in (a, b)
    )
    print(
        f"\n{len(patched)} tests in the patched tree (overlay off), "
        f"{len(overlay)} with the overlay; same outcome: {same}."
    )
    counts = {}
    for outcome in patched.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    print("patched tree:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for test, with_overlay, in_tree in differences:
        print(f"DIFFERENT {test}: overlay {with_overlay}, patched tree {in_tree}")
    return 1 if differences else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--overlay-results",
        type=pathlib.Path,
        nargs="+",
        help="junit XMLs of the overlay's runs (CI runs the tiers apart)",
    )
    parser.add_argument("--keep", type=pathlib.Path, help="keep the work here")
    parser.add_argument(
        "--tier",
        choices=("fast", "all"),
        default="all",
        help="the sizes of the series' tests to run in the patched tree "
        "(ci/sizes.py); compare with an overlay run of the same tier",
    )
    phase = parser.add_mutually_exclusive_group()
    phase.add_argument(
        "--patched-only",
        action="store_true",
        help="build, apply and run the patched tree; compare later",
    )
    phase.add_argument(
        "--compare-only",
        action="store_true",
        help="compare the patched run left in --keep with --overlay-results",
    )
    args = parser.parse_args(argv)
    if (args.patched_only or args.compare_only) and args.keep is None:
        parser.error("--patched-only and --compare-only need --keep DIR")
    if args.compare_only and args.overlay_results is None:
        parser.error("--compare-only needs --overlay-results XML")

    # Absolute: `git apply` and the tests run from inside the patched tree.
    work = (
        args.keep or pathlib.Path(tempfile.mkdtemp(prefix="rllib-series-check-"))
    ).resolve()
    tests = series_tests()
    if not args.compare_only:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        patches = series_build.build(work / "patches")
        print((patches / "summary.txt").read_text())
        report = (patches / "conventions.txt").read_text()
        print(f"Ray's conventions (ci/patch_series/conventions.py):\n{report}")
        ray_dir = apply_series(patches, work / "site")
        run_tests(
            ray_dir,
            tests,
            work / "patched.xml",
            patched_env(work / "site"),
            *deselected_outside(args.tier, tests),
        )
        # Imported here: it builds on this module's helpers.
        from ci.patch_series import bug_fixes

        fixes_unproven = bug_fixes.prove_all(patches, work / "bug-fixes")
        if not conventions.passed(report):
            print("The patch series does not follow ray's conventions (above).")
            return 1
        if fixes_unproven:
            return 1
        if args.patched_only:
            return 0
    elif not (work / "patched.xml").exists():
        sys.exit(f"no patched-tree results at {work / 'patched.xml'}")

    overlay_xmls = [xml.resolve() for xml in args.overlay_results or ()]
    if not overlay_xmls:
        overlay_xmls = [work / "overlay.xml"]
        overlay_env = {k: v for k, v in os.environ.items() if k != "RLLIB_FORK_DISABLE"}
        run_tests(REPO, tests, overlay_xmls[0], overlay_env, "--tier", args.tier)
    overlay = {}
    for xml in overlay_xmls:
        overlay.update(outcomes(xml))
    code = compare(outcomes(work / "patched.xml"), overlay, tests)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
