"""The ``py_test`` targets a patch's new test files need in ``rllib/BUILD.bazel``.

Ray runs each test file as a Bazel ``py_test``; a file without one never runs
in ray's CI. Each patch's description lists the targets to add, in ray's
form: the size from ``ci/sizes.py`` (the largest of the file's tests), the
tag of the file's top-level ``rllib`` folder plus ``team:rllib``, and the
``conftest`` dependency.
"""

import pathlib
from typing import Iterable, List

from ci.sizes import FILES, TESTS, TIERS

#: Bazel's sizes in ascending order (ray uses the same names).
_ORDER = TIERS["all"]


def is_test_file(path: str) -> bool:
    name = pathlib.PurePosixPath(path).name
    return name.startswith("test_") and name.endswith(".py")


def bazel_size(path: str) -> str:
    """The largest size ``ci/sizes.py`` gives a test of ``path``."""
    sizes = [FILES[path]] + [
        size for key, size in TESTS.items() if key.split("::", 1)[0] == path
    ]
    return max(sizes, key=_ORDER.index)


def py_test(path: str) -> str:
    """The ``py_test`` target for the test file at ``path`` (``rllib/...``)."""
    relative = pathlib.PurePosixPath(path).relative_to("rllib")
    tags = sorted([relative.parts[0], "team:rllib"])
    tag_lines = "".join(f'        "{tag}",\n' for tag in tags)
    return (
        "py_test(\n"
        f'    name = "{relative.with_suffix("")}",\n'
        f'    size = "{bazel_size(path)}",\n'
        f'    srcs = ["{relative}"],\n'
        "    tags = [\n"
        f"{tag_lines}"
        "    ],\n"
        '    deps = [":conftest"],\n'
        ")"
    )


def build_section(test_paths: Iterable[str]) -> str:
    """The description's section with the targets for ``test_paths`` ("" if
    none of them is a test file)."""
    targets: List[str] = [py_test(p) for p in test_paths if is_test_file(p)]
    if not targets:
        return ""
    return (
        "rllib/BUILD.bazel: add these targets to the section of their folder\n"
        "(alphabetically):\n\n" + "\n\n".join(targets) + "\n"
    )
