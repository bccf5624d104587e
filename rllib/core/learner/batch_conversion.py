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
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Union

import numpy as np
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.framework import try_import_torch
from ray.util.annotations import DeveloperAPI

if TYPE_CHECKING:
    # Only for annotations: importing ``ray.rllib.core.learner`` here would load
    # the Learner, which imports this module, while this module is half built.
    from ray.rllib.core.learner.training_data import TrainingData

torch, _ = try_import_torch()


@DeveloperAPI
def build_train_batch(
    training_data: "TrainingData",
    *,
    module,
    learner_connector,
    device,
    convert: Callable[[MultiAgentBatch], MultiAgentBatch],
    metrics=None,
    owner: Any = None,
) -> Optional[MultiAgentBatch]:
    """Builds the ``MultiAgentBatch`` a Learner trains on, converted for ``device``.

    Episodes go through the Learner connector pipeline; a single-agent
    ``SampleBatch`` is wrapped for the only module of ``module``. Whatever
    comes out is converted (once, with ``convert``) if any leaf of any column
    is a numeric numpy array or a tensor on another device
    (:func:`needs_conversion`). ``Learner`` and ``DifferentiableLearner`` both
    build their batches with this function.

    Args:
        training_data: The data passed to ``update()``.
        module: The ``MultiRLModule`` the batch is for.
        learner_connector: The Learner connector pipeline, or None.
        device: The device the batch must live on.
        convert: Converts a ``MultiAgentBatch`` to tensors on ``device``
            (the Learner's ``_convert_batch_type``).
        metrics: The ``MetricsLogger`` passed to the connector pipeline.
        owner: The Learner, named in errors.

    Returns:
        The train batch, or ``None`` if ``training_data`` holds neither a batch
        nor episodes.

    Raises:
        ValueError: If episodes are given without a connector pipeline, or a
            ``SampleBatch`` is given for a multi-module ``module``.
    """
    batch = training_data.batch
    if training_data.episodes is not None:
        if learner_connector is None:
            raise ValueError(
                f"`update()` got episodes, but the Learner ({owner}) has no "
                "LearnerConnector pipeline to turn them into a train batch. Build "
                "the Learner from an `AlgorithmConfig`, or pass a `batch` instead."
            )
        batch = _run_connector(training_data, module, learner_connector, metrics)
    elif isinstance(batch, SampleBatch):
        if len(module) != 1:
            raise ValueError(
                "`training_data.batch` is a single-agent `SampleBatch`, but this "
                f"Learner's RLModule has {len(module)} sub-modules "
                f"({list(module.keys())}). Pass a `MultiAgentBatch` mapping "
                "each ModuleID to its data instead."
            )
        only_module = next(iter(module.keys()))
        batch = MultiAgentBatch({only_module: batch}, env_steps=len(batch))
    if (
        isinstance(batch, MultiAgentBatch)
        and batch.policy_batches
        and needs_conversion(batch.policy_batches, device)
    ):
        batch = convert(batch)
    return batch


def _run_connector(training_data, module, learner_connector, metrics):
    """The connector pipeline's output for ``training_data.episodes``."""
    shared_data = {}
    module_batches = learner_connector(
        rl_module=module,
        batch=training_data.batch if training_data.batch is not None else {},
        episodes=training_data.episodes,
        shared_data=shared_data,
        metrics=metrics,
    )
    return MultiAgentBatch(
        {
            module_id: SampleBatch(
                module_data,
                _zero_padded=bool(shared_data.get(f"_zero_padded_for_mid={module_id}")),
            )
            for module_id, module_data in module_batches.items()
        },
        env_steps=sum(len(e) for e in training_data.episodes),
    )


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
