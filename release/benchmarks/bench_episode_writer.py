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
    python release/benchmarks/bench_episode_writer.py --s3

`--s3` writes to an S3-protocol server on 127.0.0.1 (moto, in the `test`
extra) instead of a local directory, and then shows what "atomic" means
there: a writer process killed mid-file (`os._exit`, no `close()`) leaves
only whole files under their final names, readers read exactly the episodes
of those files, and the listing shows whether an unfinished upload remains
(a multipart upload starts once a file's buffer passes pyarrow's part size).
Rates against a local server measure the writer's requests and encoding,
not a network.
"""

import argparse
import json
import os
import subprocess
import sys
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


class S3Server:
    """A moto S3 server on 127.0.0.1 with one bucket, `episodes`."""

    def __init__(self):
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        import boto3
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        self.client.create_bucket(Bucket="episodes")

    def filesystem_kwargs(self):
        return {
            "endpoint_override": self.endpoint,
            "access_key": "testing",
            "secret_key": "testing",
            "region": "us-east-1",
        }

    def filesystem(self):
        import pyarrow.fs as pa_fs

        return pa_fs.S3FileSystem(**self.filesystem_kwargs())

    def objects(self, prefix: str):
        listing = self.client.list_objects_v2(Bucket="episodes", Prefix=prefix)
        return [
            (o["Key"], o["Size"])
            for o in listing.get("Contents", [])
            if not o["Key"].endswith("/")
        ]

    def unfinished_uploads(self, prefix: str):
        listing = self.client.list_multipart_uploads(Bucket="episodes", Prefix=prefix)
        return [upload["Key"] for upload in listing.get("Uploads", [])]

    def stop(self):
        self._server.stop()


_KILLED_WRITER = """
import os, pyarrow.fs as pa_fs
from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes
import gymnasium as gym
from ray.rllib.offline.episode_files.writer import EpisodeWriter

env = gym.make("CartPole-v1", max_episode_steps={max_steps})
episodes = record_episodes(
    env, {num_episodes}, lambda obs: balance_action(obs[2], obs[3]), epsilon=0.05
)
writer = EpisodeWriter(
    "{path}",
    filesystem=pa_fs.S3FileSystem(**{fs_kwargs!r}),
    max_rows_per_file={max_rows},
    buffer_bytes={buffer_bytes},
    observation_space=env.observation_space,
    action_space=env.action_space,
)
for episode in episodes:
    writer.write(episode)
os._exit(17)  # Killed: no close(), no flush, no finalizer.
"""


def killed_writer(
    server, name, num_episodes, max_rows, max_steps=500, buffer_bytes=32 << 20
):
    """A writer process that dies after `num_episodes` writes: what is left."""
    from ray.rllib.offline.episode_files.reader import read_episodes

    path = f"s3://episodes/{name}"
    code = _KILLED_WRITER.format(
        path=path,
        fs_kwargs=server.filesystem_kwargs(),
        num_episodes=num_episodes,
        max_rows=max_rows,
        max_steps=max_steps,
        buffer_bytes=buffer_bytes,
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True)
    if result.returncode != 17:
        sys.exit(f"the killed writer failed:\n{result.stderr.decode()[-3000:]}")
    objects = server.objects(name + "/")
    try:
        read_back = sum(1 for _ in read_episodes(path, filesystem=server.filesystem()))
    except FileNotFoundError:  # No file was committed.
        read_back = 0
    return {
        "episodes_written": num_episodes,
        "max_rows_per_file": max_rows,
        "objects": objects,
        "hidden_objects": [k for k, _ in objects if "/." in k],
        "unfinished_uploads": server.unfinished_uploads(name + "/"),
        "episodes_read_back": read_back,
    }


def s3_figures(args, env, episodes, steps):
    import msgpack_numpy as mnp
    import ray
    from ray.rllib.offline.episode_files.reader import read_episodes
    from ray.rllib.offline.episode_files.writer import write_episodes

    server = S3Server()
    fs = server.filesystem()
    figures = {}
    write_episodes(episodes[:4], "s3://episodes/warmup", filesystem=fs)
    for label, compression in [("fork EpisodeWriter", None), ("fork +zstd", "zstd")]:
        name = label.replace(" ", "_").replace("+", "")
        start = time.perf_counter()
        write_episodes(
            episodes,
            f"s3://episodes/{name}",
            filesystem=fs,
            observation_space=env.observation_space,
            action_space=env.action_space,
            compression=compression,
        )
        figures[label] = (time.perf_counter() - start, name)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    payloads = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes[:4]]
    ray.data.from_items(payloads).write_parquet(
        "episodes/warmup_snippet", filesystem=fs
    )
    start = time.perf_counter()
    payloads = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes]
    ray.data.from_items(payloads).write_parquet(
        "episodes/hand_rolled", filesystem=fs, compression="gzip"
    )
    figures["hand-rolled snippet"] = (time.perf_counter() - start, "hand_rolled")
    ray.shutdown()

    print(f"\nTo {server.endpoint} (S3 protocol, moto):")
    print(
        f"{'writer':<22}{'episodes/s':>12}{'objects':>9}{'bytes':>12}{'read back':>11}"
    )
    report = {"writers": {}}
    for label, (seconds, name) in figures.items():
        objects = server.objects(name + "/")
        read_back = sum(
            1 for _ in read_episodes(f"s3://episodes/{name}", filesystem=fs)
        )
        report["writers"][label] = {
            "episodes_per_s": len(episodes) / seconds,
            "env_steps_per_s": steps / seconds,
            "objects": len(objects),
            "bytes": sum(size for _, size in objects),
            "read_back": read_back,
        }
        print(
            f"{label:<22}{len(episodes) / seconds:>12,.0f}{len(objects):>9}"
            f"{sum(size for _, size in objects):>12,}{read_back:>11}"
        )

    print("\nA writer killed mid-file (os._exit after its last write):")
    report["killed"] = {
        # Files of 10 episodes: 2 committed, the third buffered (small).
        "small files": killed_writer(server, "killed_small", 25, 10, max_steps=60),
        # One file whose row groups (1 MiB each) pass pyarrow's 5 MiB part
        # size before the kill: its upload has started.
        "one large file": killed_writer(
            server, "killed_large", 1000, 100_000, buffer_bytes=1 << 20
        ),
    }
    for label, killed in report["killed"].items():
        print(
            f"  {label}: {killed['episodes_written']} episodes written, "
            f"{len(killed['objects'])} objects listed "
            f"({len(killed['hidden_objects'])} hidden), "
            f"{len(killed['unfinished_uploads'])} unfinished multipart uploads, "
            f"{killed['episodes_read_back']} episodes read back"
        )
    server.stop()
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-episodes", type=int, default=200)
    parser.add_argument("--max-steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="Also write the figures here.")
    parser.add_argument(
        "--s3", action="store_true", help="Write to a local S3-protocol server."
    )
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
    if args.s3:
        report = s3_figures(args, env, episodes, steps)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"episodes": len(episodes), **report}, f, indent=2)
        return
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
