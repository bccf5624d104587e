"""Moved to :mod:`ray.rllib.offline.tools.minari_io`.

This path keeps earlier imports working.
"""

from rllib.offline.tools.minari_io import (  # noqa: F401
    DATA_FORMATS,
    DATASET_METADATA_KEYS,
    INSTALL_HINT,
    MIN_MINARI_VERSION,
    DatasetLike,
    convert_minari,
    open_minari_dataset,
    read_minari,
    write_minari,
)
