"""Test sizes and tiers for the whole repository (`ci/sizes.py`).

Every collected test gets its size as a marker (`-m large` works), and
`--tier` keeps the sizes of one tier: `fast` (small and medium, the README's
test command), `large` (CI adds it) or `all` (the default of a bare
`pytest`). The processes of a test run use one torch/OpenMP thread each
unless told otherwise: CI runs two test processes at once on two cores, and
each of them starts Ray workers and fresh interpreters of its own.
"""

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import pytest  # noqa: E402

from ci.sizes import FILES, TESTS, TIERS  # noqa: E402


def pytest_addoption(parser):
    parser.addoption(
        "--tier",
        choices=sorted(TIERS),
        default="all",
        help="run the tests of one tier: fast (small and medium sizes), large, "
        "or all (sizes in ci/sizes.py)",
    )


def size_of(nodeid: str) -> str:
    """The size `ci/sizes.py` gives the test `nodeid` (`path::test[params]`)."""
    path, _, name = nodeid.partition("::")
    function = name.split("[", 1)[0]
    for key in (nodeid, f"{path}::{function}"):
        if key in TESTS:
            return TESTS[key]
    if path not in FILES:
        raise pytest.UsageError(
            f"{path} has no size: add it to `FILES` in ci/sizes.py (small, "
            "medium or large, as the docstring there defines them)."
        )
    return FILES[path]


def pytest_collection_modifyitems(config, items):
    keep = TIERS[config.getoption("--tier")]
    # Files with larger tests first, so that parallel workers end together on
    # the small ones. A stable sort by file: tests keep their order, and a
    # file's module fixtures are set up once.
    rank = {size: rank for rank, size in enumerate(TIERS["all"][::-1])}
    file_rank = {}
    selected, deselected = [], []
    for item in items:
        size = size_of(item.nodeid)
        item.add_marker(size)
        if size not in keep:
            deselected.append(item)
            continue
        selected.append(item)
        path = item.nodeid.split("::", 1)[0]
        file_rank[path] = min(file_rank.get(path, len(rank)), rank[size])
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    selected.sort(key=lambda item: file_rank[item.nodeid.split("::", 1)[0]])
    items[:] = selected


def pytest_report_header(config):
    tier = config.getoption("--tier")
    return f"tier: {tier} (sizes {', '.join(TIERS[tier])}; see ci/sizes.py)"
