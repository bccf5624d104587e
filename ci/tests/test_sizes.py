"""`ci/sizes.py` gives every test file a size and names only real tests."""

import pathlib
import subprocess
import sys

import pytest

from ci.sizes import FILES, TESTS, TIERS

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_every_test_file_has_a_size_and_every_sized_file_exists():
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*test_*.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    test_files = {p for p in tracked if pathlib.Path(p).name.startswith("test_")}
    assert sorted(test_files - set(FILES)) == [], "add these to ci/sizes.py"
    assert sorted(set(FILES) - test_files) == [], "no such test files"
    assert set(FILES.values()) | set(TESTS.values()) <= set(TIERS["all"])


def test_every_test_sized_apart_from_its_file_is_collected():
    files = sorted({key.split("::")[0] for key in TESTS})
    assert set(files) <= set(FILES)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    collected = {line for line in out.stdout.splitlines() if "::" in line}
    functions = {nodeid.split("[", 1)[0] for nodeid in collected}
    unknown = [key for key in TESTS if key not in collected | functions]
    assert unknown == [], "ci/sizes.py names tests that do not exist"


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
