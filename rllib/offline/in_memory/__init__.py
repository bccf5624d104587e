"""The in-memory training data path: episodes decoded once, sampled at array speed.

- :mod:`.columns`: episodes as flat per-step columns.
- :mod:`.store`: decoding into Ray's object store and sharding per Learner.
- :mod:`.shard_sampler`: train batches sampled from a Learner's shard.
- :mod:`.columnar_buffer`: the episode buffer behind the sampling.
- :mod:`.batch_builder`: transitions to train batches, with the inputs of
  each row's value target.
- :mod:`.memory_budget`: whether the data fits or must stream through Ray Data.
- :mod:`.read_options`: which ``read_parquet`` kwargs the path honours.
"""
