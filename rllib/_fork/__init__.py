"""The overlay that puts the fork's modules in effect (not an upstream path).

- :mod:`rllib._fork.registry` lists the fork's modules (plain strings, no imports).
- :mod:`rllib._fork.boot` runs at interpreter start-up from ``rllib_fork.pth``.
  It only installs a tiny import finder; nothing else happens until the
  process imports ``ray``.
- :mod:`rllib._fork.overlay` then registers post-import hooks (wrapt) that
  apply each fork module's ``REPLACES`` the moment its upstream module loads,
  after :mod:`rllib._fork.fingerprints` (the drift guard) found every replaced
  upstream object unchanged; else nothing is replaced in that process.
  :mod:`rllib._fork.fingerprint_data` holds the recorded fingerprints,
  :mod:`rllib._fork.source_fingerprint` computes them and
  :mod:`rllib._fork.fingerprint_update` is the maintainer command
  (``python -m rllib._fork.fingerprints --update``).
- :mod:`rllib._fork.cluster_check` makes fork objects that reach a process
  running a different fork (or none) raise instead of mixing logic silently.
"""
