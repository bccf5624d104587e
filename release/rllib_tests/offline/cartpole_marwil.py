"""Learning test: MARWIL on scripted-expert CartPole episodes reaches return 450.

Uses a separate value network (`vf_share_layers=False`, set explicitly; RLlib's
default, which the fork keeps, shares the trunk).

    python release/rllib_tests/offline/cartpole_marwil.py [--max-iterations 20]
"""

from offline_learning import main

if __name__ == "__main__":
    main(algo="marwil", observations="box", max_iterations=20)
