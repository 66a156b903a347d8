"""Policy runs: SB3 training with its callbacks, the held-out evaluation protocol (same users, restored states,
bootstrap intervals, the personalisation check), its tables, and the policy files (checked on load). The algorithms
themselves are :mod:`recagent_gym.policies`."""
