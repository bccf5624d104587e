"""The `ope` command: scores checkpoints on recorded episodes, no environment.

`python -m ray.rllib.offline.episodes ope --data DIR --checkpoint CKPT ...`
loads each checkpoint's RLModules (an Algorithm checkpoint, or an RLModule or
MultiRLModule checkpoint), estimates every module's discounted return on the
episodes with :mod:`ray.rllib.offline.off_policy_estimation`, and prints one
table row per checkpoint and module, best first by the ranking estimator
(FQE by default).
"""

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from ray.rllib.utils.framework import try_import_torch
from tqdm import tqdm

from rllib.offline.episode_files.action_units import (
    ACTION_UNITS,
    NORMALIZED,
    ActionRescaling,
)
from rllib.offline.episode_files.reader import read_action_units, read_episodes
from rllib.offline.off_policy_estimation import ALL_ESTIMATORS, FQEConfig
from rllib.offline.off_policy_estimation.estimate import evaluate_module
from rllib.offline.tools.inspection import progress_bar
from rllib.offline.tools.quiet_output import quiet_output

torch, _ = try_import_torch()

OPE_HELP = """\
Estimates each checkpoint's discounted return from recorded episodes alone
(off-policy evaluation), to choose between checkpoints, algorithms or
hyperparameters without an environment.

Estimators: is, wis, pdis, wpdis (importance sampling; need the policy's
probabilities, so not for deterministic continuous policies), fqe (fitted Q
evaluation) and dr (doubly robust on FQE). Behaviour probabilities come from
the episodes' recorded `action_logp` if every episode has it, else from a
model fitted to the data (the `mu` column says which). Intervals are
bootstrap intervals over episodes. The target policy is each module's
inference action distribution (`--deterministic`: its greedy/mean action).
"""

#: Default of `--fqe-resample-fits`.
FQE_RESAMPLE_FITS = 4

#: Where an Algorithm checkpoint keeps its Learner's MultiRLModule.
_MODULE_IN_ALGORITHM = os.path.join("learner_group", "learner", "rl_module")


def _estimators(text: str) -> List[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_ESTIMATORS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"choose from {','.join(ALL_ESTIMATORS)}, got {text!r}"
        )
    return names


def add_ope_command(commands, formatter_class, add_progress) -> None:
    """Adds the `ope` sub-command and its arguments."""
    ope = commands.add_parser(
        "ope",
        help="score checkpoints on recorded episodes (off-policy evaluation)",
        description=OPE_HELP,
        formatter_class=formatter_class,
    )
    ope.add_argument("--data", required=True, nargs="+", metavar="PATH")
    ope.add_argument(
        "--checkpoint",
        required=True,
        nargs="+",
        metavar="CKPT",
        help="Algorithm, MultiRLModule or RLModule checkpoint directories",
    )
    ope.add_argument(
        "--estimators",
        type=_estimators,
        default=list(ALL_ESTIMATORS),
        help=f"comma-separated (default: {','.join(ALL_ESTIMATORS)})",
    )
    ope.add_argument(
        "--rank-by",
        default=None,
        help="the estimator that orders the table (default: fqe, else dr, else "
        "the first)",
    )
    ope.add_argument("--gamma", type=float, default=0.99, help="discount (0.99)")
    ope.add_argument(
        "--fqe-updates", type=int, default=10_000, help="FQE updates (10000)"
    )
    ope.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="the episodes' time limit, if the return to estimate ends there "
        "(FQE and DR; default: truncated episodes continue)",
    )
    ope.add_argument(
        "--bootstrap", type=int, default=200, help="bootstrap resamples (200)"
    )
    ope.add_argument(
        "--fqe-resample-fits",
        type=int,
        default=FQE_RESAMPLE_FITS,
        metavar="K",
        help="FQE refits on resampled episodes behind the fqe and dr intervals, "
        "so that they cover FQE's fitting error; each costs one more fit "
        f"({FQE_RESAMPLE_FITS}; 0: one fit, intervals over episodes only)",
    )
    ope.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads for the estimates (1: several estimating processes "
        "on one machine then share its cores instead of each taking all of them)",
    )
    ope.add_argument("--deterministic", action="store_true")
    ope.add_argument("--seed", type=int, default=0)
    ope.add_argument(
        "--module-action-units",
        choices=ACTION_UNITS,
        default=NORMALIZED,
        help="the units the modules act in: 'normalized' (the default: trained "
        "with normalize_actions=True) or 'env'. Actions of files that record "
        "other units are mapped to them",
    )
    ope.add_argument("--json", action="store_true", help="print JSON, not a table")
    ope.add_argument(
        "--verbose",
        action="store_true",
        help="keep ray's warnings that need no action here (see "
        "rllib.offline.tools.quiet_output)",
    )
    add_progress(ope)


def load_modules(checkpoint: str):
    """The RLModule or MultiRLModule stored in `checkpoint`.

    Raises:
        FileNotFoundError: If `checkpoint` is not a directory.
        ValueError: If it holds no RLModule checkpoint.
    """
    from ray.rllib.core.rl_module.rl_module import RLModule

    # RLlib's loader takes a URI: a relative or `~` path becomes an absolute one.
    directory = os.path.abspath(os.path.expanduser(checkpoint))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"`--checkpoint {checkpoint}`: no such directory.")
    inside = os.path.join(directory, _MODULE_IN_ALGORITHM)
    path = inside if os.path.isdir(inside) else directory
    try:
        return RLModule.from_checkpoint(path)
    except Exception as error:  # Any failure to load names the path.
        raise ValueError(
            f"`--checkpoint {checkpoint}` holds no loadable RLModule (looked in "
            f"{path}): {error}. Pass an Algorithm checkpoint (`algo.save()`) or "
            "an RLModule/MultiRLModule checkpoint."
        ) from error


def data_action_rescaling(
    paths: Sequence[str], module_units: str
) -> Optional[ActionRescaling]:
    """Maps the actions the files record to the modules' units; None where
    they match or the files record no units (their actions are then taken as
    the modules' own).

    Raises:
        ValueError: If the `--data` paths record different units.
    """
    found = {}
    for path in paths:
        units = read_action_units(path)
        if units is not None:
            found.setdefault(units, path)
    if len(found) > 1:
        raise ValueError(
            "The `--data` paths record different action units ("
            + ", ".join(f"`{path}`: {units!r}" for units, path in found.items())
            + "). Score each kind of data on its own."
        )
    units = next(iter(found), None)
    if units is None or units == module_units:
        return None
    return ActionRescaling(units, module_units)


def score_checkpoints(args: argparse.Namespace, progress: bool) -> List[Dict]:
    """One row per checkpoint and module, best first by the ranking estimator."""
    episodes = [ep for path in args.data for ep in read_episodes(path)]
    rescaling = data_action_rescaling(args.data, args.module_action_units)
    rows = []
    fits_q = any(name in ("fqe", "dr") for name in args.estimators)
    with progress_bar(
        len(args.checkpoint), "ope", progress, unit=" checkpoints"
    ) as bar:
        for checkpoint in args.checkpoint:
            module = load_modules(checkpoint)
            # FQE's updates (all modules of the checkpoint), left on screen
            # with their rate.
            with tqdm(
                desc=f"FQE {os.path.basename(os.path.normpath(checkpoint))}",
                unit=" updates",
                file=sys.stderr,
                disable=not (progress and fits_q),
            ) as updates:
                results = evaluate_module(
                    module,
                    episodes,
                    gamma=args.gamma,
                    estimators=args.estimators,
                    deterministic=args.deterministic,
                    action_rescaling=rescaling,
                    fqe_config=FQEConfig(
                        num_updates=args.fqe_updates,
                        horizon=args.horizon,
                        seed=args.seed,
                    ),
                    num_bootstrap=args.bootstrap,
                    fqe_resample_fits=args.fqe_resample_fits,
                    seed=args.seed,
                    on_fqe_update=updates.update,
                )
            for module_id, result in results.items():
                rows.append(
                    {"checkpoint": checkpoint, "module": module_id, **result.to_dict()}
                )
            bar.update(1)
    rank = rank_estimator(args)
    rows.sort(key=lambda r: -_value(r, rank))
    return rows


def rank_estimator(args: argparse.Namespace) -> str:
    if args.rank_by is not None:
        if args.rank_by not in args.estimators:
            raise ValueError(
                f"`--rank-by {args.rank_by}` is not among `--estimators` "
                f"{','.join(args.estimators)}."
            )
        return args.rank_by
    # FQE first: DR carries the importance weights' variance on long episodes.
    for name in ("fqe", "dr"):
        if name in args.estimators:
            return name
    return args.estimators[0]


def _value(row: Dict[str, Any], name: str) -> float:
    estimate = row["estimates"].get(name)
    return float("-inf") if estimate is None else estimate["value"]


def interval_note(
    estimators: List[str], num_bootstrap: int, fqe_resample_fits: int
) -> str:
    """What the table's ``[low, high]`` intervals cover."""
    fitted = " and ".join(name for name in ("fqe", "dr") if name in estimators)
    others = [name for name in estimators if name not in ("fqe", "dr")]
    notes = []
    if fitted and fqe_resample_fits:
        notes.append(
            f"for {fitted}, 95% intervals from {fqe_resample_fits} FQE refits on "
            "resampled episodes: they cover FQE's fitting error and the episodes' "
            "sampling, not a bias that every fit shares"
        )
    over_episodes = others + ([fitted] if fitted and not fqe_resample_fits else [])
    if over_episodes and num_bootstrap > 0:
        note = (
            f"for {', '.join(over_episodes)}, 95% bootstrap intervals over the "
            f"recorded episodes ({num_bootstrap} resamples)"
        )
        if fitted and not fqe_resample_fits:
            note += (
                f"; for {fitted} under one fitted Q-function, so they leave out "
                "FQE's fitting error, which can be larger than the interval "
                "(--fqe-resample-fits covers it)"
            )
        notes.append(note)
    elif over_episodes:
        notes.append(f"for {', '.join(over_episodes)}, none (--bootstrap 0)")
    return "[low, high]: " + "; ".join(notes) + "."


def print_table(rows: List[Dict], estimators: List[str]) -> None:
    header = ["checkpoint", "module", *estimators, "mu", "ESS", "episodes"]
    table = [header]
    for row in rows:
        cells = [row["checkpoint"], row["module"]]
        for name in estimators:
            estimate = row["estimates"].get(name)
            if estimate is None:
                cells.append("n/a")
            else:
                cells.append(
                    f"{estimate['value']:.4g} "
                    f"[{estimate['low']:.4g}, {estimate['high']:.4g}]"
                )
        cells += [
            row["behavior_logp_source"],
            f"{row['effective_sample_size']:.1f}",
            str(row["num_episodes"]),
        ]
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, cells in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    unavailable = {
        (row["checkpoint"], row["module"]): row["unavailable"]
        for row in rows
        if row["unavailable"]
    }
    for (checkpoint, module), reasons in unavailable.items():
        for name, reason in reasons.items():
            print(f"n/a: {name} for {checkpoint} {module}: {reason}")


def run_ope(args: argparse.Namespace, progress: bool) -> int:
    if args.torch_threads < 1:
        raise ValueError(
            f"`--torch-threads` must be 1 or more, got {args.torch_threads}."
        )
    quiet_output(args.verbose)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.torch_threads)
    try:
        rows = score_checkpoints(args, progress)
    finally:
        torch.set_num_threads(threads)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print_table(rows, args.estimators)
        print(interval_note(args.estimators, args.bootstrap, args.fqe_resample_fits))
    return 0
