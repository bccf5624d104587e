"""Parquet files that readers see only once they are complete.

`EpisodeFileSink` is the storage half of `EpisodeWriter`: it buffers rows,
streams them as row groups into a hidden temporary file (its name starts with
".", which readers skip, as Ray Data does) and commits a full file by moving
it to its final name. A process that dies at any point leaves committed files
intact and, at most, one hidden temporary file behind.

The final name of each file is asked for when the file is committed, so a
caller can place files by what happened up to the commit (the recorder puts
each into the directory of the `sample()` call that completed it).
"""

import logging
import os
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

import pyarrow as pa
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq

logger = logging.getLogger("ray." + __name__)

#: Suffix every committed file must have (readers list `*.parquet` only).
PARQUET_SUFFIX = ".parquet"


def check_file_name(name: Any, index: int) -> str:
    """Returns `name` if it is a valid relative file name, else raises.

    Args:
        name: What a `file_name` callback returned for file `index`.
        index: The file's index, for the message.

    Raises:
        ValueError: If `name` is not a relative path ending in ".parquet" whose
            parts are visible to readers (no part starts with "." or "_").
    """
    problem = None
    if not isinstance(name, str) or not name:
        problem = "is not a non-empty str"
    elif name.startswith("/") or "\\" in name:
        problem = "is not a relative path with '/' separators"
    elif not name.endswith(PARQUET_SUFFIX):
        problem = f"does not end with {PARQUET_SUFFIX!r} (readers skip it)"
    else:
        for part in name.split("/"):
            if part in ("", ".", ".."):
                problem = f"has an empty, '.' or '..' part ({part!r})"
                break
            if part.startswith((".", "_")):
                problem = (
                    f"has a part starting with '.' or '_' ({part!r}), which "
                    "readers treat as hidden"
                )
                break
    if problem is not None:
        raise ValueError(
            f"`file_name({index})` returned {name!r}, which {problem}. Return a "
            "path relative to the writer's directory, such as "
            "'run-1/episodes-000001.parquet'."
        )
    return name


class EpisodeFileSink:
    """Buffers rows and commits them into parquet files atomically.

    Args:
        filesystem: Where the files go.
        directory: The root directory (inside `filesystem`); must exist.
        schema: The files' schema. May be replaced until the first row arrives.
        file_name: Called with a file's index (0, 1, ...) when the file is
            committed; returns its path relative to `directory` (may contain
            subdirectories, created as needed). Must be unique: an existing
            file is never overwritten.
        max_rows_per_file: A file is committed when it holds this many rows.
        buffer_bytes: Buffered payload bytes that trigger a row-group flush.
        parquet_compression: Parquet page compression.
        statistics_columns: Columns that get min/max statistics.
    """

    def __init__(
        self,
        filesystem: pa_fs.FileSystem,
        directory: str,
        *,
        schema: pa.Schema,
        file_name: Callable[[int], str],
        max_rows_per_file: int,
        buffer_bytes: int,
        parquet_compression: str,
        statistics_columns: Sequence[str] = (),
    ):
        self.filesystem = filesystem
        self.directory = directory.rstrip("/") or "/"
        self.schema = schema
        self.max_rows_per_file = max_rows_per_file
        self._file_name = file_name
        self._buffer_bytes = buffer_bytes
        self._parquet_compression = parquet_compression
        self._statistics_columns = list(statistics_columns)
        # Names the temporary files; unique per sink.
        self._token = uuid.uuid4().hex
        # Only the process that created the sink may commit its files (a
        # forked child shares the temporary file, not the right to move it).
        self._pid = os.getpid()
        self._file_index = 0
        self.files: List[str] = []
        # The file being written: (parquet writer, output stream, temp path).
        self._open = None
        self._rows_in_file = 0
        self._buffer: Dict[str, list] = self._empty_buffer()
        self._buffered_bytes = 0

    # -- state --------------------------------------------------------------

    @property
    def num_pending(self) -> int:
        """Rows appended but not yet in a committed file."""
        return self._rows_in_file + self._buffered_rows()

    @property
    def started(self) -> bool:
        """Whether any row arrived (the schema is fixed from then on)."""
        return bool(self.files or self._open is not None or self._buffered_rows())

    @property
    def temp_path(self) -> Optional[str]:
        """The hidden file being written, if any."""
        return self._open[2] if self._open is not None else None

    def owned_by_this_process(self) -> bool:
        """Whether this process created the sink (not a forked copy)."""
        return os.getpid() == self._pid

    # -- writing ------------------------------------------------------------

    def append(self, row: Dict[str, Any], nbytes: int) -> None:
        """Buffers one row; flushes and commits when a threshold is reached.

        Raises:
            OSError: (or the filesystem's error) if writing fails; the file
                being written is then discarded with its pending rows.
        """
        for column, value in row.items():
            self._buffer[column].append(value)
        self._buffered_bytes += nbytes
        if self.num_pending >= self.max_rows_per_file:
            self.flush()
        elif self._buffered_bytes >= self._buffer_bytes:
            self._flush_row_group()

    def flush(self) -> None:
        """Commits the pending rows now, as one file (no-op without rows)."""
        self._flush_row_group()
        self._commit()

    def abort(self) -> None:
        """Discards the pending rows and the temporary file."""
        if self._open is not None:
            writer, stream, temp = self._open
            self._open = None
            for closer in (writer.close, stream.close):
                try:
                    closer()
                except Exception:  # The caller's original error is what matters.
                    pass
            try:
                self.filesystem.delete_file(temp)
            except OSError:
                pass  # Hidden from readers either way.
        self._rows_in_file = 0
        self._buffer = self._empty_buffer()
        self._buffered_bytes = 0

    # -- internals ----------------------------------------------------------

    def _empty_buffer(self) -> Dict[str, list]:
        return {name: [] for name in self.schema.names}

    def _buffered_rows(self) -> int:
        return len(next(iter(self._buffer.values()), ()))

    def _open_file(self) -> None:
        temp = f"{self.directory}/.{self._token}-{self._file_index:06d}.inprogress"
        stream = self.filesystem.open_output_stream(temp)
        try:
            writer = pq.ParquetWriter(
                stream,
                self.schema,
                compression=self._parquet_compression,
                # Payloads are large and unique: no dictionary, no min/max.
                use_dictionary=False,
                write_statistics=self._statistics_columns,
            )
        except BaseException:
            stream.close()
            self.filesystem.delete_file(temp)
            raise
        self._open = (writer, stream, temp)

    def _flush_row_group(self) -> None:
        rows = self._buffered_rows()
        if not rows:
            return
        try:
            if self._open is None:
                self._open_file()
            table = pa.Table.from_pydict(self._buffer, schema=self.schema)
            self._open[0].write_table(table)
        except BaseException:
            self.abort()
            raise
        self._rows_in_file += rows
        self._buffer = self._empty_buffer()
        self._buffered_bytes = 0

    def _commit(self) -> None:
        if self._open is None:
            return
        writer, stream, temp = self._open
        try:
            name = check_file_name(self._file_name(self._file_index), self._file_index)
            final = f"{self.directory}/{name}"
            writer.close()
            stream.close()
            parent = final.rsplit("/", 1)[0]
            if parent != self.directory:
                self.filesystem.create_dir(parent, recursive=True)
            if self.filesystem.get_file_info(final).type != pa_fs.FileType.NotFound:
                raise FileExistsError(
                    f"`{final}` already exists; `EpisodeWriter` never replaces a "
                    f"committed file. Make `file_name({self._file_index})` return "
                    "names unique to this writer (e.g. with a random id in them)."
                )
            self.filesystem.move(temp, final)
        except BaseException:
            self.abort()
            raise
        self._open = None
        self._rows_in_file = 0
        self._file_index += 1
        self.files.append(final)
        logger.debug("EpisodeWriter committed %s", final)


def commit_unclosed(sink: EpisodeFileSink) -> None:
    """Commits what a writer that was never closed still holds.

    Runs when an unclosed `EpisodeWriter` is garbage-collected, or at
    interpreter exit (through `weakref.finalize`). It cannot raise to anyone:
    it logs a warning naming the count and the file, or an error if the
    commit fails.
    """
    pending = sink.num_pending
    if not pending or not sink.owned_by_this_process():
        return
    committed_before = len(sink.files)
    try:
        sink.flush()
    except Exception as error:
        logger.error(
            "EpisodeWriter for `%s` was never closed, and committing its %d "
            "pending episode(s) failed: %s: %s. These episodes are lost. Call "
            "`close()` (or use `with EpisodeWriter(...)`) to get such errors "
            "raised where they can be handled.",
            sink.directory,
            pending,
            type(error).__name__,
            error,
        )
        return
    logger.warning(
        "EpisodeWriter for `%s` was never closed: committed its %d pending "
        "episode(s) to `%s` when the writer was garbage-collected or the "
        "interpreter exited. Call `close()` (or use `with EpisodeWriter(...)`) "
        "so the last file is committed where you expect and write errors are "
        "raised.",
        sink.directory,
        pending,
        ", ".join(sink.files[committed_before:]),
    )
