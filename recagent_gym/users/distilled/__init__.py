"""Distilled LLM users: collect the LLM agents' page decisions, train a small user model on them, use it in the env
(``user_model="distilled"``) and check it against the LLM users (``recagent-gym users collect|distill|fidelity``)."""
