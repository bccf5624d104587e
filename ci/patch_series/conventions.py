"""Ray's conventions, checked on every patch of the series.

Run by ``ci.patch_series.build`` on its scratch repository (one commit per
patch, on top of ray's sources). A patch passes when

- its message has a ``Signed-off-by`` (ray's DCO);
- every Python file it adds or changes is formatted as black 22.10 formats
  it, and ruff with ray's lint settings finds nothing in it that it did not
  find in ray's file before the patch;
- every test file it adds has the pytest main block (ray's Bazel targets run
  the file as a script), a ``py_test`` target in the description, and only
  markers that ray's pytest registers;
- it adds no ``tests/__init__.py`` in a folder where ray has none, and no
  test file named as one of ray's (:mod:`ci.patch_series.ray_repository`);
- every ``ray.rllib`` module its files import (at the top or inside a
  function) exists once it is applied: a pull request cannot use what a
  later one adds.
"""

import ast
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Set, Tuple

from ci.patch_series import bazel, ray_repository

#: Ray's lint settings (its pyproject.toml, `[tool.ruff]`): line length 88,
#: Python 3.9 (`requires-python`), ruff's classic defaults (E4, E7, E9, F;
#: newer ruff releases select more by default) plus bugbear, quotes,
#: comprehensions and warnings, with ray's ignores. Ray also selects isort
#: ("I"), but not for `rllib/*`.
RAY_RUFF_SETTINGS = {
    "line-length": 88,
    "target-version": "py39",
    "lint": {
        "select": ["E4", "E7", "E9", "F", "B", "Q", "C4", "W"],
        "ignore": [
            *("B003", "B005", "B007", "B008", "B011", "B012", "B015", "B017"),
            *("B023", "B024", "B026", "B027", "B028", "B904"),
            *("C408", "C417", "C419", "E741", "I001"),
        ],
        "flake8-quotes": {"avoid-escape": False},
    },
}

#: Markers pytest itself and ray's test plugins (pytest-timeout) register.
REGISTERED_MARKERS = {
    "parametrize",
    "skip",
    "skipif",
    "xfail",
    "usefixtures",
    "filterwarnings",
    "timeout",
}


_RAY_TEST_NAMES = {os.path.basename(path) for path in ray_repository.TEST_FILES}


def _git(tree: pathlib.Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), *args], check=True, capture_output=True, text=True
    ).stdout


def _show(tree, commit, path) -> str:
    try:
        return _git(tree, "show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return ""


def _ruff_config(directory: pathlib.Path) -> pathlib.Path:
    def toml(table, prefix=""):
        lines, subtables = [], []
        for key, value in table.items():
            if isinstance(value, dict):
                subtables.append((f"{prefix}{key}", value))
            else:
                lines.append(f'"{key}" = {json.dumps(value)}')
        for name, sub in subtables:
            lines += ["", f"[{name}]", *toml(sub, f"{name}.")]
        return lines

    path = directory / "ruff.toml"
    path.write_text("\n".join(toml(RAY_RUFF_SETTINGS)) + "\n")
    return path


def _ruff_findings(config: pathlib.Path, path: str, text: str) -> Set[str]:
    """ruff's findings for ``text`` as the file ``path``, without line
    numbers (so that a finding upstream already had matches after edits)."""
    if not text:
        return set()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--config",
            str(config),
            "--output-format",
            "json",
            "--stdin-filename",
            path,
            "-",
        ],  # fmt: skip
        input=text,
        capture_output=True,
        text=True,
    )
    if result.returncode not in (0, 1):
        raise RuntimeError(f"ruff failed on {path}: {result.stderr}")
    found = set()
    for item in json.loads(result.stdout or "[]"):
        found.add(f"{item['code']} {item['message']}")
    return found


def _black_clean(text: str) -> bool:
    import black

    return black.format_str(text, mode=black.Mode(line_length=88)) == text


def _markers(tree: ast.AST) -> Set[str]:
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "pytest"
        ):
            names.add(node.attr)
    return names


def _has_main_block(tree: ast.Module) -> bool:
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and "__name__" in ast.unparse(node.test)
            and "pytest.main" in ast.unparse(node)
        ):
            return True
    return False


def imported_rllib_modules(
    module: ast.AST, submodules: Set[str] = frozenset()
) -> Set[str]:
    """The ``ray.rllib`` modules ``module`` imports, anywhere in it.

    ``from package import name`` imports the module ``package.name`` too
    where ``submodules`` holds that name (a module of the whole series)."""
    names = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {
                f"{node.module}.{alias.name}"
                for alias in node.names
                if f"{node.module}.{alias.name}" in submodules
            }
    return {name for name in names if name.startswith("ray.rllib.")}


def _rllib_modules_at(tree: pathlib.Path, commit: str) -> Set[str]:
    """Every importable ``ray.rllib`` module of the tree at ``commit``, and
    every folder that holds one (a package, or a namespace package such as a
    ``tests`` folder without ``__init__.py``)."""
    modules = set()
    for path in _git(tree, "ls-tree", "-r", "--name-only", commit, "rllib").split():
        if path.endswith(".py"):
            parts = ("ray/" + path[: -len(".py")]).split("/")
            if parts[-1] == "__init__":
                parts.pop()
            modules |= {".".join(parts[:end]) for end in range(2, len(parts) + 1)}
    return modules


#: Imports of modules that a later patch adds, known and not yet untangled
#: (the outside review's first blocker). Each pull request must merge after
#: the one that adds the module; the check fails on any import not listed.
KNOWN_FORWARD_IMPORTS: Dict[Tuple[str, str], str] = {
    (
        "rllib/algorithms/algorithm_config.py",
        "ray.rllib.offline.offline_multi_agent_env_runner",
    ): "validate() selects the multi-agent recorder, which the multi-agent patch adds",
}


#: Words of the fork's own vantage point, which read wrong in ray's files.
_FORK_WORDING = re.compile(r"\b(upstream|overlay|the fork|fork's)\b|rllib/_fork", re.I)


def _added_lines(tree: pathlib.Path, commit: str, path: str) -> List[str]:
    diff = _git(tree, "show", "--format=", commit, "--", path).splitlines()
    return [line[1:] for line in diff if line.startswith("+") and line[:4] != "+++ "]


def check_patch(tree: pathlib.Path, commit: str, config: pathlib.Path) -> List[str]:
    """The convention problems of the patch ``commit`` (empty: none)."""
    problems = []
    message = _git(tree, "log", "-1", "--format=%B", commit)
    if "Signed-off-by: " not in message:
        problems.append("no Signed-off-by in the message")
    status = _git(tree, "show", "--name-status", "--format=", commit).splitlines()
    available = _rllib_modules_at(tree, commit)
    # Modules of the whole series: `from package import module` names them.
    final = _rllib_modules_at(tree, "HEAD")
    for line in status:
        flag, path = line.split("\t", 1)
        if flag == "D" or not path.endswith(".py"):
            continue
        text = _show(tree, commit, path)
        before = set()
        if flag != "A":
            before = imported_rllib_modules(
                ast.parse(_show(tree, f"{commit}~1", path)), final
            )
        missing = imported_rllib_modules(ast.parse(text), final) - before - available
        problems += [
            f"{path}: imports {name}, which no module of the series so far holds"
            for name in sorted(missing)
            if (path, name) not in KNOWN_FORWARD_IMPORTS
        ]
        problems += [
            f"{path}: the fork's wording in ray's file: {line.strip()!r}"
            for line in _added_lines(tree, commit, path)
            if _FORK_WORDING.search(line)
        ]
        if not _black_clean(text):
            problems.append(f"{path}: not formatted as black 22.10 formats it")
        new = _ruff_findings(config, path, text) - _ruff_findings(
            config, path, _show(tree, f"{commit}~1", path)
        )
        problems += [f"{path}: ruff (ray's settings): {f}" for f in sorted(new)]
        name = os.path.basename(path)
        if flag == "A" and name == "__init__.py" and "/tests/" in f"/{path}":
            if path not in ray_repository.TESTS_INIT_FILES:
                problems.append(f"{path}: ray has no __init__.py in this folder")
        if not bazel.is_test_file(path):
            continue
        if flag == "A" and name in _RAY_TEST_NAMES:
            # Without `__init__.py` files, pytest imports test files by name:
            # two of one name in one run collide.
            problems.append(f"{path}: ray's repository has a test file {name}")
        module = ast.parse(text)
        if not _has_main_block(module):
            problems.append(f"{path}: no `if __name__ == '__main__'` pytest block")
        unknown = _markers(module) - REGISTERED_MARKERS
        if unknown:
            problems.append(f"{path}: unregistered markers {sorted(unknown)}")
        target = bazel.py_test(path).splitlines()[1].strip()
        if flag == "A" and target not in message:
            problems.append(f"{path}: no py_test target in the description")
    return problems


def check_tree(tree: pathlib.Path, count: int) -> Dict[str, List[str]]:
    """Problems per patch subject for the last ``count`` commits of ``tree``."""
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        config = _ruff_config(pathlib.Path(scratch))
        for number in range(count, 0, -1):
            commit = f"HEAD~{number - 1}"
            subject = _git(tree, "log", "-1", "--format=%s", commit).strip()
            problems = check_patch(tree, commit, config)
            if problems:
                found[f"{count - number + 1:04d} {subject}"] = problems
    return found


_ALL_PASS = "Every patch follows ray's conventions."


def passed(report_text: str) -> bool:
    return report_text.startswith(_ALL_PASS)


def report(found: Dict[str, List[str]]) -> str:
    if not found:
        return _ALL_PASS + "\n"
    lines = []
    for patch, problems in found.items():
        lines.append(patch)
        lines += [f"    {problem}" for problem in problems]
    total = sum(len(p) for p in found.values())
    lines.append(f"{total} problem(s) in {len(found)} patch(es).")
    return "\n".join(lines) + "\n"
