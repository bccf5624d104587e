"""Helpers shared by the overlay's tests: fresh interpreters, a shadowed ray."""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from rllib._fork.cluster_check import RequiresFork


def run_python(code, env=None, timeout=120, check=True):
    """Runs `code` in a fresh interpreter (the fork enabled unless `env` says).

    A `PYTHONPATH` in `env` goes in front of this process's `PYTHONPATH`.

    Returns:
        (last line of stdout, stderr).
    """
    full_env = dict(os.environ)
    full_env.pop("RLLIB_FORK_DISABLE", None)
    env = dict(env or {})
    if "PYTHONPATH" in env and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    full_env.update(env)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    return (lines[-1] if lines else ""), out.stderr


def shadow_ray(root, edits):
    """Builds a copy of the installed ray under `root` with some files edited.

    Every directory on the way to an edited file is a real directory whose
    other entries are symlinks to the installed ray; nothing else is copied.
    `__pycache__` folders on that way are left out, so a process importing the
    copy (with `PYTHONDONTWRITEBYTECODE=1`) never writes into the installed ray.

    Args:
        root: An empty folder; put it first on `PYTHONPATH`.
        edits: Path inside the ray package (e.g. `"rllib/utils/__init__.py"`)
            -> function from the installed file's text to the new text.

    Returns:
        `root`, as a string.
    """
    real = Path(importlib.util.find_spec("ray").origin).parent
    root = Path(root)

    def materialize(dst, src):
        dst.mkdir(parents=True)
        for entry in src.iterdir():
            if entry.name != "__pycache__":
                (dst / entry.name).symlink_to(entry)

    if not (root / "ray").exists():
        materialize(root / "ray", real)
    for rel, edit in edits.items():
        src, dst = real, root / "ray"
        *dirs, name = Path(rel).parts
        for part in dirs:
            src, dst = src / part, dst / part
            if dst.is_symlink():
                dst.unlink()
                materialize(dst, src)
        original = (src / name).read_text(encoding="utf-8")
        (dst / name).unlink()
        (dst / name).write_text(edit(original), encoding="utf-8")
    return str(root)


class Shipped(RequiresFork):
    """A fork object that other processes receive (plain instance state)."""

    def __init__(self, value):
        self.value = value


class ShippedWithState(RequiresFork):
    """One with its own `__reduce__` and `__getstate__`/`__setstate__`."""

    __slots__ = ("value", "calls")

    def __init__(self, value):
        self.value = value
        self.calls = ["init"]

    def __reduce__(self):
        return (type(self), (self.value,), {"calls": self.calls})

    def __setstate__(self, state):
        self.calls = state["calls"] + ["setstate"]
