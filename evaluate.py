"""Compare recommenders on the same seeded users (same as ``recagent-gym evaluate policies``).

    python evaluate.py --policy ppo=runs/quickstart/policy.zip --users 100
    python evaluate.py --user-model recsim          # the RecSim comparison of the baselines

All logic lives in :mod:`recagent_gym.runs.policies.evaluate_policies`; see ``--help`` for the arguments.
"""

from __future__ import annotations

import sys

from recagent_gym.runs.cli import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", "policies", *sys.argv[1:]]))
