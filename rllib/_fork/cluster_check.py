"""Mixed-cluster check: fork objects refuse to arrive where the fork is not on.

Several of the fork's changes hold only when every process of a Ray job runs
the fork: the prelearner writes tuple positions as ``#<i>`` keys that only the
fork's ``unflatten_dict`` rebuilds, and value targets are left for the fork's
Learner to compute. A worker node or container image without rllib-fork, one
with ``RLLIB_FORK_DISABLE=1``, or one with another rllib-fork version would mix
fork and upstream logic without an error. This module turns that into an
error, raised where the object arrives, that names both processes.

API:

- :class:`RequiresFork`: a mixin for fork classes whose instances are shipped
  to other processes (pickled: Ray task and actor arguments, Ray Data
  constructors, object refs). The pickle carries the sender's
  :class:`ForkStamp`; unpickling checks it against the receiving process
  before the object is rebuilt and raises :class:`ForkMismatchError` when the
  two differ. Put it first among the bases; the class's own ``__reduce__``,
  ``__getstate__`` and ``__setstate__`` keep working. A copy inside one
  process (``copy.deepcopy``) always passes.

  .. code-block:: python

      from rllib._fork.cluster_check import RequiresFork

      class OfflinePreLearner(RequiresFork, upstream.OfflinePreLearner):
          ...

- :func:`fork_stamp` and :func:`check_fork`: the same check for calls that
  ship plain data (no fork object), e.g. a Learner-side method that must see
  fork-made batches. The sender passes ``fork_stamp()`` along; the receiver
  calls ``check_fork(stamp, what=...)`` first.

  .. code-block:: python

      @ray.remote
      def consume(batch, stamp):
          check_fork(stamp, what="`consume`'s batch")
          ...

      consume.remote(batch, fork_stamp())

Two processes match when the fork is active in both with the same
``rllib.__version__``, or off in both. A receiving process without the
``rllib`` package at all cannot run the check: unpickling a fork object there
fails earlier, with ``ModuleNotFoundError: No module named 'rllib'``.
"""

import os
from typing import NamedTuple

from rllib._fork import boot, registry

#: Tells users how to make all processes agree; ``{version}`` is filled in.
_FIX = (
    "Every process of a Ray job (driver, Ray Data workers, Learner and "
    "EnvRunner actors, on every node) must run the same rllib-fork, or none: "
    "install rllib-fork {version} on every node and in every container image "
    "(`pip install rllib-fork=={version}`), and set {env} only on the driver "
    "(workers inherit it) or nowhere; or set {env}=1 on the driver too, to "
    "run upstream RLlib everywhere."
)


class ForkMismatchError(RuntimeError):
    """A fork object or call reached a process that runs a different fork."""


class ForkStamp(NamedTuple):
    """What one process runs, as embedded in a pickle or passed with a call.

    Attributes:
        version: ``rllib.__version__`` of the process.
        active: Whether the fork is in effect there (``rllib.is_active()``).
        reason: Why the fork is off there (``""`` when active).
        host: The host name.
        pid: The process id.
    """

    version: str
    active: bool
    reason: str
    host: str
    pid: int

    def where(self) -> str:
        return f"host {self.host}, pid {self.pid}"


_host = None


def fork_stamp() -> ForkStamp:
    """Returns the :class:`ForkStamp` of this process."""
    global _host
    import rllib

    if _host is None:
        import socket

        _host = socket.gethostname()
    active = rllib.is_active()
    return ForkStamp(
        version=rllib.__version__,
        active=active,
        reason="" if active else _inactive_reason(),
        host=_host,
        pid=os.getpid(),
    )


def _inactive_reason() -> str:
    """Why the fork is off in this process."""
    if boot.disabled_by_env():
        return f"{boot.DISABLE_ENV_VAR}={os.environ[boot.DISABLE_ENV_VAR]} is set"
    if not boot.ray_version_supported():
        return (
            f"ray {boot.ray_version() or '(not installed)'} is installed but "
            f"the fork supports ray=={registry.SUPPORTED_RAY_VERSIONS}"
        )
    if not boot.upstream_unchanged():
        from rllib._fork import fingerprints

        changed = ", ".join(fingerprints.drift().changed) or "none recorded"
        return f"the drift guard found changed upstream objects: {changed}"
    return (
        "its start-up hook did not run (`rllib_fork.pth` is missing from "
        "site-packages, or Python was started with `-S`)"
    )


def check_fork(sender: ForkStamp, what: str) -> None:
    """Checks that this process runs the same fork as ``sender``.

    Args:
        sender: The :func:`fork_stamp` of the process that sent the object or
            made the call.
        what: What arrived, for the message (e.g. ``"`OfflinePreLearner`"``).

    Raises:
        ForkMismatchError: If the fork is active on one side only, or active on
            both with different ``rllib.__version__``. The message names both
            processes, the versions seen and how to fix it.
    """
    here = fork_stamp()
    if sender.active == here.active and (
        not here.active or sender.version == here.version
    ):
        return
    if sender.active and not here.active:
        problem = (
            f"{what} needs rllib-fork in the process that receives it, but the "
            f"fork is off in this process ({here.where()}: {here.reason}). It "
            f"was sent from {sender.where()}, which runs rllib-fork "
            f"{sender.version}."
        )
    elif sender.active:
        problem = (
            f"{what} was sent from {sender.where()}, which runs rllib-fork "
            f"{sender.version}, to this process ({here.where()}), which runs "
            f"rllib-fork {here.version}."
        )
    else:
        problem = (
            f"{what} was made in {sender.where()}, where the fork is off "
            f"({sender.reason}), and arrived in this process ({here.where()}), "
            f"where rllib-fork {here.version} is active."
        )
    version = sender.version if sender.active else here.version
    raise ForkMismatchError(
        f"rllib-fork: {problem} "
        + _FIX.format(version=version, env=boot.DISABLE_ENV_VAR)
    )


def _checked_rebuild(sender: ForkStamp, what: str, rebuild, args):
    """Unpickling entry point: checks the fork, then rebuilds as before."""
    check_fork(sender, what)
    return rebuild(*args)


class RequiresFork:
    """Mixin: instances check on unpickling that the receiver runs the same fork.

    The pickle made by ``__reduce_ex__`` wraps the class's usual reduction
    (its own ``__reduce__``/``__getstate__`` included) with the sender's
    :class:`ForkStamp`; the receiving process runs :func:`check_fork` before it
    rebuilds the object and raises :class:`ForkMismatchError` on a mismatch.
    Put the mixin first among the bases and do not override
    ``__reduce_ex__`` in the class.
    """

    __slots__ = ()

    def __reduce_ex__(self, protocol):
        reduced = super().__reduce_ex__(protocol)
        if isinstance(reduced, str):
            return reduced  # Pickled by name: nothing is rebuilt.
        rebuild, args, *rest = reduced
        cls = type(self)
        what = f"`{cls.__module__}.{cls.__qualname__}`"
        return (_checked_rebuild, (fork_stamp(), what, rebuild, args), *rest)
