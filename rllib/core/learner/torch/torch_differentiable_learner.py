"""The fork's changes to ``ray.rllib.core.learner.torch.torch_differentiable_learner``.

- ``TorchDifferentiableLearner._convert_batch_type``: delegates to the fork's
  one conversion path,
  :func:`rllib.core.learner.batch_conversion.convert_multi_agent_batch`.
"""

from ray.rllib.policy.sample_batch import MultiAgentBatch

from rllib.core.learner.batch_conversion import (
    convert_multi_agent_batch,
    longest_module_batch,
)


def _convert_batch_type(
    self,
    batch: MultiAgentBatch,
    to_device: bool = True,
    pin_memory: bool = False,
    use_stream: bool = False,
) -> MultiAgentBatch:
    """Converts every leaf of ``batch`` to a torch tensor, keeping its nesting.

    Args:
        self: The ``TorchDifferentiableLearner``.
        batch: The batch to convert.
        to_device: Whether to move the tensors to the Learner's device (else
            they stay on the CPU).
        pin_memory: Whether to pin host memory before a copy to CUDA.
        use_stream: Whether to copy to CUDA on a separate stream.

    Returns:
        The converted batch; its env steps are the longest module batch's
        length, as upstream counts them here.
    """
    return convert_multi_agent_batch(
        batch,
        self._device if to_device else None,
        pin_memory=pin_memory,
        use_stream=use_stream,
        env_steps=longest_module_batch(batch),
    )


#: Upstream names in ``ray.rllib.core.learner.torch.torch_differentiable_learner``
#: that this module replaces.
REPLACES = {
    "TorchDifferentiableLearner._convert_batch_type": _convert_batch_type,
}
