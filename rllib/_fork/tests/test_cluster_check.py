"""Mixed-cluster check: fork objects refuse to arrive where the fork is not on."""

import copy
import os
import pickle
import socket
import sys

import pytest

import rllib
from rllib._fork.cluster_check import (
    ForkMismatchError,
    ForkStamp,
    check_fork,
    fork_stamp,
)
from rllib._fork.tests.helpers import Shipped, ShippedWithState, run_python

_HOST = socket.gethostname()


def _stamp(active=True, version=rllib.__version__, reason="", pid=1):
    return ForkStamp(version, active, reason, "sender-host", pid)


# --- In one process. ---------------------------------------------------------


def test_stamp_of_this_process():
    assert fork_stamp() == ForkStamp(rllib.__version__, True, "", _HOST, os.getpid())


@pytest.mark.parametrize("cls", [Shipped, ShippedWithState])
def test_pickle_and_copy_in_one_process_keep_the_object(cls):
    obj = cls([1, 2])
    for out in (pickle.loads(pickle.dumps(obj)), copy.deepcopy(obj), copy.copy(obj)):
        assert type(out) is cls
        assert out.value == [1, 2]
    if cls is ShippedWithState:
        # Rebuilt by its own `__reduce__`, then given its state.
        assert pickle.loads(pickle.dumps(obj)).calls == ["init", "setstate"]


def test_same_fork_passes():
    check_fork(_stamp(), what="`x`")
    check_fork(fork_stamp(), what="`x`")


def test_sender_with_fork_off_is_reported():
    sender = _stamp(active=False, reason="RLLIB_FORK_DISABLE=1 is set")
    with pytest.raises(
        ForkMismatchError,
        match=(
            r"`x` was made in host sender-host, pid 1, where the fork is off "
            r"\(RLLIB_FORK_DISABLE=1 is set\), and arrived in this process "
            rf"\(host {_HOST}, pid {os.getpid()}\), where rllib-fork "
            rf"{rllib.__version__} is active\."
        ),
    ):
        check_fork(sender, what="`x`")


# --- Pickled in this process (fork active), unpickled in another one. --------

_UNPICKLE = """
    import pickle, sys
    import pytest
    import rllib
    from rllib._fork.cluster_check import ForkMismatchError

    rllib.__version__ = {version!r} or rllib.__version__
    with open({path!r}, "rb") as f:
        data = f.read()
    with pytest.raises(ForkMismatchError, match={pattern!r}) as info:
        pickle.loads(data)
    print("raised:", info.value)
"""


def _unpickle_elsewhere(tmp_path, obj, pattern, env=None, version=""):
    path = tmp_path / "obj.pkl"
    path.write_bytes(pickle.dumps(obj))
    line, _ = run_python(
        _UNPICKLE.format(path=str(path), pattern=pattern, version=version), env=env
    )
    return line


@pytest.mark.parametrize("cls", [Shipped, ShippedWithState])
def test_receiver_with_fork_disabled_raises(tmp_path, cls):
    line = _unpickle_elsewhere(
        tmp_path,
        cls(3),
        pattern=(
            rf"rllib-fork: `rllib\._fork\.tests\.helpers\.{cls.__name__}` needs "
            r"rllib-fork in the process that receives it, but the fork is off in "
            rf"this process \(host {_HOST}, pid \d+: RLLIB_FORK_DISABLE=1 is "
            rf"set\)\. It was sent from host {_HOST}, pid {os.getpid()}, which "
            rf"runs rllib-fork {rllib.__version__}\. .*install rllib-fork "
            rf"{rllib.__version__} on every node.*or set RLLIB_FORK_DISABLE=1 "
            r"on the driver too"
        ),
        env={"RLLIB_FORK_DISABLE": "1"},
    )
    assert line.startswith("raised: rllib-fork:")


def test_receiver_with_another_fork_version_raises(tmp_path):
    _unpickle_elsewhere(
        tmp_path,
        Shipped(3),
        pattern=(
            rf"`rllib\._fork\.tests\.helpers\.Shipped` was sent from host "
            rf"{_HOST}, pid {os.getpid()}, which runs rllib-fork "
            rf"{rllib.__version__}, to this process \(host {_HOST}, pid \d+\), "
            r"which runs rllib-fork 0\.0\.1\+other\."
        ),
        version="0.0.1+other",
    )


def test_receiver_with_the_same_fork_gets_the_object(tmp_path):
    path = tmp_path / "obj.pkl"
    path.write_bytes(pickle.dumps(ShippedWithState([4])))
    line, _ = run_python(
        f"""
        import pickle
        obj = pickle.load(open({str(path)!r}, "rb"))
        print(obj.value, obj.calls)
        """
    )
    assert line == "[4] ['init', 'setstate']"


# --- Through Ray: a task in a worker started with the fork disabled. ---------


@pytest.mark.timeout(120)
def test_ray_worker_without_fork_rejects_fork_object(ray_cluster):
    ray = ray_cluster

    @ray.remote(num_cpus=0)
    def receive(obj):
        return obj.value

    # A worker like the driver gets the object.
    assert ray.get(receive.remote(Shipped(5)), timeout=100) == 5

    disabled = receive.options(
        runtime_env={"env_vars": {"RLLIB_FORK_DISABLE": "1"}}
    ).remote(Shipped(5))
    # Ray reports an argument that fails to unpickle as a system error of the
    # task, with the original message.
    with pytest.raises(
        ray.exceptions.RayError,
        match=(
            r"`rllib\._fork\.tests\.helpers\.Shipped` needs rllib-fork in the "
            r"process that receives it, but the fork is off in this process "
            r"\(host .*, pid \d+: RLLIB_FORK_DISABLE=1 is set\)"
        ),
    ):
        ray.get(disabled, timeout=100)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
