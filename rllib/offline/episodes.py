"""`python -m ray.rllib.offline.episodes`: inspect, validate and convert datasets.

The tool lives in :mod:`ray.rllib.offline.tools.cli`; this module is its
command name.
"""

import sys

from rllib.offline.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
