"""Turns the fork into a patch series against ray 2.60's own rllib sources.

- :mod:`.series`: the topics, in order, with the files and tests of each.
- :mod:`.upstream_form`: rewrites one fork file into its form inside ray's tree.
- :mod:`.build`: applies the topics one by one to a copy of the installed
  ``ray/rllib`` in a scratch git repository and writes one patch per topic.

Run ``python -m ci.patch_series.build --help`` (from the repository root).
"""
