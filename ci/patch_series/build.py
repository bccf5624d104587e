"""Builds the patch series against the installed ray's rllib sources.

    python -m ci.patch_series.build --out build/patch-series

Copies the installed ``ray/rllib`` (ray 2.60's sources) into a scratch git
repository laid out like ray's (``rllib/...``), commits it, applies the topics
of :mod:`ci.patch_series.series` one commit each, and writes them with
``git format-patch`` to ``--out`` together with ``series.txt`` (the order) and
``summary.txt`` (changed lines per patch), and ``conventions.txt`` (what
:mod:`ci.patch_series.conventions` finds; the command exits 1 if anything).
``--tree`` keeps the patched tree.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from ci.patch_series import bazel, conventions, upstream_form
from ci.patch_series import series as series_module

REPO = pathlib.Path(__file__).resolve().parents[2]
AUTHOR = "rllib-fork <rllib-fork@users.noreply.github.com>"
#: The black release of ray's pre-commit configuration.
BLACK_VERSION = "22.10.0"
#: Patches over this many changed lines say why (`Topic.size_reason`).
SIZE_BAR = 800


def installed_rllib() -> pathlib.Path:
    import importlib.util

    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("ray is not installed in this environment.")
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "rllib"


def ray_version() -> str:
    from importlib.metadata import version

    return version("ray")


def _git(tree: pathlib.Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_DATE="2026-01-01T00:00:00Z")
    env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"]
    return subprocess.run(
        ["git", "-C", str(tree), *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout


def baseline(tree: pathlib.Path) -> None:
    """``tree/rllib`` = the installed rllib sources, committed."""
    shutil.copytree(
        installed_rllib(),
        tree / "rllib",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    _git(tree, "init", "-q")
    _git(tree, "config", "user.name", "rllib-fork")
    _git(tree, "config", "user.email", "rllib-fork@users.noreply.github.com")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", f"ray {ray_version()}: rllib sources")


def split_entry(entry: str):
    """``"path"`` or ``"path::Name,Class.method"`` -> (path, names or None)."""
    path, _, names = entry.partition("::")
    return path, (names.split(",") if names else None)


def apply_topic(tree: pathlib.Path, topic: series_module.Topic) -> None:
    for entry in [*topic.files, *topic.tests]:
        path, only = split_entry(entry)
        fork_text = (REPO / path).read_text()
        target = tree / path
        substitutions = topic.substitutions.get(path, ())
        if target.exists():
            upstream_text = target.read_text()
            text = upstream_form.splice(
                upstream_text, fork_text, substitutions, path, only
            )
            text = without_new_unused_imports(text, upstream_text, path)
        else:
            text = upstream_form.new_module(fork_text, substitutions, path)
        if path.endswith(".py"):
            text = ray_format(text, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for path, edits in topic.upstream_edits.items():
        target = tree / path
        text = edit_upstream(target.read_text(), edits, f"{topic.slug}: {path}")
        target.write_text(ray_format(text, path))
    _git(tree, "add", "-A")
    if not _git(tree, "diff", "--cached", "--name-only").strip():
        raise SystemExit(f"topic {topic.slug} changes nothing.")
    message = f"{topic.subject}\n\n{topic.description}\n"
    if topic.regression_tests:
        message += (
            f"\nRegression tests (they fail on ray {ray_version()} without this "
            "patch):\n" + "".join(f"- {test}\n" for test in topic.regression_tests)
        )
    if topic.stacked_on:
        subjects = {other.slug: other.subject for other in series_module.SERIES}
        message += "\nStacked on (these pull requests merge first):\n" + "".join(
            f"- {subjects[slug]}\n" for slug in topic.stacked_on
        )
    build_section = bazel.build_section(topic.tests)
    if build_section:
        message += f"\n{build_section}"
    # Ray takes contributions under the DCO: every commit is signed off.
    _git(tree, "commit", "-q", "--signoff", f"--author={AUTHOR}", "-m", message)


def edit_upstream(text: str, edits, where: str) -> str:
    """``text`` with each ``(old, new)`` edit made; ``old`` must occur once."""
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise SystemExit(
                f"{where}: an upstream edit's text occurs {count} times (must "
                f"be once); ray's code changed? It begins {old[:60]!r}."
            )
        text = text.replace(old, new)
    return text


def _ruff_unused_imports(text: str, path: str, fix: bool) -> str:
    command = [sys.executable, "-m", "ruff", "check", "--isolated", "--select"]
    command += ["F401", "--stdin-filename", path, "--exit-zero"]
    command += ["--fix", "-"] if fix else ["--output-format", "concise", "-"]
    return subprocess.run(
        command, input=text, capture_output=True, text=True, check=True
    ).stdout


def without_new_unused_imports(text: str, upstream_text: str, path: str) -> str:
    """``text`` without the imports that only the replaced code used (ruff's
    F401 fix), where upstream's file had no unused import of its own."""
    if "F401" in _ruff_unused_imports(upstream_text, path, fix=False):
        return text
    return _ruff_unused_imports(text, path, fix=True)


def ray_format(text: str, path: str) -> str:
    """``text`` formatted as ray's pre-commit formats Python (black 22.10,
    its default line length of 88)."""
    try:
        import black
    except ImportError:
        sys.exit(
            f"formatting {path} for ray needs black {BLACK_VERSION}: "
            f'pip install "black=={BLACK_VERSION}" (the test extra has it).'
        )
    if black.__version__ != BLACK_VERSION:
        sys.exit(
            f"ray formats with black {BLACK_VERSION}; this environment has "
            f'{black.__version__}: pip install "black=={BLACK_VERSION}".'
        )
    return black.format_str(text, mode=black.Mode(line_length=88))


def check_series() -> None:
    """Every fork source file is in exactly one topic, of the series or of the
    fork's own (`FORK_ONLY_TOPICS`), or deliberately left out."""
    seen = {}
    for topic in [*series_module.SERIES, *series_module.FORK_ONLY_TOPICS]:
        for entry in [*topic.files, *topic.tests]:
            if entry in seen or entry.partition("::")[0] in seen:
                sys.exit(f"{entry} is in topics {seen[entry]} and {topic.slug}.")
            if not (REPO / entry.partition("::")[0]).exists():
                sys.exit(f"{entry} (topic {topic.slug}) does not exist.")
            seen[entry] = topic.slug


def build(out: pathlib.Path, keep_tree: pathlib.Path = None) -> pathlib.Path:
    check_series()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="rllib-series-"))
    tree = scratch / "ray"
    tree.mkdir()
    baseline(tree)
    for topic in series_module.SERIES:
        apply_topic(tree, topic)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    count = len(series_module.SERIES)
    _git(tree, "format-patch", "-q", f"-{count}", "-o", str(out.resolve()))
    patches = sorted(p.name for p in out.glob("*.patch"))
    (out / "series.txt").write_text("\n".join(patches) + "\n")
    summary = [
        f"ray {ray_version()}, {count} patches. Changed lines: all = code + tests",
        f"(test files and test helpers). Over {SIZE_BAR} lines needs a reason.",
        "",
    ]
    total = 0
    for number, topic in enumerate(series_module.SERIES, 1):
        stat = _git(tree, "show", "--numstat", "--format=", f"HEAD~{count - number}")
        code = tests = 0
        for line in stat.splitlines():
            added, deleted, path = line.split("\t")
            if "/tests/" in path:
                tests += int(added) + int(deleted)
            else:
                code += int(added) + int(deleted)
        total += code + tests
        summary.append(
            f"{number:04d} {code + tests:6d} = {code:5d} + {tests:5d}  {topic.slug}"
        )
        if code + tests > SIZE_BAR:
            if not topic.size_reason:
                raise SystemExit(
                    f"topic {topic.slug} changes {code + tests} lines (over "
                    f"{SIZE_BAR}) and gives no `size_reason`."
                )
            summary += ["       " + line for line in topic.size_reason.splitlines()]
    summary += ["", f"{total} changed lines in all"]
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    found = conventions.check_tree(tree, count)
    (out / "conventions.txt").write_text(conventions.report(found))
    if keep_tree is not None:
        if keep_tree.exists():
            shutil.rmtree(keep_tree)
        shutil.copytree(tree / "rllib", keep_tree)
    shutil.rmtree(scratch)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "build/patch-series")
    parser.add_argument(
        "--tree",
        type=pathlib.Path,
        help="also keep the patched rllib tree here",
    )
    args = parser.parse_args(argv)
    out = build(args.out, args.tree)
    print((out / "summary.txt").read_text(), end="")
    print(f"patches in {out}")
    conventions_report = (out / "conventions.txt").read_text()
    print(
        f"\nRay's conventions (ci/patch_series/conventions.py):\n{conventions_report}"
    )
    return 0 if conventions.passed(conventions_report) else 1


if __name__ == "__main__":
    sys.exit(main())
