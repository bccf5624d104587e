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
from concurrent.futures import ThreadPoolExecutor
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
    return _result(_start(code, mode, env, cwd), mode, timeout)


def run_in_both_modes(
    code: str,
    *,
    env: Optional[Dict[str, str]] = None,
    timeout: float = 300,
    cwd: Optional[str] = None,
) -> Tuple[Any, Any]:
    """Runs `code` upstream and with the fork, both at once.

    The two processes share nothing but the machine (each starts its own
    local Ray), so running them side by side changes no result and overlaps
    their waits on Ray's start-up and on I/O. Arguments as `run_scenario`'s.

    Returns:
        `(upstream, fork)`, as `run_scenario` returns them.
    """
    processes = [_start(code, mode, env, cwd) for mode in (UPSTREAM, FORK)]
    # One reader per process: a full pipe must not stall the other run.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = [
            pool.submit(_result, process, mode, timeout)
            for process, mode in zip(processes, (UPSTREAM, FORK))
        ]
        return results[0].result(), results[1].result()


def _start(
    code: str, mode: str, env: Optional[Dict[str, str]], cwd: Optional[str]
) -> subprocess.Popen:
    if mode not in (FORK, UPSTREAM):
        raise ValueError(f"`mode` must be {FORK!r} or {UPSTREAM!r}, got {mode!r}.")
    full_env = dict(os.environ)
    full_env.pop("RLLIB_FORK_DISABLE", None)
    full_env.update(env or {})
    if mode == UPSTREAM:
        full_env["RLLIB_FORK_DISABLE"] = "1"
    return subprocess.Popen(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
        env=full_env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen, mode: str, timeout: float) -> Any:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise ScenarioError(
            f"The {mode} run did not finish in {timeout} s.\n{_tail(stdout, stderr)}"
        ) from None
    results = [
        line[len(RESULT_PREFIX) :]
        for line in stdout.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]
    if process.returncode != 0 or not results:
        raise ScenarioError(
            f"The {mode} run exited with {process.returncode} and "
            f"{'no' if not results else 'a'} result.\n{_tail(stdout, stderr)}"
        )
    return json.loads(results[-1])


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
