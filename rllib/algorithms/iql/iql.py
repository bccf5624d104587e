"""The fork's changes to ``ray.rllib.algorithms.iql.iql``.

``IQLConfig.validate`` accepts IQL's `beta` above 1. IQL's `beta` is the
inverse temperature of its advantage weights, exp(beta * A): the IQL paper
uses 3 (locomotion) and 10 (AntMaze), and so do d3rlpy's and CORL's defaults.
`IQLConfig` inherits `MARWILConfig.validate`, which requires MARWIL's own
`beta` (an advantage weight) to lie in [0, 1], so every such setting failed
with "`beta` must be within 0.0 and 1.0!". MARWIL's other checks still run;
IQL's own (`beta > 0`, `0 < expectile < 1`) are unchanged.
"""

from ray.rllib.algorithms.marwil.marwil import MARWILConfig


def validate(self) -> None:
    """MARWIL's checks without its [0, 1] range for `beta`, then IQL's."""
    beta = self.beta
    # MARWIL's range check reads `beta` as its own weight; IQL's positive
    # `beta` passes it as 1.0, and IQL's check below sees the real value.
    self.beta = min(beta, 1.0) if beta > 0.0 else beta
    try:
        MARWILConfig.validate(self)
    finally:
        self.beta = beta
    if self.beta <= 0.0:
        self._value_error(
            "IQL's `beta` (the inverse temperature of its advantage weights) "
            f"must be > 0; got {self.beta}."
        )
    if not 0.0 < self.expectile < 1.0:
        self._value_error(
            f"IQL's `expectile` must lie in (0, 1); got {self.expectile}."
        )


REPLACES = {
    "IQLConfig.validate": validate,
}
