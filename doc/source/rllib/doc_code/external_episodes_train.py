"""Loads recorded episodes and trains BC and MARWIL on them.

Part of the "Training from external experiences" page. First runs
`external_episodes_record.py` (the page's previous section) for data, then
writes files with the hand-rolled msgpack recipe, reads everything back, and
trains BC and MARWIL (on a GPU if there is one). Writes into the current
working directory. Takes about a minute on 2 CPUs.
"""

import os
import runpy

here = os.path.dirname(os.path.abspath(__file__))
recorded = runpy.run_path(
    os.path.join(here, "external_episodes_record.py"), run_name="__main__"
)
episodes = recorded["episodes"]  # The logged episodes of the previous section.

# __init_ray_begin__
import ray

ray.init(num_cpus=4, include_dashboard=False)
# __init_ray_end__

# __legacy_snippet_begin__
# The recipe from ray-project/ray#51747, as many users wrote it before an
# episode writer existed. Its files load and train as they are.
import msgpack_numpy as mnp
from ray import data


def save_experiences(episodes, filename):
    episodes = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes]
    episodes_ds = data.from_items(episodes)
    episodes_ds.write_parquet(filename, compression="gzip")


save_experiences(episodes, os.path.abspath("legacy-episodes"))
# __legacy_snippet_end__

# __read_begin__
from ray.rllib.offline.episode_files.reader import read_episodes, read_spaces

episodes_dir = os.path.abspath("cartpole-episodes")
legacy_dir = os.path.abspath("legacy-episodes")
observation_space, action_space = read_spaces(episodes_dir)
print(f"Recorded spaces: {observation_space}, {action_space}")

returns = [episode.get_return() for episode in read_episodes(episodes_dir)]
print(f"{len(returns)} episodes, mean return {sum(returns) / len(returns):.1f}")

# Files from the hand-rolled recipe carry no spaces, but read the same way.
legacy = list(read_episodes(legacy_dir))
print(f"{len(legacy)} legacy episodes, lengths {[len(e) for e in legacy]}")
# __read_end__

assert len(returns) == 20 and len(legacy) == 5
assert read_spaces(legacy_dir) == (None, None)

# __migrate_begin__
from ray.rllib.offline.episode_files.writer import write_episodes

# Optional: re-write old files to get the checks and the recorded spaces.
migrated_dir = os.path.abspath("migrated-episodes")
write_episodes(
    read_episodes(legacy_dir),
    migrated_dir,
    observation_space=observation_space,
    action_space=action_space,
)
print(f"Migrated spaces: {read_spaces(migrated_dir)}")
# __migrate_end__

assert read_spaces(migrated_dir) == (observation_space, action_space)

# __train_bc_begin__
from ray.data import ActorPoolStrategy
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import LEARNER_RESULTS

config = (
    BCConfig()
    # No env needed to train: the spaces the data was recorded with.
    .environment(observation_space=observation_space, action_space=action_space)
    .learners(num_learners=0)
    .training(train_batch_size_per_learner=256, lr=0.001)
    .offline_data(
        # Directories (or files), local or `s3://`, `gs://` URIs; episodes in
        # several formats can be mixed.
        input_=[episodes_dir, legacy_dir],
        input_read_episodes=True,
        # Episodes per Ray Data batch handed to the OfflinePreLearner.
        input_read_batch_size=4,
        # Learner updates per `train()` call.
        dataset_num_iters_per_learner=2,
        # One Ray Data actor decodes episodes (`compute=`; the `concurrency`
        # argument of `map_batches` is deprecated since Ray 2.51).
        map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
    )
)
algo = config.build_algo()
result = algo.train()
loss = result[LEARNER_RESULTS][DEFAULT_MODULE_ID]["total_loss"]
print(f"BC: loss after one iteration {float(loss):.3f}")
algo.stop()
# __train_bc_end__

# __train_marwil_gpu_begin__
import gc

import torch
from ray.rllib.algorithms.marwil import MARWILConfig

num_gpus = 1 if torch.cuda.is_available() else 0
config = (
    MARWILConfig()
    .environment(observation_space=observation_space, action_space=action_space)
    # One Learner on the driver; with `num_gpus_per_learner=1` it trains,
    # computes values and GAE on the GPU.
    .learners(num_learners=0, num_gpus_per_learner=num_gpus)
    .training(beta=1.0, train_batch_size_per_learner=256, lr=0.001)
    .offline_data(
        input_=[episodes_dir],
        input_read_episodes=True,
        input_read_batch_size=4,
        dataset_num_iters_per_learner=2,
        map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
    )
)
algo = config.build_algo()
for iteration in range(2):
    result = algo.train()
    vf_loss = result[LEARNER_RESULTS][DEFAULT_MODULE_ID]["vf_loss"]
    print(f"MARWIL iteration {iteration + 1}: value-function loss {vf_loss:.3f}")
results = algo.learner_group.foreach_learner(
    lambda learner: str(next(learner.module[DEFAULT_MODULE_ID].parameters()).device)
)
print(f"MARWIL learner device: {[r.get() for r in results]}")
algo.stop()

# Drop the algorithm (and Ray Data's iterators) before Ray goes down, or
# Python prints tracebacks from them at exit.
del algo
gc.collect()
ray.shutdown()
# __train_marwil_gpu_end__

print("external_episodes_train: OK")
