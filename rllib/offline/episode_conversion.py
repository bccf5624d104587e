"""Moved to :mod:`ray.rllib.offline.tools.conversion`.

This path keeps earlier imports working.
"""

from rllib.offline.tools.conversion import (  # noqa: F401
    MINARI_MODULE,
    MINARI_PREFIX,
    ConversionError,
    ConversionResult,
    DestinationError,
    check_destination,
    convert_dataset,
    convert_minari_dataset,
    minari_converter,
)
