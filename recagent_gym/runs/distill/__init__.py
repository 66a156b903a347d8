"""Distillation: collect the LLM users' page decisions through the session kernel, fit the distilled user model on
them (and on real choices), and measure its fidelity (``recagent-gym users collect|distill|fidelity``). The model
itself, as the env uses it, is :mod:`recagent_gym.users.distilled`."""
