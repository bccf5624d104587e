"""Differential tests: one scenario, run with the fork and with upstream RLlib.

A scenario is a Python script (source text) that sets up what a user would
run, seeds it, and ends by printing one line ``RESULT <json>`` with what the
user sees (metrics, returns, file contents, an error message). The helpers
run it in a fresh interpreter per mode (``RLLIB_FORK_DISABLE=1`` for
upstream; Ray workers inherit the setting) and give back the parsed results,
so a test can compare the two.

Example::

    upstream, fork = run_in_both_modes(SCENARIO)
    assert_same(upstream, fork)
"""

import json
import math
import os
import subprocess
import sys
import textwrap
from typing import Any, Dict, Optional, Tuple

#: The line prefix a scenario prints its result with.
RESULT_PREFIX = "RESULT "

#: The two modes, by name.
FORK, UPSTREAM = "fork", "upstream"

#: Prepended to every scenario: one small local cluster per process, no
#: usage stats, no dashboard.
_PRELUDE = """
import json as _json
import os as _os
_os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

def emit(result):
    print("RESULT " + _json.dumps(result), flush=True)
"""


class ScenarioError(AssertionError):
    """A scenario process failed or printed no result."""


def run_scenario(
    code: str,
    *,
    mode: str,
    env: Optional[Dict[str, str]] = None,
    timeout: float = 300,
    cwd: Optional[str] = None,
) -> Any:
    """Runs `code` in a fresh interpreter in `mode` and returns its result.

    Args:
        code: The scenario's source; it calls `emit(result)` (predefined) or
            prints a line starting with `RESULT ` followed by JSON.
        mode: `"fork"` or `"upstream"` (`RLLIB_FORK_DISABLE=1`).
        env: Extra environment variables.
        timeout: Seconds before the process is killed (the test then fails).
        cwd: Working directory of the process.

    Returns:
        The parsed JSON of the last `RESULT` line.

    Raises:
        ScenarioError: If the process exits non-zero, times out, or prints no
            result; the message holds the end of its output.
    """
    if mode not in (FORK, UPSTREAM):
        raise ValueError(f"`mode` must be {FORK!r} or {UPSTREAM!r}, got {mode!r}.")
    full_env = dict(os.environ)
    full_env.pop("RLLIB_FORK_DISABLE", None)
    full_env.update(env or {})
    if mode == UPSTREAM:
        full_env["RLLIB_FORK_DISABLE"] = "1"
    source = _PRELUDE + textwrap.dedent(code)
    try:
        out = subprocess.run(
            [sys.executable, "-c", source],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as error:
        tail = _tail(error.stdout, error.stderr)
        raise ScenarioError(
            f"The {mode} run did not finish in {timeout} s.\n{tail}"
        ) from None
    results = [
        line[len(RESULT_PREFIX) :]
        for line in out.stdout.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]
    if out.returncode != 0 or not results:
        raise ScenarioError(
            f"The {mode} run exited with {out.returncode} and "
            f"{'no' if not results else 'a'} result.\n"
            f"{_tail(out.stdout, out.stderr)}"
        )
    return json.loads(results[-1])


def run_in_both_modes(code: str, **kwargs) -> Tuple[Any, Any]:
    """Runs `code` upstream, then with the fork. Returns `(upstream, fork)`."""
    return (
        run_scenario(code, mode=UPSTREAM, **kwargs),
        run_scenario(code, mode=FORK, **kwargs),
    )


def assert_same(upstream: Any, fork: Any, *, rel: float = 0.0, path: str = "") -> None:
    """Asserts that two results are equal, leaf by leaf.

    Args:
        upstream: The upstream run's result.
        fork: The fork run's result.
        rel: Relative tolerance for floats; 0 (the default) means identical.
        path: Where in the result this is (for the message).

    Raises:
        AssertionError: Naming the first leaf that differs and both values.
    """
    where = path or "result"
    if isinstance(upstream, dict) and isinstance(fork, dict):
        if set(upstream) != set(fork):
            raise AssertionError(
                f"{where}: keys differ, upstream {sorted(upstream)} vs fork "
                f"{sorted(fork)}"
            )
        for key in upstream:
            assert_same(upstream[key], fork[key], rel=rel, path=f"{where}[{key!r}]")
        return
    if isinstance(upstream, list) and isinstance(fork, list):
        if len(upstream) != len(fork):
            raise AssertionError(
                f"{where}: lengths differ, upstream {len(upstream)} vs fork "
                f"{len(fork)}: {upstream} vs {fork}"
            )
        for i, (a, b) in enumerate(zip(upstream, fork)):
            assert_same(a, b, rel=rel, path=f"{where}[{i}]")
        return
    if isinstance(upstream, float) and isinstance(fork, float) and rel > 0:
        if math.isclose(upstream, fork, rel_tol=rel) or (
            math.isnan(upstream) and math.isnan(fork)
        ):
            return
    elif upstream == fork or (
        isinstance(upstream, float)
        and isinstance(fork, float)
        and math.isnan(upstream)
        and math.isnan(fork)
    ):
        return
    raise AssertionError(f"{where}: upstream {upstream!r} vs fork {fork!r}")


def _tail(stdout, stderr, chars: int = 4000) -> str:
    def text(x):
        if isinstance(x, bytes):
            return x.decode(errors="replace")
        return x or ""

    return (
        f"--- stdout ---\n{text(stdout)[-chars:]}\n--- stderr ---\n"
        + text(stderr)[-chars:]
    )
