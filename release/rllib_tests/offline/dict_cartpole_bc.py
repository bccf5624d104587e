"""Learning test: BC on Dict-observation CartPole episodes reaches return 450.

The observation is `{"cart": [x, x_dot], "pole": [theta, theta_dot]}`, encoded
per key by the example's `DictObsModule`; no flattening.

    python release/rllib_tests/offline/dict_cartpole_bc.py [--max-iterations 20]
"""

from offline_learning import main

if __name__ == "__main__":
    main(
        algo="bc",
        observations="dict",
        max_iterations=20,
        num_episodes=20,
        lr=0.01,
        batch_size=512,
    )
