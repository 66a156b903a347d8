"""Distilled LLM users: the small user model the env runs (``user_model="distilled"``) and its saved form.
Collecting, fitting and checking it are runs (:mod:`recagent_gym.runs.distill`)."""
