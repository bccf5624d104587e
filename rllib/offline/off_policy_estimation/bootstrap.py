"""Bootstrap confidence intervals over episodes."""

from typing import Callable, Dict, Tuple

import numpy as np


def bootstrap_intervals(
    estimate_fn: Callable[[np.ndarray], Dict[str, float]],
    num_episodes: int,
    *,
    num_resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> Dict[str, Tuple[float, float]]:
    """Percentile intervals of `estimate_fn` over episodes drawn with replacement.

    Args:
        estimate_fn: Maps episode indices `(E,)` (with repeats) to estimates
            by name.
        num_episodes: `E`.
        num_resamples: Bootstrap draws; 0 gives NaN intervals.
        confidence: The interval's coverage, e.g. 0.95.
        seed: Seeds the draws.

    Returns:
        A dict from estimate name to `(low, high)`.
    """
    if num_resamples <= 0:
        names = estimate_fn(np.arange(num_episodes)).keys()
        return {name: (float("nan"), float("nan")) for name in names}
    rng = np.random.default_rng(seed)
    draws: Dict[str, list] = {}
    for _ in range(num_resamples):
        indices = rng.integers(0, num_episodes, num_episodes)
        for name, value in estimate_fn(indices).items():
            draws.setdefault(name, []).append(value)
    tail = 100 * (1 - confidence) / 2
    intervals = {}
    for name, values in draws.items():
        values = np.asarray(values, np.float64)
        values = values[np.isfinite(values)]
        if len(values) == 0:
            intervals[name] = (float("nan"), float("nan"))
        else:
            low, high = np.percentile(values, [tail, 100 - tail])
            intervals[name] = (float(low), float(high))
    return intervals
