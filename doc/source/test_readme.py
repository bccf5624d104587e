"""The README's Python example runs as printed, in a fresh process."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.timeout(400)
def test_readme_example_runs_in_a_fresh_process(tmp_path):
    """Writes, reads and trains on episodes; no `ray.init()` in the example
    (`build_algo()` starts Ray itself)."""
    (example,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    result = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=360,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"^5 episodes in 1 file\(s\)$", result.stdout, re.M), result.stdout
    loss = re.search(r"^policy loss: (\S+)$", result.stdout, re.M)
    assert loss and float(loss.group(1)) > 0, result.stdout


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
