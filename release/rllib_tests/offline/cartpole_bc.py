"""Learning test: BC on scripted-expert CartPole episodes reaches return 450.

python release/rllib_tests/offline/cartpole_bc.py [--max-iterations 20]
"""

from offline_learning import main

if __name__ == "__main__":
    main(algo="bc", observations="box", max_iterations=20)
