"""GAE kernel throughput: the fork's vectorized `compute_value_targets` vs upstream.

Runs itself twice in subprocesses (upstream with `RLLIB_FORK_DISABLE=1`, then
the fork) on the same random batches and prints timesteps/s side by side,
whether the two sides' outputs are identical (SHA-256 of the float32 bytes),
plus a memory-bandwidth bound: the copy bandwidth this machine reaches,
divided by the 20 bytes a timestep must move at least (four float32 inputs
read, one float32 output written).

    python release/benchmarks/bench_gae_kernel.py
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

SIZES = (4_000, 100_000, 1_000_000)
BYTES_PER_TIMESTEP = 5 * 4


def make_batch(n, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=n).astype(np.float32)
    rewards = rng.normal(size=n).astype(np.float32)
    # Episode chunks of ~200 steps; half end terminated, half truncated.
    ends = rng.random(n) < 1 / 200
    terminateds = (ends & (rng.random(n) < 0.5)).astype(np.float32)
    truncateds = (ends & (terminateds == 0)).astype(np.float32)
    return values, rewards, terminateds, truncateds


def best_seconds(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(repeats):
    """Timesteps/s and output digest of the `compute_value_targets` this
    process sees."""
    from ray.rllib.utils.postprocessing.value_predictions import (
        compute_value_targets,
    )

    import rllib

    results = {"fork_active": rllib.is_active(), "numpy": {}, "sha256": {}}
    for n in SIZES:
        batch = make_batch(n)
        reps = repeats if n < 1_000_000 else max(3, repeats // 3)
        seconds = best_seconds(
            lambda batch=batch: compute_value_targets(*batch, 0.99, 0.95), reps
        )
        results["numpy"][n] = n / seconds
        targets = compute_value_targets(*batch, 0.99, 0.95)
        results["sha256"][n] = hashlib.sha256(targets.tobytes()).hexdigest()
    return results


def copy_bandwidth():
    """Bytes/s of a large float32 copy (read + write) on this machine."""
    src = np.ones(25_000_000, dtype=np.float32)
    dst = np.empty_like(src)
    seconds = best_seconds(lambda: np.copyto(dst, src), 5)
    return 2 * src.nbytes / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.repeats)))
        return

    runs = {}
    for name, disable in (("upstream", "1"), ("fork", "0")):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--repeats", str(args.repeats)],
            env=dict(os.environ, RLLIB_FORK_DISABLE=disable),
            capture_output=True,
            text=True,
            check=True,
        )
        runs[name] = json.loads(out.stdout.strip().splitlines()[-1])
    assert not runs["upstream"]["fork_active"] and runs["fork"]["fork_active"]

    bound = copy_bandwidth() / BYTES_PER_TIMESTEP
    print(f"memory-bandwidth bound: {bound / 1e6:,.0f} M timesteps/s")
    header = (
        f"{'timesteps':>10} | {'upstream':>10} | {'fork':>10} "
        f"{'speedup':>8} {'of bound':>8} | {'identical':>9}"
    )
    print(header + "\n" + "-" * len(header) + "   (M timesteps/s)")
    for n in SIZES:
        key = str(n)
        up = runs["upstream"]["numpy"][key]
        fk = runs["fork"]["numpy"][key]
        same = runs["upstream"]["sha256"][key] == runs["fork"]["sha256"][key]
        print(
            f"{n:>10,} | {up / 1e6:>10.2f} | {fk / 1e6:>10.2f} {fk / up:>7.1f}x "
            f"{fk / bound:>7.1%} | {str(same):>9}"
        )


if __name__ == "__main__":
    main()
