"""Runs every example of the "Training from external experiences" page.

Each example under `doc/source/rllib/doc_code/` runs as its own subprocess
(as a reader would run it), with a timeout, and must print its closing
`<name>: OK` line plus the lines the page promises. The error messages the
page quotes in its Troubleshooting section must match what the fork raises
(`external_episodes_errors.py` prints them), and every `literalinclude` must
point at an existing file and marker.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "rllib-offline-external-episodes.rst"
TIMEOUT_S = int(os.environ.get("DOC_CODE_TIMEOUT_S", "420"))

#: Example -> regular expressions its output must match.
EXAMPLES = {
    "external_episodes_record.py": [
        r"Wrote 20 episodes to 2 files\.",
        r"Wrote 5 logged episodes of lengths \[\d+(, \d+){4}\]",
        r"Compressed files: \['.*\.parquet'\]",
    ],
    "external_episodes_train.py": [
        r"Recorded spaces: Box\(.*\(4,\), float32\), Discrete\(2\)",
        r"20 episodes, mean return 500\.0",
        r"5 legacy episodes",
        r"BC: loss after one iteration \d+\.\d+",
        r"MARWIL iteration 2: value-function loss \d+\.\d+",
        r"MARWIL learner device: \['(cpu|cuda:\d+)'\]",
    ],
    "external_episodes_nested_obs.py": [
        r"MARWIL on nested observations: loss -?\d+\.\d+; leaves: Tensor on ",
    ],
    "external_episodes_env_runner.py": [
        r"ppo-recording: \d+ whole episodes in \d+ file\(s\)",
        r"env-runner-recording: 10 whole episodes in 1 file\(s\)",
    ],
    "external_episodes_multi_agent.py": [
        r"Wrote 10 two-agent episodes to 2 files\.",
        r"Recorded agents: \[0, 1\]",
        r"Mean return per agent: \{0: \d+\.\d+, 1: \d+\.\d+\}",
        r"BC loss per module: \{'p0': \d+\.\d+, 'p1': \d+\.\d+\}",
    ],
    "external_episodes_errors.py": [r"=== not-done"],
}


def _run(script: str, tmp_path: Path) -> str:
    env = dict(os.environ)
    # Each example writes into its working directory and starts its own local
    # cluster, even if the test session already runs one.
    env["RAY_ADDRESS"] = "local"
    env.update(
        RAY_USAGE_STATS_ENABLED="0",
        RAY_DEDUP_LOGS="0",
        PYTHONWARNINGS="ignore::DeprecationWarning",
    )
    try:
        proc = subprocess.run(
            [sys.executable, str(HERE / script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as error:
        out = (error.stdout or b"")[-4000:]
        pytest.fail(f"{script} ran past {TIMEOUT_S}s; last output:\n{out!r}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{output[-6000:]}"
    return proc.stdout


_OUTPUTS = {}


def _output(script: str, tmp_path_factory) -> str:
    if script not in _OUTPUTS:
        _OUTPUTS[script] = _run(script, tmp_path_factory.mktemp(Path(script).stem))
    return _OUTPUTS[script]


def test_every_example_is_tested():
    on_disk = {p.name for p in HERE.glob("external_episodes_*.py")}
    assert on_disk == set(EXAMPLES)


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_example_runs(script, tmp_path_factory):
    stdout = _output(script, tmp_path_factory)
    assert f"{Path(script).stem}: OK" in stdout, stdout[-4000:]
    for pattern in EXAMPLES[script]:
        assert re.search(pattern, stdout), f"{pattern!r} not in:\n{stdout[-4000:]}"


def _literalincludes(text: str):
    """Yields (file, start-after, end-before) of each literalinclude."""
    blocks = re.split(r"^\.\. literalinclude:: ", text, flags=re.M)[1:]
    for block in blocks:
        lines = block.splitlines()
        options = dict(
            re.findall(r"^\s+:([\w-]+):\s*(.*)$", "\n".join(lines[1:8]), re.M)
        )
        yield lines[0].strip(), options.get("start-after"), options.get("end-before")


def test_literalincludes_resolve():
    text = PAGE.read_text()
    includes = list(_literalincludes(text))
    assert includes, "the page includes no example"
    for file, start, end in includes:
        source = (PAGE.parent / file).resolve()
        assert source.is_file(), file
        code = source.read_text()
        for marker in (start, end):
            if marker:
                assert code.count(marker) == 1, f"{marker} in {file}"
    used = {Path(f).name for f, _, _ in includes}
    # The errors script is named in the text; its output is what the page quotes.
    shown = set(EXAMPLES) - {"external_episodes_errors.py"}
    assert shown <= used, f"examples not on the page: {shown - used}"


def _quoted_messages(text: str):
    """The `.. code-block:: text` bodies of the page's Troubleshooting section."""
    section = text.split("\nTroubleshooting\n", 1)[1]
    for block in re.split(r"^\.\. code-block:: text\n", section, flags=re.M)[1:]:
        body = []
        for line in block.splitlines()[1:]:
            if line and not line.startswith("   "):
                break
            body.append(line.strip())
        message = " ".join(part for part in body if part)
        if message:
            yield message


def _as_regex(message: str) -> str:
    """`...` in a quoted message stands for any text (spaces around it too)."""
    return ".*?".join(re.escape(part.strip()) for part in message.split("..."))


def test_troubleshooting_messages_are_real(tmp_path_factory):
    stdout = _output("external_episodes_errors.py", tmp_path_factory)
    raised = [
        " ".join(block.split("\n", 1)[1].split()) for block in stdout.split("=== ")[1:]
    ]
    messages = list(_quoted_messages(PAGE.read_text()))
    assert len(messages) >= 10, messages
    for message in messages:
        pattern = _as_regex(message)
        assert any(re.search(pattern, r) for r in raised), (
            f"The page quotes an error the fork does not raise:\n{message}"
        )


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
