"""Command line tool for datasets of recorded episodes.

Run it as `python -m ray.rllib.offline.episodes <command> ...`:

- `info PATH`: what a dataset holds: files, episodes, steps, returns, episode
  lengths, spaces, payload format and size on disk.
- `validate PATH`: reads every episode and reports every problem with its
  file and row; exits with 1 if it finds any.
- `convert SRC DST`: re-writes a dataset with `EpisodeWriter` (checked
  episodes, spaces in the metadata, optional compression).
- `ope --data PATH --checkpoint CKPT ...`: scores checkpoints on the episodes
  by off-policy evaluation (`ray.rllib.offline.tools.ope_command`).

The work is done by `ray.rllib.offline.tools.inspection` and
`ray.rllib.offline.tools.conversion`; this module parses arguments and
prints results. Run with `--help` for the options of each command.
"""

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import rllib
from rllib.offline.tools.conversion import (
    MINARI_PREFIX,
    ConversionError,
    DestinationError,
    convert_dataset,
    convert_minari_dataset,
)
from rllib.offline.tools.inspection import (
    DEFAULT_SAMPLE_STEPS,
    SPACES_FROM_METADATA,
    DatasetInfo,
    Stats,
    ValidationReport,
    dataset_info,
    validate_dataset,
)
from rllib.offline.tools.ope_command import add_ope_command, run_ope

#: How to call this command: under ray's name where the fork is active; with
#: the overlay off (`RLLIB_FORK_DISABLE=1`, another ray version) only the
#: fork's own package has the module.
PROG = "python -m " + ("ray." if rllib.is_active() else "") + "rllib.offline.episodes"

#: Exit codes.
EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

_DESCRIPTION = """\
Inspect, validate and convert datasets of recorded RLlib episodes: parquet
files with an `item` column of serialized `SingleAgentEpisode`s, as written by
`EpisodeWriter`, by RLlib's recorder (`output_write_episodes=True`) or by hand
with msgpack + `ray.data.from_items(...).write_parquet(...)`. PATH may be a
file or a directory (searched recursively; names starting with "." or "_"
are skipped), local or a URI such as s3://bucket/episodes.
"""

_EPILOG = """\
exit codes:
  0  success (`validate`: no problem found)
  1  `validate` found problems, or `convert` stopped at data it cannot convert
  2  usage error: bad arguments, a PATH that does not exist or holds no
     parquet file, a destination that is not empty

examples:
  {prog} info /data/cartpole
  {prog} validate /data/cartpole --env CartPole-v1
  {prog} convert /data/hand-rolled /data/cartpole --env CartPole-v1
"""

_INFO_HELP = """\
Summarize a dataset: files and size on disk, episodes (terminated, truncated,
not done), env steps, episode return and length statistics (mean, std, min,
max), the observation and action spaces and where they come from (the files'
metadata, or the episodes themselves), and the payload format of the files:
`EpisodeWriter` files (with the payload compression), or an `item` column
without metadata holding msgpack'ed `get_state()` dicts with per-step lists
(the hand-rolled recipe) or numpy-ized episodes (RLlib's recorder). Reads
every row once; rows that do not decode are counted (see `validate`).
"""

_VALIDATE_HELP = """\
Read every episode and report every problem found, each with its file and
row (and episode id where known): files that are not parquet or have no
`item` column, unreadable metadata, files that record different spaces,
payloads that do not decode, episodes that are not done or have no steps,
observations/actions/rewards (and the `eps_id`/`env_steps` columns) that
disagree in length or id, NaN or infinite rewards, observations and actions
outside their spaces (`space.contains` on a sample of steps, or all with
`--all-steps`) and episode ids that occur twice. Spaces are taken from
`--env`, else the files' metadata, else the episodes. Exits with 1 if there
is any problem, 0 if the dataset is clean.
"""

_CONVERT_HELP = """\
Re-write a dataset with `EpisodeWriter`: every episode is checked (done,
consistent lengths, inside the spaces) and the spaces are stored in the file
metadata. Reads any dataset `info` reads: `EpisodeWriter` files, RLlib's
recorder output and hand-rolled msgpack files. Use `--env` to record spaces
for a source that records none. SRC may also be `minari:<dataset_id>` for a
Minari dataset (needs the `minari` package).
The output is built next to DST and moved into place only when complete, so
a failed conversion leaves DST as it was. DST must be empty or new unless
`--overwrite` (then it may even be SRC itself).
"""


class _UsageError(Exception):
    """A bad argument: reported with exit code 2."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog):
        super().__init__(prog, max_help_position=32)


# ---------------------------------------------------------------------------
# Arguments.
# ---------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr (default: when stderr is a terminal)",
    )


def _add_env(parser: argparse.ArgumentParser, purpose: str) -> None:
    parser.add_argument(
        "--env",
        metavar="ENV_ID",
        help=f"a gymnasium env id (e.g. CartPole-v1) whose spaces {purpose}",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG.format(prog=PROG),
        formatter_class=_HelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_info_command(commands)
    _add_validate_command(commands)
    _add_convert_command(commands)
    add_ope_command(commands, _HelpFormatter, _add_progress)
    return parser


def _add_info_command(commands: argparse._SubParsersAction) -> None:
    """Adds the `info` sub-command and its arguments."""
    info = commands.add_parser(
        "info",
        help="summarize a dataset (episodes, returns, spaces, format, size)",
        description=_INFO_HELP,
        formatter_class=_HelpFormatter,
    )
    info.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    info.add_argument("--files", action="store_true", help="also list every file")
    _add_progress(info)


def _add_validate_command(commands: argparse._SubParsersAction) -> None:
    """Adds the `validate` sub-command and its arguments."""
    validate = commands.add_parser(
        "validate",
        help="report every problem with its file and row (exit 1 if any)",
        description=_VALIDATE_HELP,
        formatter_class=_HelpFormatter,
    )
    validate.add_argument(
        "paths", nargs="+", metavar="PATH", help="files or directories"
    )
    _add_env(validate, "observations and actions must lie in")
    _add_steps_to_check(validate)
    validate.add_argument(
        "--max-problems",
        type=_positive_int,
        default=None,
        metavar="N",
        help="print at most N problems (default: all); the count covers all",
    )
    validate.add_argument(
        "--json", action="store_true", help="print the report as JSON"
    )
    _add_progress(validate)


def _add_steps_to_check(validate: argparse.ArgumentParser) -> None:
    """Adds `validate`'s exclusive `--sample-steps N` / `--all-steps`."""
    steps = validate.add_mutually_exclusive_group()
    steps.add_argument(
        "--sample-steps",
        type=_positive_int,
        default=DEFAULT_SAMPLE_STEPS,
        metavar="N",
        help="steps per episode checked against the spaces, evenly spread, "
        f"first and last included (default: {DEFAULT_SAMPLE_STEPS})",
    )
    steps.add_argument(
        "--all-steps",
        action="store_true",
        help="check every step against the spaces",
    )


def _add_convert_command(commands: argparse._SubParsersAction) -> None:
    """Adds the `convert` sub-command and its arguments."""
    convert = commands.add_parser(
        "convert",
        help="re-write a dataset with EpisodeWriter (checked, spaces recorded)",
        description=_CONVERT_HELP,
        formatter_class=_HelpFormatter,
    )
    convert.add_argument(
        "source",
        metavar="SRC",
        help="file or directory to read, or minari:<dataset_id>",
    )
    convert.add_argument(
        "destination", metavar="DST", help="local output directory (empty or new)"
    )
    _add_env(convert, "to record, for a SRC that records none")
    _add_writer_options(convert)
    convert.add_argument(
        "--numpy",
        action="store_true",
        help="numpy-ize episodes stored as per-step lists (smaller, faster to read)",
    )
    convert.add_argument(
        "--skip-invalid",
        action="store_true",
        help="leave out rows that do not decode or fail the checks, and list "
        "them, instead of stopping at the first",
    )
    convert.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the contents of a non-empty DST",
    )
    _add_progress(convert)


def _add_writer_options(convert: argparse.ArgumentParser) -> None:
    """Adds `convert`'s `EpisodeWriter` options (see `_writer_kwargs`)."""
    convert.add_argument(
        "--compression",
        choices=["none", "zstd", "lz4", "gzip", "brotli"],
        default="none",
        help="compression of each episode payload; `none` keeps the files "
        "readable by RLlib 2.60 and plain msgpack readers (default: none)",
    )
    convert.add_argument(
        "--parquet-compression",
        default="zstd",
        metavar="CODEC",
        help="parquet page compression: zstd, snappy, gzip, none, ... (default: zstd)",
    )
    convert.add_argument(
        "--rows-per-file",
        type=_positive_int,
        default=1000,
        metavar="N",
        help="episodes per output file (default: 1000)",
    )


# ---------------------------------------------------------------------------
# Output.
# ---------------------------------------------------------------------------


def _size(num_bytes: int) -> str:
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{num_bytes} B"


def _stats(stats: Optional[Stats], digits: int, whole: bool = False) -> str:
    """Mean, std, min and max in one line; `whole` prints min and max as ints."""
    if stats is None:
        return "-"
    parts = []
    for name in ("mean", "std", "min", "max"):
        places = 0 if whole and name in ("min", "max") else digits
        parts.append(f"{name} {getattr(stats, name):,.{places}f}")
    return ", ".join(parts)


def _counts(counts: Dict[str, int], unit: str) -> str:
    return "; ".join(
        f"{key}: {value} {unit}{'s' if value != 1 else ''}"
        for key, value in sorted(counts.items())
    )


def _print_info(info: DatasetInfo, list_files: bool) -> None:
    rows = _info_rows(info)
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}}{value}")
    if list_files:
        print()
        _print_files(info)
    for note in _info_notes(info):
        print(f"Note: {note}")


def _info_rows(info: DatasetInfo) -> List[Tuple[str, str]]:
    """The `(label, value)` lines of the `info` summary."""
    rows = [
        ("Dataset", ", ".join(info.paths)),
        ("Files", f"{len(info.files)} ({_size(info.num_bytes)} on disk)"),
        ("Format", _counts(info.formats, "file")),
        ("Payload layout", _counts(info.payload_layouts, "episode")),
        ("Compression", _counts(info.payload_compressions, "episode")),
        (
            "Episodes",
            f"{info.num_episodes:,} ({info.num_terminated:,} terminated, "
            f"{info.num_truncated:,} truncated, {info.num_not_done:,} not done)",
        ),
        ("Steps", f"{info.num_steps:,}"),
        ("Return", _stats(info.returns, 2)),
        ("Length", _stats(info.lengths, 1, whole=True)),
    ]
    for label, space in (
        ("Obs space", info.observation_space),
        ("Action space", info.action_space),
    ):
        known = space is not None
        rows.append((label, f"{space} ({info.spaces_source})" if known else "-"))
    return rows


def _print_files(info: DatasetInfo) -> None:
    """Prints one line per file of `info --files`."""
    for file in info.files:
        rows_text = "?" if file.num_rows is None else f"{file.num_rows:,}"
        print(
            f"  {file.path}: {rows_text} rows, {_size(file.num_bytes)}, "
            f"{file.format}, payload compression "
            f"{file.payload_compression or 'none'}, parquet compression "
            f"{file.parquet_compression or '-'}"
        )


def _info_notes(info: DatasetInfo) -> List[str]:
    """The notes under the `info` summary: what to run next, if anything."""
    notes = []
    unreadable = [f for f in info.files if f.problem]
    if unreadable or info.num_undecodable:
        notes.append(
            f"{len(unreadable)} file(s) cannot be read and "
            f"{info.num_undecodable} row(s) do not decode: run `{PROG} validate "
            f"{' '.join(info.paths)}` for details."
        )
    if info.spaces_disagree:
        notes.append(
            "The files record different spaces (the first one is shown): run "
            "`validate` to see which."
        )
    if info.num_not_done:
        notes.append(
            f"{info.num_not_done} episode(s) are not done; training fails on "
            "them. `validate` names them."
        )
    if info.spaces_source != SPACES_FROM_METADATA and info.num_episodes:
        notes.append(
            f"The files record no spaces. `{PROG} convert SRC DST [--env ENV_ID]` "
            "re-writes them with the spaces in their metadata."
        )
    return notes


def _print_report(report: ValidationReport, max_problems: Optional[int]) -> None:
    shown = report.problems[:max_problems] if max_problems else report.problems
    for problem in shown:
        print(problem)
    if len(shown) < len(report.problems):
        print(f"... and {len(report.problems) - len(shown)} more problem(s).")
    checked = "all steps"
    if report.sample_steps is not None:
        checked = f"up to {report.sample_steps} steps per episode"
    print(
        f"Checked {report.num_episodes:,} episode(s), {report.num_steps:,} steps, "
        f"in {report.num_files} file(s)."
    )
    for label, text in (
        ("Observations", report.observation_space),
        ("Actions", report.action_space),
    ):
        if text:
            print(f"{label} checked against {text}, {checked}.")
        else:
            print(
                f"{label} not checked against a space: none recorded; pass "
                "`--env ENV_ID` to check against an env's spaces."
            )
    if report.ok:
        print("OK: no problems found.")
        return
    kinds: Dict[str, int] = {}
    for problem in report.problems:
        kinds[problem.kind] = kinds.get(problem.kind, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    print(f"FAILED: {len(report.problems)} problem(s): {summary}.")


# ---------------------------------------------------------------------------
# Commands.
# ---------------------------------------------------------------------------


def _progress(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def _env_spaces(env_id: Optional[str]) -> Tuple[Any, Any]:
    """`(observation_space, action_space)` of a gymnasium env id, or Nones."""
    if env_id is None:
        return None, None
    import gymnasium as gym

    try:
        env = gym.make(env_id)
    except Exception as error:
        raise _UsageError(
            f"argument --env: cannot make the gymnasium env {env_id!r} "
            f"({type(error).__name__}: {error}). Pass a registered env id such "
            "as CartPole-v1 (install the package that registers it)."
        ) from error
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def _run_info(args: argparse.Namespace) -> int:
    info = dataset_info(args.paths, progress=_progress(args))
    if args.json:
        print(json.dumps(info.to_dict(), indent=2))
    else:
        _print_info(info, args.files)
    return EXIT_OK


def _run_validate(args: argparse.Namespace) -> int:
    observation_space, action_space = _env_spaces(args.env)
    report = validate_dataset(
        args.paths,
        observation_space=observation_space,
        action_space=action_space,
        sample_steps=None if args.all_steps else args.sample_steps,
        progress=_progress(args),
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_report(report, args.max_problems)
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def _writer_kwargs(args: argparse.Namespace) -> Dict[str, Any]:
    return {
        "compression": None if args.compression == "none" else args.compression,
        "parquet_compression": args.parquet_compression,
        "max_rows_per_file": args.rows_per_file,
    }


def _run_convert(args: argparse.Namespace) -> int:
    if args.source.startswith(MINARI_PREFIX):
        if args.env:
            raise _UsageError(
                "argument --env: a Minari dataset records its own spaces; drop `--env`."
            )
        result = convert_minari_dataset(
            args.source[len(MINARI_PREFIX) :],
            args.destination,
            overwrite=args.overwrite,
            progress=_progress(args),
            **_writer_kwargs(args),
        )
    else:
        observation_space, action_space = _env_spaces(args.env)
        result = convert_dataset(
            args.source,
            args.destination,
            observation_space=observation_space,
            action_space=action_space,
            to_numpy=args.numpy,
            skip_invalid=args.skip_invalid,
            overwrite=args.overwrite,
            progress=_progress(args),
            **_writer_kwargs(args),
        )
    for problem in result.skipped:
        print(f"Skipped {problem}")
    print(
        f"Wrote {result.num_episodes:,} episode(s) to {len(result.files)} file(s) "
        f"in {result.destination}"
        + (f", skipped {len(result.skipped)}." if result.skipped else ".")
    )
    if result.observation_space is not None or result.action_space is not None:
        print(
            f"Recorded spaces: observations {result.observation_space}, actions "
            f"{result.action_space}."
        )
    elif result.num_episodes:
        print(
            "No spaces recorded (the source has none): pass `--env ENV_ID` to "
            "record an env's spaces."
        )
    return EXIT_OK


def _run_ope(args: argparse.Namespace) -> int:
    return run_ope(args, _progress(args))


_COMMANDS = {
    "info": _run_info,
    "validate": _run_validate,
    "convert": _run_convert,
    "ope": _run_ope,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line tool.

    Args:
        argv: The arguments after the program name; None reads `sys.argv`.

    Returns:
        The exit code: 0 success, 1 problems in the data, 2 usage error.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return _COMMANDS[args.command](args)
    except ConversionError as error:
        _error(args.command, error)
        return EXIT_PROBLEMS
    except (
        _UsageError,
        FileNotFoundError,
        DestinationError,
        ImportError,  # No Minari support installed.
        ValueError,  # E.g. a codec this pyarrow build lacks.
    ) as error:
        _error(args.command, error)
        return EXIT_USAGE


def _error(command: str, error: Exception) -> None:
    print(f"{PROG} {command}: error: {error}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
