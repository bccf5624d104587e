"""EpisodeWriter vs the hand-rolled msgpack + Ray Data recipe, same episodes.

The recipe users write today (from ray-project/ray#51747):

    episodes = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes]
    ray.data.from_items(episodes).write_parquet(path, compression="gzip")

One run each, on the same scripted CartPole episodes, after one untimed
warm-up write each; the recipe's time excludes `ray.init()` (reported
separately). Prints episodes/s, files and bytes side by side, then reads every
file back with `read_episodes` to check nothing was lost. The machine's load
shows in the figures: run it on an idle machine.

    python release/benchmarks/bench_episode_writer.py --num-episodes 200
"""

import argparse
import json
import os
import tempfile
import time

import gymnasium as gym

from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes


def collect(num_episodes: int, max_steps: int, seed: int):
    env = gym.make("CartPole-v1", max_episode_steps=max_steps)
    episodes = record_episodes(
        env,
        num_episodes,
        lambda obs: balance_action(obs[2], obs[3]),
        epsilon=0.05,
        seed=seed,
    )
    return env, episodes


def dir_stats(path: str):
    files = [
        os.path.join(root, name)
        for root, _, names in os.walk(path)
        for name in names
        if name.endswith(".parquet") and not name.startswith((".", "_"))
    ]
    return len(files), sum(os.path.getsize(f) for f in files)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-episodes", type=int, default=200)
    parser.add_argument("--max-steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="Also write the figures here.")
    args = parser.parse_args()

    import msgpack_numpy as mnp
    import ray
    from ray.rllib.offline.episode_files.reader import read_episodes
    from ray.rllib.offline.episode_files.writer import write_episodes

    env, episodes = collect(args.num_episodes, args.max_steps, args.seed)
    steps = sum(len(ep) for ep in episodes)
    print(
        f"{len(episodes)} CartPole episodes, {steps} env steps "
        f"(mean length {steps / len(episodes):.0f})"
    )
    root = tempfile.mkdtemp(prefix="bench-episode-writer-")
    rows = []
    # Warm-up (imports, first-call costs), not timed.
    write_episodes(episodes[:4], os.path.join(root, "warmup_fork"))

    for label, compression in [("fork EpisodeWriter", None), ("fork +zstd", "zstd")]:
        out = os.path.join(root, label.replace(" ", "_").replace("+", ""))
        start = time.perf_counter()
        write_episodes(
            episodes,
            out,
            observation_space=env.observation_space,
            action_space=env.action_space,
            compression=compression,
        )
        rows.append((label, time.perf_counter() - start, out))

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - start
    warm = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes[:4]]
    ray.data.from_items(warm).write_parquet(os.path.join(root, "warmup_snippet"))
    out = os.path.join(root, "hand_rolled")
    start = time.perf_counter()
    payloads = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes]
    ray.data.from_items(payloads).write_parquet(out, compression="gzip")
    rows.append(("hand-rolled snippet", time.perf_counter() - start, out))
    ray.shutdown()

    print(
        f"\n{'writer':<22}{'episodes/s':>12}{'files':>8}{'bytes':>12}{'read back':>11}"
    )
    figures = {}
    for label, seconds, out in rows:
        num_files, num_bytes = dir_stats(out)
        read_back = sum(1 for _ in read_episodes(out))
        figures[label] = {
            "episodes_per_s": len(episodes) / seconds,
            "env_steps_per_s": steps / seconds,
            "files": num_files,
            "bytes": num_bytes,
            "read_back": read_back,
        }
        print(
            f"{label:<22}{len(episodes) / seconds:>12,.0f}{num_files:>8}"
            f"{num_bytes:>12,}{read_back:>11}"
        )
    print(f"(ray.init for the snippet: {init_s:.1f}s, not counted; files in {root})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"episodes": len(episodes), "writers": figures}, f, indent=2)


if __name__ == "__main__":
    main()
