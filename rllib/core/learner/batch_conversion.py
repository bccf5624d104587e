"""Whether a (nested) train batch still needs converting for a device.

Learners and offline evaluation runners get batches in many shapes: numpy
straight from a connector pipeline, torch tensors on the CPU from Ray Data,
tensors already on the right accelerator. :func:`needs_conversion` walks the
whole nest and stops at the first leaf that needs work; the conversion itself
is the Learner's ``_convert_batch_type``. Looking at ``batch["obs"]`` only,
as ``DifferentiableLearner`` did in ray 2.60, misses every other column and
fails for Dict/Tuple observations.
"""

from collections.abc import Mapping
from typing import Any, Iterator, Optional, Union

import numpy as np
from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.rllib.utils.framework import try_import_torch
from ray.util.annotations import DeveloperAPI

torch, _ = try_import_torch()


@DeveloperAPI
def needs_conversion(batch: Any, device: Optional[Union[str, "torch.device"]]) -> bool:
    """Returns whether any leaf of ``batch`` must be converted for ``device``.

    A leaf needs conversion when it is a numeric numpy array (or numpy scalar),
    or a torch tensor on a device other than ``device``. Object and string
    arrays, ``None`` and Python scalars are left alone, as
    ``convert_to_torch_tensor`` leaves them. The walk is depth-first and stops
    at the first leaf that needs conversion.

    Args:
        batch: Any nest of dicts (including ``SampleBatch``), lists, tuples and
            ``MultiAgentBatch`` objects with array or tensor leaves.
        device: The device the batch should live on. ``None`` accepts tensors
            on any device (only numpy leaves need conversion then).

    Returns:
        True if at least one leaf needs conversion, False otherwise (also for an
        empty batch).
    """
    target = _as_torch_device(device)
    for leaf in _iter_leaves(batch):
        if isinstance(leaf, (np.ndarray, np.generic)):
            if leaf.dtype != object and leaf.dtype.kind not in "USV":
                return True
        elif torch is not None and isinstance(leaf, torch.Tensor):
            if target is not None and not _same_device(leaf.device, target):
                return True
    return False


def _iter_leaves(struct: Any) -> Iterator[Any]:
    """Yields the leaves of a nest lazily, depth-first, without recursion."""
    stack = [iter((struct,))]
    while stack:
        node = next(stack[-1], _EXHAUSTED)
        if node is _EXHAUSTED:
            stack.pop()
        elif isinstance(node, MultiAgentBatch):
            stack.append(iter((node.policy_batches,)))
        elif isinstance(node, Mapping):
            stack.append(iter(node.values()))
        elif isinstance(node, (list, tuple)):
            stack.append(iter(node))
        else:
            yield node


_EXHAUSTED = object()


def _as_torch_device(device):
    if device is None or torch is None:
        return None
    return torch.device(device)


def _same_device(a: "torch.device", b: "torch.device") -> bool:
    """Device equality where ``cuda`` (no index) means the current CUDA device."""
    if a.type != b.type:
        return False
    if a.index == b.index:
        return True
    if a.type == "cuda" and torch.cuda.is_available():
        current = torch.cuda.current_device()
        return (a.index if a.index is not None else current) == (
            b.index if b.index is not None else current
        )
    return a.index is None or b.index is None
