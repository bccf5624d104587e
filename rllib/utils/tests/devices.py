"""Test parametrization over the devices this machine has (CUDA cases skip)."""

import pytest
import torch

#: Skips a test on a machine without CUDA.
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")

#: `@pytest.mark.parametrize("device", DEVICES)`: CPU always, CUDA if present.
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
