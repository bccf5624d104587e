"""Shared fixtures: one small local Ray cluster for every test that needs Ray."""

import os

import pytest


def start_local_ray():
    """Starts the session's local Ray unless Ray is running.

    Four logical CPUs on a 2-core machine: a remote Learner plus Ray Data's
    read tasks and map actors would otherwise wait for each other forever.
    """
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=int(os.environ.get("RLLIB_TEST_NUM_CPUS", "4")),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    return ray


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster shared by the whole test session (`start_local_ray`);
    a test module with its own cluster starts it again when it is done."""
    yield start_local_ray()
    import ray

    ray.shutdown()


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test: small networks crawl when two torch
    threads compete with other processes for a 2-core machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
