"""One seam for turning a (nested) train batch into tensors on a device.

Learners and offline evaluation runners get batches in many shapes: numpy
straight from a connector pipeline, torch tensors on the CPU from Ray Data,
tensors already on the right accelerator. Upstream decides whether to convert
by looking at ``batch["obs"]`` only, which misses Dict/Tuple observations and
any other column. :func:`needs_conversion` walks the whole nest instead and
stops at the first leaf that needs work; :func:`convert_multi_agent_batch` is
the one conversion path every learner-side ``_convert_batch_type`` delegates
to.
"""

from collections.abc import Mapping
from typing import Any, Iterator, Optional, Union

import numpy as np
from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.rllib.utils.framework import try_import_torch
from ray.rllib.utils.torch_utils import convert_to_torch_tensor
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


@DeveloperAPI
def convert_multi_agent_batch(
    batch: MultiAgentBatch,
    device: Optional[Union[str, "torch.device"]],
    *,
    pin_memory: bool = False,
    use_stream: bool = False,
    env_steps: Optional[int] = None,
) -> MultiAgentBatch:
    """Converts every leaf of a ``MultiAgentBatch`` to torch tensors on a device.

    The nested structure of each column (dicts, tuples) is kept as is.

    Args:
        batch: The batch to convert.
        device: The target device; ``None`` leaves the tensors on the CPU.
        pin_memory: Whether to pin host memory before a copy to CUDA.
        use_stream: Whether to copy to CUDA on a separate stream.
        env_steps: The env steps of the returned batch. Defaults to
            ``batch.env_steps()``.

    Returns:
        A new ``MultiAgentBatch`` with tensor leaves.

    Raises:
        TypeError: If ``batch`` is not a ``MultiAgentBatch``.
    """
    if not isinstance(batch, MultiAgentBatch):
        raise TypeError(
            "`batch` must be a `MultiAgentBatch`, got "
            f"{type(batch).__name__}. Wrap single-agent data as "
            "`MultiAgentBatch({module_id: sample_batch}, env_steps=...)`."
        )
    policy_batches = convert_to_torch_tensor(
        batch.policy_batches,
        device=device,
        pin_memory=pin_memory,
        use_stream=use_stream,
    )
    if env_steps is None:
        env_steps = batch.env_steps()
    return MultiAgentBatch(policy_batches, env_steps=env_steps)


@DeveloperAPI
def longest_module_batch(batch: MultiAgentBatch) -> int:
    """Returns the length of the longest module batch (0 for an empty batch).

    Args:
        batch: The batch to measure.

    Returns:
        ``max(len(b) for b in batch.policy_batches.values())``, or 0.
    """
    return max((len(b) for b in batch.policy_batches.values()), default=0)


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


def _convert_batch_type(self, batch, to_device, pin_memory, use_stream, env_steps):
    return convert_multi_agent_batch(
        batch,
        self._device if to_device else None,
        pin_memory=pin_memory,
        use_stream=use_stream,
        env_steps=env_steps,
    )


@DeveloperAPI
def convert_batch_type(
    self,
    batch: MultiAgentBatch,
    to_device: bool = True,
    pin_memory: bool = False,
    use_stream: bool = False,
) -> MultiAgentBatch:
    """A ``_convert_batch_type`` method (``TorchLearner``'s) on this one path.

    Converts every leaf of ``batch`` to a torch tensor, keeping its nesting.

    Args:
        self: The Learner (anything with a ``_device``).
        batch: The batch to convert.
        to_device: Whether to move the tensors to ``self._device`` (else they
            stay on the CPU).
        pin_memory: Whether to pin host memory before a copy to CUDA.
        use_stream: Whether to copy to CUDA on a separate stream.

    Returns:
        The converted batch, with ``batch``'s env steps.
    """
    return _convert_batch_type(self, batch, to_device, pin_memory, use_stream, None)


@DeveloperAPI
def convert_batch_type_counting_longest(
    self,
    batch: MultiAgentBatch,
    to_device: bool = True,
    pin_memory: bool = False,
    use_stream: bool = False,
) -> MultiAgentBatch:
    """Like :func:`convert_batch_type`, env steps = the longest module batch.

    That is how upstream's ``TorchDifferentiableLearner`` and offline
    evaluation runners count the env steps of the converted batch.
    """
    return _convert_batch_type(
        self, batch, to_device, pin_memory, use_stream, longest_module_batch(batch)
    )
