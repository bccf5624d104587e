"""The episode file format: parquet files with one serialized episode per row.

- :mod:`.payload`: one episode's serialized (optionally compressed) state.
- :mod:`.spaces`: observation and action spaces as JSON in the file metadata.
- :mod:`.validation`: checks an episode against its spaces before writing.
- :mod:`.filesystem`: the one resolver of paths, URIs and filesystems.
- :mod:`.writer`: ``EpisodeWriter`` and ``write_episodes``.
- :mod:`.reader`: ``read_episodes``, file listing and metadata.
- :mod:`.file_sink`: atomic file commits; :mod:`.recorder`: the recorder
  behind ``output_write_episodes=True``.
- :mod:`.multi_agent_state`: the state a ``MultiAgentEpisode`` row holds.
"""
