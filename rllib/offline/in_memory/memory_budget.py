"""How many bytes of decoded episodes training may hold in memory, per node.

The decoded episodes end up where the Learners sample them: with 0 or 1
Learners all of them on one node (the driver's node for a local Learner,
the Learner's node otherwise), with more Learners each Learner's shard on
that Learner's node. The budget is per node: by default a share of THAT
node's object store, or `config.offline_data(memory_budget=bytes)` for every
node.

`allowed_bytes` turns the per-node budgets into the most decoded bytes the
whole input may take, and names the node that limits it.
"""

import math
from dataclasses import dataclass
from typing import Dict, List, Optional

import ray

from rllib.offline.offline_settings import (
    MEMORY_BUDGET,
    check_memory_budget,
    get_offline_setting,
)

#: The deprecated `learner_config_dict` key of `offline_data(memory_budget=...)`.
MEMORY_BUDGET_KEY = MEMORY_BUDGET.legacy_key

#: Share of a node's object store the default budget allows.
DEFAULT_BUDGET_SHARE = 0.5


@dataclass
class Allowance:
    """The most decoded bytes the input may take, and why."""

    #: Decoded bytes of the whole input the limiting node allows.
    total_bytes: int
    #: The limiting node's budget and the share of the data it would hold.
    node_budget: int
    node_share: float
    node_id: Optional[str]
    #: How the budget was set, for messages.
    source: str


def start_ray_if_needed() -> None:
    """Starts Ray as a Ray Data read does (Ray's auto-init)."""
    from ray._private.auto_init_hook import auto_init_ray

    auto_init_ray()


def configured_budget(config) -> Optional[int]:
    """The budget set with `offline_data(memory_budget=...)`, None if unset.

    Raises:
        ValueError: If it is not a number of bytes >= 0.
    """
    return check_memory_budget(get_offline_setting(config, MEMORY_BUDGET))


def allowed_bytes(config, learner_node_ids: Optional[List[str]] = None) -> Allowance:
    """The decoded bytes of the whole input the nodes that hold them allow.

    Args:
        config: The algorithm config.
        learner_node_ids: The node of each remote Learner, once they run;
            None before (then every node a Learner could be placed on counts,
            with as many Learners as fit on it).
    """
    configured = configured_budget(config)
    if configured == 0:
        return Allowance(0, 0, 1.0, None, "configured")
    start_ray_if_needed()
    shares = _data_share_per_node(config, learner_node_ids)
    stores = {
        node["NodeID"]: node["Resources"].get("object_store_memory", 0)
        for node in ray.nodes()
        if node.get("Alive")
    }
    best = None
    for node_id, share in shares.items():
        if configured is not None:
            budget, source = configured, "configured"
        else:
            budget = int(DEFAULT_BUDGET_SHARE * stores.get(node_id, 0))
            source = f"{DEFAULT_BUDGET_SHARE:.0%} of the node's object store"
        total = int(budget / share)
        if best is None or total < best.total_bytes:
            best = Allowance(total, budget, share, node_id, source)
    return best


def _data_share_per_node(
    config, learner_node_ids: Optional[List[str]]
) -> Dict[str, float]:
    """Share of the decoded data each node holds (1.0: all of it)."""
    num_learners = config.num_learners
    if num_learners == 0:
        return {ray.get_runtime_context().get_node_id(): 1.0}
    if learner_node_ids:
        counts: Dict[str, int] = {}
        for node_id in learner_node_ids:
            counts[node_id] = counts.get(node_id, 0) + 1
        return {node: n / len(learner_node_ids) for node, n in counts.items()}
    # Before the Learners are placed: each node as if it got as many of them
    # as fit on it.
    shares = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        fit = _learners_that_fit(config, node["Resources"])
        if fit:
            shares[node["NodeID"]] = min(fit, num_learners) / num_learners
    return shares or {ray.get_runtime_context().get_node_id(): 1.0}


def _learners_that_fit(config, resources: Dict[str, float]) -> int:
    gpus = config.num_gpus_per_learner
    if gpus and gpus > 0:
        return int(math.floor(resources.get("GPU", 0) / gpus))
    cpus = config.num_cpus_per_learner
    cpus = 1 if cpus in (None, "auto") or cpus <= 0 else cpus
    # A node with fewer CPUs than a Learner asks for could still be chosen
    # (Ray places by logical resources): count it as holding one.
    return max(1, int(math.floor(resources.get("CPU", 0) / cpus)))
