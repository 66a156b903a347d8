"""Recommender policies' algorithms: the item-scoring policy, SlateQ, LinUCB, the non-learning candidate baselines
and oracle. Training and evaluating them are runs (:mod:`recagent_gym.runs.policies`)."""
