"""Drift guard: the fork stays off if upstream changed what it replaces.

The fork replaces upstream functions, methods and whole classes. A ray patch
release that changes one of them would otherwise be overridden silently with
logic written against the older code. So :mod:`rllib._fork.fingerprint_data`
records, per ray version the fork was checked against, a fingerprint of every
upstream object named in a fork module's ``REPLACES``, and the hash of each
upstream file they are defined in.

When ``ray`` is imported, before any replacement is applied, :func:`verify`
compares the installed ray with that record, reading the upstream files from
disk without importing them:

1. Fast path: every upstream file has its recorded SHA-256, so nothing the
   fork replaces can have changed (well under a millisecond for all files).
2. Otherwise each replaced object is fingerprinted from the file's syntax tree
   (:mod:`rllib._fork.source_fingerprint`): comments, docstrings and
   formatting do not count as drift, code does.

An installed version without a record of its own is compared with each
recorded version, newest first, so a patch release that leaves the replaced
objects alone keeps the fork on. On a mismatch the overlay stays off for the
whole process: no replacement is applied, no new module is aliased under
``ray.``, ``rllib.is_active()`` is False, and one :class:`ForkDriftWarning`
names each changed ``module:qualname``.

Maintainers, after reviewing the upstream changes against the fork
(:mod:`rllib._fork.fingerprint_update`)::

    python -m rllib._fork.fingerprints            # check the installed ray
    python -m rllib._fork.fingerprints --update   # record it
"""

import hashlib
import os
import sys
import threading
import warnings
from typing import Dict, List, Optional, Tuple

from rllib._fork import boot

#: The command that regenerates :mod:`rllib._fork.fingerprint_data`.
UPDATE_COMMAND = "python -m rllib._fork.fingerprints --update"

#: How fingerprints are computed. Bump it when
#: :mod:`rllib._fork.source_fingerprint` changes them; the data file records it
#: and a record of another scheme is ignored (so the fork stays off until
#: the fingerprints are updated).
SCHEME = 1

#: Key of the per-file hashes inside one version's record.
_FILES = "files"
#: Key of the per-object fingerprints inside one version's record.
_OBJECTS = "objects"

_DATA_MODULE = "rllib._fork.fingerprint_data"


class ForkDriftWarning(RuntimeWarning):
    """The installed ray changed objects the fork replaces; the fork is off."""


class SourceUnavailable(Exception):
    """An upstream module's source file cannot be found or read."""


def object_key(module: str, qualname: str) -> str:
    """Returns the ``"module:qualname"`` name of an upstream object."""
    return f"{module}:{qualname}"


# ---------------------------------------------------------------------------
# Reading upstream sources without importing them.
# ---------------------------------------------------------------------------


def source_path(module: str) -> str:
    """Returns the path of ``module``'s source file without importing it.

    Starts from the top-level package's directories (from ``sys.modules`` when
    it is imported, else from the import system's finders) and looks for
    ``<sub>/<path>/__init__.py``, then ``<sub>/<path>.py``, as the import
    system does for regular packages; falls back to
    :class:`importlib.machinery.PathFinder` for anything else.

    Raises:
        SourceUnavailable: If the module or its ``.py`` source is not found.
    """
    parts = module.split(".")
    top = sys.modules.get(parts[0])
    if top is not None and getattr(top, "__path__", None) is not None:
        locations, origin = list(top.__path__), getattr(top, "__file__", None)
    else:
        import importlib.util

        spec = importlib.util.find_spec(parts[0])
        if spec is None:
            raise SourceUnavailable(f"package `{parts[0]}` is not installed")
        locations, origin = spec.submodule_search_locations, spec.origin
    if len(parts) > 1:
        for location in locations or ():
            base = os.path.join(location, *parts[1:])
            for candidate in (os.path.join(base, "__init__.py"), base + ".py"):
                if os.path.isfile(candidate):
                    return candidate
        origin = _path_finder_origin(parts, locations)
    if not origin or not origin.endswith(".py"):
        raise SourceUnavailable(f"module `{module}` has no Python source ({origin})")
    return origin


def _path_finder_origin(parts, locations) -> Optional[str]:
    import importlib.machinery

    origin = None
    for i in range(1, len(parts)):
        if locations is None:
            raise SourceUnavailable(f"`{'.'.join(parts[:i])}` is not a package")
        spec = importlib.machinery.PathFinder.find_spec(
            ".".join(parts[: i + 1]), locations
        )
        if spec is None:
            raise SourceUnavailable(f"module `{'.'.join(parts)}` is not found")
        locations, origin = spec.submodule_search_locations, spec.origin
    return origin


def read_source(module: str) -> Tuple[str, bytes]:
    path = source_path(module)
    try:
        with open(path, "rb") as f:
            return path, f.read()
    except OSError as e:
        raise SourceUnavailable(f"cannot read `{path}`: {e}") from e


def file_digest(data: bytes) -> str:
    """Returns the SHA-256 hex digest of a source file's bytes."""
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# The record and the check against it.
# ---------------------------------------------------------------------------


def recorded() -> Dict[str, dict]:
    """The recorded fingerprints: ray version -> record (``files``, ``objects``)."""
    import importlib

    try:
        data = importlib.import_module(_DATA_MODULE)
    except ModuleNotFoundError as e:
        if e.name != _DATA_MODULE:
            raise
        return {}
    if getattr(data, "SCHEME", None) != SCHEME:
        return {}
    return data.FINGERPRINTS


def _version_key(version: str):
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


class Drift:
    """What :func:`find_drift` found wrong with the installed ray.

    Attributes:
        ray_version: The installed ray version.
        compared_with: The recorded ray version it was compared with (None if
            nothing is recorded).
        changed: ``"module:qualname"`` of each replaced object that differs,
            with ``" (not found)"`` or ``" (no source: ...)"`` where it cannot
            be fingerprinted.
    """

    def __init__(self, ray_version: str, compared_with: Optional[str], changed):
        self.ray_version = ray_version
        self.compared_with = compared_with
        self.changed = sorted(changed)

    def message(self) -> str:
        """The warning text: what changed, what happens, how to fix it."""
        if self.compared_with is None:
            what = (
                "no upstream fingerprints are recorded for this fork "
                f"(scheme {SCHEME}), so it cannot tell whether ray "
                f"{self.ray_version} changed the objects it replaces"
            )
        elif self.compared_with == self.ray_version:
            what = (
                "upstream objects that the fork replaces differ from the ray "
                f"{self.compared_with} source that the fork was checked against "
                f"(the installed ray {self.ray_version} was patched or edited): "
                + ", ".join(f"`{name}`" for name in self.changed)
            )
        else:
            what = (
                f"the installed ray {self.ray_version} changed upstream objects "
                "that the fork replaces, compared with ray "
                f"{self.compared_with} that the fork was checked against: "
                + ", ".join(f"`{name}`" for name in self.changed)
            )
        checked = ", ".join(sorted(recorded(), key=_version_key)) or "none"
        return (
            f"rllib-fork: {what}. The fork stays off in this process: nothing "
            "is replaced and upstream RLlib runs unchanged, rather than "
            "override new upstream code with stale logic. To fix, install a "
            f"ray version the fork was checked against ({checked}) or an "
            "rllib-fork release made for this ray. Fork maintainers: review "
            f"the changes, then run `{UPDATE_COMMAND}`."
        )


def find_drift(ray_version: str) -> Tuple[Optional[Drift], Dict[str, str]]:
    """Compares the installed ray with the recorded fingerprints.

    Uses the record of ``ray_version`` if there is one; else the first
    recorded version (newest first) that the installed sources match, so a
    patch release that leaves the replaced objects alone keeps the fork on.

    Args:
        ray_version: The installed ray version.

    Returns:
        ``(None, verified)`` when every recorded object matches, where
        ``verified`` maps each ``"module:qualname"`` to its fingerprint; else
        ``(Drift, {})``.
    """
    versions = recorded()
    if ray_version in versions:
        candidates = [ray_version]
    else:
        candidates = sorted(versions, key=_version_key, reverse=True)
    if not candidates:
        return Drift(ray_version, None, []), {}
    parsed = {}  # The parsed sources, shared by the candidates.
    best = None
    for candidate in candidates:
        changed = _changed(versions[candidate], parsed)
        if not changed:
            objects = versions[candidate][_OBJECTS]
            return None, {
                object_key(module, qualname): fp
                for module, entries in objects.items()
                for qualname, fp in entries.items()
            }
        if best is None or len(changed) < len(best[1]):
            best = (candidate, changed)
    return Drift(ray_version, *best), {}


def _changed(record: dict, parsed: dict) -> List[str]:
    """The names in ``record`` whose upstream source differs from it."""
    files_match = True
    for module, digest in record[_FILES].items():
        try:
            _, data = read_source(module)
        except SourceUnavailable:
            files_match = False
            break
        if file_digest(data) != digest:
            files_match = False
            break
    if files_match:
        return []
    if "trees" not in parsed:
        from rllib._fork.source_fingerprint import SourceTrees

        parsed["trees"] = SourceTrees()
    trees = parsed["trees"]
    changed = []
    for module, entries in record[_OBJECTS].items():
        for qualname, expected in entries.items():
            name = object_key(module, qualname)
            try:
                actual = trees.fingerprint(module, qualname)
            except SourceUnavailable as e:
                changed.append(f"{name} (no source: {e})")
                continue
            except SyntaxError as e:
                changed.append(f"{name} (unparsable source: {e})")
                continue
            if actual is None:
                changed.append(f"{name} (not found)")
            elif actual != expected:
                changed.append(name)
    return changed


_lock = threading.Lock()
_result = None  # (Drift or None, verified) once checked.


def verify() -> bool:
    """Checks the installed ray once per process; warns once on drift.

    Returns:
        Whether every upstream object the fork replaces matches its recorded
        fingerprint. The result is cached for the process.
    """
    global _result
    with _lock:
        if _result is None:
            _result = find_drift(boot.ray_version())
            if _result[0] is not None:
                warnings.warn(_result[0].message(), ForkDriftWarning, stacklevel=2)
    return _result[0] is None


def drift() -> Optional[Drift]:
    """The drift :func:`verify` found in this process (None if none or unchecked)."""
    return None if _result is None else _result[0]


def is_verified(module: str, qualname: str) -> bool:
    """Whether :func:`verify` checked ``module:qualname`` and found it unchanged."""
    return _result is not None and object_key(module, qualname) in _result[1]


if __name__ == "__main__":
    from rllib._fork.fingerprint_update import main

    sys.exit(main())
