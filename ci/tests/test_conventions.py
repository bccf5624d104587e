"""Every test file follows ray's conventions for test files.

Ray's Bazel targets run a test file as a script: without the pytest main
block the file exits 0 having run nothing.
"""

import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MAIN_BLOCK = re.compile(
    r'^if __name__ == "__main__":\n(?:    .*\n|\n)*?'
    r'    sys\.exit\(pytest\.main\(\["-v", __file__\]\)\)\n\Z',
    re.M,
)


def _test_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [p for p in listed if re.search(r"(^|/)test_[^/]*\.py$", p)]


def test_every_test_file_ends_with_the_pytest_main_block():
    files = _test_files()
    assert len(files) > 50
    missing = [p for p in files if not MAIN_BLOCK.search((REPO / p).read_text())]
    assert missing == [], (
        'end these with `if __name__ == "__main__":` ... '
        '`sys.exit(pytest.main(["-v", __file__]))`'
    )


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
