"""Keeps the output of the examples and the CLI to what a user can act on.

Ray 2.60 logs a few warnings on every run that a user of these scripts cannot
act on: that the algorithm runs on the new API stack (the default), that
`RLModule(config=...)` is deprecated (ray's own `RLModule.__init__` builds
the deprecated object), and that `gputil` is missing (GPU monitoring in
Tune). Ray Data draws progress bars for every dataset it executes. The
scripts call `quiet_output()` at start-up; `--verbose` keeps everything.

Only the driver is quieted, and only for these messages: the scripts start
Ray with `log_to_driver=False`, and a user's own programs are untouched.
"""

import logging
from typing import Sequence, Tuple

#: (logger name, text in the message) of each warning that is dropped.
UNACTIONABLE_WARNINGS: Sequence[Tuple[str, str]] = (
    ("ray.rllib.algorithms.algorithm_config", "on the new API stack!"),
    ("ray._common.deprecation", "RLModule(config=[RLModuleConfig object])"),
    ("ray.tune.utils.util", "Install gputil"),
)


class _DropMessagesContaining(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def quiet_output(verbose: bool = False) -> None:
    """Drops `UNACTIONABLE_WARNINGS` and Ray Data's progress bars, unless
    `verbose`. Idempotent."""
    if verbose:
        return
    for name, text in UNACTIONABLE_WARNINGS:
        logger = logging.getLogger(name)
        if not any(
            isinstance(f, _DropMessagesContaining) and f.text == text
            for f in logger.filters
        ):
            logger.addFilter(_DropMessagesContaining(text))
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
