"""Proves each bug-fix patch of the series: its regression tests fail on ray's
sources and pass with the patch, applied alone.

    python -m ci.patch_series.bug_fixes --patches build/patch-series [--keep DIR]
    python -m ci.patch_series.bug_fixes --patches DIR --survey TOPIC

A topic with ``regression_tests`` is a bug fix that ray can merge on its own.
For each one the check makes a fresh copy of the installed rllib (ray's
sources), applies the fixture patch (``FIXTURE_TOPIC``) and then

1. only the test files of the topic's patch: every regression test must fail
   (the bug is there in ray's sources);
2. the rest of the patch: every regression test must pass.

Both runs are plain ray with the overlay off, as in the patched tree's run.
The patch applying on ray's sources without the rest of the series shows
that the PR stands alone (or on the PRs it names). ``--survey TOPIC`` runs
all of a topic's tests both ways and prints each outcome, to choose its
regression tests.
"""

import argparse
import dataclasses
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence

from ci.patch_series import check
from ci.patch_series.series import SERIES, Topic

#: The patch every bug fix's tests build on (the shared local Ray cluster).
FIXTURE_TOPIC = "test-fixtures"
_TEST_FILES = "*/tests/*"
_FAILED = ("failure", "error")


def junit_key(node_id: str) -> str:
    """``rllib/x/test_y.py::TestZ::test_w`` -> ``rllib.x.test_y.TestZ::test_w``,
    the form of :func:`ci.patch_series.check.outcomes`."""
    path, *names = node_id.split("::")
    module = path[: -len(".py")].replace("/", ".")
    return ".".join([module, *names[:-1]]) + "::" + names[-1]


def _patch_of(patches: pathlib.Path, slug: str) -> pathlib.Path:
    number = [topic.slug for topic in SERIES].index(slug) + 1
    found = sorted(patches.glob(f"{number:04d}-*.patch"))
    if len(found) != 1:
        sys.exit(f"no patch {number:04d}-*.patch for topic {slug} in {patches}")
    return found[0]


def _apply(ray_dir: pathlib.Path, patch: pathlib.Path, *options: str) -> None:
    result = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", *options, str(patch)],
        cwd=ray_dir,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(
            f"{patch.name} {' '.join(options)} does not apply to ray's sources "
            f"alone:\n{result.stderr}"
        )


def _run(
    site: pathlib.Path, ray_dir: pathlib.Path, node_ids: Sequence[str], xml
) -> Dict[str, str]:
    # A test module that imports what the fix adds fails to import on ray's
    # sources; the other modules still run.
    check.run_tests(
        ray_dir,
        list(node_ids),
        xml,
        check.patched_env(site),
        "--continue-on-collection-errors",
    )
    if not xml.exists():
        return {}
    return check.outcomes(xml)


def prove(
    patches: pathlib.Path, work: pathlib.Path, topic: Topic, node_ids=None
) -> Dict[str, Dict[str, str]]:
    """{"without": outcomes, "with": outcomes} of ``node_ids`` (the topic's
    regression tests by default) on ray's sources without and with its patch."""
    node_ids = list(node_ids or topic.regression_tests)
    site = work / topic.slug
    if site.exists():
        shutil.rmtree(site)
    ray_dir = check.new_site(site)
    for slug in (FIXTURE_TOPIC, *topic.stacked_on):
        _apply(ray_dir, _patch_of(patches, slug))
    patch = _patch_of(patches, topic.slug)
    _apply(ray_dir, patch, f"--include={_TEST_FILES}")
    without = _run(site, ray_dir, node_ids, work / f"{topic.slug}-without.xml")
    _apply(ray_dir, patch, f"--exclude={_TEST_FILES}")
    with_patch = _run(site, ray_dir, node_ids, work / f"{topic.slug}-with.xml")
    return {"without": without, "with": with_patch}


def problems(topic: Topic, results: Dict[str, Dict[str, str]]) -> List[str]:
    found = []
    for node_id in topic.regression_tests:
        key = junit_key(node_id)
        before = results["without"].get(key, "not run")
        after = results["with"].get(key, "not run")
        if before not in _FAILED:
            found.append(f"{node_id}: {before} on ray's sources (must fail)")
        if after != "passed":
            found.append(f"{node_id}: {after} with the patch (must pass)")
    return found


def prove_all(patches: pathlib.Path, work: pathlib.Path) -> int:
    fixes = [topic for topic in SERIES if topic.regression_tests]
    report = []
    failed = 0
    for topic in fixes:
        start = time.monotonic()
        results = prove(patches, work, topic)
        found = problems(topic, results)
        failed += bool(found)
        report.append(f"{topic.slug} ({time.monotonic() - start:.0f} s):")
        for node_id in topic.regression_tests:
            key = junit_key(node_id)
            report.append(
                f"  {node_id}\n"
                f"    ray's sources: {results['without'].get(key, 'not run')}; "
                f"with the patch: {results['with'].get(key, 'not run')}"
            )
        report += [f"  PROBLEM {line}" for line in found]
    verdict = (
        f"All {len(fixes)} bug-fix patches: their regression tests fail on ray's "
        "sources and pass with the patch alone."
        if not failed
        else f"{failed} of {len(fixes)} bug-fix patches are not proven (above)."
    )
    print("\n".join(["", "Bug-fix patches (ci/patch_series/bug_fixes.py):"] + report))
    print(verdict)
    return 1 if failed else 0


def survey(patches: pathlib.Path, work: pathlib.Path, slug: str, stacked_on=()) -> None:
    topic = next(topic for topic in SERIES if topic.slug == slug)
    if stacked_on:
        topic = dataclasses.replace(topic, stacked_on=stacked_on)
    tests = [t for t in topic.tests if pathlib.Path(t).name.startswith("test_")]
    results = prove(patches, work, topic, tests)
    for key in sorted(set(results["without"]) | set(results["with"])):
        print(
            f"{results['without'].get(key, 'not run'):>8} -> "
            f"{results['with'].get(key, 'not run'):<8} {key}"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patches", type=pathlib.Path, required=True)
    parser.add_argument("--keep", type=pathlib.Path, help="keep the work here")
    parser.add_argument("--survey", metavar="TOPIC")
    parser.add_argument(
        "--stacked-on",
        default="",
        metavar="TOPIC,...",
        help="with --survey: apply these topics' patches first",
    )
    args = parser.parse_args(argv)
    work = (
        args.keep or pathlib.Path(tempfile.mkdtemp(prefix="rllib-bug-fixes-"))
    ).resolve()
    work.mkdir(parents=True, exist_ok=True)
    patches = args.patches.resolve()
    try:
        if args.survey:
            stacked_on = [slug for slug in args.stacked_on.split(",") if slug]
            survey(patches, work, args.survey, stacked_on)
            return 0
        return prove_all(patches, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
