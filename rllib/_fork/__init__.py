"""The overlay that puts the fork's modules in effect (not an upstream path).

- :mod:`rllib._fork.registry` lists the fork's modules (plain strings, no imports).
- :mod:`rllib._fork.boot` runs at interpreter start-up from ``rllib_fork.pth``.
  It only installs a tiny import finder; nothing else happens until the
  process imports ``ray``.
- :mod:`rllib._fork.overlay` then registers post-import hooks (wrapt) that
  apply each fork module's ``REPLACES`` the moment its upstream module loads.
"""
