"""Tools for datasets of recorded episodes; none of them needs the overlay.

- :mod:`.inspection`: what a dataset holds, and every problem in it.
- :mod:`.conversion`: re-writes a dataset (or a Minari dataset) as episode files.
- :mod:`.cli`: the command line front end, ``python -m ray.rllib.offline.episodes``.
- :mod:`.minari_io`, :mod:`.minari_codec`: Minari datasets in and out.
- :mod:`.quiet_output`: keeps the scripts' output to what a user can act on.
"""
